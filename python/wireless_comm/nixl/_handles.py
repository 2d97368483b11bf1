"""The opaque handles nixl_agent hands out: a prepared descriptor list and a transfer. Both hold
what the hot path needs precomputed (engine descriptors, the remote's name), so transfer() is
one engine post. release() is idempotent, as NIXL's; a released handle refuses further use."""

from __future__ import annotations

import itertools
import logging
from typing import List, Optional, Tuple

log = logging.getLogger("wireless_comm.nixl")
_ids = itertools.count(1)

Desc = Tuple[int, int, int]


class nixl_prepped_dlist_handle:
    """A descriptor list prepared for one side of transfers: `remote` is None for the local
    (initiator) side, the remote agent's name, or the agent's own name for loopback."""

    __slots__ = ("_agent", "_handle", "_released", "descs", "remote", "loopback", "__weakref__")

    def __init__(self, agent, descs: List[Desc], remote: Optional[str], loopback: bool) -> None:
        self._agent, self._handle, self._released = agent, next(_ids), False
        self.descs, self.remote, self.loopback = descs, remote, loopback

    def __repr__(self) -> str:
        return f"nixl_prepped_dlist_handle(0x{self._handle:x}, released={self._released})"

    def release(self) -> None:
        self._released = True
        self.descs = []


class nixl_xfer_handle:
    """A transfer request; post it with nixl_agent.transfer (again once it is done)."""

    __slots__ = ("_agent", "_handle", "_released", "op", "local", "remote", "remote_descs", "notif", "loopback",
                 "eh", "done", "reason", "nbytes", "t_start", "t_post", "t_done", "backend", "__weakref__")

    def __init__(self, agent, op: str, local: List[Desc], remote: str, remote_descs: List[Desc], notif: bytes,
                 loopback: bool) -> None:
        self._agent, self._handle, self._released = agent, next(_ids), False
        self.op, self.local, self.remote, self.remote_descs = op, local, remote, remote_descs
        self.notif, self.loopback = notif, loopback
        self.eh: Optional[int] = None    # the engine's handle of the latest post
        self.done = False                # the latest post finished well
        self.reason = ""                 # why the latest post failed
        self.nbytes = sum(d[1] for d in local)
        self.t_start = self.t_post = self.t_done = 0   # telemetry, ns on the monotonic clock
        self.backend = ""

    def __repr__(self) -> str:
        return f"nixl_xfer_handle(0x{self._handle:x}, released={self._released})"

    def release(self) -> None:
        if not self._released:
            self._agent._release_xfer(self)
            self._released = True

    def __del__(self) -> None:
        if not getattr(self, "_released", True) and self.eh is not None:
            try:
                self._agent._release_xfer(self)
            except Exception:  # interpreter shutdown or a dead engine: nothing left to free
                pass


def merge(local: List[Desc], remote: List[Desc]) -> Tuple[List[Desc], List[Desc]]:
    """Pairs whose local and remote ranges both continue the previous pair's become one (NIXL
    merges the same way unless skip_desc_merge)."""
    if len(local) < 2:
        return local, remote
    out_l, out_r = [local[0]], [remote[0]]
    for l, r in zip(local[1:], remote[1:]):
        pl, pr = out_l[-1], out_r[-1]
        if pl[0] + pl[1] == l[0] and pr[0] + pr[1] == r[0]:
            out_l[-1] = (pl[0], pl[1] + l[1], 0)
            out_r[-1] = (pr[0], pr[1] + r[1], 0)
        else:
            out_l.append(l)
            out_r.append(r)
    return out_l, out_r
