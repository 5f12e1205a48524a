"""What only the adapter has: informer caches, re-lists, read-your-writes, retries, events, versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from karpy import clock
from karpy.kube import adapter, errors, events, interface, request_bodies
from support import apiserver

from .conftest import connect


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def pump_until(cluster: adapter.KubeCluster, predicate: Any, timeout: float = 10.0) -> bool:
    deadline = clock.perf_counter() + timeout
    while not predicate():
        if clock.perf_counter() > deadline:
            return False
        cluster.pump(0.05)
    return True


def test_a_write_is_readable_at_once_and_its_watch_event_is_not_delivered_twice(
    kube: adapter.KubeCluster, api: apiserver.EmulatedApiServer
) -> None:
    seen: list[tuple[str, str]] = []
    kube.watch("Node", lambda t, o: seen.append((t, o["metadata"]["resourceVersion"])))
    kube.create(node("n1"))
    patched = kube.patch("Node", "n1", {"metadata": {"labels": {"a": "1"}}})
    assert kube.get("Node", "n1")["metadata"]["labels"] == {"a": "1"}
    inf = kube.informer_of("Node")
    assert inf is not None
    # let the watch catch up with both writes (bookmarks carry its position)
    rv = patched["metadata"]["resourceVersion"]
    assert pump_until(kube, lambda: inf.resource_version.isdigit() and int(inf.resource_version) >= int(rv))
    kube.pump(0.3)
    assert [t for t, _ in seen] == ["ADDED", "MODIFIED"]
    assert seen[-1][1] == rv


def test_handlers_run_only_on_the_pumping_thread(kube: adapter.KubeCluster, api: apiserver.EmulatedApiServer) -> None:
    import threading

    threads: list[str] = []
    kube.watch("Node", lambda t, o: threads.append(threading.current_thread().name))
    kube.wait_for_sync(5)
    api.store.create(node("n1"))
    api.store.create(node("n2"))
    inf = kube.informer_of("Node")
    assert inf is not None
    assert pump_until(kube, lambda: len(inf) == 2 and kube.pending_events == 0 and len(threads) == 2)
    assert set(threads) == {threading.current_thread().name}


def test_a_410_gone_watch_lists_again_and_reports_what_changed_meanwhile(
    kube: adapter.KubeCluster, api: apiserver.EmulatedApiServer
) -> None:
    seen: list[tuple[str, str]] = []
    kube.watch("Node", lambda t, o: seen.append((t, interface.name_of(o))))
    api.store.create(node("stays"))
    api.store.create(node("goes"))
    assert pump_until(kube, lambda: len(seen) == 2)
    inf = kube.informer_of("Node")
    assert inf is not None and inf.lists == 1
    # cut off, the client misses three writes; the server then forgets its history and drops
    # every watch: resuming from the old version is 410 Gone
    api.backend.held = True
    api.store.create(node("new"))
    api.store.delete("Node", "goes")
    api.store.patch("Node", "stays", {"metadata": {"labels": {"x": "1"}}})
    api.compact()
    api.backend.held = False
    api.expire_watches()
    assert pump_until(kube, lambda: inf.lists >= 2 and ("DELETED", "goes") in seen and len(inf) == 2)
    assert ("ADDED", "new") in seen
    assert ("MODIFIED", "stays") in seen
    assert sorted(interface.name_of(n) for n in kube.list("Node")) == ["new", "stays"]


def test_a_watch_that_ends_resumes_without_listing_again(
    kube: adapter.KubeCluster, api: apiserver.EmulatedApiServer
) -> None:
    seen: list[str] = []
    kube.watch("Node", lambda t, o: seen.append(interface.name_of(o)))
    kube.wait_for_sync(5)
    api.expire_watches()
    api.store.create(node("after"))
    assert pump_until(kube, lambda: seen == ["after"])
    inf = kube.informer_of("Node")
    assert inf is not None and inf.lists == 1


def test_bookmarks_move_the_informer_position(kube: adapter.KubeCluster, api: apiserver.EmulatedApiServer) -> None:
    kube.list("Node")
    inf = kube.informer_of("Node")
    assert inf is not None
    start = inf.resource_version
    api.store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": "d"}})
    assert pump_until(kube, lambda: inf.resource_version != start, timeout=5)
    assert int(inf.resource_version) > int(start or 0)


def test_a_server_side_selector_limits_what_the_cache_holds(
    api: apiserver.EmulatedApiServer, tmp_path: Path
) -> None:
    for name, node_name in (("a", "n1"), ("b", "n2")):
        api.store.create(
            {"kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": node_name}}
        )
    cluster = connect(api, tmp_path, server_selectors={"Pod": (None, "spec.nodeName=n1")})
    try:
        assert [interface.name_of(p) for p in cluster.list("Pod")] == ["a"]
        for name, node_name in (("c", "n1"), ("d", "n2")):
            api.store.create(
                {"kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": node_name}}
            )
        assert pump_until(cluster, lambda: len(cluster.list("Pod")) == 2)
        assert sorted(interface.name_of(p) for p in cluster.list("Pod")) == ["a", "c"]
        gets = [params for method, plural, params in api.backend.log if method == "GET" and plural == "pods"]
        assert len(gets) >= 2 and all(p.get("fieldSelector") == "spec.nodeName=n1" for p in gets)
    finally:
        cluster.close()


def test_resync_delivers_cached_objects_again(api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    cluster = connect(api, tmp_path, resync_seconds=0.2)
    try:
        api.store.create(node("n1"))
        seen: list[str] = []
        cluster.watch("Node", lambda t, o: seen.append(t))
        assert pump_until(cluster, lambda: seen.count("MODIFIED") >= 1)
    finally:
        cluster.close()


def test_server_errors_are_retried_with_back_off(kube: adapter.KubeCluster, api: apiserver.EmulatedApiServer) -> None:
    api.fail_next(503, count=2, method="POST")
    kube.create(node("n1"))
    assert kube.client.requests >= 3
    api.fail_next(429, count=1, method="PATCH", retry_after=0)
    kube.patch("Node", "n1", {"metadata": {"labels": {"a": "b"}}})
    api.fail_next(500, count=10, method="DELETE")
    with pytest.raises(errors.InternalError) as info:
        kube.delete("Node", "n1")
    assert info.value.retryable
    assert "500" in info.value.message


def test_an_unconditional_update_that_conflicts_is_retried_after_a_re_read(
    kube: adapter.KubeCluster, api: apiserver.EmulatedApiServer
) -> None:
    kube.create(node("n1"))
    obj = kube.get("Node", "n1")
    del obj["metadata"]["resourceVersion"]
    obj["metadata"]["labels"] = {"x": "1"}
    api.fail_next(409, method="PUT")
    assert kube.update(obj)["metadata"]["labels"] == {"x": "1"}


def test_an_eviction_429_is_not_retried_by_the_client(
    kube: adapter.KubeCluster, api: apiserver.EmulatedApiServer
) -> None:
    api.store.create({"kind": "Pod", "metadata": {"name": "p", "namespace": "default"}})
    api.fail_next(429, method="POST", plural="pods", retry_after=0)
    before = kube.client.requests
    with pytest.raises(errors.TooManyRequests):
        kube.evict("p", "default")
    assert kube.client.requests == before + 1


def test_error_responses_with_a_charset_become_karpy_errors(kube: adapter.KubeCluster) -> None:
    with pytest.raises(errors.NotFound) as info:
        kube.patch("Node", "missing", {"metadata": {"labels": {"a": "b"}}})
    assert "missing" in info.value.message
    assert info.value.kind == "Node"


def test_events_are_aggregated_by_a_patch_not_a_new_event(kube: adapter.KubeCluster) -> None:
    vclock = clock.VirtualClock()
    involved = kube.create(node("n1"))
    recorder = events.EventRecorder(kube, vclock)
    first = recorder.normal(involved, "Unconsolidatable", "pdb prevents disruption")
    vclock.advance(60)
    second = recorder.normal(involved, "Unconsolidatable", "pdb prevents disruption")
    assert second["metadata"]["name"] == first["metadata"]["name"]
    assert second["count"] == 2
    assert second["lastTimestamp"] == "2026-01-01T00:01:00Z"
    stored = kube.list("Event", "default")
    assert len(stored) == 1 and stored[0]["count"] == 2


def test_server_version_is_major_dot_minor(api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    api.backend.git_version = "v1.29.10-eks-abcdef"
    cluster = connect(api, tmp_path)
    try:
        assert cluster.server_version() == "1.29"
    finally:
        cluster.close()


def test_a_cache_that_cannot_sync_reports_why(api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    cluster = connect(api, tmp_path, sync_timeout=0.5)
    try:
        with pytest.raises(errors.KubeError) as info:
            cluster.get("Frobnicator", "x")
        assert "Frobnicator" in info.value.message
    finally:
        cluster.close()


def test_two_clients_watch_the_same_server_concurrently(api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    first, second = connect(api, tmp_path), connect(api, tmp_path)
    try:
        seen: dict[str, list[str]] = {"first": [], "second": []}
        first.watch("Node", lambda t, o: seen["first"].append(interface.name_of(o)))
        second.watch("Node", lambda t, o: seen["second"].append(interface.name_of(o)))
        first.wait_for_sync(5)
        second.wait_for_sync(5)
        first.create(node("from-first"))
        second.create(node("from-second"))
        assert pump_until(first, lambda: sorted(seen["first"]) == ["from-first", "from-second"])
        assert pump_until(second, lambda: sorted(seen["second"]) == ["from-first", "from-second"])
    finally:
        first.close()
        second.close()


def test_a_delete_sends_the_uid_precondition_and_the_grace_period() -> None:
    assert request_bodies.delete_options(uid="u-1", grace_period_seconds=42) == {
        "propagationPolicy": "Background", "preconditions": {"uid": "u-1"}, "gracePeriodSeconds": 42}
    assert request_bodies.delete_options() == {"propagationPolicy": "Background"}
