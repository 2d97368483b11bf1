"""Peer, CommOptions, CommConfig and the YAML node config (load_runtime_config).

CommConfig checks the Python types of its fields here and leaves the ranges to the C++ core,
so there is one definition of what is acceptable (its messages name the field).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Optional, Tuple, Union

from . import _core

__all__ = ["Peer", "CommOptions", "CommConfig", "TlsConfig", "RuntimeConfig", "load_runtime_config"]

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Peer:
    """One node of the static peer directory: its name and where it listens. V0.1 gives host
    and port (TCP); `addresses` may list others or more, tried in order when dialing and all
    listened on locally: "tcp://host:port", "unix:///path", "unix://@name", "shm://@name",
    "ucx://host:port" (UCX: RDMA where there is RDMA).
    `transport` ("" for the CommConfig's; auto, shm, unix, tcp or ucx) chooses how it is reached."""

    node_id: str
    host: str = ""
    port: int = 0
    addresses: Tuple[str, ...] = ()
    transport: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.node_id, str) or not self.node_id:
            raise ValueError(f"Peer.node_id must be a non-empty str, got {self.node_id!r}")
        if isinstance(self.addresses, str) or not isinstance(self.addresses, (tuple, list)):
            raise ValueError(f"Peer.addresses must be a sequence of address strings, got {self.addresses!r}")
        for a in self.addresses:
            if not isinstance(a, str):
                raise ValueError(f"Peer.addresses must hold strings, got {a!r}")
        # The normal form, checked by the core (ValueError naming the bad address).
        object.__setattr__(self, "addresses", tuple(_core.parse_address(a) for a in self.addresses))
        if not isinstance(self.host, str) or (not self.host and not self.addresses):
            raise ValueError(f"Peer.host must be a non-empty str (or give addresses), got {self.host!r}")
        if not _is_int(self.port) or not 0 <= self.port <= 65535:
            raise ValueError(f"Peer.port must be an int in 0..65535, got {self.port!r}")
        if self.transport not in ("",) + _TRANSPORTS:
            raise ValueError(f"Peer.transport must be one of {', '.join(_TRANSPORTS)} (or ''), got {self.transport!r}")


@dataclass(frozen=True)
class CommOptions:
    """Per-operation options: the tag to match on, a timeout in seconds (None: wait as long as
    it takes), whether send waits for queue capacity (False: BackpressureError at once), and
    (wcomm) whether send completes only once a wcomm peer acknowledges having read the message
    (ack=True; a V0.1 peer cannot, and there the send completes as without ack).

    priority (wcomm, send): "auto" (small messages "high", ones over CommConfig.chunk_bytes
    "bulk"), "high", "normal" or "bulk": a higher class goes out first, between the chunks of
    a large message; per (peer, tag) the order is always kept. compress (wcomm, send): None
    (adaptive: only when the link is slower than the compressor and a sample shrinks), True
    (always tried) or False (never).

    retry_key (wcomm, send): an int in 0..2**64-1 that makes retrying safe after an unknown
    outcome (DeliveryUnknownError): a wcomm peer delivers one message per retry key from this
    node and acknowledges a repeat unread (it remembers the last 16384 keys). A V0.1 peer
    cannot: such a send fails with UnsupportedPayloadError."""

    tag: int = 0
    timeout: Optional[float] = None
    wait_for_capacity: bool = True
    ack: bool = False
    priority: str = "auto"
    compress: Optional[bool] = None
    retry_key: Optional[int] = None

    def __post_init__(self) -> None:
        if not _is_int(self.tag) or not 0 <= self.tag <= _U32_MAX:
            raise ValueError(f"CommOptions.tag must be an int in 0..2**32-1, got {self.tag!r}")
        if self.timeout is not None and (
            not _is_number(self.timeout) or not math.isfinite(self.timeout) or self.timeout <= 0
        ):
            raise ValueError(f"CommOptions.timeout must be None or a positive number of seconds, got {self.timeout!r}")
        if not isinstance(self.wait_for_capacity, bool):
            raise ValueError(f"CommOptions.wait_for_capacity must be a bool, got {self.wait_for_capacity!r}")
        if not isinstance(self.ack, bool):
            raise ValueError(f"CommOptions.ack must be a bool, got {self.ack!r}")
        if self.priority not in _PRIORITIES:
            raise ValueError(f"CommOptions.priority must be one of {', '.join(_PRIORITIES)}, got {self.priority!r}")
        if self.compress is not None and not isinstance(self.compress, bool):
            raise ValueError(f"CommOptions.compress must be None, True or False, got {self.compress!r}")
        if self.retry_key is not None and (not _is_int(self.retry_key) or not 0 <= self.retry_key < 1 << 64):
            raise ValueError(f"CommOptions.retry_key must be None or an int in 0..2**64-1, got {self.retry_key!r}")

    def _priority_code(self) -> int:
        return _PRIORITIES.index(self.priority)

    def _compress_code(self) -> int:
        return 0 if self.compress is None else (1 if self.compress else 2)


_PRIORITIES = ("auto", "high", "normal", "bulk")


_INT_FIELDS = (
    "max_message_bytes",
    "max_manifest_bytes",
    "max_metadata_bytes",
    "max_segments",
    "max_container_depth",
    "max_container_nodes",
    "max_peer_queued_messages",
    "max_peer_queued_bytes",
    "max_peer_unreceived_messages",
    "max_peer_unreceived_bytes",
    "recv_busy_poll_us",
    "max_pending_handshakes",
    "max_pending_handshakes_per_source",
    "egress_max_bulk_flows",
    "chunk_bytes",
    "tcp_notsent_lowat_bytes",
    "tcp_max_pacing_rate_bytes_per_second",
    "tcp_target_queue_delay_us",
    "max_peers",
)
_EGRESS_FIELDS = ("egress_quantum_bytes", "egress_rate_bytes_per_second", "egress_burst_bytes")
_BOOL_FIELDS = ("allow_unsafe_pickle", "tcp_nodelay", "accept_unknown_peers", "allow_unauthenticated_joins")
_TRANSPORTS = ("auto", "shm", "unix", "tcp", "ucx")


@dataclass(frozen=True)
class TlsConfig:
    """TLS for every connection (YAML `comm.tls`): TLS 1.3 with mutual certificate checks.

    cert_file and key_file are this node's certificate (its subject CN or a DNS
    subjectAltName is the node id) and private key, ca_file the CA certificates a peer's
    certificate must chain to; all PEM files. scripts/make-test-certs.sh makes a test set.
    """

    cert_file: str
    key_file: str
    ca_file: str

    def __post_init__(self) -> None:
        for name in ("cert_file", "key_file", "ca_file"):
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
            elif not isinstance(value, str) or not value:
                raise ValueError(f"TlsConfig.{name} must be a non-empty path, got {value!r}")


@dataclass(frozen=True)
class CommConfig:
    """Every limit and knob of a Comm, with the V0.1 names and defaults.

    The codec limits hold on both encode and decode; the per-peer send queue is bounded by
    max_peer_queued_messages and max_peer_queued_bytes; received but not yet recv()'d data is
    bounded by max_peer_unreceived_* (past them TCP pushes back on the sender). Unsafe pickle
    is for trusted peers only.

    The egress scheduler (V0.1's keys and rules; all three default to None, off): a quantum
    turns it on (peers served in turn, one quantum each); a rate in bytes per second, which
    needs egress_quantum_bytes, caps the whole node's egress with one token bucket holding
    egress_burst_bytes (None: one quantum), at least one quantum. wcomm adds
    egress_max_bulk_flows (0: no cap), chunk_bytes (0: no chunked frames),
    tcp_notsent_lowat_bytes (0: the kernel's default), tcp_max_pacing_rate_bytes_per_second
    (0: unpaced), tcp_target_queue_delay_us (0: no bound) and compression ("auto" or "off").
    """

    max_message_bytes: int = 256 << 20
    max_manifest_bytes: int = 4 << 20
    max_metadata_bytes: int = 64 << 10
    max_segments: int = 4096
    max_container_depth: int = 64
    max_container_nodes: int = 1_000_000
    max_peer_queued_messages: int = 1024
    max_peer_queued_bytes: int = 128 << 20
    allow_unsafe_pickle: bool = False
    tcp_nodelay: bool = True
    egress_quantum_bytes: Optional[int] = None
    egress_rate_bytes_per_second: Optional[int] = None
    egress_burst_bytes: Optional[int] = None
    # wcomm additions (not in V0.1): the inbound bound and the dial retry window.
    max_peer_unreceived_messages: int = 4096
    max_peer_unreceived_bytes: int = 512 << 20
    connect_timeout_s: float = 30.0
    recv_busy_poll_us: int = 20
    # wcomm sessions: heartbeats (0: off), the accepting side's handshake limit, redial backoff.
    heartbeat_interval_s: float = 2.0
    handshake_timeout_s: float = 10.0
    reconnect_backoff_initial_s: float = 0.01
    reconnect_backoff_max_s: float = 0.5
    # How peers are reached: auto (shared memory with peers on this host, else their
    # addresses), shm, unix, tcp or ucx (docs/python.md, "Transports").
    transport: str = "auto"
    # At most this many accepted connections wait for their handshake; one more evicts the oldest.
    max_pending_handshakes: int = 256
    # ... and at most this many from one source address (one more evicts that source's oldest).
    max_pending_handshakes_per_source: int = 32
    # Cluster key (bytes, at least 16): every connection proves both ends know it; peers
    # without it are refused (docs/python.md). b"": none (WCOMM_CLUSTER_KEY_FILE may give one).
    cluster_key: bytes = field(default=b"", repr=False)
    # TLS (a TlsConfig): every connection is TLS 1.3 over TCP, both ends showing a certificate
    # from the CA that names their node id; auto then never uses shared memory (docs/python.md).
    tls: Optional[TlsConfig] = None
    # Responsiveness under load (docs/python.md): at most this many peers get bulk at once
    # with the scheduler on (0: no cap); chunk size of large messages (0: whole frames);
    # TCP_NOTSENT_LOWAT (0: kernel default); SO_MAX_PACING_RATE, bytes per second per TCP
    # connection (0: unpaced); the queueing delay a TCP connection may add on a path that
    # queues (0: no bound); adaptive zstd compression ("auto" or "off").
    egress_max_bulk_flows: int = 0
    chunk_bytes: int = 256 << 10
    tcp_notsent_lowat_bytes: int = 128 << 10
    tcp_max_pacing_rate_bytes_per_second: int = 0
    tcp_target_queue_delay_us: int = 8000
    compression: str = "auto"
    # Peers that join at run time (docs/python.md, "Peers that join and leave"): a HELLO from
    # a node not in the directory adds it; needs cluster_key or tls, or, on loopback / unix
    # addresses only, allow_unauthenticated_joins. At most max_peers peers in the directory.
    accept_unknown_peers: bool = False
    allow_unauthenticated_joins: bool = False
    max_peers: int = 1024

    def __post_init__(self) -> None:
        if self.tls is not None and not isinstance(self.tls, TlsConfig):
            raise ValueError(f"CommConfig.tls must be a TlsConfig or None, got {type(self.tls).__name__}")
        if not isinstance(self.cluster_key, bytes):
            raise ValueError(f"CommConfig.cluster_key must be bytes, got {type(self.cluster_key).__name__}")
        if self.transport not in _TRANSPORTS:
            raise ValueError(f"CommConfig.transport must be one of {', '.join(_TRANSPORTS)}, got {self.transport!r}")
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if not _is_int(value) or not 0 <= value <= _U64_MAX:
                raise ValueError(f"CommConfig.{name} must be a positive int, got {value!r}")
        for name in _BOOL_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"CommConfig.{name} must be a bool, got {value!r}")
        for name in _EGRESS_FIELDS:
            # V0.1: None, or a positive integer (a rate may also be a whole float, e.g. 2.5e6).
            value = getattr(self, name)
            whole_float = (name == "egress_rate_bytes_per_second" and isinstance(value, float)
                           and math.isfinite(value) and value == int(value))
            if value is None:
                continue
            if not (_is_int(value) or whole_float) or not 1 <= value <= _U64_MAX:
                raise ValueError(f"CommConfig.{name}: {name} must be positive when configured "
                                 f"(None or a positive integer), got {value!r}")
        for name in ("connect_timeout_s", "heartbeat_interval_s", "handshake_timeout_s",
                     "reconnect_backoff_initial_s", "reconnect_backoff_max_s"):
            if not _is_number(getattr(self, name)):
                raise ValueError(f"CommConfig.{name} must be a number of seconds, got {getattr(self, name)!r}")
        _core.validate_config(self._fields())  # the ranges; ValueError names the field

    def _fields(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "tls"}
        for name in ("cert_file", "key_file", "ca_file"):  # the core's flat tls_* fields ("" when off)
            out["tls_" + name] = getattr(self.tls, name) if self.tls else ""
        return out

    @classmethod
    def _from_fields(cls, fields: dict) -> "CommConfig":
        fields = dict(fields)
        files = {name: fields.pop("tls_" + name, "") for name in ("cert_file", "key_file", "ca_file")}
        tls = TlsConfig(**files) if any(files.values()) else None
        return cls(**fields, tls=tls)


@dataclass(frozen=True)
class RuntimeConfig:
    """A node's YAML config: who it is, where it listens, its peers and its CommConfig."""

    local: Peer
    peers: Tuple[Peer, ...]
    bind_host: str
    comm: CommConfig = field(default_factory=CommConfig)


def load_runtime_config(path: Union[str, "os.PathLike[str]"]) -> RuntimeConfig:
    """Loads a node config in the V0.1 schema (local, peers, comm). Raises FileNotFoundError
    for a missing file and ValueError naming the file and the offending key or value."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: node config file not found")
    raw = _core.load_node_config(path)
    return RuntimeConfig(
        local=Peer(*raw["local"]),
        peers=tuple(Peer(*p) for p in raw["peers"]),
        bind_host=raw["bind_host"],
        comm=CommConfig._from_fields(raw["comm"]),
    )
