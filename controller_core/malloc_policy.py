"""Large allocations from the operating system and back to it: glibc's malloc set for the controller.

Why: a failover's transients are a few very large buffers (each broker's request JSON, the shared
UpdateMetadata JSON, the answers' bodies, the snapshot record: tens to hundreds of MB at a million
partitions) made and freed on several threads (the event thread, five senders, kazoo's). glibc's
``malloc`` serves a block of 128 KB or more with its own ``mmap``, given back on ``free``, but the
first such block freed raises that threshold (up to 32 MB): later large blocks then come from the
heap arenas (one per thread that allocates, up to eight a core), whose pages stay with the process
once freed. Measured at 200,000 partitions (``CONTROLLER_MEMORY_PROBE_FRAMES``): 1 to 10 s after a
warm failover ``tracemalloc`` traced 79 MB of live Python memory while RSS grew from 495 to 633 MB.
A fixed threshold (``mallopt(M_MMAP_THRESHOLD)``, which also turns the raising off) gives each large
block back when it is freed. Cost: an ``mmap`` and page faults per large block, not measurable in a
failover (``scripts/bench_context.py``: the same CPU with and without).

glibc only (Linux with glibc); elsewhere, or when the operator set the threshold already
(``MALLOC_MMAP_THRESHOLD_`` or ``GLIBC_TUNABLES``), nothing is changed.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import sys
from typing import Final

logger = logging.getLogger(__name__)

M_MMAP_THRESHOLD: Final = -3  # glibc's malloc.h
MMAP_THRESHOLD_BYTES: Final = 128 * 1024  # glibc's initial (dynamic) threshold, here fixed


@functools.cache
def give_large_blocks_back() -> bool:
    """Fix glibc's mmap threshold for this process (once; later calls return the first answer).
    True when it was set here."""
    if not sys.platform.startswith("linux"):
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "mmap_threshold" in os.environ.get("GLIBC_TUNABLES", ""):
        return False  # the operator's choice stands
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already runs on
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt)
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    if not ok:
        logger.debug("mallopt(M_MMAP_THRESHOLD) refused; glibc's dynamic threshold stays")
    return ok
