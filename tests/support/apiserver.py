"""An emulated Kubernetes API server over real HTTP, for the adapter's tests (and ctrl's e2e).

kmock 0.8 (``kmock.KubernetesScaffold``) serves the HTTP side: an aiohttp server on
``127.0.0.1:0``, URL parsing into resource / namespace / name / subresource, API discovery,
``/version`` and ``Status`` error rendering. kmock's own ``KubernetesEmulator`` store cannot carry
what the adapter needs (its objects have no uid / resourceVersion / creationTimestamp, no
stale-write 409, no PUT, no eviction, no selectors, no status subresource, and its watch replays
every object instead of resuming from a resourceVersion, so there is no 410 either). So this
helper keeps the objects in karpy's :class:`karpy.kube.memory.InMemoryCluster`, which has the API
server's semantics (optimistic concurrency, generation, finalizers, deletionTimestamp, garbage
collection, the eviction subresource with PodDisruptionBudgets, label and field selectors), and
adds in small, separately tested pieces:

* watches resumed from ``resourceVersion`` out of an event history; 410 Gone (an ``ERROR``
  event, as the real server sends it) for a version older than the last :meth:`compact`;
  ``BOOKMARK`` events every ``bookmark_interval`` seconds; ``timeoutSeconds``; selectors (an
  object entering a watch's selection is ADDED, one leaving it DELETED);
* list pagination (``limit`` / ``continue``) with the list's ``resourceVersion``;
* PUT (update / ``/status``), PATCH with ``merge-patch+json`` and ``json-patch+json`` (a
  ``strategic-merge-patch+json`` is treated as a merge patch on built-in kinds and refused with
  415 on custom resources, as a real API server does), POST ``pods/<name>/eviction`` and
  ``pods/<name>/binding``;
* error responses as the real server's ``Status`` objects with ``Content-Type:
  application/json; charset=utf-8`` (aiohttp's default - the charset lightkube trips on);
* fault injection (:meth:`fail_next`: the next N matching requests answer 409 / 429 / 5xx) and
  :meth:`expire_watches` (end every open watch, as an API server restart does) and ``held``
  (open watches go quiet, as for a client cut off from the server).

Use::

    with EmulatedApiServer() as api:
        path = api.write_kubeconfig(tmp_path / "kubeconfig")
        api.store.create({...})   # direct writes are seen by watches too

It serves any number of concurrent clients and watches (one asyncio loop in one thread).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
import orjson
import yaml
from typing_extensions import override

from karpy import clock
from karpy.kube import errors, interface, memory, paths, selectors

from kmock._internal import parsing as _kmock_parsing  # isort: skip

_kmock_parse_path = _kmock_parsing.parse_path


def _parse_path(path: str) -> Any:
    """kmock's URL parsing, plus the Namespace resource itself: kmock reads ``/api/v1/namespaces``
    and ``/api/v1/namespaces/<name>`` as the (missing) rest of a namespaced path and fails; the API
    server serves the cluster-scoped ``namespaces`` collection and objects there."""
    parts = path.strip("/").split("/")
    if parts[:3] == ["api", "v1", "namespaces"] and (len(parts) <= 4 or parts[4] in ("status", "finalize")):
        name = parts[3] if len(parts) > 3 else None
        sub = parts[4] if len(parts) > 4 else None
        return _kmock_parsing.ParsedPath("", "v1", "namespaces", None, name, sub)
    return _kmock_parse_path(path)


_kmock_parsing.parse_path = _parse_path

_BUILTIN_GROUPS = frozenset({"", "apps", "batch", "policy", "storage.k8s.io", "coordination.k8s.io"})


@dataclass
class _Fault:
    status: int
    reason: str
    count: int
    method: str | None
    plural: str | None
    retry_after: float | None


@dataclass
class _Event:
    rv: int
    kind: str
    type: str
    obj: dict[str, Any]
    before: dict[str, Any] | None = None
    """The object's previous state (None for ADDED), to see it enter or leave a selector."""


def selected_event(event: _Event, wanted: Any) -> str | None:
    """The event type a selective watch sees: an object that starts matching is ADDED, one that
    stops matching is DELETED (as the API server's watch cache does); ``None`` when unseen."""
    now = wanted(event.obj)
    before = event.before is not None and wanted(event.before)
    if event.type == "DELETED":
        return "DELETED" if now else None
    if event.type == "ADDED" or not before:
        return "ADDED" if now else None
    return "MODIFIED" if now else "DELETED"


@dataclass
class Backend:
    """The emulated state behind the HTTP handler (see the module docstring)."""

    seed: int = 0
    bookmark_interval: float = 1.0
    history_limit: int = 20_000
    git_version: str = "v1.31.2"
    store: memory.InMemoryCluster = field(init=False)
    compacted_rv: int = 0
    watch_generation: int = 0
    open_watches: int = 0
    held: bool = False
    """While True, open watches send nothing (a client cut off from the server)."""
    faults: list[_Fault] = field(default_factory=list)
    requests: collections.Counter[str] = field(default_factory=collections.Counter)
    log: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    """``(method, plural, query parameters)`` of every object API request, in order."""

    def __post_init__(self) -> None:
        self.store = memory.InMemoryCluster(clock.WallClock(), rng=random.Random(self.seed))
        self._history: collections.deque[_Event] = collections.deque()
        self._last: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._history_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self.store.watch("*", self._record)

    # ------------------------------------------------------------------------------ history

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._changed = asyncio.Event()

    def _record(self, event_type: str, obj: dict[str, Any]) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        key = interface.meta_key(obj)
        with self._history_lock:
            before = self._last.pop(key, None) if event_type == "DELETED" else self._last.get(key)
            if event_type != "DELETED":
                self._last[key] = obj
            self._history.append(_Event(rv, str(obj["kind"]), event_type, obj, before))
            while len(self._history) > self.history_limit:
                self.compacted_rv = self._history.popleft().rv
        self._wake()

    def _wake(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._notify)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    def compact(self) -> int:
        """Forget the event history: a watch from any version up to now gets 410 Gone."""
        with self._history_lock:
            self._history.clear()
            self.compacted_rv = self.store.revision
        return self.compacted_rv

    def expire_watches(self) -> None:
        """End every open watch stream (clients resume, or re-list after a 410)."""
        self.watch_generation += 1
        self._wake()

    def events_after(self, rv: int) -> list[_Event]:
        with self._history_lock:
            return [e for e in self._history if e.rv > rv]

    # ------------------------------------------------------------------------------ routing

    def resolve(self, group: str, version: str, plural: str) -> paths.Resource:
        for res in paths.known_resources():
            if res.plural == plural and res.group == group and res.version == version:
                return res
        raise _HttpError(404, "NotFound", f"the server has no resource {group}/{version}/{plural}")

    def take_fault(self, method: str, plural: str) -> _Fault | None:
        for fault in self.faults:
            if fault.count > 0 and fault.method in (None, method) and fault.plural in (None, plural):
                fault.count -= 1
                if fault.count == 0:
                    self.faults.remove(fault)
                return fault
        return None


class _HttpError(Exception):
    def __init__(self, status: int, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


def _status_body(status: int, reason: str, message: str, retry_after: float | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure" if status >= 400 else "Success",
        "message": message,
        "reason": reason,
        "code": status,
    }
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": int(retry_after)}
    return body


def _error_response(err: _HttpError) -> aiohttp.web.Response:
    headers = {"Retry-After": str(int(err.retry_after))} if err.retry_after is not None else None
    return aiohttp.web.json_response(
        _status_body(err.status, err.reason, err.message, err.retry_after), status=err.status, headers=headers
    )


def _json(obj: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


@attrs.define(kw_only=True)
class Handler(kmock.KubernetesScaffold):
    """kmock's scaffold with the object API served from :class:`Backend`."""

    backend: Backend = attrs.field(factory=Backend)

    @override
    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        if res is None or not res.plural or res.version is None or res.group is None:
            return await super()._handle(request)
        try:
            return await self._serve(request, str(res.group), str(res.version), str(res.plural))
        except _HttpError as exc:
            return _error_response(exc)
        except errors.KubeError as exc:
            retry = getattr(exc, "retry_after_seconds", None)
            return _error_response(_HttpError(exc.status, exc.reason, exc.message, retry))

    async def _serve_server_version(self, request: kmock.Request) -> dict[str, Any]:
        major, minor = self.backend.git_version.lstrip("v").split(".")[:2]
        return {"major": major, "minor": minor, "gitVersion": self.backend.git_version, "platform": "linux/amd64"}

    async def _serve(self, request: kmock.Request, group: str, version: str, plural: str) -> aiohttp.web.StreamResponse:
        b = self.backend
        method = str(request.method.value).upper()
        b.requests[method] += 1
        b.log.append((method, plural, dict(request.params)))
        fault = b.take_fault(method, plural)
        if fault is not None:
            raise _HttpError(fault.status, fault.reason, "injected fault", fault.retry_after)
        res = b.resolve(group, version, plural)
        kind = res.kind
        ns = request.namespace or ""
        name = request.name or ""
        sub = request.subresource or ""
        params = request.params
        store = b.store
        if method == "GET" and params.get("watch") in ("true", "1"):
            return await self._watch(request, res, ns)
        if method == "GET" and name:
            return _json(store.get(kind, name, ns))
        if method == "GET":
            return self._list(res, ns, params)
        body = request.data if isinstance(request.data, dict) else None
        if method == "POST" and not name:
            if body is None:
                raise _HttpError(400, "BadRequest", "the body of a create must be a JSON object")
            return _json(store.create(self._object(body, res, ns)), 201)
        if method == "POST" and sub == "eviction" and kind == "Pod":
            options = (body or {}).get("deleteOptions") or {}
            store.evict(name, ns, uid=(options.get("preconditions") or {}).get("uid"))
            return _json(_status_body(201, "", ""), 201)
        if method == "POST" and sub == "binding" and kind == "Pod":
            target = (body or {}).get("target") or {}
            if (body or {}).get("kind") != "Binding" or target.get("kind") != "Node" or not target.get("name"):
                raise _HttpError(400, "BadRequest", "a binding must be a v1 Binding whose target is a Node by name")
            store.bind(name, ns, str(target["name"]))
            return _json(_status_body(201, "", ""), 201)
        if method == "PUT" and name:
            if body is None:
                raise _HttpError(400, "BadRequest", "the body of an update must be a JSON object")
            obj = self._object(body, res, ns)
            if (obj.get("metadata") or {}).get("name") != name:
                raise _HttpError(400, "BadRequest", "the name of the object does not match the name in the URL")
            return _json(store.update_status(obj) if sub == "status" else store.update(obj))
        if method == "PATCH" and name:
            return _json(self._patch(request, res, ns, name, sub))
        if method == "DELETE" and name:
            before = store.get(kind, name, ns)
            grace = (body or {}).get("gracePeriodSeconds")
            store.delete(kind, name, ns, uid=((body or {}).get("preconditions") or {}).get("uid"),
                         grace_period_seconds=None if grace is None else int(grace))
            try:
                return _json(store.get(kind, name, ns))
            except errors.NotFound:
                return _json(before)
        raise _HttpError(405, "MethodNotAllowed", f"{method} is not supported on {request.url.path}")

    @staticmethod
    def _object(body: dict[str, Any], res: paths.Resource, ns: str) -> dict[str, Any]:
        obj = dict(body)
        obj["kind"] = obj.get("kind") or res.kind
        obj["apiVersion"] = obj.get("apiVersion") or res.api_version
        if obj["kind"] != res.kind:
            raise _HttpError(400, "BadRequest", f"kind {obj['kind']} does not match the URL's {res.kind}")
        meta = dict(obj.get("metadata") or {})
        if res.namespaced and ns:
            if meta.get("namespace") not in (None, "", ns):
                raise _HttpError(400, "BadRequest", "the namespace of the object does not match the URL")
            meta["namespace"] = ns
        obj["metadata"] = meta
        return obj

    def _list(self, res: paths.Resource, ns: str, params: Any) -> aiohttp.web.Response:
        store = self.backend.store
        rv = store.revision
        items = sorted(
            store.list(res.kind, ns, params.get("labelSelector") or None, params.get("fieldSelector") or None),
            key=interface.meta_key,
        )
        start = int(params.get("continue") or 0)
        limit = int(params.get("limit") or 0)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and start + limit < len(items):
            meta["continue"] = str(start + limit)
        page = items[start : start + limit] if limit else items[start:]
        body = {"apiVersion": res.api_version, "kind": f"{res.kind}List", "metadata": meta, "items": page}
        return _json(body)

    def _patch(self, request: kmock.Request, res: paths.Resource, ns: str, name: str, sub: str) -> dict[str, Any]:
        store = self.backend.store
        ctype = str(request.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype == "application/strategic-merge-patch+json" and res.group not in _BUILTIN_GROUPS:
            raise _HttpError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml "
                f"({res.kind} is a custom resource)",
            )
        if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            patch = request.data
            if not isinstance(patch, dict):
                raise _HttpError(400, "BadRequest", "a merge patch must be a JSON object")
            if sub == "status":
                return store.patch_status(res.kind, name, patch, ns)
            return store.patch(res.kind, name, patch, ns)
        if ctype == "application/json-patch+json":
            current = store.get(res.kind, name, ns)
            try:
                patched = jsonpatch.apply_patch(current, orjson.loads(request.body))
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, ValueError) as exc:
                raise _HttpError(422, "Invalid", f"the JSON patch cannot be applied: {exc}") from exc
            meta = patched.setdefault("metadata", {})
            meta.setdefault("resourceVersion", current["metadata"]["resourceVersion"])
            return store.update_status(patched) if sub == "status" else store.update(patched)
        raise _HttpError(415, "UnsupportedMediaType", f"the emulator does not accept {ctype or 'no content type'}")

    async def _watch(self, request: kmock.Request, res: paths.Resource, ns: str) -> aiohttp.web.StreamResponse:
        b = self.backend
        params = request.params
        labels = selectors.label_query(params.get("labelSelector") or None)
        fields = selectors.field_query(params.get("fieldSelector") or None)
        if fields is not None:
            fields.check(res.kind)
        raw = request._raw_request
        assert raw is not None
        resp = aiohttp.web.StreamResponse(status=200)
        resp.content_type = "application/json"
        await resp.prepare(raw)
        generation = b.watch_generation
        timeout = float(params.get("timeoutSeconds") or 0)
        bookmarks = params.get("allowWatchBookmarks") == "true"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout > 0 else None
        start = str(params.get("resourceVersion") or "")

        def wanted(obj: dict[str, Any]) -> bool:
            meta = obj.get("metadata") or {}
            if ns and meta.get("namespace") != ns:
                return False
            if labels is not None and not labels.matches(meta.get("labels")):
                return False
            return fields is None or fields.matches(obj, res.kind)

        async def send(event_type: str, obj: dict[str, Any]) -> None:
            await resp.write(orjson.dumps({"type": event_type, "object": obj}) + b"\n")

        b.open_watches += 1
        try:
            if start in ("", "0"):
                cursor = b.store.revision
                for obj in b.store.list(res.kind, ns):
                    if wanted(obj):
                        await send("ADDED", obj)
            else:
                cursor = int(start) if start.isdigit() else 0
                if cursor < b.compacted_rv:
                    await send(
                        "ERROR",
                        _status_body(410, "Expired", f"too old resource version: {cursor} ({b.compacted_rv})"),
                    )
                    return resp
            next_bookmark = loop.time() + b.bookmark_interval
            while b.watch_generation == generation:
                changed = b._changed
                for event in () if b.held else b.events_after(cursor):
                    cursor = event.rv
                    seen_as = selected_event(event, wanted) if event.kind == res.kind else None
                    if seen_as is not None:
                        await send(seen_as, event.obj)
                now = loop.time()
                if deadline is not None and now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    await send("BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version,
                                            "metadata": {"resourceVersion": str(cursor)}})
                    next_bookmark = now + b.bookmark_interval
                wait = next_bookmark - now
                if deadline is not None:
                    wait = min(wait, deadline - now)
                if changed is not None and (b.held or not b.events_after(cursor)):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), timeout=max(0.01, wait))
        except ConnectionResetError:
            return resp
        finally:
            b.open_watches -= 1
        return resp


class EmulatedApiServer:
    """The emulator in a background thread: ``start()`` / ``stop()`` or a ``with`` block."""

    def __init__(self, *, seed: int = 0, bookmark_interval: float = 1.0, git_version: str = "v1.31.2") -> None:
        self.backend = Backend(seed=seed, bookmark_interval=bookmark_interval, git_version=git_version)
        self.url = ""
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._failure: BaseException | None = None

    @property
    def store(self) -> memory.InMemoryCluster:
        """The objects; writes here are served and watched like writes over HTTP."""
        return self.backend.store

    def start(self) -> EmulatedApiServer:
        self._thread = threading.Thread(target=self._run, name="emulated-apiserver", daemon=True)
        self._thread.start()
        if not self._started.wait(20):
            raise RuntimeError("the emulated API server did not start within 20s")
        if self._failure is not None:
            raise RuntimeError(f"the emulated API server failed to start: {self._failure!r}")
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by start()
            self._failure = exc
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.backend.bind(self._loop)
        async with Handler(backend=self.backend) as handler, kmock.Server(handler, host="127.0.0.1") as server:
            self.url = f"http://127.0.0.1:{server.port}"
            self._started.set()
            await self._stop.wait()
            self.backend.expire_watches()
            await asyncio.sleep(0.05)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(20)

    def __enter__(self) -> EmulatedApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        """A kubeconfig file whose current context points at this server."""
        target = Path(path)
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "emulator", "user": {"token": "emulator-token"}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace}}
            ],
            "current-context": "emulator",
        }
        target.write_text(yaml.safe_dump(doc, sort_keys=False))
        return target

    def compact(self) -> int:
        return self.backend.compact()

    def expire_watches(self) -> None:
        self.backend.expire_watches()

    def fail_next(
        self,
        status: int,
        *,
        count: int = 1,
        reason: str = "",
        method: str | None = None,
        plural: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """The next ``count`` requests matching ``method`` / ``plural`` answer ``status``."""
        default = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
        self.backend.faults.append(
            _Fault(status, reason or default.get(status, "Failure"), count, method, plural, retry_after)
        )
