"""How the process's heap is kept: freed memory reused while traffic flows, returned after.

glibc's ``free`` keeps freed chunks in the process's heap for reuse; it gives pages back to
the system only from the top of the heap, so a few live objects above a large freed region
(a dropped backlog of replies, say) keep that whole region in the resident set. After a large
release, :func:`release_memory` asks glibc to return every free page (``malloc_trim(0)``
madvises the free chunks of every arena away).

The opposite happens with large messages in flight: by default glibc gives the top of the heap
back as soon as 128 KiB of it is free, so a 64 KiB call whose few buffers are freed shrinks the
heap, and the next call grows it again and faults each new page in (measured on a 2-CPU VM:
17-24 minor faults per 64 KiB echo call, on each side, about half the CPU of the call).
:func:`keep_heap_for_reuse` raises that mark to :data:`KEPT_FREE_HEAP`; servers and clients
call it when they start. A process whose environment sets glibc's own malloc knobs
(``GLIBC_TUNABLES`` with ``glibc.malloc``, or ``MALLOC_*_`` variables) is left as it says.

Elsewhere (musl, macOS, a non-glibc allocator) both do nothing.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Any

__all__ = ["KEPT_FREE_HEAP", "MMAP_THRESHOLD", "keep_heap_for_reuse", "release_memory"]


#: Free bytes glibc may keep at the top of the heap before it gives them back on a ``free``:
#: the buffers of 128 calls of 64 KiB in flight, on either side, with room to spare.
KEPT_FREE_HEAP = 32 * 1024 * 1024
#: Allocations this large or larger are mapped on their own and unmapped when freed, so a rare
#: huge frame does not stay in the heap. (Setting the trim mark turns off glibc's adaptive
#: mmap threshold, so it is set too.)
MMAP_THRESHOLD = 4 * 1024 * 1024
# mallopt parameters, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _glibc_function(name: str, argtypes: list[Any]) -> Callable[..., int] | None:
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (AttributeError, ValueError, OSError):
        return None  # not glibc: no confstr name for it
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    found: Callable[..., int] = function
    return found


_MALLOC_TRIM = _glibc_function("malloc_trim", [ctypes.c_size_t])
_MALLOPT = _glibc_function("mallopt", [ctypes.c_int, ctypes.c_int])
_kept = False


def keep_heap_for_reuse() -> bool:
    """Let glibc keep up to :data:`KEPT_FREE_HEAP` of freed heap for the next allocations
    instead of returning it at each ``free`` (see the module docstring). Once per process;
    ``False`` where it did nothing: not glibc, already done, or the environment sets glibc's
    malloc knobs itself."""
    global _kept
    if _kept or _MALLOPT is None or _malloc_set_by_environment():
        return False
    _kept = True
    return bool(_MALLOPT(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        _MALLOPT(_M_TRIM_THRESHOLD, KEPT_FREE_HEAP)
    )


def _malloc_set_by_environment() -> bool:
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return True
    return any(name.startswith("MALLOC_") and name.endswith("_") for name in os.environ)


def release_memory() -> bool:
    """Return the heap's free pages to the system; ``False`` where that is not possible.

    Costs about 5 ms per 64 MiB of freed small chunks (measured on a 2-CPU VM), in the
    calling thread.
    """
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True
