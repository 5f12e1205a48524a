"""A cluster's state as ``kubectl get ... -o yaml`` writes it, made ready to run in the simulator.

``karpy whatif`` reads the dump of a real cluster (one or several files, ``kind: List`` or
multi-document YAML) and replays it into :class:`karpy.simulator.engine.Simulation`. This module
turns the dump into the objects the simulator applies at time 0, keeping what matters and dropping
what the simulator's own controllers re-create:

* every object goes through :func:`karpy.api.manifest.load_documents`, so old Provisioner /
  AWSNodeTemplate / Machine objects are converted and invalid ones are reported before anything runs;
  what the simulator never reads is dropped as soon as each object is read, before it is validated
  or kept (:func:`prune`: ``managedFields``, the ``kubectl.kubernetes.io/last-applied-configuration``
  annotation, a Pod's container statuses and IPs and its containers' fields other than name, image,
  resources, ports and restart policy, a Node's image list), so a dump of hundreds of MB fits;
* server-set metadata (uid, resourceVersion, managedFields, creationTimestamp, generation) is dropped;
  owner references are re-pointed by owner name after the owners are created with new uids;
* a Deployment is represented by its ReplicaSets (the simulated Deployment controller would hash
  templates differently from the API server and roll new ReplicaSets); a Deployment that wants pods
  but has no ReplicaSet with replicas in the dump gets a warning saying its pods are not simulated;
  StatefulSets become a ReplicaSet of the same name (the simulator has no StatefulSet controller: their
  pods are re-created elsewhere when evicted, without stable identity); pods of a DaemonSet are left to
  the simulated DaemonSet controller; finished pods (Succeeded, Failed) are dropped; pods of a Job keep
  running without owner;
* Nodes with the ``karpenter.sh/nodepool`` label and a provider ID are **managed**: they are adopted as
  instances of the simulated cloud (with karpy's tags, never garbage-collected as unknown) and keep
  their NodeClaim (synthesised from the Node when the dump has none); every other Node is
  **unmanaged** and stays as it is.

A caller may rely on: :func:`read` raises only :class:`karpy.api.errors.ValidationError`, naming the
file and document; the returned :class:`State` is plain data (no simulator object is touched).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import errors, labels, manifest
from karpy.kube import compact, interface

NODECLASS_KINDS = ("EC2NodeClass", "AKSNodeClass")
_SERVER_META = ("uid", "resourceVersion", "managedFields", "creationTimestamp", "generation", "selfLink",
                "deletionTimestamp", "deletionGracePeriodSeconds")
_KEPT_KINDS = ("Namespace", "NodePool", "EC2NodeClass", "AKSNodeClass", "PodDisruptionBudget", "DaemonSet",
               "ReplicaSet", "StatefulSet", "Deployment", "Job", "Node", "NodeClaim", "Pod", "PriorityClass",
               "StorageClass", "PersistentVolume", "PersistentVolumeClaim")


@dataclass(frozen=True, slots=True)
class ManagedNode:
    """A Node Karpenter or karpy launched: adopted by the simulated cloud."""

    node: str
    provider_id: str
    instance_type: str
    zone: str
    capacity_type: str
    nodepool: str
    nodeclaim: str
    node_class: str
    image_id: str = ""
    """The image the instance runs (the NodeClaim's ``status.imageID``; ``""`` when unknown)."""


@dataclass(slots=True)
class State:
    """What the simulator applies at time 0, in apply order, plus what it must adopt."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    """Namespaces, NodeClasses, NodePools, PDBs, DaemonSets and ReplicaSets."""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    """Every Node as dumped (without server metadata)."""
    nodeclaims: list[dict[str, Any]] = field(default_factory=list)
    """NodeClaims of managed nodes, with their status (Launched, Registered, Initialized)."""
    bound_pods: list[dict[str, Any]] = field(default_factory=list)
    """Running pods that keep their node. Owner references of pods name their ReplicaSet by name only:
    the caller fills in the uid the ReplicaSet got when it was created."""
    pending_pods: list[dict[str, Any]] = field(default_factory=list)
    """Pods not running yet (status dropped: the simulated kube-scheduler tries them first)."""
    managed: list[ManagedNode] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    provider: str = "aws"
    region: str | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    """Objects the simulator does not need, by reason (``"finished pod"``, ``"DaemonSet pod"`` ...)."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: reading a dump makes millions of dicts, lists and strings
    and no cycle, and each of the collector's passes would walk all of them again (a quarter of the
    reading's time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read(inputs: Sequence[tuple[str, str]], nodepools: Sequence[tuple[str, str]] = ()) -> State:
    """The state of ``inputs`` (``(file name, YAML text)``), with the NodePools and NodeClasses of
    ``nodepools`` instead of the cluster's when given."""
    with gc_paused():
        return _read(inputs, nodepools)


def _read(inputs: Sequence[tuple[str, str]], nodepools: Sequence[tuple[str, str]]) -> State:
    loaded = _load(inputs)
    warnings = list(loaded[1])
    objs = loaded[0]
    if nodepools:
        replacement, more = _load(nodepools)
        warnings.extend(more)
        objs = [o for o in objs if o["kind"] not in ("NodePool", *NODECLASS_KINDS)]
        objs.extend(o for o in replacement if o["kind"] in ("NodePool", *NODECLASS_KINDS))
    state = State(warnings=warnings)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for o in objs:
        by_kind.setdefault(str(o["kind"]), []).append(o)
    for kind in ("Namespace", "PriorityClass", "StorageClass", "PersistentVolume", "EC2NodeClass", "AKSNodeClass",
                 "NodePool", "PersistentVolumeClaim", "PodDisruptionBudget", "DaemonSet"):
        state.objects.extend(by_kind.get(kind, ()))
    state.objects.extend(_replicasets(by_kind))
    state.warnings.extend(_deployments_without_replicasets(by_kind))
    pool_classes = {interface.name_of(p): str((((p.get("spec") or {}).get("template") or {}).get("spec") or {})
                                                 .get("nodeClassRef", {}).get("name") or "")
                    for p in by_kind.get("NodePool", [])}
    _nodes(state, by_kind.get("Node", []), by_kind.get("NodeClaim", []), pool_classes)
    _pods(state, by_kind.get("Pod", []))
    return state


def _load(inputs: Sequence[tuple[str, str]]) -> tuple[list[dict[str, Any]], list[str]]:
    out: list[dict[str, Any]] = []
    warnings: list[str] = []
    problems: list[errors.FieldError] = []
    for source, text in inputs:
        try:
            result = manifest.load_documents(text, source=source, prune=prune)
        except errors.ValidationError as exc:
            problems.extend(errors.FieldError(f"{source}: {e.obj}", e.path, e.expected, e.found)
                            for e in exc.errors)
            continue
        warnings.extend(f"{source}: {w}" for w in result.warnings)
        for o in result.objects:
            if o.kind in _KEPT_KINDS:
                out.append(_strip(o.raw))
    if problems:
        raise errors.ValidationError(problems)
    return out, warnings


def prune(obj: dict[str, Any]) -> None:
    """Drop in place what the simulator never reads of ``obj`` (any mapping: it is not validated yet):
    the module docstring's list. Nested parts it changes are replaced, not changed (YAML anchors may
    share them)."""
    md = obj.get("metadata")
    if isinstance(md, dict):
        md.pop("managedFields", None)
        annotations = md.get("annotations")
        if isinstance(annotations, dict) and compact.LAST_APPLIED in annotations:
            md["annotations"] = {k: v for k, v in annotations.items() if k != compact.LAST_APPLIED}
    kind = obj.get("kind")
    status = obj.get("status")
    if kind == "Pod":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            obj["spec"] = spec = dict(spec)
            for key in ("containers", "initContainers"):
                containers = spec.get(key)
                if isinstance(containers, list):
                    spec[key] = [{k: c[k] for k in compact.CONTAINER_FIELDS if k in c} if isinstance(c, dict)
                                 else c for c in containers]
        if isinstance(status, dict):
            obj["status"] = {k: v for k, v in status.items() if k not in compact.DROPPED_POD_STATUS}
    elif kind == "Node" and isinstance(status, dict) and "images" in status:
        obj["status"] = {k: v for k, v in status.items() if k != "images"}


def _strip(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` without the server's metadata: a new top level and metadata, the rest shared (what this
    module changes deeper, a pending pod's ``spec`` and a NodeClaim's ``status``, is copied where it is
    changed; the simulator's store copies what it is given)."""
    obj = dict(raw)
    md = dict(obj.get("metadata") or {})
    for key in _SERVER_META:
        md.pop(key, None)
    obj["metadata"] = md
    return obj


def _replicasets(by_kind: Mapping[str, list[dict[str, Any]]]) -> Iterable[dict[str, Any]]:
    """Active ReplicaSets (replicas > 0) without owners, and one ReplicaSet per StatefulSet."""
    for rs in by_kind.get("ReplicaSet", ()):
        if int((rs.get("spec") or {}).get("replicas") or 0) <= 0:
            continue
        rs = {**rs, "metadata": dict(rs["metadata"])}
        rs["metadata"].pop("ownerReferences", None)
        yield rs
    for sts in by_kind.get("StatefulSet", ()):
        spec = sts.get("spec") or {}
        yield {"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": interface.name_of(sts), "namespace": interface.namespace_of(sts) or "default",
                            "labels": dict(interface.labels_of(sts))},
               "spec": {"replicas": int(spec.get("replicas", 1) or 0), "selector": spec.get("selector") or {},
                        "template": spec.get("template") or {}}}


def _deployments_without_replicasets(by_kind: Mapping[str, list[dict[str, Any]]]) -> Iterable[str]:
    """A warning for each Deployment that wants pods but has no ReplicaSet with replicas in the dump: its
    pods are not simulated (a Deployment is represented by its ReplicaSets)."""
    owners = set()
    for rs in by_kind.get("ReplicaSet", ()):
        if int((rs.get("spec") or {}).get("replicas") or 0) <= 0:
            continue
        for ref in (rs.get("metadata") or {}).get("ownerReferences") or ():
            if isinstance(ref, Mapping) and ref.get("kind") == "Deployment":
                owners.add((interface.namespace_of(rs) or "default", str(ref.get("name"))))
    for dep in by_kind.get("Deployment", ()):
        replicas = (dep.get("spec") or {}).get("replicas", 1)
        key = (interface.namespace_of(dep) or "default", interface.name_of(dep))
        if isinstance(replicas, int) and replicas > 0 and key not in owners:
            yield (f"Deployment {key[0]}/{key[1]} ({replicas} replicas) has no ReplicaSet with replicas in the "
                   "input, so none of its pods is simulated: add the ReplicaSets (kubectl get replicasets -A -o "
                   "yaml) to the dump")


def _nodes(state: State, nodes: list[dict[str, Any]], claims: list[dict[str, Any]],
           pool_classes: Mapping[str, str]) -> None:
    """Nodes as dumped; managed ones also adopted, with their NodeClaim (or one made from the Node, whose
    NodeClass is its NodePool's)."""
    claim_by_pid = {str((c.get("status") or {}).get("providerID") or ""): c for c in claims}
    for n in sorted(nodes, key=interface.name_of):
        n = {**n, "metadata": dict(n["metadata"])}
        n["metadata"].pop("ownerReferences", None)
        state.nodes.append(n)
        lb = interface.labels_of(n)
        pid = str((n.get("spec") or {}).get("providerID") or "")
        if pid.startswith("azure://"):
            state.provider = "azure"
        state.region = state.region or lb.get(labels.REGION)
        pool = lb.get(labels.NODEPOOL) or lb.get("karpenter.sh/provisioner-name")
        itype = lb.get(labels.INSTANCE_TYPE) or lb.get("beta.kubernetes.io/instance-type")
        if not (pool and pid and itype):
            continue
        claim = claim_by_pid.get(pid)
        name = interface.name_of(claim) if claim else interface.name_of(n)
        ref = ((claim or {}).get("spec") or {}).get("nodeClassRef") or {}
        node_class = str(ref.get("name") or "") if claim is not None else pool_classes.get(pool, "")
        managed = ManagedNode(
            node=interface.name_of(n), provider_id=pid, instance_type=itype, zone=lb.get(labels.ZONE, ""),
            capacity_type=lb.get(labels.CAPACITY_TYPE, labels.CAPACITY_TYPE_ON_DEMAND), nodepool=pool,
            nodeclaim=name, node_class=node_class,
            image_id=str(((claim or {}).get("status") or {}).get("imageID") or ""))
        state.managed.append(managed)
        state.nodeclaims.append(_claim(claim, managed, n))


def _claim(claim: dict[str, Any] | None, m: ManagedNode, node: Mapping[str, Any]) -> dict[str, Any]:
    """The dump's NodeClaim (without server metadata) or one synthesised from the Node."""
    if claim is not None:
        claim = {**claim, "metadata": dict(claim["metadata"])}
        claim["metadata"].pop("ownerReferences", None)
        status = claim["status"] = dict(claim.get("status") or {})
        status.setdefault("nodeName", m.node)
        return claim
    lb = dict(interface.labels_of(node))
    lb[labels.NODEPOOL] = m.nodepool
    alloc = dict((node.get("status") or {}).get("allocatable") or {})
    conditions = [{"type": t, "status": "True", "reason": t, "message": ""}
                  for t in ("Launched", "Registered", "Initialized", "Ready")]
    aws = m.provider_id.startswith("aws")
    group, kind = (labels.AWS_GROUP, "EC2NodeClass") if aws else (labels.AZURE_GROUP, "AKSNodeClass")
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": m.nodeclaim, "labels": lb, "finalizers": [labels.FINALIZER_TERMINATION]},
            "spec": {"nodeClassRef": {"group": group, "kind": kind, "name": m.node_class or "default"},
                     "requirements": [{"key": labels.INSTANCE_TYPE, "operator": "In", "values": [m.instance_type]}]},
            "status": {"providerID": m.provider_id, "nodeName": m.node,
                       "capacity": dict((node.get("status") or {}).get("capacity") or alloc),
                       "allocatable": alloc, "conditions": conditions}}


def _pods(state: State, pods: list[dict[str, Any]]) -> None:
    for p in pods:
        phase = str((p.get("status") or {}).get("phase") or "Pending")
        refs = interface.owner_references(p)
        kinds = {str(r.get("kind")) for r in refs if r.get("controller")}
        if phase in ("Succeeded", "Failed"):
            _count(state, "finished pod")
            continue
        if "DaemonSet" in kinds or "Node" in kinds:
            _count(state, "DaemonSet or static pod (re-created by the simulator)")
            continue
        p = {**p, "metadata": dict(p["metadata"])}
        p["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": r.get("name"), "controller": True}
            for r in refs if r.get("controller") and r.get("kind") in ("ReplicaSet", "StatefulSet")]
        if not p["metadata"]["ownerReferences"]:
            del p["metadata"]["ownerReferences"]
        if (p.get("spec") or {}).get("nodeName") and phase == "Running":
            state.bound_pods.append(p)
        else:
            p.pop("status", None)
            spec = p["spec"] = dict(p.get("spec") or {})
            spec.pop("nodeName", None)
            state.pending_pods.append(p)


def _count(state: State, why: str) -> None:
    state.dropped[why] = state.dropped.get(why, 0) + 1
