"""The chain on disk partitioned across Ray actors (exact/partition.py): the local values, bit for bit, on a real
two-node Ray cluster on loopback (the fixture of tests/test_backends.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.backends import BackendOptions
from rlverify.errors import OptionError
from rlverify.models.property_parser import parse_property
from tests.exact.test_ondisk import _avoid
from tests.test_backends import NO_AUTH, loopback_cluster  # noqa: F401 (a fixture used by name)

pytest.importorskip("ray")


@pytest.mark.slow
@pytest.mark.parametrize("prop", ["P=? [F<=30 COLLISION=true]", "P=? [F<=0 COLLISION=true]", "P=? [!COLLISION U x=3]"])
def test_ray_partitions_equal_the_local_run(loopback_cluster, monkeypatch, tmp_path, prop):  # noqa: F811
    import ray

    for key, value in NO_AUTH.items():
        monkeypatch.setenv(key, value)
    model, policy = _avoid(3)
    p = parse_property(model, prop, fixed_policy=True)
    local = verify_exact(model, p, policy, ExactOptions(all_states=True, chain_dir=str(tmp_path / "local")))
    try:
        for parts in (1, 2, 3):
            options = ExactOptions(
                all_states=True,
                chain_dir=str(tmp_path / f"ray{parts}"),
                backend=BackendOptions(kind="ray", address=loopback_cluster),
                partitions=parts,
            )
            remote = verify_exact(model, p, policy, options)
            assert remote.value == local.value and (remote.lower, remote.upper) == (local.lower, local.upper)
            assert np.array_equal(remote.state_values, local.state_values)
            assert remote.settings["backend"]["kind"] == "ray"
    finally:
        ray.shutdown()


def test_ray_needs_a_chain_on_disk():
    with pytest.raises(OptionError, match=r"--backend ray partitions a chain on disk.*--chain-dir"):
        ExactOptions(backend=BackendOptions(kind="ray")).validate()


def test_cli_backend_ray_without_chain_dir(capsys, tmp_path):
    from rlverify.cli.main import main
    from tests.small_models import UP_STAY

    model = tmp_path / "m.prism"
    model.write_text(UP_STAY)
    policy = tmp_path / "p.py"
    policy.write_text(
        "import numpy as np\nFEATURES = ['x']\nACTIONS = ['up', 'stay']\n"
        "def pi(s):\n    return np.tile([0.9, 0.1], (len(s), 1))\n"
    )
    code = main(["verify", str(model), "-p", 'P=? [F<=3 "top"]', "--policy", f"{policy}:pi", "--backend", "ray"])
    out = capsys.readouterr()
    text = (out.out + out.err).strip()
    assert code == 2 and len(text.splitlines()) == 1 and "--chain-dir" in text, text
