"""The metadata listener: NIXL's send / fetch / invalidate of agent metadata by ip:port, on a
protocol of wcomm's own (not NIXL's wire): one TCP connection per request, frames of a 4-byte
big-endian length and a body whose first byte says what it is.

    request  b"S" + metadata       load this agent's metadata      reply b"K" + name
             b"F" + agent name     send me your metadata           reply b"K" + metadata
             b"I" + agent name     forget that agent               reply b"K"
    error reply b"E" + reason (UTF-8)

Every socket operation has a timeout; the server thread wakes every 0.2 s to see whether it
should stop."""

from __future__ import annotations

import logging
import select
import socket
import struct
import threading
import time
from typing import Callable, Optional, Tuple

log = logging.getLogger("wireless_comm.nixl")

MAX_FRAME = 64 << 20   # agent metadata with many regions is a few MiB at most
IO_TIMEOUT_S = 5.0     # one request's send / receive on an open connection
_LEN = struct.Struct(">I")


class ListenerError(Exception):
    """A request the peer refused (its reason) or could not be delivered (why)."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def _send_frame(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_LEN.pack(len(body)) + body)


def _recv_frame(sock: socket.socket) -> bytes:
    (n,) = _LEN.unpack(_recv_exact(sock, 4))
    if n == 0 or n > MAX_FRAME:
        raise ConnectionError(f"bad frame length {n} (1 .. {MAX_FRAME})")
    return _recv_exact(sock, n)


class Listener:
    """Serves one agent's requests on host:port (port 0: a free one, see .port) from a thread.
    handle(op, payload) returns the reply payload or raises with the reason sent back."""

    def __init__(self, host: str, port: int, handle: Callable[[bytes, bytes], bytes]) -> None:
        self._handle = handle
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
        except OSError as e:
            self._sock.close()
            raise OSError(e.errno, f"metadata listener cannot bind {host}:{port}: {e.strerror}") from None
        self._sock.listen(64)
        self.host, self.port = host, self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"nixl-listener-{self.port}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._sock], [], [], 0.2)
            if not ready:
                continue
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(IO_TIMEOUT_S)
                try:
                    body = _recv_frame(conn)
                except (OSError, ConnectionError) as e:
                    log.warning("metadata listener on port %d: a bad request: %s", self.port, e)
                    continue
                try:
                    reply = b"K" + self._handle(body[:1], body[1:])
                except Exception as e:  # the reason goes back to the requester
                    reply = b"E" + str(e).encode(errors="replace")
                try:
                    _send_frame(conn, reply)
                except OSError as e:
                    log.warning("metadata listener on port %d: the reply was not delivered: %s", self.port, e)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._sock.close()


def request(host: str, port: int, op: bytes, payload: bytes, timeout: float) -> bytes:
    """One request; a refused connection is retried (the peer's listener may be starting) until
    timeout. Returns the reply payload; ListenerError with the reason otherwise."""
    deadline = time.monotonic() + timeout
    last: Optional[Exception] = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ListenerError(f"no answer from the metadata listener at {host}:{port} within {timeout:g} s"
                                + (f" (last error: {last})" if last else ""))
        try:
            with socket.create_connection((host, port), timeout=min(left, IO_TIMEOUT_S)) as s:
                s.settimeout(min(max(left, 0.1), IO_TIMEOUT_S))
                _send_frame(s, op + payload)
                reply = _recv_frame(s)
        except (ConnectionRefusedError, ConnectionResetError, socket.timeout) as e:
            last = e
            time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))
            continue
        except OSError as e:
            raise ListenerError(f"metadata listener at {host}:{port}: {e}") from None
        if reply[:1] == b"K":
            return reply[1:]
        raise ListenerError(f"the metadata listener at {host}:{port} refused: {reply[1:].decode(errors='replace')}")


def split_addr(ip_addr: str, port: int) -> Tuple[str, int]:
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"port must be 1 .. 65535, not {port!r}")
    return ip_addr, port
