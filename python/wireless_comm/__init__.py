"""wireless_comm: tagged P2P messages with zero-copy tensors over asyncio (the V0.1 API),
running on wcomm's C++ core.

    from wireless_comm import Comm, CommOptions, Peer

    comm = await Comm.create(local=Peer("node-a", "192.0.2.10", 9000),
                             peers=[Peer("node-b", "192.0.2.11", 9000)], bind_host="0.0.0.0")
    await comm.send({"tensor": t}, comm.peer("node-b"), piggypayload={"trace_id": "r-42"},
                    options=CommOptions(tag=1))
    obj, piggypayload = await comm.recv(comm.peer("node-b"), CommOptions(tag=1))
"""

from .errors import (
    BackpressureError,
    CommError,
    ConnectionClosedError,
    PeerRestartedError,
    DeliveryUnknownError,
    ConnectionFailedError,
    MessageTooLargeError,
    OperationTimeoutError,
    PiggypayloadTooLargeError,
    ProtocolError,
    QueueOverflowError,
    SerializationError,
    UnknownCodecError,
    UnsupportedPayloadError,
)
from .config import CommConfig, CommOptions, Peer, RuntimeConfig, TlsConfig, load_runtime_config
from .comm import Comm, Metadata, Object, PeerEvent, ReceivedMessage, SendResult, TypeRegistry
from .group import CollectiveError, Group

__version__ = "0.2.0"

__all__ = [
    "BackpressureError",
    "CollectiveError",
    "Comm",
    "CommConfig",
    "TlsConfig",
    "CommError",
    "CommOptions",
    "ConnectionClosedError",
    "PeerRestartedError",
    "DeliveryUnknownError",
    "ConnectionFailedError",
    "Group",
    "MessageTooLargeError",
    "Metadata",
    "Object",
    "OperationTimeoutError",
    "Peer",
    "PiggypayloadTooLargeError",
    "ProtocolError",
    "QueueOverflowError",
    "PeerEvent",
    "ReceivedMessage",
    "RuntimeConfig",
    "SendResult",
    "SerializationError",
    "TypeRegistry",
    "UnknownCodecError",
    "UnsupportedPayloadError",
    "load_runtime_config",
]
