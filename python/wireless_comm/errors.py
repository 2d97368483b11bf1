"""The exceptions wireless_comm raises, with the names of the V0.1 package.

Every one derives from CommError. The two connection errors are also ConnectionErrors, so
generic handlers keep working. OperationTimeoutError is not a TimeoutError, as in V0.1: V0.1
code reads `except asyncio.TimeoutError` around `asyncio.wait_for(comm.recv(...), t)` as "the
outer wait expired" (asyncio.TimeoutError is TimeoutError from Python 3.11), and must not catch
the operation's own timeout there. As in V0.1, UnsupportedPayloadError and UnknownCodecError are
SerializationErrors.

Two failures that V0.1 reports with another class than wcomm's precise one raise a class that
is both, so code written for either catches them:

- a message that can never fit the send queue (over max_peer_queued_bytes) raises
  QueueOverflowError: a MessageTooLargeError and (as in V0.1) a BackpressureError;
- a piggypayload over max_metadata_bytes raises PiggypayloadTooLargeError: a
  MessageTooLargeError and (as in V0.1) a SerializationError.
"""

from __future__ import annotations

__all__ = [
    "CommError",
    "BackpressureError",
    "ConnectionClosedError",
    "PeerRestartedError",
    "DeliveryUnknownError",
    "ConnectionFailedError",
    "MessageTooLargeError",
    "OperationTimeoutError",
    "PiggypayloadTooLargeError",
    "ProtocolError",
    "QueueOverflowError",
    "SerializationError",
    "UnknownCodecError",
    "UnsupportedPayloadError",
]


class CommError(Exception):
    """Base class of every wireless_comm error."""


class BackpressureError(CommError):
    """A peer's send queue is full and CommOptions(wait_for_capacity=False) was given."""


class ConnectionClosedError(CommError, ConnectionError):
    """The connection (or the Comm itself) closed while the operation waited on it."""


class PeerRestartedError(ConnectionClosedError):
    """The peer restarted (wcomm peers only): what was in flight with its old incarnation is
    gone. A ConnectionClosedError, so V0.1 code that catches those keeps working."""


class DeliveryUnknownError(ConnectionClosedError):
    """A send with CommOptions(ack=True) went out whole, but its acknowledgement never came
    (the connection ended, the Comm closed, or the send's timeout or cancel came first): the
    peer may have the message. Every other failed send was certainly not delivered. Sending
    it again may deliver it twice, unless it carries a retry key (CommOptions.retry_key).
    A ConnectionClosedError, so code that catches those keeps working."""


class ConnectionFailedError(CommError, ConnectionError):
    """The peer could not be reached before the operation's (or the connect) timeout."""


class MessageTooLargeError(CommError):
    """A message, or a part of it, exceeds one of the CommConfig limits."""


class OperationTimeoutError(CommError):
    """The operation's CommOptions.timeout expired (a CommError only, as in V0.1: not a TimeoutError)."""


class ProtocolError(CommError):
    """The peer broke the COMM v1 protocol."""


class SerializationError(CommError):
    """A value could not be encoded or decoded."""


class UnknownCodecError(SerializationError):
    """A dataclass or custom codec type_id (or version) that is not registered."""


class UnsupportedPayloadError(SerializationError):
    """A value that cannot travel (the message says how to fix it)."""


class QueueOverflowError(MessageTooLargeError, BackpressureError):
    """A message larger than max_peer_queued_bytes: it can never fit the peer's send queue.
    V0.1 raises BackpressureError here; this class is both."""


class PiggypayloadTooLargeError(MessageTooLargeError, SerializationError):
    """A piggypayload that packs to more than max_metadata_bytes. V0.1 raises
    SerializationError here; this class is both."""
