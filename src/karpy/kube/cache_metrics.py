"""Prometheus metrics of the informer caches, for ``/metrics`` of ``karpy controller``.

* ``karpy_decode_errors_total{kind}``: objects an informer skipped because they could not be read
  (:data:`karpy.kube.informer.DECODE_ERRORS`; each is also logged naming namespace/name and field);
* ``karpy_informer_synced{kind}``: 1 once the kind's cache has its first list;
* ``karpy_watch_timeouts_total{kind}``: watches ended because nothing arrived within their read
  timeout (a peer lost without a FIN), each followed by a re-list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from karpy.kube import informer


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
