"""The NodeClaim lifecycle: launch, registration, initialization, liveness, insufficient capacity."""

from __future__ import annotations

from karpy.api import labels
from karpy.cloudprovider import errors as cp_errors
from karpy.kube import interface

from . import builders as b

STARTUP_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}


def test_a_nodeclaim_is_launched_registered_and_initialized_with_karpenters_labels_taints_and_finalizer() -> None:
    w = b.make_world(launch_latency=30.0, startup_taint_delay=5.0)
    w.cluster.create(b.nodepool_manifest(startup_taints=[STARTUP_TAINT]))
    w.cluster.create(b.pending_pod("web"))
    w.at(1.0)

    (claim,) = w.nodeclaims()
    name = interface.name_of(claim)
    assert claim["status"]["providerID"] == f"kwok://{name}"
    assert claim["status"]["capacity"]["cpu"] == "1"
    assert claim["status"]["allocatable"]["cpu"] == "900m"
    assert claim["metadata"]["labels"][labels.INSTANCE_TYPE] == "fake-it-0"
    assert claim["metadata"]["labels"][labels.CAPACITY_TYPE] == "spot"
    assert b.condition(claim, "Launched") == "True"
    assert b.condition(claim, "Registered") == "Unknown"
    assert b.condition(claim, "Ready") == "Unknown"

    w.at(31.0)  # the kubelet registered the node at 31 s; the startup taint stays for 5 s
    claim = w.cluster.get("NodeClaim", name)
    node = w.cluster.get("Node", claim["status"]["nodeName"])
    assert b.condition(claim, "Registered") == "True"
    assert b.condition(claim, "Initialized") == "Unknown"
    assert node["metadata"]["labels"][labels.REGISTERED] == "true"
    assert node["metadata"]["labels"][labels.NODEPOOL] == "default"
    assert labels.INITIALIZED not in node["metadata"]["labels"]
    assert node["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    assert [(r["kind"], r["name"]) for r in node["metadata"]["ownerReferences"]] == [("NodeClaim", name)]
    assert b.taint_keys(node) == {("example.com/agent-not-ready", "NoSchedule")}  # unregistered removed

    w.at(36.0)
    claim = w.cluster.get("NodeClaim", name)
    node = w.cluster.get("Node", claim["status"]["nodeName"])
    assert node["metadata"]["labels"][labels.INITIALIZED] == "true"
    assert b.condition(claim, "Initialized") == "True"
    assert b.condition(claim, "Ready") == "True"
    m = w.karpy.metrics
    for metric in ("karpenter_nodeclaims_launched_total", "karpenter_nodeclaims_registered_total",
                   "karpenter_nodeclaims_initialized_total", "karpenter_nodes_created_total"):
        assert m.value(metric, nodepool="default") == 1, metric


def test_a_nodeclaim_that_cannot_launch_is_retried_and_deleted_after_the_launch_timeout() -> None:
    w = b.make_world()
    w.bridge.create_errors = [cp_errors.CreateError("throttled", reason="RequestLimitExceeded", retryable=True)
                              for _ in range(100)]
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(1.0)
    (claim,) = w.nodeclaims()
    name = interface.name_of(claim)
    assert b.condition(claim, "Launched") == "False"
    w.at(60.0)
    attempts = w.bridge.creates
    assert 4 <= attempts <= 10  # exponential backoff, not a hot loop
    w.at(300.0)
    assert name in {interface.name_of(c) for c in w.nodeclaims()}
    w.at(302.0)
    assert name not in {interface.name_of(c) for c in w.nodeclaims()}
    (event,) = w.events("LaunchTimeout", name=name)
    assert event["type"] == "Warning"
    assert w.karpy.metrics.value("karpenter_nodeclaims_disrupted_total", reason="launch_timeout") == 1
    assert w.karpy.metrics.value("karpenter_cloudprovider_errors_total", method="Create",
                                 error="RequestLimitExceeded") >= attempts


def test_a_nodeclaim_whose_node_never_registers_is_deleted_after_15_minutes_and_its_instance_terminated() -> None:
    w = b.make_world(with_kubelet=False)
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(1.0)
    (claim,) = w.nodeclaims()
    name = interface.name_of(claim)
    pid = claim["status"]["providerID"]
    w.at(900.0)
    assert w.cluster.get("NodeClaim", name)
    assert pid in w.running_instances()
    w.at(902.0)
    assert name not in {interface.name_of(c) for c in w.nodeclaims()}
    assert pid not in w.running_instances()
    assert w.events("RegistrationTimeout", name=name)
    assert w.karpy.metrics.value("karpenter_nodeclaims_disrupted_total", reason="registration_timeout") == 1
    assert w.karpy.metrics.value("karpenter_nodeclaims_terminated_total", nodepool="default") == 1


def test_insufficient_capacity_on_the_cheapest_offering_leads_to_a_nodeclaim_on_another_offering() -> None:
    w = b.make_world()
    out = [("fake-it-0", zone, ct) for zone, ct in (("test-zone-1", "spot"), ("test-zone-2", "spot"),
                                                     ("test-zone-1", "on-demand"), ("test-zone-2", "on-demand"),
                                                     ("test-zone-3", "on-demand"))]
    w.bridge.create_errors = [cp_errors.InsufficientCapacityError(out)]
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(1.0)
    assert w.nodeclaims() == []  # the first claim was deleted at once
    (ice,) = w.events("InsufficientCapacityError")
    assert ice["type"] == "Warning"
    assert ice["message"].startswith(f"NodeClaim {ice['involvedObject']['name']} event: insufficient capacity")
    assert len(w.karpy.offerings) == 5

    w.at(3.0)  # the provisioner planned the pod again
    (claim,) = w.nodeclaims()
    options = b.requirement(claim, labels.INSTANCE_TYPE)
    assert options is not None and "fake-it-0" not in options["values"]
    assert claim["metadata"]["labels"][labels.INSTANCE_TYPE] == "fake-it-1"
    assert claim["status"]["providerID"]

    w.at(200.0)  # the cache entries expire after 3 minutes
    assert len(w.karpy.offerings) == 0


def test_a_non_retryable_launch_error_deletes_the_nodeclaim_with_a_warning() -> None:
    w = b.make_world()
    w.bridge.create_errors = [cp_errors.CreateError("no compatible instance type", reason="NoCompatibleInstanceTypes")]
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(1.0)
    (event,) = w.events("LaunchFailed")
    assert "no compatible instance type" in event["message"]
    assert all(interface.name_of(c) != event["involvedObject"]["name"] for c in w.nodeclaims())


def test_an_unreadable_nodeclaim_gets_a_warning_and_does_not_stop_the_others() -> None:
    w = b.make_world()
    bad = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "broken"},
           "spec": {"requirements": [{"key": "team", "operator": "Sometimes"}]}}
    w.cluster.create(bad)
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(40.0)
    (event,) = w.events("InvalidNodeClaim", name="broken")
    assert "requirements[0].operator" in event["message"]
    launched = [c for c in w.nodeclaims() if interface.name_of(c) != "broken"]
    assert len(launched) == 1 and b.condition(launched[0], "Initialized") == "True"
