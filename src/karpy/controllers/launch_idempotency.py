"""Launch idempotency: one NodeClaim, at most one instance, across lost responses and restarts.

A launch whose response was lost, or a controller that restarted between launching and writing the
NodeClaim's ``providerID``, leaves a running instance tagged with the NodeClaim's name that no
NodeClaim points at. Before launching again, the lifecycle asks :func:`existing` for it, as
Karpenter finds the instance tagged ``karpenter.sh/nodeclaim=<name>``. A caller may rely on:

* :func:`existing` returns the cloud's NodeClaim (providerID, labels, capacity) of the instance
  launched for ``claim``, or ``None``; it asks the cloud only when the launch may have happened
  before (the NodeClaim is older than :data:`FIRST_ATTEMPT_WINDOW` seconds, or ``retry`` is set), so
  a first launch costs no extra call;
* errors of the cloud's ``list`` propagate (retry later rather than risk a second launch).
"""

from __future__ import annotations

from karpy.api import nodeclaim
from karpy.cloudprovider import interface as cp_interface

FIRST_ATTEMPT_WINDOW = 1.0


def existing(cloud: cp_interface.CloudProvider, claim: nodeclaim.NodeClaim, now: float, *,
             retry: bool = False) -> nodeclaim.NodeClaim | None:
    """The instance already launched for ``claim`` (see the module docstring)."""
    created = claim.metadata.creation_timestamp
    if not retry and (created is None or now - created <= FIRST_ATTEMPT_WINDOW):
        return None
    for found in cloud.list():
        if found.name == claim.name and found.status.provider_id:
            return found
    return None
