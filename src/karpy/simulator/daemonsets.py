"""The simulated DaemonSet controller: one pod per eligible node.

A stand-in for kube-controller-manager's DaemonSet controller in ``karpy simulate``, on the same
:class:`karpy.controllers.runtime.Manager` as karpy's controllers.

What a caller may rely on:

* A node is *eligible* for a DaemonSet when the pod template's ``nodeSelector`` and required node
  affinity (``matchExpressions`` on labels, ``matchFields`` on ``metadata.name``) match it and the
  pod tolerates every ``NoSchedule`` / ``NoExecute`` taint of the node. The tolerations Kubernetes
  adds to every daemon pod count (:data:`DAEMON_TOLERATIONS`: not-ready and unreachable
  ``NoExecute``; disk-, memory-, pid-pressure and unschedulable ``NoSchedule``; network-unavailable
  only for ``hostNetwork`` pods, as Kubernetes does). ``karpenter.sh/disrupted`` and
  ``karpenter.sh/unregistered`` are *not* tolerated unless the template says so, so daemon pods
  arrive once karpy has registered a node and never on a node being disrupted.
* An eligible node that is not being deleted gets exactly one pod, named
  ``<daemonset>-<5 chars>`` from the seeded ``random.Random``, created already bound
  (``spec.nodeName``) with the required node affinity replaced by ``matchFields metadata.name``
  as the real controller writes it, and the daemon tolerations added to ``spec.tolerations``.
* A pod stays while the node only gains an untolerated ``NoSchedule`` taint (Kubernetes'
  "should continue running"); it is deleted when the node gains an untolerated ``NoExecute``
  taint, stops matching the selector/affinity, or disappears. Failed daemon pods are deleted and
  replaced. Extra pods on one node are deleted (the oldest stays).
* A template change replaces every pod at once (the ``controller-revision-hash`` label tells old
  from new); ``maxUnavailable`` / ``maxSurge`` pacing is not simulated.
* Resources are not checked: like the real controller (since Kubernetes 1.12 the scheduler does
  it) the pod is created; the kubelet simulator runs it.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterable, Mapping
from typing import Any

from karpy.api import meta, node, pod, podspec
from karpy.api import workloads as api_workloads
from karpy.controllers import runtime
from karpy.kube import errors, interface
from karpy.scheduling import requirements, taints
from karpy.simulator import owned as owned_mod

CONTROLLER = "simulator.daemonset"
REVISION_HASH = "controller-revision-hash"
TEMPLATE_GENERATION = "pod-template-generation"

DAEMON_TOLERATIONS = (
    podspec.Toleration(key="node.kubernetes.io/not-ready", operator="Exists", effect="NoExecute"),
    podspec.Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute"),
    podspec.Toleration(key="node.kubernetes.io/disk-pressure", operator="Exists", effect="NoSchedule"),
    podspec.Toleration(key="node.kubernetes.io/memory-pressure", operator="Exists", effect="NoSchedule"),
    podspec.Toleration(key="node.kubernetes.io/pid-pressure", operator="Exists", effect="NoSchedule"),
    podspec.Toleration(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"),
)
"""Tolerations Kubernetes adds to every DaemonSet pod."""

HOST_NETWORK_TOLERATIONS = (
    podspec.Toleration(key="node.kubernetes.io/network-unavailable", operator="Exists", effect="NoSchedule"),
)
"""Added as well when the pod uses the host network."""

_METADATA_NAME = "metadata.name"


def daemon_tolerations(template_pod: pod.Pod) -> tuple[podspec.Toleration, ...]:
    """The template's tolerations plus those Kubernetes adds to daemon pods."""
    added = DAEMON_TOLERATIONS + (HOST_NETWORK_TOLERATIONS if template_pod.host_network else ())
    return template_pod.tolerations + tuple(t for t in added if t not in template_pod.tolerations)


def _term_matches(term: Any, node_: node.Node) -> bool:
    """One ``nodeSelectorTerm``: its expressions (labels) and fields (name) all hold."""
    if not term.match_expressions and not term.match_fields:
        return False  # Kubernetes: an empty term matches no node
    try:
        if term.match_expressions:
            need = requirements.Requirements.from_node_selector_requirements(term.match_expressions)
            if requirements.Requirements.from_labels(node_.labels).compatible(
                    need, frozenset()) is not None:
                return False
        if term.match_fields:
            need = requirements.Requirements.from_node_selector_requirements(term.match_fields)
            if requirements.Requirements.from_labels({_METADATA_NAME: node_.name}).compatible(
                    need, frozenset()) is not None:
                return False
    except ValueError:
        return False
    return True


def selects(template_pod: pod.Pod, node_: node.Node) -> bool:
    """The template's ``nodeSelector`` and required node affinity match the node."""
    for k, v in template_pod.node_selector.items():
        if node_.labels.get(k) != v:
            return False
    affinity = template_pod.node_affinity
    if affinity is None or not affinity.required:
        return True
    return any(_term_matches(t, node_) for t in affinity.required)


def should_run(template_pod: pod.Pod, node_: node.Node) -> bool:
    """A new daemon pod belongs on the node (selector, affinity, NoSchedule+NoExecute taints)."""
    if not selects(template_pod, node_):
        return False
    return not taints.untolerated(daemon_tolerations(template_pod), node_.taints, taints.HARD_EFFECTS)


def should_continue(template_pod: pod.Pod, node_: node.Node) -> bool:
    """An existing daemon pod may stay on the node (selector, affinity, NoExecute taints)."""
    if not selects(template_pod, node_):
        return False
    return not taints.untolerated(daemon_tolerations(template_pod), node_.taints, (taints.NO_EXECUTE,))


class DaemonSetController:
    """Runs one pod of each DaemonSet on each eligible node. Register with :meth:`register`."""

    def __init__(self, cluster: interface.Cluster, rng: random.Random) -> None:
        self.cluster = cluster
        self.rng = rng
        self._node_state: dict[str, tuple[Any, ...]] = {}

    def controller(self) -> runtime.Controller:
        return runtime.Controller(
            name=CONTROLLER,
            reconcile=self.reconcile,
            watches=[
                ("DaemonSet", runtime.by_name),
                ("Pod", runtime.only(owned_mod.owner_mapper("DaemonSet"))),
                ("Node", self._map_node),
            ],
        )

    def register(self, manager: runtime.Manager) -> None:
        manager.register(self.controller())

    def _map_node(self, event: str, obj: dict[str, Any]) -> Iterable[str]:
        """Every DaemonSet, but only when what decides eligibility changed (status churn is ignored)."""
        md = obj.get("metadata", {})
        name = str(md.get("name", ""))
        if event == interface.DELETED:
            self._node_state.pop(name, None)
        else:
            state = (repr(sorted((md.get("labels") or {}).items())),
                     repr(obj.get("spec", {}).get("taints")), bool(md.get("deletionTimestamp")))
            if self._node_state.get(name) == state:
                return ()
            self._node_state[name] = state
        return [f"{interface.namespace_of(ds)}/{interface.name_of(ds)}"
                for ds in self.cluster.list("DaemonSet")]

    def reconcile(self, key: str) -> float | None:
        ns, name = owned_mod.split_key(key)
        try:
            ds = self.cluster.get("DaemonSet", name, ns)
        except errors.NotFound:
            return None  # the cluster's garbage collector deletes its pods
        if interface.is_terminating(ds):
            return None
        ns = interface.namespace_of(ds) or meta.DEFAULT_NAMESPACE
        tmpl = api_workloads.DaemonSet.from_manifest(ds).template_pod
        template = ds.get("spec", {}).get("template") or {}
        revision = owned_mod.template_hash(template)
        owned = [p for p in self.cluster.list("Pod", ns) if owned_mod.is_controlled_by(p, ds)]
        taken = {interface.name_of(p) for p in owned}
        by_node: dict[str, list[dict[str, Any]]] = {}
        for p in owned:
            if owned_mod.is_deleting(p):
                continue
            if p.get("status", {}).get("phase") == "Failed":
                self._delete(p)  # Kubernetes deletes failed daemon pods so they are replaced
                continue
            by_node.setdefault(str(p.get("spec", {}).get("nodeName") or ""), []).append(p)

        nodes = sorted(self.cluster.list("Node"), key=interface.name_of)
        counts = {"desired": 0, "scheduled": 0, "misscheduled": 0, "ready": 0, "updated": 0}
        for raw in nodes:
            n = node.Node.from_manifest(raw)
            pods = sorted(by_node.pop(n.name, []),
                          key=lambda p: (owned_mod.creation_time(p), interface.name_of(p)))
            run = should_run(tmpl, n) and not n.deleting
            keep = should_continue(tmpl, n)
            if not keep:
                for p in pods:
                    self._delete(p)
                pods = []
            else:
                current = [p for p in pods if interface.labels_of(p).get(REVISION_HASH) == revision]
                for p in pods:
                    if p not in current or p is not current[0]:
                        self._delete(p)  # outdated template, or a duplicate on this node
                pods = current[:1]
                if not pods and run:
                    pods = [self._create(ds, tmpl, revision, n.name, taken)]
            if run or (keep and pods):
                counts["desired"] += 1
            if pods:
                counts["scheduled" if (run or keep) else "misscheduled"] += 1
                counts["updated"] += 1
                counts["ready"] += int(owned_mod.is_pod_ready(pods[0]))
        for stale in by_node.values():  # bound to nodes that no longer exist (or never bound)
            for p in stale:
                self._delete(p)

        owned_mod.update_status_if_changed(self.cluster, ds, {
            "desiredNumberScheduled": counts["desired"],
            "currentNumberScheduled": counts["scheduled"],
            "numberMisscheduled": counts["misscheduled"],
            "numberReady": counts["ready"],
            "updatedNumberScheduled": counts["updated"],
            "numberAvailable": counts["ready"],
            "numberUnavailable": max(0, counts["desired"] - counts["ready"]),
            "observedGeneration": ds.get("metadata", {}).get("generation", 0),
        })
        return None

    def _delete(self, p: Mapping[str, Any]) -> None:
        owned_mod.delete_quietly(self.cluster, "Pod", interface.name_of(p), interface.namespace_of(p))

    def _create(self, ds: dict[str, Any], tmpl: pod.Pod, revision: str, node_name: str,
                taken: set[str]) -> dict[str, Any]:
        template = ds.get("spec", {}).get("template") or {}
        generation = ds.get("metadata", {}).get("generation", 1) or 1
        while True:
            name = owned_mod.generate_name(interface.name_of(ds), self.rng, taken)
            taken.add(name)
            manifest = owned_mod.pod_from_template(
                ds, name, template, {REVISION_HASH: revision, TEMPLATE_GENERATION: str(generation)})
            spec = manifest["spec"]
            spec["nodeName"] = node_name
            spec["tolerations"] = [t.to_dict() for t in daemon_tolerations(tmpl)]
            affinity = copy.deepcopy(spec.get("affinity") or {})
            affinity["nodeAffinity"] = {
                **(affinity.get("nodeAffinity") or {}),
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                    "matchFields": [{"key": _METADATA_NAME, "operator": "In", "values": [node_name]}],
                }]},
            }
            spec["affinity"] = affinity
            try:
                return self.cluster.create(manifest)
            except errors.AlreadyExists:
                continue
