"""Crazy Climber (Gross & Spieker, 2024): a pixel abstraction of the Atari game.

The PRISM model is generated here (:func:`prism_source`); ``tests/benchmarks`` show it is the same
MDP as the reference encoding used in the paper's experiments (state-by-state and per action).

Pixel layout. Pixels ``px0..px21`` hold 0 (empty), 1 (player), 3 (falling object) or 4+
(collision). The player's row is ``px19 px20 px21`` (left, middle, right; the right column is the
window front). Falling pixels ``px0..px18`` scroll down by three each step (``px[i+3] <- px[i]``,
so ``px16``/``px17`` are the cells above ``px19``/``px20``) and pixels leaving the bottom vanish;
each step a new object appears in exactly one of ``px0``, ``px1``, ``px2`` or in none (1/4 each).
"""

from __future__ import annotations

from rlverify.benchmarks.discrete import prism_built
from rlverify.benchmarks.registry import BenchmarkSpec, Built, EnvDefaults, register

ID = "crazy-climber-v1"

FALLING = 19  # px0..px18 scroll
PLAYER = (19, 20, 21)  # left, middle, right (window)
ACTIONS = ("up", "left", "right", "tick")
OBJECT, PLAYER_PIXEL, COLLIDED = 3, 1, 4
#: Shipped reference policies (package-relative paths under ``benchmarks/data``).
POLICIES = {"reference": "policies/crazy_climber_ppo.onnx"}

PROPERTIES = {
    "collision": "P=? [F COLLISION=true]",
    "collision-20": "P=? [F<=20 COLLISION=true]",
    "levels": 'R{"reward"}=? [F COLLISION=true]',
}

DOC = """Crazy Climber: climb a wall while objects fall; a PRISM pixel abstraction of the Atari game (Gross & Spieker 2024).

Description: a 3-wide wall scrolls down by one row every step and a new object appears in one of
    the top pixels px0, px1, px2 or in none (probability 1/4 each). The player sits in the bottom
    row px19 (left), px20 (middle), px21 (right, the window front). Climbing `up` from the left or
    middle column into a falling object is a collision (pixel value 1 + 3 = 4); climbing up at the
    window is a collision too. Objects falling past the player without `up` vanish harmlessly.
State: px0..px18 in [0..4] (0 empty, 3 object), px19..px21 in [0..5] (0 empty, 1 player,
    >= 4 collision), done (bool). Formula COLLISION = px19 >= 4 | px20 >= 4 | px21 >= 4.
Actions: up, left, right, tick (stay). Reward model "reward": 1 per `up` without collision
    (one level climbed).
Labels: no PRISM labels; failure is the expression COLLISION=true. Properties: collision
    `P=? [F COLLISION=true]` (the paper's), collision-20 `P=? [F<=20 COLLISION=true]`,
    levels `R{"reward"}=? [F COLLISION=true]` (expected levels before a collision).
Initial states: all pixels 0 except px20 = 1 (player in the middle), done = false.
Reference results (property-directed build for `F COLLISION=true`, all equal to the reference
    PRISM file, tests/benchmarks/test_prism_equivalence.py): full MDP 40,960 states / 385,024
    transitions, Pmin = 0, Pmax = 1; uniform random policy 40,960 states / 270,336 transitions,
    value 1.0. Paper, Table 2: stochastic 40,960 / 270,336, 1.0; deterministic 8,192 / 32,768,
    0.0 (its trained policy); monolithic 40,960 / 385,024.
    Reference policy "reference" (policies/crazy_climber_ppo.onnx, 23-1024-1024-4 ReLU as in the
    paper's Table 1, float32 weights, 4.3 MB, logits): PPO (rlverify.training.discrete, seed 0,
    253,952 steps, 32 envs, lr 2e-4, rewards x 0.1 in training, episodes of at most 1,000 steps,
    237 s on 2 shared cores). Training curve, last 10 % (28 episodes): mean return 734.7 levels,
    success rate (no collision in 1,000 steps) 0.964; the uniform random policy climbs 3.1
    levels per episode. Verified: collision 0.0096 deterministic (20,356 states / 69,136
    transitions), 1.0 stochastic (40,960 / 270,336: every full-support policy eventually
    collides); collision-20 0.0098 stochastic (uniform random 0.8433).
"""


def _scroll(spawn: int | None) -> list[str]:
    """Updates scrolling the falling pixels down one row with a new object at ``spawn`` (or none)."""
    ups = [f"(px{i}'={OBJECT if i == spawn else 0})" for i in range(3)]
    ups += [f"(px{i + 3}'=px{i})" for i in range(FALLING - 3)]
    return ups


def _step(player_updates: list[str]) -> str:
    """The four equally likely scroll outcomes, each with ``player_updates``."""
    branches = []
    for spawn in (0, 1, 2, None):
        branches.append("0.25 : " + " & ".join(_scroll(spawn) + player_updates))
    return " + ".join(branches)


def _player_move(action: str, pos: int) -> list[str] | None:
    """Player updates for ``action`` at pixel ``pos``; None for climbing at the window (collision, no scroll)."""
    col = PLAYER.index(pos)
    if action == "up":
        if col == 2:
            return None
        return [f"(px{pos}'=px{pos}+px{pos - 3})"]  # px{pos-3} is the pixel above the player
    if action == "tick":
        return []
    new = col - 1 if action == "left" else col + 1
    if new < 0 or new > 2:
        return []  # at the border: stay
    return [f"(px{PLAYER[new]}'={PLAYER_PIXEL})", f"(px{pos}'=0)"]


def prism_source() -> str:
    """PRISM text of Crazy Climber."""
    lines = [
        "// Crazy Climber: a pixel abstraction of the Atari game (generated by rlverify.benchmarks.crazy_climber).",
        "mdp",
        "",
        "formula COLLISION = (" + " | ".join(f"px{p} >= {COLLIDED}" for p in PLAYER) + ");",
        "",
        "module game",
    ]
    lines += [f"  px{i} : [0..{COLLIDED}] init 0;" for i in range(FALLING)]
    lines += [f"  px{p} : [0..5] init {PLAYER_PIXEL if p == PLAYER[1] else 0};" for p in PLAYER]
    lines += ["  done : bool init false;"]
    for action in ACTIONS:
        for pos in PLAYER:
            guard = f"!COLLISION & !done & (px{pos}={PLAYER_PIXEL})"
            move = _player_move(action, pos)
            if move is None:
                lines.append(f"  [{action}] {guard} -> (px{pos}'={COLLIDED});")
            else:
                lines.append(f"  [{action}] {guard} -> {_step(move)};")
        lines.append(f"  [{action}] COLLISION & !done -> (done'=true);")
        lines.append(f"  [{action}] done -> true;")
    lines += ["endmodule", "", 'rewards "reward"', "  [up] !COLLISION & !done : 1;", "endrewards", ""]
    return "\n".join(lines)


def make() -> Built:
    """Crazy Climber (no parameters)."""
    return prism_built(ID, prism_source(), POLICIES)


register(
    BenchmarkSpec(
        id=ID,
        kind="prism",
        entry_point=make,
        properties=PROPERTIES,
        policies=POLICIES,
        doc=DOC,
        env=EnvDefaults(reward="reward", terminal="COLLISION=true", max_episode_steps=1000),
    )
)
