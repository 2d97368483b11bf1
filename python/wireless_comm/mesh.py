"""The entity mesh: named entities (api_server, conductor, worker_N) that message each other,
with the communicator API of an existing pyzmq mesh (docs/mesh.md).

    from wireless_comm.mesh import make_communicator, CommProtocol

    comm = make_communicator("worker_0", ["conductor"], protocol=CommProtocol.IPC)
    comm.send("conductor", {"op": "ready"})
    if comm.poll_for_messages(timeout_ms=20):
        for msg in comm.get_all_new_messages():
            ...

Backends: ZMQCommunicator (pure pyzmq), NativeZMQCommunicator (wcomm's C++ ZeroMQ
communicator: the same wire, less Python per message) and WcommCommunicator (wcomm's own
transport, for meshes where every entity runs wcomm; the only one for SHM and RDMA).
make_communicator picks one from MSTAR_RUST_ZMQ (or WCOMM_MESH_NATIVE).
"""

from __future__ import annotations

import collections
import enum
import fcntl
import logging
import os
import pickle
from abc import ABC, abstractmethod
from typing import Any, Iterable, Optional

log = logging.getLogger(__name__)

#: The entity every deployment has exactly one of; its endpoint stands for the deployment.
DEPLOYMENT_ANCHOR_ENTITY = "conductor"

#: The native extension's mesh version this package expects (_core.mesh_version). Under AUTO a
#: mismatching extension (a stale build) would take over the mesh silently, so the factory warns.
EXPECTED_MESH_VERSION = "0.1.0"

DEFAULT_IPC_PREFIX = "/tmp/mstar/"


class CommProtocol(enum.Enum):
    IPC = "IPC"
    TCP = "TCP"
    SHM = "SHM"
    RDMA = "RDMA"


#: How long at most a blocking receive waits at a time while sends to a peer are backlogged, so
#: the backlog keeps moving (mstar's constant; OutboxCommunicator's wait also ends as soon as
#: the peer can take more).
BLOCKING_POLL_SLICE_MS = 50


class Codec(ABC):
    """How a communicator turns messages into bytes and back (the `codec=` class). Every entity
    of a mesh must use the same one."""

    @staticmethod
    @abstractmethod
    def encode(obj: Any) -> bytes: ...

    @staticmethod
    @abstractmethod
    def decode(data: bytes) -> Any: ...


class PickleCodec(Codec):
    """The mesh's wire format: pickle at protocol 4, as pyzmq's send_pyobj / recv_pyobj."""

    @staticmethod
    def encode(obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=4)

    @staticmethod
    def decode(data: bytes) -> Any:
        return pickle.loads(data)


class MsgpackCodec(Codec):
    """msgpack (python3-msgpack): bytes stay bytes, str stays str; values msgpack can carry
    only (no arbitrary objects, unlike pickle, and nothing is executed on decode)."""

    @staticmethod
    def encode(obj: Any) -> bytes:
        import msgpack

        return msgpack.packb(obj, use_bin_type=True)

    @staticmethod
    def decode(data: bytes) -> Any:
        import msgpack

        return msgpack.unpackb(data, raw=False)


class EventWakeup:
    """A non-blocking, close-on-exec eventfd that ends a communicator's poll early when set
    (from any thread); register it with register_event_for_poll."""

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def fileno(self) -> int:
        return self.fd

    def set(self) -> None:
        try:
            os.eventfd_write(self.fd, 1)
        except BlockingIOError:  # the counter is at its maximum: a poll ends anyway
            pass

    def register_future(self, future) -> None:
        """Set when future (a concurrent.futures.Future) completes."""
        future.add_done_callback(lambda _f: self.set())

    def register_futures(self, futures: Iterable) -> None:
        """Set when any of futures completes (register_future for each)."""
        for future in futures:
            self.register_future(future)

    def drain(self) -> None:
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _codec(codec) -> Any:
    """The codec object (a class with encode / decode, or an instance); PickleCodec by default."""
    return PickleCodec if codec is None else codec


def _transport_from_env(protocol: CommProtocol) -> CommProtocol:
    value = os.environ.get("MSTAR_ZMQ_TRANSPORT")
    if not value:
        return protocol
    if value.upper() not in ("IPC", "TCP"):
        raise ValueError(f"MSTAR_ZMQ_TRANSPORT={value!r} (must be IPC or TCP)")
    return CommProtocol(value.upper())


def tcp_port_for(entity_id: str, base: int) -> int:
    """The TCP port of an entity in a pyzmq mesh (mesh-zmq.md)."""
    if entity_id == "api_server":
        return base
    if entity_id == "conductor":
        return base + 1
    if entity_id == "api_server_preprocess_worker":
        return base + 2
    if entity_id.startswith("worker_") and entity_id[7:].isdigit():
        return base + 100 + int(entity_id[7:])
    return base + 1000 + sum(entity_id.encode()) % 1000


def zmq_endpoint(entity_id: str, protocol: CommProtocol, ipc_socket_path_prefix: str = DEFAULT_IPC_PREFIX) -> str:
    """The endpoint a pyzmq entity binds (ipc://{prefix}/{id}.ipc or tcp://host:port)."""
    if protocol == CommProtocol.IPC:
        return f"ipc://{ipc_socket_path_prefix}/{entity_id}.ipc"
    if protocol == CommProtocol.TCP:
        host = os.environ.get("MSTAR_ZMQ_TCP_HOST", "127.0.0.1")
        base = int(os.environ.get("MSTAR_ZMQ_TCP_BASE_PORT", "19000"))
        return f"tcp://{host}:{tcp_port_for(entity_id, base)}"
    raise NotImplementedError(f"the ZeroMQ communicator has no {protocol.value} transport (IPC or TCP; "
                              "the wcomm transport serves SHM and RDMA)")


class AnchorLock:
    """The deployment anchor lock: an exclusive flock on {endpoint path}.lock (IPC) or on a
    file keyed by the TCP endpoint, the same file and lock wcomm's C++ communicators take, so
    a second conductor of a deployment fails at once whatever its backend. The kernel drops
    it when the holder exits or crashes."""

    def __init__(self, endpoint: str) -> None:
        self.path = anchor_lock_path(endpoint)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            self._fd = -1
            raise ValueError(f"deployment anchor for {endpoint} is held by pid {holder} (lock file {self.path}): "
                               "another conductor of this deployment is running") from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def anchor_lock_path(endpoint: str) -> str:
    for scheme in ("ipc://", "unix://"):
        if endpoint.startswith(scheme):
            return endpoint[len(scheme):] + ".lock"
    return "/tmp/mstar-anchor-" + endpoint.replace("/", "_").replace(":", "_") + ".lock"


class BaseCommunicator(ABC):
    codec: Any = PickleCodec

    @abstractmethod
    def send(self, entity_id: str, msg) -> None:
        """entity_id: worker_xyz, conductor, or api_server"""

    @abstractmethod
    def get_all_new_messages(self, blocking: bool = False, timeout_s: Optional[float] = None) -> list:
        """Every message that has arrived. blocking: first wait (up to timeout_s; None: forever)
        for a message or the registered event."""

    @abstractmethod
    def poll_for_messages(self, timeout_ms: int = 20) -> bool:
        """Block until a message is readable, the registered event fires, or timeout_ms
        elapses. True when a message is waiting; a fired event is drained (False)."""

    @abstractmethod
    def register_event_for_poll(self, event: EventWakeup) -> None:
        """Have poll_for_messages (and wait_for_work) also end when event is signalled."""

    @property
    def event(self) -> Optional[EventWakeup]:
        """The EventWakeup registered for poll (None: none yet)."""
        return getattr(self, "_event", None)

    def try_send_bytes(self, entity_id: str, data: bytes) -> bool:
        """Send a message already encoded with self.codec without blocking: False, with nothing
        sent, when the peer is at its high-water mark."""
        raise NotImplementedError(f"{type(self).__name__} has no non-blocking send")

    def wait_for_work(self, timeout_ms: int = 50) -> None:
        self.poll_for_messages(timeout_ms)

    def _wait(self, timeout_ms: int, writable_peers: list) -> tuple:
        """(readable, event, writable): like poll_for_messages, also ending when one of
        writable_peers can take a message again (OutboxCommunicator waits this way)."""
        readable = self.poll_for_messages(timeout_ms)
        return readable, not readable, False

    def close(self) -> None:
        pass


class ZMQCommunicator(BaseCommunicator):
    """The pure pyzmq communicator (the mesh's reference behaviour, mesh-zmq.md)."""

    push_sockets: dict

    def __init__(self, my_id: str, push_ids: list, protocol: CommProtocol = CommProtocol.IPC,
                 ipc_socket_path_prefix: str = DEFAULT_IPC_PREFIX, codec=None) -> None:
        import zmq

        self._zmq = zmq
        self.my_id = my_id
        self.codec = _codec(codec)
        self.protocol = _transport_from_env(CommProtocol(protocol))
        self.ipc_socket_path_prefix = ipc_socket_path_prefix
        self.sndhwm = int(os.environ.get("MSTAR_ZMQ_SNDHWM", "100000"))
        self.endpoint = zmq_endpoint(my_id, self.protocol, ipc_socket_path_prefix)
        if self.protocol == CommProtocol.IPC:
            os.makedirs(ipc_socket_path_prefix, exist_ok=True)
        self._anchor = AnchorLock(self.endpoint) if my_id == DEPLOYMENT_ANCHOR_ENTITY else None
        self.context = zmq.Context()
        self.pull_socket = self.context.socket(zmq.PULL)
        self.pull_socket.setsockopt(zmq.LINGER, 0)
        self.pull_socket.bind(self.endpoint)
        self.poller = zmq.Poller()
        self.poller.register(self.pull_socket, zmq.POLLIN)
        self._event: Optional[EventWakeup] = None
        self._event_fd = -1  # the fd registered (the event keeps it until closed)
        self.push_sockets = {}
        for peer in push_ids:
            if peer != my_id:
                self._push(peer)

    def _push(self, entity_id: str):
        sock = self.push_sockets.get(entity_id)
        if sock is None:
            sock = self.context.socket(self._zmq.PUSH)
            sock.setsockopt(self._zmq.LINGER, 0)
            sock.setsockopt(self._zmq.SNDHWM, self.sndhwm)
            sock.connect(zmq_endpoint(entity_id, self.protocol, self.ipc_socket_path_prefix))
            self.push_sockets[entity_id] = sock
        return sock

    def send(self, entity_id: str, msg) -> None:
        self._push(entity_id).send(self.codec.encode(msg))

    def try_send_bytes(self, entity_id: str, data: bytes) -> bool:
        try:
            self._push(entity_id).send(data, self._zmq.NOBLOCK)
            return True
        except self._zmq.Again:
            return False

    def register_event_for_poll(self, event: EventWakeup) -> None:
        if self._event is not None:
            self.poller.unregister(self._event_fd)
        self._event = event
        self._event_fd = event.fd
        self.poller.register(event.fd, self._zmq.POLLIN)

    def _wait(self, timeout_ms, writable_peers) -> tuple:
        zmq = self._zmq
        poller = self.poller
        if self._event is not None:
            # A closed event descriptor: OSError EBADF, as mstar's poller raises (zmq_poll here
            # only ends at once, every time, and a polling loop would spin).
            os.fstat(self._event_fd)
        if writable_peers:
            poller = zmq.Poller()
            poller.register(self.pull_socket, zmq.POLLIN)
            if self._event is not None:
                poller.register(self._event_fd, zmq.POLLIN)
            for peer in writable_peers:
                poller.register(self._push(peer), zmq.POLLOUT)
        ready = dict(poller.poll(None if timeout_ms is None or timeout_ms < 0 else timeout_ms))
        event = self._event is not None and self._event_fd in ready
        if event:
            self._event.drain()
        readable = self.pull_socket in ready
        writable = any(s is not self.pull_socket and s != self._event_fd for s in ready)
        return readable, event, writable

    def poll_for_messages(self, timeout_ms: int = 20) -> bool:
        return self._wait(timeout_ms, ())[0]

    def get_all_new_messages(self, blocking: bool = False, timeout_s: Optional[float] = None) -> list:
        if blocking:
            self._wait(None if timeout_s is None else int(timeout_s * 1000), ())
        out = []
        decode = self.codec.decode
        while True:
            try:
                out.append(decode(self.pull_socket.recv(self._zmq.NOBLOCK)))
            except self._zmq.Again:
                return out

    def close(self) -> None:
        for sock in self.push_sockets.values():
            sock.close(0)
        self.pull_socket.close(0)
        if self._anchor:
            self._anchor.release()


def _core():
    from . import _core

    return _core


class _NativeCommunicator(BaseCommunicator):
    """A C++ communicator behind the same API; the codec runs here (pickle by default)."""

    _backend = ""

    def __init__(self, my_id: str, push_ids: list, protocol: CommProtocol = CommProtocol.IPC,
                 ipc_socket_path_prefix: str = DEFAULT_IPC_PREFIX, codec=None, *, sndhwm: Optional[int] = None,
                 rcvhwm: Optional[int] = None, peer_ids: Iterable[str] = ()) -> None:
        self.my_id = my_id
        self.codec = _codec(codec)
        self.protocol = CommProtocol(protocol)
        self._event: Optional[EventWakeup] = None
        self._c = _core().MeshCommunicator(self._backend, my_id, list(push_ids), self.protocol.value,
                                           ipc_socket_path_prefix, sndhwm, rcvhwm, list(peer_ids))
        self.endpoint = self._c.endpoint

    def send(self, entity_id: str, msg) -> None:
        self._c.send_bytes(entity_id, self.codec.encode(msg))

    def send_each(self, entity_ids: Iterable[str], msg) -> None:
        """Send msg to every entity of entity_ids, encoding it once."""
        self._c.send_each_bytes(list(entity_ids), self.codec.encode(msg))

    def try_send_bytes(self, entity_id: str, data: bytes) -> bool:
        return self._c.try_send_bytes(entity_id, data)

    def register_event_for_poll(self, event: EventWakeup) -> None:
        self._event = event  # kept alive while registered
        self._c.register_event_fd(event.fd)

    def poll_for_messages(self, timeout_ms: int = 20) -> bool:
        return self._c.poll_for_messages(timeout_ms)

    def _wait(self, timeout_ms, writable_peers) -> tuple:
        return self._c.wait(-1 if timeout_ms is None else timeout_ms, list(writable_peers))

    def get_all_new_messages(self, blocking: bool = False, timeout_s: Optional[float] = None) -> list:
        decode = self.codec.decode
        return [decode(b) for b in self._c.get_all_new_bytes(blocking, timeout_s)]

    def get_all_new_bytes(self, blocking: bool = False, timeout_s: Optional[float] = None) -> list:
        """The encoded messages, for a caller that decodes itself."""
        return self._c.get_all_new_bytes(blocking, timeout_s)

    def close(self) -> None:
        self._c.close()


class NativeZMQCommunicator(_NativeCommunicator):
    """wcomm's C++ ZeroMQ communicator: the endpoints, socket options and pickle frames of
    ZMQCommunicator, so it joins a pyzmq mesh; sndhwm / rcvhwm override MSTAR_ZMQ_SNDHWM and
    ZeroMQ's receive default."""

    _backend = "zmq"

    def __init__(self, my_id, push_ids, protocol=CommProtocol.IPC, ipc_socket_path_prefix=DEFAULT_IPC_PREFIX,
                 codec=None, **kwargs) -> None:
        protocol = CommProtocol(protocol)
        if protocol in (CommProtocol.SHM, CommProtocol.RDMA):
            raise NotImplementedError(f"the ZeroMQ communicator has no {protocol.value} transport (IPC or TCP; "
                                      "the wcomm transport serves SHM and RDMA)")
        super().__init__(my_id, push_ids, _transport_from_env(protocol), ipc_socket_path_prefix, codec, **kwargs)


class WcommCommunicator(_NativeCommunicator):
    """The mesh over wcomm's own transport (shared memory for SHM, Unix sockets for IPC, TCP, and
    UCX for RDMA: ucx://host:port, ports counted from WCOMM_MESH_RDMA_BASE_PORT, default 23000):
    faster, but every entity must run wcomm, and every entity that sends to this one must be in
    push_ids or peer_ids (wcomm's peer directory is fixed)."""

    _backend = "wcomm"

    def __init__(self, my_id, push_ids, protocol=CommProtocol.SHM, ipc_socket_path_prefix=DEFAULT_IPC_PREFIX,
                 codec=None, **kwargs) -> None:
        super().__init__(my_id, push_ids, protocol, ipc_socket_path_prefix, codec, **kwargs)


class OutboxCommunicator:
    """A communicator whose sends never block: a send the peer can't take now (at its
    high-water mark) is queued, in order behind any earlier one to the same peer, and retried
    by flush (and while the owner waits in get_all_new_messages / poll_for_messages).
    Everything else is the wrapped communicator's."""

    def __init__(self, inner: BaseCommunicator, warn_backlog: Optional[int] = None) -> None:
        self.inner = inner
        self._queues: dict = {}
        self._warned: set = set()
        self.warn_backlog = warn_backlog or int(os.environ.get("MSTAR_ZMQ_BACKLOG_WARN", "10000"))
        self.dropped = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _flush_peer(self, entity_id: str, queue) -> bool:
        try_send = self.inner.try_send_bytes
        while queue:
            try:
                if not try_send(entity_id, queue[0]):
                    return True
            except Exception as e:  # no caller to raise to; keeping it would stall the rest
                log.error("mesh outbox: dropped a message of %d bytes to %r: %s", len(queue[0]), entity_id, e)
                self.dropped += 1
            queue.popleft()
        self._warned.discard(entity_id)
        return False

    def _send_bytes(self, entity_id: str, data: bytes) -> None:
        queue = self._queues.get(entity_id)
        if not queue:
            if self.inner.try_send_bytes(entity_id, data):
                return
            if queue is None:
                queue = self._queues[entity_id] = collections.deque()
        elif not self._flush_peer(entity_id, queue) and self.inner.try_send_bytes(entity_id, data):
            return
        queue.append(data)
        if len(queue) > self.warn_backlog and entity_id not in self._warned:
            self._warned.add(entity_id)
            log.warning("mesh outbox: %d messages queued for %r (more than %d): is it stalled?", len(queue),
                        entity_id, self.warn_backlog)

    def send(self, entity_id: str, msg) -> None:
        self._send_bytes(entity_id, self.inner.codec.encode(msg))

    def send_each(self, entity_ids: Iterable[str], msg) -> None:
        """send to each of entity_ids, encoding msg once."""
        data = self.inner.codec.encode(msg)
        for entity_id in entity_ids:
            self._send_bytes(entity_id, data)

    def flush(self) -> bool:
        """Send what peers can take now; True if anything is still queued."""
        left = False
        for entity_id, queue in self._queues.items():
            if queue:
                left |= self._flush_peer(entity_id, queue)
        return left

    def backlog(self, entity_id: Optional[str] = None) -> int:
        if entity_id is not None:
            return len(self._queues.get(entity_id, ()))
        return sum(len(q) for q in self._queues.values())

    def _wait(self, timeout_ms: Optional[int]) -> tuple:
        """Waits like the inner poll, moving the backlog whenever a backlogged peer can take
        more; (readable, event)."""
        import time

        deadline = None if timeout_ms is None or timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        while True:
            self.flush()
            pending = [p for p, q in self._queues.items() if q]
            left = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            readable, event, writable = self.inner._wait(left, pending)
            if readable or event or not writable or (deadline is not None and time.monotonic() >= deadline):
                self.flush()
                return readable, event

    def poll_for_messages(self, timeout_ms: int = 20) -> bool:
        return self._wait(timeout_ms)[0]

    def wait_for_work(self, timeout_ms: int = 50) -> None:
        self._wait(timeout_ms)

    def get_all_new_messages(self, blocking: bool = False, timeout_s: Optional[float] = None) -> list:
        if blocking:
            self._wait(None if timeout_s is None else int(timeout_s * 1000))
        else:
            self.flush()
        return self.inner.get_all_new_messages()


def requested_transport() -> str:
    """MSTAR_RUST_ZMQ (else WCOMM_MESH_NATIVE) as set, upper-cased: 0, 1 or AUTO (the default)."""
    # Set, even empty, it is what it says: MSTAR_RUST_ZMQ="" is refused by make_communicator,
    # as in mstar (not taken as AUTO).
    value = os.environ.get("MSTAR_RUST_ZMQ", os.environ.get("WCOMM_MESH_NATIVE", "AUTO"))
    return value.upper()


def make_communicator(*args, nonblocking_send: bool = False, transport: Optional[str] = None,
                      **kwargs) -> BaseCommunicator:
    """Construct the process's communicator, selecting the transport.

    transport="wcomm", or protocol=CommProtocol.SHM or RDMA (which only wcomm's transport
    serves): WcommCommunicator. Otherwise
    MSTAR_RUST_ZMQ (or WCOMM_MESH_NATIVE) selects: AUTO (default) the C++ ZeroMQ communicator
    when the extension imports, else pyzmq; 1 the C++ one or raise; 0 pure pyzmq. The two
    ZeroMQ ones are wire-compatible, so the flag can be set per process. nonblocking_send is
    accepted for the seed's callers: every communicator here has try_send_bytes.
    """
    protocol = kwargs.get("protocol", args[2] if len(args) > 2 else CommProtocol.IPC)
    if transport not in (None, "zmq", "wcomm"):
        raise ValueError(f"transport={transport!r} (zmq or wcomm)")
    if transport == "wcomm" or (transport is None and CommProtocol(protocol) in (CommProtocol.SHM, CommProtocol.RDMA)):
        return WcommCommunicator(*args, **kwargs)
    choice = requested_transport()
    if choice not in ("0", "1", "AUTO"):
        raise ValueError(f"MSTAR_RUST_ZMQ={choice!r}: must be 0, 1 or AUTO")
    if choice == "0":
        return ZMQCommunicator(*args, **kwargs)
    try:
        core = _core()
        core.MeshCommunicator  # noqa: B018 (an extension built before the mesh lacks it)
    except (ImportError, AttributeError) as e:
        if choice == "1":
            raise ImportError(f"MSTAR_RUST_ZMQ=1 but wcomm's native mesh extension is not available: {e}") from e
        return ZMQCommunicator(*args, **kwargs)
    version = getattr(core, "mesh_version", None)
    if version != EXPECTED_MESH_VERSION:
        log.warning("wcomm's native mesh extension is version %s, this package expects %s: a stale build?",
                    version, EXPECTED_MESH_VERSION)
    comm = NativeZMQCommunicator(*args, **kwargs)
    log.info("mesh entity %r: native ZeroMQ communicator (mesh %s) over %s", comm.my_id, version,
             comm.protocol.value)
    return comm
