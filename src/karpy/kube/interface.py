"""The cluster interface karpy's controllers talk to, and small helpers over object dicts.

Controllers (provisioner, NodeClaim lifecycle, termination, garbage collection, disruption) take
a :class:`Cluster` and nothing else that touches Kubernetes. Two implementations exist:
:class:`karpy.kube.memory.InMemoryCluster` (simulator, integration tests) and an adapter over a
real API server. Both follow the contract written on :class:`Cluster`; a controller that relies
on anything else is wrong.

Objects are plain dicts exactly as the API server returns them: ``apiVersion``, ``kind``,
``metadata``, ``spec``, ``status``. Kinds are identified by their ``kind`` string; :data:`KINDS`
says which API version and scope each kind karpy uses has. Other kinds are accepted as namespaced
custom objects with whatever ``apiVersion`` they are created with.

Namespaces: for a namespaced kind, ``namespace=""`` means ``"default"`` in ``get``, ``create``,
``update``, ``patch`` and ``delete``, and *all namespaces* in ``list``. For a cluster-scoped kind
the namespace is ignored and objects carry none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

WatchHandler = Callable[[str, dict[str, Any]], None]
"""``handler(event_type, obj)`` with ``event_type`` one of ADDED, MODIFIED, DELETED."""

Unsubscribe = Callable[[], None]

LabelSelectorArg = str | Mapping[str, str] | None


@dataclass(frozen=True, slots=True)
class KindInfo:
    api_version: str
    namespaced: bool


KINDS: Mapping[str, KindInfo] = {
    "Pod": KindInfo("v1", True),
    "Node": KindInfo("v1", False),
    "Event": KindInfo("v1", True),
    "Namespace": KindInfo("v1", False),
    "PersistentVolumeClaim": KindInfo("v1", True),
    "PersistentVolume": KindInfo("v1", False),
    "ConfigMap": KindInfo("v1", True),
    "DaemonSet": KindInfo("apps/v1", True),
    "Deployment": KindInfo("apps/v1", True),
    "ReplicaSet": KindInfo("apps/v1", True),
    "StatefulSet": KindInfo("apps/v1", True),
    "Job": KindInfo("batch/v1", True),
    "PodDisruptionBudget": KindInfo("policy/v1", True),
    "StorageClass": KindInfo("storage.k8s.io/v1", False),
    "CSINode": KindInfo("storage.k8s.io/v1", False),
    "VolumeAttachment": KindInfo("storage.k8s.io/v1", False),
    "Lease": KindInfo("coordination.k8s.io/v1", True),
    "NodePool": KindInfo("karpenter.sh/v1", False),
    "NodeClaim": KindInfo("karpenter.sh/v1", False),
    "NodeOverlay": KindInfo("karpenter.sh/v1alpha1", False),
    "EC2NodeClass": KindInfo("karpenter.k8s.aws/v1", False),
    "AKSNodeClass": KindInfo("karpenter.azure.com/v1beta1", False),
    "KWOKNodeClass": KindInfo("karpenter.kwok.sh/v1alpha1", False),
    # v1alpha5-era kinds, read from old manifests before conversion.
    "Provisioner": KindInfo("karpenter.sh/v1alpha5", False),
    "Machine": KindInfo("karpenter.sh/v1alpha5", False),
    "AWSNodeTemplate": KindInfo("karpenter.k8s.aws/v1alpha1", False),
}


def kind_info(kind: str) -> KindInfo | None:
    """The registered API version and scope of ``kind`` (``None`` for a custom kind)."""
    return KINDS.get(kind)


def is_namespaced(kind: str) -> bool:
    """Unknown kinds are namespaced custom objects."""
    info = KINDS.get(kind)
    return True if info is None else info.namespaced


def scoped_namespace(kind: str, namespace: str | None) -> str:
    """The namespace an object of ``kind`` lives in: ``""`` for cluster-scoped, else default."""
    if not is_namespaced(kind):
        return ""
    return namespace or "default"


class Cluster(Protocol):
    """What a controller may rely on when talking to a cluster.

    Reads. ``get`` and ``list`` return dicts the caller MUST NOT mutate: an implementation may
    hand out shared, cached objects (an informer cache, or the in-memory store itself). Copy
    (``copy.deepcopy``) before changing an object and sending it back.

    Errors are :mod:`karpy.kube.errors` classes: ``NotFound`` (gone), ``AlreadyExists`` (name
    taken), ``Conflict`` (stale ``resourceVersion``: re-read, re-apply, retry), ``Invalid`` /
    ``BadRequest`` (the request can never succeed as is), ``TooManyRequests`` (retry later).

    Writes. Every successful write returns the object as stored (with its new
    ``metadata.resourceVersion``). Like ``list``'s, the returned dict is read-only for the caller:
    an implementation may return the stored object itself (the in-memory cluster does), so copy
    it before changing it or sending a changed version back. ``resourceVersion`` is an opaque
    string; never compare two of them except for equality.
    """

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        """The object, or ``NotFound``."""
        ...

    def list(
        self,
        kind: str,
        namespace: str = "",
        label_selector: LabelSelectorArg = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of ``kind`` (in ``namespace``, or all when ``""``) matching both selectors.

        Field selectors support ``=``, ``==`` and ``!=`` on the fields listed by
        :func:`karpy.kube.selectors.supported_fields` (``metadata.name``, ``metadata.namespace``;
        Pods: ``spec.nodeName``, ``status.phase``, ...; Events: ``involvedObject.*``, ``reason``,
        ``source``, ``reportingComponent``, ``type``). Others raise ``BadRequest``.
        The order of the result is unspecified.
        """
        ...

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj``; ``AlreadyExists`` when the name is taken.

        Sets ``metadata.uid``, ``resourceVersion``, ``creationTimestamp`` and ``generation=1``;
        ``metadata.generateName`` without a name gets a random suffix. A missing ``apiVersion`` is
        filled from :data:`KINDS`. ``obj`` itself is not modified.
        """
        ...

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace metadata and spec of an existing object (status changes are ignored).

        ``Conflict`` when ``metadata.resourceVersion`` is set and stale (omit it for an
        unconditional update). ``metadata.generation`` increases when ``spec`` changes. Removing
        the last finalizer of a terminating object completes its deletion. Adding a finalizer to
        a terminating object is ``Invalid``.
        """
        ...

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace only ``status``; same ``Conflict`` rule as :meth:`update`."""
        ...

    def patch(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386: ``None`` deletes a key, lists are replaced).

        ``status`` in the patch is ignored (use :meth:`patch_status`). A
        ``metadata.resourceVersion`` in the patch is a precondition (``Conflict`` when stale).
        """
        ...

    def patch_status(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str = ""
    ) -> dict[str, Any]:
        """Apply a JSON merge patch to ``status`` only (the ``/status`` subresource). A
        ``metadata.resourceVersion`` in the patch is a precondition (``Conflict`` when stale, as the API
        server's optimistic lock); other metadata in it is ignored."""
        ...

    def delete(self, kind: str, name: str, namespace: str = "", *, uid: str | None = None,
               grace_period_seconds: int | None = None) -> None:
        """Delete, or ``NotFound``. ``uid``: the ``preconditions.uid`` of the DeleteOptions (``Conflict``
        when the object of that name is another one); ``grace_period_seconds``: the DeleteOptions'
        ``gracePeriodSeconds`` (a pod's grace period instead of its ``terminationGracePeriodSeconds``).

        With finalizers the object gets ``metadata.deletionTimestamp`` and stays until an update
        or patch removes the last finalizer; without, it is gone at once. Deleting a terminating
        object again does nothing. Dependents (``ownerReferences``) whose every owner is gone are
        deleted afterwards (background propagation). A Pod bound to a node may also be kept
        terminating (graceful deletion: ``deletionTimestamp`` and ``deletionGracePeriodSeconds``)
        until its kubelet reports it stopped; callers waiting for a pod must wait for it to be gone.
        """
        ...

    def evict(self, name: str, namespace: str, *, uid: str | None = None) -> None:
        """The Pod ``eviction`` subresource: delete the pod unless a PodDisruptionBudget forbids it.

        ``TooManyRequests`` when the budget selecting the pod allows no disruption now (its
        ``status.disruptionsAllowed``, which kube-controller-manager keeps, or a status older than its
        spec); ``InternalError`` when more than one budget selects it; ``NotFound`` when the pod is
        gone; ``Conflict`` when ``uid`` (the ``deleteOptions.preconditions.uid``) is not the pod's (the
        pod was replaced by another of the same name). Pods that are not running (pending, succeeded,
        failed) or already terminating can always be evicted. On success the pod is deleted as by
        :meth:`delete`; a cluster behind a watch (the real adapter) shows the deletion when the watch
        delivers it, so a reader may still see the pod unchanged for a moment.
        """
        ...

    def bind(self, name: str, namespace: str, node_name: str) -> dict[str, Any]:
        """The Pod ``binding`` subresource, as kube-scheduler assigns a pod: ``spec.nodeName`` and the
        ``PodScheduled=True`` condition in ONE write (one new resourceVersion, one MODIFIED event).

        ``Conflict`` when the pod is already assigned to a node or is being deleted; ``NotFound`` when
        it is gone. Returns the pod as stored after the binding (read-only, as every write's result).
        """
        ...

    def watch(self, kind: str, handler: WatchHandler) -> Unsubscribe:
        """Call ``handler(event_type, obj)`` after every committed write to ``kind``, in order.

        Events are ADDED, MODIFIED and DELETED (``obj`` is the last state for DELETED). A
        handler MUST only record or enqueue work: it must not mutate ``obj`` and should not
        write to the cluster itself. Returns a function that stops the watch.

        A :class:`Filtered` handler says which events it cares about; an implementation MAY skip
        the others (never one the filter accepts) or deliver them all, so the handler must be
        right either way.
        """
        ...


# ----------------------------------------------------------------------------- watch filters

STATUS = "status"
CONDITION_MESSAGES = "conditionMessages"
"""The parts of a change :attr:`WatchFilter.ignore` may name: ``"metadata"`` (but
``resourceVersion``, which every write changes), ``"spec"``, ``"status"``, any other top-level field,
and :data:`CONDITION_MESSAGES`: only the ``message`` of status conditions changed (a
kube-scheduler saying why a pod is still pending in other words; ignoring ``"status"`` ignores
this too)."""

EVERY_EVENT = frozenset({ADDED, MODIFIED, DELETED})


@dataclass(frozen=True, slots=True)
class WatchFilter:
    """What a watch handler cares about (:meth:`Cluster.watch`): the event types in ``events``, and
    of MODIFIED events only those that changed something outside ``ignore`` (see :data:`STATUS`)."""

    events: frozenset[str] = EVERY_EVENT
    ignore: frozenset[str] = frozenset()

    def wants(self, event: str, changed: frozenset[str] | None) -> bool:
        """Whether an ``event`` that changed the parts ``changed`` (None: unknown) is wanted."""
        if event not in self.events:
            return False
        if event != MODIFIED or changed is None or not self.ignore:
            return True
        ignored = self.ignore | {CONDITION_MESSAGES} if STATUS in self.ignore else self.ignore
        return not changed or not changed <= ignored


MESSAGES_ONLY = WatchFilter(ignore=frozenset({CONDITION_MESSAGES}))
"""Every event but a status write that only reworded conditions' messages."""


class Filtered:
    """A watch handler (or a controller's mapper) with the :class:`WatchFilter` of what it cares about.

    Calling it calls ``fn``; implementations that skip unwanted events read ``watch_filter``.
    """

    __slots__ = ("fn", "watch_filter")

    def __init__(self, fn: Callable[[str, dict[str, Any]], Any], watch_filter: WatchFilter) -> None:
        self.fn = fn
        self.watch_filter = watch_filter

    def __call__(self, event: str, obj: dict[str, Any]) -> Any:
        return self.fn(event, obj)


def changed_parts(old: Mapping[str, Any], new: Mapping[str, Any]) -> frozenset[str]:
    """The parts of an object a write changed, in :attr:`WatchFilter.ignore`'s terms."""
    out: set[str] = set()
    for key, after in new.items():
        before = old.get(key)
        if before is not after and _part_changed(key, before, after, out):
            out.add(key)
    for key, before in old.items():  # parts the write removed (a missing part reads as None)
        if before is not None and key not in new:
            out.add(key)
    return frozenset(out) if out else _NOTHING


_NOTHING: frozenset[str] = frozenset()


def _part_changed(key: str, before: Any, after: Any, out: set[str]) -> bool:
    """Whether top-level part ``key`` changed from ``before`` to ``after`` (two different objects);
    a status write that only rewords conditions' messages adds :data:`CONDITION_MESSAGES` to ``out``
    instead."""
    if key == "metadata" and isinstance(before, Mapping) and isinstance(after, Mapping):
        for k, value in after.items():
            if k != "resourceVersion":
                was = before.get(k)
                if was is not value and was != value:
                    return True
        return any(value is not None and k not in after and k != "resourceVersion" for k, value in before.items())
    if key == STATUS and isinstance(before, Mapping) and isinstance(after, Mapping) and _messages_only(before, after):
        out.add(CONDITION_MESSAGES)
        return False
    return bool(before != after)


def _messages_only(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """``after`` differs from ``before`` and only in its conditions' messages."""
    if before.keys() != after.keys():
        return False
    for key, value in after.items():
        old = before[key]
        if value is old:
            continue
        if key != "conditions" or not isinstance(value, list) or not isinstance(old, list) \
                or len(value) != len(old):
            return False
        for a, b in zip(old, value, strict=True):
            if a is b:
                continue
            if not isinstance(a, Mapping) or not isinstance(b, Mapping) or a.keys() != b.keys() \
                    or any(a[k] != b[k] for k in a if k != "message"):
                return False
    return before != after


# ----------------------------------------------------------------------------- object helpers


def meta_key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(kind, namespace, name)``; namespace is ``""`` for cluster-scoped kinds."""
    kind = obj.get("kind", "")
    if type(kind) is not str:
        kind = str(kind)
    meta = obj.get("metadata") or _NO_META
    info = KINDS.get(kind)  # scoped_namespace, inlined: this runs for every write and watch event
    ns = (meta.get("namespace") or "default") if info is None or info.namespaced else ""
    name = meta.get("name", "")
    return kind, ns, name if type(name) is str else str(name)


_NO_META: Mapping[str, Any] = {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    annotations: Mapping[str, str] = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations


def is_terminating(obj: Mapping[str, Any]) -> bool:
    """True once a delete was accepted (``metadata.deletionTimestamp`` is set)."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or ())


def owner_references(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = (obj.get("metadata") or {}).get("ownerReferences") or []
    return refs


def owner(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The controlling ownerReference (``controller: true``), else the first one, else ``None``."""
    refs = owner_references(obj)
    for ref in refs:
        if ref.get("controller"):
            return ref
    return refs[0] if refs else None


def owner_reference(obj: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference pointing at ``obj``, to put into a dependent's metadata."""
    meta = obj.get("metadata") or {}
    info = KINDS.get(str(obj.get("kind", "")))
    ref: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion") or (info.api_version if info else ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }
    if controller:
        ref["controller"] = True
        ref["blockOwnerDeletion"] = True
    return ref
