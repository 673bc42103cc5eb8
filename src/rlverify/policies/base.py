"""The one policy contract of rlverify.

A policy maps a batch of states, given as an ``(N, d)`` float array of features in the
order :attr:`Policy.features` declares (model variable names; booleans as 0/1), to an
``(N, |A|)`` float array of action probabilities over :attr:`Policy.actions` (PRISM/JANI
action labels). Rows must be distributions: entries in [0, 1], finite, summing to 1 within
:data:`ROW_SUM_TOLERANCE`.
"""

from __future__ import annotations

import abc
import contextlib
import numbers
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlverify.arrays import NARROW
from rlverify.choices import OutputKind
from rlverify.errors import PolicyError, RlverifyError, exception_text, safe_repr, type_name
from rlverify.models.userfile import Alarm, CodeTimeout
from rlverify.policies.mlp import MLP, cross_check_network, default_check_sample

#: Absolute tolerance on ``|sum(row) - 1|`` for a policy output row.
ROW_SUM_TOLERANCE = 1e-6


@runtime_checkable
class Policy(Protocol):
    """Anything with a name, named features, named actions and batched action probabilities.

    A policy is memoryless: the same features always give the same distribution, whatever was
    asked before (every engine relies on it: the exact engine queries each state once, the
    simulator decides a run that surely stands still at once). What a user passes in (an object
    of their own class, with or without a ``name``; a callable) becomes one by
    :func:`~rlverify.policies.as_policy`, once, at the door.
    """

    @property
    def name(self) -> str:
        """How results and messages name the policy (its file, its spec, or its class)."""
        ...

    @property
    def features(self) -> tuple[str, ...]: ...

    @property
    def actions(self) -> tuple[str, ...]: ...

    def action_probabilities(self, states: np.ndarray) -> np.ndarray:
        """Map ``(N, d)`` features to ``(N, |A|)`` probabilities (float64)."""
        ...


class BasePolicy(abc.ABC):
    """Base for adapters: validates input/output around the private hook :meth:`_probabilities` (abstract: a
    subclass without it cannot be made) and, for policies that are a network, :meth:`_read_network` and
    :meth:`_network_outputs`.

    Attributes:
        name: how messages name the policy (its file or spec).
        no_network: why this kind of policy has no network to read (a class attribute), or None for
            adapters that wrap a network (ONNX, TorchScript, SB3).
        training: how the policy was trained, as its file records it (ONNX ``rlverify.training``, a sidecar's
            ``benchmark``/``params``), or None.
        output: how the network's raw outputs become probabilities, or None for a policy that gives
            probabilities without declaring it (a table, a tree).
        maskable: whether it was trained under the model's action mask (MaskablePPO).
        threads: the threads its runtime computes with (network adapters), or None.
        metadata: what its file says besides the policy (ONNX ``metadata_props``, a tree's ``fitted``), or None.
    """

    no_network: str | None = "this policy exposes no network; give an ONNX or TorchScript ReLU network (file.onnx, module.pt)"
    #: dtype the hooks take the states in (float32 for runtimes that compute in float32: a float32 batch
    #: is then passed on without a copy; the values the network sees are the same either way).
    input_dtype: type = np.float64
    #: whether the hooks keep no reference to the states array once they return (the simulator then reuses one
    #: observation buffer); False for adapters of user code that may keep it.
    transient_input: bool = True
    #: whether the simulator may call the policy from two threads (one call at a time, but from either) and
    #: gains by it: its hooks keep no state between calls and release the GIL while the network evaluates, so
    #: the simulator's numpy work for some runs overlaps the evaluation for others
    #: (:attr:`~rlverify.statistical.SimulationOptions.threads`). False unless the adapter says so.
    concurrent: bool = False
    #: seconds one call of the policy's code or runtime may take (None: no limit; :func:`~rlverify.policies.load_policy`
    #: sets :data:`~rlverify.policies.settings.DEFAULT_POLICY_TIMEOUT` or its ``timeout``); see :func:`run_policy_code`.
    timeout: float | None = None
    #: whether the policy was loaded from a file the user gave (:func:`~rlverify.policies.load_policy`, the CLI):
    #: then what its code raises is reported as a :class:`PolicyError` and what it prints goes to stderr. An
    #: adapter built in Python around one's own function lets its exceptions through unchanged.
    from_file: bool = False
    training: dict[str, Any] | None = None
    output: OutputKind | None = None
    maskable: bool = False
    threads: int | None = None
    metadata: dict[str, Any] | None = None

    def __init__(self, features: Sequence[str], actions: Sequence[str], *, name: str = "policy") -> None:
        self._features = tuple(str(f) for f in features)
        self._actions = tuple(str(a) for a in actions)
        self._name = name
        self._mlp: MLP | None = None
        problems = []
        if not self._features:
            problems.append("no features declared")
        if not self._actions:
            problems.append("no actions declared")
        for kind, names in (("feature", self._features), ("action", self._actions)):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                problems.append(f"duplicate {kind} names: {', '.join(dup)}")
        if problems:
            raise PolicyError(f"{name}: invalid declaration", problems)

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    @property
    def features(self) -> tuple[str, ...]:
        return self._features

    @property
    def actions(self) -> tuple[str, ...]:
        return self._actions

    @abc.abstractmethod
    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        """Hook: the ``(N, |A|)`` probabilities for ``(N, d)`` states of :attr:`input_dtype` (checked by the caller)."""

    def _states(self, states: np.ndarray) -> np.ndarray:
        """``states`` as an ``(N, d)`` array of :attr:`input_dtype` (no copy if it is one), or a :class:`PolicyError`."""
        states = np.asarray(states)
        if states.dtype != self.input_dtype:
            states = np.asarray(states, dtype=np.float64).astype(self.input_dtype, copy=False)
        if states.ndim != 2 or states.shape[1] != len(self._features):
            raise PolicyError(
                f"{self.name}: expected states of shape (N, {len(self._features)}) for features "
                f"{list(self._features)}, got {states.shape}"
            )
        return states

    def action_probabilities(self, states: np.ndarray) -> np.ndarray:
        """Validated ``(N, |A|)`` float64 probabilities for ``(N, d)`` states (float64, or float32 for a network
        run in float32)."""
        states = self._states(states)
        if not len(states):  # nothing to ask (e.g. every run of a batch is in a forced state)
            return np.zeros((0, len(self._actions)))
        probs, valid = self._distribution(states)
        probs = numeric_output(probs, self.name)
        if not valid or probs.shape != (len(states), len(self._actions)):
            validate_probabilities(probs, len(states), len(self._actions), source=self.name)
        return probs

    def _run_code(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, a call into the policy's own code or runtime, under :attr:`timeout`; what it raises is
        reported as the policy's error (see :func:`run_policy_code`)."""
        if self.timeout is None and not self.from_file:
            return fn(*args)
        return run_policy_code(fn, *args, name=self.name, timeout=self.timeout, isolate=self.from_file)

    def _distribution(self, states: np.ndarray) -> tuple[np.ndarray, bool]:
        """Hook: :meth:`_probabilities`, and whether its rows are distributions by construction (a softmax or a
        one-hot of finite network outputs; then only their shape is checked). By default False: all is checked."""
        return self._probabilities(states), False

    @property
    def unwrapped(self) -> BasePolicy:
        """The policy at the bottom of any :class:`PolicyWrapper` s around it (itself if it wraps none)."""
        return self

    @property
    def greedy(self) -> bool:
        """Whether every row of :meth:`action_probabilities` is one-hot (a greedy policy over Q-values): sampling
        from it needs no random numbers."""
        return self.output == OutputKind.Q_VALUES

    def choose(self, states: np.ndarray, u: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The simulator's fused action choice for ``(N, d)`` states.

        Returns exactly what ``choose_actions(self.action_probabilities(states), u)`` (see
        :func:`rlverify.statistical.engine.choose_actions`) gives, and whether each chosen action has
        probability 1: ``(N,)`` int64 action columns and ``(N,)`` bool. ``u`` ``(N,)`` uniforms in [0, 1)
        sample from the distribution; None takes the argmax (first on ties). A greedy policy
        (:attr:`greedy`) ignores ``u``. Adapters of networks override it to skip building probabilities.

        Raises:
            PolicyError: as :meth:`action_probabilities`.
        """
        states = self._states(states)
        if not len(states):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        if self.greedy:
            cols = self._greedy_columns(states)
            if cols is not None:
                return cols, np.ones(len(cols), dtype=bool)
        probs = self.action_probabilities(states)
        return choose_columns(probs, None if self.greedy else u)

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        """Hook for greedy policies: the ``(N,)`` argmax columns for ``(N, d)`` states (N > 0) without building
        probabilities, or None (then :meth:`action_probabilities` is used, and checks the outputs)."""
        return None

    def network(self, sample: np.ndarray | None = None) -> MLP:
        """The policy's network as a ReLU :class:`~rlverify.policies.mlp.MLP` (what the abstraction engine bounds).

        The MLP maps ``(N, d)`` features (in :attr:`features` order) to the ``(N, |A|)`` outputs over
        :attr:`actions` that the policy's ``output`` names: ``logits`` (the policy is their softmax),
        ``probabilities`` or ``q-values`` (greedy). Its weights are an exact float64 copy of the
        file's, read once; on every call the MLP is cross-checked against the policy's own runtime
        (onnxruntime / torch) on ``sample`` (``(N, d)`` features; default
        :func:`~rlverify.policies.mlp.default_check_sample`).

        Raises:
            PolicyError: the policy has no readable network (a callable, a table: the message says why),
                a layer or operator that is not Linear/ReLU (named), sizes that do not fit the declared
                features/actions, or weights that do not reproduce the runtime's outputs.
        """
        mlp = self._mlp
        if mlp is None:  # read once
            mlp = self._read_network()
            problems = []
            if mlp.sizes[0] != len(self._features):
                problems.append(
                    f"the network takes {mlp.sizes[0]} inputs, the policy declares {len(self._features)} "
                    f"features {list(self._features)}"
                )
            if mlp.sizes[-1] != len(self._actions):
                problems.append(
                    f"the network has {mlp.sizes[-1]} outputs, the policy declares {len(self._actions)} "
                    f"actions {list(self._actions)}"
                )
            if problems:
                raise PolicyError(f"{self.name}: the network does not fit the policy's declaration", problems)
            self._mlp = mlp
        sample = default_check_sample(len(self._features)) if sample is None else np.asarray(sample, dtype=np.float64)
        if sample.ndim != 2 or sample.shape[1] != len(self._features):
            raise PolicyError(f"{self.name}: expected a check sample of shape (N, {len(self._features)}), got {sample.shape}")
        cross_check_network(
            mlp, sample, self._network_outputs(sample), output=self.output or OutputKind.PROBABILITIES, name=self.name
        )
        return mlp

    def _read_network(self) -> MLP:
        """Hook: the network's weights (read once by :meth:`network`); by default, why there is none."""
        raise PolicyError(f"{self.name}: {self.no_network}")

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:  # pragma: no cover - with _read_network
        """Hook: the runtime's raw ``(N, |A|)`` outputs (before ``output`` is applied) for ``(N, d)`` states."""
        raise NotImplementedError


class PolicyWrapper(BasePolicy):
    """A policy computed from another one, :attr:`policy` (in the spirit of Gymnasium's ``Wrapper``): a shield, fixed
    features. What the wrapper does not change is the wrapped policy's, read from it on each access (never copied):
    its name (unless the wrapper is given one), features and actions (unless given), how it was trained
    (:attr:`training`: what :func:`~rlverify.policies.loading.policy_warnings` compares with the target),
    :attr:`maskable`, :attr:`output`, :attr:`greedy`, :attr:`timeout`, :attr:`from_file`, :attr:`threads` and
    :attr:`metadata`. Setting one of them sets it on the wrapped policy. A subclass overrides what it changes.

    Args:
        policy: any :class:`Policy` (a bare protocol object forwards the base's defaults for what it lacks).
        features, actions: the wrapper's own names (None: the wrapped policy's).
        name: the wrapper's own name (None: the wrapped policy's).
    """

    #: the members read from the wrapped policy (what a wrapper does not change, unless it overrides one)
    FORWARDED = (
        "name",
        "features",
        "actions",
        "training",
        "maskable",
        "output",
        "greedy",
        "timeout",
        "from_file",
        "threads",
        "metadata",
    )

    def __init__(
        self,
        policy: Policy,
        *,
        features: Sequence[str] | None = None,
        actions: Sequence[str] | None = None,
        name: str | None = None,
    ) -> None:
        self.policy = policy
        self._own_features = features is not None
        self._own_actions = actions is not None
        super().__init__(
            policy.features if features is None else features,
            policy.actions if actions is None else actions,
            name=policy.name if name is None else name,
        )
        self._renamed = name is not None

    @property
    def unwrapped(self) -> BasePolicy:
        """The policy at the bottom of the wrappers (the one trained, loaded or given), e.g. to name it in a
        warning about how it was trained."""
        return self.policy.unwrapped if isinstance(self.policy, BasePolicy) else self

    def _wrapped(self, member: str, default: Any) -> Any:
        """The wrapped policy's ``member`` (``default``, the base's, for a protocol object without it)."""
        return getattr(self.policy, member, default)

    def _set_wrapped(self, member: str, value: object) -> None:
        """Set the wrapped policy's ``member`` (what the wrapper forwards is the wrapped policy's)."""
        setattr(self.policy, member, value)

    @property
    def name(self) -> str:
        """The wrapper's own name if it was given one, else the wrapped policy's."""
        return self._name if self._renamed else str(self.policy.name)

    @name.setter
    def name(self, value: str) -> None:
        self._name = value
        self._renamed = True

    @property
    def features(self) -> tuple[str, ...]:
        return self._features if self._own_features else tuple(self.policy.features)

    @property
    def actions(self) -> tuple[str, ...]:
        return self._actions if self._own_actions else tuple(self.policy.actions)

    @property
    def training(self) -> dict[str, Any] | None:
        return self._wrapped("training", None)

    @training.setter
    def training(self, value: dict[str, Any] | None) -> None:
        self._set_wrapped("training", value)

    @property
    def maskable(self) -> bool:
        return bool(self._wrapped("maskable", False))

    @maskable.setter
    def maskable(self, value: bool) -> None:
        self._set_wrapped("maskable", value)

    @property
    def output(self) -> OutputKind | None:
        return self._wrapped("output", None)

    @output.setter
    def output(self, value: OutputKind | None) -> None:
        self._set_wrapped("output", value)

    @property
    def greedy(self) -> bool:
        """Whether the wrapped policy is greedy (then so is this one, unless the wrapper changes its rows)."""
        return bool(self._wrapped("greedy", False))

    @property
    def timeout(self) -> float | None:
        return self._wrapped("timeout", None)

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        self._set_wrapped("timeout", value)

    @property
    def from_file(self) -> bool:
        return bool(self._wrapped("from_file", False))

    @from_file.setter
    def from_file(self, value: bool) -> None:
        self._set_wrapped("from_file", value)

    @property
    def threads(self) -> int | None:
        return self._wrapped("threads", None)

    @threads.setter
    def threads(self, value: int | None) -> None:
        self._set_wrapped("threads", value)

    @property
    def metadata(self) -> dict[str, Any] | None:
        return self._wrapped("metadata", None)

    @metadata.setter
    def metadata(self, value: dict[str, Any] | None) -> None:
        self._set_wrapped("metadata", value)


def choose_columns(probs: np.ndarray, u: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(N,)`` int64 column per row of ``probs`` ``(N, |A|)`` (argmax when ``u`` is None, first on ties; else
    sampled with uniforms ``u`` ``(N,)``: the first column whose cumulative sum exceeds ``u`` times the row's
    total, never one of probability 0), and ``(N,)`` bool: the column has probability 1."""
    if probs.ndim == 2 and 0 < probs.shape[1] < NARROW:
        return _choose_narrow(probs.T.copy(), u)
    if u is None:
        col = np.argmax(probs, axis=1)
    else:
        cum = np.cumsum(probs, axis=1)
        x = u * cum[:, -1]
        idx = (cum <= x[:, None]).sum(axis=1)
        last = probs.shape[1] - 1 - np.argmax(probs[:, ::-1] > 0, axis=1)  # guards against rounding at the top
        col = np.minimum(idx, last)
    return col, probs[np.arange(len(col)), col] >= 1.0


def _choose_narrow(pt: np.ndarray, u: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`choose_columns` for few columns, on ``pt`` ``(|A|, N)`` (the probabilities transposed, contiguous):
    the same columns, computed column by column (numpy's row reductions are slow on narrow rows)."""
    a, n = pt.shape
    if u is None:
        col = np.argmax(pt, axis=0)
    else:
        cum = np.empty_like(pt)  # the cumulative sums, sequential as np.cumsum's
        cum[0] = pt[0]
        for j in range(1, a):
            np.add(cum[j - 1], pt[j], out=cum[j])
        x = u * cum[-1]
        idx = np.zeros(n, dtype=np.int64)
        last = np.full(n, a - 1, dtype=np.int64)  # the last column of positive probability (guards the top)
        for j in range(a):
            idx += cum[j] <= x
            np.copyto(last, j, where=pt[j] > 0)
        col = np.minimum(idx, last)
    sure = np.zeros(n, dtype=bool)
    for j in range(a):
        sure |= (col == j) & (pt[j] >= 1.0)
    return col, sure


def validate_probabilities(probs: np.ndarray, n_states: int, n_actions: int, *, source: str) -> None:
    """Raise :class:`PolicyError` listing every way ``probs`` is not an ``(n_states, n_actions)`` distribution batch."""
    if probs.shape != (n_states, n_actions):
        raise PolicyError(f"{source}: output has shape {probs.shape}, expected ({n_states}, {n_actions}) = (states, actions)")
    if n_states == 0:
        return
    # fast sufficient check (a few passes, no per-row reductions): entries >= 0 (false for NaN) and every row
    # sum within half the tolerance (false for inf/NaN); anything else gets the exact check and its messages
    if probs.dtype == np.float64 and probs.min() >= 0.0:
        sums = probs @ np.ones(n_actions)
        sums -= 1.0
        if np.abs(sums, out=sums).max() <= 0.5 * ROW_SUM_TOLERANCE:
            return
    problems = []
    bad = ~np.isfinite(probs).all(axis=1)
    if bad.any():
        problems.append(f"{int(bad.sum())} rows contain NaN or inf (first row {int(np.argmax(bad))})")
    neg = (probs < 0).any(axis=1)
    if neg.any():
        problems.append(
            f"{int(neg.sum())} rows have negative entries (first row {int(np.argmax(neg))}, min {np.nanmin(probs):.3g})"
        )
    with np.errstate(invalid="ignore"):
        off = np.abs(probs.sum(axis=1) - 1.0) > ROW_SUM_TOLERANCE
    off &= ~bad
    if off.any():
        i = int(np.argmax(off))
        problems.append(
            f"{int(off.sum())} rows do not sum to 1 within {ROW_SUM_TOLERANCE:g} (first row {i} sums to {probs[i].sum():.9g})"
        )
    if problems:
        raise PolicyError(f"{source}: output is not a probability distribution per state", problems)


def numeric_output(out: Any, source: str) -> np.ndarray:
    """``out`` (a policy's raw output) as a float64 array, or a :class:`PolicyError` saying what it is instead.

    Only real numbers are converted: booleans, integers, floats, or an object array whose every entry is a real
    number. Complex numbers (numpy would drop their imaginary part), strings (numpy would parse ``"0.5"``),
    dates and other objects are refused, never converted."""
    if isinstance(out, np.ndarray) and out.dtype == np.float64:
        return out
    try:
        arr = np.asarray(out)
    except Exception as exc:  # a ragged list, an object whose __array__ raises: not numbers
        raise PolicyError(f"{source}: output is not an array of numbers ({type_name(out)}: {exception_text(exc)})") from None
    if arr.dtype.kind in "biuf":  # booleans, integers, floats (not timedelta64, a numpy integer subtype)
        return arr.astype(np.float64, copy=False)
    if np.issubdtype(arr.dtype, np.object_):
        return _object_output(arr, out, source)
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise PolicyError(
            f"{source}: output has complex numbers ({type_name(out)} of {arr.dtype}); a policy gives real "
            "probabilities, logits or Q-values (the imaginary parts are not dropped)"
        )
    what = next((text for dtype, text in _NOT_NUMBERS if np.issubdtype(arr.dtype, dtype)), None)
    raise PolicyError(
        f"{source}: output is not an array of numbers ({type_name(out)} of {arr.dtype}: {what or 'not numbers'})"
    )


#: What an output array of these dtypes holds instead of numbers, for messages.
_NOT_NUMBERS: tuple[tuple[type[np.generic], str], ...] = (
    (np.str_, "strings"),
    (np.bytes_, "bytes"),
    (np.datetime64, "dates"),
    (np.timedelta64, "time spans"),
    (np.void, "structured records"),
)


def _object_output(arr: np.ndarray, out: Any, source: str) -> np.ndarray:
    """An object array of real numbers as float64, or the :class:`PolicyError` naming an entry that is not one."""
    entries = arr.reshape(-1).tolist()
    bad = next((v for v in entries if not isinstance(v, numbers.Real)), None)
    if bad is None and all(isinstance(v, numbers.Real) for v in entries):
        try:
            return arr.astype(np.float64)
        except Exception as exc:  # a user's Real subclass whose __float__ fails
            raise PolicyError(f"{source}: output is not an array of numbers ({exception_text(exc)})") from None
    what = f"objects that are not real numbers, e.g. a {type_name(bad)}"
    raise PolicyError(f"{source}: output is not an array of numbers ({type_name(out)} of {arr.dtype}: {what})")


def run_policy_code(fn: Callable[..., Any], *args: Any, name: str, timeout: float | None, isolate: bool = True) -> Any:
    """Call ``fn(*args)`` — a policy's own code (a Python callable) or runtime (onnxruntime, torch) — and make its
    failures the policy's.

    * The call is stopped after ``timeout`` seconds (None: no limit) with a :class:`PolicyError` naming the policy
      and ``--policy-timeout``. The limit is a ``SIGALRM`` timer in the main thread: it interrupts Python code
      (loops, ``time.sleep``, waits), but a call that stays inside native code (one onnxruntime/torch kernel, a C
      extension) is stopped only when it returns to Python; calls from other threads (the simulator's second thread)
      are not limited.
    * With ``isolate`` (a policy loaded from the user's file): any exception it raises, and ``SystemExit``
      (``sys.exit`` in the user's code), becomes a :class:`PolicyError` naming the policy and the exception
      (rlverify's own errors pass through unchanged), and what it prints goes to stderr, so that ``--json``
      output on stdout stays clean. Without it, exceptions pass through unchanged.
    """
    alarm = Alarm(timeout)
    try:
        with alarm, contextlib.redirect_stdout(sys.stderr) if isolate else contextlib.nullcontext():
            out = fn(*args)
        if alarm.fired:  # the code caught the timeout and went on to return
            raise CodeTimeout
        return out
    except CodeTimeout:
        raise PolicyError(
            f"{name}: the policy did not return within {timeout:g} s; if it is just slow, raise the "
            "limit with --policy-timeout SECONDS (0: no limit)"
        ) from None
    except RlverifyError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's code or file: its failure (any kind) is bad input
        if not isolate:
            raise
        raise _as_policy_error(exc, name) from None


def _as_policy_error(exc: BaseException, name: str) -> PolicyError:
    """What the policy's code raised (or its ``sys.exit``), as the one-line :class:`PolicyError` naming it (see
    :func:`exception_text`: an exception whose message cannot be printed is still named)."""
    if isinstance(exc, SystemExit):
        return PolicyError(f"{name}: the policy called sys.exit({safe_repr(exc.code)}) while computing actions")
    return PolicyError(f"{name}: evaluating the policy failed: {exception_text(exc)}")
