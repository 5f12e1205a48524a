"""``KubeCluster``: the :class:`karpy.kube.interface.Cluster` contract over a real API server.

Reads come from informer caches (:mod:`karpy.kube.informer`), one per kind, started by
:meth:`KubeCluster.start` or :meth:`KubeCluster.watch` (the *required* kinds, whose first lists
:meth:`KubeCluster.has_synced` - ``/readyz`` - waits for) or in the background on first use. A read
of a cache without its first list raises :class:`karpy.kube.errors.NotSynced` (retry later) at
once on the thread that pumps events - the driver, which must never block - and waits up to
``sync_timeout`` on other threads. After a write met 409 Conflict, the next ``get`` of that object
is a GET (the cache is behind). Events and Leases are read from the API; Leases through
``lease_client`` when given (leader election's own budget). Writes: ``create`` POST, ``update``
PUT, ``update_status`` PUT of ``/status``, ``patch`` / ``patch_status`` JSON merge patches (never
strategic merge: 415 on custom resources), ``delete`` DELETE with background propagation,
``evict`` a policy/v1 ``Eviction`` (429 when a PodDisruptionBudget forbids it), ``bind`` a POST of a
v1 ``Binding`` to the pod's ``binding`` subresource (bodies: :mod:`karpy.kube.request_bodies`). An ``update``
without ``metadata.resourceVersion`` is unconditional, so its 409 is retried after a re-read (three
times); with one, the Conflict goes to the caller.

Threading contract:

* Informer threads never call handlers. Every change they see (and every change a successful
  write makes) is queued; handlers registered with :meth:`KubeCluster.watch` are called in queue
  order only on the thread that calls :meth:`KubeCluster.pump`. A handler may write; the
  resulting events are delivered by the same or the next ``pump``.
* Read-your-writes: a successful write's answer is in the cache at once; the watch event for that
  version (or an older one) is not delivered a second time.
* Reads and writes may be called from any thread. A handler registered on a filled cache is not
  told about the objects already there; list them at start.

Cached Pods are projected (:mod:`karpy.kube.compact`), so ``update`` of a Pod is refused with
``BadRequest`` (``patch`` works) unless ``project_pods=False``. Every error is a
:mod:`karpy.kube.errors` class with ``retryable``; nothing from lightkube or httpx2 escapes.
"""

from __future__ import annotations

import builtins
import collections
import threading
from collections.abc import Mapping
from typing import Any

from karpy.kube import cache_metrics, errors, informer, interface, memory, paths, request_bodies, selectors
from karpy.kube import client as client_mod

UNCACHED_KINDS = frozenset({"Event", "Lease", "CapacityBuffer", "Service"})
"""Read from the API, not a cache: Events, Leases (leader election reads its one Lease with a GET, as
client-go does; Karpenter's RBAC grants get/watch on it in one namespace, not a cluster-wide list), and
CapacityBuffers (listed every 30 s by :mod:`karpy.controllers.capacitybuffer` when the CapacityBuffer gate is
on; their CRD is often not installed, and an informer would retry a 404 every 30 s for ever, as the
real-cluster suite showed), and Services (the AWS provider reads ``kube-system/kube-dns`` once at start,
with a get-only rule on that one name, as Karpenter)."""
CONFLICT_RETRIES = 3


class KubeCluster:
    """A :class:`karpy.kube.interface.Cluster` over an API server; see the module docstring."""

    def __init__(
        self,
        client: client_mod.KubeClient,
        *,
        sync_timeout: float = 60.0,
        resync_seconds: float = 10 * 3600.0,
        server_selectors: Mapping[str, tuple[str | None, str | None]] | None = None,
        watch_timeout_seconds: int = 300,
        watch_read_timeout: float = 150.0,
        project_pods: bool = True,
        lease_client: client_mod.KubeClient | None = None,
    ) -> None:
        """``server_selectors``: ``{kind: (label_selector, field_selector)}`` applied server-side
        to that kind's informer, so its cache (and every read of the kind) holds only matches.
        ``lease_client``: the client for Leases (leader election) - its own rate limit and
        connections, so a busy controller never delays a renewal (default: ``client``)."""
        self.client = client
        self.lease_client = lease_client
        self.sync_timeout = sync_timeout
        self.resync_seconds = resync_seconds
        self.watch_timeout_seconds = watch_timeout_seconds
        self.watch_read_timeout = watch_read_timeout
        self.project_pods = project_pods
        self._server_selectors = dict(server_selectors or {})
        self._informers: dict[str, informer.Informer] = {}
        self._required: set[str] = set()
        self._stale: set[tuple[str, str, str]] = set()  # a write met 409 Conflict: the next get is a GET
        self._unreadable = cache_metrics.UnreadableReporter(self)
        self._pump_thread: int | None = None
        self._handlers: dict[str, list[interface.WatchHandler]] = {}
        self._queue: collections.deque[tuple[str, str, dict[str, Any]]] = collections.deque()
        self._ready = threading.Condition()
        self._lock = threading.RLock()
        self._last_resync = informer.monotonic()

    # ------------------------------------------------------------------------------ lifecycle

    def start(self, kinds: builtins.list[str] | tuple[str, ...] = (), *, required: bool = True) -> None:
        """Start the informers of ``kinds`` now (others start on first use); ``required``: for readiness."""
        for kind in kinds:
            if required:
                self._required.add(kind)
            self._informer(kind, wait=False)

    def has_synced(self) -> bool:
        """True once every required informer (started by :meth:`start` or :meth:`watch`) has its first list."""
        with self._lock:
            required = [self._informers.get(kind) for kind in self._required]
        return all(inf is not None and inf.synced for inf in required)

    def unsynced(self) -> builtins.list[str]:
        """The required kinds whose cache has no first list yet (for ``/readyz`` and logs)."""
        with self._lock:
            return sorted(k for k in self._required if not (k in self._informers and self._informers[k].synced))

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """True once every started informer has its first list."""
        with self._lock:
            started = list(self._informers.values())
        return all(inf.wait_for_sync(timeout) for inf in started)

    def close(self) -> None:
        with self._lock:
            started = list(self._informers.values())
            self._informers.clear()
        for inf in started:
            inf.stop()
        self.client.close()
        if self.lease_client is not None:
            self.lease_client.close()

    def metrics_collector(self) -> Any:
        """The caches' Prometheus collector (:mod:`karpy.kube.cache_metrics`)."""
        return cache_metrics.CacheCollector(self.informers)

    def informers(self) -> dict[str, informer.Informer]:
        """The started informers by kind (a copy)."""
        with self._lock:
            return dict(self._informers)

    def informer_of(self, kind: str) -> informer.Informer | None:
        return self._informers.get(kind)  # the started informer of ``kind``, if any

    def server_version(self) -> str:
        """The server's Kubernetes ``major.minor`` (``"1.29"``; EKS's ``"29+"`` loses the ``+``)."""
        return self.client.kubernetes_version()

    # ------------------------------------------------------------------------------- events

    def _sink(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        if kind in self._handlers or "*" in self._handlers:
            with self._ready:
                self._queue.append((kind, event_type, obj))
                self._ready.notify_all()

    def pump(self, timeout: float = 0.0, max_events: int = 100_000) -> int:
        """Deliver queued events to handlers on this thread; wait up to ``timeout`` for the first.

        Returns how many events were delivered. A handler's exception is re-raised after the
        other events of this pump were delivered.
        """
        self._pump_thread = threading.get_ident()
        self._maybe_resync()
        with self._ready:
            if not self._queue and timeout > 0:
                self._ready.wait(timeout)
        delivered = 0
        failure: BaseException | None = None
        while delivered < max_events:
            try:
                kind, event_type, obj = self._queue.popleft()
            except IndexError:
                break
            for handler in (*self._handlers.get(kind, ()), *self._handlers.get("*", ())):
                try:
                    handler(event_type, obj)
                except Exception as exc:
                    if failure is None:
                        failure = exc
            delivered += 1
        if failure is not None:
            raise failure
        return delivered

    @property
    def pending_events(self) -> int:
        return len(self._queue)

    def _maybe_resync(self) -> None:
        if self.resync_seconds <= 0:
            return
        now = informer.monotonic()
        if now - self._last_resync < self.resync_seconds:
            return
        self._last_resync = now
        for kind, inf in list(self._informers.items()):
            if kind in self._handlers:
                for obj in inf.items():
                    self._sink(kind, interface.MODIFIED, obj)

    def watch(self, kind: str, handler: interface.WatchHandler) -> interface.Unsubscribe:
        with self._lock:
            self._handlers.setdefault(kind, []).append(handler)
        if kind != "*" and kind not in UNCACHED_KINDS:
            with self._lock:
                self._required.add(kind)
            self._informer(kind, wait=False)

        def unsubscribe() -> None:
            with self._lock:
                handlers = self._handlers.get(kind, [])
                if handler in handlers:
                    handlers.remove(handler)
                if not handlers:
                    self._handlers.pop(kind, None)

        return unsubscribe

    # -------------------------------------------------------------------------------- reads

    def _informer(self, kind: str, *, wait: bool = True, api_version: str = "") -> informer.Informer:
        with self._lock:
            inf = self._informers.get(kind)
            if inf is None:
                label, field = self._server_selectors.get(kind, (None, None))
                inf = informer.Informer(
                    self.client,
                    paths.resource_for(kind, api_version),
                    self._sink,
                    label_selector=label,
                    field_selector=field,
                    watch_timeout_seconds=self.watch_timeout_seconds,
                    watch_read_timeout=self.watch_read_timeout,
                    project_pods=self.project_pods,
                    on_reject=self._unreadable,
                )
                self._informers[kind] = inf
                inf.start()
        if wait and not inf.synced and threading.get_ident() == self._pump_thread:
            cause = inf.last_error
            raise errors.NotSynced(
                f"cache of {kind} has no first list yet; retry later"
                + (f" (last error: {cause.message})" if cause is not None else ""),
                kind=kind,
            )
        if wait and not inf.wait_for_sync(self.sync_timeout):
            cause = inf.last_error
            if cause is not None and not cause.retryable:
                raise type(cause)(f"cache of {kind} not synced: {cause.message}", kind=kind)
            raise errors.Unavailable(
                f"cache of {kind} not synced after {self.sync_timeout:.0f}s"
                + (f": {cause.message}" if cause is not None else ""),
                kind=kind,
            )
        return inf

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        ns = interface.scoped_namespace(kind, namespace)
        if kind in UNCACHED_KINDS:
            res = paths.resource_for(kind)
            return self._send("GET", res, ns, name, what=f"GET {kind} {_ref(ns, name)}")
        if (kind, ns, name) in self._stale:
            return self._fresh(kind, ns, name)
        obj = self._informer(kind).get(ns, name)
        if obj is None:
            where = f" in namespace {ns!r}" if ns else ""
            raise errors.NotFound(f'{kind} "{name}" not found{where}', kind=kind, name=name, namespace=ns)
        return memory.copy_dict(obj)

    def _fresh(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        """After a 409 the cache is behind the server: read the object with a GET, and cache it."""
        res = paths.resource_for(kind)
        inf = self._informers.get(kind)
        try:
            data = self._send("GET", res, ns, name, what=f"GET {kind} {_ref(ns, name)} (after a conflict)")
        except errors.NotFound:
            self._stale.discard((kind, ns, name))
            if inf is not None and (last := inf.get(ns, name)) is not None:
                inf.apply_local(interface.DELETED, last)
            raise
        self._stale.discard((kind, ns, name))
        return self._stored(kind, interface.MODIFIED, data, res)

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
        if kind in UNCACHED_KINDS:
            return self._list_from_api(kind, namespace, labels, field_selector)
        inf = self._informer(kind)
        node = fields.equals("spec.nodeName") if fields is not None and kind == "Pod" else None
        candidates = inf.pods_on(node) if node is not None else inf.items()
        out: list[dict[str, Any]] = []
        for obj in candidates:
            meta = obj.get("metadata") or {}
            if namespace and meta.get("namespace") != namespace:
                continue
            if labels is not None and not labels.matches(meta.get("labels")):
                continue
            if fields is not None and not fields.matches(obj, kind):
                continue
            out.append(obj)
        return out

    def _list_from_api(
        self, kind: str, namespace: str, labels: selectors.LabelQuery | None, field_selector: str | None
    ) -> builtins.list[dict[str, Any]]:
        res = paths.resource_for(kind)
        params: dict[str, str] = {}
        if labels is not None:
            params["labelSelector"] = str(labels)
        if field_selector:
            params["fieldSelector"] = field_selector
        data = self.client.request("GET", paths.path(res, namespace), params=params, what=f"LIST {kind}", kind=kind)
        return [informer.trim(o, kind, res.api_version) for o in (data or {}).get("items") or ()]

    # ------------------------------------------------------------------------------- writes

    def _send(
        self,
        method: str,
        res: paths.Resource,
        namespace: str,
        name: str = "",
        subresource: str = "",
        *,
        body: Any = None,
        content_type: str = client_mod.JSON,
        what: str = "",
        retry: bool = True,
    ) -> dict[str, Any]:
        sender = self.lease_client if res.kind == "Lease" and self.lease_client is not None else self.client
        try:
            data = sender.request(
                method, paths.path(res, namespace, name, subresource), body=body, content_type=content_type,
                what=what, retry=retry, kind=res.kind, name=name, namespace=namespace,
            )
        except errors.Conflict:
            if method != "GET" and name:
                self._stale.add((res.kind, namespace, name))
            raise
        if not isinstance(data, dict):
            raise errors.InternalError(f"{what}: expected an object, found {client_mod.truncate(repr(data))}")
        return data

    def _stored(self, kind: str, event_type: str, data: dict[str, Any], res: paths.Resource) -> dict[str, Any]:
        """Put a write's answer into the cache (read-your-writes); the caller gets its own copy."""
        obj = informer.trim(data, kind, res.api_version)
        result = memory.copy_dict(obj)
        inf = self._informers.get(kind)
        if inf is not None:
            if interface.is_terminating(obj) and not (obj.get("metadata") or {}).get("finalizers"):
                event_type = interface.DELETED  # the last finalizer went: the server removed it
            inf.apply_local(event_type, obj)
        return result

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(obj, dict) or not obj.get("kind"):
            raise errors.Invalid("an object needs a kind")
        kind = str(obj["kind"])
        res = paths.resource_for(kind, str(obj.get("apiVersion") or ""))
        if not res.api_version:
            raise errors.Invalid(f"{kind}: apiVersion is required for a custom kind", kind=kind)
        meta = dict(obj.get("metadata") or {})
        ns = interface.scoped_namespace(kind, meta.get("namespace"))
        if ns:
            meta["namespace"] = ns
        body = {**obj, "apiVersion": obj.get("apiVersion") or res.api_version, "metadata": meta}
        name = str(meta.get("name") or meta.get("generateName") or "")
        data = self._send("POST", res, ns, body=body, what=f"CREATE {kind} {_ref(ns, name)}")
        return self._stored(kind, interface.ADDED, data, res)

    def _put(self, obj: dict[str, Any], subresource: str) -> dict[str, Any]:
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise errors.BadRequest("an object needs a metadata mapping")
        kind, ns, name = interface.meta_key(obj)
        res = paths.resource_for(kind, str(obj.get("apiVersion") or ""))
        body = {**obj, "apiVersion": obj.get("apiVersion") or res.api_version}
        unconditional = not obj["metadata"].get("resourceVersion")
        verb = "UPDATE" if not subresource else "UPDATE STATUS"
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                data = self._send("PUT", res, ns, name, subresource, body=body, what=f"{verb} {kind} {_ref(ns, name)}")
                return self._stored(kind, interface.MODIFIED, data, res)
            except errors.Conflict:
                if not unconditional or attempt == CONFLICT_RETRIES:
                    raise
                fresh = self._send("GET", res, ns, name, what=f"GET {kind} {_ref(ns, name)}")
                rv = (fresh.get("metadata") or {}).get("resourceVersion")
                body = {**body, "metadata": {**obj["metadata"], "resourceVersion": rv}}
        raise AssertionError("unreachable")  # pragma: no cover

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "Pod" and self.project_pods:
            raise errors.BadRequest(
                "Pods are cached without the fields karpy never reads (karpy.kube.compact); "
                "an update would drop them on the server - change a Pod with patch()",
                kind="Pod",
                name=interface.name_of(obj),
                namespace=interface.namespace_of(obj),
            )
        return self._put(obj, "")

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._put(obj, "status")

    def _patch(self, kind: str, name: str, body: dict[str, Any], namespace: str, subresource: str) -> dict[str, Any]:
        ns = interface.scoped_namespace(kind, namespace)
        res = paths.resource_for(kind)
        inf = self._informers.get(kind)
        if res.api_version == "" and inf is not None:  # pragma: no cover - custom kinds carry theirs
            res = inf.res
        data = self._send(
            "PATCH",
            res,
            ns,
            name,
            subresource,
            body=body,
            content_type=client_mod.MERGE_PATCH,
            what=f"PATCH {kind} {_ref(ns, name)}{'/' + subresource if subresource else ''}",
        )
        return self._stored(kind, interface.MODIFIED, data, res)

    def patch(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        if not isinstance(patch, dict):
            raise errors.BadRequest(f"a merge patch of {kind} {name!r} must be a mapping")
        body = {k: v for k, v in patch.items() if k not in ("status", "kind")}
        return self._patch(kind, name, body, namespace, "")

    def patch_status(self, kind: str, name: str, patch: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        if not isinstance(patch, dict):
            raise errors.BadRequest(f"a merge patch of {kind} {name!r} must be a mapping")
        body: dict[str, Any] = {}
        rv = (patch.get("metadata") or {}).get("resourceVersion")
        if rv:
            body["metadata"] = {"resourceVersion": rv}
        if "status" in patch:
            body["status"] = patch["status"]
        return self._patch(kind, name, body, namespace, "status")

    def delete(self, kind: str, name: str, namespace: str = "", *, uid: str | None = None,
               grace_period_seconds: int | None = None) -> None:
        ns = interface.scoped_namespace(kind, namespace)
        res = paths.resource_for(kind)
        data = self._send(
            "DELETE",
            res,
            ns,
            name,
            body=request_bodies.delete_body(uid=uid, grace_period_seconds=grace_period_seconds),
            what=f"DELETE {kind} {_ref(ns, name)}",
        )
        self._after_delete(kind, ns, name, data, res)

    def _after_delete(self, kind: str, ns: str, name: str, data: dict[str, Any], res: paths.Resource) -> None:
        inf = self._informers.get(kind)
        if inf is None:
            return
        if data.get("kind") == kind and interface.is_terminating(data) and (data.get("metadata") or {}).get(
            "finalizers"
        ):
            inf.apply_local(interface.MODIFIED, informer.trim(data, kind, res.api_version))
            return
        last = data if data.get("kind") == kind else inf.get(ns, name)
        if last is not None:
            inf.apply_local(interface.DELETED, informer.trim(last, kind, res.api_version))

    def evict(self, name: str, namespace: str, *, uid: str | None = None) -> None:
        ns = interface.scoped_namespace("Pod", namespace)
        res = paths.resource_for("Pod")
        body = request_bodies.eviction(name, ns, uid=uid)
        # No read-back: the answer is a Status, and the pod's deletion reaches the cache through the watch
        # (client-go's eviction does not read back either); callers that must not evict twice remember it
        # (karpy.controllers.termination). A GET per eviction was a sixth of karpy's API requests in a drain.
        self._send("POST", res, ns, name, "eviction", body=body, what=f"EVICT Pod {ns}/{name}", retry=False)

    def bind(self, name: str, namespace: str, node_name: str) -> dict[str, Any]:
        ns = interface.scoped_namespace("Pod", namespace)
        res = paths.resource_for("Pod")
        body = request_bodies.binding(name, ns, node_name)
        self._send("POST", res, ns, name, "binding", body=body, what=f"BIND Pod {ns}/{name} to node {node_name}")
        # the server answers a binding with a Status: the bound pod is read back (and cached at once)
        fresh = self._send("GET", res, ns, name, what=f"GET Pod {ns}/{name}")
        return self._stored("Pod", interface.MODIFIED, fresh, res)


def _ref(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name

