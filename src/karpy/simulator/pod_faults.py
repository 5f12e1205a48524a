"""What the simulated kubelet writes for the pod faults of ``spec.faults.pods``.

Pure functions over pod manifests (no cluster, no clock reads; the caller passes the time):

* :func:`start_failed`: the pod as a kubelet reports one whose container could not start: phase
  ``Failed``, reason ``StartError``, every container ``terminated`` with exit code 128 (containerd's
  code for a process that could not be started), ``Ready``/``ContainersReady`` ``False``. A
  ReplicaSet does not count a Failed pod, so it creates a replacement.
* :func:`lingering`: a pod being deleted gracefully (``deletionTimestamp`` with a positive
  ``deletionGracePeriodSeconds``, as :class:`karpy.kube.memory.InMemoryCluster` keeps them with
  ``graceful_pods``) that has not stopped yet; :func:`grace_ends` is when its grace period is over.
* :func:`stopped`: the kubelet's confirmation that such a pod's containers have stopped: phase
  ``Failed`` (reason ``Terminated``); the in-memory cluster removes a terminating pod once it is terminal.

Each returns a new dict and leaves its argument alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from karpy import clock as clock_mod

START_ERROR = "StartError"
START_ERROR_MESSAGE = "failed to create containerd task: failed to start the container process"
TERMINAL = ("Succeeded", "Failed")


def start_failed(pod: Mapping[str, Any], now: float) -> dict[str, Any]:
    """``pod`` as Failed because its containers could not start (see the module docstring)."""
    out = copy.deepcopy(dict(pod))
    ts = clock_mod.rfc3339(now)
    status = out.setdefault("status", {})
    status.pop("nominatedNodeName", None)
    status.update(phase="Failed", reason=START_ERROR, message=START_ERROR_MESSAGE)
    conditions = [dict(c) for c in status.get("conditions") or () if c.get("type") not in ("ContainersReady", "Ready")]
    conditions += [{"type": t, "status": "False", "reason": "PodFailed", "lastTransitionTime": ts}
                   for t in ("ContainersReady", "Ready")]
    status["conditions"] = conditions
    status["containerStatuses"] = [
        {"name": c.get("name", ""), "image": c.get("image", ""), "ready": False, "started": False,
         "restartCount": 0, "state": {"terminated": {"exitCode": 128, "reason": START_ERROR,
                                                      "message": START_ERROR_MESSAGE,
                                                      "startedAt": ts, "finishedAt": ts}}}
        for c in (out.get("spec") or {}).get("containers") or ()
    ]
    return out


def lingering(pod: Mapping[str, Any]) -> bool:
    """Terminating with a grace period that the kubelet has to end (graceful termination)."""
    meta = pod.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and bool(meta.get("deletionGracePeriodSeconds")) \
        and (pod.get("status") or {}).get("phase") not in TERMINAL


def grace_ends(pod: Mapping[str, Any]) -> float:
    """When a :func:`lingering` pod's grace period is over."""
    meta = pod.get("metadata") or {}
    return clock_mod.parse_rfc3339(str(meta["deletionTimestamp"])) + float(meta.get("deletionGracePeriodSeconds") or 0)


def stopped(pod: Mapping[str, Any]) -> dict[str, Any]:
    """``pod`` once its containers have stopped after a graceful deletion: phase Failed."""
    out = copy.deepcopy(dict(pod))
    out.setdefault("status", {}).update(phase="Failed", reason="Terminated", message="The pod was terminated")
    return out
