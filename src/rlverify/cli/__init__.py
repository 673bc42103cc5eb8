"""The command-line interface: thin layers over the Python API."""
