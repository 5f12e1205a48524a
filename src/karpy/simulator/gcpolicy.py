"""How often CPython's cyclic garbage collector runs while a simulation runs.

A simulation allocates hundreds of thousands of long-lived containers (stored manifests, parsed
models, watch records) and almost no reference cycles that need breaking: its objects die by
reference count. With CPython's default thresholds (700, 10, 10) the collector runs a young
collection every 700 net allocations and, as the old generation grows, full collections that walk
every live object and free nothing. On the 10,000-pod benchmark (``bench/e2e_scale.py``) that is
about a fifth of the CPU time.

:func:`tuned` raises the young-generation threshold for the duration of a ``with`` block and puts
the caller's thresholds back afterwards, whatever happens inside. A caller may rely on: the
collector stays enabled (cycles are still collected, only less often), peak memory does not change
measurably (the benchmark's peaks move by under 2%), and nothing outside the block is
affected. It changes no result: what the simulation computes does not depend on when cycles are
freed.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# Young collections every 200,000 net allocations instead of 700, a middle collection every 50 young
# ones and a full one every 1,000 middle ones: the run's cycles are few and small, so freeing them
# later costs little memory (bench/e2e_scale.py peaks: 10,000 pods 288 MB, 100,000 pods 1,896 MB,
# each within 5 MB of (50,000, 20, 100)), while full walks of a heap of millions of live objects mostly stop.
THRESHOLDS = (200_000, 50, 1_000)


@contextlib.contextmanager
def tuned(thresholds: tuple[int, int, int] = THRESHOLDS) -> Iterator[None]:
    """Run the block with ``thresholds``; restore the previous ones on the way out."""
    before = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*before)
