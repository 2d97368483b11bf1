"""The exceptions wireless_comm raises, with the names of the V0.1 package.

Every one derives from CommError. Those with an obvious builtin meaning also derive from it
(OperationTimeoutError is a TimeoutError, the two connection errors are ConnectionErrors), so
generic handlers keep working.
"""

from __future__ import annotations

__all__ = [
    "CommError",
    "BackpressureError",
    "ConnectionClosedError",
    "ConnectionFailedError",
    "MessageTooLargeError",
    "OperationTimeoutError",
    "ProtocolError",
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


class ConnectionFailedError(CommError, ConnectionError):
    """The peer could not be reached before the operation's (or the connect) timeout."""


class MessageTooLargeError(CommError):
    """A message, or a part of it, exceeds one of the CommConfig limits."""


class OperationTimeoutError(CommError, TimeoutError):
    """The operation's CommOptions.timeout expired."""


class ProtocolError(CommError):
    """The peer broke the COMM v1 protocol."""


class SerializationError(CommError):
    """A value could not be encoded or decoded."""


class UnknownCodecError(CommError):
    """A dataclass or custom codec type_id (or version) that is not registered."""


class UnsupportedPayloadError(CommError):
    """A value that cannot travel (the message says how to fix it)."""
