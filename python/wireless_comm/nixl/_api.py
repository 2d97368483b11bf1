"""nixl._api over wcomm: nixl_agent and nixl_agent_config with NIXL's names, arguments, return
values and errors, on one wireless_comm.xfer.Agent (the engine) per nixl_agent. Host memory
only. docs/transfer.md, "Coming from NIXL", lists what maps and what differs."""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import queue
import threading
import time
import weakref
from typing import Any, Dict, List, Optional, Union

from .. import xfer
from ..config import Peer
from ..errors import CommError
from . import _backends, _listener
from . import _bindings as nixlBind
from ._descs import MEM_TYPES, make_descs
from ._handles import merge, nixl_prepped_dlist_handle, nixl_xfer_handle
from ._remote import RemoteAgents, _name

log = logging.getLogger("wireless_comm.nixl")

DEFAULT_COMM_PORT = nixlBind.DEFAULT_COMM_PORT
nixl_backend_handle = int

_OPS = {"WRITE": "write", "READ": "read"}
_DRAM = nixlBind.DRAM_SEG


def _host_only(dlist: Any, what: str) -> None:
    if dlist.getType() != _DRAM:
        raise nixlBind.nixlNotSupportedError(
            f"{what}: {dlist.getType().name} memory: wcomm moves host memory (DRAM_SEG) only")


class nixl_agent_config:
    """NIXL's agent configuration. enable_prog_thread is accepted and ignored (wcomm's engines run
    their own progress threads). wcomm extras, keyword only: comm_host (where the agent's Comm and
    listener listen; 127.0.0.1 unless given), cluster_key (authenticates agents that join the Comm;
    without it only loopback agents are accepted, as NIXL has no authentication), default_mem_type
    (used when a tuple list comes with mem_type None; also WCOMM_NIXL_DEFAULT_MEM_TYPE), timeout
    (seconds: each transfer's deadline, each notification and metadata request)."""

    def __init__(self, enable_prog_thread: bool = True, enable_listen_thread: bool = False, listen_port: int = 0,
                 capture_telemetry: bool = False, num_threads: int = 0, backends: Optional[List[str]] = None, *,
                 comm_host: str = "127.0.0.1", cluster_key: bytes = b"", default_mem_type: Optional[str] = None,
                 timeout: float = 30.0) -> None:
        if isinstance(capture_telemetry, list):  # NIXL before telemetry: (prog, listen, port, backends)
            backends, capture_telemetry = capture_telemetry, False
        self.backends = ["UCX"] if backends is None else list(backends)
        self.enable_pthread = enable_prog_thread
        self.enable_listen = enable_listen_thread
        self.port = listen_port
        self.capture_telemetry = capture_telemetry
        self.num_threads = num_threads
        self.comm_host, self.cluster_key = comm_host, bytes(cluster_key)
        self.default_mem_type = default_mem_type or os.environ.get("WCOMM_NIXL_DEFAULT_MEM_TYPE") or None
        if self.default_mem_type is not None and self.default_mem_type not in MEM_TYPES:
            raise KeyError(f"default_mem_type {self.default_mem_type!r} is not one of {sorted(MEM_TYPES)}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
        self.timeout = float(timeout)


class nixl_agent(RemoteAgents):
    def __init__(self, agent_name: str, nixl_conf: Optional[nixl_agent_config] = None,
                 instantiate_all: bool = False) -> None:
        if nixl_conf and instantiate_all:
            log.warning("Ignoring instantiate_all based on the provided config in agent creation.")
            instantiate_all = False
        conf = nixl_conf or nixl_agent_config()
        self.name = _name(agent_name)
        self._conf = conf
        self._lock = threading.RLock()
        self._engine: Optional[xfer.Agent] = None
        self._remote_md: Dict[str, bytes] = {}     # loaded remote agents -> their metadata
        self._loop_notifs: List[tuple] = []        # loopback notifications, (self, msg)
        self._sent_to: set = set()                 # listeners we sent our metadata to
        self.metadata_errors: List[str] = []       # wcomm extra: failed background listener requests
        self._md_jobs: Optional[queue.SimpleQueue] = None  # listener requests, in order (_remote.py)
        self.notifs: Dict[str, List[bytes]] = {}
        self.backends: Dict[str, nixl_backend_handle] = {}
        self.backend_mems: Dict[str, List[str]] = {}
        self.backend_options: Dict[str, Dict[str, str]] = {}
        self.plugin_list = _backends.plugin_list()
        self.plugin_b_options = {p: dict(_backends.PARAMS) for p in self.plugin_list}
        self.plugin_mem_types = {p: list(_backends.MEM_TYPES) for p in self.plugin_list}
        self.nixl_mems = dict(MEM_TYPES)
        self.nixl_ops = dict(_OPS)
        for bknd in (self.plugin_list if instantiate_all else conf.backends):
            if bknd not in self.plugin_list:
                why = _backends.available().get(bknd, "no such backend in wcomm (UCX, cma, ucx, tcp)")
                log.warning("Skipping backend registration %s due to the missing plugin: %s", bknd, why)
                continue
            init = {"num_threads": str(conf.num_threads)} if conf.num_threads > 0 else {}
            self.create_backend(bknd, init)
        self._listener = None
        if conf.enable_listen:
            me = weakref.WeakMethod(self._serve)  # the thread must not keep the agent alive
            self._listener = _listener.Listener(conf.comm_host, conf.port, lambda op, p: me()(op, p))
            weakref.finalize(self, self._listener.close)
        log.info("Initialized NIXL agent: %s", self.name)

    # -- wcomm extras ------------------------------------------------------------------------

    @property
    def listen_port(self) -> Optional[int]:
        """The port the metadata listener took (listen_port 0 picks a free one); None without it."""
        return self._listener.port if self._listener else None

    @property
    def engine(self) -> xfer.Agent:
        """The wireless_comm.xfer.Agent under this agent, made when first needed with the
        backends created by then."""
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    self._engine = self._make_engine()
        return self._engine

    def _make_engine(self) -> xfer.Agent:
        if not self.backends:
            raise nixlBind.nixlNotFoundError("no backend was created: create_backend('UCX') first")
        kind = _backends.engine_for(list(self.backends))
        params = self.backend_options[next(iter(self.backends))]
        c = self._conf
        try:
            return xfer.Agent(self.name, backend=kind, local=Peer(self.name, c.comm_host, 0),
                              default_timeout=float(params.get("timeout_s", c.timeout)),
                              cma_threads=int(params.get("num_threads", 2)), cluster_key=c.cluster_key,
                              allow_unauthenticated_joins=not c.cluster_key)
        except (ValueError, CommError, RuntimeError) as e:
            raise nixlBind.nixlBackendError(f"cannot start wcomm's {kind} engine: {e}") from None

    def wait_xfer(self, handle: nixl_xfer_handle, timeout: float = 30.0) -> str:
        """Waits (bounded, GIL released) until the transfer settles: "DONE", "ERR" or "PROC"
        when timeout passed first; get_xfer_error says why an "ERR" failed."""
        self._live(handle)
        if handle.eh is not None and not handle.done:
            self.engine.wait(handle.eh, timeout)
        return self.check_xfer_state(handle)

    def get_xfer_error(self, handle: nixl_xfer_handle) -> str:
        """Why the transfer's latest post failed ("" when it did not)."""
        return handle.reason

    def close(self) -> None:
        """Stops the listener and lets go of the engine (NIXL frees these when the agent dies)."""
        if self._listener:
            self._listener.close()
        if self._md_jobs is not None:
            self._md_jobs.put(None)  # the request thread ends after what was asked before
            self._md_jobs = None
        self._engine = None

    # -- backends ----------------------------------------------------------------------------

    def get_plugin_list(self) -> List[str]:
        return self.plugin_list

    def get_plugin_mem_types(self, backend: str) -> List[str]:
        if backend in self.plugin_mem_types:
            return self.plugin_mem_types[backend]
        log.warning("Plugin %s is not available to get its supported mem types.", backend)
        return []

    def get_plugin_params(self, backend: str) -> Dict[str, str]:
        if backend in self.plugin_b_options:
            return self.plugin_b_options[backend]
        log.warning("Plugin %s is not available to get its parameters.", backend)
        return {}

    def get_backend_mem_types(self, backend: str) -> List[str]:
        if backend in self.backend_mems:
            return self.backend_mems[backend]
        log.warning("Backend %s not instantiated to get its supported mem types.", backend)
        return []

    def get_backend_params(self, backend: str) -> Dict[str, str]:
        if backend in self.backend_options:
            return self.backend_options[backend]
        log.warning("Backend %s not instantiated to get its parameters.", backend)
        return {}

    def create_backend(self, backend: str, initParams: Optional[Dict[str, str]] = None) -> None:
        if backend not in _backends.ENGINE_OF:
            raise nixlBind.nixlNotFoundError(
                f"no backend plugin {backend!r} in wcomm (it has {', '.join(_backends.ENGINE_OF)}; host memory only)")
        why = _backends.available()[backend]
        if why:
            raise nixlBind.nixlNotFoundError(f"backend {backend!r} is not available here: {why}")
        if backend in self.backends:
            raise nixlBind.nixlInvalidParamError(f"backend {backend!r} was already created")
        params = dict(_backends.PARAMS, timeout_s=repr(self._conf.timeout))
        for k, v in (initParams or {}).items():
            if k in params:
                params[k] = str(v)
            else:
                log.warning("create_backend(%s): wcomm ignores the parameter %r (it knows %s)", backend, k,
                            ", ".join(params))
        with self._lock:
            if self._engine is not None and _backends.engine_for(list(self.backends) + [backend]) != \
                    _backends.engine_for(list(self.backends)):
                raise nixlBind.nixlNotAllowedError(
                    f"create_backend({backend!r}) after the agent started moving memory: wcomm runs one engine "
                    "per agent, chosen from the backends created before the first registration")
            self.backends[backend] = id(params)
            self.backend_mems[backend] = list(_backends.MEM_TYPES)
            self.backend_options[backend] = params
        log.info("Backend %s was instantiated", backend)

    def _check_backends(self, backends: List[str]) -> None:
        if isinstance(backends, bool):  # older NIXL had is_sorted in this position
            return
        for b in backends or ():
            self.backends[b]  # KeyError for one that was not created, as NIXL

    # -- memory ------------------------------------------------------------------------------

    def get_xfer_descs(self, descs: Any, mem_type: Optional[str] = None, is_sorted: bool = False):
        return make_descs(descs, mem_type, nixlBind.nixlXferDList, self._conf.default_mem_type)

    def get_reg_descs(self, descs: Any, mem_type: Optional[str] = None, is_sorted: bool = False):
        return make_descs(descs, mem_type, nixlBind.nixlRegDList, self._conf.default_mem_type)

    def _reg_list(self, reg_list: Any, mem_type: Optional[str], what: str):
        descs = self.get_reg_descs(reg_list, mem_type)
        if descs is None:
            raise nixlBind.nixlInvalidParamError(
                f"{what}: no descriptors could be made from a {type(reg_list).__name__} with mem_type {mem_type!r} "
                "(a memory type is needed for tuples: 'DRAM' or 'cpu'; 4-tuples (addr, len, dev, meta); contiguous "
                "tensors; the reason is logged by wireless_comm.nixl)")
        _host_only(descs, what)
        return descs

    def register_memory(self, reg_list: Any, mem_type: Optional[str] = None, backends: List[str] = [],
                        is_sorted: bool = False):
        descs = self._reg_list(reg_list, mem_type, "register_memory")
        self._check_backends(backends)
        done = []
        try:
            for d in descs:
                self.engine.register_memory(d[0], d[1])
                done.append(d)
        except (ValueError, CommError, RuntimeError) as e:
            for d in done:  # all or nothing, so a retry does not register twice
                self.engine.deregister_memory(d[0], d[1])
            raise nixlBind.nixlInvalidParamError(f"register_memory: {e}") from None
        return descs

    def deregister_memory(self, dereg_list: Any, backends: List[str] = []) -> None:
        descs = self._reg_list(dereg_list, None, "deregister_memory")
        self._check_backends(backends)
        for d in descs:
            try:
                self.engine.deregister_memory(d[0], d[1])
            except ValueError as e:
                raise nixlBind.nixlNotFoundError(f"deregister_memory: {e}") from None

    def query_memory(self, reg_list: Any, backend: str, mem_type: Optional[str] = None) -> List[Optional[Dict[str, str]]]:
        """Per descriptor: None when it is not inside memory this agent registered, else what
        wcomm knows of it (memory type, the backend's name, the registered region around it)."""
        descs = self._reg_list(reg_list, mem_type, "query_memory")
        if backend not in self.backends:
            raise ValueError(f"Backend '{backend}' not found. Available backends: {list(self.backends.keys())}")
        regions = self.engine.registered()
        out: List[Optional[Dict[str, str]]] = []
        for d in descs:
            r = next((r for r in regions if r[0] <= d[0] and d[0] + d[1] <= r[0] + r[1]), None)
            out.append(None if r is None else {"mem_type": "DRAM_SEG", "backend": backend,
                                               "region_addr": str(r[0]), "region_len": str(r[1])})
        return out

    # -- transfers -----------------------------------------------------------------------------

    def _inside_local(self, descs: List[tuple], what: str) -> None:
        regions = self.engine.registered()
        for d in descs:
            if not any(r[0] <= d[0] and d[0] + d[1] <= r[0] + r[1] for r in regions):
                raise nixlBind.nixlNotFoundError(
                    f"{what}: descriptor {d[:3]} is not inside memory agent {self.name!r} registered")

    def prep_xfer_dlist(self, agent_name: Union[str, bytes], xfer_list: Any, mem_type: Optional[str] = None,
                        backends: List[str] = [], is_sorted: bool = False) -> nixl_prepped_dlist_handle:
        descs = self.get_xfer_descs(xfer_list, mem_type)
        if descs is None:
            raise nixlBind.nixlInvalidParamError(
                f"prep_xfer_dlist: no descriptors from a {type(xfer_list).__name__} with mem_type {mem_type!r} "
                "(3-tuples (addr, len, dev) need 'DRAM' or 'cpu'; the reason is logged by wireless_comm.nixl)")
        _host_only(descs, "prep_xfer_dlist")
        self._check_backends(backends)
        name = _name(agent_name)
        name = "" if name == "NIXL_INIT_AGENT" else name
        engine_descs = [(d[0], d[1], 0) for d in descs]  # wcomm's engines take device 0 for host memory
        if name in ("", self.name):
            self._inside_local(engine_descs, "prep_xfer_dlist")
            return nixl_prepped_dlist_handle(self, engine_descs, None if name == "" else name, name == self.name)
        if name not in self._remote_md:
            raise nixlBind.nixlNotFoundError(f"prep_xfer_dlist: no remote agent {name!r} was added")
        return nixl_prepped_dlist_handle(self, engine_descs, name, False)

    def _live(self, h: Any) -> None:
        if not isinstance(h, (nixl_xfer_handle, nixl_prepped_dlist_handle)):
            raise nixlBind.nixlInvalidParamError(f"not a handle this agent made: {type(h).__name__}")
        if h._released:
            raise nixlBind.nixlInvalidParamError(f"{h!r} was released")
        if h._agent is not self:
            raise nixlBind.nixlInvalidParamError(f"{h!r} belongs to agent {h._agent.name!r}, not {self.name!r}")

    def make_prepped_xfer(self, operation: str, local_xfer_side: nixl_prepped_dlist_handle, local_indices: Any,
                          remote_xfer_side: nixl_prepped_dlist_handle, remote_indices: Any, notif_msg: bytes = b"",
                          backends: List[str] = [], skip_desc_merge: bool = False) -> nixl_xfer_handle:
        op = self.nixl_ops[operation]  # KeyError for anything but "WRITE" / "READ", as NIXL
        self._live(local_xfer_side)
        self._live(remote_xfer_side)
        self._check_backends(backends)
        if local_xfer_side.remote is not None:
            raise nixlBind.nixlInvalidParamError("make_prepped_xfer: the local side was not prepared with NIXL_INIT_AGENT")
        if remote_xfer_side.remote is None:
            raise nixlBind.nixlInvalidParamError(
                "make_prepped_xfer: the remote side was prepared with NIXL_INIT_AGENT, not a remote or this agent's name")
        li, ri = [int(i) for i in local_indices], [int(i) for i in remote_indices]
        if len(li) != len(ri):
            raise nixlBind.nixlInvalidParamError(
                f"make_prepped_xfer: {len(li)} local indices and {len(ri)} remote indices")
        ld, rd = local_xfer_side.descs, remote_xfer_side.descs
        try:
            local, remote = [ld[i] for i in li], [rd[i] for i in ri]
        except IndexError:
            raise nixlBind.nixlInvalidParamError(
                f"make_prepped_xfer: an index is out of range (local list has {len(ld)}, remote {len(rd)})") from None
        if min(li + ri, default=0) < 0:
            raise nixlBind.nixlInvalidParamError("make_prepped_xfer: negative index")
        return self._make(op, local, remote_xfer_side.remote, remote, notif_msg, skip_desc_merge,
                          remote_xfer_side.loopback)

    def _make(self, op: str, local: list, remote_name: str, remote: list, notif_msg: Any, skip_merge: bool,
              loopback: bool) -> nixl_xfer_handle:
        for i, (l, r) in enumerate(zip(local, remote)):
            if l[1] != r[1]:
                raise nixlBind.nixlInvalidParamError(
                    f"descriptor pair {i}: local length {l[1]} differs from remote length {r[1]}")
        if not skip_merge:
            local, remote = merge(local, remote)
        notif = notif_msg.encode() if isinstance(notif_msg, str) else bytes(notif_msg)
        return nixl_xfer_handle(self, op, local, remote_name, remote, notif, loopback)

    def initialize_xfer(self, operation: str, local_descs: Any, remote_descs: Any, remote_agent: Union[str, bytes],
                        notif_msg: bytes = b"", backends: List[str] = []) -> nixl_xfer_handle:
        op = self.nixl_ops[operation]
        self._check_backends(backends)
        lh = self.prep_xfer_dlist(nixlBind.NIXL_INIT_AGENT, local_descs)
        rh = self.prep_xfer_dlist(remote_agent, remote_descs)
        if len(lh.descs) != len(rh.descs):
            raise nixlBind.nixlInvalidParamError(
                f"initialize_xfer: {len(lh.descs)} local descriptors and {len(rh.descs)} remote descriptors")
        return self._make(op, lh.descs, rh.remote, rh.descs, notif_msg, False, rh.loopback)

    def transfer(self, handle: nixl_xfer_handle, notif_msg: bytes = b"") -> str:
        if handle._released or handle._agent is not self:
            self._live(handle)
        if notif_msg:
            handle.notif = notif_msg.encode() if isinstance(notif_msg, str) else bytes(notif_msg)
        engine = self.engine
        if handle.eh is not None:
            if not handle.done and engine.poll(handle.eh)[0] == "pending":
                raise nixlBind.nixlRepostActiveError(f"{handle!r} is still in flight")
            engine.release(handle.eh)
            handle.eh = None
        handle.done, handle.reason = False, ""
        tel = self._conf.capture_telemetry
        if tel:
            handle.t_start = time.monotonic_ns()
        if handle.loopback:
            return self._loopback(handle)
        try:
            if handle.notif:
                handle.eh = engine.post(handle.op, handle.local, handle.remote, handle.remote_descs, handle.notif)
            else:
                handle.eh = engine.post(handle.op, handle.local, handle.remote, handle.remote_descs)
        except ValueError as e:
            cls = nixlBind.nixlNotFoundError if "no remote agent" in str(e) else nixlBind.nixlInvalidParamError
            raise cls(f"transfer: {e}") from None
        except (CommError, RuntimeError) as e:
            raise nixlBind.nixlBackendError(f"transfer: {e}") from None
        if tel:
            handle.t_post = time.monotonic_ns()
            handle.backend = engine.backend_for(handle.remote)
        return "PROC"

    def _loopback(self, h: nixl_xfer_handle) -> str:
        """A transfer within this agent's own memory: copied here and now."""
        for l, r in zip(h.local, h.remote_descs):
            src, dst = (l, r) if h.op == "write" else (r, l)
            ctypes.memmove(dst[0], src[0], l[1])
        if h.notif:
            with self._lock:
                self._loop_notifs.append((self.name, h.notif))
        h.done, h.backend = True, "loopback"
        h.t_post = h.t_done = time.monotonic_ns()
        return "DONE"

    def check_xfer_state(self, handle: nixl_xfer_handle) -> str:
        if handle.done:
            return "DONE"
        if handle._released or handle._agent is not self:
            self._live(handle)
        if handle.eh is None:
            raise nixlBind.nixlNotPostedError(f"{handle!r} was not posted (call transfer first)")
        state, reason = self.engine.poll(handle.eh)
        if state == "pending":
            return "PROC"
        if state == "done":
            handle.done = True
            if self._conf.capture_telemetry:
                handle.t_done = time.monotonic_ns()
            return "DONE"
        if not handle.reason:
            handle.reason = reason
            log.warning("transfer %r to %r failed: %s", handle, handle.remote, reason)
        return "ERR"

    def get_xfer_telemetry(self, handle: nixl_xfer_handle) -> nixlBind.nixlXferTelemetry:
        self._live(handle)
        if not self._conf.capture_telemetry:
            raise nixlBind.nixlNoTelemetryError("telemetry is off: nixl_agent_config(capture_telemetry=True)")
        if not handle.t_start:
            raise nixlBind.nixlNoTelemetryError(f"{handle!r} was not posted yet")
        end = handle.t_done or time.monotonic_ns()
        return nixlBind.nixlXferTelemetry(handle.t_start // 1000, (handle.t_post - handle.t_start) // 1000,
                                          (end - handle.t_start) // 1000, handle.nbytes, len(handle.local),
                                          handle.backend)

    def query_xfer_backend(self, handle: nixl_xfer_handle) -> str:
        """The NIXL backend name (a key of self.backends); telemetry's backendName says which
        wcomm engine moved the bytes."""
        self._live(handle)
        return next(iter(self.backends))

    def estimate_xfer_cost(self, req_handle: nixl_xfer_handle):
        raise nixlBind.nixlNotSupportedError("estimate_xfer_cost: wcomm has no cost model")

    def _release_xfer(self, h: nixl_xfer_handle) -> None:
        if h.eh is not None and self._engine is not None:
            self._engine.release(h.eh)
        h.eh, h.done = None, False

    def release_xfer_handle(self, handle: nixl_xfer_handle) -> None:
        if handle._agent is not self:
            self._live(handle)
        handle.release()

    def release_dlist_handle(self, handle: nixl_prepped_dlist_handle) -> None:
        if handle._agent is not self:
            self._live(handle)
        handle.release()

    # -- descriptor serialisation (NIXL pickles its lists) -------------------------------------

    def get_serialized_descs(self, descs: Any) -> bytes:
        return pickle.dumps(descs)

    def deserialize_descs(self, serialized_descs: bytes):
        return pickle.loads(serialized_descs)
