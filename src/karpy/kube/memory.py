"""An in-memory cluster with the API server's semantics, for the simulator and integration tests.

:class:`InMemoryCluster` implements :class:`karpy.kube.interface.Cluster`; controllers run on it
unchanged. What it does like a real API server: per-object ``resourceVersion`` from one global
counter, optimistic concurrency (``Conflict``), ``generation`` bumped on spec changes, status only
through ``update_status`` / ``patch_status``, JSON merge patches, finalizers and
``deletionTimestamp``, ownerReference garbage collection (background propagation, cascading;
dependents that keep a live owner lose only their dangling references), the Pod eviction
subresource refusing by a PodDisruptionBudget's status and spending it, and the ``preconditions.uid`` and
``gracePeriodSeconds`` of a delete (:mod:`karpy.kube.memory_eviction`), and synchronous,
ordered watches. Copies, merge patches and write preconditions live in
:mod:`karpy.kube.memory_objects` (``memory.copy_dict`` & co. remain importable from here).

Deliberate differences: ``create`` keeps a given ``status`` (tests and the simulator build
running pods and ready nodes in one call; a Pod without status gets ``phase: Pending``); deleting
a pod removes it at once (there is no kubelet grace period) unless ``graceful_pods`` is set (see
below); namespaces need not exist, and a
removed Namespace deletes what is in it without waiting; objects created with an ownerReference
to an owner that never existed are left alone (only an owner's removal triggers collection).

Graceful pod termination (opt-in, ``InMemoryCluster(graceful_pods=True)`` or the attribute):
deleting or evicting a pod that is bound to a node (``spec.nodeName``) and not Succeeded/Failed sets
``metadata.deletionTimestamp`` and ``deletionGracePeriodSeconds`` (``spec.terminationGracePeriodSeconds``,
default 30) and keeps the pod, as the API server does; it is removed when a write gives it a terminal
phase (the kubelet's confirmation that its containers stopped, once its finalizers are gone too).

Object ownership. The store keeps private copies of what callers write and never mutates a stored
version in place: every write stores new dicts for what it changes and shares the unchanged parts
with the previous version (and Pods created by one controller with equal specs share one stored
``spec``). ``get`` returns a private copy the caller may modify and send back.
``list``, ``objects``, watch handlers *and the results of writes* get the *stored* objects, shared
and read-only - copy before changing one (``InMemoryCluster(copy_reads=True)`` makes ``list``
copy too, for hunting such bugs; passing a stored object back to ``update`` raises at once).
``check_shared=True`` (default: the module's :data:`CHECK_SHARED`, which the test suite turns on)
keeps a private copy of every stored object and raises :class:`SharedObjectMutatedError` as soon
as a read or write meets a stored object that somebody changed in place (:meth:`verify_shared`
checks them all).

Memory. Equal parts of similar objects (labels and owner references of one template's pods,
conditions of pods started together, capacity of nodes of one type...) are stored once
(:mod:`karpy.kube.memory_share`): one more reason never to change what the store hands out.

Speed. Objects are indexed by kind and namespace, pods also by ``spec.nodeName`` (``""`` for
unbound pods), so ``list("Pod", field_selector="spec.nodeName=n")`` reads only that node's pods,
and ``metadata.name=`` is a direct lookup. ``scanned`` counts the objects list filters examined.

Watches (:mod:`karpy.kube.memory_watch`). Synchronous and ordered: notifications are queued at
commit and delivered after the outer write finished, in write order; a handler's own writes do not
recurse; :class:`karpy.kube.interface.Filtered` handlers get only the events they want.
"""

from __future__ import annotations

import builtins
import collections
import random
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from karpy import clock as clock_mod
from karpy.kube import (
    errors,
    interface,
    memory_eviction,
    memory_gc,
    memory_objects,
    memory_share,
    memory_watch,
    selectors,
)

Key = memory_gc.Key
copy_obj = memory_objects.copy_obj
copy_dict = memory_objects.copy_dict
merge_patch = memory_objects.merge_patch
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet


CHECK_SHARED = False
"""Default of ``InMemoryCluster(check_shared=...)``; tests/conftest.py turns it on for the test suite."""


SharedObjectMutatedError = memory_objects.SharedObjectMutatedError


class InMemoryCluster:
    """A :class:`karpy.kube.interface.Cluster` kept in dicts; see the module docstring."""

    def __init__(
        self, clock: clock_mod.Clock, *, rng: random.Random | None = None, copy_reads: bool = False,
        graceful_pods: bool = False, check_shared: bool | None = None,
    ) -> None:
        self.clock = clock
        self.copy_reads = copy_reads
        self.check_shared = CHECK_SHARED if check_shared is None else check_shared
        """Catch callers that change stored objects in place (module docstring); slow, for tests."""
        self._seals = memory_objects.Seals(self.check_shared)
        self._stamp: tuple[float, str] = (float("nan"), "")
        self.sharing = memory_share.Sharing()
        """Equal parts of stored objects are stored once (:mod:`karpy.kube.memory_share`)."""
        self._specs: dict[str, Any] = {}
        """Controller uid -> the spec of the last Pod created for it (pods of one template share it)."""
        self.graceful_pods = graceful_pods
        """Deleted bound pods linger with a grace period until the kubelet confirms (module docstring)."""
        self.scanned = 0
        """Objects examined by ``list`` filters so far (to check that an index was used)."""
        self._rng = rng if rng is not None else random.Random(0)
        self._lock = threading.RLock()
        self._revision = 0
        self._objects: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        self._idx = memory_gc.Indexes()
        self._watches = memory_watch.Watches(self._lock)
        """Watch handlers and the notifications queued for them (:mod:`karpy.kube.memory_watch`)."""
        self._removed: collections.deque[dict[str, Any]] = collections.deque()

    # ------------------------------------------------------------------------------------ reads

    @property
    def revision(self) -> int:
        """The last resourceVersion handed out (the global write counter)."""
        return self._revision

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        with self._lock:
            return copy_dict(self._seals.check(self._require(kind, name, namespace)))

    def stored(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The stored ``kind`` object called ``name`` (shared, read-only, as ``list`` returns it), or None.

        A write replaces the stored object, never changes it: ``stored(...) is obj`` says ``obj`` is current.
        """
        with self._lock:
            found = self._lookup(kind, interface.scoped_namespace(kind, namespace), name)
            return None if found is None else self._seals.check(found)

    def list(
        self,
        kind: str,
        namespace: str = "",
        label_selector: interface.LabelSelectorArg = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        labels = selectors.label_query(label_selector)
        fields = selectors.field_query(field_selector)
        if fields is not None:
            fields.check(kind)
        namespace = namespace if interface.is_namespaced(kind) else ""
        out: list[dict[str, Any]] = []
        with self._lock:
            for obj in self._candidates(kind, namespace, fields):
                self.scanned += 1
                if namespace and obj["metadata"].get("namespace") != namespace:
                    continue
                if labels is not None and not labels.matches(obj["metadata"].get("labels")):
                    continue
                if fields is not None and not fields.matches(obj, kind):
                    continue
                out.append(obj)
        return [copy_dict(o) for o in out] if self.copy_reads else out

    def _candidates(
        self, kind: str, namespace: str, fields: selectors.FieldQuery | None
    ) -> Iterable[dict[str, Any]]:
        by_ns = self._objects.get(kind, {})
        if fields is not None:
            pinned_ns = fields.equals("metadata.namespace")
            if pinned_ns is not None:
                if namespace and pinned_ns != namespace:
                    return ()
                namespace = pinned_ns
            name = fields.equals("metadata.name")
            if name is not None:
                spaces = [namespace] if namespace or not interface.is_namespaced(kind) else list(by_ns)
                found = (by_ns.get(ns, {}).get(name) for ns in spaces)
                return [o for o in found if o is not None]
            node = fields.equals("spec.nodeName") if kind == "Pod" else None
            if node is not None:
                return self._idx.pods_on(node)
        if namespace:
            return list(by_ns.get(namespace, {}).values())
        return [o for objs in list(by_ns.values()) for o in list(objs.values())]

    def objects(self, kind: str) -> builtins.list[dict[str, Any]]:
        """Every stored ``kind`` object (shared, read-only), sorted by namespace and name."""
        with self._lock:
            by_ns = self._objects.get(kind, {})
            return [by_ns[ns][n] for ns in sorted(by_ns) for n in sorted(by_ns[ns])]

    def kinds(self) -> builtins.list[str]:
        with self._lock:
            return sorted(k for k, by_ns in self._objects.items() if any(by_ns.values()))

    def snapshot(self) -> dict[str, builtins.list[dict[str, Any]]]:
        """A private deep copy of everything, ``{kind: [objects sorted by namespace/name]}``."""
        with self._lock:
            return {kind: [copy_dict(o) for o in self.objects(kind)] for kind in self.kinds()}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every stored object (shared, read-only), kinds in sorted order."""
        for kind in self.kinds():
            yield from self.objects(kind)

    # ----------------------------------------------------------------------------------- writes

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            new = self._prepare_create(obj)
            self._commit(new, interface.ADDED)
            self._watches.drain()
            return new

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            old = self._for_write(obj)
            new = copy_dict(obj)
            new["apiVersion"] = obj.get("apiVersion") or old["apiVersion"]
            new["kind"] = old["kind"]
            new["metadata"] = dict(new.get("metadata") or {})
            memory_objects.restore_server_fields(old, new)
            result = self._replace(old, new)
            self._watches.drain()
            return result

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            old = self._for_write(obj)
            new = dict(old)
            new["metadata"] = dict(old["metadata"])
            if obj.get("status") is None:
                new.pop("status", None)
            else:
                new["status"] = copy_obj(obj["status"])
            result = self._replace(old, new)
            self._watches.drain()
            return result

    def patch(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        with self._lock:
            old = self._patch_target(kind, name, namespace, patch)
            body = {k: v for k, v in patch.items() if k not in ("status", "kind")}
            new: dict[str, Any] = merge_patch(old, body)
            new["metadata"] = dict(new.get("metadata") or {})
            if not new.get("apiVersion"):
                new["apiVersion"] = old["apiVersion"]
            memory_objects.restore_server_fields(old, new)
            result = self._replace(old, new)
            self._watches.drain()
            return result

    def patch_status(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str = ""
    ) -> dict[str, Any]:
        with self._lock:
            old = self._patch_target(kind, name, namespace, patch)
            new = dict(old)
            new["metadata"] = dict(old["metadata"])
            if "status" in patch:
                status = merge_patch(old.get("status"), patch["status"])
                if status is None:
                    new.pop("status", None)
                else:
                    new["status"] = status
            result = self._replace(old, new)
            self._watches.drain()
            return result

    def delete(self, kind: str, name: str, namespace: str = "", *, uid: str | None = None,
               grace_period_seconds: int | None = None) -> None:
        with self._lock:
            obj = self._require(kind, name, namespace)
            _check_uid(obj, uid)
            self._delete(obj, grace_period_seconds)
            self._collect_garbage()
            self._watches.drain()

    def evict(self, name: str, namespace: str, *, uid: str | None = None) -> None:
        with self._lock:
            pod = self._require("Pod", name, namespace)
            _check_uid(pod, uid)
            ns = pod["metadata"]["namespace"]
            budgets = list(self._objects.get("PodDisruptionBudget", {}).get(ns, {}).values())
            pdb = memory_eviction.check_eviction(pod, budgets)
            if pdb is not None:  # the API server spends the budget before it deletes the pod
                new = dict(pdb)
                new["metadata"] = dict(pdb["metadata"])
                new["status"] = memory_eviction.granted(pdb, name, self.clock.now())
                self._replace(pdb, new)  # type: ignore[arg-type]
            self._delete(pod)
            self._collect_garbage()
            self._watches.drain()

    def watch(self, kind: str, handler: interface.WatchHandler) -> interface.Unsubscribe:
        """As :meth:`karpy.kube.interface.Cluster.watch`; ``kind="*"`` watches every kind."""
        return self._watches.watch(kind, handler)

    # ---------------------------------------------------------------------------------- helpers

    def _lookup(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get(kind, {}).get(namespace, {}).get(name)

    def _require(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        ns = interface.scoped_namespace(kind, namespace)
        obj = self._lookup(kind, ns, name)
        if obj is None:
            where = f" in namespace {ns!r}" if ns else ""
            raise errors.NotFound(f'{kind} "{name}" not found{where}', kind=kind, name=name, namespace=ns)
        return obj

    def _lookup_key(self, key: Key) -> dict[str, Any] | None:
        return self._lookup(*key)

    def _for_write(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored object ``obj`` wants to replace, after its preconditions hold."""
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise errors.BadRequest("an object needs a metadata mapping")
        kind, ns, name = interface.meta_key(obj)
        old = self._seals.check(self._require(kind, name, ns))
        if obj is old or obj["metadata"] is old["metadata"]:
            raise SharedObjectMutatedError(
                f"{kind} {ns}/{name}: a stored object from list()/watch was passed back; copy it first"
            )
        memory_objects.check_preconditions(old, obj["metadata"])
        return old

    def _patch_target(self, kind: str, name: str, namespace: str, patch: Any) -> dict[str, Any]:
        if not isinstance(patch, dict):
            raise errors.BadRequest(f"a merge patch of {kind} {name!r} must be a mapping")
        old = self._seals.check(self._require(kind, name, namespace))
        meta = patch.get("metadata") or {}
        for field in ("name", "namespace"):
            if meta.get(field) is not None and meta[field] != old["metadata"].get(field, ""):
                raise errors.Invalid(f"{kind} {name!r}: metadata.{field} cannot be changed by a patch")
        memory_objects.check_preconditions(old, meta)
        return old

    def _prepare_create(self, obj: dict[str, Any]) -> dict[str, Any]:
        new, kind, ns = memory_objects.new_object(obj, self._specs)
        meta = new["metadata"]
        if ns:
            self._check_namespace_open(kind, ns)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.Invalid(f"{kind}: metadata.name or metadata.generateName is required", kind=kind)
            meta["name"] = self._generate_name(kind, ns, str(meta["generateName"]))
        name = memory_objects.check_new_name(kind, meta)
        if self._lookup(kind, ns, name) is not None:
            raise errors.AlreadyExists(f'{kind} "{name}" already exists', kind=kind, name=name, namespace=ns)
        memory_objects.stamp_new(new, memory_objects.uuid4_text(self._rng.getrandbits(128)), self._now_text())
        return new

    def _now_text(self) -> str:
        """``rfc3339(clock.now())``, one string per distinct time (many writes share a virtual second)."""
        now = self.clock.now()
        if now != self._stamp[0]:
            self._stamp = (now, clock_mod.rfc3339(now))
        return self._stamp[1]

    def _check_namespace_open(self, kind: str, namespace: str) -> None:
        ns_obj = self._lookup("Namespace", "", namespace)
        if ns_obj is not None and interface.is_terminating(ns_obj):
            raise errors.Forbidden(
                f"{kind} cannot be created in namespace {namespace!r} because it is being terminated",
                kind=kind,
                namespace=namespace,
            )

    def _generate_name(self, kind: str, namespace: str, prefix: str) -> str:
        prefix = prefix[:58]
        for _ in range(100):
            name = prefix + "".join(self._rng.choice(_SUFFIX_ALPHABET) for _ in range(5))
            if self._lookup(kind, namespace, name) is None:
                return name
        raise errors.AlreadyExists(f"{kind}: could not generate a free name from {prefix!r}", kind=kind)

    def _replace(self, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Store ``new`` over ``old`` (no-op when nothing changed); finish deletion if due."""
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old
        if new.get("spec") != old.get("spec"):
            new["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if interface.is_terminating(new) and not new["metadata"].get("finalizers") \
                and not memory_eviction.in_grace(new):
            self._remove(new)
            self._collect_garbage()
        else:
            self._commit(new, interface.MODIFIED)
        return new

    def _delete(self, obj: dict[str, Any], requested_grace: int | None = None) -> None:
        """Start (finalizers) or finish deleting ``obj``; a terminating object is left as is."""
        if interface.is_terminating(obj):
            return
        grace = memory_eviction.grace_period(obj, requested_grace) if self.graceful_pods else None
        if obj["metadata"].get("finalizers") or grace is not None:
            new = dict(obj)
            new["metadata"] = dict(obj["metadata"])
            new["metadata"]["deletionTimestamp"] = self._now_text()
            new["metadata"]["deletionGracePeriodSeconds"] = grace or 0
            self._commit(new, interface.MODIFIED)
        else:
            self._remove(obj)

    # ---------------------------------------------------------------------------- store + index

    def _commit(self, obj: dict[str, Any], event_type: str) -> None:
        kind, ns, name = interface.meta_key(obj)
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)
        old = self._lookup(kind, ns, name)
        self.sharing.compact(kind, obj, old)
        self._objects.setdefault(kind, {}).setdefault(ns, {})[name] = obj
        if old is not None:
            self._seals.unseal(old)
            self._idx.replace(old, obj)
        else:
            self._idx.add(obj)
        self._seals.seal(obj)
        self._watches.notify(kind, event_type, obj, old)

    def _remove(self, obj: dict[str, Any]) -> None:
        kind, ns, name = interface.meta_key(obj)
        stored = self._lookup(kind, ns, name)
        if stored is not None:
            self._seals.unseal(stored)
            self._idx.drop(stored)
            del self._objects[kind][ns][name]
        self._revision += 1
        final = dict(obj)
        final["metadata"] = dict(obj["metadata"])
        final["metadata"]["resourceVersion"] = str(self._revision)
        self._watches.notify(kind, interface.DELETED, final, None)
        self._removed.append(final)

    def verify_shared(self) -> None:
        """With ``check_shared``: raise :class:`SharedObjectMutatedError` if any stored object was changed."""
        with self._lock:
            self._seals.verify()

    # ------------------------------------------------------------------------ garbage collection

    def _collect_garbage(self) -> None:
        """Delete dependents of removed owners, breadth first, until nothing more goes away."""
        while self._removed:
            gone = self._removed.popleft()
            self._specs.pop(gone["metadata"].get("uid", ""), None)
            kind, _, name = interface.meta_key(gone)
            if kind == "Namespace":
                for content_key in self._namespace_contents(name):
                    content = self._lookup(*content_key)
                    if content is not None:
                        self._delete(content)
            for action, dep in memory_gc.collect(gone["metadata"]["uid"], self._idx, self._lookup_key):
                if action == memory_gc.DELETE:
                    self._delete(dep)
                else:
                    self._commit(dep, interface.MODIFIED)

    def _namespace_contents(self, namespace: str) -> builtins.list[Key]:
        return sorted(
            (kind, namespace, name)
            for kind, by_ns in self._objects.items()
            if interface.is_namespaced(kind)
            for name in by_ns.get(namespace, {})
        )

    def bind(self, name: str, namespace: str, node_name: str) -> dict[str, Any]:
        """The ``pods/binding`` subresource: ``spec.nodeName`` and ``PodScheduled=True`` in ONE write.

        One new resourceVersion and one MODIFIED watch event, as the API server's binding does.
        The condition goes first in ``status.conditions`` (replacing any PodScheduled one), its
        ``lastTransitionTime`` now on the cluster's clock. Raises NotFound if the pod is gone and
        Conflict if it is already bound or being deleted. Returns the stored pod (read-only).
        """
        with self._lock:
            old = self._seals.check(self._require("Pod", name, namespace))
            new = memory_objects.bound_pod(old, node_name, clock_mod.rfc3339(self.clock.now()))
            result = self._replace(old, new)
            self._watches.drain()
            return result


def new_cluster(clock: clock_mod.Clock, seed: int = 0) -> InMemoryCluster:
    """An empty cluster whose generated names and uids follow ``seed``."""
    return InMemoryCluster(clock, rng=random.Random(seed))


def _check_uid(obj: dict[str, Any], uid: str | None) -> None:
    """The ``deleteOptions.preconditions.uid`` check: Conflict when ``obj`` is another object of that name."""
    if uid is not None and obj["metadata"].get("uid") != uid:
        kind, ns, name = interface.meta_key(obj)
        raise errors.Conflict(
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {obj['metadata'].get('uid')}",
            kind=kind, name=name, namespace=ns)
