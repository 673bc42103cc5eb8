"""``--strategy onthefly`` asks the policy in batches and once per observation, and builds the chain ``full`` builds."""

from __future__ import annotations

import numpy as np
import pytest

from rlverify.benchmarks import make
from rlverify.exact import ExactOptions, policy_chain, verify_exact
from rlverify.policies.adapters import CallablePolicy
from tests.exact.resolved import parsed


class Counting:
    """A policy's calls recorded: the rows of each call."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[np.ndarray] = []

    def __call__(self, states: np.ndarray) -> np.ndarray:
        self.calls.append(np.array(states, copy=True))
        return np.asarray(self.inner(states), dtype=np.float64)

    def rows(self) -> list[tuple[float, ...]]:
        return [tuple(r) for call in self.calls for r in call]


def _random_policy(actions: list[str], seed: int):
    """A fixed random distribution per state: a function of the state only, whatever order it is asked in."""

    def fn(states: np.ndarray) -> np.ndarray:
        out = np.empty((len(states), len(actions)))
        for i, row in enumerate(states):
            out[i] = np.random.default_rng([seed, *(int(x) for x in row)]).dirichlet(np.ones(len(actions)))
        return out

    return fn


@pytest.mark.parametrize(
    "bench_id,params,prop",
    [
        ("running-example-v1", {}, 'P=? [F "goal"]'),
        ("avoid-v1", {"xMax": 2, "yMax": 2, "slickness": 0.1}, None),
    ],
)
@pytest.mark.parametrize("mode", ["stochastic", "deterministic"])
def test_onthefly_asks_each_observation_once_in_batches(bench_id, params, prop, mode, monkeypatch):
    import rlverify.exact.chain as chain_module

    bench = make(bench_id, **params)
    model = bench.load_model()
    text = prop or bench.properties["collision-100"]
    actions = [a for a in model.action_names if a]
    counting = Counting(_random_policy(actions, seed=5))
    policy = CallablePolicy(counting, model.variables, actions)
    plain = CallablePolicy(_random_policy(actions, seed=5), model.variables, actions)
    check = chain_module.check_policy

    def checked(*args, **kwargs):  # the fit check asks the policy at the initial state: not the strategy's calls
        check(*args, **kwargs)
        counting.calls.clear()

    monkeypatch.setattr(chain_module, "check_policy", checked)
    prop = parsed(model, text)
    chain = policy_chain(model, prop, policy, ExactOptions(mode=mode, strategy="onthefly"))
    rows = counting.rows()
    assert len(rows) == len(set(rows)), "an observation was asked twice"
    assert chain.policy_calls is not None and len(rows) >= chain.policy_calls >= chain.decision_states > 1
    assert len(counting.calls) < chain.policy_calls, "the observations were asked one at a time"
    # the same chain and value as Storm's build of the whole MDP (the policy asked there in one call)
    fly = verify_exact(model, prop, policy, ExactOptions(mode=mode, strategy="onthefly"), chain=chain)
    full = verify_exact(model, prop, plain, ExactOptions(mode=mode, strategy="full"))
    assert (fly.states, fly.transitions) == (full.states, full.transitions)
    assert fly.value == pytest.approx(full.value, rel=2e-6, abs=1e-12)  # both within the sound 1e-6
