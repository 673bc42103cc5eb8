"""Random small MDPs as PRISM text, with an independent numpy description for brute force."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTIONS = ("a", "b", "c")


@dataclass
class RandomMdp:
    """``T[s, a]`` is a distribution over successors (or None when the action is unavailable)."""

    n: int
    T: dict[tuple[int, int], np.ndarray]
    goal: np.ndarray  # (n,) bool
    avoid: np.ndarray  # (n,) bool
    reward: np.ndarray  # (n, |A|) state-action rewards

    def prism(self) -> str:
        lines = ["mdp", "module m", f"  s : [0..{self.n - 1}] init 0;"]
        for (s, a), dist in sorted(self.T.items()):
            succ = " + ".join(f"{float(p)!r} : (s'={t})" for t, p in enumerate(dist) if p > 0)
            lines.append(f"  [{ACTIONS[a]}] s={s} -> {succ};")
        lines.append("endmodule")
        lines.append('rewards "r"')
        for s, a in sorted(self.T):
            lines.append(f"  [{ACTIONS[a]}] s={s} : {float(self.reward[s, a])!r};")
        lines.append("endrewards")
        goal = " | ".join(f"s={s}" for s in np.flatnonzero(self.goal)) or "false"
        avoid = " | ".join(f"s={s}" for s in np.flatnonzero(self.avoid)) or "false"
        lines.append(f'label "goal" = {goal};')
        lines.append(f'label "avoid" = {avoid};')
        return "\n".join(lines) + "\n"

    def available(self) -> np.ndarray:
        out = np.zeros((self.n, len(ACTIONS)), dtype=bool)
        for s, a in self.T:
            out[s, a] = True
        return out


def random_mdp(rng: np.random.Generator, n: int = 8) -> RandomMdp:
    """An MDP on states 0..n-1: every state has 1-3 of the actions, each with 1-3 successors."""
    T = {}
    for s in range(n):
        acts = rng.choice(len(ACTIONS), size=rng.integers(1, len(ACTIONS) + 1), replace=False)
        for a in acts:
            k = int(rng.integers(1, 4))
            succ = rng.choice(n, size=k, replace=False)
            # probabilities with few decimals so the PRISM text is exact
            w = rng.integers(1, 10, size=k).astype(float)
            p = np.round(w / w.sum(), 3)
            p[-1] = round(1.0 - p[:-1].sum(), 3)
            if p[-1] <= 0:
                p = np.full(k, 1.0 / k)
                p = np.round(p, 6)
                p[-1] = 1.0 - p[:-1].sum()
            dist = np.zeros(n)
            dist[succ] = p
            T[(s, int(a))] = dist
    goal = np.zeros(n, dtype=bool)
    goal[rng.choice(np.arange(1, n), size=2, replace=False)] = True
    avoid = np.zeros(n, dtype=bool)
    avoid[rng.choice(np.flatnonzero(~goal & (np.arange(n) > 0)), size=1)] = True
    reward = np.round(rng.uniform(0, 3, size=(n, len(ACTIONS))), 2)
    return RandomMdp(n=n, T=T, goal=goal, avoid=avoid, reward=reward)


def policy_matrix(rng: np.random.Generator, n: int, temperature: float = 1.0) -> np.ndarray:
    """``(n, |A|)`` softmax of random logits: every action > 0."""
    z = rng.normal(0, 1.5, size=(n, len(ACTIONS))) / temperature
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def induced_matrix(mdp: RandomMdp, pi: np.ndarray, *, unavailable: str = "stall") -> tuple[np.ndarray, np.ndarray]:
    """Brute force: ``(n+1, n+1)`` chain with a stall sink at index n, and ``(n,)`` expected one-step reward."""
    n = mdp.n
    P = np.zeros((n + 1, n + 1))
    r = np.zeros(n)
    avail = mdp.available()
    for s in range(n):
        w = pi[s].copy()
        if unavailable == "renormalize":
            w = np.where(avail[s], w, 0.0)
            w = w / w.sum()
        for a in range(len(ACTIONS)):
            if avail[s, a]:
                P[s, :n] += w[a] * mdp.T[(s, a)]
                r[s] += w[a] * mdp.reward[s, a]
            else:
                P[s, n] += w[a]
    P[n, n] = 1.0
    return P, r


def reach_probability(P: np.ndarray, target: np.ndarray, *, allowed: np.ndarray | None = None) -> np.ndarray:
    """P(allowed U target) per state by graph precomputation + a dense linear solve."""
    m = len(P)
    allowed = np.ones(m, dtype=bool) if allowed is None else allowed
    # states that can reach target through allowed states
    can = target.copy()
    while True:
        new = can | (allowed & ((P[:, can] > 0).any(axis=1)))
        if (new == can).all():
            break
        can = new
    unknown = can & ~target
    x = np.zeros(m)
    x[target] = 1.0
    idx = np.flatnonzero(unknown)
    if len(idx):
        A = np.eye(len(idx)) - P[np.ix_(idx, idx)]
        b = P[np.ix_(idx, np.flatnonzero(target))].sum(axis=1)
        x[idx] = np.linalg.solve(A, b)
    return x


def bounded_reach(P: np.ndarray, target: np.ndarray, k: int, *, allowed: np.ndarray | None = None) -> np.ndarray:
    """P(allowed U<=k target) per state by k explicit steps."""
    allowed = np.ones(len(P), dtype=bool) if allowed is None else allowed
    x = target.astype(float)
    for _ in range(k):
        x = np.where(target, 1.0, np.where(allowed, P @ x, 0.0))
    return x
