"""What a file may declare before anything is allocated: shapes numpy can hold, and sizes that
fit the machine.

A damaged or hostile header can declare any shape: a 300-byte file claiming an 80 GB array,
or a 0 beside a dimension of 2**63 (an empty array numpy still refuses to describe). Readers
check the declared shape with :func:`check_dims` and, before reading bytes into memory (zip
members, dequantized tensors), the size with :func:`check_allocation`, so that such a file is
one InputError rather than a MemoryError or a numpy ValueError.
"""
from __future__ import annotations

import math
import os

from bhtcli.errors import InputError

INTP_MAX = 2**63 - 1     # numpy's limit on an array's byte size, empty arrays included


def check_dims(dims, itemsize: int, label: str) -> int:
    """The element count of `dims`, or InputError when numpy cannot hold that shape (a negative
    or non-integer dimension, or nonzero dimensions whose bytes exceed 2**63 - 1)."""
    dims = tuple(dims)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in dims):
        raise InputError(f"{label} declares the shape {dims}, which is not a list of sizes "
                         "(non-negative integers); the file is damaged: write it again")
    if math.prod(n for n in dims if n) * max(itemsize, 1) > INTP_MAX:
        raise InputError(f"{label} declares the shape {dims}, larger than any array can be; "
                         "the file is damaged: write it again")
    return math.prod(dims)


def memory_budget() -> int:
    """Bytes this process may still allocate, at most: the physical memory, and what an
    address-space limit (ulimit -v) leaves of it."""
    budget = INTP_MAX
    try:
        budget = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import resource
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            budget = min(budget, max(0, limit - _address_space()))
    except (ImportError, OSError, ValueError):
        pass
    return budget


def _address_space() -> int:
    """This process's virtual size (VmSize), 0 when /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def check_allocation(nbytes: int, label: str, what: str = "its data") -> None:
    """InputError when `nbytes` (to be held in memory) exceed :func:`memory_budget`."""
    budget = memory_budget()
    if nbytes > budget:
        raise InputError(f"{label}: {what} would take {_size(nbytes)} in memory, more than this "
                         f"machine allows ({_size(budget)}); the header may be damaged, or use a "
                         "machine with more memory")


def _size(nbytes: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes} bytes"
