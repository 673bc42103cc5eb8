"""Sound bounds on the action probabilities of a ReLU softmax policy over a polytope of states.

Two methods, cheapest first:

* **Interval bound propagation** with an exact first layer: pre-activations of layer 1 are bounded
  exactly over the polytope (support function), later layers by interval arithmetic. The
  *differences* of logits ``z_j - z_i`` are bounded through the last linear layer directly, which is
  tighter than subtracting two logit intervals.
* **Backward linear relaxation** (CROWN-style) of each ReLU, from the interval bounds, for the
  deeper layers' pre-activations and the logit differences.
* **MILP** (HiGHS, big-M from the propagated bounds): for each ordered pair of actions the minimum
  of ``z_j - z_i`` over the polytope. The solver's *dual bound* is used, so the result is sound even
  when the solver stops early.

Softmax combination from logit-difference intervals ``d_ij = z_j - z_i in [dl_ij, du_ij]``::

    p_i = 1 / (1 + sum_{j != i} exp(d_ij)),   so   1/(1 + sum exp(du_ij)) <= p_i <= 1/(1 + sum exp(dl_ij))

and with two actions this is exactly the logit-difference shortcut ``p_0 = sigmoid(z_0 - z_1)``.
The intervals are then intersected with ``1 - sum_{j != i} [L_j, U_j]``.

All bounds hold for the float64 evaluation of the network weights and are widened by
``LOGIT_MARGIN_ABS + LOGIT_MARGIN_REL * |d|`` so they also cover float32 inference (onnxruntime) and
solver tolerances.

The first two run on a whole batch of polytopes at once (:meth:`NetworkBounder.bounds_many`: one
stacked matrix product per layer for the batch); each polytope's bounds are bit for bit those it gets
alone, whatever else is in the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from rlverify.abstraction.domains import Polytope, cache_support_points
from rlverify.errors import PolicyError
from rlverify.policies.mlp import MLP

log = logging.getLogger(__name__)

LOGIT_MARGIN_ABS = 1e-4
LOGIT_MARGIN_REL = 1e-5


def fold_observation(mlp: MLP, obs_matrix: np.ndarray, obs_offset: np.ndarray) -> MLP:
    """The network as a function of the state: ``x -> mlp(O x + o)`` (first layer folded)."""
    w0 = mlp.weights[0] @ obs_matrix
    b0 = mlp.weights[0] @ obs_offset + mlp.biases[0]
    return MLP((w0, *mlp.weights[1:]), (b0, *mlp.biases[1:]))


@dataclass(frozen=True)
class ProbabilityBounds:
    """Sound lower/upper bounds ``(|A|,)`` on each action's probability over a polytope."""

    lower: np.ndarray
    upper: np.ndarray
    method: str  # "interval", "linear" (interval + linear relaxation) or "milp"

    @cached_property
    def spread(self) -> float:
        """Maximum probability spread ``max_a (upper - lower)`` (computed once)."""
        return float((self.upper - self.lower).max())


def _widen(dl: np.ndarray, du: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (dl - LOGIT_MARGIN_ABS - LOGIT_MARGIN_REL * np.abs(dl), du + LOGIT_MARGIN_ABS + LOGIT_MARGIN_REL * np.abs(du))


def probabilities_from_differences(dl: np.ndarray, du: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Probability bounds ``(..., |A|)`` from bounds ``(..., |A|, |A|)`` on ``d_ij = z_j - z_i`` (diagonal ignored)."""
    n = dl.shape[-1]
    off = ~np.eye(n, dtype=bool)

    # log(1 + sum_j exp(d_ij)) via logsumexp over [0, d_i1, ...]
    def lse(d: np.ndarray) -> np.ndarray:
        rows = np.where(off, d, -np.inf)
        full = np.concatenate([np.zeros((*d.shape[:-1], 1)), rows], axis=-1)
        m = full.max(axis=-1, keepdims=True)
        return (m + np.log(np.exp(full - m).sum(axis=-1, keepdims=True)))[..., 0]

    upper = np.exp(-lse(dl))
    lower = np.exp(-lse(du))
    # the true probabilities sum to one: intersect with 1 - sum of the others
    lower2 = np.maximum(lower, 1.0 - (upper.sum(axis=-1, keepdims=True) - upper))
    upper2 = np.minimum(upper, 1.0 - (lower.sum(axis=-1, keepdims=True) - lower))
    lower = np.clip(lower2, 0.0, 1.0)
    upper = np.clip(np.maximum(upper2, lower), 0.0, 1.0)
    return lower, upper


def _pad_bounds(lb: np.ndarray, ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pad = 1e-9 * (1 + np.abs(lb) + np.abs(ub))
    return lb - pad, ub + pad


class _Batch:
    """Polytopes bounded together, with their support points stacked for vectorised maxima (2-D polytopes with
    the same number of points form one stack: each polytope's maxima are bit for bit those of
    :meth:`Polytope.support`; other polytopes are asked one by one)."""

    def __init__(self, polys: Sequence[Polytope]) -> None:
        self.polys = list(polys)
        cache_support_points(self.polys)
        by_count: dict[int, list[int]] = {}
        self.others: list[int] = []
        for i, p in enumerate(self.polys):
            if p.template.n == 2:
                by_count.setdefault(len(p.support_points()), []).append(i)
            else:
                self.others.append(i)
        if 0 in by_count:
            raise PolicyError("cannot bound the network over an empty polytope")
        self.stacks = [(np.array(idx), np.stack([self.polys[i].support_points() for i in idx])) for idx in by_count.values()]

    def __len__(self) -> int:
        return len(self.polys)

    def points(self) -> np.ndarray:
        """A point ``(B, n)`` of each polytope (the mean of its support points in 2-D; else its interior point)."""
        out = np.empty((len(self.polys), self.polys[0].template.n)) if self.polys else np.empty((0, 0))
        for idx, pts in self.stacks:
            out[idx] = pts.mean(axis=1)
        for i in self.others:
            out[i] = self.polys[i].interior_point()
        return out

    def subset(self, rows: np.ndarray) -> _Batch:
        """The batch of the polytopes at ``rows`` (the stacks filtered, not rebuilt)."""
        pos = np.full(len(self.polys), -1)
        pos[rows] = np.arange(len(rows))
        sub = _Batch([])
        sub.polys = [self.polys[i] for i in rows]
        for idx, pts in self.stacks:
            keep = pos[idx] >= 0
            if keep.any():
                sub.stacks.append((pos[idx][keep], pts[keep]))
        sub.others = [int(pos[i]) for i in self.others if pos[i] >= 0]
        return sub

    def support(self, directions: np.ndarray) -> np.ndarray:
        """Maxima ``(B, k)`` of ``directions @ x`` over each polytope; ``directions``: ``(k, n)`` for all, or ``(B, k, n)``."""
        out = np.empty((len(self.polys), directions.shape[-2]))
        for idx, pts in self.stacks:
            d = directions.T if directions.ndim == 2 else np.swapaxes(directions[idx], 1, 2)
            out[idx] = (pts @ d).max(axis=1)
        for i in self.others:
            s = self.polys[i].support(directions if directions.ndim == 2 else directions[i])
            if s is None:
                raise PolicyError("cannot bound the network over an empty polytope")
            out[i] = s
        return out


class NetworkBounder:
    """Bounds a ReLU network over polytopes of states (weights as a function of the state).

    Args:
        mlp: the network over states (observation map already folded in, see :func:`fold_observation`).
        milp_time_limit: seconds per MILP (the dual bound is used when the limit is hit).
    """

    def __init__(self, mlp: MLP, *, milp_time_limit: float = 20.0) -> None:
        if len(mlp.weights) < 2:
            raise PolicyError("the abstraction engine needs at least one hidden ReLU layer")
        self.mlp = mlp
        self.n_actions = mlp.sizes[-1]
        self.milp_time_limit = milp_time_limit
        self.milp_calls = 0

    # ---------------------------------------------------------------- bound propagation
    # Every method below works on a batch of B polytopes at once: bounds are (B, width) arrays, and each
    # polytope's numbers come out bit for bit as they would alone (stacked matrix products multiply each
    # polytope's slice by itself; maxima over a polytope use its own cached support points).

    def _first_layer(self, polys: _Batch) -> tuple[np.ndarray, np.ndarray]:
        """Exact (padded) bounds ``(B, h)`` on the first layer's pre-activations over each polytope (support function)."""
        w0, b0 = self.mlp.weights[0], self.mlp.biases[0]
        s = polys.support(np.vstack([w0, -w0]))
        h = w0.shape[0]
        ub, lb = s[:, :h] + b0, -s[:, h:] + b0
        return _pad_bounds(lb, ub)

    def _preactivations(
        self, polys: _Batch, first: tuple[np.ndarray, np.ndarray], *, linear: bool
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Bounds ``(lb, ub)``, each ``(B, width)``, on the pre-activations of every hidden layer (sound, padded).

        Layer 1 (``first``) is exact over each polytope; deeper layers take the tighter of interval propagation
        and (if ``linear``) backward linear relaxation (CROWN-style) from the previous bounds.
        """
        lb, ub = first
        out = [(lb, ub)]
        for k, (w, bias) in enumerate(zip(self.mlp.weights[1:-1], self.mlp.biases[1:-1], strict=True), start=1):
            lo, hi = np.maximum(lb, 0.0)[:, :, None], np.maximum(ub, 0.0)[:, :, None]
            wp, wn = np.maximum(w, 0.0), np.minimum(w, 0.0)
            lb = (wp @ lo)[:, :, 0] + (wn @ hi)[:, :, 0] + bias
            ub = (wp @ hi)[:, :, 0] + (wn @ lo)[:, :, 0] + bias
            if linear:
                m = w.shape[0]
                eye = np.eye(m)
                lin = self._backward(np.vstack([eye, -eye]), k, out, polys)
                lb = np.maximum(lb, lin[:, :m])
                ub = np.minimum(ub, -lin[:, m:])
            lb, ub = _pad_bounds(lb, ub)
            out.append((lb, ub))
        return out

    def _backward(self, lam: np.ndarray, layer: int, pre: list[tuple[np.ndarray, np.ndarray]], polys: _Batch) -> np.ndarray:
        """Lower bounds ``(B, r)`` of ``lam @ z_layer`` (``lam``: ``(r, width)``; ``z_layer`` = pre-activations of
        hidden layer ``layer``, 0-based; ``layer == len(hidden)`` means the output) over each polytope.

        Backward linear relaxation of each ReLU (upper: chord; lower: ``alpha z`` with alpha 0 or 1).
        """
        lam = np.array(lam, dtype=np.float64)
        # lam is over z_layer = W_layer y_{layer-1} + b_layer (the same for every polytope so far)
        w, bias = self.mlp.weights[layer], self.mlp.biases[layer]
        const = np.zeros(len(lam)) + lam @ bias
        lam = lam @ w  # over y_{layer-1}
        lam_b = np.broadcast_to(lam, (len(polys), *lam.shape))
        const_b = np.broadcast_to(const, (len(polys), len(const)))
        for k in range(layer - 1, -1, -1):
            lb, ub = pre[k]
            active = lb >= 0
            dead = ub <= 0
            unstable = ~active & ~dead
            denom = np.where(unstable, ub - lb, 1.0)
            up_slope = np.where(active, 1.0, np.where(unstable, ub / denom, 0.0))
            up_icpt = np.where(unstable, -ub * lb / denom, 0.0)
            lo_slope = np.where(active, 1.0, np.where(unstable & (ub >= -lb), 1.0, 0.0))
            pos = lam_b >= 0
            slope = np.where(pos, lo_slope[:, None, :], up_slope[:, None, :])
            icpt = np.where(pos, 0.0, up_icpt[:, None, :])
            const_b = const_b + (lam_b * icpt).sum(axis=2)
            lam_b = lam_b * slope  # over z_k
            w, bias = self.mlp.weights[k], self.mlp.biases[k]
            const_b = const_b + lam_b @ bias
            lam_b = lam_b @ w  # over y_{k-1} (or x when k == 0)
        return const_b - polys.support(-lam_b)

    def _differences_crown(self, polys: _Batch, pre: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """Bounds ``(B, |A|, |A|)`` on ``z_j - z_i`` by backward linear relaxation over each polytope."""
        na = self.n_actions
        rows, cols = np.nonzero(~np.eye(na, dtype=bool))  # pairs (i, j), i != j, in row-major order
        lam = np.zeros((len(rows), na))
        lam[np.arange(len(rows)), cols] += 1.0
        lam[np.arange(len(rows)), rows] -= 1.0
        low = self._backward(lam, len(self.mlp.weights) - 1, pre, polys)
        dl = np.full((len(polys), na, na), -np.inf)
        dl[:, rows, cols] = low
        dl[:, np.arange(na), np.arange(na)] = 0.0
        return dl, -np.swapaxes(dl, 1, 2)

    def _differences_ibp(self, pre: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """Bounds ``(B, |A|, |A|)`` on ``z_j - z_i`` through the last layer from the last hidden bounds."""
        lb, ub = pre[-1]
        lo, hi = np.maximum(lb, 0.0)[:, None, :, None], np.maximum(ub, 0.0)[:, None, :, None]
        w, b = self.mlp.weights[-1], self.mlp.biases[-1]
        dw = w[None, :, :] - w[:, None, :]  # [i, j] = w_j - w_i
        db = b[None, :] - b[:, None]
        dwp, dwn = np.maximum(dw, 0), np.minimum(dw, 0)
        dl = (dwp @ lo)[..., 0] + (dwn @ hi)[..., 0] + db
        du = (dwp @ hi)[..., 0] + (dwn @ lo)[..., 0] + db
        return dl, du

    def _linear(
        self, polys: _Batch, first: tuple[np.ndarray, np.ndarray]
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
        """Pre-activation bounds (interval and linear relaxation) and the tighter of both logit-difference bounds."""
        pre = self._preactivations(polys, first, linear=True)
        dl, du = self._differences_ibp(pre)
        cl, cu = self._differences_crown(polys, pre)
        return pre, np.maximum(dl, cl), np.minimum(du, cu)

    # ---------------------------------------------------------------- MILP
    def difference_bounds_milp(
        self, poly: Polytope, pre: list[tuple[np.ndarray, np.ndarray]], dl: np.ndarray, du: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Tighten ``dl`` (minima of ``z_j - z_i``) by MILP; ``du`` follows as ``du_ij = -dl_ji``."""
        import highspy  # lazy: highspy, start-up

        h, last_vars, is_mip = self._milp_model(poly, pre)
        w_out, b_out = self.mlp.weights[-1], self.mlp.biases[-1]
        idx = np.array(last_vars, dtype=np.int32)
        # a concrete point of the polytope: no sound lower bound can exceed its value
        z_ref = self.mlp(poly.interior_point()[None, :])[0]
        dl = dl.copy()
        na = self.n_actions
        for i in range(na):
            for j in range(na):
                if i == j:
                    continue
                cost = w_out[j] - w_out[i]
                h.changeColsCost(len(idx), idx, cost)
                h.run()
                self.milp_calls += 1
                status = h.getModelStatus()
                if status == highspy.HighsModelStatus.kInfeasible:
                    raise PolicyError("MILP over an empty polytope (internal error)")
                info = h.getInfo()
                if is_mip:
                    bound = info.mip_dual_bound
                elif status == highspy.HighsModelStatus.kOptimal:
                    bound = info.objective_function_value  # pure LP: all neurons stable
                else:
                    continue
                if not (np.isfinite(bound) and abs(bound) < 1e30):
                    continue
                value = bound + b_out[j] - b_out[i]
                if value > z_ref[j] - z_ref[i] + 1e-6 * (1 + abs(value)):
                    log.warning(
                        "MILP bound %.9g above a concrete value %.9g (status %s); ignored", value, z_ref[j] - z_ref[i], status
                    )
                    continue
                dl[i, j] = max(dl[i, j], value)
        du = np.minimum(du, -dl.T)
        return dl, du

    def _milp_model(self, poly: Polytope, pre: list[tuple[np.ndarray, np.ndarray]]) -> tuple[HighsModel, list[int], bool]:
        """The network over ``poly`` as a HiGHS model (big-M encoding of each unstable ReLU, ``pre`` its
        pre-activation bounds), the columns of the last hidden layer, and whether any column is integer."""
        import highspy  # lazy: highspy, start-up (only MILP bounds need it)

        inf = highspy.kHighsInf
        a_poly, b_poly = poly.constraints
        box_lo, box_hi = poly.box()
        n = poly.template.n
        model = _MilpRows(list(box_lo), list(box_hi), inf)
        for r in range(len(b_poly)):
            model.rows.append(({j: a_poly[r, j] for j in range(n) if a_poly[r, j] != 0.0}, -inf, b_poly[r]))
        prev = list(range(n))
        last_vars: list[int] = []
        for (lb, ub), w, bias in zip(pre, self.mlp.weights[:-1], self.mlp.biases[:-1], strict=True):
            cur = [model.relu(prev, w[i], float(bias[i]), lb[i], ub[i]) for i in range(len(bias))]
            prev = cur
            last_vars = cur
        return model.highs(float(self.milp_time_limit)), last_vars, any(model.integer)

    # ---------------------------------------------------------------- public
    def bounds(self, poly: Polytope, *, milp: bool, enough: float | None = None) -> ProbabilityBounds:
        """Sound probability bounds over ``poly``: interval propagation (exact first layer), then
        backward linear relaxation, then MILP if ``milp``.

        With ``enough`` (and not ``milp``), interval bounds whose spread is at most ``enough`` are
        returned at once (method ``"interval"``): ~5x cheaper where the policy barely varies.
        Without ``milp`` this is :meth:`bounds_many` of the one polytope.
        """
        if not milp:
            return self.bounds_many([poly], enough=enough)[0]
        batch = _Batch([poly])
        pre, dl, du = self._linear(batch, self._first_layer(batch))
        dl1, du1 = self.difference_bounds_milp(poly, [(lb[0], ub[0]) for lb, ub in pre], dl[0], du[0])
        lower, upper = self._probability_bounds(batch, dl1[None], du1[None], "milp")
        return ProbabilityBounds(lower[0], upper[0], "milp")

    def bounds_many(self, polys: Sequence[Polytope], *, enough: float | None = None) -> list[ProbabilityBounds]:
        """:meth:`bounds` (without MILP) of every polytope in ``polys``, one pass per layer for the whole batch.

        Each polytope's bounds are bit for bit those of :meth:`bounds` on it alone (whatever else is in the
        batch); two-dimensional polytopes get their support points enumerated once, for the batch at once
        (:func:`~rlverify.abstraction.domains.cache_support_points`).

        Returns:
            One :class:`ProbabilityBounds` per polytope, in order: ``"interval"`` where ``enough`` is given and
            the interval spread is at most ``enough``, else ``"linear"``.
        """
        out: list[ProbabilityBounds | None] = [None] * len(polys)
        if not polys:
            return []
        batch = _Batch(polys)
        first = self._first_layer(batch)
        rest = np.arange(len(polys))
        if enough is not None:
            pre = self._preactivations(batch, first, linear=False)
            lower, upper = self._probability_bounds(batch, *self._differences_ibp(pre), "interval")
            quick = (upper - lower).max(axis=1) <= enough
            for i in np.flatnonzero(quick):
                out[i] = ProbabilityBounds(lower[i], upper[i], "interval")
            rest = np.flatnonzero(~quick)
        if len(rest):
            sub = batch.subset(rest) if len(rest) < len(polys) else batch
            _, dl, du = self._linear(sub, (first[0][rest], first[1][rest]))
            lower, upper = self._probability_bounds(sub, dl, du, "linear")
            for r, i in enumerate(rest):
                out[i] = ProbabilityBounds(lower[r], upper[r], "linear")
        return out  # type: ignore[return-value]  # every entry set above

    def _probability_bounds(self, polys: _Batch, dl: np.ndarray, du: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
        """Probability bounds ``(B, |A|)`` from logit-difference bounds ``(B, |A|, |A|)``, widened, checked at a point."""
        dl = np.maximum(dl, -np.swapaxes(du, 1, 2))
        du = np.minimum(du, -np.swapaxes(dl, 1, 2))
        dl, du = _widen(dl, du)
        lower, upper = probabilities_from_differences(dl, du)
        # never silently continue with bounds that exclude a concrete value: that is a bug
        p_ref = self(polys.points())
        bad = (p_ref < lower - 1e-9).any(axis=1) | (p_ref > upper + 1e-9).any(axis=1) | (lower.sum(axis=1) > 1 + 1e-9)
        if bad.any():
            i = int(np.argmax(bad))
            raise RuntimeError(
                f"internal error: probability bounds [{lower[i]}, {upper[i]}] ({method}) exclude the "
                f"network's value {p_ref[i]} at a point of the polytope"
            )
        return lower, upper

    def __call__(self, states: np.ndarray) -> np.ndarray:
        """Probabilities ``(N, |A|)`` of states ``(N, n)`` (float64 softmax of the logits)."""
        z = self.mlp(states)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)


#: a HiGHS model (highspy's objects are untyped)
HighsModel = Any


class _MilpRows:
    """The columns (bounds, integrality) and rows ``(coefficients, lo, hi)`` of a MILP being built."""

    def __init__(self, cols_lo: list[float], cols_hi: list[float], inf: float) -> None:
        self.cols_lo, self.cols_hi, self.inf = cols_lo, cols_hi, inf
        self.integer = [False] * len(cols_lo)
        self.rows: list[tuple[dict[int, float], float, float]] = []

    def column(self, lo: float, hi: float, *, integer: bool = False) -> int:
        self.cols_lo.append(lo)
        self.cols_hi.append(hi)
        self.integer.append(integer)
        return len(self.cols_lo) - 1

    def relu(self, prev: list[int], w: np.ndarray, bias: float, lb: float, ub: float) -> int:
        """The column of ``y = relu(w . x + bias)`` over the columns ``prev`` with pre-activation bounds ``[lb, ub]``:
        zero when never active, an equality when always active, else the big-M encoding with a binary column."""
        y = self.column(0.0, float(max(ub, 0.0)))
        if ub <= 0.0:
            self.cols_hi[y] = 0.0
            return y
        lin = {prev[j]: -float(w[j]) for j in range(len(w)) if w[j] != 0.0}
        if lb >= 0.0:
            self.rows.append(({**lin, y: 1.0}, bias, bias))  # y = W x + b
            return y
        z = self.column(0.0, 1.0, integer=True)
        self.rows.append(({**lin, y: 1.0}, bias, self.inf))  # y >= W x + b
        self.rows.append(({**lin, y: 1.0, z: -float(lb)}, -self.inf, float(bias - lb)))  # y <= W x + b - lb (1 - z)
        self.rows.append(({y: 1.0, z: -float(ub)}, -self.inf, 0.0))  # y <= ub z
        return y

    def highs(self, time_limit: float) -> HighsModel:
        """The model passed to a quiet single-threaded HiGHS instance."""
        import highspy  # lazy: highspy, start-up

        h = quiet_highs()
        h.setOptionValue("threads", 1)
        h.setOptionValue("time_limit", time_limit)
        h.setOptionValue("mip_rel_gap", 1e-6)
        h.setOptionValue("mip_abs_gap", 1e-7)
        h.setOptionValue("primal_feasibility_tolerance", 1e-9)
        h.setOptionValue("mip_feasibility_tolerance", 1e-9)
        lp = highspy.HighsLp()
        lp.num_col_ = len(self.cols_lo)
        lp.num_row_ = len(self.rows)
        lp.col_cost_ = np.zeros(lp.num_col_)
        lp.col_lower_ = np.array(self.cols_lo)
        lp.col_upper_ = np.array(self.cols_hi)
        lp.row_lower_ = np.array([r[1] for r in self.rows])
        lp.row_upper_ = np.array([r[2] for r in self.rows])
        starts, index, value = [0], [], []
        for row, _, _ in self.rows:
            index += list(row)
            value += list(row.values())
            starts.append(len(index))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(value)
        kinds = highspy.HighsVarType
        lp.integrality_ = [kinds.kInteger if integer else kinds.kContinuous for integer in self.integer]
        h.passModel(lp)
        return h


def quiet_highs() -> HighsModel:
    """A HiGHS instance that prints nothing, not even its banner (to stdout, by native code).

    ``highspy.Highs()`` (1.8+) calls a HiGHS method in its constructor (it enables its Python callbacks), which
    prints the "Running HiGHS ..." banner before ``output_flag`` can be set; the banner then breaks a caller's
    stdout (``rlverify abstract --json``). The solver class underneath it (``highspy._core._Highs``: every method
    used here, no callbacks) takes ``output_flag=False`` before any other call; older highspy (whose ``Highs`` is
    that class) too.
    """
    import highspy  # lazy: highspy, start-up

    core = getattr(getattr(highspy, "_core", None), "_Highs", None)
    h = core() if core is not None else highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h
