"""CapacityBuffers (gate CapacityBuffer) with virtual time: status, launched room, kept room.

Expected outcomes from Karpenter v1.14.3's tests: ``pkg/controllers/capacitybuffer/suite_test.go``
("should resolve a Deployment and calculate percentage-based replicas": 20 % of 10 = 2, no
status.podTemplateRef; "should set ReadyForProvisioning=False when PodTemplate is not found"; "should
return error for unsupported kind"), ``pkg/controllers/provisioning/buffers_test.go`` (virtual pods of
a ready buffer make NodeClaims; Provisioning condition) and ``pkg/controllers/disruption/
emptiness_test.go`` / ``consolidation_test.go`` ("should not disrupt a node that hosts virtual buffer
pods", "should not empty-consolidate a node with only buffer pods").
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from karpy import settings
from karpy.api import capacitybuffer as cb
from karpy.controllers import capacitybuffer
from karpy.kube import errors as kube_errors
from karpy.simulator import engine, run_result, scenario

from . import builders as b

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "capacity-buffer.yaml"


def _world() -> b.World:
    return b.make_world(settings_=settings.Settings(cluster_name="test", feature_gates=(("CapacityBuffer", True),)))


def _deployment(name: str, replicas: int, cpu: str = "500m") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "pause",
                                                           "resources": {"requests": {"cpu": cpu,
                                                                                      "memory": "256Mi"}}}]}}}}


def _buffer(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": cb.API_VERSION, "kind": cb.KIND, "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    (cond,) = [c for c in obj["status"]["conditions"] if c["type"] == kind]
    return dict(cond)


def test_a_buffer_on_a_deployment_resolves_twenty_percent_of_ten_replicas_to_two() -> None:
    w = _world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(_deployment("my-app", 10))
    w.cluster.create(_buffer("scalable", {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "my-app"},
                                          "percentage": 20}))
    w.run_for(35.0)
    obj = w.cluster.get(cb.KIND, "scalable", "default")
    assert obj["status"]["replicas"] == 2
    assert "podTemplateRef" not in obj["status"]
    ready = _condition(obj, cb.READY_FOR_PROVISIONING)
    assert (ready["status"], ready["reason"]) == ("True", cb.REASON_RESOLVED)


def test_a_pod_template_buffer_records_the_template_and_its_generation() -> None:
    w = _world()
    w.cluster.create({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t", "namespace": "default"},
                      "template": _deployment("x", 1)["spec"]["template"]})
    w.cluster.create(_buffer("tpl", {"podTemplateRef": {"name": "t"}, "replicas": 3}))
    w.run_for(35.0)
    status = w.cluster.get(cb.KIND, "tpl", "default")["status"]
    assert status["podTemplateRef"] == {"name": "t"}
    assert status["podTemplateGeneration"] == 1
    assert status["replicas"] == 3


def test_a_missing_template_or_an_unsupported_kind_is_not_ready_with_karpenters_reasons() -> None:
    w = _world()
    w.cluster.create(_buffer("missing", {"podTemplateRef": {"name": "nope"}, "replicas": 1}))
    w.cluster.create(_buffer("job", {"scalableRef": {"apiGroup": "batch", "kind": "Job", "name": "j"},
                                     "percentage": 20}))
    w.run_for(35.0)
    missing = _condition(w.cluster.get(cb.KIND, "missing", "default"), cb.READY_FOR_PROVISIONING)
    assert (missing["status"], missing["reason"]) == ("False", cb.REASON_POD_TEMPLATE_NOT_FOUND)
    job = _condition(w.cluster.get(cb.KIND, "job", "default"), cb.READY_FOR_PROVISIONING)
    assert (job["status"], job["reason"]) == ("False", cb.REASON_RESOLUTION_FAILED)
    assert 'unsupported scalableRef API group "batch"' in job["message"]
    assert w.karpy.buffers is not None and w.karpy.buffers.pods() == []


def test_a_buffer_alone_launches_a_node_that_emptiness_keeps() -> None:
    w = _world()
    pool = b.nodepool_manifest()
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    w.cluster.create(pool)
    w.cluster.create({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t", "namespace": "default"},
                      "template": _deployment("x", 1, cpu="1")["spec"]["template"]})
    w.cluster.create(_buffer("room", {"podTemplateRef": {"name": "t"}, "replicas": 2}))
    w.run_for(120.0)
    claims = w.cluster.list("NodeClaim")
    assert len(claims) >= 1
    names = {c["metadata"]["name"] for c in claims}
    w.run_for(1800.0)  # half an hour of emptiness: the buffer's node stays
    assert {c["metadata"]["name"] for c in w.cluster.list("NodeClaim")} == names
    assert not [c for c in w.cluster.list("NodeClaim") if c["metadata"].get("deletionTimestamp")]
    cond = _condition(w.cluster.get(cb.KIND, "room", "default"), cb.PROVISIONING)
    assert (cond["status"], cond["reason"]) == ("True", cb.REASON_FITS_EXISTING)


def test_room_for_a_buffer_on_nodes_that_come_up_at_once_is_kept_before_the_next_scheduling_run() -> None:
    # On KWOK a node is Ready within a second of its launch: emptiness (consolidateAfter 0s) looks at it long
    # before the provisioner's next 30 s run has placed the virtual pods on it as an existing node. The
    # NodeClaims the run launched for virtual pods hold them from their creation (found on the real cluster).
    w = b.make_world(settings_=settings.Settings(cluster_name="test", feature_gates=(("CapacityBuffer", True),)),
                     launch_latency=1.0, startup_taint_delay=0.0)
    pool = b.nodepool_manifest()
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    w.cluster.create(pool)
    w.cluster.create({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t", "namespace": "default"},
                      "template": _deployment("x", 1, cpu="1")["spec"]["template"]})
    w.cluster.create(_buffer("room", {"podTemplateRef": {"name": "t"}, "replicas": 2}))
    for _ in range(60):
        w.run_for(1.0)
        if names := {c["metadata"]["name"] for c in w.cluster.list("NodeClaim")}:
            break
    assert names
    for _ in range(12):  # two minutes, every 10 s: nothing deleted, nothing launched again
        w.run_for(10.0)
        claims = w.cluster.list("NodeClaim")
        assert {c["metadata"]["name"] for c in claims} == names
        assert not [c for c in claims if c["metadata"].get("deletionTimestamp")]


def test_deleting_the_buffer_lets_emptiness_remove_its_node() -> None:
    w = _world()
    pool = b.nodepool_manifest()
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}
    w.cluster.create(pool)
    w.cluster.create({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t", "namespace": "default"},
                      "template": _deployment("x", 1, cpu="1")["spec"]["template"]})
    w.cluster.create(_buffer("room", {"podTemplateRef": {"name": "t"}, "replicas": 1}))
    w.run_for(300.0)
    assert w.cluster.list("NodeClaim")
    w.cluster.delete(cb.KIND, "room", "default")
    w.run_for(900.0)
    assert w.cluster.list("NodeClaim") == []


class _NoCRD:
    def list(self, kind: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        raise kube_errors.NotFound(f"the server could not find the requested resource ({kind})")


def test_a_cluster_without_the_crd_is_looked_at_again_later_not_retried_in_a_loop() -> None:
    buffers = capacitybuffer.Buffers(_NoCRD(), b.make_world().clock)  # type: ignore[arg-type]
    assert buffers.reconcile(capacitybuffer.KEY) == capacitybuffer.MISSING_CRD_INTERVAL
    assert buffers.pods() == []


def _started_after(result: run_result.Result, t: float) -> list[float]:
    """Seconds from creation to start of each pod created ``t`` seconds into the run (by the scale step)."""
    def ts(s: str) -> float:
        return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    out = []
    for p in result.objects["pods"]:
        created = ts(p["metadata"]["creationTimestamp"]) - result.start
        if abs(created - t) < 1.0 and (p.get("status") or {}).get("startTime"):
            out.append(ts(p["status"]["startTime"]) - created - result.start)
    return out


def test_the_example_keeps_room_so_new_pods_start_at_once_and_consolidation_keeps_it() -> None:
    text = EXAMPLE.read_text()
    with_buffer = engine.Simulation(scenario.load_text(text, source=str(EXAMPLE))).run()
    without = engine.Simulation(scenario.load_text(text.replace("featureGates: {CapacityBuffer: true}",
                                                                "featureGates: {CapacityBuffer: false}"),
                                                   source=str(EXAMPLE))).run()
    fast = _started_after(with_buffer, 360.0)
    slow = _started_after(without, 360.0)
    assert len(fast) == len(slow) == 2
    assert max(fast) < 5.0  # the room was there: bound and started at once
    assert min(slow) > 30.0  # without the buffer they wait for a node
    # the buffer's room is launched (3 nodes vs 2) and never removed: no node was disrupted
    assert len(with_buffer.objects["nodes"]) == 3 and len(without.objects["nodes"]) == 2
    assert all(not (c.get("metadata") or {}).get("deletionTimestamp") for c in with_buffer.nodeclaims)
    assert len(with_buffer.nodeclaims) == 3


def test_a_scenario_may_hold_a_pod_template_and_a_buffer_on_it() -> None:
    text = EXAMPLE.read_text().replace("""  scalableRef: {apiGroup: apps, kind: Deployment, name: web}
  percentage: 50""", """  podTemplateRef: {name: spare}
  replicas: 2
---
apiVersion: v1
kind: PodTemplate
metadata: {name: spare, namespace: default}
template:
  metadata: {labels: {app: spare}}
  spec:
    containers: [{name: c, image: pause, resources: {requests: {cpu: "1", memory: 2Gi}}}]""")
    result = engine.Simulation(scenario.load_text(text, source="buffer.yaml")).run()
    assert result.unexpected_errors == 0
    # 4 real pods + 2 chunks of room before the scale-up, 6 + 2 after: three 3-pod nodes
    assert len(result.objects["nodes"]) == 3
    (buffer,) = result.objects["capacitybuffers"]
    assert buffer["status"]["replicas"] == 2 and buffer["status"]["podTemplateRef"] == {"name": "spare"}
    assert _condition(buffer, cb.PROVISIONING)["reason"] == cb.REASON_FITS_EXISTING


def test_the_provisioning_condition_says_new_capacity_first_then_that_the_buffer_fits() -> None:
    # buffers_test.go: RequiresNewCapacity while the virtual pods need NodeClaims, FitsExistingCapacity after
    w = _world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t", "namespace": "default"},
                      "template": _deployment("x", 1, cpu="1")["spec"]["template"]})
    w.cluster.create(_buffer("room", {"podTemplateRef": {"name": "t"}, "replicas": 2}))
    w.run_for(3.0)
    first = _condition(w.cluster.get(cb.KIND, "room", "default"), cb.PROVISIONING)
    assert (first["status"], first["reason"]) == ("False", cb.REASON_REQUIRES_NEW)
    assert first["message"] == "2/2 virtual pods required new capacity, 0 failed"
    w.run_for(120.0)
    later = _condition(w.cluster.get(cb.KIND, "room", "default"), cb.PROVISIONING)
    assert (later["status"], later["reason"]) == ("True", cb.REASON_FITS_EXISTING)
    assert w.events("Nominated") == []  # virtual pods get no events


_WRITE_ORDER = """
import json
from karpy import clock
from karpy.controllers import capacitybuffer

class Recorder:
    def patch_status(self, kind, name, patch, namespace):
        print(json.dumps(list(patch["status"])))
        return patch

buffers = capacitybuffer.Buffers(Recorder(), clock.VirtualClock())
obj = {"metadata": {"name": "b", "namespace": "default"}, "status": {"stale": 1, "old": 2}}
buffers._write(obj, {"replicas": 3, "conditions": [], "podTemplateRef": {}, "podTemplateGeneration": 1})
"""


def test_a_buffer_status_write_sends_its_fields_in_the_same_order_whatever_the_hash_seed() -> None:
    """The status patch's keys were a set's order: ``karpy simulate`` printed CapacityBuffer status fields in
    an order that changed from one process to the next (PYTHONHASHSEED)."""
    import os
    import subprocess
    import sys

    orders = set()
    for seed in ("0", "1", "2", "3", "4"):
        out = subprocess.run([sys.executable, "-c", _WRITE_ORDER], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        orders.add(out.stdout.strip())
    assert orders == {'["replicas", "conditions", "podTemplateRef", "podTemplateGeneration", "stale", "old"]'}
