"""Where independent pieces of an engine's work run: in this process (``local``) or as Ray tasks (``ray``).

An engine splits its work into tasks whose inputs are fixed before any task runs (a range of run
indices, a chunk of a frontier), ships what every task needs once (:meth:`Backend.share`: the
policy, the environment), and collects the results in task order (:meth:`Backend.map`). Because
each task is a pure function of its inputs and the results are combined in task order, the outcome
does not depend on the backend, on the number of workers or on which worker finishes first; only
the progress callback sees the completion order.

Ray is an optional extra (``pip install 'rlverify[ray]'``), imported only when a ``ray`` backend is
opened. Joining a cluster that does not answer fails with a :class:`BackendError` after a bounded
wait (``connect_timeout``), never a hang.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlverify.choices import BackendKind, values
from rlverify.errors import OptionError, RlverifyError, require

log = logging.getLogger(__name__)

KINDS = values(BackendKind)


class BackendError(RlverifyError):
    """A compute backend cannot be reached or set up (e.g. no Ray cluster answers at ``--address``)."""


@dataclass(frozen=True)
class BackendOptions:
    """Where the work runs.

    Attributes:
        kind: ``local`` (this process, the default) or ``ray`` (Ray tasks).
        address: Ray only: None starts a Ray runtime on this machine; ``auto`` joins the cluster
            started on this machine with ``ray start``; ``HOST:PORT`` joins the cluster whose head
            listens there (the port ``ray start --head --port`` was given, default 6379).
        num_cpus: Ray only, without ``address``: CPUs the local runtime may use (None: all).
        connect_timeout: Ray only: seconds to wait for a cluster at ``address`` to answer.
        tasks_per_worker: Ray only: a fixed-size job is cut into about this many tasks per worker
            (load balance vs per-task overhead); never changes a result.
    """

    kind: BackendKind = BackendKind.LOCAL
    address: str | None = None
    num_cpus: int | None = None
    connect_timeout: float = 10.0
    tasks_per_worker: int = 4

    def __post_init__(self) -> None:
        if self.kind in KINDS:  # text given for a kind: its member (anything else is refused by validate)
            object.__setattr__(self, "kind", BackendKind(self.kind))

    def validate(self) -> None:
        if self.kind not in KINDS:
            raise OptionError(f"--backend: expected one of {', '.join(KINDS)}, got '{self.kind}'")
        if self.kind is not BackendKind.RAY and self.address is not None:
            raise OptionError(f"--address {self.address}: an address is used with --backend ray only")
        if self.address is not None and self.address != "auto":
            _host_port(self.address)
        self._validate_sizes()

    def _validate_sizes(self) -> None:
        """Refuse a ``num_cpus``, ``connect_timeout`` or ``tasks_per_worker`` out of range."""
        if self.num_cpus is not None and (int(self.num_cpus) != self.num_cpus or self.num_cpus <= 0):
            raise OptionError(f"num_cpus: expected a positive integer, got {self.num_cpus!r}")
        if self.num_cpus is not None and self.address is not None:
            raise OptionError("num_cpus sizes a Ray runtime started here; a cluster at --address has its own CPUs")
        if not (self.connect_timeout > 0):
            raise OptionError(f"connect_timeout: expected a positive number of seconds, got {self.connect_timeout!r}")
        if int(self.tasks_per_worker) != self.tasks_per_worker or self.tasks_per_worker <= 0:
            raise OptionError(f"tasks_per_worker: expected a positive integer, got {self.tasks_per_worker!r}")


def _host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise OptionError(
            f"--address {address}: expected 'auto' or HOST:PORT (the head node's address and the port "
            "given to 'ray start --head --port', e.g. 10.0.0.5:6379)"
        )
    return host.strip("[]"), int(port)


class Backend:
    """Runs ``fn(shared, *args)`` for a list of argument tuples; results in the order of the tasks.

    ``fn`` must be a module-level function (workers import it by name) and pure: its result may
    depend only on ``shared`` and its arguments.
    """

    kind = BackendKind.LOCAL
    #: processes working in parallel (the engines size their tasks by it; results never depend on it)
    workers = 1

    def share(self, obj: Any) -> Any:
        """A handle to ``obj`` that tasks receive as ``shared`` (shipped to each worker once)."""
        return obj

    def map(
        self,
        fn: Callable[..., Any],
        shared: Any,
        tasks: Sequence[tuple[Any, ...]],
        *,
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """``[fn(shared, *args) for args in tasks]``; ``on_result(i, result)`` as each task finishes."""
        out = []
        for i, args in enumerate(tasks):
            res = fn(shared, *args)
            if on_result is not None:
                on_result(i, res)
            out.append(res)
        return out


LOCAL = Backend()


def open_backend(options: BackendOptions | None = None) -> Backend:
    """The backend ``options`` ask for (the local one by default).

    For ``ray``: a Ray runtime already initialised in this process is used as it is; otherwise one
    is started on this machine (``address`` None) or the cluster at ``address`` is joined.

    Raises:
        DependencyNotInstalled: ``ray`` without the Ray extra.
        BackendError: no Ray cluster answers at ``address`` within ``connect_timeout`` seconds.
    """
    options = options or BackendOptions()
    options.validate()
    if options.kind is BackendKind.LOCAL:
        return LOCAL
    return RayBackend(options)


def import_ray(options: BackendOptions | None = None) -> Any:
    """The ``ray`` module, or :class:`DependencyNotInstalled` naming the extra.

    When ``options`` joins a cluster (``address``) and Ray is not imported yet, Ray's connection waits
    are first bounded by ``connect_timeout`` (Ray reads them from the environment once, on import; by
    default it retries for minutes): call this before anything imports Ray.
    """
    if options is not None and options.address is not None and "ray" not in sys.modules:
        timeout = str(max(1, round(options.connect_timeout)))
        for key, value in (
            ("RAY_gcs_server_port_wait_time_s", "1"),
            ("RAY_py_gcs_connect_timeout_s", timeout),
            ("RAY_gcs_rpc_server_connect_timeout_s", timeout),
        ):
            os.environ.setdefault(key, value)
    return require("ray", "ray", purpose="--backend ray")


class RayBackend(Backend):
    """Tasks run as Ray tasks (one CPU each); shared objects go to the object store once (``ray.put``)
    and each worker process deserialises a shared object once (a small per-process cache)."""

    kind = BackendKind.RAY

    def __init__(self, options: BackendOptions) -> None:
        self.options = options
        ray = self._ray = _connect(options)
        _register_serializers(ray)
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._task = ray.remote(num_cpus=1, max_retries=2)(_run_task)

    def share(self, obj: Any) -> Any:
        try:
            return _Shared(self._ray.put(obj))
        except (TypeError, ValueError, AttributeError, RuntimeError) as exc:  # pickling an unpicklable part
            raise BackendError(
                f"cannot ship this job to Ray workers: a part of it cannot be serialised "
                f"({str(exc).splitlines()[0][:300]}); a TorchScript policy can be exported "
                "to ONNX (which ships), or use --backend local"
            ) from None

    def map(
        self,
        fn: Callable[..., Any],
        shared: Any,
        tasks: Sequence[tuple[Any, ...]],
        *,
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        ray = self._ray
        if not isinstance(shared, _Shared):
            shared = self.share(shared)
        refs = [self._task.remote(fn, shared, *args) for args in tasks]
        out: list[Any] = [None] * len(refs)
        pending = list(refs)
        raylet = _local_raylet(ray)
        try:
            _collect(ray, raylet, refs, pending, out, on_result)
        except ray.exceptions.RayTaskError as exc:
            _cancel(ray, pending)
            cause = getattr(exc, "cause", None)
            if isinstance(cause, RlverifyError):  # bad input found by a worker: the same error as locally
                raise cause from None
            raise
        except ray.exceptions.RayError as exc:  # Ray itself failed: a worker or the node died, an object was lost
            _cancel(ray, pending)
            message = _ray_failure(exc)
            if isinstance(exc, ray.exceptions.LocalRayletDiedError):
                _shut_down_dead_runtime(ray)
            raise BackendError(message) from None
        return out


def _collect(
    ray: Any,
    raylet: Any,
    refs: list[Any],
    pending: list[Any],
    out: list[Any],
    on_result: Callable[[int, Any], None] | None,
) -> None:
    """Wait for the tasks ``refs`` one at a time, each result put at its task's place in ``out`` (``pending``: the
    tasks not finished yet, kept up to date for the caller to cancel); the raylet's death noticed between waits."""
    index = {ref: i for i, ref in enumerate(refs)}
    while pending:
        ready, pending[:] = ray.wait(pending, num_returns=1, timeout=_RAYLET_CHECK_S)
        if not ready and not _alive(raylet):
            raise ray.exceptions.LocalRayletDiedError()
        for ref in ready:
            res = ray.get(ref)
            out[index[ref]] = res
            if on_result is not None:
                on_result(index[ref], res)


def _cancel(ray: Any, refs: Sequence[Any]) -> None:
    """Abandon the tasks left after one failed. Their errors are not fetched (the first is the one reported), and Ray
    logs each such error with its remote traceback once its reference goes ("Unhandled error"); Ray's one switch
    for that is this process's environment, read each time."""
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    for ref in refs:
        try:
            ray.cancel(ref)
        except Exception:  # the runtime may be gone already: nothing left to cancel
            pass


#: seconds between checks, while tasks run, that the raylet on this machine is alive
_RAYLET_CHECK_S = 0.5


def _local_raylet(ray: Any) -> Any:
    """The raylet process this driver's tasks go through (a ``psutil.Process``), found by its socket; None if not
    found (then its death is noticed by Ray alone, which may be too late: :func:`_shut_down_dead_runtime`)."""
    import psutil  # Ray's own copy (ray/thirdparty_files, on the path once ray is imported)

    node = getattr(getattr(ray._private.worker, "global_worker", None), "node", None)
    socket_name = getattr(node, "raylet_socket_name", None)
    if not socket_name:
        return None
    flag = f"--raylet_socket_name={socket_name}"
    for proc in psutil.process_iter(["cmdline"]):
        if flag in (proc.info["cmdline"] or ()):
            return proc
    return None


def _alive(proc: Any) -> bool:
    """Whether ``proc`` (a ``psutil.Process``, or None: unknown) still runs (a killed child not yet reaped does not)."""
    import psutil

    if proc is None:
        return True
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _shut_down_dead_runtime(ray: Any) -> None:
    """Disconnect from a Ray runtime whose local raylet died, before its driver tries to restore the lost objects
    (the shared job): once the node is declared dead (about 15 s after its raylet), Ray puts an error object for each
    lost object into the dead raylet's object store and, failing, ends the process with exit code 1 (``QuickExit``),
    whatever the caller is doing; hence also the check of the raylet while tasks run (:func:`_local_raylet`). The
    runtime cannot run tasks again; the next :func:`open_backend` starts or joins a new one."""
    try:
        ray.shutdown()
    except Exception as exc:  # a runtime half gone may fail to disconnect: it is unusable either way
        log.debug("shutting down the Ray runtime whose raylet died failed: %s", exc)


def _ray_failure(exc: BaseException) -> str:
    """One line naming what failed in Ray (not in the task's own code)."""
    import ray  # lazy: ray, start-up

    first = (str(exc).strip().splitlines() or [""])[0][:300]
    if isinstance(exc, ray.exceptions.WorkerCrashedError):
        return (
            "a Ray worker process died while running a task, and again on each of its retries (killed, out of "
            f"memory, or crashed: {type(exc).__name__}); the result would be incomplete, so there is none. "
            "Check the workers' memory, or use --backend local"
        )
    if isinstance(
        exc,
        ray.exceptions.ActorDiedError
        | ray.exceptions.LocalRayletDiedError
        | ray.exceptions.NodeDiedError
        | ray.exceptions.RaySystemError
        | ray.exceptions.ObjectLostError,
    ):
        return (
            f"the Ray runtime failed while running tasks ({type(exc).__name__}: {first}): a node, its raylet or "
            "an object was lost; the result would be incomplete, so there is none (rerun, or use --backend local)"
        )
    return f"Ray failed while running tasks ({type(exc).__name__}: {first}); rerun, or use --backend local"


class _Shared:
    """An object in Ray's object store; wrapped so that Ray passes the reference, not the value, to tasks."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref


#: per worker process: shared objects already deserialised (object id -> object), most recent last
_CACHE: OrderedDict[str, Any] = OrderedDict()
_CACHE_SIZE = 4


def _resolve(shared: Any) -> Any:
    if not isinstance(shared, _Shared):
        return shared
    key = shared.ref.hex()
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    import ray  # lazy: ray, start-up

    obj = ray.get(shared.ref)
    _CACHE[key] = obj
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return obj


def _run_task(fn: Callable[..., Any], shared: Any, *args: Any) -> Any:
    return fn(_resolve(shared), *args)


def _connect(options: BackendOptions) -> Any:
    if options.address not in (None, "auto"):
        _check_reachable(options.address, options.connect_timeout)
    ray = import_ray(options)
    if ray.is_initialized():
        log.info("using the Ray runtime already initialised in this process")
        return ray
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
        "configure_logging": False,
    }
    _errors_to_stderr()
    t0 = time.perf_counter()
    if options.address is None:
        ray.init(address="local", num_cpus=options.num_cpus, **kwargs)  # a new runtime, never one found running
        log.info("started a local Ray runtime (%.1f s)", time.perf_counter() - t0)
        return ray
    try:
        ray.init(address=options.address, **kwargs)
    except _authentication_errors(ray) as exc:
        raise BackendError(_needs_token(options.address, exc)) from None
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        refused = _authentication_refused(options.address)
        if refused is not None:
            raise BackendError(_needs_token(options.address, refused)) from None
        raise BackendError(
            f"--address {options.address}: no Ray cluster answered within "
            f"{time.perf_counter() - t0:.0f} s ({type(exc).__name__}: {exc}); start one with "
            "'ray start --head --port PORT' on the head node and pass --address HEAD:PORT, or drop "
            "--address to start Ray on this machine"
        ) from None
    log.info("joined the Ray cluster at %s (%.1f s)", options.address, time.perf_counter() - t0)
    return ray


def _authentication_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's authentication error class (Ray >= 2.5x with token authentication), or nothing to catch."""
    cls = getattr(ray.exceptions, "AuthenticationError", None)
    return (cls,) if isinstance(cls, type) else ()


def _authentication_refused(address: str) -> BaseException | None:
    """The :class:`ray.exceptions.AuthenticationError` the head at ``address`` answers a client without its token
    with (a direct probe of its GCS; None: it does not refuse for that, or the probe is not possible)."""
    import ray  # lazy: ray, start-up

    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]  # ray's _raylet.pyi omits it; the module has it

        GcsClient(address=address, cluster_id=None)
    except _authentication_errors(ray) as exc:
        return exc
    except Exception:  # a private API: any other failure means no answer about authentication
        return None
    return None


def _needs_token(address: str, exc: BaseException) -> str:
    mode = os.environ.get("RAY_AUTH_MODE", "disabled")
    first = (str(exc).strip().splitlines() or [""])[0].split(". Note:")[0][:200]
    return (
        f"--address {address}: the Ray cluster there requires authentication ({first}); RAY_AUTH_MODE is "
        f"'{mode}' here: set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or a file named by "
        "RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token)"
    )


def _errors_to_stderr() -> None:
    """Ray's driver prints the errors its raylets publish (a worker died, a task is retried, the raylet's last 20
    log lines...) on stdout even with ``log_to_driver=False``; log them instead (stderr: the first line of each as a
    warning, the rest at debug level), so that stdout holds only rlverify's output (e.g. --json)."""
    try:
        from ray._private import worker  # lazy: ray, start-up
    except ImportError:  # pragma: no cover  (a Ray without this module: nothing to redirect)
        return
    if getattr(worker.print_to_stdstream, "_rlverify", False):
        return

    def to_log(data: dict[str, Any], ignore_prefix: bool) -> None:
        source = data.get("pid", "ray")
        for message in data.get("lines", ()):
            lines = str(message).strip().splitlines() or [""]
            log.warning("Ray (%s): %s%s", source, lines[0][:300], " [...]" if len(lines) > 1 else "")
            if len(lines) > 1:
                log.debug("Ray (%s), continued:\n%s", source, "\n".join(lines[1:]))

    to_log._rlverify = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_log


def _check_reachable(address: str, timeout: float) -> None:
    """A TCP connection to ``address`` within ``timeout`` s, else :class:`BackendError` (refused, unknown host...)."""
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.gaierror as exc:
        raise BackendError(f"--address {address}: unknown host '{host}' ({exc.strerror})") from None
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise BackendError(
            f"--address {address}: cannot reach a Ray head node there ({why} after at most "
            f"{timeout:g} s); is 'ray start --head --port {port}' running on {host}?"
        ) from None


# ---------------------------------------------------------------------------------------------- shipping


def _register_serializers(ray: Any) -> None:
    """Teach Ray to ship an ONNX policy: its onnxruntime session cannot be pickled, so the policy travels
    as the ONNX file's bytes plus its resolved features, actions and output kind, and the worker loads it
    with :class:`~rlverify.policies.onnx_policy.OnnxPolicy` itself (the file need not exist on the worker)."""
    from rlverify.policies.onnx_policy import OnnxPolicy  # lazy: onnx policies load onnxruntime; only with Ray

    ray.util.register_serializer(OnnxPolicy, serializer=_onnx_state, deserializer=_onnx_restore)


def _onnx_state(policy: Any) -> dict[str, Any]:
    model = getattr(policy, "_model", None)
    data = model.SerializeToString() if model is not None else Path(policy.path).read_bytes()
    plain = {k: v for k, v in policy.__dict__.items() if isinstance(v, (str, int, float, bool, tuple, Path, type(None)))}
    return {
        "onnx": data,
        "features": list(policy.features),
        "actions": list(policy.actions),
        "output": policy.output,
        "attributes": plain,
    }


def _onnx_restore(state: dict[str, Any]) -> Any:
    from rlverify.policies.onnx_policy import OnnxPolicy  # lazy: onnx policies load onnxruntime; only with Ray
    from rlverify.policies.settings import DEFAULT_POLICY_THREADS  # lazy: with the line above

    threads = state["attributes"].get("threads", DEFAULT_POLICY_THREADS)  # the driver's session's threads
    # the network from its bytes, in memory (no temporary file on the worker)
    policy = OnnxPolicy(
        state["onnx"], features=state["features"], actions=state["actions"], output=state["output"], threads=threads
    )
    policy.__dict__.update(state["attributes"])  # the driver's name, path and other plain settings
    return policy


def chunks(start: int, stop: int, size: int) -> list[tuple[int, int]]:
    """``[(a, b), ...]`` consecutive half-open ranges of at most ``size`` covering ``[start, stop)``."""
    size = max(1, int(size))
    return [(a, min(stop, a + size)) for a in range(start, stop, size)]
