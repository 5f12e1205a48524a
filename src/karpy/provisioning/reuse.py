"""What a caller keeps between scheduling runs so that a run costs what changed, not the cluster.

The provisioner and the simulated kube-scheduler solve again and again over a cluster that
barely changes between runs. A :class:`SchedulingCache` kept by such a caller and given to each
:class:`karpy.provisioning.scheduler.Scheduler` (``Scheduler(..., cache=c)``) keeps:

- the existing nodes as rows of arrays (:class:`nodetable.NodeTable`): free and used resources,
  node classes (labels without the hostname) with their requirement sets, taint sets, host ports,
  domains per topology key, pod label signatures; a node is re-derived only when it changed;
- per node class and pod requirement set, whether the pod may run there (a vector over classes);
- each NodePool's instance type table with its per-requirement-set answers (compatible types,
  cheapest offering, zones) (:class:`templates.TableCache`);
- the grouping signature of each pending pod (pods pending over several runs are read once).

Contract (what a caller may rely on):

1. **Same plans.** ``Scheduler(args..., cache=c).solve(pods)`` returns exactly what
   ``Scheduler(args...).solve(pods)`` returns, whatever runs ``c`` served before
   (tests/unit/provisioning/test_reuse.py checks it over random add/remove/bind sequences).
2. **No inputs change meaning.** Give each run the current ``existing`` nodes, as without a
   cache. A node is compared with what the cache holds for its name: labels, taints,
   allocatable, nodepool, in_flight and schedulable by equality, its pods by identity of the Pod
   objects, in order. So a caller must not mutate an ExistingNode's dicts or lists after giving
   them to a run; building new ones each run (or passing the same unchanged objects) is fine.
   Instance type objects are compared by identity too (they are immutable).
3. **Cost.** Per run: one cheap comparison per existing node (none of the node's labels are
   re-read when the node is unchanged), NumPy copies of a few arrays over the nodes, and work
   proportional to the nodes that changed and to the pending pods. Topology counting of
   running pods, when a pending pod has a topology term, reads each node's cached pod signatures.
4. **Scope.** One cache per caller; it is not thread-safe. Memory follows the nodes seen in
   the last :data:`nodetable.EVICT_AFTER` runs and the instance types of the last run.
5. **Pure.** No I/O and no clock, like the rest of the scheduling core.
"""

from __future__ import annotations

from typing import Any

from karpy.api import pod as pod_mod
from karpy.provisioning import nodetable, templates


class SchedulingCache:
    """Kept by one caller between scheduling runs (see the module docstring)."""

    def __init__(self) -> None:
        self.nodes = nodetable.NodeTable()
        self.tables = templates.TableCache()
        self.pod_signatures: dict[int, tuple[pod_mod.Pod, Any]] = {}
        """Pending pods' grouping signatures of the last run (:func:`podgroups.group_pods`)."""
        self.runs = 0
        """Runs served (for tests and metrics)."""


__all__ = ["SchedulingCache"]
