"""CapacityBuffers (feature gate ``CapacityBuffer``): status, virtual pods, the Provisioning condition.

Karpenter v1.14's ``capacitybuffer`` controller and ``virtualpods`` cache in one place:

* **Status.** Every :data:`INTERVAL` seconds (Karpenter requeues each buffer every 30 s) the buffers
  of the cluster are listed and each one's shape is resolved: a ``podTemplateRef`` from the
  PodTemplate (``status.podTemplateRef`` and ``status.podTemplateGeneration`` are written), a
  ``scalableRef`` from the Deployment / StatefulSet / ReplicaSet of group ``apps`` (its
  ``spec.replicas``, 1 when unset, feeds ``percentage``). ``status.replicas`` is
  :func:`karpy.api.capacitybuffer.compute_replicas`, ``status.provisioningStrategy`` copies the
  spec, and the condition ``ReadyForProvisioning`` is True ``Resolved`` or False
  ``PodTemplateNotFound`` / ``ScalableRefNotFound`` / ``ResolutionFailed`` with the reason in words.
  The status is written only when it changed. A cluster without the CapacityBuffer CRD is not an
  error: the list fails, the controller says so once and looks again later.
* **Virtual pods.** A ready buffer with ``status.replicas`` > 0 has that many virtual pods
  (:func:`karpy.api.capacitybuffer.virtual_pods`); :meth:`Buffers.pods` gives them all to the
  provisioner, which schedules them with the real pending pods (so the room for them is launched
  and, once there, kept free), and to disruption's consolidation snapshot.
* **After each scheduling run** (:meth:`Buffers.observe`): the nodes the run placed virtual pods on
  (:attr:`Buffers.node_counts`; emptiness does not remove them, as Karpenter's HasBufferPods), and the
  NodeClaims it created for them (:meth:`Buffers.launched`, by NodeClaim name), and
  each buffer's ``Provisioning`` condition: True ``FitsExistingCapacity`` when all its virtual pods
  fit on existing capacity, False ``RequiresNewCapacity`` when some needed a new NodeClaim or fit
  nowhere, False ``NotReadyForProvisioning`` / ``BufferEmpty``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.api import capacitybuffer as cb
from karpy.api import errors as api_errors
from karpy.api import pod as pod_mod
from karpy.controllers import runtime
from karpy.kube import errors as kube_errors
from karpy.kube import interface
from karpy.provisioning import results

log = logging.getLogger("karpy.controllers.capacitybuffer")

NAME = "capacitybuffer"
KEY = "buffers"
INTERVAL = 30.0
MISSING_CRD_INTERVAL = 300.0


def register_kind() -> None:
    from karpy.kube import paths

    paths.register(cb.KIND, cb.API_VERSION, cb.PLURAL)


class Buffers:
    """See the module docstring. ``trigger``: open a provisioner batch (called after each pass that
    found a ready buffer)."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock,
                 trigger: Callable[[], None] | None = None) -> None:
        self.cluster = cluster
        self.clock = clock
        self.trigger = trigger
        self._pods: dict[str, list[pod_mod.Pod]] = {}
        self._buffers: dict[str, cb.CapacityBuffer] = {}
        self.node_counts: dict[str, int] = {}
        """Node or in-flight NodeClaim name -> virtual pods the last scheduling run placed on it."""
        self._missing_logged = False
        self.on_change: Callable[[], None] | None = None
        """Called when the virtual pods or the nodes holding them changed (disruption looks again)."""
        self._seen: tuple[Any, ...] = ()

    def _notify(self) -> None:
        seen = (tuple(sorted(self.node_counts.items())), tuple(sorted(self.keys)))
        if seen != self._seen:
            self._seen = seen
            if self.on_change is not None:
                self.on_change()

    def controller(self) -> runtime.Controller:
        return runtime.Controller(NAME, self.reconcile, [])

    # ------------------------------------------------------------------------------ status

    def reconcile(self, key: str) -> float | None:
        try:
            objs = self.cluster.list(cb.KIND)
        except kube_errors.KubeError as exc:  # no CapacityBuffer CRD: nothing to do, look again later
            if not self._missing_logged:
                log.warning("capacitybuffer: cannot list CapacityBuffers (is the CRD installed?): %s", exc)
                self._missing_logged = True
            self._pods.clear()
            self._buffers.clear()
            return MISSING_CRD_INTERVAL
        self._missing_logged = False
        seen: set[str] = set()
        for obj in objs:
            _, namespace, name = interface.meta_key(obj)
            seen.add(f"{namespace}/{name}")
            try:
                self.sync(obj)
            except kube_errors.KubeError as exc:
                log.warning("capacitybuffer: %s/%s: %s", namespace, name, exc)
        removed = set(self._pods) - seen
        for gone in removed:
            del self._pods[gone]
        for gone in set(self._buffers) - seen:
            del self._buffers[gone]
        if not self._pods:
            self.node_counts = {}  # no buffer holds a node any more (the provisioner may not run again)
        if (self._pods or removed) and self.trigger is not None:
            self.trigger()
        self._notify()
        return INTERVAL

    def sync(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Resolve one buffer, write its status when it changed, refresh its virtual pods; the status."""
        _, namespace, name = interface.meta_key(obj)
        key = f"{namespace}/{name}"
        old = obj.get("status") or {}
        status: dict[str, Any] = dict(old)
        spec = obj.get("spec") or {}
        if isinstance(spec, Mapping) and "provisioningStrategy" in spec:
            status["provisioningStrategy"] = spec.get("provisioningStrategy")
        template: Mapping[str, Any] | None = None
        replicas = 0
        try:
            buffer = cb.CapacityBuffer.from_manifest(obj)
        except api_errors.ValidationError as exc:
            self._set_condition(obj, status, cb.READY_FOR_PROVISIONING, False, cb.REASON_RESOLUTION_FAILED, str(exc))
            buffer = None
        if buffer is not None:
            template, replicas = self._resolve(buffer, obj, status)
        if buffer is not None and template is not None:
            status["replicas"] = replicas
            self._set_condition(obj, status, cb.READY_FOR_PROVISIONING, True, cb.REASON_RESOLVED,
                                "Pod template resolved successfully")
            self._pods[key] = cb.virtual_pods(buffer, template, replicas) if replicas > 0 else []
            if not self._pods[key]:
                del self._pods[key]
        else:
            self._pods.pop(key, None)
        if status != old:
            obj = self._write(obj, status)
        try:
            self._buffers[key] = cb.CapacityBuffer.from_manifest(obj)
        except api_errors.ValidationError:
            self._buffers.pop(key, None)
        return status

    def _resolve(self, buffer: cb.CapacityBuffer, obj: Mapping[str, Any],
                 status: dict[str, Any]) -> tuple[Mapping[str, Any] | None, int]:
        namespace = buffer.metadata.namespace
        scalable_replicas: int | None = None
        if buffer.pod_template_ref is not None:
            try:
                pt = self.cluster.get("PodTemplate", buffer.pod_template_ref, namespace)
            except kube_errors.NotFound:
                self._set_condition(obj, status, cb.READY_FOR_PROVISIONING, False, cb.REASON_POD_TEMPLATE_NOT_FOUND,
                                    f'podtemplates "{buffer.pod_template_ref}" not found')
                return None, 0
            template = pt.get("template") or {}
            status["podTemplateRef"] = {"name": buffer.pod_template_ref}
            status["podTemplateGeneration"] = int((pt.get("metadata") or {}).get("generation") or 0)
        elif buffer.scalable_ref is not None:
            ref = buffer.scalable_ref
            status.pop("podTemplateRef", None)
            status.pop("podTemplateGeneration", None)
            problem = None
            if (ref.api_group or cb.SCALABLE_GROUP) != cb.SCALABLE_GROUP:
                problem = f'unsupported scalableRef API group "{ref.api_group}"'
            elif ref.kind not in cb.SCALABLE_KINDS:
                problem = f'unsupported kind "{ref.kind}"'
            if problem is not None:
                self._set_condition(obj, status, cb.READY_FOR_PROVISIONING, False, cb.REASON_RESOLUTION_FAILED,
                                    problem)
                return None, 0
            try:
                workload = self.cluster.get(ref.kind, ref.name, namespace)
            except kube_errors.NotFound:
                self._set_condition(obj, status, cb.READY_FOR_PROVISIONING, False, cb.REASON_SCALABLE_REF_NOT_FOUND,
                                    f'{ref.kind.lower()}s.apps "{ref.name}" not found')
                return None, 0
            wspec = workload.get("spec") or {}
            template = wspec.get("template") or {}
            raw = wspec.get("replicas")
            scalable_replicas = int(raw) if isinstance(raw, int) else 1
        else:
            self._set_condition(obj, status, cb.READY_FOR_PROVISIONING, False, cb.REASON_RESOLUTION_FAILED,
                                "Neither podTemplateRef nor scalableRef is set")
            return None, 0
        try:
            requests = cb.template_requests(buffer, template)
        except api_errors.ValidationError as exc:
            self._set_condition(obj, status, cb.READY_FOR_PROVISIONING, False, cb.REASON_RESOLUTION_FAILED, str(exc))
            return None, 0
        return template, cb.compute_replicas(buffer, requests, scalable_replicas)

    def _set_condition(self, obj: Mapping[str, Any], status: dict[str, Any], kind: str, true: bool,
                       reason: str, message: str) -> None:
        """apimeta.SetStatusCondition: lastTransitionTime changes only with the status."""
        conditions = [dict(c) for c in status.get("conditions") or () if isinstance(c, Mapping)]
        value = "True" if true else "False"
        generation = int((obj.get("metadata") or {}).get("generation") or 0)
        for c in conditions:
            if c.get("type") == kind:
                if c.get("status") != value:
                    c["lastTransitionTime"] = clock_mod.rfc3339(self.clock.now())
                c.update(status=value, reason=reason, message=message, observedGeneration=generation)
                break
        else:
            conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                               "observedGeneration": generation,
                               "lastTransitionTime": clock_mod.rfc3339(self.clock.now())})
        status["conditions"] = conditions

    def _write(self, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        _, namespace, name = interface.meta_key(obj)
        old = obj.get("status") or {}  # the status's own order, then the fields it dropped (set to null)
        patch = {k: status.get(k) for k in [*status, *(k for k in old if k not in status)]}
        try:
            return self.cluster.patch_status(cb.KIND, name, {"status": patch}, namespace)
        except kube_errors.NotFound:
            return {**obj, "status": status}

    # ------------------------------------------------------------------------ provisioning

    def pods(self) -> list[pod_mod.Pod]:
        """Every ready buffer's virtual pods."""
        return [p for key in sorted(self._pods) for p in self._pods[key]]

    @property
    def keys(self) -> frozenset[str]:
        """The pod keys (``namespace/name``) of every virtual pod."""
        return frozenset(p.key for ps in self._pods.values() for p in ps)

    def observe(self, res: results.Results) -> None:
        """Record where the run placed virtual pods and write each buffer's Provisioning condition."""
        counts: dict[str, int] = {}
        existing: dict[str, int] = {}
        new: dict[str, int] = {}
        failed: dict[str, int] = {}
        for target, placed in res.existing.items():
            for p in placed:
                key = cb.buffer_key_of(p)
                if key:
                    counts[target] = counts.get(target, 0) + 1
                    existing[key] = existing.get(key, 0) + 1
        for claim in res.new_claims:
            for p in claim.pods:
                key = cb.buffer_key_of(p)
                if key:
                    new[key] = new.get(key, 0) + 1
        by_key = {p.key: cb.buffer_key_of(p) for ps in self._pods.values() for p in ps}
        for pod_key in res.errors:
            key = by_key.get(pod_key, "")
            if key:
                failed[key] = failed.get(key, 0) + 1
        self.node_counts = counts
        self._notify()
        for key, buffer in sorted(self._buffers.items()):
            self._provisioning(buffer, existing.get(key, 0), new.get(key, 0), failed.get(key, 0))

    def launched(self, claim: str, placed: Iterable[pod_mod.Pod]) -> None:
        """The run's NodeClaim ``claim`` was created with ``placed`` on it: its virtual pods hold it from now,
        not from the next run (a node that is Ready within seconds, as on KWOK, is otherwise empty to
        emptiness until then, deleted and launched again in a loop)."""
        n = sum(1 for p in placed if cb.is_virtual(p))
        if n:
            self.node_counts = {**self.node_counts, claim: self.node_counts.get(claim, 0) + n}
            self._notify()

    def _provisioning(self, buffer: cb.CapacityBuffer, existing: int, new: int, failed: int) -> None:
        desired = buffer.status_replicas or 0
        if not buffer.condition_true(cb.READY_FOR_PROVISIONING):
            true, reason, message = False, cb.REASON_NOT_READY, "Buffer is not ReadyForProvisioning"
        elif desired == 0:
            true, reason, message = False, cb.REASON_EMPTY, "Buffer has zero desired replicas"
        elif new or failed:
            true, reason = False, cb.REASON_REQUIRES_NEW
            message = f"{new}/{desired} virtual pods required new capacity, {failed} failed"
        elif existing == desired:
            true, reason = True, cb.REASON_FITS_EXISTING
            message = f"All {desired} virtual pods fit on existing capacity"
        else:
            return
        for c in buffer.conditions:
            if c.get("type") == cb.PROVISIONING and c.get("reason") == reason and c.get("message") == message:
                return
        obj = {"metadata": {"name": buffer.metadata.name, "namespace": buffer.metadata.namespace,
                            "generation": buffer.metadata.generation},
               "status": {"conditions": [dict(c) for c in buffer.conditions]}}
        status: dict[str, Any] = {"conditions": [dict(c) for c in buffer.conditions]}
        self._set_condition(obj, status, cb.PROVISIONING, true, reason, message)
        try:
            written = self.cluster.patch_status(cb.KIND, buffer.metadata.name, {"status": status},
                                                buffer.metadata.namespace)
            self._buffers[buffer.key] = cb.CapacityBuffer.from_manifest(written)
        except (kube_errors.KubeError, api_errors.ValidationError) as exc:
            log.warning("capacitybuffer: cannot write the Provisioning condition of %s: %s", buffer.key, exc)

    def buffer_nodes(self) -> set[str]:
        """Nodes the last scheduling run placed virtual pods on."""
        return {name for name, n in self.node_counts.items() if n > 0}


def real(pods: Iterable[pod_mod.Pod]) -> list[pod_mod.Pod]:
    """The pods of ``pods`` that are not virtual."""
    return [p for p in pods if not cb.is_virtual(p)]
