"""The explicit dynamics core and its three adapters (induced chain, simulator, Gym bridge) held against
each other and against the random models' own description: availability, decision/forced/dead-end
states, refusals, induced-chain rows by brute force, and the samplers' frequencies."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from rlverify.errors import OptionError, PolicyError
from rlverify.exact.induced import choice_weights, decision_states, induced_chain
from rlverify.gym.dynamics import dynamics_from_explicit
from rlverify.models.dynamics import choice_table, fit
from rlverify.policies import CallablePolicy
from rlverify.statistical import SimulationOptions, StatisticalOptions, parse_path_property, simulate, verify_statistical
from rlverify.statistical.envs import ExplicitEnv
from tests.models.randexplicit import AGENT, MODEL_LABELS, RandomExplicit, random_explicit, with_choices

SEEDS = list(range(6))
#: the model as declared (the agent's 'z' is one of its actions; this build never offers it)
DECLARED = SimpleNamespace(variables=("s",), action_names=(*MODEL_LABELS, "z"))
#: |count - n p| beyond this many standard deviations (+1) is a false alarm with probability < 1e-8 per entry
Z = 6.0


def _random(seed: int) -> RandomExplicit:
    rng = np.random.default_rng(seed)
    return random_explicit(rng, n=int(rng.integers(6, 12)))


def _table_policy(pi: np.ndarray, actions=AGENT) -> CallablePolicy:
    return CallablePolicy(lambda x: pi[x[:, 0].astype(int)], ["s"], list(actions), name="table")


def _random_pi(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(1000 + seed)
    pi = rng.dirichlet(np.ones(len(AGENT)), size=n)
    pi[rng.random(pi.shape) < 0.25] = 0.0
    pi[pi.sum(axis=1) == 0, 0] = 1.0
    return pi / pi.sum(axis=1, keepdims=True)


def _expected(r: RandomExplicit) -> dict[str, np.ndarray]:
    kind = r.kind
    return {
        "decision": np.isin(kind, ["decision", "sink"]),
        "forced": np.isin(kind, ["forced", "dead"]),
        "dead_end": kind == "dead",
        "absorbing": np.isin(kind, ["dead", "sink"]),
        "available": r.available(AGENT) & np.isin(kind, ["decision", "sink"])[:, None],
    }


@pytest.mark.parametrize("seed", SEEDS)
def test_core_matches_the_construction(seed):
    r = _random(seed)
    m, exp = r.model, _expected(r)
    table = choice_table(m, AGENT)
    S = m.num_states
    assert table.choice_of.dtype == np.int32 and table.choice_of.shape == (S, len(AGENT))
    np.testing.assert_array_equal(table.decision, exp["decision"])
    np.testing.assert_array_equal(table.forced >= 0, exp["forced"])
    np.testing.assert_array_equal(table.forced[exp["forced"]], m.row_groups[:-1][exp["forced"]])
    np.testing.assert_array_equal(table.dead_end, exp["dead_end"])
    np.testing.assert_array_equal(table.absorbing, exp["absorbing"])
    np.testing.assert_array_equal(table.available(np.arange(S)), exp["available"])
    assert not table.available(np.arange(S))[:, AGENT.index("z")].any()  # in the agent's names, not in this model
    for (s, a), dist in r.T.items():
        if a in AGENT:
            c = table.choice_of[s, AGENT.index(a)]
            np.testing.assert_array_equal(m.transitions[c].toarray()[0], dist)


@pytest.mark.parametrize("seed", SEEDS)
def test_cumulative_and_sampler_are_the_inverse_cdf_of_each_row(seed):
    m = _random(seed).model
    table = choice_table(m, AGENT)
    P = m.transitions
    for c in range(m.num_choices):  # exact per row: the same sums as numpy's sequential cumsum of the row
        row = slice(P.indptr[c], P.indptr[c + 1])
        np.testing.assert_array_equal(table.cumulative[row], np.cumsum(P.data[row]))
    rng = np.random.default_rng(seed)
    choices = rng.integers(m.num_choices, size=5000)
    u = rng.random(5000)
    u[:10] = 0.0
    u[10:20] = np.nextafter(1.0, 0.0)
    expected = []
    for c, x in zip(choices, u, strict=True):
        row = np.cumsum(P.data[P.indptr[c] : P.indptr[c + 1]])
        k = min(int(np.searchsorted(row, x * row[-1], side="right")), len(row) - 1)
        expected.append(P.indices[P.indptr[c] + k])
    np.testing.assert_array_equal(table.sample(choices, u), expected)
    loops = np.array(
        [P.indptr[c + 1] - P.indptr[c] == 1 and P.indices[P.indptr[c]] == s for c, s in enumerate(m.choice_states())]
    )
    np.testing.assert_array_equal(table.self_loop(np.arange(m.num_choices)), loops)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_three_adapters_see_the_same_model(seed):
    r = _random(seed)
    m, exp = r.model, _expected(r)
    S, all_states = m.num_states, np.arange(m.num_states)
    env = ExplicitEnv(m, actions=AGENT)
    dyn = dynamics_from_explicit(m, actions=AGENT, declared=DECLARED)
    pi = _random_pi(seed, S)
    policy = _table_policy(pi)
    states = decision_states(m)
    cw = choice_weights(m, policy, pi[states], states, mode="stochastic", unavailable="stall")

    # decision states: asked by all three, with the same available actions
    np.testing.assert_array_equal(states, np.flatnonzero(exp["decision"]))
    np.testing.assert_array_equal(env.forced(all_states), ~exp["decision"])
    np.testing.assert_array_equal(env.available(all_states), exp["available"])
    np.testing.assert_array_equal(dyn.available(states), exp["available"][states])
    np.testing.assert_allclose(cw.stalled[states], (pi * ~exp["available"]).sum(axis=1)[states], rtol=1e-12, atol=1e-15)
    # forced states: the verifier and the simulator do not ask; the Gym agent must act, any action takes the step
    moving = exp["forced"] & ~exp["dead_end"]
    assert dyn.available(np.flatnonzero(moving)).all()
    assert not dyn.available(np.flatnonzero(exp["dead_end"])).any()
    forced_choices = m.row_groups[:-1][exp["forced"]]
    np.testing.assert_array_equal(cw.weights[forced_choices], 1.0)
    # dead ends end episodes, absorbing states decide runs
    np.testing.assert_array_equal(dyn.dead_end, exp["dead_end"])
    np.testing.assert_array_equal(dyn.terminal, exp["dead_end"])
    np.testing.assert_array_equal(env.terminal(all_states), exp["absorbing"])


@pytest.mark.parametrize(
    ("labels", "needle"),
    [
        (("a", "a"), "{'s': 0} has 2 choices labelled 'a': a policy over action labels cannot tell them apart"),
        (("", ""), "{'s': 0} has 2 unlabelled choices: no agent action can choose between them"),
    ],
)
def test_every_adapter_refuses_with_the_same_error(labels, needle):
    model = with_choices(_random(0), 0, labels)
    policy = _table_policy(_random_pi(0, model.num_states))
    attempts = {
        "core": lambda: choice_table(model, AGENT),
        "exact": lambda: choice_weights(
            model,
            policy,
            policy.action_probabilities(model.valuations.astype(float)),
            np.arange(model.num_states),
            mode="stochastic",
            unavailable="stall",
        ),
        "simulator": lambda: ExplicitEnv(model, actions=AGENT),
        "gym": lambda: dynamics_from_explicit(model, actions=AGENT, declared=DECLARED),
    }
    messages = {}
    for name, attempt in attempts.items():
        with pytest.raises(PolicyError) as err:
            attempt()
        messages[name] = str(err.value)
    assert len(set(messages.values())) == 1, messages
    assert needle in messages["core"]


def test_two_choices_with_a_label_the_agent_lacks_are_not_its_concern():
    model = with_choices(_random(0), 0, ("d", "d", "a"))  # 'd' is not the agent's: never chosen, never ambiguous
    table = choice_table(model, AGENT)
    assert table.available(np.array([0]))[0].tolist() == [a == "a" for a in AGENT]
    ExplicitEnv(model, actions=AGENT)
    dynamics_from_explicit(model, actions=AGENT, declared=DECLARED)
    with pytest.raises(PolicyError, match="2 choices labelled 'd'"):
        ExplicitEnv(model)  # default actions: the model's labels, 'd' among them


def _brute_force_chain(r: RandomExplicit, pi: np.ndarray, mode: str, unavailable: str) -> np.ndarray | None:
    """``(S+1, S+1)`` sum_a w(a|s) T(s,a,.) with a stall sink at S; None when renormalising is impossible."""
    S = r.model.num_states
    avail = r.available(AGENT)
    P = np.zeros((S + 1, S + 1))
    P[S, S] = 1.0
    for s in range(S):
        if r.kind[s] in ("forced", "dead"):
            P[s, :S] = r.T[(s, "")]
            continue
        w = pi[s].copy()
        if mode == "deterministic":
            best = int(np.argmax(np.where(avail[s], w, -np.inf) if unavailable == "renormalize" else w))
            w = np.eye(len(AGENT))[best] * (w[best] > 0 or unavailable == "stall")
        if unavailable == "renormalize":
            if not (w * avail[s]).sum() > 0:
                return None
            w = w * avail[s] / (w * avail[s]).sum()
        for i, a in enumerate(AGENT):
            if avail[s, i]:
                P[s, :S] += w[i] * r.T[(s, a)]
            else:
                P[s, S] += w[i]
    return P


def _reachable(P: np.ndarray, start: int) -> np.ndarray:
    seen = np.zeros(len(P), dtype=bool)
    seen[start] = True
    while True:
        new = seen | (P[seen] > 0).any(axis=0)
        if (new == seen).all():
            return seen
        seen = new


@pytest.mark.parametrize("unavailable", ["stall", "renormalize"])
@pytest.mark.parametrize("mode", ["stochastic", "deterministic"])
@pytest.mark.parametrize("seed", SEEDS)
def test_induced_chain_rows_are_the_brute_force_mixture(seed, mode, unavailable):
    r = _random(seed)
    m = r.model
    pi = _random_pi(seed, m.num_states)
    policy = _table_policy(pi)
    states = decision_states(m)
    expected = _brute_force_chain(r, pi, mode, unavailable)
    if expected is None:
        with pytest.raises(PolicyError, match="all its mass on unavailable actions"):
            choice_weights(m, policy, pi[states], states, mode=mode, unavailable=unavailable)
        return
    cw = choice_weights(m, policy, pi[states], states, mode=mode, unavailable=unavailable)
    chain, origin = induced_chain(m, cw)
    S = m.num_states
    reach = _reachable(expected, 0)
    index = np.where(origin >= 0, origin, S)
    assert set(index) == set(np.flatnonzero(reach))  # the sink only where stalled mass is reachable
    np.testing.assert_allclose(chain.transitions.toarray(), expected[np.ix_(index, index)], rtol=1e-12, atol=1e-15)


def _within_binomial(counts: np.ndarray, p: np.ndarray, n: int) -> None:
    assert (counts[p == 0] == 0).all(), (counts, p)
    bound = Z * np.sqrt(n * p * (1 - p)) + 1
    assert (np.abs(counts - n * p) <= bound).all(), (counts / n, p)


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_samplers_follow_the_model_and_stall_alike(seed):
    """Successor frequencies of every (state, action) through the simulator (ExplicitEnv) and the Gym
    bridge (MDPDynamics.step) within 6 standard deviations of the model's probabilities; an unavailable
    action stalls every run in both."""
    r = _random(seed)
    m = r.model
    S, n = m.num_states, 4000
    env = ExplicitEnv(m, actions=AGENT)
    dyn = dynamics_from_explicit(m, actions=AGENT, declared=DECLARED)
    prop = parse_path_property('P=? [F<=1 "never"]', env.labels)  # decided after one step, in the successor
    record = tuple(f"is_{k}" for k in range(S))
    avail = r.available(AGENT)
    rng = np.random.default_rng(seed)
    for s in range(S):
        for i, a in enumerate(AGENT):
            forced = r.kind[s] in ("forced", "dead")
            if forced and i > 0:
                continue  # any action: the forced choice
            policy = _table_policy(np.tile(np.eye(len(AGENT))[i], (S, 1)))
            runs = simulate(
                env,
                policy,
                prop,
                np.arange(n),
                starts=np.array([s]),
                record=record,
                options=SimulationOptions(mode="deterministic", seed=seed),
            )
            nxt, _, stalled = dyn.step(np.full(n, s), np.full(n, i), rng)
            if not (forced or avail[s, i]):
                assert stalled.all(), (s, a)
                if r.kind[s] == "sink":  # absorbing: the simulator decides the run before asking the policy
                    assert not runs.stalled.any() and (runs.outcome == 0).all()
                else:
                    assert runs.stalled.all(), (s, a)
                continue
            assert not runs.stalled.any()
            p = r.T[(s, "" if forced else a)]
            successor = np.argmax(np.stack([runs.recorded[k] for k in record], axis=1), axis=1)
            _within_binomial(np.bincount(successor, minlength=S), p, n)
            if r.kind[s] == "dead":  # a dead end ends the episode: the Gym agent never acts there
                assert dyn.terminal[s]
                continue
            assert not stalled.any()
            _within_binomial(np.bincount(nxt, minlength=S), p, n)


def test_fit_names_what_is_missing():
    f = fit(["s", "t"], ["a", "z", ""], variables=("s",), model_actions=MODEL_LABELS)
    assert not f.ok and f.missing_features == ("t",) and f.missing_actions == ("z", "")
    assert f.problems()[0].startswith("feature 't' is not a model variable")
    assert f.problems(where="env")[1].startswith("action 'z' is not an action of env")
    assert fit(["s"], ["a", "d"], variables=("s",), model_actions=MODEL_LABELS).ok


# --- the simulator's --unavailable, against the exact engine -------------------------------------

# s=3 is forced (one unlabelled command); 'c' is offered only at the goal, which the property-directed
# build makes absorbing: the build has no 'c' at all, yet it is one of the model's (and the policy's) actions
UNAVAILABLE_MODEL = """mdp
module m
  s : [0..5] init 0;
  [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
  [b] s=0 -> (s'=3);
  [a] s=1 -> 0.7:(s'=1) + 0.3:(s'=5);
  [b] s=2 -> 0.6:(s'=4) + 0.4:(s'=0);
  []  s=3 -> 0.5:(s'=4) + 0.5:(s'=5);
  [c] s=4 -> true;
  [a] s=5 -> (s'=5);
endmodule
label "goal" = s=4;
"""


@pytest.fixture(scope="module")
def unavailable_model(tmp_path_factory):
    from rlverify.models import load_model

    path = tmp_path_factory.mktemp("m") / "unavailable.prism"
    path.write_text(UNAVAILABLE_MODEL)
    return load_model(path)


@pytest.mark.parametrize("unavailable", ["stall", "renormalize"])
@pytest.mark.parametrize("mode", ["stochastic", "deterministic"])
def test_simulation_interval_covers_the_exact_value(unavailable_model, mode, unavailable):
    from rlverify import ExactOptions, verify_exact

    policy = CallablePolicy(lambda x: np.tile([0.6, 0.3, 0.1], (len(x), 1)), ["s"], ["a", "b", "c"])
    prop = 'P=? [F "goal"]'
    exact = verify_exact(unavailable_model, prop, policy, ExactOptions(mode=mode, unavailable=unavailable))
    est = verify_statistical(
        unavailable_model,
        prop,
        policy,
        StatisticalOptions(
            method="clopper-pearson",
            runs=20_000,
            delta=0.001,
            simulation=SimulationOptions(mode=mode, unavailable=unavailable, seed=7, max_steps=500),
        ),
    )
    assert est.interval[0] <= exact.value <= est.interval[1], (est.interval, exact.value)
    if unavailable == "renormalize":
        assert est.stalled == 0 and exact.stalled_probability == 0.0
    else:
        assert est.stalled > 0 and exact.stalled_probability > 0
    assert est.undecided == 0


def test_all_mass_on_unavailable_actions_is_refused_alike(unavailable_model):
    from rlverify import ExactOptions, verify_exact

    only_c = CallablePolicy(lambda x: np.tile([0.0, 0.0, 1.0], (len(x), 1)), ["s"], ["a", "b", "c"])
    prop = 'P=? [F "goal"]'
    messages = []
    for run in (
        lambda: verify_exact(unavailable_model, prop, only_c, ExactOptions(unavailable="renormalize")),
        lambda: verify_statistical(
            unavailable_model,
            prop,
            only_c,
            StatisticalOptions(method="wilson", runs=100, simulation=SimulationOptions(unavailable="renormalize")),
        ),
    ):
        with pytest.raises(PolicyError) as err:
            run()
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "policy puts all its mass on unavailable actions in state {'s': 0}" in messages[0]


def test_bad_unavailable_option_names_the_flag():
    with pytest.raises(OptionError, match="--unavailable: expected one of stall, renormalize, got 'skip'"):
        SimulationOptions(unavailable="skip").validate()


def test_an_action_absent_from_the_build_is_unavailable_not_unknown(unavailable_model):
    from rlverify.models import build_explicit, parse_property
    from rlverify.statistical.engine import bind_policy

    mdp, _ = build_explicit(unavailable_model, [parse_property(unavailable_model, 'P=? [F "goal"]')])
    assert "c" not in mdp.action_names
    policy = CallablePolicy(lambda x: np.tile([0.5, 0.5, 0.0], (len(x), 1)), ["s"], ["a", "b", "c"])
    env = ExplicitEnv(mdp, actions=("a", "b", "c"))
    bind_policy(env, policy)
    assert not env.available(np.arange(mdp.num_states))[:, 2].any()
    with pytest.raises(PolicyError, match="action 'c' is not an action of"):
        bind_policy(ExplicitEnv(mdp), policy)  # the build's own labels lack it
