"""A launch as one unit of work: find or create the instance, then write it onto its NodeClaim.

The lifecycle (:mod:`karpy.controllers.lifecycle`) runs :func:`launch` through the executor seam
(:mod:`karpy.controllers.cloudcalls`): inline in ``karpy simulate`` (the same calls in the same order
as one reconcile making them), on the bounded pool under the real-time driver, so that neither the
cloud calls nor the two writes that record a launch (Karpenter's launch step patching the NodeClaim)
wait on the loop thread. A caller may rely on:

* :func:`launch` asks :func:`karpy.controllers.launch_idempotency.existing` first and calls
  ``create`` only when no instance was launched for the NodeClaim before;
* it never raises: a :class:`Launch` says what happened. ``list_error``: the cloud's ``list`` failed
  (nothing was created; the caller re-raises it, so the reconcile is retried later rather than
  risking a second instance); ``launched is None``: ``create`` failed with ``error``; ``launched``
  set and ``error`` set: the instance runs but recording it failed (the caller keeps the instance
  and records it again); ``stored``: the NodeClaim as the status write returned it;
* the writes use only the cluster and the clock given, and the NodeClaim object read on the caller's
  thread before the call (``cached``), never the watch-fed cache, so they may run on any thread.
  While the call is in flight the lifecycle writes nothing else to that NodeClaim (per-object
  order); a write another controller made meanwhile makes the status patch meet a Conflict and be
  redone on a fresh read (:func:`karpy.controllers.claim_status.write`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy import clock as clock_mod
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import quantity
from karpy.cloudprovider import interface as cp_interface
from karpy.controllers import claim_status, inflight, launch_idempotency
from karpy.kube import interface


@dataclass(frozen=True, slots=True)
class Launch:
    """What :func:`launch` did (see the module docstring)."""

    launched: nodeclaim_mod.NodeClaim | None = None
    stored: dict[str, Any] | None = None
    error: Exception | None = None
    list_error: Exception | None = None


def write(cluster: interface.Cluster, clock: clock_mod.Clock, claim: nodeclaim_mod.NodeClaim,
          launched: nodeclaim_mod.NodeClaim, cached: Mapping[str, Any] | None) -> dict[str, Any]:
    """Record ``launched`` on NodeClaim ``claim``: its labels and annotations (one merge patch, when
    any is new), then ``status.providerID / imageID / capacity / allocatable`` and ``Launched=True``.
    ``cached`` is the NodeClaim as last read; returns the NodeClaim as stored."""
    labels = dict(launched.labels)
    labels.update(inflight.claim_labels(claim))
    annotations = {k: v for k, v in launched.metadata.annotations.items()
                   if claim.metadata.annotations.get(k) != v}
    meta_patch: dict[str, Any] = {"labels": {k: v for k, v in labels.items() if claim.labels.get(k) != v}}
    if annotations:
        meta_patch["annotations"] = annotations
    if meta_patch["labels"] or annotations:
        cached = cluster.patch("NodeClaim", claim.name, {"metadata": meta_patch})

    def mutate(status: dict[str, Any], now: float) -> None:
        ls = launched.status
        status["providerID"] = ls.provider_id
        if ls.image_id:
            status["imageID"] = ls.image_id
        if ls.capacity:
            status["capacity"] = quantity.format_list(ls.capacity)
        if ls.allocatable:
            status["allocatable"] = quantity.format_list(ls.allocatable)
        claim_status.set_condition(status, nodeclaim_mod.LAUNCHED, "True", now)

    return claim_status.write(cluster, clock, cached, claim.name, mutate)


def launch(cluster: interface.Cluster, clock: clock_mod.Clock, cloud: cp_interface.CloudProvider,
           claim: nodeclaim_mod.NodeClaim, cached: Mapping[str, Any] | None, *, retry: bool, now: float,
           create: Callable[[], nodeclaim_mod.NodeClaim]) -> Launch:
    """Find the instance launched for ``claim`` before or ``create`` one, then :func:`write` it."""
    try:
        launched = launch_idempotency.existing(cloud, claim, now, retry=retry)
    except Exception as exc:
        return Launch(list_error=exc)
    if launched is None:
        try:
            launched = create()
        except Exception as exc:
            return Launch(error=exc)
    try:
        return Launch(launched=launched, stored=write(cluster, clock, claim, launched, cached))
    except Exception as exc:
        return Launch(launched=launched, error=exc)
