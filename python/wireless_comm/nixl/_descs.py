"""get_reg_descs / get_xfer_descs: descriptor lists from what NIXL code hands in (tuple lists
with a memory type, tensors, lists of tensors, Nx3 numpy descriptor arrays, the list objects),
with NIXL's answers for bad input: None (and a logged reason) for a wrong tuple width, a missing
memory type or a non-contiguous tensor; KeyError for an unknown memory type name.

wcomm extras: a numpy array that is not an Nx3 (u)int64 descriptor array, or a list of arrays,
stands for its own memory, like a CPU tensor; and a default memory type for tuple lists given None (vLLM's
CPU platforms pass None), opt-in through nixl_agent_config(default_mem_type=...) or
WCOMM_NIXL_DEFAULT_MEM_TYPE."""

from __future__ import annotations

import logging
from typing import Any, Optional

from . import _bindings as B

log = logging.getLogger("wireless_comm.nixl")

MEM_TYPES = {
    "DRAM": B.DRAM_SEG, "VRAM": B.VRAM_SEG, "FILE": B.FILE_SEG, "BLOCK": B.BLK_SEG, "OBJ": B.OBJ_SEG,
    "cpu": B.DRAM_SEG, "cuda": B.VRAM_SEG,
}


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "data_ptr") and hasattr(x, "element_size") and hasattr(x, "is_contiguous")


def _is_ndarray(x: Any) -> bool:
    return hasattr(x, "__array_interface__") and hasattr(x, "ndim")


def _tensor_desc(t: Any) -> Optional[tuple]:
    """(addr, len, dev, mem type name) of a contiguous tensor; None (logged) otherwise."""
    if not t.is_contiguous():
        log.error("Please use a list of contiguous Tensors (a non-contiguous tensor was given)")
        return None
    dev = t.get_device() if t.device.type != "cpu" else -1
    kind = "cpu" if t.device.type == "cpu" else "cuda"
    return int(t.data_ptr()), int(t.numel() * t.element_size()), max(dev, 0), kind


def _array_desc(a: Any) -> Optional[tuple]:
    if not a.flags["C_CONTIGUOUS"]:
        log.error("Please use contiguous arrays (a non-contiguous numpy array was given)")
        return None
    return int(a.__array_interface__["data"][0]), int(a.nbytes), 0, "cpu"


def _objects(objs: Any, cls: type, describe) -> Any:
    """One list from tensors / arrays that all live in one kind of memory."""
    rows, kind = [], None
    for o in objs:
        d = describe(o)
        if d is None:
            return None
        if kind is not None and d[3] != kind:
            log.error("All tensors of one descriptor list must be on one kind of device")
            return None
        kind = d[3]
        rows.append(d[:3] + ((b"",) if cls is B.nixlRegDList else ()))
    return cls(MEM_TYPES[kind], rows)


def make_descs(descs: Any, mem_type: Optional[str], cls: type, default_mem_type: Optional[str]) -> Any:
    other = B.nixlXferDList if cls is B.nixlRegDList else B.nixlRegDList
    if isinstance(descs, cls):
        return descs
    if isinstance(descs, other):
        log.error("%s given where a %s is needed", other.__name__, cls.__name__)
        return None
    if mem_type is None:
        mem_type = default_mem_type
    if _is_tensor(descs):
        return _objects([descs], cls, _tensor_desc)
    if _is_ndarray(descs):
        if descs.ndim == 2 and descs.shape[1] == 3 and descs.dtype.kind in "iu" and descs.dtype.itemsize == 8:
            if mem_type is None:  # NIXL: rows of descriptors, which need a memory type
                log.error("Please specify a mem type for a Nx3 descriptor array")
                return None
            return cls(MEM_TYPES[mem_type], descs)
        return _objects([descs], cls, _array_desc)  # wcomm: any other array is its own memory
    if not isinstance(descs, (list, tuple)) or not descs:
        log.error("Cannot make a %s from %r", cls.__name__, type(descs).__name__)
        return None
    first = descs[0]
    if isinstance(first, tuple):
        if mem_type is None:
            log.error("Please specify a mem type if not using Tensors (wcomm: or set "
                      "nixl_agent_config(default_mem_type='DRAM') / WCOMM_NIXL_DEFAULT_MEM_TYPE=DRAM)")
            return None
        if len(first) != cls._width:
            log.error("%d-tuple list needed for %s", cls._width,
                      "registration" if cls is B.nixlRegDList else "transfer")
            return None
        return cls(MEM_TYPES[mem_type], list(descs))  # KeyError for an unknown type, as NIXL
    if _is_tensor(first):
        return _objects(descs, cls, _tensor_desc)
    if _is_ndarray(first):
        return _objects(descs, cls, _array_desc)
    log.error("Cannot make a %s from a list of %s", cls.__name__, type(first).__name__)
    return None
