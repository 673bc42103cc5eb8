"""The one way rlverify writes a file: atomically, never over a file it was not allowed to replace.

Every writer in the package (results, CSV/NPZ tables, figures, ONNX policies, sidecars, templates,
reports, generated models) goes through :func:`publishing` (or :func:`write_text` /
:func:`write_bytes` / :func:`save_figure` built on it):

1. :func:`check_target` refuses a bad target before any work: an existing file without ``force``,
   a directory (even with ``force``), a device or other non-regular file (``/dev/full``), a parent
   that is not a directory, ``/proc`` and ``/sys``, a directory the user cannot write.
2. The content goes to a temporary file *in the target's directory* (same file system), which is
   flushed and ``fsync``-ed: a full disk (ENOSPC) is an error and leaves no truncated file.
3. It is published atomically. Without ``force`` by ``os.link`` (no-clobber: a file that appeared
   meanwhile, e.g. a second run writing the same ``--out``, is never replaced: the second writer
   gets an error), with ``force`` by ``os.replace``. Either way a reader sees the old file or the
   new one, never a half-written one.
4. Inside :func:`all_or_nothing` (every CLI command runs in one) a failure undoes every file the block
   published: a command that fails has written nothing (the CSV written before the JSON hit a full disk
   is removed, a file replaced with ``force`` is restored).

Errors are :class:`FileWriteError` (exit code 2 in the CLI) with one line naming the file and the
cause. :func:`read_input` is the matching way to read a small input file: a regular file only (a pipe would block,
``/dev/zero`` never end), up to a size bound. This module is at the bottom of the layers: it imports only
:mod:`rlverify.errors`.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from rlverify.errors import InputFileError

__all__ = [
    "FileWriteError",
    "all_or_nothing",
    "check_input",
    "check_target",
    "plain_figure_text",
    "private_temp_dir",
    "published",
    "publishing",
    "read_input",
    "save_figure",
    "write_bytes",
    "write_text",
]

#: pseudo file systems whose "files" are kernel interfaces, never outputs
_KERNEL_DIRS = ("/proc", "/sys", "/dev")


class FileWriteError(InputFileError):
    """An output file cannot be written (exists without ``--force``, bad target, disk full, no permission)."""


def read_input(path: str | Path, what: str, max_bytes: int) -> bytes:
    """The bytes of input file ``path`` (``what`` names it: "properties file"), refusing before reading what is no
    regular file (a directory, a FIFO that would block until someone writes, a device such as ``/dev/zero``) or is
    larger than ``max_bytes``. Opened without blocking and checked again once open (the path may change meanwhile).

    Raises:
        InputFileError: missing, not a regular file, too large, or unreadable.
    """
    check_input(path, what, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the {what} ({_describe(exc)})") from None
    with os.fdopen(fd, "rb") as file:
        _check_input(path, what, os.fstat(fd), max_bytes)
        try:
            data = file.read(max_bytes + 1)
        except OSError as exc:
            raise InputFileError(f"{path}: cannot read the {what} ({_describe(exc)})") from None
    if len(data) > max_bytes:
        raise InputFileError(f"{path}: the {what} is larger than {max_bytes:,} bytes (it grew while being read)")
    return data


def check_input(path: str | Path, what: str, max_bytes: int | None = None) -> None:
    """Refuse input file ``path`` (``what`` names it: "model file") before it is opened: missing, a directory, no
    regular file (a FIFO would block the reader), larger than ``max_bytes`` (None: any size).

    Raises:
        InputFileError: naming the file and the cause.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputFileError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the {what} ({_describe(exc)})") from None
    _check_input(path, what, st, max_bytes)


def _check_input(path: str | Path, what: str, st: os.stat_result, max_bytes: int | None) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise InputFileError(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(f"{path}: not a regular file (a pipe, device or socket), not a {what}")
    if max_bytes is not None and st.st_size > max_bytes:
        raise InputFileError(f"{path}: {st.st_size:,} bytes, more than the {max_bytes:,} a {what} may have")


def _force_hint(what: str) -> str:
    """How to allow replacing: the CLI's ``--force`` when an option names the file, else the API's ``force=True``."""
    return "pass --force to overwrite it" if what else "pass force=True to overwrite it"


def _describe(exc: OSError) -> str:
    """An OSError as a short cause (``no space left on device``)."""
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno == errno.EDQUOT:
        return "disk quota exceeded"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    text = exc.strerror or exc.__class__.__name__
    return text[:1].lower() + text[1:]


def _is_kernel_path(path: Path) -> bool:
    resolved = str(path.resolve(strict=False))
    return any(resolved == d or resolved.startswith(d + "/") for d in _KERNEL_DIRS)


def check_target(path: str | Path, *, force: bool = False, what: str = "") -> Path:
    """Refuse ``path`` as an output file before any work is done (see the module docstring).

    Args:
        path: the file to write.
        force: whether an existing regular file may be replaced.
        what: the option naming the file in messages (``"--out"``), or ``""``.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        FileWriteError: one line naming the file and why it cannot be written.
    """
    path = Path(path)
    name = f"{what} {path}" if what else str(path)
    if not path.name or path.name in (".", ".."):
        raise FileWriteError(f"{name}: not a file name")
    if _is_kernel_path(path):
        top = path.resolve(strict=False).parts[1]
        raise FileWriteError(f"{name}: /{top} is a system file system, not a place for output files")
    st = _target_stat(path, name, force, what)
    if st is not None:
        _refuse_existing(st, name, force, what)
    parent = _existing_ancestor(path.parent, name)
    if not os.access(parent, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(parent) else "permission denied"
        raise FileWriteError(f"{name}: cannot write to the directory {parent} ({why})")
    return path


def _target_stat(path: Path, name: str, force: bool, what: str) -> os.stat_result | None:
    """What is at ``path`` (None: nothing; a link to a missing file is refused without ``force``)."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path) and not force:  # a link to a missing file: replacing it still replaces the user's link
            raise FileWriteError(f"{name}: a symbolic link (to a missing file) is there; {_force_hint(what)}") from None
        return None
    except NotADirectoryError:
        raise FileWriteError(f"{name}: a parent of the file is not a directory") from None
    except OSError as exc:
        raise FileWriteError(f"{name}: cannot write there ({_describe(exc)})") from None


def _refuse_existing(st: os.stat_result, name: str, force: bool, what: str) -> None:
    """Refuse an existing target: a directory, a special file, or a regular file without ``force``."""
    if stat.S_ISDIR(st.st_mode):
        raise FileWriteError(f"{name}: is a directory; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise FileWriteError(f"{name}: not a regular file (a device, pipe or socket); give a file name")
    if not force:
        raise FileWriteError(f"{name}: file exists; {_force_hint(what)}")


def _read_only(directory: Path) -> bool:
    """Whether ``directory`` is on a file system mounted read-only (``os.access`` says no to it as to a permission)."""
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _existing_ancestor(directory: Path, name: str) -> Path:
    """The nearest existing ancestor of ``directory`` (which the writer would create), which must be a directory."""
    current = directory if str(directory) else Path(".")
    while True:
        try:
            st = os.stat(current)
        except FileNotFoundError:
            if current.parent == current:
                raise FileWriteError(f"{name}: the directory {directory} cannot be created") from None
            current = current.parent
            continue
        except NotADirectoryError:
            raise FileWriteError(f"{name}: a parent of the file is not a directory") from None
        except OSError as exc:
            raise FileWriteError(f"{name}: cannot write there ({_describe(exc)})") from None
        if not stat.S_ISDIR(st.st_mode):
            raise FileWriteError(f"{name}: {current} is not a directory")
        return current


def _umask() -> int:
    """The process umask (read without changing it where /proc tells it)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def publishing(path: str | Path, *, force: bool = False, private: bool = False, what: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; when the block ends without an exception, publish it as ``path``.

    For writers that need a file name (``onnx.save``, ``Figure.savefig``, ``tarfile.open``); the temporary
    name keeps ``path``'s suffix (lower case) so that format detection works. ``force`` is checked
    before (by :func:`check_target`) and again at publication: without it, a file that appeared at
    ``path`` meanwhile is never replaced. ``private`` files are readable by the user only (0600), others
    get the usual permissions (0666 less the umask). On any error the temporary file is removed. The data is
    flushed to disk (``fsync``) before publication, except in this process's :func:`private_temp_dir`, whose
    files are removed at exit (a benchmark's generated PRISM text: 80 ms of a small verification's start-up).

    Raises:
        FileWriteError: a bad target, a full disk, or a file that appeared at ``path`` without ``force``.
    """
    path = check_target(path, force=force, what=what)
    name = f"{what} {path}" if what else str(path)
    directory = path.parent if str(path.parent) else Path(".")
    made = [d for d in (directory, *directory.parents) if not d.exists()]  # removed again if nothing is published
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name[:64]}.", suffix=".tmp" + path.suffix.lower(), dir=directory)
    except OSError as exc:
        _remove_dirs(made)
        raise FileWriteError(f"{name}: cannot create a file in {directory} ({_describe(exc)})") from None
    os.close(fd)
    tmp = Path(tmp_name)
    published = False
    try:
        yield tmp
        try:
            _seal(tmp, path, private)
            backup = _publish(tmp, path, force=force, name=name, hint=_force_hint(what))
            published = True
            _record(path, backup, made)
        except OSError as exc:
            raise FileWriteError(f"{name}: cannot write the file ({_describe(exc)}); nothing was written") from None
    except OSError as exc:  # raised by the writer in the block (e.g. ENOSPC while writing)
        raise FileWriteError(f"{name}: cannot write the file ({_describe(exc)}); nothing was written") from None
    finally:
        if not published:
            with contextlib.suppress(OSError):
                tmp.unlink()
            _remove_dirs(made)


def _seal(tmp: Path, path: Path, private: bool) -> None:
    """Give ``tmp`` its permissions and flush it to disk (not in this process's private temporary directories)."""
    os.chmod(tmp, 0o600 if private else 0o666 & ~_umask())
    if not any(d in path.parents for d in _PRIVATE.values()):
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # the data is on disk before the name points at it (ENOSPC surfaces here at the latest)
        finally:
            os.close(fd)


def _remove_dirs(made: list[Path]) -> None:
    """Remove the directories :func:`publishing` created (innermost first), those still empty."""
    for directory in made:
        try:
            directory.rmdir()
        except OSError:
            return


# ---------------------------------------------------------------------------------------------
# all or nothing: the files a block published, undone when it fails

#: one journal per open all_or_nothing() block (innermost last): (published path, its identity, the
#: replaced file's hard-linked backup or None, the directories created for it)
_Entry = tuple[Path, tuple[int, ...], "Path | None", list[Path]]
_JOURNALS: list[list[_Entry]] = []
_JOURNAL_LOCK = threading.Lock()


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """The files published in this block (by any thread) stay only if the block ends without an exception.

    On an exception each is undone, newest first: a new file is removed (if it is still the one written), a file
    replaced with ``force`` gets its old content back (kept meanwhile as a hard link beside it). The CLI runs every
    command in one, so a command that fails (a full disk at its second file, a later error) leaves no output.
    """
    journal: list[_Entry] = []
    with _JOURNAL_LOCK:
        _JOURNALS.append(journal)
    ok = False
    try:
        yield
        ok = True
    finally:
        with _JOURNAL_LOCK:
            _JOURNALS.remove(journal)
            outer = _JOURNALS[-1] if _JOURNALS else None
            if ok and outer is not None:
                outer.extend(journal)  # an outer block that fails still undoes them
        if ok and outer is None:
            for _, _, backup, _ in journal:
                if backup is not None:
                    with contextlib.suppress(OSError):
                        backup.unlink()
        elif not ok:
            for path, identity, backup, made in reversed(journal):
                _undo(path, identity, backup)
                _remove_dirs(made)


def _undo(path: Path, identity: tuple[int, ...], backup: Path | None) -> None:
    """Take back one publication: only the file rlverify wrote (same inode) is removed or replaced by its backup."""
    with contextlib.suppress(OSError):
        if _identity(os.lstat(path)) == identity:
            if backup is not None:
                os.replace(backup, path)
                return
            path.unlink()
    if backup is not None:
        with contextlib.suppress(OSError):
            backup.unlink()


def _identity(st: os.stat_result) -> tuple[int, ...]:
    """A file's identity: its inode, and its change time (an inode number is reused once a file is removed)."""
    return (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size)


def _journal() -> list[_Entry] | None:
    with _JOURNAL_LOCK:
        return _JOURNALS[-1] if _JOURNALS else None


def _record(path: Path, backup: Path | None, made: list[Path]) -> None:
    """Note a publication in the innermost open :func:`all_or_nothing` block."""
    journal = _journal()
    if journal is None or any(d in path.parents for d in _PRIVATE.values()):  # scratch files, removed at exit
        return
    try:
        st = os.lstat(path)
    except OSError:
        return
    with _JOURNAL_LOCK:
        journal.append((path, _identity(st), backup, made))


def published(path: str | Path, *, made: list[Path] | None = None) -> None:
    """Note a file that a writer outside :func:`publishing` renamed into place (a chain directory's files), so that
    the open :func:`all_or_nothing` block takes it back too (and the directories ``made`` for it, innermost first)."""
    _record(Path(path), None, list(made or []))


def _backup(path: Path) -> Path | None:
    """A hard link to the file at ``path`` beside it (no data copied), to restore it if the block fails; None when
    no block is open, nothing is there, or the file system has no hard links (the replacement then stays)."""
    if _journal() is None:
        return None
    for _ in range(100):
        backup = path.with_name(f".{path.name[:64]}.{os.urandom(4).hex()}.old")
        try:
            os.link(path, backup, follow_symlinks=False)
            return backup
        except FileExistsError:
            continue
        except OSError:
            return None
    return None


def _publish(tmp: Path, path: Path, *, force: bool, name: str, hint: str) -> Path | None:
    """Give ``tmp`` the name ``path``: replacing a regular file only with ``force``, never a directory. Returns the
    replaced file's backup (see :func:`_backup`)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise FileWriteError(f"{name}: a directory appeared there while rlverify was running; nothing was written")
    if force:
        return _replace(tmp, path, st, name)
    try:
        os.link(tmp, path)  # fails if anything exists at path: never clobbers
    except FileExistsError:
        raise FileWriteError(
            f"{name}: a file appeared there while rlverify was running; {hint} (nothing was written)"
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        _publish_without_links(tmp, path, name, hint)
        return None
    tmp.unlink()
    return None


def _replace(tmp: Path, path: Path, st: os.stat_result | None, name: str) -> Path | None:
    """``force``: ``tmp`` replaces what is at ``path`` (a regular file or a link, kept as a backup, returned)."""
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise FileWriteError(f"{name}: not a regular file (a device, pipe or socket); nothing was written")
    backup = _backup(path) if st is not None else None
    try:
        os.replace(tmp, path)  # atomic; a symlink at path is replaced itself, never followed
    except OSError:
        if backup is not None:
            backup.unlink()
        raise
    return backup


def _publish_without_links(tmp: Path, path: Path, name: str, hint: str) -> None:
    """No-clobber publication on a file system without hard links: reserve the name, then replace the reservation."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        raise FileWriteError(
            f"{name}: a file appeared there while rlverify was running; {hint} (nothing was written)"
        ) from None
    os.replace(tmp, path)


def write_bytes(
    path: str | Path, data: bytes | Callable[[IO[bytes]], Any], *, force: bool = False, private: bool = False, what: str = ""
) -> Path:
    """Write ``data`` (bytes, or a function writing to a binary file object) to ``path`` atomically.

    Raises:
        FileWriteError: see :func:`publishing`.
    """
    with publishing(path, force=force, private=private, what=what) as tmp:
        with open(tmp, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
    return Path(path)


def write_text(path: str | Path, text: str, *, force: bool = False, private: bool = False, what: str = "") -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`publishing`)."""
    return write_bytes(path, text.encode("utf-8"), force=force, private=private, what=what)


# ---------------------------------------------------------------------------------------------
# figures: text is text (no mathtext), saved through publishing()


@contextlib.contextmanager
def plain_figure_text() -> Iterator[None]:
    """Matplotlib text created in this block (or this decorated function) is drawn as written: ``$x$`` is
    not mathtext.

    rlverify's figures show names the user chose (variables, labels, files, properties); a ``$`` in
    one would otherwise be parsed as TeX math, and an unbalanced one (``$\\frac``) makes saving fail.
    """
    import matplotlib  # lazy: matplotlib, start-up

    with matplotlib.rc_context({"text.parse_math": False}):
        yield


def save_figure(fig: Any, path: str | Path, *, force: bool = False, what: str = "", **savefig: Any) -> Path:
    """Save a matplotlib figure atomically as ``path`` (format from the suffix), every text drawn as written.

    Args:
        fig: a :class:`matplotlib.figure.Figure`; closed afterwards.
        path, force, what: see :func:`publishing`.
        savefig: keyword arguments of :meth:`~matplotlib.figure.Figure.savefig` (``dpi``, ``bbox_inches``).

    Raises:
        FileWriteError: see :func:`publishing`.
    """
    import matplotlib.pyplot as plt  # lazy: matplotlib, start-up
    from matplotlib.text import Text  # lazy: matplotlib, start-up

    try:
        for text in fig.findobj(Text):
            text.set_parse_math(False)
        with plain_figure_text(), publishing(path, force=force, what=what) as tmp:
            fig.savefig(tmp, format=Path(path).suffix.lower().lstrip(".") or None, **savefig)
    finally:
        plt.close(fig)
    return Path(path)


# ---------------------------------------------------------------------------------------------
# private scratch files

_PRIVATE: dict[str, Path] = {}


def private_temp_dir(purpose: str = "files") -> Path:
    """A directory only this process's user can use (0700, unpredictable name, created atomically by
    :func:`tempfile.mkdtemp`), removed when the process exits. For generated files that tools read by
    name (a benchmark's PRISM text): nobody else can plant or replace a file (or a symlink) in it."""
    if purpose not in _PRIVATE:
        directory = Path(tempfile.mkdtemp(prefix=f"rlverify-{purpose}-"))
        owner = os.getpid()

        def remove() -> None:
            if os.getpid() == owner:  # not in a forked child that runs exit handlers
                shutil.rmtree(directory, ignore_errors=True)

        atexit.register(remove)
        _PRIVATE[purpose] = directory
    return _PRIVATE[purpose]
