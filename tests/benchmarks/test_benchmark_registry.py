"""Every registered benchmark builds, documents itself and has properties that parse; bad input is refused."""

from __future__ import annotations

import pytest

from rlverify.benchmarks import BenchmarkError, all_ids, make, spec
from rlverify.benchmarks.registry import Benchmark
from rlverify.models import build_explicit, parse_property

SECTIONS = ("Description:", "State:", "Actions:", "Labels", "Initial states:", "Reference results")
IDS = all_ids()


def test_the_paper_benchmarks_are_registered():
    assert {"freeway-v1", "crazy-climber-v1", "avoid-v1"} <= set(IDS)


@pytest.mark.parametrize("bench_id", IDS)
def test_doc_has_every_section(bench_id):
    doc = spec(bench_id).doc
    missing = [s for s in SECTIONS if s not in doc]
    assert not missing, f"{bench_id}: doc lacks {missing}"


@pytest.mark.parametrize("bench_id", IDS)
def test_make_with_defaults_and_parameters_in_range(bench_id):
    s = spec(bench_id)
    for name, p in s.parameters.items():
        assert p.low is None or p.low <= p.default, name
        assert p.high is None or p.default <= p.high, name
    bench = make(bench_id)
    assert isinstance(bench, Benchmark) and (bench.id, bench.kind) == (bench_id, s.kind)  # one type for every kind
    assert dict(bench.properties) == dict(s.properties)
    assert all(path.is_file() for path in bench.policies.values())  # resolved to real files once


@pytest.mark.parametrize("bench_id", [i for i in IDS if spec(i).kind == "prism"])
def test_properties_parse(bench_id):
    bench = make(bench_id)
    model = bench.load_model()
    assert bench.properties, f"{bench_id} has no properties"
    for name, text in bench.properties.items():
        assert parse_property(model, text) is not None, name


def test_avoid_parameters_reach_the_model():
    model = make("avoid-v1", xMax=3, yMax=1, slickness=0.25).load_model()
    mdp, _ = build_explicit(model, None)
    x, y = mdp.variables.index("x"), mdp.variables.index("y")
    assert mdp.valuations[:, x].max() == 3 and mdp.valuations[:, y].max() == 1
    # from the start, "east" moves the agent with probability 0.75 (each obstacle walks with 1/4 per direction)
    s0 = int(mdp.initial_states[0])
    east = [c for c in range(mdp.row_groups[s0], mdp.row_groups[s0 + 1]) if mdp.action_names[mdp.choice_actions[c]] == "east"]
    row = mdp.transitions[east[0]]
    moved = mdp.valuations[row.indices, x] == 1
    assert row.data[moved].sum() == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"xMax": 0}, "xMax=0 out of range"),
        ({"yMax": 65}, "yMax=65 out of range"),
        ({"slickness": 1.5}, "slickness=1.5 out of range"),
        ({"slickness": -0.1}, "slickness=-0.1 out of range"),
        ({"xmax": 4}, "did you mean 'xMax'"),
        ({"xMax": 4.7}, "xMax=4.7 must be a whole number"),
        ({"slickness": True}, "slickness=True must be a number"),
        ({"slickness": "abc"}, "slickness='abc' must be a number"),
    ],
)
def test_avoid_bad_parameters(params, needle):
    with pytest.raises(BenchmarkError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        make("avoid-v1", **params)


def test_parameterless_benchmark_rejects_parameters():
    with pytest.raises(BenchmarkError, match="freeway-v1: unknown parameter 'xMax'"):
        make("freeway-v1", xMax=4)


@pytest.mark.parametrize(
    ("wrong", "right"), [("freway-v1", "freeway-v1"), ("avoid-v2", "avoid-v1"), ("crazy-climber", "crazy-climber-v1")]
)
def test_unknown_id_suggests_near_name(wrong, right):
    with pytest.raises(BenchmarkError, match=f"unknown benchmark '{wrong}'.*did you mean '{right}'"):
        make(wrong)
