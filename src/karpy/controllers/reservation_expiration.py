"""Capacity block expiration: NodeClaims in an expiring capacity block are deleted before EC2 reclaims them.

Karpenter AWS's ``capacityreservation.expiration`` controller, every minute: the managed NodeClaims that
carry ``karpenter.k8s.aws/capacity-reservation-id``; the cloud says which of those reservations are
expiring (a capacity block is from 40 minutes before its end time,
:data:`karpy.api.capacityreservation.EXPIRATION_PERIOD`; EC2 terminates its instances 30 minutes before
the end); each such NodeClaim not already being deleted is deleted (log "initiating delete for capacity
block expiration"), so its node drains gracefully and its pods are re-provisioned elsewhere.

The cloud tells through the optional ``expiring_reservations(ids) -> set[str]`` (the AWS provider and the
simulated cloud have it); a cloud without it gets no controller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from karpy.api import capacityreservation as cr
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import runtime, state
from karpy.kube import errors as kube_errors
from karpy.kube import interface
from karpy.observability import logs

log = logging.getLogger("karpy.controllers.reservation_expiration")

NAME = "capacityreservation.expiration"
KEY = "sweep"
INTERVAL = 60.0

Expiring = Callable[[Collection[str]], set[str]]


class ReservationExpiration:
    """See the module docstring. Register :meth:`controller`, then enqueue :data:`KEY` once."""

    def __init__(self, cluster: interface.Cluster, cluster_state: state.ClusterState, expiring: Expiring) -> None:
        self.cluster = cluster
        self.state = cluster_state
        self.expiring = expiring
        self.deleted: list[str] = []
        """Names of the NodeClaims deleted for capacity block expiration, in order."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [])

    def reconcile(self, key: str) -> float | None:
        self.sweep()
        return INTERVAL

    def sweep(self) -> None:
        held = {c.name: c.metadata.labels[cr.LABEL_ID] for c in self.state.nodeclaims()
                if cr.LABEL_ID in c.metadata.labels and c.metadata.deletion_timestamp is None}
        if not held:
            return
        try:
            expiring = self.expiring(sorted(set(held.values())))
        except Exception as exc:  # the cloud's own errors: try again next minute
            log.warning("getting capacity reservations: %s", exc, extra=logs.fields(NAME))
            return
        for name, rid in sorted(held.items()):
            if rid not in expiring:
                continue
            try:
                self.cluster.delete("NodeClaim", name)
            except kube_errors.NotFound:
                continue
            except kube_errors.KubeError as exc:
                log.warning("deleting nodeclaim %s: %s", name, exc, extra=logs.fields(NAME, NodeClaim=name))
                continue
            self.deleted.append(name)
            log.info("initiating delete for capacity block expiration",
                     extra=logs.fields(NAME, NodeClaim=name, **{"capacity-reservation-id": rid}))


def register(manager: runtime.Manager, cluster: interface.Cluster, cluster_state: state.ClusterState,
             cloud: cp_interface.CloudProvider) -> ReservationExpiration | None:
    """Register the controller when ``cloud`` can tell expiring reservations; queue its first sweep."""
    expiring = getattr(cloud, "expiring_reservations", None)
    if not callable(expiring):
        return None
    ctl = ReservationExpiration(cluster, cluster_state, expiring)
    manager.register(ctl.controller())
    manager.enqueue(NAME, KEY)
    return ctl
