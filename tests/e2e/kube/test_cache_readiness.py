"""Caches that are not synced yet: the driver thread never waits for one, /readyz says so (issues 19, 22)."""

from __future__ import annotations

import time
from pathlib import Path

import prometheus_client
import pytest

from karpy.kube import connect as kube_connect
from karpy.kube import errors
from support import apiserver

from .conftest import connect


def test_a_read_on_the_pumping_thread_of_a_cache_without_its_first_list_says_retry_later_at_once(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    api.fail_next(503, count=10_000, method="GET", plural="replicasets")  # the list keeps failing
    kube = connect(api, tmp_path, sync_timeout=10.0)
    try:
        kube.pump(0.0)  # this thread is now the driver thread
        started = time.perf_counter()
        with pytest.raises(errors.NotSynced) as raised:
            kube.get("ReplicaSet", "web", "default")
        assert time.perf_counter() - started < 0.5  # before the fix: the 10 s sync timeout, on every read
        assert raised.value.retryable
        with pytest.raises(errors.NotSynced):
            kube.list("ReplicaSet", "default")
        api.backend.faults.clear()
        inf = kube.informer_of("ReplicaSet")
        assert inf is not None and inf.wait_for_sync(10)
        assert kube.list("ReplicaSet", "default") == []
    finally:
        kube.close()


def test_readiness_waits_for_every_required_cache_and_ignores_ones_started_on_first_use(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    api.fail_next(503, count=10_000, method="GET", plural="nodes")
    kube = connect(api, tmp_path)
    try:
        kube.watch("Node", lambda *_: None)
        kube.start(["Pod"])
        assert kube.wait_for_sync(0) is False or not kube.has_synced()
        deadline = time.perf_counter() + 10
        while (inf := kube.informer_of("Pod")) is None or not inf.synced:
            assert time.perf_counter() < deadline
            time.sleep(0.02)
        assert not kube.has_synced()
        assert kube.unsynced() == ["Node"]
        kube.pump(0.0)
        with pytest.raises(errors.NotSynced):
            kube.get("NoSuchKind", "x", "default")  # a kind started on first use (a 404 for ever)
        api.backend.faults.clear()
        while not kube.has_synced():
            assert time.perf_counter() < deadline
            time.sleep(0.02)
        assert kube.unsynced() == []  # NoSuchKind never syncs, and is not required
    finally:
        kube.close()


def test_the_cache_metrics_count_skipped_objects_and_say_which_caches_are_synced(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    kube = connect(api, tmp_path)
    try:
        kube.start(["Node"])
        assert kube.wait_for_sync(10)
        registry = prometheus_client.CollectorRegistry()
        registry.register(kube.metrics_collector())
        text = prometheus_client.generate_latest(registry).decode()
        assert 'karpy_informer_synced{kind="Node"} 1.0' in text
        assert "# TYPE karpy_decode_errors_total counter" in text or "karpy_decode_errors" in text
        assert 'karpy_watch_timeouts_total{kind="Node"} 0.0' in text
    finally:
        kube.close()


def test_karpy_connect_starts_the_kinds_controllers_read_without_watching_in_the_background(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    from karpy.kube import connect as connect_mod

    kube = kube_connect.connect(str(api.write_kubeconfig(tmp_path / "kubeconfig")))
    try:
        assert set(kube.informers()) >= set(connect_mod.EAGER_KINDS)
        assert kube.has_synced()  # none of them is required for readiness
        for kind in connect_mod.EAGER_KINDS:
            inf = kube.informer_of(kind)
            assert inf is not None and inf.wait_for_sync(10)
    finally:
        kube.close()
