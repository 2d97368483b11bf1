"""nixl_agent's side that faces other agents: metadata (get / add / remove, and NIXL's
listener requests by ip:port, asynchronous as NIXL's) and notifications. A mixin of
nixl_agent (_api.py), which owns the engine, the lock and the config these use."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Dict, List, Optional, Union

from ..errors import CommError
from . import _listener
from . import _bindings as nixlBind

log = logging.getLogger("wireless_comm.nixl")
DEFAULT_COMM_PORT = nixlBind.DEFAULT_COMM_PORT


def _name(agent: Union[str, bytes]) -> str:
    """Agent names arrive as str or as the bytes add_remote_agent returned (NIXL takes both)."""
    return agent.decode() if isinstance(agent, (bytes, bytearray)) else str(agent)


def _run_requests(jobs: "queue.SimpleQueue", errors: List[str]) -> None:
    """An agent's request thread (it holds no reference to the agent): None ends it."""
    while True:
        item = jobs.get()
        if item is None:
            return
        what, job = item
        try:
            job()
        except Exception as e:
            msg = f"{what}: {e}"
            errors.append(msg)
            log.warning("%s", msg)


class RemoteAgents:
    # -- agents and metadata -----------------------------------------------------------------

    def get_agent_metadata(self) -> bytes:
        return self.engine.metadata()

    def get_partial_agent_metadata(self, descs: Any, inc_conn_info: bool = False, backends: List[str] = []) -> bytes:
        """wcomm sends its whole metadata (every registered region), a superset of NIXL's partial."""
        self._check_backends(backends)
        return self.engine.metadata()

    def add_remote_agent(self, metadata: bytes) -> bytes:
        return self._load(bytes(metadata)).encode()

    def _load(self, metadata: bytes) -> str:
        try:
            name = self.engine.add_remote(metadata)
        except ValueError as e:
            raise nixlBind.nixlInvalidParamError(f"add_remote_agent: {e}") from None
        except (CommError, RuntimeError) as e:
            raise nixlBind.nixlBackendError(f"add_remote_agent: {e}") from None
        with self._lock:
            self._remote_md[name] = metadata
        return name

    def remove_remote_agent(self, agent: Union[str, bytes]) -> None:
        name = _name(agent)
        with self._lock:
            if self._remote_md.pop(name, None) is None:
                raise nixlBind.nixlNotFoundError(f"remove_remote_agent: no remote agent {name!r} was added")
        try:
            self.engine.remove_remote(name)
        except ValueError as e:
            raise nixlBind.nixlNotFoundError(f"remove_remote_agent: {e}") from None

    def make_connection(self, remote_agent: Union[str, bytes], backends: List[str] = []) -> None:
        """add_remote_agent already connected (wcomm finishes the wireup there); this checks the
        remote is known."""
        self._check_backends(backends)
        name = _name(remote_agent)
        if name not in self._remote_md:
            raise nixlBind.nixlNotFoundError(f"make_connection: no remote agent {name!r} was added")

    def check_remote_metadata(self, agent: Union[str, bytes], descs: Any = None) -> bool:
        md = self._remote_md.get(_name(agent))
        if md is None:
            return False
        if descs is None or len(descs) == 0:
            return True
        import msgpack  # only to read the remote's regions (docs/transfer.md, "Metadata")
        regions = msgpack.unpackb(md, raw=False).get("regions", [])
        return all(any(r[0] <= d[0] and d[0] + d[1] <= r[0] + r[1] for r in regions) for d in descs)

    # -- the listener --------------------------------------------------------------------------

    def _serve(self, op: bytes, payload: bytes) -> bytes:
        if op == b"S":
            return self._load(payload).encode()
        if op == b"F":
            if payload.decode() != self.name:
                raise ValueError(f"this listener serves agent {self.name!r}, not {payload.decode()!r}")
            return self.engine.metadata()
        if op == b"I":
            self.remove_remote_agent(payload.decode())
            return b""
        raise ValueError(f"unknown listener request {op!r}")

    def _background(self, what: str, job) -> None:
        """NIXL's listener requests are asynchronous: they run on this agent's request thread,
        one after the other, so that they reach a listener in the order they were made (a
        send_local_metadata, then invalidate_local_metadata, leaves the peer without it). A
        failure is logged and kept in metadata_errors, never dropped."""
        with self._lock:
            if self._md_jobs is None:
                self._md_jobs = queue.SimpleQueue()
                threading.Thread(target=_run_requests, args=(self._md_jobs, self.metadata_errors),
                                 name=f"nixl-md-{self.name}", daemon=True).start()
            self._md_jobs.put((what, job))

    def _peer(self, ip_addr: str, port: int, what: str):
        if not ip_addr:
            raise nixlBind.nixlNotSupportedError(
                f"{what}: wcomm has no central metadata server (etcd): pass ip_addr and port of the peer's listener")
        return _listener.split_addr(ip_addr, port)

    def send_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT) -> None:
        host, port = self._peer(ip_addr, port, "send_local_metadata")
        md, t = self.engine.metadata(), self._conf.timeout
        self._sent_to.add((host, port))
        self._background(f"send_local_metadata to {host}:{port}",
                         lambda: _listener.request(host, port, b"S", md, t))

    def send_partial_agent_metadata(self, descs: Any, inc_conn_info: bool = False, backends: List[str] = [],
                                    ip_addr: str = "", port: int = DEFAULT_COMM_PORT, label: str = "") -> None:
        self._check_backends(backends)
        self.send_local_metadata(ip_addr, port)

    def fetch_remote_metadata(self, remote_agent: Union[str, bytes], ip_addr: str = "", port: int = DEFAULT_COMM_PORT,
                              label: str = "") -> None:
        host, port = self._peer(ip_addr, port, "fetch_remote_metadata")
        name, t = _name(remote_agent), self._conf.timeout
        self._background(f"fetch_remote_metadata of {name!r} from {host}:{port}",
                         lambda: self._load(_listener.request(host, port, b"F", name.encode(), t)))

    def invalidate_local_metadata(self, ip_addr: str = "", port: int = DEFAULT_COMM_PORT) -> None:
        """At one peer's listener; with no ip_addr, at every listener this agent sent its metadata to."""
        targets = [self._peer(ip_addr, port, "invalidate_local_metadata")] if ip_addr else sorted(self._sent_to)
        me, t = self.name.encode(), self._conf.timeout
        for host, p in targets:
            self._sent_to.discard((host, p))
            self._background(f"invalidate_local_metadata at {host}:{p}",
                             lambda host=host, p=p: _listener.request(host, p, b"I", me, t))

    # -- notifications -------------------------------------------------------------------------

    def _pull(self, into: Dict[str, List[bytes]]) -> Dict[str, List[bytes]]:
        if self._engine is not None:
            for src, msg in self._engine.take_notifications(raw=True):
                into.setdefault(src, []).append(msg)
        if self._loop_notifs:
            with self._lock:
                got, self._loop_notifs = self._loop_notifs, []
            for src, msg in got:
                into.setdefault(src, []).append(msg)
        return into

    def get_new_notifs(self, backends: List[str] = []) -> Dict[str, List[bytes]]:
        self._check_backends(backends)
        return self._pull({})

    def update_notifs(self, backends: List[str] = []) -> Dict[str, List[bytes]]:
        self._check_backends(backends)
        self.notifs = self._pull(self.notifs)
        return self.notifs

    def check_remote_xfer_done(self, remote_agent_name: Union[str, bytes], lookup_tag: bytes, backends: List[str] = [],
                               tag_is_prefix: bool = True) -> bool:
        self.update_notifs(backends)
        tag = lookup_tag.encode() if isinstance(lookup_tag, str) else bytes(lookup_tag)
        msgs = self.notifs.get(_name(remote_agent_name), [])
        for i, msg in enumerate(msgs):
            if (msg.startswith(tag) if tag_is_prefix else tag in msg):
                del msgs[i]
                return True
        return False

    def send_notif(self, remote_agent_name: Union[str, bytes], notif_msg: bytes, backend: Optional[str] = None) -> None:
        if backend is not None:
            self._check_backends([backend])
        name = _name(remote_agent_name)
        msg = notif_msg.encode() if isinstance(notif_msg, str) else bytes(notif_msg)
        if name == self.name:
            with self._lock:
                self._loop_notifs.append((self.name, msg))
            return
        if name not in self._remote_md:
            raise nixlBind.nixlNotFoundError(f"send_notif: no remote agent {name!r} was added")
        try:
            self.engine.send_notification(name, msg, timeout=self._conf.timeout)
        except ValueError as e:
            raise nixlBind.nixlNotFoundError(f"send_notif: {e}") from None
        except (CommError, RuntimeError) as e:
            raise nixlBind.nixlBackendError(f"send_notif to {name!r}: {e}") from None
