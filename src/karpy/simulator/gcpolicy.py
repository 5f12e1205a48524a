"""CPython's cyclic garbage collector while a simulation runs: off, the caller's state restored after.

A simulation allocates millions of long-lived containers (stored manifests, parsed models, watch
records) and almost no reference cycles: its objects die by reference count. Every young collection
still walks each container that survived since the last one, so with the collector on a run pays
for walking nearly everything it keeps, to free nothing (on ``bench/e2e_scale.py`` at 30,000 pods,
5% of the CPU time with thresholds raised to (200,000, 50, 1,000); about a fifth with the defaults).

:func:`tuned` turns automatic collection off for the duration of a ``with`` block and puts the
caller's collector state (enabled or not, thresholds) back afterwards, whatever happens inside.
On the way out everything the run allocated is moved to the oldest generation without being
walked (``gc.freeze()`` then ``gc.unfreeze()``, unless the caller has frozen objects of its own):
otherwise the first young collection after the run would walk all of it, which is the very cost
avoided. What a run leaves for the collector is freed by the caller's next full collection.

A caller may rely on: nothing the simulation computes depends on when cycles are freed (no result
changes); a run leaves little cyclic garbage (measured: 10,000 benchmark pods about 1,900 objects,
24 simulated hours of a 1,000-node cluster about 3,600, a 6-hour chaos run with every fault kind
about 5,000, 0.6 MB), and ``tests/unit/simulator/test_gcpolicy.py`` fails if a run starts leaving
a cycle per pod or per scheduling pass (as a solve once did: its DaemonSet overhead held a bound
method of its placement). The switch is process-wide: another thread allocating during a run
runs without automatic collection too.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def tuned() -> Iterator[None]:
    """Run the block with automatic collection off; restore the previous collector state on the way out."""
    was_enabled = gc.isenabled()
    thresholds = gc.get_threshold()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:  # nothing of the caller's is frozen: unfreezing touches only ours
            # Everything the run allocated is still in the youngest generation; the first collection
            # would walk all of it (a second at 30,000 pods). Promote it to the oldest generation
            # unwalked, as surviving collections would have, and the young collections stay cheap.
            gc.freeze()
            gc.unfreeze()
        gc.set_threshold(*thresholds)
        if was_enabled:
            gc.enable()
