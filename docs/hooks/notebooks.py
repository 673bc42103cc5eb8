"""MkDocs hook: each notebook in ``docs/notebooks/`` is also a page of the site, ``notebooks/NAME.md``.

The page is made at build time from the ``.ipynb`` itself (markdown cells as they are, code cells as Python
blocks), with a link to download the notebook: nothing is executed (no kernel, no network at build time; the
notebooks are stored without outputs and executed by ``tests/test_notebooks.py``), and the notebook stays the one
source. Only the standard library is used: a notebook is JSON (nbformat 4).
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from mkdocs.structure.files import File, Files

FOLDER = "notebooks/"


def _source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    return ("".join(src) if isinstance(src, list) else str(src)).strip("\n")


def notebook_markdown(text: str, filename: str) -> str:
    """The page for one notebook (its JSON ``text``): its cells in order, then where to get and how to run it."""
    nb = json.loads(text)
    parts: list[str] = []
    for cell in nb.get("cells", []):
        body = _source(cell)
        if not body:
            continue
        if cell.get("cell_type") == "markdown":
            parts.append(body)
        elif cell.get("cell_type") == "code":
            fence = "````" if "```" in body else "```"
            parts.append(f"{fence}python\n{body}\n{fence}")
    note = (
        f'!!! note "Run it"\n    This page is the notebook [`{filename}`]({filename}) as text: '
        "download it and run it in Jupyter "
        "(`pip install rlverify jupyter`) to see its output. "
        "The test suite executes it and checks the figures it prints (`tests/test_notebooks.py`)."
    )
    if parts and parts[0].startswith("# "):  # the title first, then the note
        title, _, rest = parts[0].partition("\n")
        parts[0:1] = [title, note] + ([rest.strip("\n")] if rest.strip() else [])
    else:
        parts.insert(0, note)
    return "\n\n".join(parts) + "\n"


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    for nb in [f for f in files if f.src_uri.startswith(FOLDER) and f.src_uri.endswith(".ipynb")]:
        page_uri = nb.src_uri[: -len(".ipynb")] + ".md"
        with open(nb.abs_src_path, encoding="utf-8") as fh:
            content = notebook_markdown(fh.read(), posixpath.basename(nb.src_uri))
        files.append(File.generated(config, page_uri, content=content))
    return files
