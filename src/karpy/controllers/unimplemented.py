"""Say so, in the cluster, when an object uses what karpy does not implement yet.

For every object that sets a field of :data:`karpy.api.unimplemented.FIELDS` (an EC2NodeClass's
``spec.networkInterfaces``, a Pod's ``spec.resourceClaims``...) and every object of a kind of
:data:`karpy.api.unimplemented.KINDS` (CapacityBuffer), this controller publishes a Warning Event
``Unimplemented`` on the object and logs a line naming the object, the field and "karpy does not
implement this yet" - once per object generation (a Pod, which has no generation before Kubernetes
1.34, once per uid), not on every reconcile. Watches are on the kinds the cluster serves;
CapacityBuffers, whose CRD may not be installed, are listed every :data:`BUFFER_INTERVAL`
seconds (a missing CRD is not an error). The operator settings and feature gates karpy does not
implement are logged once at start (:func:`log_settings`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from karpy import settings as settings_mod
from karpy.api import unimplemented
from karpy.controllers import runtime
from karpy.kube import errors as kube_errors
from karpy.kube import events, interface
from karpy.observability import logs

log = logging.getLogger("karpy.unimplemented")

NAME = "unimplemented"
REASON = "Unimplemented"
BUFFERS_KEY = "capacitybuffers"
BUFFER_INTERVAL = 300.0
BUFFER_KIND = "CapacityBuffer"
BUFFER_API_VERSION = "autoscaling.x-k8s.io/v1beta1"
_AFFINITY_MEMO = 4096
"""Distinct Pod affinities remembered (:meth:`Unimplemented._affinity_sets_fields`); then it starts again."""


class Unimplemented:
    """See the module docstring. ``kinds``: the kinds watched (NodePool, the NodeClass kinds, Pod)."""

    def __init__(self, cluster: interface.Cluster, recorder: events.EventRecorder,
                 kinds: Sequence[str] = ("NodePool", "EC2NodeClass", "AKSNodeClass", "Pod")) -> None:
        self.cluster = cluster
        self.recorder = recorder
        self.kinds = tuple(kinds)
        self._warned: dict[tuple[str, str, str], tuple[str, Any]] = {}
        self._affinities: dict[int, tuple[Any, bool]] = {}
        """id(a Pod's spec.affinity) -> (it, whether it sets a listed field): pods of one template share
        the stored affinity (read-only), so a pod change costs a look-up, not a walk of its terms."""
        self.reported: list[tuple[str, str, str]] = []
        """(kind, namespace/name, field path or kind) of every warning published, in order."""

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [(kind, self._map) for kind in self.kinds])

    def _map(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        kind, namespace, name = interface.meta_key(obj)
        if event == interface.DELETED:
            self._warned.pop((kind, namespace, name), None)
            return ()
        if kind == "Pod":  # a Pod's listed fields are all affinity terms
            affinity = (obj.get("spec") or {}).get("affinity")
            if not affinity or not self._affinity_sets_fields(affinity, obj):
                return ()
        elif kind not in unimplemented.KINDS and not unimplemented.set_fields(kind, obj):
            return ()
        return (f"{kind}|{namespace}|{name}",)

    def _affinity_sets_fields(self, affinity: Any, obj: dict[str, Any]) -> bool:
        """Whether the Pod ``obj`` (of this ``spec.affinity``) sets a listed field, kept per stored affinity."""
        hit = self._affinities.get(id(affinity))
        if hit is not None and hit[0] is affinity:
            return hit[1]
        if len(self._affinities) >= _AFFINITY_MEMO:
            self._affinities = {}
        found = bool(unimplemented.set_fields("Pod", obj))
        self._affinities[id(affinity)] = (affinity, found)
        return found

    def reconcile(self, key: str) -> float | None:
        if key == BUFFERS_KEY:
            try:
                buffers = self.cluster.list(BUFFER_KIND)
            except kube_errors.KubeError as exc:  # no CapacityBuffer CRD: nothing to say
                log.debug("unimplemented: cannot list CapacityBuffers: %s", exc)
                return BUFFER_INTERVAL
            for obj in buffers:
                self.check(obj)
            return BUFFER_INTERVAL
        kind, namespace, name = key.split("|", 2)
        try:
            obj = self.cluster.get(kind, name, namespace)
        except kube_errors.NotFound:
            return None
        self.check(obj)
        return None

    def check(self, obj: dict[str, Any]) -> list[str]:
        """Publish the warnings of ``obj`` unless this generation of it was reported; returns them."""
        kind, namespace, name = interface.meta_key(obj)
        meta = obj.get("metadata") or {}
        seen = (str(meta.get("uid") or ""), meta.get("generation"))
        if self._warned.get((kind, namespace, name)) == seen:
            return []
        messages = unimplemented.warnings_for(obj)
        self._warned[(kind, namespace, name)] = seen
        label = f"{namespace}/{name}" if namespace else name
        fields = [f.path for f in unimplemented.set_fields(kind, obj)] if kind not in unimplemented.KINDS \
            else [kind]
        for message, field in zip(messages, fields, strict=False):
            log.warning(message, extra=logs.fields(NAME, **{kind: label, "field": field}))
            try:
                self.recorder.warning(obj, REASON, message)
            except Exception as exc:  # an event that cannot be written must not stop the others
                log.warning("unimplemented: cannot publish the event of %s %s: %s", kind, label, exc)
            self.reported.append((kind, label, field))
        return messages


def log_settings(s: settings_mod.Settings) -> list[str]:
    """Log, once, each operator setting and feature gate ``s`` sets that karpy does not implement."""
    messages = s.unimplemented()
    for message in messages:
        log.warning(message, extra=logs.fields(NAME))
    return messages


def register(manager: runtime.Manager, cluster: interface.Cluster, recorder: events.EventRecorder,
             nodeclass_kinds: Sequence[str]) -> Unimplemented:
    from karpy.kube import paths

    paths.register(BUFFER_KIND, BUFFER_API_VERSION, "capacitybuffers")
    ctl = Unimplemented(cluster, recorder, ("NodePool", *nodeclass_kinds, "Pod"))
    manager.register(ctl.controller())
    if unimplemented.KINDS.get(BUFFER_KIND):  # CapacityBuffers are implemented (karpy.controllers.capacitybuffer)
        manager.enqueue(NAME, BUFFERS_KEY)
    return ctl
