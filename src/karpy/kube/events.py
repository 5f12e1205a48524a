"""Kubernetes Events published through the cluster interface, aggregated as kubectl shows them.

``EventRecorder(cluster, clock, component="karpenter").publish(involved, "Normal", reason, msg)``
creates a core/v1 ``Event`` about ``involved`` (any object dict). Publishing the same event again
(same involved object uid, type, reason and message from the same component) does not create a
new object: the recorder counts the repeat in memory and the existing Event gets the new ``count``
and ``lastTimestamp`` by one merge PATCH (no GET: the recorder knows the count) - at once for the
first repeat, then at most every :data:`FLUSH_INTERVAL` seconds per event, a later repeat carrying
the ones counted meanwhile - so ``kubectl get events`` shows ``(x30 over 5m)`` and 50 nodes
repeating a failure every few seconds cost a few requests a second, not two per repeat (the role
of client-go's event correlator and spam filter). ``publish`` returns the Event as the recorder
knows it (its count includes repeats not written yet). The recorder remembers the last
:data:`CACHE_SIZE` distinct events, least recently used forgotten first; when a remembered Event
was deleted meanwhile (the PATCH says 404), or was forgotten, a fresh one is created.

Events about cluster-scoped objects (Nodes, NodeClaims, NodePools) live in the ``default``
namespace, as with the real client. Event names are ``<involved name>.<hex nanoseconds>``.
Publishing never raises for a vanished Event; other cluster errors propagate.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from karpy import clock as clock_mod
from karpy.kube import errors, interface

NORMAL = "Normal"
WARNING = "Warning"
CACHE_SIZE = 4096
"""Distinct events a recorder remembers for aggregation (client-go's maxLruCacheEntries)."""
FLUSH_INTERVAL = 30.0
"""Seconds between two writes of one Event's count after its first repeat."""

SERIES_FINISH = 360.0
"""Seconds after its last occurrence that client-go's events broadcaster forgets an isomorphic event
(finishTime, swept every 6 minutes): a later occurrence starts a new Event."""

_AggregationKey = tuple[str, str, str, str, str, str, str, str]


def involved_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ``involvedObject`` reference for ``obj``."""
    kind = str(obj.get("kind", ""))
    meta = obj.get("metadata") or {}
    ref: dict[str, Any] = {"kind": kind, "name": meta.get("name", "")}
    namespace = meta.get("namespace") or ""
    if namespace:
        ref["namespace"] = namespace
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    info = interface.kind_info(kind)
    api_version = obj.get("apiVersion") or (info.api_version if info else "")
    if api_version:
        ref["apiVersion"] = api_version
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


class EventRecorder:
    """Publishes Events for one component (``source.component`` and ``reportingComponent``)."""

    def __init__(
        self, cluster: interface.Cluster, clock: clock_mod.Clock, component: str = "karpenter"
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.component = component
        self._published: collections.OrderedDict[_AggregationKey, dict[str, Any]] = collections.OrderedDict()
        """What was published per key: the Event as last known (count included) and ``_written`` (when)."""
        self._series: dict[tuple[str, ...], list[Any]] = {}
        """Isomorphic-event key -> [namespace, name, count, last observed] (kept SERIES_FINISH)."""
        self._swept = 0.0

    def publish(self, involved: Mapping[str, Any], type: str, reason: str, message: str) -> dict[str, Any]:
        """Create or aggregate an Event; returns it as stored."""
        return self._publish_at(involved, type, reason, message, self.clock.now())

    def _publish_at(self, involved: Mapping[str, Any], type: str, reason: str, message: str,
                    at: float) -> dict[str, Any]:
        """:meth:`publish` of an event that happened at ``at``."""
        if type not in (NORMAL, WARNING):
            raise errors.Invalid(f"event type must be {NORMAL} or {WARNING}, found {type!r}")
        ref = involved_object(involved)
        key: _AggregationKey = (
            ref["kind"],
            ref.get("namespace", ""),
            ref["name"],
            ref.get("uid", ""),
            type,
            reason,
            message,
            self.component,
        )
        now = clock_mod.rfc3339(at)
        known = self._published.get(key)
        if known is not None:
            updated = self._repeat(known, at, now)
            if updated is not None:
                self._published.move_to_end(key)
                return updated
            del self._published[key]
        event = self._create(ref, type, reason, message, now, at)
        self._published[key] = {"event": event, "written": at, "stored": 1, "repeats": 0}
        if len(self._published) > CACHE_SIZE:
            self._published.popitem(last=False)
        return dict(event)

    def _repeat(self, known: dict[str, Any], at: float, now: str) -> dict[str, Any] | None:
        """Count a repeat; write it when due (module docstring). ``None`` when the Event is gone."""
        event = known["event"] = {**known["event"], "count": int(known["event"].get("count") or 1) + 1,
                                  "lastTimestamp": now}
        known["repeats"] += 1
        if known["repeats"] > 1 and at - known["written"] < FLUSH_INTERVAL:
            return dict(event)
        meta = event["metadata"]
        try:
            written = self.cluster.patch("Event", meta["name"], {"count": event["count"], "lastTimestamp": now},
                                         meta["namespace"])
        except errors.NotFound:
            return None
        known["event"], known["written"], known["stored"] = written, at, event["count"]
        return dict(written)

    def flush(self) -> int:
        """Write every count not written yet (on shutdown); returns how many Events were patched."""
        patched = 0
        for key, known in list(self._published.items()):
            event = known["event"]
            if known["stored"] == event.get("count"):
                continue
            meta = event["metadata"]
            try:
                known["event"] = self.cluster.patch(
                    "Event", meta["name"], {"count": event["count"], "lastTimestamp": event["lastTimestamp"]},
                    meta["namespace"])
            except errors.NotFound:
                del self._published[key]
                continue
            known["stored"] = event["count"]
            known["written"] = self.clock.now()
            patched += 1
        return patched

    def series(self, involved: Mapping[str, Any], type: str, reason: str, message: str) -> dict[str, Any] | None:
        """Record as client-go's events.k8s.io broadcaster does (kube-scheduler's recorder).

        Events are *isomorphic* when they share type, reason, component and the involved object
        *at the same resourceVersion* (the message is not part of the key). The first is created
        (count 1, this message); the second updates it to count 2 (the series starts); later
        ones only count in memory (the real broadcaster writes a series at most every 30 min,
        longer than a simulation's bursts). So an object that keeps failing the same way without
        changing gets at most two writes; one that changes gets a new Event per change. Returns
        the Event written, or ``None`` when nothing was written. A series is forgotten
        :data:`SERIES_FINISH` seconds (virtual) after its last occurrence, as the broadcaster's
        6-minute sweep does, so what it remembers is bounded by what happened in that window.
        """
        return self._series_at(involved, type, reason, message, self.clock.now())

    def _series_at(self, involved: Mapping[str, Any], type: str, reason: str, message: str,
                   now: float) -> dict[str, Any] | None:
        """:meth:`series` of an event that happened at ``now``."""
        if type not in (NORMAL, WARNING):
            raise errors.Invalid(f"event type must be {NORMAL} or {WARNING}, found {type!r}")
        meta = involved.get("metadata") or {}
        key = (str(involved.get("kind", "")), meta.get("namespace") or "", meta.get("name", ""),
               meta.get("uid", ""), meta.get("resourceVersion", ""), type, reason)
        if now - self._swept >= SERIES_FINISH:
            self._swept = now
            self._series = {k: v for k, v in self._series.items() if now - v[3] < SERIES_FINISH}
        known = self._series.get(key)
        if known is not None:
            known[2] += 1
            known[3] = now
            if known[2] > 2:
                return None
            try:
                return self.cluster.patch("Event", known[1], {"count": 2, "lastTimestamp": clock_mod.rfc3339(now)},
                                          known[0])
            except errors.NotFound:
                del self._series[key]
        event = self._create(involved_object(involved), type, reason, message, clock_mod.rfc3339(now), now)
        self._series[key] = [event["metadata"]["namespace"], event["metadata"]["name"], 1, now]
        return event

    def normal(self, involved: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
        return self.publish(involved, NORMAL, reason, message)

    def warning(self, involved: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
        return self.publish(involved, WARNING, reason, message)

    def _create(self, ref: dict[str, Any], type: str, reason: str, message: str, now: str,
                at: float) -> dict[str, Any]:
        namespace = ref.get("namespace") or "default"
        stamp = int(at * 1_000_000_000)
        for attempt in range(1000):
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{ref['name']}.{stamp + attempt:x}", "namespace": namespace},
                "involvedObject": ref,
                "reason": reason,
                "message": message,
                "type": type,
                "source": {"component": self.component},
                "reportingComponent": self.component,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            try:
                return self.cluster.create(event)
            except errors.AlreadyExists:
                continue
        raise errors.AlreadyExists(f"could not find a free Event name for {ref['kind']}/{ref['name']}")
