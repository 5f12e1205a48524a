"""What an informer cache keeps of an object, kept small enough for 100,000 pods.

Two measures, both applied by :func:`Compactor.compact` to every object before it is cached:

* **Projection** (Pods only, :func:`project_pod`). A Pod keeps its whole ``metadata`` (less
  ``managedFields`` and the ``kubectl.kubernetes.io/last-applied-configuration`` annotation) and
  ``spec`` except what karpy never reads: of each container only ``name``, ``image``,
  ``resources``, ``ports`` and ``restartPolicy`` (probes, env, commands, mounts... go), and of the
  volumes only those backed by a claim (``persistentVolumeClaim``, ``ephemeral``) or ``emptyDir``.
  Its ``status`` keeps everything but the container statuses and pod IPs. A cached Pod is
  therefore partial: :class:`karpy.kube.adapter.KubeCluster` refuses to ``update`` a Pod
  (a PUT would drop the projected fields on the server) - change Pods with ``patch``.
* **Sharing**. Pods of one ReplicaSet repeat most of their content. Label and annotation maps,
  owner references, container entries, tolerations, affinity, conditions and every other
  sub-object listed in :data:`SHARED_FIELDS` for the kind are looked up by their JSON encoding in
  a table and replaced by the one equal object already cached; common strings (namespace,
  nodeName, phase, timestamps...) are interned the same way. This is safe because cached objects are
  read-only by contract (callers copy before changing), and it is what keeps the cache near
  2 KB a pod.

The table holds what it has shared, also after the objects holding it left the cache, so it is
rebuilt generationally: :meth:`Compactor.rebuild` starts empty tables and shares again the parts
of the objects still cached (the informer's), dropping everything only departed objects held.
:meth:`Compactor.due` says when: the table grew past twice its size after the last rebuild plus
:data:`REBUILD_SLACK` entries, or (``quiet``: the watch has nothing else to do, at a bookmark)
at least :data:`REBUILD_AFTER_DELETES` objects, or a tenth of the cache, left since. A rebuild
costs one encoding of each cached object's shared parts, so its amortised cost per insertion is
constant.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
CONTAINER_FIELDS = ("name", "image", "resources", "ports", "restartPolicy")
KEPT_VOLUME_SOURCES = ("persistentVolumeClaim", "ephemeral", "emptyDir")
DROPPED_POD_STATUS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses", "podIPs",
                      "hostIPs", "podIP", "resize", "resourceClaimStatuses")
_COMMON_META = ("labels", "annotations", "ownerReferences", "finalizers")
SHARED_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "Pod": {
        "metadata": _COMMON_META,
        "spec": ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "securityContext",
                 "overhead", "readinessGates", "volumes", "containers", "initContainers"),
        "status": ("conditions",),
    },
    # a Node's labels, conditions, addresses and nodeInfo are its own: sharing them would only
    # add their JSON to the table
    "Node": {"metadata": ("annotations", "finalizers"), "spec": ("taints",),
             "status": ("capacity", "allocatable", "daemonEndpoints")},
}
"""Per kind, the sub-objects worth sharing; other kinds share their metadata maps only."""
DEFAULT_SHARED_FIELDS: dict[str, tuple[str, ...]] = {"metadata": _COMMON_META}
REBUILD_SLACK = 1024
"""Table entries allowed beyond twice the size after the last rebuild before one is due at once."""
REBUILD_AFTER_DELETES = 64
"""Departures (at least; or a tenth of the cache) after which a quiet moment rebuilds the table."""
SHARED_STRINGS = {
    "metadata": ("namespace", "generateName", "creationTimestamp"),
    "spec": ("nodeName", "schedulerName", "priorityClassName", "serviceAccountName", "serviceAccount",
             "restartPolicy", "dnsPolicy", "preemptionPolicy"),
    "status": ("phase", "qosClass", "hostIP", "startTime"),
}


def project_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """Drop in place what karpy never reads of a Pod (module docstring); returns ``pod``."""
    spec = pod.get("spec")
    if isinstance(spec, dict):
        for field in ("containers", "initContainers"):
            containers = spec.get(field)
            if isinstance(containers, list):
                spec[field] = [
                    {k: c[k] for k in CONTAINER_FIELDS if k in c} if isinstance(c, dict) else c for c in containers
                ]
        volumes = spec.get("volumes")
        if isinstance(volumes, list):
            spec["volumes"] = [
                v for v in volumes if isinstance(v, dict) and any(s in v for s in KEPT_VOLUME_SOURCES)
            ]
    status = pod.get("status")
    if isinstance(status, dict):
        for field in DROPPED_POD_STATUS:
            status.pop(field, None)
    return pod


class Compactor:
    """Projection and sharing for one cache (module docstring). Not thread-safe: one per informer."""

    def __init__(self, *, project_pods: bool = True) -> None:
        self.project_pods = project_pods
        self._objects: dict[bytes, Any] = {}
        self._lists: dict[tuple[int, ...], list[Any]] = {}
        """Shared lists by the ids of their (shared, so kept alive by ``_objects``) items."""
        self._strings: dict[str, str] = {}
        self.base = 0
        """Table entries right after the last rebuild (0 before the first)."""
        self.departed = 0
        """Objects that left the cache since the last rebuild (the informer counts them)."""
        self.rebuilds = 0

    def clear(self) -> None:
        self._lists = {}
        self._objects = {}
        self._strings = {}

    def due(self, cached: int, *, quiet: bool = False) -> bool:
        """Whether a rebuild is due (module docstring); ``cached``: objects in the cache now."""
        if not self.departed:
            return False
        if len(self._objects) > 2 * self.base + REBUILD_SLACK:
            return True
        return quiet and self.departed >= min(REBUILD_AFTER_DELETES, max(1, cached // 10))

    def rebuild(self, cached: Iterable[dict[str, Any]], kind: str) -> None:
        """Fresh tables holding only what ``cached`` (every object still cached) shares."""
        self.clear()
        for obj in cached:
            self.compact(obj, kind, projected=True)
        self.base = len(self._objects)
        self.departed = 0
        self.rebuilds += 1

    def __len__(self) -> int:
        return len(self._objects)

    def share(self, value: Any) -> Any:
        """The cached object equal to ``value`` (``value`` itself the first time)."""
        key = orjson.dumps(value)
        found = self._objects.get(key)
        if found is None:
            self._objects[_exact(key)] = value
            return value
        return found

    def compact(self, obj: dict[str, Any], kind: str, *, projected: bool = False) -> dict[str, Any]:
        """Project (Pods, unless ``projected`` says it was done) and share ``obj``'s parts in place."""
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
            if kind == "Pod":
                annotations = meta.get("annotations")
                if isinstance(annotations, dict) and LAST_APPLIED in annotations:
                    meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        if kind == "Pod" and self.project_pods and not projected:
            project_pod(obj)
        table = self._objects
        lists = self._lists
        strings = self._strings
        dumps = orjson.dumps
        for section, modes in _modes(kind):
            part = obj.get(section)
            if type(part) is not dict:
                continue
            for field, value in part.items():
                mode = modes.get(field)
                if mode is None or value is None:
                    continue
                if mode == _INTERN:
                    if type(value) is str:
                        part[field] = strings.setdefault(value, value)
                    continue
                if mode == _SHARE_ITEMS and type(value) is list:
                    items = []
                    for item in value:
                        key = dumps(item)
                        found = table.get(key)
                        if found is None:
                            table[_exact(key)] = found = item
                        items.append(found)
                    # the list is equal to another exactly when its items are the same shared objects
                    ids = tuple(map(id, items))
                    found_list = lists.get(ids)
                    if found_list is None:
                        lists[ids] = found_list = items
                    part[field] = found_list
                    continue
                key = dumps(value)
                found = table.get(key)
                if found is None:
                    table[_exact(key)] = found = value
                part[field] = found
        return obj


def _exact(key: bytes) -> bytes:
    """A copy of ``key`` of its own size: orjson's answer keeps its 4 KiB output buffer, so a
    table keyed by ``orjson.dumps`` results directly costs 4 KiB an entry whatever its length."""
    return bytes(memoryview(key))


_SHARE, _SHARE_ITEMS, _INTERN = 1, 2, 3
_ITEM_FIELDS = frozenset({"containers", "initContainers", "volumes"})
_MODES: dict[str, list[tuple[str, dict[str, int]]]] = {}


def _modes(kind: str) -> list[tuple[str, dict[str, int]]]:
    """``[(section, {field: what to do})]`` for ``kind``, built once."""
    found = _MODES.get(kind)
    if found is None:
        found = []
        shared = SHARED_FIELDS.get(kind, DEFAULT_SHARED_FIELDS)
        for section in ("metadata", "spec", "status"):
            modes = {f: _INTERN for f in SHARED_STRINGS.get(section, ())}
            for f in shared.get(section, ()):
                modes[f] = _SHARE_ITEMS if kind == "Pod" and f in _ITEM_FIELDS else _SHARE
            if modes:
                found.append((section, modes))
        _MODES[kind] = found
    return found
