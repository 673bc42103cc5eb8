"""The Gym bridge under a shield: ``action_masks()`` keeps the shield's actions (MaskablePPO trains under it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from rlverify.benchmarks import make
from rlverify.errors import EnvError
from rlverify.exact.shield import ShieldOptions, shield_policy
from rlverify.gym.env import MDPEnv, VectorMDPEnv
from rlverify.models import parse_property
from rlverify.policies.shielded import Shield

PROP = 'P>=0.9 [F<=3 "goal"]'


def _shield(threshold: float) -> Shield:
    b = make("running-example-v1")
    model = b.load_model()
    r = shield_policy(model, parse_property(model, PROP), b.load_policy(), ShieldOptions(threshold=threshold))
    return r.shield


def test_action_masks_keep_the_shields_actions_by_hand() -> None:
    """Running example, 3 steps left at x=1: Q(UP) = 0.2 Pmax_2(x=2) + 0.8 Pmax_2(x=3) = 1, Q(NOP) = Q(DOWN) =
    Pmax_2(x=1) = 0.2 * 0.8 + 0.8 = 0.96: threshold 0 keeps UP only, 0.05 keeps all three."""
    env = MDPEnv.from_model(make("running-example-v1").load_model(), reward_label="goal")
    env.reset(seed=0)
    names = list(env.action_names)
    assert env.action_masks().tolist() == [True] * len(names)
    env.use_shield(_shield(0.0))
    assert [names[i] for i in np.flatnonzero(env.action_masks())] == ["UP"]
    _, _, _, _, info = env.step(names.index("UP"))
    assert info["action_mask"].tolist() == env.action_masks().tolist()
    env.use_shield(_shield(0.05))
    env.reset(seed=0)
    assert env.action_masks().all()
    env.use_shield(None)
    assert env.action_masks().all()


def test_vector_env_masks_every_copy() -> None:
    venv = VectorMDPEnv.from_model(make("running-example-v1").load_model(), 4, reward_label="goal").use_shield(_shield(0.0))
    venv.reset(seed=1)
    masks = venv.action_masks()
    assert masks.shape == (4, len(venv.action_names))
    assert (masks[:, list(venv.action_names).index("UP")]).all() and masks.sum() == 4


def test_a_shield_for_another_model_is_refused() -> None:
    env = MDPEnv.from_benchmark("avoid-v1")
    with pytest.raises(EnvError, match=r"actions \['east', 'north', 'south', 'west'\] are not among the shield's"):
        env.use_shield(_shield(0.0))


@pytest.mark.slow
def test_the_shielded_training_example_runs(tmp_path: Path) -> None:
    """examples/train_avoid_shielded.py, shortened: both agents trained and verified; the shielded agent's value under
    the shield is what a separate verification with the shield file read back gives, and every value lies between
    the optimum (Pmin) and 1."""
    from rlverify.exact.verify import verify_exact
    from rlverify.policies.shielded import ShieldedPolicy, read_shield

    path = Path(__file__).resolve().parents[2] / "examples" / "train_avoid_shielded.py"
    spec = importlib.util.spec_from_file_location("train_avoid_shielded", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.run(steps=1_024, seed=0, out=tmp_path)
    plain, shielded = results["plain"], results["shielded"]
    assert results["optimum"] == pytest.approx(0.0929, abs=1e-4)
    for v in (plain["value"], shielded["value"], shielded["shielded_value"]):
        assert results["optimum"] - 1e-9 <= v <= 1.0
    model = make("avoid-v1").load_model()
    again = verify_exact(
        model,
        parse_property(model, example.PROPERTY),
        ShieldedPolicy(shielded["network"], read_shield(tmp_path / "shield.json")),
    )
    assert again.value == pytest.approx(shielded["shielded_value"], abs=1e-12)
