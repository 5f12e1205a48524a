"""An informer: one kind's objects cached from a list, kept current by a watch.

:class:`Informer` runs one daemon thread per kind. It lists (paginated) and then watches from the
list's ``resourceVersion`` with bookmarks; a watch that ends is resumed from the last version
seen; a 410 Gone (``too old resource version``) makes it list again, and the re-list is diffed
against the cache so every change in between is still reported (ADDED / MODIFIED / DELETED).

Lists are client-go's reflector's: the first with ``resourceVersion=0`` (served from the API
server's watch cache, not a quorum read from etcd), a re-list after a broken watch with
``resourceVersion=<last seen>&resourceVersionMatch=NotOlderThan`` (also from the cache), a re-list
after 410 from etcd (no resourceVersion); a server that refuses the version asked (410, 400, 504
"too large resource version") is asked again at once for a quorum list. Later pages of a paginated
list carry only the ``continue`` token.

A watch that sends nothing - no event, no bookmark (the API server sends one about every minute) -
for ``watch_read_timeout`` seconds is taken for a lost peer (a connection dropped without a FIN):
it is closed and the kind listed again, so a cache is never silently stale for longer than that.
:attr:`Informer.watch_timeouts` counts these.
Errors back off exponentially (capped) and never stop the thread; :attr:`last_error` keeps the
latest one. Optional server-side label / field selectors restrict what is cached.

What a caller may rely on:

* Reads (:meth:`get`, :meth:`items`, :meth:`pods_on`) are served from the cache, never from the
  network; the returned dicts are shared and must not be mutated.
* Every change is passed to ``sink(kind, event_type, obj)`` in the order the cache applied it;
  the sink is called on the informer thread (or on the writer's thread for
  :meth:`apply_local`) and must only enqueue - :class:`karpy.kube.adapter.KubeCluster` delivers
  to handlers on the thread that pumps.
* :meth:`apply_local` puts the answer of a successful write into the cache at once
  (read-your-writes). A watch event carrying the same or an older ``resourceVersion`` for that
  object is then dropped, so nothing is reported twice, and an object deleted locally is not
  brought back by a late event from before its deletion. (Versions are compared as integers
  when both are - etcd revisions, as every API server today hands out - else for equality only.)
* One object that cannot be read (a field of the wrong type, no name, a value the cache cannot
  hold) never fails its LIST page or watch: it is logged (naming kind, namespace/name and the
  field), counted (:attr:`Informer.decode_errors`, :data:`DECODE_ERRORS`) and skipped, and the
  rest of the page is kept.
* Objects are decoded with orjson; ``metadata.managedFields`` is dropped, list items get
  their ``kind`` / ``apiVersion`` (a list response leaves them out), and the cached copy is
  compacted by :mod:`karpy.kube.compact` (Pods projected to what karpy reads; equal parts
  shared between objects).
"""

from __future__ import annotations

import collections
import contextlib
import gc
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from karpy import clock as clock_mod
from karpy.kube import client as client_mod
from karpy.kube import compact, errors, fastdecode, interface, paths, readable

log = logging.getLogger("karpy.kube.informer")

Sink = Callable[[str, str, dict[str, Any]], None]
Key = tuple[str, str]

DECODE_ERRORS: collections.Counter[str] = collections.Counter()
"""Objects skipped because they could not be read, by kind, in this process (``karpy_decode_errors_total``)."""


class _Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


CACHED, NOT_OLDER, QUORUM = "cached", "not-older-than-last", "quorum"
"""How the next list asks for its resourceVersion (module docstring)."""


def newer(a: str, b: str) -> bool:
    """True when version ``a`` is known to come after ``b`` (integers), or differs (otherwise)."""
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return a != b


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def trim(obj: dict[str, Any], kind: str, api_version: str) -> dict[str, Any]:
    """What the cache keeps of a decoded object: no managedFields, kind and apiVersion set."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    if "kind" not in obj:
        obj["kind"] = kind
    if "apiVersion" not in obj:
        obj["apiVersion"] = api_version
    return obj


class Informer:
    """The cache and list/watch loop of one kind (module docstring)."""

    def __init__(
        self,
        client: client_mod.KubeClient,
        res: paths.Resource,
        sink: Sink,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        watch_read_timeout: float = 150.0,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        project_pods: bool = True,
        on_reject: Callable[[str, fastdecode.Rejected], None] | None = None,
    ) -> None:
        """``on_reject(kind, rejected)``: told of each object skipped as unreadable (after the log
        line and the count; on the informer thread; its exceptions are logged and ignored)."""
        self.client = client
        self.res = res
        self.kind = res.kind
        self.sink = sink
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.watch_read_timeout = watch_read_timeout
        self.watch_timeouts = 0
        """Watches ended because nothing arrived for ``watch_read_timeout`` seconds."""
        self._next_list = CACHED
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.lists = 0
        """How many times the kind was listed (1 + re-lists after 410 or errors)."""
        self.last_error: errors.KubeError | None = None
        self.decode_errors = 0
        """Objects skipped because they could not be read (module docstring)."""
        self.resource_version = ""
        self.compactor = compact.Compactor(project_pods=project_pods)
        self.on_reject = on_reject
        self._store: dict[Key, dict[str, Any]] = {}
        self._by_node: dict[str, dict[Key, dict[str, Any]]] = {}
        self._tombstones: dict[Key, str] = {}
        self._lock = threading.RLock()
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._stream: client_mod.Stream | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
            self._thread.start()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def stop(self, timeout: float = 2.0) -> None:
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout)

    # ---------------------------------------------------------------------------------- reads

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._store.get((namespace, name))

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._store.values())

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        """Cached pods whose ``spec.nodeName`` is ``node`` (``""``: unbound)."""
        with self._lock:
            return list(self._by_node.get(node, {}).values())

    def __len__(self) -> int:
        return len(self._store)

    # ---------------------------------------------------------------------------- cache edits

    def apply_local(self, event_type: str, obj: dict[str, Any]) -> None:
        """Put the answer of a successful write into the cache now (module docstring).

        ``obj`` becomes the cached object (compacted in place): pass a copy you do not keep."""
        self._apply(event_type, self.compactor.compact(obj, self.kind), local=True)

    def _key(self, obj: dict[str, Any]) -> Key:
        meta = obj.get("metadata") or {}
        ns = str(meta.get("namespace") or "") if self.res.namespaced else ""
        return ns, str(meta.get("name") or "")

    def _put(self, key: Key, obj: dict[str, Any] | None) -> None:
        old = self._store.get(key)
        if self.kind == "Pod" and old is not None:
            node = readable.node_name(old)
            bucket = self._by_node.get(node)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._by_node[node]
        if obj is None:
            if self._store.pop(key, None) is not None:
                self.compactor.departed += 1
            return
        self._store[key] = obj
        if self.kind == "Pod":
            node = readable.node_name(obj)
            self._by_node.setdefault(node, {})[key] = obj

    def _apply(self, event_type: str, obj: dict[str, Any], *, local: bool) -> None:
        key = self._key(obj)
        rv = _rv(obj)
        with self._lock:
            cur = self._store.get(key)
            if event_type == interface.DELETED:
                self._tombstones.pop(key, None)
                if cur is None or (not local and rv and newer(_rv(cur), rv)):
                    return
                if local:
                    self._tombstones[key] = rv
                self._put(key, None)
                self.sink(self.kind, interface.DELETED, obj)
                self._maybe_rebuild()
                return
            if cur is None:
                dead = self._tombstones.get(key)
                if dead is not None and not local and not newer(rv, dead):
                    return
                self._tombstones.pop(key, None)
            elif not newer(rv, _rv(cur)):
                return
            self._put(key, obj)
            self.sink(self.kind, interface.ADDED if cur is None else interface.MODIFIED, obj)

    def _replace(self, items: list[dict[str, Any]], list_rv: str) -> None:
        """A fresh list: report the differences to the cache, then hold exactly the list (plus
        what was written locally after the list was taken)."""
        with self._lock:
            seen: set[Key] = set()
            for obj in items:
                key = self._key(obj)
                seen.add(key)
                cur = self._store.get(key)
                if cur is not None and not newer(_rv(obj), _rv(cur)):
                    continue
                self._put(key, obj)
                self.sink(self.kind, interface.ADDED if cur is None else interface.MODIFIED, obj)
            for key in [k for k in self._store if k not in seen]:
                gone = self._store[key]
                if list_rv and newer(_rv(gone), list_rv):
                    continue  # created by a local write after this list was taken
                self._put(key, None)
                self.sink(self.kind, interface.DELETED, gone)
            self._tombstones.clear()
            self._maybe_rebuild(quiet=True)

    def _maybe_rebuild(self, *, quiet: bool = False) -> None:
        """Rebuild the sharing table when departed objects hold enough of it (:mod:`karpy.kube.compact`)."""
        with self._lock:
            if self.compactor.due(len(self._store), quiet=quiet):
                self.compactor.rebuild(list(self._store.values()), self.kind)

    # ------------------------------------------------------------------------------- the loop

    def _params(self) -> dict[str, str]:
        params: dict[str, str] = {}
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        return params

    def _run(self) -> None:
        failures = 0
        rv = ""
        while not self._stopping.is_set():
            try:
                if not rv:
                    rv = self._list()
                    self._synced.set()
                rv = self._watch(rv)
                failures = 0
            except _Gone:
                log.info("watch of %s expired (410 Gone); listing again", self.kind)
                self._next_list = QUORUM
                rv = ""
            except errors.Timeout as exc:
                if self._stopping.is_set():
                    return
                self.last_error = exc
                if rv:  # a watch quiet past its read timeout: the peer may be gone, list again
                    self.watch_timeouts += 1
                    log.warning("watch of %s sent nothing for %.0fs; listing again: %s", self.kind,
                                self.watch_read_timeout, exc.message)
                    rv = ""
                    continue
                failures += 1
                delay = min(self.backoff_cap, self.backoff_base * 2 ** min(failures, 10))
                log.warning("list of %s timed out (retry in %.1fs): %s", self.kind, delay, exc.message)
                self._stopping.wait(delay)
            except errors.KubeError as exc:
                if self._stopping.is_set():
                    return
                self.last_error = exc
                failures += 1
                delay = min(self.backoff_cap, self.backoff_base * 2 ** min(failures, 10))
                log.warning("list/watch of %s failed (retry in %.1fs): %s", self.kind, delay, exc.message)
                if isinstance(exc, (errors.NotFound, errors.BadRequest, errors.Gone)):
                    rv = ""
                self._stopping.wait(delay)

    def _list(self) -> str:
        mode = self._next_list
        if mode == NOT_OLDER and not self.resource_version:
            mode = CACHED
        try:
            rv = self._list_pages(mode)
        except errors.KubeError as exc:
            refused = isinstance(exc, (errors.Gone, errors.BadRequest)) or (
                exc.status == 504 and "resource version" in exc.message.lower()
            )
            if mode == QUORUM or not refused:
                raise
            log.info("LIST %s (%s) refused, listing from etcd: %s", self.kind, mode, exc.message)
            rv = self._list_pages(QUORUM)
        self._next_list = NOT_OLDER
        return rv

    def _list_pages(self, mode: str) -> str:
        path = paths.path(self.res)
        params = self._params()
        params["limit"] = str(self.page_size)
        if mode == CACHED:
            params["resourceVersion"] = "0"
        elif mode == NOT_OLDER:
            params["resourceVersion"] = self.resource_version
            params["resourceVersionMatch"] = "NotOlderThan"
        items: list[dict[str, Any]] = []
        rv = ""
        while True:
            with _gc_paused():
                meta, page = self.read_page(
                    self.client.request_bytes("GET", path, params=params, what=f"LIST {self.kind}", kind=self.kind)
                )
                items.extend(page)
            rv = str(meta.get("resourceVersion") or rv)
            token = meta.get("continue")
            if not token:
                break
            params["continue"] = str(token)
            params.pop("resourceVersion", None)  # a continued list names no version (the token holds it)
            params.pop("resourceVersionMatch", None)
        self.lists += 1
        self._replace(items, rv)
        self.resource_version = rv
        return rv

    @property
    def _typed_pods(self) -> bool:
        return self.kind == "Pod" and self.compactor.project_pods

    def read_page(self, body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A list page's metadata and its items as cached (decoded, trimmed, compacted): Pods
        through :mod:`karpy.kube.fastdecode`, anything else with orjson. An item that cannot be
        read is reported and left out (module docstring); only a page that is not a list object
        at all raises (:class:`karpy.kube.errors.InternalError`)."""
        meta, page, rejected = readable.decode_page(body, self.kind, typed_pods=self._typed_pods)
        for bad in rejected:
            self._reject(bad, "LIST")
        out = []
        for obj in page:
            kept = self._admit(obj, "LIST")
            if kept is not None:
                out.append(kept)
        return meta, out

    def _admit(self, obj: Any, how: str) -> dict[str, Any] | None:
        """``obj`` as cached, or ``None`` (reported) when it cannot be read or held."""
        problem = readable.problem(obj, self.kind)
        if problem:
            self._reject(readable.rejected(obj, problem), how)
            return None
        try:
            return self.compactor.compact(
                trim(obj, self.kind, self.res.api_version), self.kind, projected=self._typed_pods
            )
        except Exception as exc:  # a value the compactor cannot encode (an integer over 64 bits...)
            self._reject(readable.rejected(obj, f"{type(exc).__name__}: {exc}"), how)
            return None

    def _reject(self, bad: fastdecode.Rejected, how: str) -> None:
        self.decode_errors += 1
        DECODE_ERRORS[self.kind] += 1
        who = f"{bad.namespace}/{bad.name}" if bad.namespace else (bad.name or "(no readable name)")
        log.warning(
            "%s %s: skipped %s %s, which cannot be read: %s", how, self.kind, self.kind, who,
            client_mod.truncate(bad.reason),
            extra={"kind": self.kind, "object": who, "problem": client_mod.truncate(bad.reason)},
        )
        if self.on_reject is not None:
            try:
                self.on_reject(self.kind, bad)
            except Exception:  # reporting must never stop the watch
                log.exception("reporting the unreadable %s %s failed", self.kind, who)

    def _watch(self, rv: str) -> str:
        params = self._params()
        params.update(
            {
                "watch": "true",
                "resourceVersion": rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(self.watch_timeout_seconds),
            }
        )
        with self.client.stream(
            paths.path(self.res), params, what=f"WATCH {self.kind}", read_timeout=self.watch_read_timeout
        ) as stream:
            self._stream = stream
            try:
                for line in stream.lines():
                    if self._stopping.is_set():
                        break
                    rv = self._event(line, rv)
            finally:
                self._stream = None
        return rv

    def _event(self, line: bytes, rv: str) -> str:
        try:
            if self._typed_pods:
                event_type, obj = fastdecode.decode_pod_event(line)
            else:
                event = orjson.loads(line)
                event_type = str(event["type"])
                obj = event["object"]
        except fastdecode.RejectedObject as exc:
            self._reject(exc.rejected, f"WATCH {exc.event_type}")
            new_rv = exc.rejected.resource_version
            return new_rv if new_rv and newer(new_rv, rv) else rv
        except (orjson.JSONDecodeError, fastdecode.DecodeError, KeyError, TypeError) as exc:
            raise errors.InternalError(
                f"WATCH {self.kind}: undecodable event {client_mod.truncate(line)}", kind=self.kind
            ) from exc
        if event_type == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            code = code if isinstance(code, int) else 500
            if code == 410:
                raise _Gone()
            raise client_mod.error_from_response(code, orjson.dumps(obj), {}, f"WATCH {self.kind}", kind=self.kind)
        if event_type == "BOOKMARK":
            new_rv = _rv(obj) if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict) else ""
            self._maybe_rebuild(quiet=True)
            self.resource_version = new_rv or rv
            return new_rv or rv
        kept = self._admit(obj, f"WATCH {event_type}")
        if kept is None:
            return rv
        new_rv = _rv(kept)
        self._apply(event_type, kept, local=False)
        self.resource_version = new_rv or rv
        return new_rv or rv


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while one list page is decoded and compacted.

    Decoding a page allocates tens of thousands of dicts, each allocation counting towards a
    collection that walks the whole (growing, acyclic) cache; pausing for the page halves the
    time of a large list. Reference counting still frees everything as usual."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def monotonic() -> float:
    """The informers' and resync's notion of elapsed time (a monotonic counter)."""
    return clock_mod.perf_counter()
