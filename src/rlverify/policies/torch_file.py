"""Read a PyTorch ``torch.save`` file of tensors (a state dict) with numpy alone, running no code from it.

``torch.save`` (torch >= 1.6) writes a zip: ``<root>/data.pkl`` (a pickle of the object, each tensor's storage
stored outside it as a persistent id ``('storage', <storage type>, <key>, <location>, <numel>)``),
``<root>/data/<key>`` (each storage's raw bytes), ``<root>/byteorder`` (``little`` or ``big``; absent: little)
and ``<root>/version``. A pickle can call any importable function, so this reader never lets it: its
:class:`pickle.Unpickler` resolves only an allow-list of names (``collections.OrderedDict``,
``torch._utils._rebuild_tensor_v2`` / ``_rebuild_parameter``, the storage types of :data:`STORAGE_DTYPES`), each to
this module's own stand-in, never to the real object; any other name in the pickle is refused before anything is
called. Tensors are rebuilt with numpy from the storage's bytes, offset, size and stride (element units, as torch
writes them), in native byte order, as fresh arrays (nothing aliases the file's bytes).

Every size is bounded before memory is taken: the inflated members, the pickle, each storage against its member
(``numel * itemsize`` exactly), each view against its storage, and the bytes of all tensors together. Anything
else -- a legacy (non-zip) torch file, a TorchScript archive, a forbidden name, a malformed pickle -- is a
:class:`~rlverify.errors.PolicyError` of one line naming the file and the cause.
"""

from __future__ import annotations

import io
import math
import pickle
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from rlverify.errors import PolicyError, exception_text

#: The most bytes a file's members may inflate to, and its tensors may take, in total (default).
MAX_BYTES = 256 * 2**20

#: The most bytes the pickle (``data.pkl``) may have: a state dict's is a few KB per hundred tensors.
MAX_PICKLE_BYTES = 32 * 2**20

#: The most dimensions a tensor may declare (torch's own limit is 64 too).
MAX_DIMS = 64

#: How a legacy (torch < 1.6) file starts: protocol 2, then its magic number 0x1950a86a20f9469cfc6c as a LONG1.
LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"

#: torch's storage type names (``torch.<name>`` in the pickle) -> the numpy dtype of their elements.
#: ``BFloat16Storage`` has no numpy dtype: its elements are read as float32 (exactly: bfloat16 is float32's top half).
STORAGE_DTYPES: dict[str, str] = {
    "DoubleStorage": "f8",
    "FloatStorage": "f4",
    "HalfStorage": "f2",
    "BFloat16Storage": "u2",  # converted by _AS_STORED
    "LongStorage": "i8",
    "IntStorage": "i4",
    "ShortStorage": "i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "u1",
    "ComplexFloatStorage": "c8",
    "ComplexDoubleStorage": "c16",
}


def _bfloat16(elements: np.ndarray) -> np.ndarray:
    """uint16 bfloat16 bit patterns as the float32 values they are (bfloat16 is the top 16 bits of a float32)."""
    return (elements.astype(np.uint32) << np.uint32(16)).view(np.float32)


#: the storages whose stored elements numpy reads as another type first, and how they become theirs
_AS_STORED: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "BoolStorage": lambda elements: elements != 0,
    "BFloat16Storage": _bfloat16,
}


class _Refused(pickle.UnpicklingError):
    """Raised inside the unpickler for a refused pickle; turned into a PolicyError naming the file."""


class _Storage:
    """A storage the pickle referred to: its elements (1-D, native byte order, read-only copy)."""

    __slots__ = ("array", "key", "kind")

    def __init__(self, array: np.ndarray, kind: str, key: str) -> None:
        self.array, self.kind, self.key = array, kind, key

    def __setstate__(self, state: object) -> None:
        raise _Refused("the pickle sets the state of a storage")


class _Tensor:
    """A tensor rebuilt from a storage: a fresh numpy array."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __setstate__(self, state: object) -> None:
        raise _Refused("the pickle sets the state of a tensor (a tensor subclass or its attributes)")


class _StorageType:
    """The stand-in for ``torch.<name>Storage``: only names a dtype (not callable)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __setstate__(self, state: object) -> None:
        raise _Refused(f"the pickle sets the state of torch.{self.name}")


class _StateDict(dict[object, object]):
    """The stand-in for ``collections.OrderedDict`` (a plain dict keeps insertion order). ``nn.Module.state_dict``
    pickles its ``_metadata`` attribute (versions per submodule, plain data) as the dict's state: dropped."""

    __slots__ = ()

    def __setstate__(self, state: object) -> None:
        if not isinstance(state, dict):
            raise _Refused(f"the pickle sets an OrderedDict's state to a {type(state).__name__}")


@dataclass(frozen=True)
class _Allowed:
    """A name the pickle may call, resolved to this module's own function ``fn``."""

    name: str
    fn: Callable[..., object]

    def __call__(self, *args: object) -> object:
        return self.fn(*args)

    def __setstate__(self, state: object) -> None:
        raise _Refused(f"the pickle sets the state of {self.name}")


class _Budget:
    """Bytes the tensors may still take (views are copied, so a stride-0 view of one element could be huge)."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def take(self, nbytes: int, what: str) -> None:
        if nbytes > self.left:
            raise _Refused(f"{what} would take {nbytes:,} bytes, beyond the {self.left:,} left of the file's limit")
        self.left -= nbytes


def _ordered_dict(*args: object) -> _StateDict:
    if len(args) > 1 or (args and not isinstance(args[0], (list, tuple, dict))):
        raise _Refused("collections.OrderedDict is called with arguments other than a list of pairs")
    return _StateDict(*args)


def _natural(value: object, what: str, limit: int = 2**62) -> int:
    """``value`` as a non-negative int below ``limit`` (a bool or anything else refused)."""
    if type(value) is not int or not 0 <= value < limit:
        raise _Refused(f"{what} is {_shown(value)}, not an integer in [0, {limit})")
    return value


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, (int, float, str, tuple, list, type(None))) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _rebuild_tensor(budget: _Budget) -> Callable[..., _Tensor]:
    def rebuild(
        storage: object,
        offset: object,
        size: object,
        stride: object,
        requires_grad: object = False,
        hooks: object = None,
        metadata: object = None,
    ) -> _Tensor:
        """``torch._utils._rebuild_tensor_v2``'s arguments -> the tensor's elements as a fresh array."""
        if not isinstance(storage, _Storage):
            raise _Refused(f"a tensor is rebuilt from {type(storage).__name__}, not a storage")
        if not isinstance(size, tuple) or not isinstance(stride, tuple) or len(size) != len(stride) or len(size) > MAX_DIMS:
            raise _Refused(f"a tensor's size {_shown(size)} and stride {_shown(stride)} are not tuples of one length")
        if type(requires_grad) is not bool or (hooks is not None and (not isinstance(hooks, dict) or hooks)):
            raise _Refused("a tensor has backward hooks or a requires_grad that is not a bool")
        if metadata is not None and not isinstance(metadata, dict):
            raise _Refused(f"a tensor's metadata is a {type(metadata).__name__}, not a dict")
        start = _natural(offset, "a tensor's storage offset")
        shape = tuple(_natural(s, "a tensor's size") for s in size)
        steps = tuple(_natural(s, "a tensor's stride") for s in stride)
        elements = storage.array
        numel = math.prod(shape)
        if numel and start + sum((n - 1) * s for n, s in zip(shape, steps, strict=True)) >= len(elements):
            raise _Refused(
                f"a tensor of size {shape}, stride {steps}, offset {start} reaches beyond its storage "
                f"{storage.key} of {len(elements)} elements"
            )
        if start > len(elements):
            raise _Refused(f"a tensor's offset {start} is beyond its storage {storage.key} of {len(elements)} elements")
        budget.take(numel * elements.itemsize, f"a tensor of size {shape}")
        if not numel:
            return _Tensor(np.zeros(shape, dtype=elements.dtype))
        view = np.lib.stride_tricks.as_strided(
            elements[start:], shape=shape, strides=tuple(s * elements.itemsize for s in steps), writeable=False
        )
        return _Tensor(np.array(view, copy=True, order="C"))

    return rebuild


def _rebuild_parameter(data: object, requires_grad: object, hooks: object) -> _Tensor:
    """``torch._utils._rebuild_parameter``: a Parameter is its tensor."""
    if not isinstance(data, _Tensor) or type(requires_grad) is not bool or (hooks is not None and hooks != {}):
        raise _Refused("a Parameter is rebuilt from something other than a tensor, or with backward hooks")
    return data


class _Unpickler(pickle.Unpickler):
    """Resolves only the allowed names, to stand-ins; storages from the archive's members."""

    def __init__(self, raw: bytes, archive: _Archive, budget: _Budget) -> None:
        super().__init__(io.BytesIO(raw))
        self._archive = archive
        self._allowed: dict[tuple[str, str], object] = {
            ("collections", "OrderedDict"): _Allowed("collections.OrderedDict", _ordered_dict),
            ("torch._utils", "_rebuild_tensor_v2"): _Allowed("torch._utils._rebuild_tensor_v2", _rebuild_tensor(budget)),
            ("torch._utils", "_rebuild_parameter"): _Allowed("torch._utils._rebuild_parameter", _rebuild_parameter),
            **{("torch", name): _StorageType(name) for name in STORAGE_DTYPES},
        }
        self._storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> object:
        found = self._allowed.get((str(module), str(name)))
        if found is None:
            raise _Refused(f"names {str(module)[:80]}.{str(name)[:80]}, which is not a tensor or plain data")
        return found

    def persistent_load(self, pid: object) -> _Storage:
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage":
            raise _Refused(f"refers to the outside object {_shown(pid)}, not ('storage', type, key, location, numel)")
        _, kind, key, location, numel = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not isinstance(location, str):
            raise _Refused(f"refers to a storage {_shown(pid)} without a storage type, key and location")
        count = _natural(numel, f"storage {key}'s element count")
        known = self._storages.get(key)
        if known is not None:
            if known.kind != kind.name or len(known.array) != count:
                raise _Refused(f"storage {key} is declared as {known.kind} and as {kind.name} (or with two sizes)")
            return known
        storage = _Storage(self._archive.storage(key, kind.name, count), kind.name, key)
        self._storages[key] = storage
        return storage


@dataclass(frozen=True)
class _Archive:
    """The members of a ``torch.save`` zip, read on demand."""

    zf: zipfile.ZipFile
    root: str
    byteorder: str

    def storage(self, key: str, kind: str, numel: int) -> np.ndarray:
        """Storage ``key``'s ``numel`` elements of ``kind``, 1-D, native byte order, a fresh read-only array."""
        name = f"{self.root}/data/{key}"
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise _Refused(f"refers to storage {key!r}, but the archive has no {name}") from None
        code = STORAGE_DTYPES[kind]
        dtype = np.dtype(code).newbyteorder("<" if self.byteorder == "little" else ">")
        want = numel * dtype.itemsize
        if info.file_size != want:
            raise _Refused(
                f"storage {key} is declared as {numel:,} elements of {kind} ({want:,} bytes), but {name} has "
                f"{info.file_size:,} bytes"
            )
        raw = self.zf.read(name)
        if len(raw) != want:
            raise _Refused(f"{name} inflates to {len(raw):,} bytes, not the {want:,} it declares")
        elements = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="), copy=True)
        convert = _AS_STORED.get(kind)
        if convert is not None:
            elements = convert(elements)
        elements.flags.writeable = False
        return elements


def read_state_dict(raw: bytes, where: str, *, max_bytes: int = MAX_BYTES) -> dict[str, np.ndarray]:
    """The tensors of a ``torch.save`` file's bytes holding a mapping of names to tensors (a ``state_dict``).

    Args:
        raw: the file's bytes (the zip ``torch.save`` writes, torch >= 1.6).
        where: how messages name the file (e.g. ``model.zip: policy.pth``).
        max_bytes: the most bytes its members may inflate to, and its tensors take, in total.

    Returns:
        Each name's tensor as a fresh numpy array of its shape and dtype (C-contiguous, native byte order;
        ``bfloat16`` as float32): the values torch stored, bit for bit.

    Raises:
        PolicyError: one line naming ``where`` and the cause: not a torch zip (a legacy file: re-save it), a
            TorchScript archive, a name in the pickle that is not allowed (named; nothing was called), a size
            out of bounds, an object other than a mapping of names to tensors.
    """
    found = read_object(raw, where, max_bytes=max_bytes)
    if not isinstance(found, dict):
        raise PolicyError(f"{where}: holds a {type(found).__name__}, not a state dict (a mapping of names to tensors)")
    out: dict[str, np.ndarray] = {}
    for key, value in found.items():
        if not isinstance(key, str) or not isinstance(value, np.ndarray):
            raise PolicyError(
                f"{where}: not a state dict of tensors: entry {_shown(key)} holds a {type(value).__name__}, not a tensor"
            )
        out[key] = value
    return out


#: What a file read by :func:`read_object` may hold: tensors (as arrays) in plain containers of plain values.
Plain: TypeAlias = (
    np.ndarray | dict[object, "Plain"] | list["Plain"] | tuple["Plain", ...] | str | bytes | int | float | bool | None
)


def read_object(raw: bytes, where: str, *, max_bytes: int = MAX_BYTES) -> Plain:
    """The object of a ``torch.save`` file of tensors in plain containers (a state dict, an optimizer's state):
    tensors as fresh numpy arrays (as :func:`read_state_dict`), ``OrderedDict`` as dict, plain values as they are.

    Raises:
        PolicyError: as :func:`read_state_dict` (any object but tensors and plain data refused, nothing run)."""
    return _read(raw, where, max_bytes)


def _plain(value: object) -> Plain:
    """``value`` with tensors as arrays and stand-ins refused (recursion bounded by Python's limit)."""
    if isinstance(value, _Tensor):
        return value.array
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if value is None or isinstance(value, (str, bytes, int, float)):
        return value
    what = {_Storage: "a bare storage", _StorageType: "a storage type", _Allowed: "a function"}.get(type(value))
    raise _Refused(f"holds {what or type(value).__name__}, not tensors and plain data")


def _read(raw: bytes, where: str, max_bytes: int) -> Plain:
    """The unpickled object (tensors as :class:`_Tensor`), refusing anything but tensors and plain data."""
    if not raw.startswith(b"PK"):
        if raw.startswith(LEGACY_MAGIC):
            raise PolicyError(
                f"{where}: a PyTorch file in the legacy format (torch < 1.6, not a zip), which rlverify does not read: "
                "re-save it with torch >= 1.6 (torch.save(torch.load(f, weights_only=True), f))"
            )
        what = "a bare pickle" if raw[:1] == b"\x80" else "not a zip"
        raise PolicyError(f"{where}: not a PyTorch file of tensors ({what}; torch.save writes a zip)")
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as zf:
            archive = _open(zf, where, max_bytes)
            pkl = archive.zf.getinfo(f"{archive.root}/data.pkl")
            if pkl.file_size > MAX_PICKLE_BYTES:
                raise PolicyError(
                    f"{where}: its data.pkl has {pkl.file_size:,} bytes (more than {MAX_PICKLE_BYTES:,}): not a state dict"
                )
            unpickler = _Unpickler(zf.read(pkl.filename), archive, _Budget(max_bytes))
            return _plain(unpickler.load())
    except PolicyError:
        raise
    except _Refused as exc:
        raise PolicyError(f"{where}: refused, nothing in it was run: the pickle {exc}") from None
    except EOFError:
        raise PolicyError(f"{where}: truncated (its pickle or one of its members ends early)") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError) as exc:
        raise PolicyError(f"{where}: not a readable PyTorch zip ({exception_text(exc, 200)})") from None
    except (MemoryError, RecursionError) as exc:
        raise PolicyError(f"{where}: its pickle is too large or too deep to read ({type(exc).__name__})") from None
    except Exception as exc:  # a malformed pickle raises many kinds (UnpicklingError, ValueError, TypeError, ...)
        raise PolicyError(f"{where}: not a plain tensor file (its pickle: {exception_text(exc, 200)})") from None


def _open(zf: zipfile.ZipFile, where: str, max_bytes: int) -> _Archive:
    """The archive's root folder and byte order, after bounding what its members inflate to."""
    infos = zf.infolist()
    total = sum(max(int(i.file_size), 0) for i in infos)
    if total > max_bytes:
        raise PolicyError(
            f"{where}: its members inflate to {total / 2**20:,.0f} MiB (more than {max_bytes / 2**20:,.0f} MiB); "
            "refused without inflating them"
        )
    roots = sorted({m.group(1) for i in infos if (m := re.fullmatch(r"([^/]+)/data\.pkl", i.filename))})
    if len(roots) != 1:
        if any(re.fullmatch(r"[^/]+/constants\.pkl", i.filename) for i in infos):
            raise PolicyError(f"{where}: a TorchScript archive, not a torch.save file of tensors")
        found = "no <root>/data.pkl" if not roots else f"{len(roots)} data.pkl records ({', '.join(roots[:3])})"
        raise PolicyError(f"{where}: not a torch.save zip ({found} in it)")
    root = roots[0]
    if f"{root}/constants.pkl" in zf.namelist():
        raise PolicyError(f"{where}: a TorchScript archive, not a torch.save file of tensors")
    byteorder = "little"
    if f"{root}/byteorder" in zf.namelist():
        if zf.getinfo(f"{root}/byteorder").file_size > 16:
            raise PolicyError(f"{where}: its byteorder record is not 'little' or 'big'")
        byteorder = zf.read(f"{root}/byteorder").decode("ascii", "replace").strip()
        if byteorder not in ("little", "big"):
            raise PolicyError(f"{where}: its byteorder record is {byteorder[:16]!r}, not 'little' or 'big'")
    return _Archive(zf, root, byteorder)


def load_state_dict(path: str, *, max_bytes: int = MAX_BYTES) -> dict[str, np.ndarray]:
    """:func:`read_state_dict` of the file at ``path`` (refused unread if larger than ``max_bytes``).

    Raises:
        PolicyError: as :func:`read_state_dict`, or the file cannot be read (one line)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise PolicyError(f"{path}: larger than {max_bytes / 2**20:,.0f} MiB; not read")
    return read_state_dict(raw, str(path), max_bytes=max_bytes)
