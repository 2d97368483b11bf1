"""Comm: the V0.1 asyncio API over wcomm's C++ Comm.

Completions: the C++ loop thread never touches Python. It queues each finished operation and
signals an eventfd; asyncio watches that fd (add_reader), and one callback drains the whole
batch, converting values and resolving futures. No polling threads.

Receiving: every recv() is one C++ recv; the code below only matters when a recv is
cancelled just as its message arrives. Such a message is never dropped: it goes to the oldest
recv still waiting on that (peer, tag), or is kept for the next one, so FIFO order holds.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import os
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Deque, Dict, Iterable, NamedTuple, Optional, Tuple

from . import _core
from .config import CommConfig, CommOptions, Peer
from .errors import ConnectionClosedError, OperationTimeoutError

__all__ = ["Comm", "SendResult", "ReceivedMessage", "TypeRegistry", "Object", "Metadata"]

# V0.1's names for the two halves of a message: the object (any value that can travel) and
# its piggypayload metadata (None or a dict with str keys of MessagePack primitives).
Object = Any
Metadata = Optional[Dict[str, Any]]

_DEFAULT_OPTIONS = CommOptions()
# Latency: a sleeping asyncio loop costs a thread wake-up (tens of microseconds on a busy VM)
# for each completion. So send() waits up to _SEND_SPIN_US (GIL released, spinning) for the C++
# loop to write its message when no other send is in flight, and recv() waits up to
# _RECV_SPIN_US for its message (GIL released, asleep in poll() on the socket: the core's
# receive fast path reads the message on this thread), before handing over to the eventfd.
# That wait blocks the event loop for at most the window, and only while it pays: a recv whose
# message did not come within it turns the wait off for the next _RECV_SPIN_BACKOFF recvs of
# this Comm (a slow peer, or many recvs waiting at once), then one tries again. 0 turns
# either wait off.
_SEND_SPIN_US = int(os.environ.get("WCOMM_SEND_SPIN_US", "50"))
_RECV_SPIN_US = int(os.environ.get("WCOMM_RECV_SPIN_US", "200"))
_RECV_SPIN_BACKOFF = 16


def _on_ready_of(comm_ref: "weakref.ref[Comm]") -> None:
    # The loop's reader holds the Comm weakly, so a Comm dropped without close() is collected
    # (and closed by __del__) while the loop runs.
    comm = comm_ref()
    if comm is not None:
        comm._on_ready()
_TENSOR_MODES = {"auto": _core.TENSOR_AUTO, "torch": _core.TENSOR_TORCH, "numpy": _core.TENSOR_NUMPY}


@dataclass(frozen=True)
class SendResult:
    """What a completed send reports: the frame's message_id and its size on the wire."""

    message_id: int
    wire_bytes: int


class PeerEvent(NamedTuple):
    """A peer's session changed (Comm.peer_events): kind is "up", "down", "restarted" or
    "joined" (a peer entered the directory: add_peer, reason "added", or a node that dialed in,
    CommConfig.accept_unknown_peers)."""

    node_id: str
    kind: str
    reason: str


@dataclass(frozen=True)
class ReceivedMessage:
    """A received message with its frame details (Comm.recv_message)."""

    value: Any
    piggypayload: Any
    message_id: int
    wire_bytes: int


class _Waiter:
    """One recv() call: its future and the C++ op currently serving it."""

    __slots__ = ("fut", "op_id", "key", "timeout", "adopted")

    def __init__(self, fut: asyncio.Future, op_id: int, key: Tuple[str, int], timeout: Optional[float]):
        self.fut = fut
        self.op_id = op_id
        self.key = key
        self.timeout = timeout
        self.adopted = False  # serving through an op that a cancelled recv started


def _record_builder(cls: type) -> Callable[[dict], Any]:
    fields = dataclasses.fields(cls)
    if all(f.init for f in fields):
        return lambda values: cls(**values)
    init_names = {f.name for f in fields if f.init}

    def build(values: dict) -> Any:
        obj = cls(**{k: v for k, v in values.items() if k in init_names})
        for k, v in values.items():
            if k not in init_names:
                object.__setattr__(obj, k, v)  # also works for frozen dataclasses
        return obj

    return build


class TypeRegistry:
    """The dataclasses and custom codecs a Comm can send and rebuild (``comm.registry``).
    Each type_id is registered once (ValueError for a second time), as in V0.1."""

    def __init__(self, core: Any) -> None:
        self._core = core
        self._encoders: Dict[type, tuple] = {}  # cls -> (kind, type_id, version, encode)
        self._decoders: Dict[str, tuple] = {}  # type_id -> (kind, version, decode, cls)

    def register_dataclass(self, cls: type, type_id: str, version: int = 1) -> None:
        """Sends instances of dataclass cls as records (fields in order) and builds cls from
        records with that type_id and version. The peer must register the same."""
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise TypeError(f"register_dataclass needs a dataclass type, got {cls!r}")
        self._register(cls, type_id, version, "record", tuple(f.name for f in dataclasses.fields(cls)),
                       _record_builder(cls))

    def register_codec(
        self,
        cls: type,
        type_id: str,
        encoder: Callable[[Any], Any],
        decoder: Callable[[Any], Any],
        version: int = 1,
    ) -> None:
        """Sends instances of cls as encoder(obj) (any value that can travel), tagged with
        type_id and version; decoder(value) rebuilds them on the receiving side."""
        if isinstance(encoder, int) and not isinstance(encoder, bool) and callable(version):
            # wcomm 0.2's positional order (cls, type_id, version, encoder, decoder).
            encoder, decoder, version = decoder, version, encoder
        if not isinstance(cls, type):
            raise TypeError(f"register_codec needs a type, got {cls!r}")
        if not callable(encoder) or not callable(decoder):
            raise TypeError("register_codec needs callable encoder and decoder")
        self._register(cls, type_id, version, "custom", encoder, decoder)

    def __contains__(self, item: Any) -> bool:
        """A registered type_id or class."""
        return item in self._decoders or item in self._encoders

    def type_ids(self) -> Tuple[str, ...]:
        return tuple(self._decoders)

    def _register(self, cls: type, type_id: str, version: int, kind: str, encode: Any, decode: Any) -> None:
        if not isinstance(type_id, str) or not type_id:
            raise ValueError(f"type_id must be a non-empty str, got {type_id!r}")
        if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version < 2**32:
            raise ValueError(f"version must be an int in 0..2**32-1, got {version!r}")
        if type_id in self._decoders:
            raise ValueError(f"type_id {type_id!r} is already registered (for "
                             f"{self._decoders[type_id][3].__qualname__}); register each type_id once")
        if cls in self._encoders:
            raise ValueError(f"{cls.__qualname__} is already registered as {self._encoders[cls][1]!r}")
        self._core.register_type(kind, type_id, version)
        self._encoders[cls] = (kind, type_id, version, encode)
        self._decoders[type_id] = (kind, version, decode, cls)


class Comm:
    """A node of a static peer directory exchanging tagged messages with its peers.

    Create it with ``await Comm.create(...)`` inside a running event loop; it belongs to that
    loop. Tensors (CPU, contiguous torch.Tensor or numpy.ndarray) are sent from their own
    memory: do not modify them until ``await comm.send(...)`` returns.
    """

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        raise TypeError("use `await Comm.create(local=..., peers=..., bind_host=..., config=...)`")

    @classmethod
    async def create(
        cls,
        local: Peer,
        peers: Iterable[Peer] = (),
        bind_host: Optional[str] = None,
        config: Optional[CommConfig] = None,
        *,
        tensors: str = "auto",
    ) -> "Comm":
        """Binds local's port (bind_host defaults to local.host; port 0 picks a free one, see
        ``port``) and starts the node. Connections are made lazily, on first use.

        tensors: what received tensors become: "auto" (torch when importable, else numpy),
        "torch" or "numpy".
        """
        loop = asyncio.get_running_loop()
        if not isinstance(local, Peer):
            raise TypeError(f"local must be a Peer, got {type(local).__name__}")
        peers = list(peers)
        for p in peers:
            if not isinstance(p, Peer):
                raise TypeError(f"peers must hold Peer objects, got {type(p).__name__}")
        for p in peers:
            # Port 0 (an ephemeral port) only makes sense for the local listener.
            if p.port == 0 and not p.addresses:
                raise ValueError(f"peer {p.node_id!r} has port 0; a remote peer needs the port it listens on "
                                 "(port 0, an ephemeral port, is for the local node only)")
            if local.port != 0 and p.port == local.port and p.host == local.host:
                raise ValueError(f"peer {p.node_id!r} has the same address as the local node {local.node_id!r} "
                                 f"({p.host}:{p.port}); nodes on one host need distinct ports")
        config = CommConfig() if config is None else config
        if not isinstance(config, CommConfig):
            raise TypeError(f"config must be a CommConfig, got {type(config).__name__}")
        if tensors not in _TENSOR_MODES:
            raise ValueError(f"tensors must be one of {sorted(_TENSOR_MODES)}, got {tensors!r}")
        self = object.__new__(cls)
        self._loop = loop
        self._config = config
        self._registry = TypeRegistry(None)
        self._core = _core.Comm(
            (local.node_id, local.host, local.port, local.addresses),
            [(p.node_id, p.host, p.port, p.addresses, p.transport) for p in peers],
            bind_host if bind_host is not None else local.host,
            config._fields(),
            self._registry._encoders,
            self._registry._decoders,
        )
        self._registry._core = self._core
        self._tensor_mode = _TENSOR_MODES[tensors]
        self._local = Peer(local.node_id, local.host, self._core.port,
                           self._core.addresses if local.addresses else ())
        self._peers = {p.node_id: p for p in peers}
        self._sends: Dict[int, tuple] = {}  # op_id -> (future, objects the message borrows)
        self._recv_ops: Dict[int, Optional[_Waiter]] = {}  # op_id -> its waiter, None once abandoned
        self._recv_keys: Dict[int, Tuple[str, int]] = {}  # op_id -> (peer, tag)
        self._abandoned = 0  # recv ops in flight whose waiter is gone
        self._stash: Dict[Tuple[str, int], Deque[tuple]] = {}
        self._closed = False
        self._events: Deque[PeerEvent] = collections.deque(maxlen=1024)
        self._event_ready: Optional[asyncio.Future] = None
        self._spin_skip = 0  # recvs left before the next one waits for its message again
        self._fd = self._core.fd()
        loop.add_reader(self._fd, _on_ready_of, weakref.ref(self))
        return self

    # -- directory -------------------------------------------------------------------------

    @property
    def local(self) -> Peer:
        """This node, with the port actually bound."""
        return self._local

    @property
    def port(self) -> int:
        return self._local.port

    @property
    def config(self) -> CommConfig:
        return self._config

    def peer(self, node_id: str) -> Peer:
        """The peer called node_id (configured, added, or joined): KeyError for an unknown name,
        ValueError for the local node's own (as V0.1)."""
        try:
            return self._peers[node_id]
        except KeyError:
            joined = self._joined_peer(node_id)
            if joined is not None:
                return joined
            known = ", ".join(self._peers) or "(none)"
            if node_id == self._local.node_id:
                raise ValueError(f"{node_id!r} is this node itself, not a peer (peers: {known})") from None
            raise KeyError(f"{node_id!r} is not a known peer (peers: {known})") from None

    def peers(self) -> Tuple[Peer, ...]:
        """Every peer now: the configured ones in configuration order, then those added or
        joined."""
        if not self._closed:
            for t in self._core.peers():
                if t[0] not in self._peers:
                    self._joined_peer(t[0])
        return tuple(self._peers.values())

    def _joined_peer(self, node_id: str) -> Optional[Peer]:
        # A node that dialed in (CommConfig.accept_unknown_peers) is in the core's directory only.
        if self._closed or node_id == self._local.node_id:
            return None
        try:
            t = self._core.peer(node_id)
        except (IndexError, KeyError):
            return None
        peer = Peer(t[0], t[1], t[2], tuple(t[3]), t[4])
        self._peers[node_id] = peer
        return peer

    def add_peer(self, peer: Peer) -> Peer:
        """Adds a peer at run time (wcomm; docs/python.md "Peers that join at run time"): checked
        as at create (ValueError for bad input or a node_id that is there already). It must list
        this node too to answer. Returns the peer as stored."""
        if self._closed:
            raise ConnectionClosedError("the Comm is closed")
        self._core.add_peer((peer.node_id, peer.host, peer.port, peer.addresses, peer.transport))
        self._peers[peer.node_id] = peer
        return peer

    def remove_peer(self, node_id: str, reason: str = "") -> bool:
        """Removes a peer at run time: its pending sends and recvs fail with ConnectionClosedError
        "peer '<id>' was removed: <reason>", its connections end, and a connection it makes later
        is refused. False if there was no such peer."""
        if self._closed:
            raise ConnectionClosedError("the Comm is closed")
        removed = self._core.remove_peer(node_id, reason)
        self._peers.pop(node_id, None)
        return removed

    @property
    def registry(self) -> TypeRegistry:
        """The registered dataclasses and custom codecs (register_dataclass / register_codec)."""
        return self._registry

    # -- types -----------------------------------------------------------------------------

    def register_dataclass(self, cls: type, type_id: str, version: int = 1) -> None:
        """Sends instances of dataclass cls as records (fields in order) and builds cls from
        records with that type_id and version. The peer must register the same. ValueError
        when type_id (or cls) is registered already."""
        self._registry.register_dataclass(cls, type_id, version)

    def register_codec(
        self,
        cls: type,
        type_id: str,
        encoder: Callable[[Any], Any],
        decoder: Callable[[Any], Any],
        version: int = 1,
    ) -> None:
        """Sends instances of cls as encoder(obj) (any value that can travel), tagged with
        type_id and version; decoder(value) rebuilds them on the receiving side. ValueError
        when type_id (or cls) is registered already."""
        self._registry.register_codec(cls, type_id, encoder, decoder, version)

    # -- messages --------------------------------------------------------------------------

    async def send(
        self,
        object: Object,  # noqa: A002 - V0.1's keyword name
        dst: Peer,
        piggypayload: Metadata = None,
        options: Optional[CommOptions] = None,
    ) -> SendResult:
        """Sends object (with optional piggypayload metadata) to dst on options.tag. Waits for
        queue capacity unless options.wait_for_capacity is False. Cancelling the awaiting task
        cancels the send: a queued message is removed; one already on the wire aborts its
        connection. Tensors and bytes are borrowed until this returns.

        A failure says whether the message was certainly not delivered (every error but one) or
        may have been (DeliveryUnknownError, with options.ack): send it again with the same
        options.retry_key and a wcomm peer delivers it once."""
        if self._closed:
            raise ConnectionClosedError("the Comm is closed")
        o = options or _DEFAULT_OPTIONS
        op_id, keep, done = self._core.send(object, dst.node_id, piggypayload, o.tag, o.timeout, o.wait_for_capacity,
                                            0 if self._sends else _SEND_SPIN_US, o.ack, o._priority_code(),
                                            o._compress_code(), o.retry_key)
        if done is not None:
            return SendResult(*done)
        fut = self._loop.create_future()
        self._sends[op_id] = (fut, keep)
        try:
            message_id, wire_bytes = await fut
        except asyncio.CancelledError:
            self._core.cancel(op_id)  # the borrowed memory stays referenced until it completes
            raise
        return SendResult(message_id, wire_bytes)

    async def recv(self, src: Peer, options: Optional[CommOptions] = None) -> Tuple[Object, Metadata]:
        """The next message from src on options.tag, as (object, piggypayload). A timeout or
        cancellation loses nothing: a message arriving later goes to the next recv."""
        got = await self._recv(src, options)
        return got[0], got[1]

    async def recv_message(self, src: Peer, options: Optional[CommOptions] = None) -> ReceivedMessage:
        """Like recv, with the frame's message_id and wire_bytes too."""
        return ReceivedMessage(*(await self._recv(src, options)))

    async def _recv(self, peer: Peer, options: Optional[CommOptions]) -> tuple:
        if self._closed:
            raise ConnectionClosedError("the Comm is closed")
        o = options or _DEFAULT_OPTIONS
        node_id = peer.node_id
        key = (node_id, o.tag)
        if self._stash:
            kept = self._stash.get(key)
            if kept:
                got = kept.popleft()
                if not kept:
                    del self._stash[key]
                return got
        fut = self._loop.create_future()
        waiter = self._adopt(key, fut, o.timeout) if self._abandoned else None
        spin = self._spin_budget()
        if waiter is None:
            op_id, ok, payload = self._core.recv(node_id, o.tag, o.timeout, self._tensor_mode, spin)
            self._spin_paid(spin, not op_id)
            if not op_id:  # it came in time, read on this thread
                if ok:
                    return payload
                raise payload
            waiter = _Waiter(fut, op_id, key, o.timeout)
            self._recv_ops[op_id] = waiter
            self._recv_keys[op_id] = key
        elif spin:
            came = self._core.spin(spin)
            self._spin_paid(spin, came)
            if came:
                self._on_ready()  # a completion for the adopted op came in time
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                # Its message came just before the cancel, which asyncio delivers anyway (the
                # task had not resumed yet): it goes to the next recv on its key, not lost.
                self._rehome(key, fut.result())
            else:
                self._abandon(waiter)
            raise

    def _spin_budget(self) -> int:
        """How long (us) this recv may wait for its message on the asyncio thread."""
        if self._spin_skip:
            self._spin_skip -= 1
            return 0
        return _RECV_SPIN_US

    def _spin_paid(self, spin: int, came: bool) -> None:
        if spin and not came:
            self._spin_skip = _RECV_SPIN_BACKOFF

    # -- peer events -------------------------------------------------------------------------

    def peer_events(self) -> AsyncIterator["PeerEvent"]:
        """Peers' sessions as they change: `async for event in comm.peer_events()` yields
        PeerEvent(node_id, kind, reason) with kind "up", "down" (reason says why) or
        "restarted" (a wcomm peer came back as a new incarnation; what was in flight with it
        failed with PeerRestartedError) or "joined" (a peer entered the directory: add_peer,
        or a node that dialed in, CommConfig.accept_unknown_peers, "up" following). Events are kept from create on, the last 1024 of them
        while nobody reads (a dropped one is logged)."""
        return self._event_iterator()

    async def _event_iterator(self) -> AsyncIterator["PeerEvent"]:
        while True:
            while not self._events:
                if self._closed:
                    return
                self._event_ready = self._loop.create_future()
                await self._event_ready
            yield self._events.popleft()

    def _push_event(self, event: "PeerEvent") -> None:
        if len(self._events) == self._events.maxlen:
            logging.getLogger("wireless_comm").warning("peer event dropped (nobody reads peer_events()): %s",
                                                       self._events[0])
        self._events.append(event)
        if self._event_ready is not None and not self._event_ready.done():
            self._event_ready.set_result(None)

    def _abandon(self, waiter: _Waiter) -> None:
        if self._recv_ops.get(waiter.op_id) is waiter:
            self._recv_ops[waiter.op_id] = None
            self._abandoned += 1
            self._core.cancel(waiter.op_id)

    def _adopt(self, key: Tuple[str, int], fut: asyncio.Future, timeout: Optional[float]) -> Optional[_Waiter]:
        # An abandoned op on this key is older in the core's queue than a new one would be:
        # serving this recv through it keeps the order.
        for op_id, w in self._recv_ops.items():
            if w is None and self._recv_keys[op_id] == key:
                waiter = _Waiter(fut, op_id, key, timeout)
                waiter.adopted = True
                self._recv_ops[op_id] = waiter
                self._abandoned -= 1
                return waiter
        return None

    def _rehome(self, key: Tuple[str, int], got: tuple) -> None:
        # A message whose recv was cancelled: to the oldest recv still waiting on its key
        # (whose own op is then given up), else kept for the next recv.
        for op_id, w in self._recv_ops.items():
            if w is not None and w.key == key and not w.fut.done():
                w.fut.set_result(got)
                self._abandon(w)
                return
        self._stash.setdefault(key, collections.deque()).append(got)

    def _on_ready(self) -> None:
        """asyncio reader callback: resolves every completed operation of the batch."""
        for op_id, ok, payload in self._core.drain():
            if op_id == 0:  # a peer event
                self._push_event(PeerEvent(*payload))
                continue
            sent = self._sends.pop(op_id, None)
            if sent is not None:
                fut = sent[0]
                if not fut.done():
                    if ok:
                        fut.set_result(payload)
                    elif isinstance(payload, asyncio.CancelledError):
                        fut.cancel()
                    else:
                        fut.set_exception(payload)
                continue
            if op_id not in self._recv_ops:
                continue
            waiter = self._recv_ops.pop(op_id)
            key = self._recv_keys.pop(op_id)
            if waiter is None:
                self._abandoned -= 1
                if ok:
                    self._rehome(key, payload)
                continue
            fut = waiter.fut
            if fut.done():
                if ok:
                    self._rehome(key, payload)
            elif ok:
                fut.set_result(payload)
            elif waiter.adopted and isinstance(payload, (asyncio.CancelledError, OperationTimeoutError)):
                # The adopted op's own cancel or timer ended it, not this recv: start its own.
                new_id, new_ok, new_payload = self._core.recv(key[0], key[1], waiter.timeout, self._tensor_mode, 0)
                waiter.adopted = False
                if not new_id:  # already there
                    if new_ok:
                        fut.set_result(new_payload)
                    else:
                        fut.set_exception(new_payload)
                    continue
                waiter.op_id = new_id
                self._recv_ops[new_id] = waiter
                self._recv_keys[new_id] = key
            elif isinstance(payload, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(payload)

    # -- lifetime --------------------------------------------------------------------------

    def stats(self) -> Dict[str, int]:
        """Counters: messages and wire bytes each way, connections, and bytes_copied (payload
        bytes copied in user space: 0 for tensors; received bytes objects are copies)."""
        return self._core.stats()

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Fails every pending operation with ConnectionClosedError, says CLOSE to connected
        peers and stops the node once each has read what was sent to it (at most 2 s: a peer
        that does not read is waited for that long). Idempotent."""
        if self._closed:
            return
        self._closed = True
        # On a worker thread (the GIL released): the core's close waits for the peers.
        await asyncio.get_running_loop().run_in_executor(None, self._core.close)
        self._on_ready()  # the failures of pending operations (and the last peer events)
        self._loop.remove_reader(self._fd)
        self._stash.clear()
        if self._event_ready is not None and not self._event_ready.done():
            self._event_ready.set_result(None)  # peer_events() ends once drained

    async def __aenter__(self) -> "Comm":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __del__(self) -> None:
        # Dropped without close(): the garbage collector closes it (the loop's reader holds it
        # weakly), so its port, thread and descriptors are released.
        if getattr(self, "_closed", True):
            return
        warnings.warn(f"Comm {self._local.node_id!r} was not closed; call `await comm.close()`", ResourceWarning)
        try:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
        except Exception:  # the loop may be half torn down at interpreter exit
            pass
        self._closed = True
        self._core.close()
