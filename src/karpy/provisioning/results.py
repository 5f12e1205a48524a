"""What one scheduling run decides: placements, new NodeClaims and explanations.

The scheduler's inputs (:class:`ExistingNode`) and outputs (:class:`NewNodeClaim`,
:class:`Results`) are plain data, so controllers, the simulator's kube-scheduler, disruption's
what-if simulations and the tests all read them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import pod as pod_mod
from karpy.api import quantity
from karpy.cloudprovider import instancetype
from karpy.scheduling import requirements as reqs_mod


@dataclass
class ExistingNode:
    """A node, or an in-flight NodeClaim whose node is not there yet, that can take pods."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Any, ...]
    allocatable: Mapping[str, int]
    pods: list[pod_mod.Pod] = field(default_factory=list)
    """Pods bound (or nominated) to it; their requests are used capacity."""
    nodepool: str | None = None
    in_flight: bool = False
    """Launched or launching, not yet initialized: startup and not-ready taints are ignored, and
    DaemonSet pods that will come are counted as used."""
    schedulable: bool = True
    """False when cordoned or being deleted: it keeps its pods but takes no new ones."""


@dataclass
class NewNodeClaim:
    """A NodeClaim the scheduler wants launched."""

    nodepool: str
    requirements: reqs_mod.Requirements
    instance_types: list[instancetype.InstanceType]
    """Every type that holds the pods and the DaemonSet overhead, cheapest first."""
    pods: list[pod_mod.Pod]
    requests: quantity.ResourceList
    """Pods plus DaemonSet overhead."""
    daemon_overhead: quantity.ResourceList
    labels: dict[str, str]
    taints: tuple[Any, ...]
    startup_taints: tuple[Any, ...]
    price: float
    """The cheapest option's price, US dollars per hour."""
    hostname: str = ""
    """Placeholder hostname used for hostname topology during the run."""

    def instance_type_names(self) -> list[str]:
        return [t.name for t in self.instance_types]


@dataclass
class Results:
    """The decisions of one scheduling run."""

    existing: dict[str, list[pod_mod.Pod]] = field(default_factory=dict)
    """Node name -> pending pods that fit on it (existing or in-flight)."""
    new_claims: list[NewNodeClaim] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    """Pod key -> why it fits nowhere, per NodePool, in words a user can act on."""
    relaxed: dict[str, list[str]] = field(default_factory=dict)
    """Pod key -> preferences dropped to place it."""
    unschedulable: list[pod_mod.Pod] = field(default_factory=list)

    def placed_count(self) -> int:
        return sum(len(v) for v in self.existing.values()) + sum(len(c.pods) for c in self.new_claims)

    def cost(self) -> float:
        """US dollars per hour of the new NodeClaims' cheapest instance types."""
        return sum(c.price for c in self.new_claims)
