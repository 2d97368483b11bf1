"""nixl._bindings over wcomm: the constants, enums, error classes and descriptor lists of NIXL's
pybind11 module, in plain Python (no NIXL build needed).

Descriptor lists are data only (NIXL's are too); which memory types can be moved is decided
where they are used: wcomm moves host memory (DRAM_SEG) only, and the agent refuses the rest
with that reason."""

from __future__ import annotations

import enum
from typing import Any, List

NIXL_INIT_AGENT = ""        # prep_xfer_dlist's agent name for the initiator's own (local) side
DEFAULT_COMM_PORT = 8888    # NIXL's default metadata listener port


class nixl_mem_t(enum.IntEnum):
    DRAM_SEG = 0
    VRAM_SEG = 1
    BLK_SEG = 2
    OBJ_SEG = 3
    FILE_SEG = 4


class nixl_xfer_op_t(enum.IntEnum):
    NIXL_READ = 0
    NIXL_WRITE = 1


class nixl_status_t(enum.IntEnum):
    NIXL_IN_PROG = 1
    NIXL_SUCCESS = 0
    NIXL_ERR_NOT_POSTED = -1
    NIXL_ERR_INVALID_PARAM = -2
    NIXL_ERR_BACKEND = -3
    NIXL_ERR_NOT_FOUND = -4
    NIXL_ERR_MISMATCH = -5
    NIXL_ERR_NOT_ALLOWED = -6
    NIXL_ERR_REPOST_ACTIVE = -7
    NIXL_ERR_UNKNOWN = -8
    NIXL_ERR_NOT_SUPPORTED = -9
    NIXL_ERR_REMOTE_DISCONNECT = -10
    NIXL_ERR_CANCELED = -11
    NIXL_ERR_NO_TELEMETRY = -12


class nixl_thread_sync_t(enum.IntEnum):
    NIXL_THREAD_SYNC_NONE = 0
    NIXL_THREAD_SYNC_STRICT = 1
    NIXL_THREAD_SYNC_RW = 2
    NIXL_THREAD_SYNC_DEFAULT = 0


class nixl_cost_t(enum.IntEnum):
    NIXL_COST_ANALYTICAL_BACKEND = 0


# pybind11's export_values(): the enum members are module attributes too.
for _enum in (nixl_mem_t, nixl_xfer_op_t, nixl_status_t, nixl_thread_sync_t, nixl_cost_t):
    globals().update(_enum.__members__)
del _enum


class nixlError(Exception):
    """Base of the NIXL error classes here (NIXL's derive from Exception directly). The message
    starts with the status name, as NIXL's do, followed by wcomm's reason."""

    status = nixl_status_t.NIXL_ERR_UNKNOWN

    def __init__(self, reason: str = "") -> None:
        super().__init__(f"{self.status.name}: {reason}" if reason else self.status.name)
        self.reason = reason


def _error(name: str, status: nixl_status_t) -> type:
    return type(name, (nixlError,), {"status": status, "__module__": __name__})


nixlNotPostedError = _error("nixlNotPostedError", nixl_status_t.NIXL_ERR_NOT_POSTED)
nixlInvalidParamError = _error("nixlInvalidParamError", nixl_status_t.NIXL_ERR_INVALID_PARAM)
nixlBackendError = _error("nixlBackendError", nixl_status_t.NIXL_ERR_BACKEND)
nixlNotFoundError = _error("nixlNotFoundError", nixl_status_t.NIXL_ERR_NOT_FOUND)
nixlMismatchError = _error("nixlMismatchError", nixl_status_t.NIXL_ERR_MISMATCH)
nixlNotAllowedError = _error("nixlNotAllowedError", nixl_status_t.NIXL_ERR_NOT_ALLOWED)
nixlRepostActiveError = _error("nixlRepostActiveError", nixl_status_t.NIXL_ERR_REPOST_ACTIVE)
nixlUnknownError = _error("nixlUnknownError", nixl_status_t.NIXL_ERR_UNKNOWN)
nixlNotSupportedError = _error("nixlNotSupportedError", nixl_status_t.NIXL_ERR_NOT_SUPPORTED)
nixlRemoteDisconnectError = _error("nixlRemoteDisconnectError", nixl_status_t.NIXL_ERR_REMOTE_DISCONNECT)
nixlCancelledError = _error("nixlCancelledError", nixl_status_t.NIXL_ERR_CANCELED)
nixlNoTelemetryError = _error("nixlNoTelemetryError", nixl_status_t.NIXL_ERR_NO_TELEMETRY)


class nixlXferTelemetry:
    """One transfer's telemetry: startTime (microseconds on the monotonic clock, as NIXL's
    steady clock), postDuration and xferDuration (microseconds), totalBytes, descCount; plus
    wcomm's backendName (the engine that moved it: cma, ucx, tcp or loopback)."""

    __slots__ = ("startTime", "postDuration", "xferDuration", "totalBytes", "descCount", "backendName")

    def __init__(self, startTime: int = 0, postDuration: int = 0, xferDuration: int = 0, totalBytes: int = 0,
                 descCount: int = 0, backendName: str = "") -> None:
        self.startTime, self.postDuration, self.xferDuration = startTime, postDuration, xferDuration
        self.totalBytes, self.descCount, self.backendName = totalBytes, descCount, backendName

    def __repr__(self) -> str:
        return "nixlXferTelemetry(%s)" % ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)


def _mem(value: Any) -> nixl_mem_t:
    try:
        return nixl_mem_t(value)
    except ValueError:
        raise TypeError(f"not a nixl_mem_t: {value!r}") from None


class _DList:
    """What nixlXferDList and nixlRegDList share: a memory type and a list of tuples."""

    _width = 3

    def __init__(self, type: Any, descs: Any = 0, *_is_sorted: Any) -> None:  # noqa: A002 (NIXL's name)
        self._type = _mem(type)
        if isinstance(descs, int):  # (type, init_size): that many empty descriptors
            self._descs: List[tuple] = [self._blank()] * descs
        elif hasattr(descs, "ndim") and hasattr(descs, "shape"):  # Nx3 numpy array
            if descs.ndim != 2 or descs.shape[1] != 3:
                raise ValueError("descs must be a Nx3 numpy array")
            if descs.dtype.kind not in "iu" or descs.dtype.itemsize != 8:
                raise ValueError("descs must be a Nx3 numpy array of uint64 or int64")
            self._descs = [self._from_row(r) for r in descs.tolist()]
        elif isinstance(descs, list):
            self._descs = [self._check(d) for d in descs]
        else:
            raise TypeError(f"descs must be a list of tuples, a Nx3 numpy array or a size, not {descs.__class__.__name__}")

    def _blank(self) -> tuple:
        return (0, 0, 0)

    def _from_row(self, row: List[int]) -> tuple:
        return (int(row[0]), int(row[1]), int(row[2]))

    def _check(self, desc: Any) -> tuple:
        if not isinstance(desc, tuple):
            raise TypeError("Each descriptor must be a tuple when provided as a list")
        if len(desc) != self._width:
            raise ValueError(f"Each descriptor tuple must have exactly {self._width} elements")
        addr, length, dev = (int(x) for x in desc[:3])
        if addr < 0 or length < 0 or dev < 0:
            raise ValueError(f"descriptor {desc!r}: address, length and device id must be >= 0")
        return (addr, length, dev) + tuple(desc[3:])

    def getType(self) -> nixl_mem_t:
        return self._type

    def descCount(self) -> int:
        return len(self._descs)

    def isEmpty(self) -> bool:
        return not self._descs

    def __len__(self) -> int:
        return len(self._descs)

    def __getitem__(self, i: int) -> tuple:
        return self._descs[i]

    def __setitem__(self, i: int, desc: tuple) -> None:
        self._descs[i] = self._check(desc)

    def __iter__(self):
        return iter(self._descs)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._type == self._type and other._descs == self._descs

    def addDesc(self, desc: tuple) -> None:
        self._descs.append(self._check(desc))

    append = addDesc

    def index(self, desc: tuple) -> int:
        try:
            return self._descs.index(self._check(desc))
        except ValueError:
            raise nixlNotFoundError(f"descriptor {desc!r} is not in the list") from None

    def remDesc(self, i: int) -> None:
        if not 0 <= i < len(self._descs):
            raise IndexError(f"descriptor index {i} out of range (the list has {len(self._descs)})")
        del self._descs[i]

    def clear(self) -> None:
        self._descs.clear()

    def print(self) -> None:
        print(repr(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._type.name}, {self._descs!r})"

    def descs(self) -> List[tuple]:
        """wcomm extra: the descriptors as a list of tuples (a copy)."""
        return list(self._descs)


class nixlXferDList(_DList):
    """Transfer descriptors: (addr, len, dev_id) tuples with one memory type."""


class nixlRegDList(_DList):
    """Registration descriptors: (addr, len, dev_id, meta_info) tuples with one memory type
    (indexing returns meta_info as bytes, as NIXL does)."""

    _width = 4

    def _blank(self) -> tuple:
        return (0, 0, 0, b"")

    def _from_row(self, row: List[int]) -> tuple:
        return (int(row[0]), int(row[1]), int(row[2]), b"")

    def _check(self, desc: Any) -> tuple:
        base = super()._check(desc)
        meta = base[3]
        return base[:3] + (meta.encode() if isinstance(meta, str) else bytes(meta),)

    def trim(self) -> nixlXferDList:
        """The same descriptors without their meta info, as a transfer list."""
        return nixlXferDList(self._type, [d[:3] for d in self._descs])


def status_str(status: int) -> str:
    """NIXL's nixlEnumStrings::statusStr."""
    return nixl_status_t(status).name

