"""nixl._utils over wcomm: NIXL's test helpers for raw host buffers (page-aligned malloc / free,
fill with 0xba, compare two buffers)."""

from __future__ import annotations

import ctypes
import ctypes.util

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.aligned_alloc.restype = ctypes.c_void_p
_libc.aligned_alloc.argtypes = (ctypes.c_size_t, ctypes.c_size_t)
_libc.free.argtypes = (ctypes.c_void_p,)


def malloc_passthru(size: int) -> int:
    """The address of `size` bytes aligned to 4096 (free it with free_passthru); MemoryError if
    the allocation fails, where NIXL would hand back 0."""
    if size <= 0:
        raise ValueError(f"malloc_passthru: size must be > 0, not {size}")
    rounded = (size + 4095) // 4096 * 4096  # aligned_alloc wants a multiple of the alignment
    addr = _libc.aligned_alloc(4096, rounded)
    if not addr:
        raise MemoryError(f"malloc_passthru: aligned_alloc({rounded}) failed")
    return int(addr)


def free_passthru(addr: int) -> None:
    _libc.free(ctypes.c_void_p(addr))


def ba_buf(addr: int, size: int) -> None:
    ctypes.memset(addr, 0xBA, size)


def verify_transfer(addr1: int, addr2: int, size: int) -> None:
    """AssertionError when the two buffers differ (NIXL asserts in C)."""
    if ctypes.string_at(addr1, size) != ctypes.string_at(addr2, size):
        raise AssertionError(f"buffers at {addr1:#x} and {addr2:#x} differ within {size} bytes")
