"""Dynamic Resource Allocation on the real v1.34 control plane (``resource.k8s.io/v1``, on by default since
DRA went GA in Kubernetes 1.34) through `karpy controller --cloud-provider kwok`.

A DeviceClass with no ResourceSlice behind it, a ResourceClaimTemplate, and a Deployment whose pods claim
a device from it (``spec.resourceClaims`` + ``resources.claims``) beside a plain one. The real
kube-controller-manager creates each pod's ResourceClaim and the real kube-scheduler leaves the pods
Unschedulable. The DRA pods select a NodePool of their own, so a NodeClaim launched for them would show.
As karpy documents (``docs/capacity-reservations.md``, Karpenter v1.14's
``scheduler.go`` with ``IGNORE_DRA_REQUESTS=true``, its default): no NodeClaim is launched for the DRA
pods, each gets ``FailedScheduling`` "Failed to schedule pod, pod has Dynamic Resource Allocation
requirements that are not yet supported by Karpenter", the plain pods are provisioned as usual. With
``IGNORE_DRA_REQUESTS=false`` (Karpenter would allocate devices from ResourceSlices; karpy cannot) the
pods stay pending with karpy's own reason and the controller warns at start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import controller_process as cp
from karpy.provisioning import dra
from realcluster import workloads as w
from realcluster.conftest import Scope, running_controller, wait_until
from support import realcluster

CLASS = "rc-dra.example.com"


def _claiming(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    dep = w.deployment(name, namespace, replicas, cpu="100m", pool="dra-claims")
    spec = dep["spec"]["template"]["spec"]
    spec["resourceClaims"] = [{"name": "device", "resourceClaimTemplateName": "one-device"}]
    spec["containers"][0]["resources"]["claims"] = [{"name": "device"}]
    return dep


def _template(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-device", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "device", "exactly": {"deviceClassName": CLASS}}]}}}}


def _failed(real: realcluster.RealCluster, namespace: str, message: str) -> list[dict[str, Any]]:
    events = real.get_json("events", "-n", namespace, "--field-selector", "reason=FailedScheduling")["items"]
    return [e for e in events if e["message"].startswith("Failed to schedule pod, " + message)]


def _unschedulable(real: realcluster.RealCluster, namespace: str, selector: str, count: int) -> bool:
    pods = w.pods(real, namespace, selector)
    return len(pods) == count and all(
        not p["spec"].get("nodeName") and any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                                              for c in p.get("status", {}).get("conditions", []))
        for p in pods)


@pytest.fixture
def device_class(real: realcluster.RealCluster) -> Iterator[str]:
    real.apply([{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
                 "spec": {}}])
    try:
        yield CLASS
    finally:
        real.kubectl("delete", "deviceclass", CLASS, "--wait=false", check=False)


def _apply_world(real: realcluster.RealCluster, scope: Scope, ns: str) -> None:
    real.apply([_template(ns)])
    scope.nodepool(w.nodepool("dra"))
    scope.nodepool(w.nodepool("dra-claims"))  # the DRA pods' own NodePool: nothing may launch in it
    real.apply([_claiming("claims", ns, 2), w.deployment("plain", ns, 1, cpu="100m", pool="dra")])


def test_the_built_api_server_is_1_34_and_serves_dra_v1(real: realcluster.RealCluster) -> None:
    info = json.loads(real.kubectl("get", "--raw", "/version").stdout)
    assert (info["major"], info["minor"].rstrip("+")) == ("1", "34"), info
    assert "resource.k8s.io/v1" in real.kubectl("api-versions").stdout.split()


def test_pods_claiming_a_device_stay_pending_with_karpenters_reason_and_the_others_get_a_node(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller, device_class: str) -> None:
    ns = scope.namespace("rc-dra")
    _apply_world(real, scope, ns)
    wait_until(lambda: w.running(real, ns, "app=plain", 1), 120,
               lambda: f"the plain pod running:\n{controller.log()[-3000:]}")
    wait_until(lambda: len(_failed(real, ns, dra.MESSAGE)) >= 2, 60,
               lambda: f"FailedScheduling for both DRA pods:\n{controller.log()[-3000:]}")
    assert _unschedulable(real, ns, "app=claims", 2)
    claims = real.get_json("resourceclaims", "-n", ns)["items"]
    assert len(claims) == 2 and not any(c.get("status", {}).get("allocation") for c in claims)
    assert {e["involvedObject"]["kind"] for e in _failed(real, ns, dra.MESSAGE)} == {"Pod"}
    assert len(w.pool_claims(real, "dra")) == 1 and not w.pool_claims(real, "dra-claims")
    assert dra.LOG_MESSAGE in controller.log()


@pytest.fixture
def strict_controller(real: realcluster.RealCluster, installed: Path, tmp_path: Path) -> Iterator[cp.Controller]:
    with running_controller(real, installed, tmp_path / "karpy.log", env={"IGNORE_DRA_REQUESTS": "false"}) as c:
        yield c


@pytest.fixture
def strict_scope(real: realcluster.RealCluster, strict_controller: cp.Controller) -> Iterator[Scope]:
    s = Scope(real)
    yield s
    s.cleanup()


def test_with_ignore_dra_requests_false_the_pods_stay_pending_with_karpys_own_reason(
        real: realcluster.RealCluster, strict_scope: Scope, strict_controller: cp.Controller,
        device_class: str) -> None:
    ns = strict_scope.namespace("rc-dra-strict")
    _apply_world(real, strict_scope, ns)
    wait_until(lambda: w.running(real, ns, "app=plain", 1), 120,
               lambda: f"the plain pod running:\n{strict_controller.log()[-3000:]}")
    wait_until(lambda: len(_failed(real, ns, dra.NOT_ALLOCATED)) >= 2, 60,
               lambda: f"FailedScheduling for both DRA pods:\n{strict_controller.log()[-3000:]}")
    assert _unschedulable(real, ns, "app=claims", 2)
    assert not _failed(real, ns, dra.MESSAGE)
    assert len(w.pool_claims(real, "dra")) == 1 and not w.pool_claims(real, "dra-claims")
    assert "setting ignoreDRARequests (IGNORE_DRA_REQUESTS) = False" in strict_controller.log()
