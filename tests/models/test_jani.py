"""JANI models in every engine: a hand-written multi-automaton MDP checked against numpy, every bundled PRISM
benchmark converted to JANI by Storm's own exporter checked against the PRISM original, the Gym bridge
observing locations, and refusals of what is not supported.

``weather.jani`` (tests/models/data): automaton ``agent`` (local ``p`` in 0..3, locations walk/done) and
automaton ``env`` (locations calm/windy/wrecked) synchronise on ``go`` and ``rest``; ``wrecked`` has a
silent self-loop. Labels are transient booleans (``goal`` at done, ``broken`` at wrecked); reward models
are transient reals (``steps``: 1 on every go/rest edge, an action reward; ``wet``: 1 in windy, a state
reward). Its ``properties`` section names ``reach`` (Pmax F goal), ``cost`` (Emin steps to goal|broken)
and ``soaked`` (Emax wet to goal|broken).
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from rlverify import ExactOptions, verify_exact
from rlverify.benchmarks import make
from rlverify.errors import ModelError, PolicyError, PropertyError
from rlverify.models.property_parser import parse_property
from rlverify.models.summary import policy_template, summarize
from rlverify.models.symbolic import load_model
from rlverify.policies import CallablePolicy
from rlverify.resolve import resolve
from rlverify.statistical import (
    SimulationOptions,
    StatisticalOptions,
    verify_statistical,
)

DATA = Path(__file__).parent / "data"
WEATHER = DATA / "weather.jani"
#: probability of go by the env's location code (calm, windy); wrecked has no decision
GO = (Fraction(4, 5), Fraction(3, 10))


def _weather_pi(x: np.ndarray) -> np.ndarray:
    """go/rest by location: rest only once done (features _loc_agent, _loc_env)."""
    agent, env = x[:, 0].astype(int), x[:, 1].astype(int)
    go = np.array([float(GO[e]) if e < 2 else 0.5 for e in env]) * (agent == 0)
    return np.stack([go, 1 - go], axis=1)


WEATHER_POLICY = CallablePolicy(_weather_pi, ["_loc_agent", "_loc_env"], ["go", "rest"], name="weather-pi")


def _weather_by_hand() -> dict[str, Fraction]:
    """reach, cost and soaked of the policy's chain, built here from the model's description and solved exactly.

    Transient states (walk, p, e) for p in 0..2 and e in calm/windy; the targets goal (done) and broken
    (wrecked, not done) absorb. go: agent p+1 (or done from p=2) w.p. 9/10 else stays; env calm->calm 7/10,
    windy 3/10; windy->calm 1/2, wrecked 1/2 (independently). rest: agent stays; env calm->calm; windy->calm
    3/5, windy 2/5. steps: 1 per step; wet: 1 per step taken from windy.
    """
    states = [(p, e) for p in range(3) for e in range(2)]
    index = {s: i for i, s in enumerate(states)}
    n = len(states)
    A = [[Fraction(0)] * n for _ in range(n)]
    to_goal = [Fraction(0)] * n
    env_go = {0: {0: Fraction(7, 10), 1: Fraction(3, 10)}, 1: {0: Fraction(1, 2), 2: Fraction(1, 2)}}
    env_rest = {0: {0: Fraction(1)}, 1: {0: Fraction(3, 5), 1: Fraction(2, 5)}}
    for (p, e), i in index.items():
        go = GO[e]
        agent_go = {("walk", p + 1) if p < 2 else ("done", 3): Fraction(9, 10), ("walk", p): Fraction(1, 10)}
        for (loc, q), pa in agent_go.items():
            for e2, pe in env_go[e].items():
                w = go * pa * pe
                if loc == "done":
                    to_goal[i] += w  # goal, whatever env does
                elif e2 != 2:
                    A[i][index[(q, e2)]] += w
        for e2, pe in env_rest[e].items():
            A[i][index[(p, e2)]] += (1 - go) * pe
    steps = [Fraction(1)] * n
    wet = [Fraction(int(e == 1)) for (_, e) in states]
    start = index[(0, 0)]
    return {"reach": _solve(A, to_goal)[start], "cost": _solve(A, steps)[start], "soaked": _solve(A, wet)[start]}


def _solve(A: list[list[Fraction]], b: list[Fraction]) -> list[Fraction]:
    """x = A x + b by Gauss-Jordan elimination over the rationals."""
    n = len(b)
    M = [[(Fraction(int(i == j)) - A[i][j]) for j in range(n)] + [b[i]] for i in range(n)]
    for c in range(n):
        r = next(r for r in range(c, n) if M[r][c] != 0)
        M[c], M[r] = M[r], M[c]
        M[c] = [x / M[c][c] for x in M[c]]
        for r in range(n):
            if r != c and M[r][c] != 0:
                M[r] = [x - M[r][c] * y for x, y in zip(M[r], M[c], strict=True)]
    return [M[i][n] for i in range(n)]


# --- the hand-written multi-automaton model ---------------------------------------------------------------


def test_weather_names_locations_local_variables_labels_and_rewards():
    m = load_model(WEATHER)
    # Storm's names, which its state valuations (hence the policy features) carry
    assert m.variables == ("_loc_agent", "_loc_env", "agent_p")
    assert m.locations == {"_loc_agent": ("walk", "done"), "_loc_env": ("calm", "windy", "wrecked")}
    assert m.labels == ("goal", "broken") and m.reward_models == ("steps", "wet")
    assert set(m.file_properties) == {"reach", "cost", "soaked"}
    summary, mdp = summarize(m)
    assert summary.features == list(m.variables)
    loc = {v["name"]: v for v in summary.variables}
    assert loc["_loc_env"]["type"] == "location" and loc["_loc_env"]["locations"] == ["calm", "windy", "wrecked"]
    assert (loc["_loc_env"]["low"], loc["_loc_env"]["high"], loc["_loc_env"]["init"]) == (0, 2, 0)
    # 3 agent positions x {calm, windy} walking, 3 wrecked while walking, done x 3 env locations
    assert (mdp.num_states, mdp.num_choices, mdp.num_transitions) == (12, 18, 40)
    # location codes in the valuations are positions in the file: wrecked (2) is exactly where "broken" holds
    env_col = mdp.variables.index("_loc_env")
    np.testing.assert_array_equal(mdp.valuations[:, env_col] == 2, mdp.labels["broken"])
    np.testing.assert_array_equal(mdp.valuations[:, mdp.variables.index("_loc_agent")] == 1, mdp.labels["goal"])


@pytest.mark.parametrize("name", ["reach", "cost", "soaked"])
def test_named_properties_of_weather_equal_the_exact_rational_solution(name):
    expected = _weather_by_hand()[name]
    t = resolve(str(WEATHER), property=name, policy=WEATHER_POLICY)
    r = verify_exact(t.model, t.property, t.policy, ExactOptions(numerics="sound", precision=1e-10))
    assert r.value == pytest.approx(float(expected), rel=1e-9)
    assert r.states == 12  # 6 walking, 3 wrecked while walking, done with each env location
    asked = {"reach": "Pmax", "cost": "Rmin", "soaked": "Rmax"}[name]
    assert t.property.optimality is None and t.property.name == name
    assert len(t.property.notes) == 1 and f"asks {asked}" in t.property.notes[0] and "fixed policy" in t.property.notes[0]
    assert t.property.notes[0] in r.warnings  # the result says how the named property was read
    # the Python API reads the name the same way as the front door, and says so too
    direct = verify_exact(str(WEATHER), name, t.policy, ExactOptions(numerics="sound", precision=1e-10))
    assert direct.value == r.value and t.property.notes[0] in direct.warnings


def test_named_pmax_keeps_its_meaning_over_all_schedulers():
    # monolithic (no policy): the name means what the file says; Pmax over all schedulers is 1 (rest when windy)
    t = resolve(str(WEATHER), property="reach", needs_policy=False)
    assert t.property.optimality == "max" and t.property.notes == ()
    r = verify_exact(t.model, t.property, None, ExactOptions(mode="monolithic"))
    assert r.pmax == pytest.approx(1.0, abs=1e-6)
    # a typed Pmax stays refused under a policy, as today
    t = resolve(str(WEATHER), property='Pmax=? [F "goal"]', policy=WEATHER_POLICY)
    with pytest.raises(PropertyError, match="--mode monolithic"):
        verify_exact(t.model, t.property, t.policy, ExactOptions())


def test_the_policy_sees_locations():
    # the same policy without the env's location cannot tell calm from windy: its value is another one
    blind = CallablePolicy(
        lambda x: np.tile([0.8, 0.2], (len(x), 1)) * (x[:, :1] == 0) + [0.0, 1.0] * (x[:, :1] == 1),
        ["_loc_agent"],
        ["go", "rest"],
        name="blind",
    )
    t = resolve(str(WEATHER), property="reach", policy=blind)
    seeing = verify_exact(t.model, t.property, WEATHER_POLICY).value
    assert verify_exact(t.model, t.property, blind).value != pytest.approx(seeing, abs=1e-3)
    # a local variable is named as Storm names it: 'p' of agent is agent_p
    with pytest.raises(PolicyError, match="agent_p"):
        verify_exact(t.model, t.property, CallablePolicy(lambda x: np.full((len(x), 2), 0.5), ["p"], ["go", "rest"]))


def _with_variable(tmp_path: Path, assigned: bool, initial: bool = True) -> Path:
    """weather.jani with one more global variable ``z`` in [0, 3], assigned by the agent's first edge or by none."""
    data = json.loads(WEATHER.read_text())
    z = {"name": "z", "type": {"kind": "bounded", "base": "int", "lower-bound": 0, "upper-bound": 3}}
    data["variables"] = [*data.get("variables", []), {**z, "initial-value": 0} if initial else z]
    if assigned:
        destination = data["automata"][0]["edges"][0]["destinations"][0]
        destination["assignments"] = [*destination.get("assignments", []), {"ref": "z", "value": 0}]
    path = tmp_path / f"weather-z-{int(assigned)}{int(initial)}.jani"
    path.write_text(json.dumps(data))
    return path


def test_a_variable_no_edge_assigns_is_no_feature_as_in_storms_states(tmp_path, capsys):
    """Storm's builder makes a never-assigned variable with an initial value a constant: its states do not carry it,
    so it is no feature (a policy naming it crashed in feature_matrix); an assigned one, or one without an initial
    value, stays one. The oracle is the variables of Storm's own states."""
    from rlverify.cli.main import main
    from rlverify.models.storm_build import build_explicit

    for assigned, initial, feature in [(False, True, False), (True, True, True), (False, False, True)]:
        model = load_model(_with_variable(tmp_path, assigned, initial))
        built, _ = build_explicit(model, None)
        assert ("z" in built.variables) is feature and ("z" in model.variables) is feature
        assert set(model.variables) <= set(built.variables)
    path = _with_variable(tmp_path, assigned=False)
    model = load_model(path)
    assert model.variables == ("_loc_agent", "_loc_env", "agent_p")
    summary, _ = summarize(model)
    assert [v["name"] for v in summary.variables] == list(model.variables) == summary.features
    # the value is weather's: z changes nothing
    expected = float(_weather_by_hand()["reach"])
    assert verify_exact(model, resolve(str(path), property="reach", policy=WEATHER_POLICY).property, WEATHER_POLICY).value == (
        pytest.approx(expected, rel=1e-9)
    )
    # a policy that names z is refused on one line, by verify and by simulate alike
    with_z = CallablePolicy(lambda x: np.full((len(x), 2), 0.5), [*model.variables, "z"], ["go", "rest"], name="with-z")
    with pytest.raises(PolicyError, match="feature 'z' is not a model variable") as err:
        verify_exact(model, "reach", with_z)
    assert "\n" not in str(err.value)
    policy_file = tmp_path / "with_z.py"
    policy_file.write_text(
        "import numpy as np\nFEATURES = ['_loc_agent', '_loc_env', 'agent_p', 'z']\nACTIONS = ['go', 'rest']\n"
        "def pi(x):\n    return np.full((len(x), 2), 0.5)\n"
    )
    for command in ("verify", "simulate"):
        assert main([command, str(path), "-p", "reach", "--policy", f"{policy_file}:pi", "-q"]) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and "'z'" in lines[0], lines


def test_simulate_weather_by_name_covers_the_exact_value():
    expected = float(_weather_by_hand()["reach"])
    t = resolve(str(WEATHER), property="reach", policy=WEATHER_POLICY)
    opts = StatisticalOptions(method="clopper-pearson", runs=4000, delta=1e-6, simulation=SimulationOptions(seed=7))
    r = verify_statistical(t.model, t.property, t.policy, opts)
    assert r.interval[0] <= expected <= r.interval[1]
    assert verify_statistical(t.model, t.property, t.policy, opts).estimate == r.estimate  # same seed, same result
    assert t.property.notes[0] in r.warnings  # the simulator says how the named Pmax was read, as verify does
    by_name = verify_statistical(load_model(WEATHER), "reach", t.policy, opts)  # the API reads the name alike
    assert by_name.estimate == r.estimate and t.property.notes[0] in by_name.warnings


def test_gym_bridge_observes_locations():
    from rlverify.gym import MDPEnv

    env = MDPEnv.from_model(str(WEATHER), reward="steps", terminal="goal")
    assert env.dynamics.features == ("_loc_agent", "_loc_env", "agent_p")
    obs, info = env.reset(seed=3)
    np.testing.assert_array_equal(obs, [0, 0, 0])
    rng = np.random.default_rng(0)
    seen_env_locations = set()
    for _ in range(300):
        action = int(rng.integers(2))
        obs, _, term, trunc, info = env.step(action)
        vals = env.dynamics.model.valuation_dict(info["state"])
        np.testing.assert_array_equal(obs, [vals["_loc_agent"], vals["_loc_env"], vals["agent_p"]])
        seen_env_locations.add(int(obs[1]))
        if term or trunc:
            obs, info = env.reset()
    assert seen_env_locations >= {0, 1}  # calm and windy both observed


def test_policy_template_documents_location_codes(tmp_path):
    summary, mdp = summarize(load_model(WEATHER))
    text = policy_template(tmp_path / "pol.py", summary, mdp).read_text()
    assert "# _loc_env: 0 = calm, 1 = windy, 2 = wrecked" in text
    assert "FEATURES = ['_loc_agent', '_loc_env', 'agent_p']" in text


def test_cli_verify_and_simulate_read_a_named_property_alike(capsys):
    from rlverify.cli.main import main

    policy = f"{DATA / 'weather_policy.py'}:pi"
    expected = float(_weather_by_hand()["reach"])
    assert main(["verify", str(WEATHER), "--property", "reach", "--policy", policy, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["result"]
    assert out["value"] == pytest.approx(expected, rel=1e-6) and out["property"] == 'P=? [F "goal"]'
    assert any("asks Pmax" in w for w in out["warnings"])
    assert (
        main(
            [
                "simulate",
                str(WEATHER),
                "--property",
                "reach",
                "--policy",
                policy,
                "--runs",
                "3000",
                "--delta",
                "1e-6",
                "--seed",
                "5",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)["result"]
    assert out["interval"][0] <= expected <= out["interval"][1]
    assert any("asks Pmax" in w for w in out["warnings"])


# --- bad input ---------------------------------------------------------------------------------------------


def test_unknown_property_name_lists_the_file_s_properties():
    with pytest.raises(PropertyError) as err:
        resolve(str(WEATHER), property="reahc", policy=WEATHER_POLICY)
    assert "did you mean 'reach'" in str(err.value).lower() and "'cost'" in str(err.value) and "'soaked'" in str(err.value)


def test_a_property_name_quoted_as_a_label_is_refused_saying_what_it_names():
    """``F "soaked"``: soaked is a property of the file, not a label; the message says how to check it."""
    with pytest.raises(PropertyError) as err:
        resolve(str(WEATHER), property='Pmax=? [F "soaked"]', policy=WEATHER_POLICY)
    assert 'unknown label "soaked"' in str(err.value)
    assert "'soaked' names one of the file's properties, not a label: give the property as soaked" in str(err.value)
    with pytest.raises(PropertyError) as err:  # a label that is no property name gets no such hint
        resolve(str(WEATHER), property='Pmax=? [F "wet"]', policy=WEATHER_POLICY)
    assert 'unknown label "wet"' in str(err.value) and "names one of the file's properties" not in str(err.value)


def _variant(tmp_path: Path, name: str, change) -> Path:
    data = json.loads(WEATHER.read_text())
    change(data)
    path = tmp_path / f"{name}.jani"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "what, change, expected",
    [
        ("pta", lambda d: d.update(type="pta"), "model type 'pta'"),
        ("ctmc", lambda d: d.update(type="ctmc"), "model type 'ctmc'"),
        (
            "clock",
            lambda d: d["automata"][0]["variables"].append({"name": "c", "type": "clock", "initial-value": 0}),
            "clock variable 'c' (automaton 'agent')",
        ),
        ("nondet", lambda d: d["features"].append("nondet-selection"), "feature 'nondet-selection'"),
        (
            "array",
            lambda d: d["automata"][1]["variables"].append(
                {"name": "a", "type": {"kind": "array", "base": "bool"}, "initial-value": {"op": "av", "elements": [False]}}
            ),
            "array variable 'a' (automaton 'env')",
        ),
    ],
)
def test_unsupported_jani_features_are_refused_naming_them(tmp_path, what, change, expected):
    path = _variant(tmp_path, what, change)
    with pytest.raises(ModelError) as err:
        load_model(path)
    assert expected in str(err.value) and str(path) in str(err.value)


def test_cli_exit_code_2_names_the_feature(tmp_path, capsys):
    from rlverify.cli.main import main

    path = _variant(
        tmp_path, "clock", lambda d: d["automata"][1]["variables"].append({"name": "t", "type": "clock", "initial-value": 0})
    )
    assert main(["verify", str(path), "--property", "reach", "--mode", "monolithic"]) == 2
    err = capsys.readouterr().err
    assert "clock variable 't'" in err and "Traceback" not in err


def test_partial_reward_accumulation_is_refused(tmp_path):
    def only_steps(d):
        d["properties"][2]["expression"]["values"]["accumulate"] = ["steps"]  # drops wet, a state (exit) reward

    path = _variant(tmp_path, "acc", only_steps)
    with pytest.raises(PropertyError, match="accumulates only"):
        parse_property(load_model(path), "soaked")


# --- PRISM benchmarks through Storm's own JANI export ------------------------------------------------------


def _storm_examples() -> Path:
    from stormpy.examples import files

    return Path(files.prism_mdp_slipgrid).parent


#: (PRISM model or (benchmark id, parameters), {property name: text}); registry benchmarks use their own
#: property names. crazy-climber (40,960 states, 3 properties) takes 10-20 s on two loaded cores: slow.
CONVERTED = [
    pytest.param((("avoid-v1", {"xMax": 2, "yMax": 2}), None), id="avoid-2x2"),
    pytest.param((("freeway-v1", {}), None), id="freeway"),
    pytest.param((("running-example-v1", {}), None), id="running-example"),
    pytest.param((("crazy-climber-v1", {}), None), id="crazy-climber", marks=pytest.mark.slow),
    pytest.param(("slipgrid.nm", {"goal": 'P=? [F "goal"]', "ten": "R=? [C<=10]"}), id="slipgrid"),
    pytest.param(("maze_2.nm", {"goal": 'P=? [F<=12 "goal"]', "cost": "R=? [C<=8]"}), id="maze"),
    pytest.param(("coin2-2.nm", {"agree": 'P=? [F "finished" & "agree"]', "steps": 'R{"steps"}=? [C<=30]'}), id="coin"),
]


def _mixing_policy(features, actions, seed=0) -> CallablePolicy:
    """Logits sin(x W + b), W, b fixed at random: a policy that uses every feature."""
    rng = np.random.default_rng(seed)
    W, b = rng.normal(size=(len(features), len(actions))), rng.normal(size=len(actions))
    return CallablePolicy(lambda x: 2 * np.sin(x @ W + b), list(features), list(actions), output="logits", name="mix")


def _export(model, properties: dict[str, str], path: Path) -> Path:
    """``model`` (a PRISM SymbolicModel) and its named properties as JANI, written by Storm's exporter."""
    import stormpy
    import stormpy.developer as dev
    from stormpy.developer import storage

    props = [
        dev.Property(n, stormpy.parse_properties(t, model.program)[0].get_raw_formula(), set()) for n, t in properties.items()
    ]
    jani, jani_props = model.program.to_jani(props, all_variables_global=True)
    storage.JsonExporter.to_file(jani, jani_props, str(path))
    return path


@pytest.fixture(scope="module", params=CONVERTED)
def converted(request, tmp_path_factory):
    source, texts = request.param
    if isinstance(source, tuple):
        bench = make(source[0], **source[1])
        prism = bench.load_model()
        texts = {n: bench.property(n)[0] for n in bench.properties}
    else:
        prism = load_model(_storm_examples() / source)
    path = _export(prism, texts, tmp_path_factory.mktemp("jani") / "converted.jani")
    return prism, load_model(path), texts


def test_converted_jani_equals_the_prism_original_exactly(converted):
    prism, jani, texts = converted
    assert jani.variables == prism.variables  # one location per module: no location feature
    summary, _ = summarize(prism)
    policy = _mixing_policy(prism.variables, summary.actions)
    assert set(jani.file_properties) == set(texts)
    for name, text in texts.items():
        want = verify_exact(prism, text, policy, ExactOptions(numerics="sound", precision=1e-10))
        got = verify_exact(
            jani,
            resolve(str(jani.path), property=name, policy=policy).property,
            policy,
            ExactOptions(numerics="sound", precision=1e-10),
        )
        assert got.value == pytest.approx(want.value, rel=1e-9, abs=1e-12), name
        assert (got.states, got.transitions) == (want.states, want.transitions), name


def test_converted_jani_simulates_as_the_prism_original(converted):
    prism, jani, texts = converted
    summary, _ = summarize(prism)
    policy = _mixing_policy(prism.variables, summary.actions)
    name, text = next((n, t) for n, t in texts.items() if t.lstrip().startswith("P"))
    opts = StatisticalOptions(
        method="clopper-pearson", runs=400, delta=1e-6, simulation=SimulationOptions(seed=11, max_steps=2000)
    )
    want = verify_statistical(prism, text, policy, opts)
    got = verify_statistical(jani, resolve(str(jani.path), property=name, policy=policy).property, policy, opts)
    exact = verify_exact(prism, text, policy).value
    assert got.interval[0] - 1e-9 <= exact <= got.interval[1] + 1e-9
    assert want.interval[0] - 1e-9 <= exact <= want.interval[1] + 1e-9
    # Storm builds the same states in the same order from both: same seed, same runs
    assert got.estimate == want.estimate


def test_bounds_and_initial_values_written_as_expressions_are_shown_evaluated():
    """consensus.2.jani writes counter's bound and initial value over the constant K ('?' before); its PRISM twin,
    read through Storm's PRISM program, is the oracle."""
    qvbs = Path(__file__).resolve().parents[1] / "data" / "qvbs" / "consensus"
    jani, _ = summarize(load_model(qvbs / "consensus.2.jani", "K=2"), build=False)
    prism, _ = summarize(load_model(qvbs / "consensus.2.prism", "K=2"), build=False)
    by_name = {v["name"]: (v["low"], v["high"], v["init"]) for v in prism.variables}
    assert {v["name"]: (v["low"], v["high"], v["init"]) for v in jani.variables} == by_name
    assert by_name["counter"] == (0, 12, 6)


def test_an_expected_steps_property_is_refused_saying_what_it_asks():
    """die.jani's 'Expected number of coin flips' (Emin of 1 accumulated over steps) was refused as a 'Tmin=?'
    formula the user never wrote, with 'expected a P or R operator'."""
    from stormpy.examples import files

    model = load_model(Path(files.jani_dtmc_die))
    with pytest.raises(PropertyError, match="asks for an expected number of steps") as err:
        parse_property(model, "Expected number of coin flips")
    assert "Expected number of coin flips" in str(err.value)
    assert parse_property(model, "Probability to throw a six").operator == "P"  # the file's others still read


def test_too_many_states_in_a_jani_model_does_not_suggest_a_prism_only_strategy():
    from rlverify.errors import ModelTooLargeError
    from rlverify.models.storm_build import build_explicit

    with pytest.raises(ModelTooLargeError, match="raise --max-states") as err:
        build_explicit(load_model(WEATHER), None, max_states=5)
    assert "--strategy" not in str(err.value)
