"""Two `karpy controller` processes, leader-elected, against the emulated API server, with KWOK.

A pending pod gets a NodeClaim and a KWOK Node; deleting the pod removes the node; killing the
leader hands over to the other replica, which then provisions; /metrics and /readyz answer on both.
The test plays KWOK and kube-scheduler (marks the node Ready, binds the pod). Short settings keep it
to a few tens of seconds: 100 ms batching, 3 s lease / 2 s renew deadline / 0.5 s retry period.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from karpy.api import labels
from karpy.kube import interface, memory
from support import apiserver

from . import controller_process as cp

NS = "kube-system"
LEASE = "karpenter-leader-election"
KWOK_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
SETTINGS = {"BATCH_IDLE_DURATION": "100ms", "BATCH_MAX_DURATION": "500ms", "CLUSTER_NAME": "e2e",
            "LOG_LEVEL": "info"}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, *procs: cp.Controller) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    logs = "\n".join(f"--- {p.log_path.name}\n{p.log()[-2500:]}" for p in procs)
    raise AssertionError(f"{what}: not within {timeout}s\n{logs}")


def pending_pod(name: str, cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}


def holder(store: memory.InMemoryCluster) -> str:
    try:
        return str(store.get("Lease", LEASE, NS)["spec"].get("holderIdentity") or "")
    except Exception:
        return ""


@pytest.fixture
def api() -> Iterator[apiserver.EmulatedApiServer]:
    server = apiserver.EmulatedApiServer(seed=7, bookmark_interval=0.5)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.e2e
def test_two_replicas_provision_kwok_nodes_remove_them_and_hand_over_when_the_leader_dies(
        api: apiserver.EmulatedApiServer, tmp_path: Path) -> None:
    store: memory.InMemoryCluster = api.store
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    settings_file = tmp_path / "settings.yaml"
    settings_file.write_text("consolidationValidationDelay: 500ms\n")
    store.create({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                  "metadata": {"name": "default"}, "spec": {}})
    store.create({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                  "spec": {"template": {"spec": {"nodeClassRef": dict(KWOK_CLASS), "requirements": [
                      {"key": labels.OS, "operator": "In", "values": ["linux"]}]}},
                           "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}}})
    args = ["--cloud-provider", "kwok", "--kubeconfig", str(kubeconfig), "--settings-file", str(settings_file),
            "--leader-election-namespace", NS, "--lease-duration", "3s", "--renew-deadline", "2s",
            "--retry-period", "500ms"]
    a = cp.Controller(args, tmp_path / "a.log", env={**SETTINGS, "POD_NAME": "karpy-a"})
    b = cp.Controller(args, tmp_path / "b.log", env={**SETTINGS, "POD_NAME": "karpy-b"})
    try:
        for c in (a, b):
            assert c.wait_for("/readyz", timeout=30).strip() == "ok"
        first = wait_for(lambda: holder(store), 15, "a leader", a, b)
        leader, follower = (a, b) if first.startswith("karpy-a") else (b, a)
        assert 'leader_election_master_status{name="karpenter-leader-election"} 1.0' in leader.get("/metrics")[1]
        assert 'leader_election_master_status{name="karpenter-leader-election"} 0.0' in follower.get("/metrics")[1]

        # a pending pod gets a NodeClaim and a KWOK Node
        store.create(pending_pod("web"))
        node_name = wait_for(lambda: [interface.name_of(n) for n in store.list("Node")], 20, "a node", a, b)[0]
        node = store.get("Node", node_name)
        assert node["spec"]["providerID"] == f"kwok://{node_name}"
        assert node["metadata"]["labels"]["kwok.x-k8s.io/node"] == "fake"
        # the Node is written by the launch on a pool thread; the NodeClaim's status by the loop after it
        (claim,) = wait_for(lambda: [c for c in store.list("NodeClaim") if (c.get("status") or {}).get("providerID")],
                            20, "the launched NodeClaim", a, b)
        assert claim["status"]["providerID"] == node["spec"]["providerID"]
        wait_for(lambda: interface.labels_of(store.get("Node", node_name)).get(labels.REGISTERED) == "true", 20,
                 "registration", a, b)
        assert 'karpenter_nodeclaims_launched_total{nodepool="default"} 1.0' in leader.get("/metrics")[1]

        # play KWOK (the node is Ready) and kube-scheduler (the pod runs there), then delete the pod
        store.patch_status("Node", node_name, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        pod = store.get("Pod", "web", "default")
        pod["spec"]["nodeName"] = node_name
        store.update(pod)
        store.patch_status("Pod", "web", {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]}}, "default")
        wait_for(lambda: interface.labels_of(store.get("Node", node_name)).get(labels.INITIALIZED) == "true", 20,
                 "initialization", a, b)
        store.delete("Pod", "web", "default")
        wait_for(lambda: not store.list("Node") and not store.list("NodeClaim"), 40, "the empty node removed",
                 a, b)

        # the leader dies; the other replica takes over within the lease duration and provisions
        killed_at = time.monotonic()
        leader.kill()
        wait_for(lambda: holder(store) and not holder(store).startswith(first.split("_")[0]), 12,
                 "the hand-over", follower)
        assert time.monotonic() - killed_at < 3 + 0.5 + 4  # lease duration + retry period + slack for a busy CI
        store.create(pending_pod("api", cpu="2"))
        wait_for(lambda: len(store.list("Node")) == 1, 20, "a node from the new leader", follower)
        status, metrics = follower.get("/metrics")
        assert status == 200
        assert 'leader_election_master_status{name="karpenter-leader-election"} 1.0' in metrics
        assert follower.get("/readyz") == (200, "ok\n")
    finally:
        for c in (a, b):
            c.terminate() if c.proc.poll() is None else c.kill()
    messages = [json.loads(x)["message"] for x in follower.log().splitlines() if x.startswith("{")]
    assert "launched nodeclaim" in messages
