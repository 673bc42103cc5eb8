"""Freeway (Gross & Spieker, 2024): a pixel abstraction of the Atari game.

The PRISM model is generated here (:func:`prism_source`); ``tests/benchmarks`` show it is the same
MDP as the reference encoding used in the paper's experiments (state-by-state and per action).

Pixel layout: a 7 x 5 image, pixel ``px(7*row + col)``; value 0 = the chicken, 1 = car, 2 = empty.
Rows 0-3 are lanes, row 4 the pavement where the chicken starts; the chicken stays in the middle
column 3, which cars never enter: each half-lane (columns 0-2 and 4-6) scrolls one cell per
step, rows 0-1 to the left and rows 2-3 to the right, and new cars enter at the upstream end. The
chicken is hit when the pixel next to it on the upstream side (col 4 for leftward rows, col 2 for
rightward rows) holds a car as it stays in or moves into that row.
"""

from __future__ import annotations

from rlverify.benchmarks.discrete import prism_built
from rlverify.benchmarks.registry import BenchmarkSpec, Built, EnvDefaults, register

ID = "freeway-v1"

WIDTH, HEIGHT = 7, 5
MIDDLE = 3
START_ROW = HEIGHT - 1  # the pavement
LANES = (0, 1, 2, 3)
LEFTWARD = {0: True, 1: True, 2: False, 3: False}
#: Lanes 0 and 2 draw their new cars from spawn variable A, lanes 1 and 3 from B.
SPAWN_GROUP = {0: "A", 1: "B", 2: "A", 3: "B"}
#: Joint distribution of (A, B): 1 = a car enters, 2 = no car.
SPAWN = ((0.5, 2, 2), (0.2, 1, 2), (0.2, 2, 1), (0.1, 1, 1))
CHICKEN, CAR, EMPTY = 0, 1, 2
ACTIONS = ("NOP", "UP", "DOWN")
#: Shipped reference policies (package-relative paths under ``benchmarks/data``).
POLICIES = {"reference": "policies/freeway_ppo.onnx"}

PROPERTIES = {
    "goal": 'P=? [F "goal"]',
    # P(mid U mid_-1) of the paper; this encoding reproduces its 272 states (see DOC and the tests)
    "mid-until-mid-1": "P=? [F px17=0]",
    # the formula of the paper's scripts; same value, but Storm 2.0 builds 608 states for it
    "mid-until-mid-1-nested": "P=? [ ((true U px24=0) U px17=0) ]",
    "fail": 'P=? [F "fail"]',
}

DOC = """Freeway: a chicken crossing four lanes of traffic; a PRISM pixel abstraction of the Atari game (Gross & Spieker 2024).

Description: a 7x5 image; the chicken stays in the middle column and moves between rows: from the
    pavement (row 4) across lanes 3, 2, 1 to lane 0 (the top), then `UP` once more wins. Each step
    the cars of every half-lane scroll one cell (lanes 0-1 to the left, lanes 2-3 to the right) and
    a new car enters lanes 0 and 2 with probability 0.3 and lanes 1 and 3 with probability 0.3
    (both at once 0.1). Staying in or moving into a lane whose upstream neighbour pixel holds a car
    is a collision: the episode ends (done, not won).
State: px0..px27 and px31 in [0..2] (0 chicken, 1 car, 2 empty; the pavement pixels px28..px34
    other than px31 never change, so Storm drops them), done, won (bool).
Actions: NOP, UP, DOWN. Reward model "reward": 1 for `UP` in the top row (crossing the road; as in the reference
    model also for `UP` in the absorbing won state).
Labels: "goal" = px3=0 (the chicken reached the top lane), "fail" = done & !won (hit by a car).
    Properties: goal `P=? [F "goal"]`; mid-until-mid-1 `P=? [F px17=0]`, the paper's
    P(mid U mid_-1): the scripts used `P=? [ ((true U px24=0) U px17=0) ]`, which has the same
    value on this model (every path reaches px17=0 straight from px24=0, so the nested until holds
    on a path exactly when it eventually reaches px17=0), but Storm 2.0 makes no state terminal
    for a nested until and builds 608 states; `F px17=0` makes the px17=0 states terminal and
    gives the paper's 272 states / 1,120 (stochastic) / 1,552 (monolithic) transitions, so it is
    the encoding the paper's Storm 1.7 build amounted to. mid-until-mid-1-nested is the scripts'
    formula; fail `P=? [F "fail"]`. Caveat: the paper's text describes this measurement as
    returning to the starting position after entering the street; neither its scripts' formula
    nor `F px17=0` says that (both say the chicken reaches lane 2). rlverify reproduces the
    experiment as run (formula, state and transition counts), not that description.
Initial states: every pixel 2 (empty road) except px31 = 0 (chicken on the pavement).
Reference results (all equal to the reference PRISM file, tests/benchmarks/test_prism_equivalence.py):
    goal: full MDP 496 states / 2,800 transitions, Pmin = 0, Pmax = 1; uniform random policy
    496 states / 2,080 transitions (the paper prints 2,000, its authors' log 2,080), value 0.0654.
    mid-until-mid-1: monolithic 272 / 1,552; uniform random policy 272 / 1,120, value 0.4993.
    Paper, Table 2 (its trained policy): goal 0.7 (deterministic 123 states / 340 transitions);
    mid U mid_-1 1.0 (deterministic 21 / 36).
    Reference policy "reference" (policies/freeway_ppo.onnx, 31-64-64-3 ReLU, logits): PPO
    (rlverify.training.discrete, seed 0, 1,007,616 steps, 64 envs, episodes of at most 100 steps,
    37 s on 2 shared cores). Training curve, last 10 % (19,667 episodes): mean return 0.877 =
    success rate (crossings) 0.877; the uniform random policy crosses in 0.027 of 100-step
    episodes. Verified: goal 0.8750 stochastic (496 / 2,080), 0.8750 deterministic (165 / 372);
    mid-until-mid-1 1.0 stochastic (272 / 1,120) and deterministic (21 / 36).
"""


def px(row: int, col: int) -> str:
    """Variable name of the pixel at ``(row, col)``."""
    return f"px{WIDTH * row + col}"


def _neighbour(row: int) -> str:
    """The pixel whose car hits the chicken in ``row`` (upstream neighbour of the middle column)."""
    if row == START_ROW:
        return px(row, MIDDLE - 1)  # pavement: never a car
    return px(row, MIDDLE + 1) if LEFTWARD[row] else px(row, MIDDLE - 1)


def _scroll(a: int, b: int) -> list[str]:
    """Updates scrolling every half-lane one cell, with new cars ``a`` (lanes 0, 2) and ``b`` (lanes 1, 3)."""
    new = {"A": a, "B": b}
    ups = []
    for row in LANES:
        for cols in ((0, 1, 2), (4, 5, 6)):
            order = cols if LEFTWARD[row] else cols[::-1]  # downstream first
            for src, dst in zip(order[1:], order[:-1], strict=True):
                ups.append(f"({px(row, dst)}'={px(row, src)})")
            ups.append(f"({px(row, order[-1])}'={new[SPAWN_GROUP[row]]})")
    return ups


def _step(chicken: list[str]) -> str:
    """The four traffic outcomes, each with the chicken's updates."""
    return " + ".join(f"{p} : " + " & ".join(_scroll(a, b) + chicken) for p, a, b in SPAWN)


def prism_source() -> str:
    """PRISM text of Freeway."""
    lines = [
        "// Freeway: a chicken crossing four lanes of traffic (generated by rlverify.benchmarks.freeway).",
        "mdp",
        "",
        f"formula TOP_MIDDLE_CELL = ({px(0, MIDDLE)}={CHICKEN});",
        "",
        "module freeway",
    ]
    for i in range(WIDTH * HEIGHT):
        init = CHICKEN if i == WIDTH * START_ROW + MIDDLE else EMPTY
        lines.append(f"  px{i} : [0..2] init {init};")
    lines += ["  done : bool init false;", "  won : bool init false;"]
    for action in ACTIONS:
        lines.append(f"  [{action}] done -> (done'=true);")
        for row in range(HEIGHT):
            here = f"!done & {px(row, MIDDLE)}={CHICKEN}"
            if action == "UP" and row == 0:
                lines.append(f"  [{action}] {here} -> (done'=true) & (won'=true);")
                continue
            target = {"NOP": row, "UP": row - 1, "DOWN": min(row + 1, START_ROW)}[action]
            chicken = [] if target == row else [f"({px(row, MIDDLE)}'={EMPTY})", f"({px(target, MIDDLE)}'={CHICKEN})"]
            hit = _neighbour(target)
            lines.append(f"  [{action}] {here} & {hit}!={CAR} -> {_step(chicken)};")
            lines.append(f"  [{action}] {here} & {hit}={CAR} -> (done'=true);")
    lines += [
        "endmodule",
        "",
        'rewards "reward"',
        "  [UP] TOP_MIDDLE_CELL : 1;",
        "endrewards",
        "",
        'label "goal" = TOP_MIDDLE_CELL;',
        'label "fail" = done & !won;',
        "",
    ]
    return "\n".join(lines)


def make() -> Built:
    """Freeway (no parameters)."""
    return prism_built(ID, prism_source(), POLICIES)


register(
    BenchmarkSpec(
        id=ID,
        kind="prism",
        entry_point=make,
        properties=PROPERTIES,
        policies=POLICIES,
        doc=DOC,
        env=EnvDefaults(reward="reward", terminal="done", max_episode_steps=100),
    )
)
