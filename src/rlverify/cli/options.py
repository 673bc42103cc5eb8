"""The option vocabulary every subcommand shares (one spelling, one meaning; see the README).

``TARGET`` (a PRISM/JANI file or a benchmark id), ``-c/--constants``, ``--policy``,
``--features/--actions/--output``, ``-p/--property``, ``--mode``, ``--unavailable``, ``--seed``,
``--json`` (prints JSON to stdout), ``--out FILE`` (writes an artefact; repeatable; the kind from the
suffix) and ``--force`` (overwrite files). Subcommands add only what is their own.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlverify.choices import BackendKind, Mode, Numerics, OutputKind, Unavailable, values
from rlverify.cli.console import print_warnings, progress_bar
from rlverify.cli.output import print_envelope
from rlverify.errors import OptionError
from rlverify.files import check_target, write_text
from rlverify.models.userfile import DEFAULT_SYSTEM_TIMEOUT
from rlverify.policies.settings import DEFAULT_POLICY_THREADS, DEFAULT_POLICY_TIMEOUT, SPEC_HELP, check_threads, check_timeout

if TYPE_CHECKING:
    from rlverify.backends import BackendOptions
    from rlverify.resolve import Kinds
    from rlverify.targets import Target

UNAVAILABLE = values(Unavailable)


def add_target(
    p: argparse.ArgumentParser,
    *,
    kinds: str = "PRISM (.prism/.pm/.nm) or JANI (.jani) file, a benchmark id, "
    "or gym:ID (a Gymnasium environment with a finite model)",
) -> None:
    p.add_argument("target", metavar="TARGET", help=f"{kinds} (see 'rlverify benchmarks list')")
    p.add_argument(
        "--constants",
        "-c",
        metavar="K=V,...",
        help="model constants (files) or benchmark parameters, e.g. xMax=4,yMax=4,slickness=0.1",
    )


def add_env_kwargs(p: argparse.ArgumentParser) -> None:
    """``--env-kwargs``: the arguments of a ``gym:ID`` target (``gymnasium.make(ID, **kwargs)``); and ``--trust-code``."""
    p.add_argument(
        "--env-kwargs",
        metavar="K=V,...|JSON",
        help="arguments of a gym:ID target (a Gymnasium environment with a finite model P: FrozenLake, "
        "CliffWalking, Taxi), e.g. map_name=8x8,is_slippery=false (values read as JSON where they are: "
        'true/false/numbers), or a JSON object for values with commas: \'{"desc": ["SFF", "FHG"]}\'',
    )
    add_trust_code(p)


def add_episode_options(p: argparse.ArgumentParser) -> None:
    """``--label`` and ``--vectorization``: how a Gymnasium environment without a transition table is simulated."""
    p.add_argument(
        "--label",
        action="append",
        metavar="NAME=CONDITION",
        help="a label over the episodes of a gym:ID environment without a transition table (CartPole, MuJoCo, your "
        "own), e.g. 'fall=terminated & !truncated' or 'tilted=abs(obs[2]) > 0.15'; conditions read obs[i] (or the "
        '--features names), reward, terminated, truncated, step and info["KEY"] (repeatable)',
    )
    p.add_argument(
        "--vectorization",
        choices=("auto", "native", "sync", "async"),
        default=None,
        help="how such an environment's lockstep copies are made: auto (default: its own vectorised implementation "
        "where rlverify can seed each episode, e.g. CartPole, else sync), sync (copies in this process), async "
        "(copies in worker processes)",
    )
    p.add_argument(
        "--vec-normalize",
        metavar="FILE",
        help="an SB3 VecNormalize statistics file (VecNormalize.save): the policy sees observations normalised as in "
        "training (read without running code from the pickle)",
    )


#: What ``--trust-code`` allows (its help, and the README's Security section).
TRUST_CODE_HELP = (
    "allow running code from your inputs: a gym:MODULE:ID target imports MODULE (without it only ids "
    "in Gymnasium's registry are made), and an SB3 model.zip is loaded with Stable-Baselines3's loader, "
    "which unpickles and can run code (without it the zip's JSON and weights are read, no code). Only for "
    "files and modules you trust"
)


def add_trust_code(p: argparse.ArgumentParser) -> None:
    """``--trust-code`` (added once, by :func:`add_env_kwargs` or :func:`add_policy`, whichever comes first)."""
    if "--trust-code" not in p._option_string_actions:  # argparse has no public lookup
        p.add_argument("--trust-code", action="store_true", help=TRUST_CODE_HELP)


def add_policy(p: argparse.ArgumentParser, *, default_note: str = "default: the benchmark's reference policy") -> None:

    p.add_argument("--policy", help=f"policy spec: {SPEC_HELP}; or a benchmark's reference policy name ({default_note})")
    p.add_argument(
        "--features",
        metavar="A,B,...",
        help="feature (model variable) names in the policy's input order, "
        "for a policy file that does not declare them (one "
        "contradicting the file's declaration is refused)",
    )
    p.add_argument(
        "--actions",
        metavar="A,B,...",
        help="action labels in the policy's output order, for a policy file "
        "that does not declare them (a contradiction is refused)",
    )
    p.add_argument(
        "--output",
        choices=(OutputKind.LOGITS.value, OutputKind.PROBABILITIES.value, OutputKind.Q_VALUES.value),  # --help's order
        help="what the policy network outputs (q-values: greedy argmax), for a file that does not declare "
        "it (a contradiction is refused)",
    )
    p.add_argument(
        "--policy-timeout",
        type=float,
        default=DEFAULT_POLICY_TIMEOUT,
        metavar="SECONDS",
        help=f"stop with an error when one call of the policy (one batch of states), or importing a path.py:NAME "
        "policy's module, takes longer than this "
        f"(default {DEFAULT_POLICY_TIMEOUT:g}; 0: no limit); interrupts Python code, and native code "
        "(onnxruntime, torch) when it returns",
    )
    p.add_argument(
        "--policy-threads",
        type=int,
        default=DEFAULT_POLICY_THREADS,
        metavar="N",
        help=f"threads the policy's network runtime (onnxruntime, torch) computes a batch with (default "
        f"{DEFAULT_POLICY_THREADS}: rlverify keeps the cores busy itself; torch's count is process-wide)",
    )
    add_trust_code(p)


def add_system_timeout(p: argparse.ArgumentParser) -> None:
    """``--system-timeout``: the limit on importing a ``FILE.py:NAME`` system declaration and on calling ``NAME()``
    (a command that takes continuous systems)."""

    p.add_argument(
        "--system-timeout",
        type=float,
        default=DEFAULT_SYSTEM_TIMEOUT,
        metavar="SECONDS",
        help=f"stop with an error when importing a FILE.py:NAME system's file, or calling NAME(), takes longer than "
        f"this (each; default {DEFAULT_SYSTEM_TIMEOUT:g}; 0: no limit)",
    )


def system_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``--system-timeout`` as keyword arguments of :func:`rlverify.resolve.resolve` (none for a command without it)."""

    if not hasattr(args, "system_timeout"):
        return {}
    return {"system_timeout": check_timeout(args.system_timeout, "--system-timeout")}


def add_property(p: argparse.ArgumentParser, *, required: bool = True, forms: str = "", several: bool = False) -> None:
    """``-p/--property``; ``several``: repeatable, and a PRISM properties file (``.props``) stands for its properties."""
    p.add_argument(
        "--property",
        "-p",
        required=required,
        action="append" if several else "store",
        help="PCTL property, e.g. 'P=? [F<=100 COLLISION=true]', or a property name of the benchmark "
        "(or of the JANI file)"
        + ("; repeat it, or give a PRISM properties file (FILE.props), to check several" if several else "")
        + (f"; {forms}" if forms else ""),
    )


def add_unavailable(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unavailable",
        choices=UNAVAILABLE,
        default="stall",
        help="policy mass on actions a state does not offer: to a 'stalled' sink, reported (default), or "
        "renormalised over the available actions (explicit opt-in)",
    )


def add_chain_options(p: argparse.ArgumentParser, *, numerics: bool = False) -> None:
    """The options of a command that builds the policy's chain: ``--mode`` (stochastic or deterministic),
    ``--unavailable``, ``--max-states`` and (``numerics``) ``--numerics``/``--precision``, as ``rlverify verify``
    reads them."""
    p.add_argument(
        "--mode",
        choices=(Mode.STOCHASTIC.value, Mode.DETERMINISTIC.value),
        default="stochastic",
        help="follow every action with pi > 0 (default) or the argmax only",
    )
    add_unavailable(p)
    if numerics:
        p.add_argument("--numerics", choices=values(Numerics), default="sound", help="as rlverify verify (default sound)")
        p.add_argument("--precision", type=float, default=1e-6, help="relative precision of iterative solvers (default 1e-6)")
    p.add_argument("--max-states", type=int, default=2_000_000, help="refuse to build models with more states (default 2M)")


#: Seeds every engine takes (numpy's SeedSequence: >= 0; the simulator's counter-based keys: 64 bits; the
#: abstraction's per-state generators and training: numpy and torch), one range for every command.
MAX_SEED = 2**63 - 1


def seed_value(text: str) -> int:
    """A ``--seed`` value: a whole number in [0, :data:`MAX_SEED`] (argparse reports the message)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number in [0, 2**63-1], got '{text}'") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text} is out of range: a seed is a whole number in [0, 2**63-1]")
    return value


def add_seed(p: argparse.ArgumentParser, help: str = "random seed (default 0)") -> None:  # argparse's word
    """``--seed N`` (default 0): the one seed option of every command (see :func:`seed_value`)."""
    p.add_argument("--seed", type=seed_value, default=0, metavar="N", help=help)


def add_outputs(
    p: argparse.ArgumentParser, *, kinds: str, seed: bool = True, seed_help: str = "random seed (default 0)"
) -> None:
    if seed:
        add_seed(p, seed_help)
    add_json(p)
    p.add_argument(
        "--out",
        "-o",
        metavar="FILE",
        action="append",
        default=[],
        help=f"write an artefact; repeatable; the kind from the suffix: {kinds}",
    )
    add_force(p)


def add_json(p: argparse.ArgumentParser, help: str = "print the result as JSON to stdout") -> None:  # argparse's word
    """``--json``: the command's result as JSON on stdout (nothing else there)."""
    p.add_argument("--json", action="store_true", help=help)


def add_force(p: argparse.ArgumentParser, help: str = "overwrite existing --out files") -> None:  # argparse's word
    """``--force``: overwrite the files the command writes (never without it)."""
    p.add_argument("--force", action="store_true", help=help)


def names(text: str | None) -> list[str] | None:
    """``"a, b"`` -> ``["a", "b"]`` (None for None/empty)."""
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def policy_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The policy options of ``args`` as keyword arguments of :func:`rlverify.resolve.resolve`."""

    return {
        "policy": args.policy,
        "features": names(args.features),
        "actions": names(args.actions),
        "output": args.output,
        "trust_code": bool(getattr(args, "trust_code", False)),
        "policy_timeout": check_timeout(getattr(args, "policy_timeout", None)),
        "policy_threads": check_threads(getattr(args, "policy_threads", DEFAULT_POLICY_THREADS)),
        **system_kwargs(args),
    }


def outputs(args: argparse.Namespace, allowed: Sequence[str], *, hidden: Sequence[str] = ()) -> dict[str, Path]:
    """The ``--out`` files by suffix (``{".png": Path(...)}``), checked before any work.

    Raises:
        OptionError: a suffix this command does not write, or the same kind twice.
        FileWriteError: a file exists and ``--force`` is not given, or the target cannot be written
            (a directory, a device, a parent that is a file, no permission); checked again when written.
    """
    files = list(args.out or []) + [f for f in hidden if f]
    out: dict[str, Path] = {}
    for f in files:
        path = Path(f)
        suffix = path.suffix.lower()
        if suffix not in allowed:
            raise OptionError(f"--out {f}: this command writes {', '.join(allowed)} files")
        if suffix in out:
            raise OptionError(f"--out {f}: a {suffix} file is already given ({out[suffix]})")
        out[suffix] = check_target(path, force=args.force, what="--out")
    return out


def dumps(data: dict[str, Any]) -> str:
    """``data`` as indented JSON (:func:`rlverify.results.jsonable`, the one sanitiser; anything else as text)."""
    from rlverify.results import jsonable  # lazy: numpy, --help start-up

    return json.dumps(jsonable(data), indent=2, allow_nan=False, default=str)


def write_json(path: Path, data: dict[str, Any], *, force: bool = False) -> None:
    """``data`` as JSON (see :func:`dumps`) to ``path``, atomically (never over a file without ``force``)."""
    write_text(path, dumps(data) + "\n", force=force, what="--out")


def with_progress(label: str, console: Any, fn: Any) -> Any:
    """``fn(progress)`` under a transient progress bar on stderr (so that ``--json`` on stdout stays clean);
    ``progress(done, total)`` advances it. (``console`` is ignored: every bar goes to the CLI's stderr console.)"""

    with progress_bar(label) as bar:
        task = bar.add_task(label, total=None)
        return fn(lambda done, total: bar.update(task, completed=done, total=total))


def emit(
    result: Any, args: argparse.Namespace, files: dict[str, Path], *, exit_code: int = 0, holds: bool | None = None
) -> bool:
    """A :class:`~rlverify.results.Result`'s warnings to stderr, its JSON to ``--out FILE.json`` and, with ``--json``,
    in the envelope (:func:`rlverify.cli.output.print_envelope`) to stdout; True when the JSON was printed (then
    nothing else is)."""

    print_warnings(result.warnings)
    if ".json" in files:
        write_json(files[".json"], result.to_json(), force=args.force)
    if args.json:
        print_envelope(args, result, exit_code=exit_code, holds=holds)
        return True
    return False


def add_backend_options(p: argparse.ArgumentParser) -> None:
    """``--backend {local,ray}`` and ``--address ADDR``: where the work runs (results do not depend on it)."""
    p.add_argument(
        "--backend",
        choices=values(BackendKind),
        default="local",
        help="where the work runs: local (this process, default) or ray (Ray tasks on this machine or a "
        "cluster; needs pip install 'rlverify[ray]'); the same result for the same seed either way",
    )
    p.add_argument(
        "--address",
        metavar="ADDR",
        help="with --backend ray: join a Ray cluster, 'auto' (the one started on this machine with "
        "'ray start') or HOST:PORT of its head node (default: start Ray on this machine)",
    )


def backend_from_args(args: argparse.Namespace) -> BackendOptions:
    """The :class:`~rlverify.backends.BackendOptions` of ``--backend/--address`` (validated)."""
    from rlverify.backends import BackendOptions, import_ray  # lazy: numpy, --help start-up

    options = BackendOptions(kind=args.backend, address=args.address)
    options.validate()
    if BackendKind(options.kind) is BackendKind.RAY:
        import_ray(options)  # a missing extra is reported before any work (and Ray's waits are bounded)
    return options


# -- shields (rlverify shield --out FILE): a policy under a shield is a policy ----------------------------------


def add_shield(p: argparse.ArgumentParser) -> None:
    """``--shield FILE``: the policy restricted to the actions a shield file keeps (see :func:`apply_shield`)."""
    p.add_argument(
        "--shield",
        metavar="FILE",
        help="a shield file (rlverify shield --out FILE): the policy restricted, state by state, to the actions the "
        "shield keeps (renormalised; the best kept action where the policy puts no mass on one); refused for a "
        "shield computed for another model",
    )


def apply_shield(target: Target[Any], args: argparse.Namespace) -> Target[Any]:
    """``target`` with its policy under ``--shield FILE`` (unchanged without the option;
    :meth:`~rlverify.targets.Target.with_shield`, a note when the shield was computed for another property).

    Raises:
        OptionError: ``--shield`` without a policy or on a target that is not a PRISM/JANI/Gymnasium model;
        ShieldFileError: a file that is not a valid shield; PolicyError: a shield for another model or policy.
    """
    path = getattr(args, "shield", None)
    if not path:
        return target
    from rlverify.cli.console import note  # lazy: rich, --help start-up

    return target.with_shield(path, say=note)


def resolve_target(
    args: argparse.Namespace,
    command: str,
    *,
    kinds: Kinds | None = None,
    property: str | None = None,
    needs_policy: bool = True,
    policy: bool = True,
    constants: str | None = None,
) -> Target[Any]:
    """The target of the command line (:func:`rlverify.resolve.resolve`): ``TARGET``, ``-c`` (or ``constants``),
    ``--env-kwargs`` and (``policy``) the policy options (:func:`policy_kwargs`).

    ``kinds``: the target types the command takes (None: PRISM/JANI/Gymnasium models only,
    :class:`~rlverify.targets.ModelTarget`); ``property``: the property to parse (None: none)."""
    from rlverify.resolve import resolve  # lazy: numpy, --help start-up
    from rlverify.targets import ModelTarget  # lazy: numpy, --help start-up

    return resolve(
        args.target,
        property=property,
        needs_policy=needs_policy,
        kinds=(ModelTarget,) if kinds is None else kinds,
        command=command,
        **_target_kwargs(args, constants, policy),
    )


def resolve_simulated_target(args: argparse.Namespace, command: str, *, constants: str | None = None) -> Target[Any]:
    """The target of a statistical command line with its property ``-p`` (:func:`rlverify.resolve.resolve_simulated`:
    every kind; a continuous system's default is its unsafe set), its policy under ``--shield``."""
    from rlverify.resolve import resolve_simulated  # lazy: numpy, --help start-up

    target = resolve_simulated(args.target, args.property, command=command, **_target_kwargs(args, constants, True))
    return apply_shield(target, args)


def _target_kwargs(args: argparse.Namespace, constants: str | None, policy: bool) -> dict[str, Any]:
    """``-c`` (or ``constants``), ``--env-kwargs`` and (``policy``) the policy options, as :func:`resolve`'s arguments."""
    return {
        "constants": args.constants if constants is None else constants,
        "env_kwargs": getattr(args, "env_kwargs", None),
        **({"labels": args.label} if getattr(args, "label", None) else {}),
        **({"vectorization": args.vectorization} if getattr(args, "vectorization", None) else {}),
        **({"vec_normalize": args.vec_normalize} if getattr(args, "vec_normalize", None) is not None else {}),
        **(policy_kwargs(args) if policy else {}),
    }
