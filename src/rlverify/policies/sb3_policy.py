"""Stable-Baselines3 policies: PPO, A2C, DQN and sb3-contrib MaskablePPO models, as zips or objects in memory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.arrays import row_log_softmax, row_softmax
from rlverify.choices import OutputKind
from rlverify.errors import InputFileError, PolicyError, require
from rlverify.models.userfile import note_user_code
from rlverify.policies import sb3zip
from rlverify.policies.base import BasePolicy
from rlverify.policies.continuous import ACTIVATIONS, Actor, ActorPolicy, ContinuousKind, ContinuousPolicy, actions_of
from rlverify.policies.mlp import MLP, TORCH_SHAPE, mlp_from_torch
from rlverify.policies.outputs import greedy_columns, to_probabilities
from rlverify.policies.sb3zip import Space
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, check_threads
from rlverify.policies.torch_runtime import eval_mode, limit_blas_threads, limit_torch_threads

#: a Stable-Baselines3 model object (untyped: SB3 is an optional extra)
SB3Model = Any


class SB3Policy(BasePolicy):
    """A Stable-Baselines3 PPO/A2C or sb3-contrib MaskablePPO (action distribution) or DQN (greedy one-hot)
    model zip (read with numpy alone: a base install; SB3's loader and model objects need the extra ``sb3``).

    By default the zip is read without running any code from it (:mod:`rlverify.policies.sb3zip`: the JSON
    ``data`` and the ``policy.pth`` weights, parsed by the restricted reader :mod:`rlverify.policies.torch_file`)
    and the actor of an ``MlpPolicy`` is rebuilt from them and computed in numpy float32 (torch only for an
    activation numpy does not compute here, e.g. GELU); anything it cannot read that way (a custom policy class or
    feature extractor) is refused naming ``--trust-code``. With ``trust_code=True`` the zip is loaded with SB3's own
    loader, which unpickles and can run code (only for files you trust). Either way the zip's members'
    inflated sizes are checked first.

    Observations are given to the network as SB3 gives them: a ``Discrete`` observation space takes the
    one feature as a state index (one-hot encoded), ``MultiDiscrete`` one index per feature, a flat ``Box``
    or ``MultiBinary`` the features as float32. ``output`` is ``logits`` (PPO/A2C/MaskablePPO: the
    categorical distribution's) or ``q-values`` (DQN, greedy: the first maximal Q-value, as SB3's
    ``predict`` picks).

    MaskablePPO: the probabilities are the network's *unmasked* distribution; the mask it was trained
    with is the model's action availability, so ``unavailable='renormalize'`` (renormalise over the
    available actions) is exactly the masked policy (:attr:`maskable` is True). Recurrent policies
    (RecurrentPPO) are refused: rlverify verifies memoryless policies.

    Its :meth:`network` is the actor (``mlp_extractor.policy_net`` then ``action_net``) or the Q-network,
    for a ``MlpPolicy`` with a flat Box observation and ReLU activations
    (``policy_kwargs={"activation_fn": torch.nn.ReLU}``; PPO's default is Tanh).

    Making one computed by torch limits torch to ``threads`` threads (:func:`limit_torch_threads`: process-global).

    ``source``: the zip, or the model itself (a ``PPO``, ``A2C``, ``DQN`` or ``MaskablePPO`` object, e.g. one being
    trained; ``name`` names it in messages). A model object is read as SB3 computes: its own policy's
    ``get_distribution`` (PPO/A2C/MaskablePPO) or ``q_net`` (DQN) on its device, called at each evaluation, so a
    model still being trained is verified as it is at that moment; nothing is written to disk. A zip loaded with
    ``trust_code`` is loaded by SB3 and then taken as such a model object.
    """

    no_network = None
    output: OutputKind
    threads: int

    def __init__(
        self,
        source: str | Path | Any,
        features: Sequence[str],
        actions: Sequence[str],
        *,
        trust_code: bool = False,
        threads: int = DEFAULT_POLICY_THREADS,
        name: str | None = None,
    ) -> None:
        is_file = isinstance(source, (str, Path))
        super().__init__(features, actions, name=name or (str(source) if is_file else model_name(source)))
        self.threads = check_threads(threads, "threads")
        self.trusted = trust_code or not is_file
        if self.trusted:  # SB3's own torch code computes
            self._torch = require("torch", "sb3", purpose="a Stable-Baselines3 policy")
            limit_torch_threads(self._torch, self.threads)
        if not is_file:  # the user's own model object: SB3's code runs, as in their training
            self._adopt(source, sb3_algorithm(source), self.name)
        elif trust_code:
            sb3zip.check_sizes(Path(source))
            self._load_trusted(Path(source))
        else:
            path = Path(source)
            sb3zip.check_sizes(path)
            read = sb3zip.read_network(path)
            self.algorithm, self._space, self._n_actions = read.algorithm, read.obs, read.n_actions
            self._read = read
            self._forward = self._safe_forward
            if read.activation in ACTIVATIONS:  # numpy float32, as torch's Linear layers compute
                self._numpy = Actor(read.layers[:-1], read.activation, read.layers[-1], None, name=self.name)
                limit_blas_threads(self.threads)
            else:  # an activation only torch computes here
                purpose = f"a Stable-Baselines3 policy with {read.activation} activations (computed by torch)"
                self._torch = require("torch", "sb3", purpose=purpose)
                limit_torch_threads(self._torch, self.threads)
                self._net = torch_sequential(self._torch, read.layers, read.activation)
        self.maskable = self.algorithm == "MaskablePPO"
        self.output = OutputKind.Q_VALUES if self.algorithm == "DQN" else OutputKind.LOGITS
        self._check_spaces()

    #: the network in numpy (a zip read without running code), else None: torch computes
    _numpy: Actor | None = None
    #: what the zip's reader read (None for a model object or a zip loaded with SB3's loader)
    _read: sb3zip.SB3Network | None = None
    #: the torch module (None when numpy computes the zip's network)
    _torch: Any = None
    #: the network as a torch ``Sequential`` (an activation numpy does not compute), else None
    _net: Any = None

    def _load_trusted(self, path: Path) -> None:
        """Load with SB3's own loader (it unpickles ``data``: runs whatever code the file carries)."""
        data = sb3zip.read_data(path)
        module, _ = sb3zip.policy_class(data, path)
        known = module in sb3zip.SB3_POLICY_MODULES or module.startswith("sb3_contrib.common.recurrent")
        algorithm = sb3zip.algorithm_of(data, path)[0] if known else "custom"
        purpose = "loading a Stable-Baselines3 zip with --trust-code"
        sb3 = require("stable_baselines3", "sb3", purpose=purpose)
        if algorithm == "MaskablePPO":
            candidates = [require("sb3_contrib", "sb3", purpose=purpose).MaskablePPO]
        elif algorithm == "DQN":
            candidates = [sb3.DQN]
        else:  # PPO, A2C, or a custom policy class of one of them
            candidates = [sb3.PPO, sb3.A2C] + ([sb3.DQN] if algorithm == "custom" else [])
        note_user_code()  # SB3's loader unpickles the zip: the user's own classes may be imported
        last_exc: Exception | None = None
        for cls in candidates:
            try:
                model = cls.load(str(path), device="cpu")
                break
            except Exception as exc:  # SB3's load raises many kinds; PPO tried on an A2C zip: the next
                last_exc = exc
        else:
            raise InputFileError(
                f"{path}: cannot load the model with Stable-Baselines3's loader ({last_exc.__class__.__name__}: {last_exc})"
            )
        self._adopt(model, "MaskablePPO" if algorithm == "MaskablePPO" else type(model).__name__, str(path))

    def _adopt(self, model: Any, algorithm: str, where: str) -> None:
        """Take the SB3 model object ``model`` (of ``algorithm``) as this policy: its own policy computes."""
        self.algorithm = algorithm
        self._model = model
        self._space = sb3zip.space_of(model.observation_space, Path(where))
        act = model.action_space
        if type(act).__name__ != "Discrete" or int(getattr(act, "start", 0)) != 0:
            raise PolicyError(
                f"{where}: the action space is {act}, not Discrete(n) starting at 0 (rlverify verifies policies "
                "over named actions)"
            )
        self._n_actions = int(act.n)
        self._net = None
        self._forward = self._trusted_forward

    def _check_spaces(self) -> None:
        problems = []
        space = self._space
        if space.size != len(self.features):
            what = "one state index" if space.kind is Space.DISCRETE else f"{space.size} features"
            problems.append(f"the observation space is {space} ({what}), but the features declared are {list(self.features)}")
        if self._n_actions != len(self.actions):
            problems.append(
                f"the action space is Discrete({self._n_actions}), but the actions declared are {list(self.actions)}"
            )
        if problems:
            raise PolicyError(f"{self.name}: the {self.algorithm} model does not fit the declared features/actions", problems)

    def _check_observations(self, states: np.ndarray) -> None:
        """Refuse rows that are not observations of the policy's space (a Discrete/MultiDiscrete index out of range
        or not an integer; a MultiBinary value other than 0/1)."""
        space = self._space
        if space.kind is Space.BOX:
            return
        ints = np.rint(states)
        bad = np.abs(states - ints) > 1e-9
        match space.kind:
            case Space.DISCRETE:
                bad |= (ints < 0) | (ints >= space.n)
            case Space.MULTI_DISCRETE:
                bad |= (ints < 0) | (ints >= np.asarray(space.nvec))
            case _:
                bad |= (ints < 0) | (ints > 1)
        if bad.any():
            i = int(np.flatnonzero(bad.any(axis=1))[0])
            state = dict(zip(self.features, states[i].tolist(), strict=True))
            raise PolicyError(f"{self.name}: state {state} is not an observation of the policy's space {space}")

    def _safe_forward(self, states: np.ndarray) -> Any:
        """The rebuilt network's raw outputs (logits or Q-values), a float32 tensor (a float32 array when it is
        computed in numpy), for ``(N, d)`` observations."""
        x = sb3zip.encode(states, self._space)
        if self._numpy is not None:
            return self._numpy(x)[0]
        with self._torch.no_grad():
            return self._net(self._torch.from_numpy(x))

    def _trusted_forward(self, states: np.ndarray) -> Any:
        """SB3's own policy's raw outputs for ``(N, d)`` observations (SB3 encodes them itself)."""
        torch = self._torch
        policy = self._model.policy
        device = getattr(policy, "device", "cpu")
        if self._space.kind is Space.BOX:
            obs = torch.as_tensor(np.ascontiguousarray(states, dtype=np.float32), device=device)
        else:
            ints = torch.as_tensor(np.rint(states).astype(np.int64), device=device)
            obs = ints[:, 0] if self._space.kind is Space.DISCRETE else ints
        with torch.no_grad(), eval_mode(policy):
            if self.algorithm == "DQN":
                return policy.q_net(obs).cpu()
            # MaskablePPO: no mask given, the network's own (unmasked) distribution
            return policy.get_distribution(obs).distribution.logits.cpu()

    def _raw(self, states: np.ndarray) -> Any:
        """``(N, |A|)`` float32 tensor: logits normalised as torch's ``Categorical(logits=...)`` keeps them
        (PPO/A2C/MaskablePPO), or Q-values (DQN); computed under the policy timeout."""
        self._check_observations(states)

        def run() -> Any:
            out = self._forward(states)
            if isinstance(out, np.ndarray):
                return out if self.algorithm == "DQN" else log_softmax(out)
            if self.algorithm != "DQN":
                out = out - out.logsumexp(dim=-1, keepdim=True)
            return out.numpy()

        # the weights read from the zip computed in numpy run none of the user's code: no guard (~20 us a call)
        in_numpy = self._numpy is not None and self._forward == self._safe_forward
        out = run() if in_numpy else self._run_code(run)
        if not isinstance(out, np.ndarray) or out.shape != (len(states), len(self.actions)):
            raise PolicyError(
                f"{self.name}: the network gave outputs of shape {getattr(out, 'shape', None)}, expected "
                f"({len(states)}, {len(self.actions)})"
            )
        return out

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        # normalised logits (log-probabilities): the network's shifted by a constant, the same softmax
        return self._raw(states).astype(np.float64)

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        out = self._raw(states)
        if self.algorithm == "DQN":
            return to_probabilities(out, OutputKind.Q_VALUES)
        return row_softmax(out).astype(np.float64)  # torch's Categorical(logits=...).probs, in float32

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        return greedy_columns(self._raw(states))

    def _read_network(self) -> MLP:
        problems = []
        if self._space.kind is not Space.BOX:
            problems.append(
                f"the observation space is {self._space}, not a flat Box (an MLP takes the features as they "
                "are; SB3 one-hot encodes a discrete observation first)"
            )
        where = "q_net.q_net" if self.algorithm == "DQN" else "mlp_extractor.policy_net + action_net"
        layers: Any = None
        if self._read is None:  # SB3's own model object: its torch modules
            policy = self._model.policy
            if self.algorithm == "DQN":
                extractor, seq = policy.q_net.features_extractor, list(policy.q_net.q_net)
            else:
                extractor = getattr(policy, "pi_features_extractor", policy.features_extractor)
                seq = [*policy.mlp_extractor.policy_net, policy.action_net]
            if type(extractor).__name__ != "FlattenExtractor":
                problems.append(f"the features extractor is {type(extractor).__name__}, not FlattenExtractor")
            layers = self._torch.nn.Sequential(*seq)
        if problems:
            raise PolicyError(
                f"{self.name}: this {self.algorithm} model cannot be read as a ReLU network; export the "
                "network to ONNX (Gemm/Relu) instead",
                problems,
            )
        name = f"{self.name} ({self.algorithm} {where})"
        try:
            return mlp_from_torch(layers, name=name) if self._read is None else mlp_of_layers(self._read, name=name)
        except PolicyError as exc:
            raise PolicyError(
                f"{exc}; train with policy_kwargs={{'activation_fn': torch.nn.ReLU}} or export the network to ONNX"
            ) from None


#: The Stable-Baselines3 / sb3-contrib algorithms whose models rlverify reads (a subclass counts as its base).
SB3_ALGORITHMS = ("MaskablePPO", "PPO", "A2C", "DQN")


def sb3_algorithm(model: SB3Model) -> str:
    """The algorithm of the SB3 model object ``model``: the first of :data:`SB3_ALGORITHMS` among its classes.

    Raises:
        PolicyError: a recurrent policy (RecurrentPPO) or another algorithm (SAC, TD3, ...), named."""
    names = [c.__name__ for c in type(model).__mro__]
    if any(n.startswith("Recurrent") for n in names):
        raise PolicyError(
            f"{model_name(model)}: a recurrent policy keeps an LSTM state across steps; rlverify verifies "
            "memoryless policies (train PPO, MaskablePPO, A2C or DQN)"
        )
    for algorithm in SB3_ALGORITHMS:
        if algorithm in names:
            return algorithm
    raise PolicyError(
        f"{model_name(model)}: rlverify reads PPO, A2C, DQN (stable-baselines3) and MaskablePPO (sb3-contrib) "
        f"models with discrete actions, not {type(model).__name__}"
    )


#: The continuous-action algorithms (Box actions) read, first match wins (DDPG is a TD3 subclass), and their kind.
CONTINUOUS_ALGORITHMS = {
    "SAC": ContinuousKind.SQUASHED,
    "DDPG": ContinuousKind.DETERMINISTIC,
    "TD3": ContinuousKind.DETERMINISTIC,
    "PPO": ContinuousKind.GAUSSIAN,
    "A2C": ContinuousKind.GAUSSIAN,
}

#: What a TD3/DDPG policy's note says.
EXPLORATION_NOTE = (
    "deterministic actor: the exploration noise SB3 adds while training (action_noise) is not part of the trained "
    "policy, so the noise is ignored"
)


def has_box_actions(model: SB3Model) -> bool:
    """Whether the SB3 model object ``model`` acts over a Box action space."""
    return type(getattr(model, "action_space", None)).__name__ == "Box"


def load_sb3_continuous(
    source: str | Path | SB3Model,
    features: Sequence[str] | None,
    *,
    trust_code: bool = False,
    threads: int = DEFAULT_POLICY_THREADS,
    name: str | None = None,
) -> ContinuousPolicy:
    """The continuous policy of an SB3 SAC/TD3/DDPG/PPO/A2C zip (or model object) with a Box action space.

    A zip is read without running code and without torch (:func:`~rlverify.policies.sb3zip.read_continuous`, then a
    numpy :class:`~rlverify.policies.continuous.Actor`), unless ``trust_code``: then SB3's own loader loads it and its own
    torch actor computes the mean / log-std (:class:`SB3ContinuousPolicy`), as does a model object. ``features``:
    the observation's names (None: ``obs[0]`` .. ``obs[F-1]``). Actions are ``a[0]`` .. ``a[d-1]``.

    Raises:
        PolicyError / InputFileError: as :func:`~rlverify.policies.sb3zip.read_continuous`, or a feature count that does
            not fit the observation space (one line).
    """
    check_threads(threads, "threads")
    if not isinstance(source, (str, Path)) or trust_code:  # SB3's own torch actor computes
        torch = require("torch", "sb3", purpose="a Stable-Baselines3 policy")
        limit_torch_threads(torch, threads)
    if not isinstance(source, (str, Path)):
        return SB3ContinuousPolicy(source, features, threads=threads, name=name or model_name(source))
    path = Path(source)
    sb3zip.check_sizes(path)
    if trust_code:
        return SB3ContinuousPolicy(_load_continuous_trusted(path), features, threads=threads, name=name or str(path))
    net = sb3zip.read_continuous(path)
    shown = name or str(path)
    kind = CONTINUOUS_ALGORITHMS[net.algorithm]
    actor = Actor(net.hidden, net.activation, net.mean, net.log_std, squash=kind is ContinuousKind.DETERMINISTIC, name=shown)
    limit_blas_threads(threads)
    feats = _continuous_features(features, net.obs.size, shown, net.algorithm)
    policy = ActorPolicy(
        actor,
        feats,
        net.low,
        net.high,
        kind,
        name=shown,
        note=EXPLORATION_NOTE if kind is ContinuousKind.DETERMINISTIC else None,
    )
    policy.algorithm = net.algorithm
    policy.threads = threads
    return policy


def _continuous_features(features: Sequence[str] | None, size: int, name: str, algorithm: str) -> list[str]:
    """The declared features, else ``obs[i]``; a count that does not fit the observation space is refused."""
    feats = list(features) if features else [f"obs[{i}]" for i in range(size)]
    if len(feats) != size:
        raise PolicyError(f"{name}: the {algorithm} model observes {size} features, but the features declared are {feats}")
    return feats


def _load_continuous_trusted(path: Path) -> SB3Model:
    """Load a continuous-action zip with SB3's own loader (it unpickles: runs whatever code the file carries)."""
    data = sb3zip.read_data(path)
    module, _ = sb3zip.policy_class(data, path)
    purpose = "loading a Stable-Baselines3 zip with --trust-code"
    sb3 = require("stable_baselines3", "sb3", purpose=purpose)
    if module in sb3zip.CONTINUOUS_POLICY_MODULES:
        candidates = [getattr(sb3, sb3zip.continuous_algorithm(data, path))]
    else:
        candidates = [sb3.SAC, sb3.TD3, sb3.PPO, sb3.A2C]
    note_user_code()
    last_exc: Exception | None = None
    for cls in candidates:
        try:
            return cls.load(str(path), device="cpu")
        except Exception as exc:  # SB3's load raises many kinds; the next candidate
            last_exc = exc
    raise InputFileError(
        f"{path}: cannot load the model with Stable-Baselines3's loader ({last_exc.__class__.__name__}: {last_exc})"
    )


class SB3ContinuousPolicy(ContinuousPolicy):
    """A Stable-Baselines3 SAC/TD3/DDPG/PPO/A2C model object over a Box action space, computed by SB3's own torch actor
    (a model in memory, or a zip loaded with ``--trust-code``): SAC's ``actor.get_action_dist_params`` (mean, clamped
    log-std), TD3/DDPG's ``actor`` (tanh output), PPO/A2C's ``get_distribution`` (mean) and ``log_std``; the action is
    then :func:`~rlverify.policies.continuous.actions_of` of its kind, as for a zip read without running code.

    Raises:
        PolicyError: another algorithm, gSDE (``use_sde``) or ``squash_output`` on PPO/A2C, an observation space that is
            not a flat Box, a feature count that does not fit.
    """

    def __init__(
        self, model: SB3Model, features: Sequence[str] | None, *, threads: int = DEFAULT_POLICY_THREADS, name: str
    ) -> None:
        names = [c.__name__ for c in type(model).__mro__]
        algorithm = next((a for a in CONTINUOUS_ALGORITHMS if a in names), None)
        if algorithm is None:
            raise PolicyError(
                f"{name}: rlverify reads SAC, TD3, DDPG, PPO and A2C models over a Box action space, not "
                f"{type(model).__name__}"
            )
        policy = model.policy
        if getattr(policy, "use_sde", False) or getattr(model, "use_sde", False):
            raise PolicyError(
                f"{name}: the {algorithm} model uses gSDE (use_sde=True); rlverify computes diagonal Gaussian policies only"
            )
        if algorithm in ("PPO", "A2C") and getattr(policy, "squash_output", False):
            raise PolicyError(f"{name}: the {algorithm} model has squash_output=True; rlverify reads it without")
        self._torch = require("torch", "sb3", purpose="a Stable-Baselines3 policy")
        self.threads = check_threads(threads, "threads")
        space = sb3zip.space_of(model.observation_space, Path(name))
        if space.kind is not Space.BOX:
            raise PolicyError(f"{name}: the observation space is {space}; rlverify reads continuous policies over a flat Box")
        act = model.action_space
        kind = CONTINUOUS_ALGORITHMS[algorithm]
        super().__init__(
            _continuous_features(features, space.size, name, algorithm),
            np.asarray(act.low, dtype=np.float64),
            np.asarray(act.high, dtype=np.float64),
            kind,
            name=name,
            note=EXPLORATION_NOTE if kind is ContinuousKind.DETERMINISTIC else None,
        )
        self.algorithm = algorithm
        self.trusted = True
        self._model = model

    def _act(self, obs: np.ndarray, noise: np.ndarray | None) -> np.ndarray:
        torch = self._torch
        policy = self._model.policy
        x = torch.as_tensor(np.ascontiguousarray(obs, dtype=np.float32), device=getattr(policy, "device", "cpu"))
        log_std: np.ndarray | None = None
        with torch.no_grad(), eval_mode(policy):
            if self.kind is ContinuousKind.SQUASHED:
                mean_t, log_std_t, _ = policy.actor.get_action_dist_params(x)
                mean, log_std = mean_t.cpu().numpy(), log_std_t.cpu().numpy()
            elif self.kind is ContinuousKind.DETERMINISTIC:
                mean = policy.actor(x).cpu().numpy()
            else:
                mean = policy.get_distribution(x).distribution.mean.cpu().numpy()
                log_std = policy.log_std.detach().cpu().numpy()
        return actions_of(self.kind, mean, log_std, noise, self._low, self._high)


def model_name(model: object) -> str:
    """How messages and results name a model object given in memory: ``PPO model (in memory)``."""
    return f"{type(model).__name__} model (in memory)"


def log_softmax(x: np.ndarray) -> np.ndarray:
    """``(N, A)`` float32 logits normalised to log-probabilities (``x - logsumexp(x)``, in float32 as torch does)."""
    return row_log_softmax(np.asarray(x, dtype=np.float32))


def torch_sequential(torch: Any, layers: Sequence[sb3zip.Layer], activation: str) -> Any:
    """The float32 numpy ``layers`` as a ``torch.nn.Sequential`` of ``Linear`` layers with ``activation`` (a
    ``torch.nn`` class name) between two, in eval mode (for an activation numpy does not compute here)."""
    modules: list[Any] = []
    for i, (w, b) in enumerate(layers):
        linear = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(w))
            linear.bias.copy_(torch.from_numpy(b))
        modules.append(linear)
        if i < len(layers) - 1:
            modules.append(getattr(torch.nn, activation)())
    return torch.nn.Sequential(*modules).eval()


def mlp_of_layers(read: sb3zip.SB3Network, *, name: str) -> MLP:
    """The float64 :class:`MLP` of a zip's network read without torch, if its activation is ReLU.

    Raises:
        PolicyError: another activation (the first layer after a Linear named, as :func:`mlp_from_torch` names it)."""
    if read.activation != "ReLU" and len(read.layers) > 1:
        raise PolicyError(
            f"{name}: layer '1' is {read.activation}, which rlverify cannot read as a ReLU network (supported: {TORCH_SHAPE})"
        )
    return MLP(tuple(w.astype(np.float64) for w, _ in read.layers), tuple(b.astype(np.float64) for _, b in read.layers))
