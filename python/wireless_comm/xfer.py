"""wireless_comm.xfer: one-sided transfers (wcomm::xfer) from Python.

    from wireless_comm import xfer

    a = xfer.Agent("producer")                 # backend "auto": cma same host, ucx, tcp last
    a.register(array)                          # numpy / torch / any writable buffer
    remote = a.add_remote(peer_metadata)       # bytes the peer got from its own metadata()
    h = a.post("write", xfer.descs_of(array), remote, peer_descs)
    state, reason = a.wait(h, timeout=10)      # "done", or "error" with why
    a.release(h)

Descriptors are (addr, len, dev_id) tuples; metadata is plain msgpack bytes. SharedRegion is
a /dev/shm region of N blocks of B bytes; CacheProducer / CacheConsumer are the
encoder-cache service (docs/transfer.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _core
from .config import Peer

Desc = Tuple[int, int, int]

CONNECTOR_VERSION: str = _core.XFER_CONNECTOR_VERSION


def address_of(obj: Any) -> Tuple[int, int]:
    """(address, nbytes) of a contiguous numpy array, torch tensor or writable buffer."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):  # torch
        if not obj.is_contiguous():
            raise ValueError("the tensor is not contiguous")
        if obj.device.type != "cpu":
            raise ValueError("only host memory is supported (device %s)" % obj.device)
        return int(obj.data_ptr()), int(obj.numel() * obj.element_size())
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:  # numpy
        if not obj.flags["C_CONTIGUOUS"]:
            raise ValueError("the array is not C-contiguous")
        return int(iface["data"][0]), int(obj.nbytes)
    import ctypes
    view = memoryview(obj)
    if view.readonly or not view.c_contiguous:
        raise ValueError("need a writable, contiguous buffer")
    c = (ctypes.c_char * view.nbytes).from_buffer(view)
    return ctypes.addressof(c), view.nbytes


def descs_of(obj: Any, offset: int = 0, length: Optional[int] = None) -> List[Desc]:
    """One descriptor over obj's memory (or a byte range of it)."""
    addr, n = address_of(obj)
    length = n - offset if length is None else length
    if offset < 0 or length <= 0 or offset + length > n:
        raise ValueError("range [%d, +%d) is outside the %d-byte object" % (offset, length, n))
    return [(addr + offset, length, 0)]


def _peer_tuple(p: Optional[Peer]):
    return None if p is None else (p.node_id, p.host, p.port)


class Agent:
    """A transfer agent (wcomm::xfer::Agent). `local` gives it a Comm of its own (port 0: a
    free one), needed for the tcp backend and for notifications; without it cma and ucx still
    work. Its metadata carries that Comm's addresses and add_remote adds the remote's, so no
    `peers` need be listed. A remote that loaded our metadata first reaches us when both have
    the same `cluster_key`, or, with `allow_unauthenticated_joins` and `local` on loopback,
    without one (docs/transfer.md)."""

    def __init__(self, name: str, backend: str = "auto", local: Optional[Peer] = None,
                 peers: Sequence[Peer] = (), default_timeout: float = 30.0, cma_threads: int = 2,
                 cluster_key: bytes = b"", allow_unauthenticated_joins: bool = False):
        self._a = _core.XferAgent(name, backend, _peer_tuple(local), [_peer_tuple(p) for p in peers],
                                  float(default_timeout), int(cma_threads), bytes(cluster_key),
                                  bool(allow_unauthenticated_joins))
        self._keep = {}  # registered Python objects, kept alive while registered

    @property
    def name(self) -> str:
        return self._a.name

    @property
    def generation(self) -> int:
        return self._a.generation

    def capabilities(self, backend: str = "auto") -> dict:
        return self._a.capabilities(backend)

    def register(self, obj: Any) -> List[Desc]:
        """Registers obj's memory (kept alive until deregister) and returns its descriptor list."""
        addr, n = address_of(obj)
        self._a.register_memory(addr, n)
        self._keep.setdefault((addr, n), []).append(obj)
        return [(addr, n, 0)]

    def deregister(self, obj: Any) -> None:
        addr, n = address_of(obj)
        self._a.deregister(addr, n)
        kept = self._keep.get((addr, n))
        if kept:
            kept.pop()
            if not kept:
                del self._keep[(addr, n)]

    def allocate(self, nbytes: int) -> memoryview:
        """Registered memory the agent allocates (ucx: UCX shared memory a same-host UCX peer
        copies into directly). Writable; valid until free(view) or the agent is gone."""
        import ctypes
        addr = self._a.allocate_memory(int(nbytes))
        return memoryview((ctypes.c_char * int(nbytes)).from_address(addr)).cast("B")

    def free(self, view: memoryview) -> None:
        addr, _ = address_of(view)
        self._a.free_memory(addr)

    def register_memory(self, addr: int, length: int) -> None:
        self._a.register_memory(addr, length)

    def deregister_memory(self, addr: int, length: int) -> None:
        self._a.deregister(addr, length)

    def registered(self) -> List[Desc]:
        return self._a.registered()

    def metadata(self) -> bytes:
        return self._a.metadata()

    def add_remote(self, metadata: bytes) -> str:
        return self._a.add_remote(metadata)

    def remove_remote(self, name: str) -> None:
        self._a.remove_remote(name)

    def backend_for(self, remote: str) -> str:
        return self._a.backend_for(remote)

    def post(self, op: str, local: Sequence[Desc], remote: str, remote_descs: Sequence[Desc],
             notification: Union[str, bytes] = "", timeout: float = 0.0) -> int:
        """Starts a "write" (local -> remote) or "read"; returns the handle."""
        return self._a.post(op, list(local), remote, list(remote_descs), notification, float(timeout))

    def poll(self, handle: int) -> Tuple[str, str]:
        """("pending" | "done" | "error", reason)."""
        return self._a.poll(handle)

    def wait(self, handle: int, timeout: float = 30.0) -> Tuple[str, str]:
        """Polls (GIL released) until the transfer settles or timeout passes."""
        return self._a.wait(handle, float(timeout))

    def release(self, handle: int) -> None:
        self._a.release(handle)

    def take_notifications(self, raw: bool = False) -> List[Tuple[str, Any]]:
        """(from agent, message) pairs, oldest first; message is bytes with raw=True, else str."""
        return self._a.take_notifications(raw)

    def send_notification(self, remote: str, message: Union[str, bytes], timeout: float = 10.0) -> None:
        """A notification on its own to a remote loaded with add_remote (nixl's send_notif);
        raises when it could not be sent within timeout."""
        data = message.encode() if isinstance(message, str) else bytes(message)
        self._a.send_notification(remote, data, float(timeout))


class SharedRegion:
    """N blocks of B bytes in /dev/shm: create() makes it (and removes it when closed),
    join() maps one another process made."""

    def __init__(self, core):
        self._r = core

    @classmethod
    def create(cls, name: str, block_count: int, block_bytes: int) -> "SharedRegion":
        return cls(_core.XferSharedRegion.create(name, block_count, block_bytes))

    @classmethod
    def join(cls, name: str, timeout: float = 10.0) -> "SharedRegion":
        return cls(_core.XferSharedRegion.join(name, float(timeout)))

    name = property(lambda self: self._r.name)
    block_count = property(lambda self: self._r.block_count)
    block_bytes = property(lambda self: self._r.block_bytes)
    free_blocks = property(lambda self: self._r.free_blocks)
    address = property(lambda self: self._r.address)
    size = property(lambda self: self._r.size)

    def buffer(self) -> memoryview:
        """The whole region, writable (valid while the region is open)."""
        return self._r.buffer()

    def alloc(self, n: int) -> List[int]:
        """n block indices; BackpressureError when fewer are free."""
        return self._r.alloc(n)

    def free(self, indices: Sequence[int]) -> None:
        """ValueError (nothing freed) for a foreign index or a block not allocated."""
        self._r.free(list(indices))

    def descs(self, indices: Sequence[int]) -> List[Desc]:
        return self._r.descs(list(indices))

    def read(self, indices: Sequence[int], nbytes: int) -> bytes:
        """The first nbytes of the given blocks, concatenated (a copy)."""
        buf, b = self.buffer(), self.block_bytes
        out = b"".join(bytes(buf[i * b:(i + 1) * b]) for i in indices)
        return out[:nbytes]


def compat_hash(model_id: str, dtype: str, block_bytes: int, version: str = CONNECTOR_VERSION) -> str:
    """SHA-256 hex over version, model id, dtype and block size (what both sides must share)."""
    return _core.xfer_compat_hash(version, model_id, dtype, block_bytes)


@dataclass
class ItemStatus:
    readiness: str        # "unknown", "in_flight", "ready", "failed"
    reason: str
    blocks: List[int]
    bytes: int


class CacheProducer:
    """Serves encoder-cache items: consumers ask by key; published items are written straight
    into their blocks; requests for unpublished keys wait. Consumers need not be listed: with
    a `cluster_key` (the consumers' too), or `allow_unauthenticated_joins` on loopback, any
    consumer that dials in is served."""

    def __init__(self, local: Peer, consumers: Sequence[Peer], model_id: str, dtype: str, block_bytes: int,
                 backend: str = "auto", transfer_timeout: float = 30.0, cluster_key: bytes = b"",
                 allow_unauthenticated_joins: bool = False):
        self._p = _core.XferCacheProducer(_peer_tuple(local), [_peer_tuple(p) for p in consumers], model_id,
                                          dtype, int(block_bytes), backend, float(transfer_timeout),
                                          bytes(cluster_key), bool(allow_unauthenticated_joins))

    def publish(self, key: str, data: Any) -> None:
        """Copies data (bytes, numpy, torch via .numpy()) into registered memory and serves
        the requests parked on key."""
        if hasattr(data, "numpy") and hasattr(data, "data_ptr"):
            data = data.contiguous().numpy()
        self._p.publish(key, data)

    @property
    def parked_requests(self) -> int:
        return self._p.parked_requests

    def close(self) -> None:
        self._p.close()


class CacheConsumer:
    """Asks producers (its Comm's peers) for items; they land in `region`'s blocks."""

    def __init__(self, local: Peer, producers: Sequence[Peer], region: SharedRegion, model_id: str, dtype: str,
                 backend: str = "auto", request_timeout: float = 30.0, cluster_key: bytes = b""):
        self.region = region
        self._c = _core.XferCacheConsumer(_peer_tuple(local), [_peer_tuple(p) for p in producers], region._r,
                                          model_id, dtype, backend, float(request_timeout), bytes(cluster_key))

    def request(self, key: str, producer: str, nbytes: int) -> None:
        self._c.request(key, producer, int(nbytes))

    def probe(self, key: str) -> ItemStatus:
        return ItemStatus(*self._c.probe(key))

    def take(self, key: str) -> ItemStatus:
        """Hands a ready item over (free its blocks with region.free when done)."""
        return ItemStatus(*self._c.take(key))

    def close(self) -> None:
        self._c.close()
