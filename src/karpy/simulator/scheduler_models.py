"""The simulated kube-scheduler's parsed view of pods and nodes, parsed again only on real change.

:class:`Models` turns stored Pods and Nodes into :class:`karpy.api.pod.Pod` /
:class:`karpy.api.node.Node` models for :mod:`karpy.simulator.kube_scheduler`. A pod is parsed
again only when its ``spec``, labels or annotations changed: the cluster never changes a stored
object in place (a write stores new dicts for what it changes), so the same objects mean the same
content and status writes (the kube-scheduler's own condition, the kubelet's) cost no parse. A
pod's own binding (only ``spec.nodeName`` changed) reuses the pending model with its node. A node
is parsed again when its resourceVersion changed. What kube-scheduler's filters read of a pod
(:func:`karpy.simulator.unschedulable.signature`) is worked out once per model and stood for by a
small number. Pure: nothing here reads or writes the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from karpy.api import errors as api_errors
from karpy.api import node, pod
from karpy.kube import interface
from karpy.scheduling import requirements
from karpy.simulator import unschedulable

log = logging.getLogger("karpy.simulator.kube_scheduler")


def same_model(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Two stored versions of a pod that :meth:`Models.pod_model` gives the same model for: the same
    ``spec``, labels and annotations objects (a status write)."""
    bmd, amd = before.get("metadata") or {}, after.get("metadata") or {}
    return before.get("spec") is after.get("spec") and bmd.get("labels") is amd.get("labels") and \
        bmd.get("annotations") is amd.get("annotations") and bmd.get("uid") == amd.get("uid")


class PodEntry:
    """A pod's model and the parts of the stored pod it was parsed from (the same objects mean the
    same content); ``sig`` (its signature number) is worked out on first use and ``key``
    (``namespace/name``) once per model."""

    __slots__ = ("annotations", "key", "labels", "model", "rv", "sig", "spec")

    def __init__(self, rv: Any, model: pod.Pod | None, spec: Any, pod_labels: Any, annotations: Any) -> None:
        self.rv = rv
        self.model = model
        self.spec = spec
        self.labels = pod_labels
        self.annotations = annotations
        self.sig: Hashable | None = None
        self.key = model.key if model is not None else ""


class Models:
    """See the module docstring."""

    def __init__(self) -> None:
        self._pods: dict[str, PodEntry] = {}
        """Pod uid -> its model and what it was parsed from."""
        self._sigs: dict[str, tuple[pod.Pod, Hashable]] = {}
        self._sig_ids: dict[Hashable, int] = {}
        """Distinct signatures seen -> a number standing for each (few: pods of a workload share one)."""
        self._spec_sigs: dict[tuple[int, str], tuple[Any, Hashable]] = {}
        """(id of a stored spec, namespace) -> (that spec, its pods' signature number)."""
        self.binding: tuple[str, pod.Pod, str] | None = None
        """(uid, pending model, node) while that pod's binding is written: its bound model is the same."""
        self._nodes: dict[str, tuple[str, node.Node | None]] = {}
        """Node name -> (resourceVersion, model, the stored labels object it was parsed from)."""
        self._reqs: dict[str, tuple[Mapping[str, str], requirements.Requirements]] = {}
        """Node name -> (model labels, their requirements, the stored labels object they came from)."""

    # ------------------------------------------------------------------------------- pods

    def pod_model(self, obj: Mapping[str, Any]) -> pod.Pod | None:
        """The pod's model (None if it cannot be read)."""
        return self.pod_entry(obj).model

    def pod_entry(self, obj: Mapping[str, Any]) -> PodEntry:
        """The pod's :class:`PodEntry`, parsed again only when its spec, labels or annotations changed."""
        md = obj.get("metadata") or {}
        uid = str(md.get("uid") or "") or "/".join(interface.meta_key(obj))
        rv = md.get("resourceVersion", "")
        hit = self._pods.get(uid)
        spec, pod_labels, annotations = obj.get("spec"), md.get("labels"), md.get("annotations")
        if hit is not None:
            if hit.rv == rv:
                return hit
            if hit.spec is spec and hit.labels is pod_labels and hit.annotations is annotations:
                hit.rv = rv  # a status write: the same model
                return hit
        binding = self.binding
        model: pod.Pod | None
        if binding is not None and binding[0] == uid and hit is not None and \
                hit.labels is pod_labels and hit.annotations is annotations:
            # Our own binding: only spec.nodeName changed.
            model = binding[1].evolve(node_name=binding[2])  # keeps the parsed requests and ports
        else:
            try:
                model = pod.Pod.from_stored(obj)  # stored objects are never changed in place
            except api_errors.ValidationError as exc:
                log.warning("kube-scheduler: cannot read pod %s: %s", uid, exc)
                model = None
        entry = PodEntry(rv, model, spec, pod_labels, annotations)
        self._pods[uid] = entry
        return entry

    def bound_model(self, uid: str) -> pod.Pod | None:
        """The model last parsed for pod ``uid``, if any."""
        hit = self._pods.get(uid)
        return None if hit is None else hit.model

    def entry_signature(self, entry: PodEntry, model: pod.Pod) -> Hashable:
        """:meth:`signature` of ``entry``'s model (``model``), worked out once per model, and once
        per stored ``spec`` object and namespace: replicas of one template share their stored spec
        (the signature reads nothing else)."""
        sig = entry.sig
        if sig is None:
            spec = entry.spec
            key = (id(spec), model.namespace)
            hit = self._spec_sigs.get(key)
            if hit is not None and hit[0] is spec:
                sig = hit[1]
            else:
                sig = self.signature(model)
                if len(self._spec_sigs) >= 10_000:
                    self._spec_sigs.clear()
                self._spec_sigs[key] = (spec, sig)
            entry.sig = sig
        return sig

    def signature(self, model: pod.Pod) -> Hashable:
        """:func:`karpy.simulator.unschedulable.signature` as a small number (equal signatures,
        equal numbers), kept while the model stays the same object."""
        uid = model.metadata.uid or model.key
        hit = self._sigs.get(uid)
        if hit is not None and hit[0] is model:
            return hit[1]
        full = unschedulable.signature(model)
        sig = self._sig_ids.setdefault(full, len(self._sig_ids))  # a small int: cheap to hash, pass after pass
        self._sigs[uid] = (model, sig)
        return sig

    def forget(self, live: Callable[[], Iterable[str]], pending: Callable[[], Iterable[str]],
               live_count: int, pending_count: int) -> None:
        """Drop what is kept for pods gone (``live``: uids of pods still pending or bound,
        ``pending``: of pods pending), once enough has piled up to be worth a sweep."""
        if len(self._pods) > 2 * live_count + 1000:
            keep = set(live())
            self._pods = {k: v for k, v in self._pods.items() if k in keep}
        if len(self._sigs) > pending_count + 1000:
            keep = set(pending())
            self._sigs = {k: v for k, v in self._sigs.items() if k in keep}

    # ------------------------------------------------------------------------------ nodes

    def node_model(self, obj: Mapping[str, Any]) -> node.Node | None:
        """The node's model (None if it cannot be read), parsed again when its resourceVersion changed."""
        name = interface.name_of(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        hit = self._nodes.get(name)
        if hit is not None and hit[0] == rv:
            return hit[1]
        try:
            model: node.Node | None = node.Node.from_manifest(obj)
        except api_errors.ValidationError as exc:
            log.warning("kube-scheduler: cannot read node %s: %s", name, exc)
            model = None
        self._nodes[name] = (rv, model)
        return model

    def last_node(self, name: str) -> node.Node | None:
        """The model last parsed for node ``name``, if any."""
        hit = self._nodes.get(name)
        return None if hit is None else hit[1]

    def node_reqs(self, n: node.Node) -> requirements.Requirements:
        """The node's labels as requirements, cached while its labels stay the same."""
        hit = self._reqs.get(n.name)
        if hit is not None and (hit[0] is n.labels or hit[0] == n.labels):
            return hit[1]
        reqs = requirements.Requirements.from_labels(n.labels)
        self._reqs[n.name] = (n.labels, reqs)
        return reqs

    def drop_node(self, name: str) -> None:
        """Node ``name`` was deleted."""
        self._nodes.pop(name, None)
        self._reqs.pop(name, None)
