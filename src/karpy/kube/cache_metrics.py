"""Prometheus metrics of the informer caches, for ``/metrics`` of ``karpy controller``.

* ``karpy_decode_errors_total{kind}``: objects an informer skipped because they could not be read
  (:data:`karpy.kube.informer.DECODE_ERRORS`; each is also logged naming namespace/name and field);
* ``karpy_informer_synced{kind}``: 1 once the kind's cache has its first list;
* ``karpy_watch_timeouts_total{kind}``: watches ended because nothing arrived within their read
  timeout (a peer lost without a FIN), each followed by a re-list.

:class:`UnreadableReporter` also tells the cluster's users: a Warning Event ``FailedToDecode`` on
each object an informer skipped (when it has a readable namespace/name), once per object version.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from karpy import clock as clock_mod
from karpy.kube import errors, events, fastdecode, informer, interface

log = logging.getLogger("karpy.kube.cache_metrics")
REPORTED_LIMIT = 10_000
"""Object versions remembered as reported (then forgotten all at once)."""


class CacheCollector:
    """A custom collector reading the informers at scrape time (register it in a registry)."""

    def __init__(self, informers: Callable[[], Mapping[str, informer.Informer]]) -> None:
        self._informers = informers

    def collect(self) -> Iterator[Metric]:
        decode = CounterMetricFamily("karpy_decode_errors", "Objects an informer skipped because they could not "
                                     "be read (a field of the wrong type...), by kind.", labels=["kind"])
        for kind, count in sorted(informer.DECODE_ERRORS.items()):
            decode.add_metric([kind], count)
        synced = GaugeMetricFamily("karpy_informer_synced", "1 once the informer of the kind has its first list.",
                                   labels=["kind"])
        timeouts = CounterMetricFamily("karpy_watch_timeouts", "Watches ended because nothing arrived within "
                                       "their read timeout (a lost peer), by kind.", labels=["kind"])
        for kind, inf in sorted(self._informers().items()):
            synced.add_metric([kind], 1.0 if inf.synced else 0.0)
            timeouts.add_metric([kind], inf.watch_timeouts)
        yield decode
        yield synced
        yield timeouts


class UnreadableReporter:
    """``on_reject`` for the informers: a Warning Event on the object that could not be read."""

    def __init__(self, cluster: interface.Cluster, clock: clock_mod.Clock | None = None) -> None:
        self._recorder = events.EventRecorder(cluster, clock or clock_mod.WallClock(), component="karpy")
        self._reported: set[tuple[str, str, str, str]] = set()
        self._lock = threading.Lock()

    def __call__(self, kind: str, bad: fastdecode.Rejected) -> None:
        if not bad.name:
            return
        key = (kind, bad.namespace, bad.name, bad.resource_version)
        with self._lock:
            if key in self._reported:
                return
            if len(self._reported) >= REPORTED_LIMIT:
                self._reported.clear()
            self._reported.add(key)
        involved: dict[str, object] = {"kind": kind, "metadata": {"name": bad.name, "namespace": bad.namespace}}
        try:
            self._recorder.warning(involved, "FailedToDecode",
                                   f"karpy cannot read this {kind} and ignores it: {bad.reason[:300]}")
        except errors.KubeError as exc:
            log.warning("cannot publish an Event about the unreadable %s %s/%s: %s", kind, bad.namespace,
                        bad.name, exc.message)
