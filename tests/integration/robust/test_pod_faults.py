"""Pod faults of ``spec.faults.pods``: pods that fail to start, and graceful pod termination."""

from __future__ import annotations

from typing import Any

from karpy import clock
from karpy.simulator import engine, faultspec, scenario

from ..controllers import builders

SCENARIO = """apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {{name: pod-faults}}
spec:
  cloud: {{provider: aws, region: us-east-1, zones: [us-east-1a, us-east-1b]}}
  until: 2h
  seed: 3
{faults}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  amiSelectorTerms: [{{alias: al2023@latest}}]
  role: KarpenterNodeRole-test
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: test}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: test}}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 10
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: web:1, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]
"""


def _simulate(faults: str) -> tuple[engine.Simulation, dict[str, Any]]:
    sim = engine.Simulation(scenario.load_text(SCENARIO.format(faults=faults)))
    sim.run()
    return sim, sim.metrics_summary()["simulator"]


def _web_pods(sim: engine.Simulation) -> list[dict[str, Any]]:
    return [p for p in sim.cluster.objects("Pod") if (p["metadata"].get("labels") or {}).get("app") == "web"]


def test_a_pod_that_fails_to_start_is_failed_with_a_reason_and_its_replicaset_replaces_it() -> None:
    sim = engine.Simulation(scenario.load_text(SCENARIO.format(faults="  faults:\n    pods: {startFailure: 0.3}")))
    seen: dict[str, dict[str, Any]] = {}
    sim.cluster.watch("Pod", lambda event, obj: seen.__setitem__(obj["metadata"]["name"], obj)
                      if (obj.get("status") or {}).get("phase") == "Failed" else None)
    sim.run()
    summary = sim.metrics_summary()["simulator"]
    # Every injected failure leaves a Failed pod; pod garbage collection may delete it later with
    # its node (a node left holding only Failed pods is empty to consolidation).
    failed = list(seen.values())
    running = [p for p in _web_pods(sim) if p["status"].get("phase") == "Running"]
    assert summary["faultsInjected"]["podStartFailure"] == len(failed) > 0
    assert all(p["status"]["reason"] == "StartError" and
               p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 128 for p in failed)
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet" for p in failed)
    assert len(running) == 10  # every failed pod was replaced


def test_without_pod_faults_no_pod_fails_and_deleted_pods_go_at_once() -> None:
    sim, summary = _simulate("")
    assert "faultsInjected" not in summary and not sim.cluster.graceful_pods and sim.kubelet.start_failure == 0
    assert sorted(p["status"]["phase"] for p in _web_pods(sim)) == ["Running"] * 10
    name = _web_pods(sim)[0]["metadata"]["name"]
    sim.cluster.delete("Pod", name, "default")
    assert name not in [p["metadata"]["name"] for p in _web_pods(sim)]


def test_the_pods_faults_are_read_strictly() -> None:
    f = faultspec.read({"pods": {"startFailure": 0.05, "gracefulTermination": True}}, "Scenario/x")
    assert f.start_failure == 0.05 and f.graceful_termination and f.any
    for bad in ({"pods": {"startFailure": 2}}, {"pods": {"gracefulTerminaton": True}}):
        try:
            faultspec.read(bad, "Scenario/x")
        except Exception as exc:
            assert type(exc).__name__ == "ValidationError" and "spec.faults.pods" in str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")


def test_a_drained_pod_lingers_for_its_grace_period_and_the_node_waits_for_it() -> None:
    w = builders.make_world()
    w.cluster.graceful_pods = True
    w.cluster.create(builders.nodepool_manifest())
    w.cluster.create(builders.pending_pod("a"))
    w.at(120)
    (node,) = w.nodes()
    name = node["metadata"]["name"]
    w.cluster.delete("Pod", "a", "default")  # unbound: goes at once
    w.cluster.create(builders.running_pod("a", name, terminationGracePeriodSeconds=90))
    (claim,) = w.nodeclaims()
    w.cluster.delete("NodeClaim", claim["metadata"]["name"])
    w.run_for(10)
    pod = w.cluster.get("Pod", "a", "default")
    evicted_at = clock.parse_rfc3339(pod["metadata"]["deletionTimestamp"])
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 90 and pod["spec"]["nodeName"] == name
    w.run_for(evicted_at + 85 - w.clock.now())
    assert w.cluster.get("Pod", "a", "default")["metadata"]["deletionTimestamp"]
    assert name in [n["metadata"]["name"] for n in w.nodes()] and len(w.running_instances()) == 1
    w.run_for(10)
    assert "a" not in [p["metadata"]["name"] for p in w.cluster.objects("Pod")]
    w.run_for(120)
    assert w.nodes() == [] and w.running_instances() == [] and w.nodeclaims() == []


def test_a_pod_without_a_grace_period_or_not_bound_is_removed_at_once_even_with_graceful_pods() -> None:
    w = builders.make_world()
    w.cluster.graceful_pods = True
    w.cluster.create(builders.pending_pod("unbound"))
    w.cluster.create(builders.running_pod("zero", "n1", terminationGracePeriodSeconds=0))
    w.cluster.create(builders.running_pod("default-grace", "n1"))
    for pod in ("unbound", "zero", "default-grace"):
        w.cluster.delete("Pod", pod, "default")
    assert [p["metadata"]["name"] for p in w.cluster.objects("Pod")] == ["default-grace"]
    assert w.cluster.get("Pod", "default-grace", "default")["metadata"]["deletionGracePeriodSeconds"] == 30
    w.run_for(1)  # node n1 does not exist: pod garbage collection does not wait for a kubelet
    assert w.cluster.objects("Pod") == []
