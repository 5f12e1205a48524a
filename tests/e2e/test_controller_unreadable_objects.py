"""`karpy controller` with a Pod it cannot read, and with a cache that cannot sync (issue 22, item 1)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import apiserver

from . import controller_process as cp

ARGS = ["--cloud-provider", "kwok", "--leader-election-namespace", "kube-system", "--lease-duration", "3s",
        "--renew-deadline", "2s", "--retry-period", "500ms"]
ENV = {"CLUSTER_NAME": "e2e", "LOG_LEVEL": "info", "POD_NAME": "karpy-a"}


@pytest.fixture
def api() -> Iterator[apiserver.EmulatedApiServer]:
    with apiserver.EmulatedApiServer(seed=3, bookmark_interval=0.5) as server:
        server.store.create({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                             "metadata": {"name": "default"}, "spec": {}})
        yield server


@pytest.mark.e2e
def test_a_pod_the_decoder_cannot_read_is_skipped_counted_and_logged_and_the_controller_gets_ready(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    api.store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile", "namespace": "default"},
                      "spec": {"containers": 5}})
    api.store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fine", "namespace": "default"},
                      "spec": {"containers": [{"name": "c", "image": "app"}]}})
    c = cp.Controller([*ARGS, "--kubeconfig", str(api.write_kubeconfig(tmp_path / "kubeconfig"))],
                      tmp_path / "controller.log", env=ENV)
    try:
        assert c.wait_for("/readyz", timeout=30).strip() == "ok"  # before the fix: the Pod cache never synced
        status, metrics = c.get("/metrics")
        assert status == 200
        assert 'karpy_decode_errors_total{kind="Pod"} 1.0' in metrics
        assert 'karpy_informer_synced{kind="Pod"} 1.0' in metrics
        (event,) = [e for e in api.store.list("Event", "default") if e["reason"] == "FailedToDecode"]
        assert event["involvedObject"]["name"] == "hostile" and event["type"] == "Warning"
        assert "$.spec.containers" in event["message"]
    finally:
        code = c.terminate()
    assert code == 0, c.log()[-3000:]
    lines = [json.loads(x) for x in c.log().splitlines() if x.startswith("{")]
    (skipped,) = [x for x in lines if "cannot be read" in x["message"]]
    assert "default/hostile" in skipped["message"] and "$.spec.containers" in skipped["message"]


@pytest.mark.e2e
def test_readyz_is_503_while_a_required_cache_has_no_first_list(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    api.fail_next(503, count=1_000_000, method="GET", plural="nodes")
    c = cp.Controller([*ARGS, "--kubeconfig", str(api.write_kubeconfig(tmp_path / "kubeconfig"))],
                      tmp_path / "controller.log", env=ENV)
    try:
        assert c.wait_for("/readyz", code=503, timeout=30) == "caches not synced\n"
        time.sleep(1.0)
        assert c.get("/readyz") == (503, "caches not synced\n")
        assert c.get("/healthz")[0] == 200
        api.backend.faults.clear()
        assert c.wait_for("/readyz", timeout=30).strip() == "ok"
    finally:
        code = c.terminate()
    assert code == 0, c.log()[-3000:]
