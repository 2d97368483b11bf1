"""Group: collectives over a fixed set of ranks (wcomm's C++ Group), in place on torch tensors
and numpy arrays.

    group = await Group.create(rank=r, world_size=4, master_addr="192.0.2.1", master_port=29400)
    group = await Group.from_env()              # under torchrun, Slurm or mpirun
    await group.allreduce(t)                    # t = sum over every rank's t, in place
    await group.allreduce(t, op="max")
    group.sync.allreduce(t)                     # the same, blocking (no event loop needed)

Every method is collective: every rank calls it, in the same order, with matching sizes, dtypes,
op and root. A rank that fails, times out or calls with other arguments fails the call on
every rank with CollectiveError (its ``rank`` names the rank at fault); the group is then
broken and every later call raises at once. The C++ call runs on a thread of the group's own
(one at a time, in call order) with the GIL released; the tensor must stay alive and
untouched until the awaited call returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _core
from .errors import CommError

__all__ = ["Group", "CollectiveError", "REDUCE_OPS"]

REDUCE_OPS = ("sum", "prod", "min", "max", "xor", "and", "or")


class CollectiveError(CommError):
    """A collective call failed on some rank; ``rank`` is the rank at fault (-1: unknown).

    Raised as a class that is also the cause's (OperationTimeoutError, ConnectionClosedError,
    ValueError for mismatched arguments, ...), so either kind of ``except`` catches it."""

    rank: int = -1


_classes: Dict[type, type] = {}


def _collective_error(cause: type, rank: int, message: str) -> CollectiveError:
    cls = _classes.get(cause)
    if cls is None:
        cls = type("CollectiveError", (CollectiveError, cause), {"__module__": __name__})
        _classes[cause] = cls
    exc = cls(message)
    exc.rank = rank
    return exc


class _Blocking:
    """The group's calls as plain blocking functions (group.sync)."""

    def __init__(self, core: Any, timeout: Optional[float]):
        self._core = core
        self._timeout = timeout

    def barrier(self, timeout: Optional[float] = None) -> None:
        self._core.barrier(timeout)

    def broadcast(self, tensor: Any, root: int = 0, timeout: Optional[float] = None) -> Any:
        self._core.broadcast(tensor, root, timeout)
        return tensor

    def allgather(self, tensor: Any, output: Any, timeout: Optional[float] = None) -> Any:
        self._core.allgather(tensor, output, timeout)
        return output

    def reduce_scatter(self, tensor: Any, output: Any, op: str = "sum", timeout: Optional[float] = None) -> Any:
        self._core.reduce_scatter(tensor, output, op, timeout)
        return output

    def allreduce(self, tensor: Any, op: str = "sum", timeout: Optional[float] = None,
                  algorithm: str = "auto") -> Any:
        self._core.allreduce(tensor, op, timeout, algorithm)
        return tensor

    def send(self, tensor: Any, dst: int, tag: int = 0, timeout: Optional[float] = None) -> None:
        self._core.send(tensor, dst, tag, timeout)

    def recv(self, tensor: Any, src: int, tag: int = 0, timeout: Optional[float] = None) -> Any:
        self._core.recv(tensor, src, tag, timeout)
        return tensor


class Group:
    """One rank of a group. Create it with ``await Group.create(...)`` or ``Group.from_env()``."""

    def __init__(self, core: Any):
        self._core = core
        self.sync = _Blocking(core, None)
        # Collective calls run one at a time, in call order; p2p sends and receives get their
        # own threads so that a rank can send and receive at once.
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="wcomm-group")
        self._p2p = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="wcomm-group-p2p")

    @classmethod
    def create_blocking(cls, rank: int = -1, world_size: int = 0, *, master_addr: Optional[str] = None,
                        master_port: Optional[int] = None, peers: Optional[Sequence[Tuple[str, int]]] = None,
                        from_env: bool = False, bind_host: str = "", advertise_host: str = "",
                        timeout: float = 300.0, rendezvous_timeout: float = 120.0,
                        small_allreduce_bytes: int = 256 << 10, segment_bytes: int = 4 << 20) -> "Group":
        """Rendezvous and connect, blocking. ``peers``: every rank's (host, port), or rank 0's
        address in master_addr / master_port. ``timeout``: the default per-call timeout."""
        core = _core.Group(rank, world_size, master_addr, master_port,
                           [(h, int(p)) for h, p in peers] if peers is not None else None, from_env, bind_host,
                           advertise_host, timeout, rendezvous_timeout, small_allreduce_bytes, segment_bytes)
        return cls(core)

    @classmethod
    async def create(cls, rank: int = -1, world_size: int = 0, **kwargs: Any) -> "Group":
        """``create_blocking`` without blocking the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: cls.create_blocking(rank, world_size, **kwargs))

    @classmethod
    async def from_env(cls, **kwargs: Any) -> "Group":
        """Ranks and rank 0's address from torchrun, Slurm or Open MPI's environment
        (WCOMM_MASTER_ADDR / WCOMM_MASTER_PORT override it; see docs/collectives.md)."""
        return await cls.create(from_env=True, **kwargs)

    @staticmethod
    def spec_from_env() -> Dict[str, Any]:
        """What from_env would use: rank, world_size, master_addr, master_port, source."""
        return _core.group_spec_from_env()

    @property
    def rank(self) -> int:
        return self._core.rank

    @property
    def world_size(self) -> int:
        return self._core.world_size

    async def _run(self, fn: Any, *args: Any, pool: Any = None) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool or self._pool, fn, *args)

    async def barrier(self, timeout: Optional[float] = None) -> None:
        await self._run(self.sync.barrier, timeout)

    async def broadcast(self, tensor: Any, root: int = 0, timeout: Optional[float] = None) -> Any:
        """tensor = root's tensor, in place; returns it."""
        return await self._run(self.sync.broadcast, tensor, root, timeout)

    async def allgather(self, tensor: Any, output: Any, timeout: Optional[float] = None) -> Any:
        """output (world_size x tensor's elements) = every rank's tensor, by rank; returns it."""
        return await self._run(self.sync.allgather, tensor, output, timeout)

    async def reduce_scatter(self, tensor: Any, output: Any, op: str = "sum",
                             timeout: Optional[float] = None) -> Any:
        """output = this rank's block of op over every rank's tensor (block k: elements
        k*(n//W) + min(k, n%W) onwards); returns it."""
        return await self._run(self.sync.reduce_scatter, tensor, output, op, timeout)

    async def allreduce(self, tensor: Any, op: str = "sum", timeout: Optional[float] = None,
                        algorithm: str = "auto") -> Any:
        """tensor = op over every rank's tensor, in place; returns it. op: sum, prod, min, max,
        xor, and, or. algorithm: auto (by size), ring or recursive_doubling."""
        return await self._run(self.sync.allreduce, tensor, op, timeout, algorithm)

    async def send(self, tensor: Any, dst: int, tag: int = 0, timeout: Optional[float] = None) -> None:
        await self._run(self.sync.send, tensor, dst, tag, timeout, pool=self._p2p)

    async def recv(self, tensor: Any, src: int, tag: int = 0, timeout: Optional[float] = None) -> Any:
        """Receives into tensor (its dtype and size must match the sent one); returns it."""
        return await self._run(self.sync.recv, tensor, src, tag, timeout, pool=self._p2p)

    def close(self) -> None:
        self._core.close()
        self._pool.shutdown(wait=False)
        self._p2p.shutdown(wait=False)

    async def __aenter__(self) -> "Group":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
