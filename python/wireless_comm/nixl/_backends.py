"""NIXL backend names on wcomm's engines. NIXL's "UCX" is wcomm's automatic choice per remote
(cma on the same host, ucx elsewhere, tcp last); wcomm's own "cma", "ucx" and "tcp" pin one.
Every one moves host memory only."""

from __future__ import annotations

import functools
import os
from typing import Dict, List

from .. import xfer

ENGINE_OF = {"UCX": "auto", "cma": "cma", "ucx": "ucx", "tcp": "tcp"}
MEM_TYPES = ["DRAM_SEG"]
PARAMS = {"num_threads": "2", "timeout_s": "30"}  # cma copy threads; the per-transfer timeout


@functools.lru_cache(maxsize=1)
def available() -> Dict[str, str]:
    """Backend name -> "" when usable here, else why not (asked once per process, of an agent
    with no Comm; tcp needs only the Comm every nixl_agent has)."""
    probe = xfer.Agent(f"wcomm-nixl-probe-{os.getpid()}")
    caps = {k: probe.capabilities(k) for k in ("cma", "ucx")}
    out = {k: ("" if c["available"] else c["reason"]) for k, c in caps.items()}
    out["tcp"] = ""
    out["UCX"] = "" if any(not v for v in out.values()) else "; ".join(out.values())
    return out


def plugin_list() -> List[str]:
    return [name for name in ENGINE_OF if not available()[name]]


def engine_for(created: List[str]) -> str:
    """The engine backend for the NIXL backends created so far: the one they all pin, else auto."""
    kinds = {ENGINE_OF[b] for b in created}
    return kinds.pop() if len(kinds) == 1 else "auto"
