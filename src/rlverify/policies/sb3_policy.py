"""Stable-Baselines3 policies: PPO, A2C, DQN and sb3-contrib MaskablePPO models, as zips or objects in memory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlverify.choices import OutputKind
from rlverify.errors import InputFileError, PolicyError, require
from rlverify.models.userfile import note_user_code
from rlverify.policies import sb3zip
from rlverify.policies.base import BasePolicy
from rlverify.policies.mlp import MLP, mlp_from_torch
from rlverify.policies.outputs import greedy_columns, to_probabilities
from rlverify.policies.sb3zip import Space
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, check_threads
from rlverify.policies.torch_runtime import eval_mode, limit_torch_threads

#: a Stable-Baselines3 model object (untyped: SB3 is an optional extra)
SB3Model = Any


class SB3Policy(BasePolicy):
    """A Stable-Baselines3 PPO/A2C or sb3-contrib MaskablePPO (action distribution) or DQN (greedy one-hot)
    model zip (extra ``sb3``; reading it without SB3's loader needs only ``torch``).

    By default the zip is read without running any code from it (:mod:`rlverify.policies.sb3zip`: the JSON
    ``data`` and the ``policy.pth`` weights, loaded with ``weights_only=True``) and the actor of an
    ``MlpPolicy`` is rebuilt from them; anything it cannot read that way (a custom policy class or feature
    extractor) is refused naming ``--trust-code``. With ``trust_code=True`` the zip is loaded with SB3's own
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

    Making one limits torch to ``threads`` threads (:func:`limit_torch_threads`: process-global).

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
        self._torch = require("torch", "sb3", purpose="a Stable-Baselines3 policy")
        limit_torch_threads(self._torch, self.threads)
        self.trusted = trust_code or not is_file
        if not is_file:  # the user's own model object: SB3's code runs, as in their training
            self._adopt(source, sb3_algorithm(source), self.name)
        elif trust_code:
            sb3zip.check_sizes(Path(source))
            self._load_trusted(Path(source))
        else:
            path = Path(source)
            sb3zip.check_sizes(path)
            read = sb3zip.read_network(path, self._torch)
            self.algorithm, self._space, self._net, self._n_actions = read.algorithm, read.obs, read.net, read.n_actions
            self._forward = self._safe_forward
        self.maskable = self.algorithm == "MaskablePPO"
        self.output = OutputKind.Q_VALUES if self.algorithm == "DQN" else OutputKind.LOGITS
        self._check_spaces()

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
            problems.append(
                f"the observation space is {space} ({what}), but {len(self.features)} features are declared "
                f"{list(self.features)}"
            )
        if self._n_actions != len(self.actions):
            problems.append(
                f"the action space is Discrete({self._n_actions}), but {len(self.actions)} actions are "
                f"declared {list(self.actions)}"
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
        """The rebuilt network's raw outputs (logits or Q-values), a float32 tensor, for ``(N, d)`` observations."""
        with self._torch.no_grad():
            return self._net(sb3zip.encode(states, self._space, self._torch))

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
        torch = self._torch

        def run() -> Any:
            out = self._forward(states)
            if self.algorithm != "DQN":
                out = out - out.logsumexp(dim=-1, keepdim=True)
            return out

        out = self._run_code(run)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (len(states), len(self.actions)):
            raise PolicyError(
                f"{self.name}: the network gave outputs of shape {getattr(out, 'shape', None)}, expected "
                f"({len(states)}, {len(self.actions)})"
            )
        return out

    def _network_outputs(self, states: np.ndarray) -> np.ndarray:
        # normalised logits (log-probabilities): the network's shifted by a constant, the same softmax
        return self._raw(states).double().numpy()

    def _probabilities(self, states: np.ndarray) -> np.ndarray:
        out = self._raw(states)
        if self.algorithm == "DQN":
            return to_probabilities(out.numpy(), OutputKind.Q_VALUES)
        return self._torch.softmax(out, dim=-1).double().numpy()  # torch's Categorical(logits=...).probs

    def _greedy_columns(self, states: np.ndarray) -> np.ndarray | None:
        return greedy_columns(self._raw(states).numpy())

    def _read_network(self) -> MLP:
        torch = self._torch
        problems = []
        if self._space.kind is not Space.BOX:
            problems.append(
                f"the observation space is {self._space}, not a flat Box (an MLP takes the features as they "
                "are; SB3 one-hot encodes a discrete observation first)"
            )
        if self._net is not None:
            layers, where = self._net, ("q_net.q_net" if self.algorithm == "DQN" else "mlp_extractor.policy_net + action_net")
        else:
            policy = self._model.policy
            if self.algorithm == "DQN":
                extractor, seq, where = policy.q_net.features_extractor, list(policy.q_net.q_net), "q_net.q_net"
            else:
                extractor = getattr(policy, "pi_features_extractor", policy.features_extractor)
                seq = [*policy.mlp_extractor.policy_net, policy.action_net]
                where = "mlp_extractor.policy_net + action_net"
            if type(extractor).__name__ != "FlattenExtractor":
                problems.append(f"the features extractor is {type(extractor).__name__}, not FlattenExtractor")
            layers = torch.nn.Sequential(*seq)
        if problems:
            raise PolicyError(
                f"{self.name}: this {self.algorithm} model cannot be read as a ReLU network; export the "
                "network to ONNX (Gemm/Relu) instead",
                problems,
            )
        try:
            return mlp_from_torch(layers, name=f"{self.name} ({self.algorithm} {where})")
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


def model_name(model: object) -> str:
    """How messages and results name a model object given in memory: ``PPO model (in memory)``."""
    return f"{type(model).__name__} model (in memory)"
