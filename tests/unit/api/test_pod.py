"""Pods: parsing manifests and templates, effective requests, scheduling constraints, round trips."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from karpy.api import errors, meta, node, pod, podspec, selectors

GI = 2**30 * 1000
MI = 2**20 * 1000

KUBECTL_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-1",
        "namespace": "shop",
        "uid": "5f1c8f35-0e2a-4c1e-9c61-1b2f1f4f9d10",
        "resourceVersion": "123456",
        "creationTimestamp": "2026-01-01T00:00:05Z",
        "generateName": "web-",
        "labels": {"app": "web", "pod-template-hash": "7d9c5"},
        "annotations": {"karpenter.sh/do-not-disrupt": "true"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-7d9c5",
                "uid": "abc",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "managedFields": [
            {"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:metadata": {}}}
        ],
    },
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1.27",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "1500m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
                "terminationMessagePath": "/dev/termination-log",
                "volumeMounts": [{"name": "kube-api-access-x", "mountPath": "/var/run/secrets"}],
            }
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
            {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
        ],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}},
            {
                "name": "scratch",
                "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}},
            },
            {"name": "kube-api-access-x", "projected": {"sources": []}},
        ],
    },
    "status": {
        "phase": "Pending",
        "qosClass": "Burstable",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient cpu.",
                "lastTransitionTime": "2026-01-01T00:00:06Z",
            }
        ],
    },
}


def manifest(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    md = {"name": "p", "namespace": "default", **metadata}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def container(name: str, restart_policy: str | None = None, /, **requests: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def test_a_kubectl_style_pod_with_managed_fields_and_status_parses() -> None:
    p = pod.Pod.from_manifest(KUBECTL_POD)
    assert p.key == "shop/web-1"
    assert p.labels["app"] == "web"
    assert p.metadata.creation_timestamp == 1_767_225_605.0
    assert p.owner_kind == "ReplicaSet"
    assert not p.is_daemonset_pod
    assert p.is_unschedulable
    assert p.do_not_disrupt
    assert p.termination_grace_period_seconds == 30
    assert p.requests == {"cpu": 1500, "memory": 2 * GI, "pods": 1000}
    assert p.tolerations[0] == podspec.Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute", 300)
    assert p.pvc_names == ("web-data", "web-1-scratch")
    assert p.volumes[1].storage_class_name == "gp3"


def test_a_pod_survives_a_round_trip_through_its_manifest() -> None:
    p = pod.Pod.from_manifest(KUBECTL_POD)
    out = p.to_manifest()
    assert out["status"]["phase"] == "Pending"
    assert out["status"]["conditions"][0]["reason"] == "Unschedulable"
    assert "managedFields" not in out["metadata"]
    assert pod.Pod.from_manifest(out) == p


def test_a_scheduled_pod_writes_its_node_name_back() -> None:
    p = pod.Pod.from_manifest(manifest({"nodeName": "n1", "containers": [container("a", cpu=1)]}))
    assert p.node_name == "n1"
    assert p.to_manifest()["spec"]["nodeName"] == "n1"


def test_a_minimal_scenario_pod_lands_in_the_default_namespace_with_defaults() -> None:
    p = pod.Pod.from_manifest({"kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": [{}]}})
    assert p.key == "default/x"
    assert p.phase == "Pending"
    assert p.scheduler_name == "default-scheduler"
    assert p.requests == {"pods": 1000}


def test_requests_sum_regular_containers_and_count_the_pod_itself() -> None:
    p = pod.Pod.from_manifest(
        manifest({"containers": [container("a", cpu=1, memory="2048Mi"), container("b", cpu="500m")]})
    )
    assert p.requests == {"cpu": 1500, "memory": 2 * GI, "pods": 1000}


def test_a_large_init_container_sets_the_pod_request() -> None:
    p = pod.Pod.from_manifest(
        manifest(
            {
                "initContainers": [container("migrate", cpu=4, memory="1Gi")],
                "containers": [container("app", cpu=1, memory="2Gi")],
            }
        )
    )
    assert p.requests["cpu"] == 4000
    assert p.requests["memory"] == 2 * GI


def test_native_sidecars_add_to_the_containers_and_to_later_init_containers() -> None:
    p = pod.Pod.from_manifest(
        manifest(
            {
                "initContainers": [
                    container("istio", "Always", cpu="500m", memory="128Mi"),
                    container("setup", cpu=2),
                    container("log", "Always", cpu="250m"),
                ],
                "containers": [container("app", cpu=1, memory="1Gi")],
            }
        )
    )
    # regular + sidecars = 1 + 0.5 + 0.25 = 1.75 cpu; setup runs beside istio: 2 + 0.5 = 2.5 cpu
    assert p.requests["cpu"] == 2500
    assert p.requests["memory"] == 1 * GI + 128 * MI


def test_sidecars_that_outweigh_an_init_container_keep_the_sum() -> None:
    p = pod.Pod.from_manifest(
        manifest(
            {
                "initContainers": [container("setup", cpu="100m"), container("proxy", "Always", cpu=1)],
                "containers": [container("app", cpu=1)],
            }
        )
    )
    assert p.requests["cpu"] == 2000


def test_overhead_and_extended_resources_are_part_of_the_request() -> None:
    spec = {
        "overhead": {"cpu": "250m", "memory": "120Mi"},
        "containers": [
            container("train", cpu=8, memory="30Gi", **{"nvidia.com/gpu": 1, "vpc.amazonaws.com/pod-eni": 1})
        ],
    }
    p = pod.Pod.from_manifest(manifest(spec))
    assert p.requests == {
        "cpu": 8250,
        "memory": 30 * GI + 120 * MI,
        "nvidia.com/gpu": 1000,
        "vpc.amazonaws.com/pod-eni": 1000,
        "pods": 1000,
    }


def test_a_limit_without_a_request_becomes_the_request() -> None:
    c = {"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": 1, "nvidia.com/gpu": 2}}}
    p = pod.Pod.from_manifest(manifest({"containers": [c]}))
    assert p.requests["cpu"] == 100
    assert p.requests["nvidia.com/gpu"] == 2000


def test_requests_are_computed_once() -> None:
    p = pod.Pod.from_manifest(manifest({"containers": [container("a", cpu=1)]}))
    assert p.requests is p.requests


def test_a_bad_quantity_error_names_the_pod_and_the_field_path() -> None:
    bad = manifest(
        {"containers": [container("a", cpu=1), container("b", cpu="1.5 cores")]}, name="web-1"
    )
    with pytest.raises(errors.ValidationError) as info:
        pod.Pod.from_manifest(bad)
    err = info.value.errors[0]
    assert err.obj == "Pod default/web-1"
    assert err.path == "spec.containers[1].resources.requests.cpu"
    assert err.found == "1.5 cores"
    assert "Pod default/web-1: spec.containers[1].resources.requests.cpu" in str(info.value)


def test_a_pod_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(errors.ValidationError):
        pod.Pod.from_manifest(["not", "a", "pod"])  # type: ignore[arg-type]


def test_tolerations_affinity_and_spread_parse() -> None:
    spec = yaml.safe_load(
        """
        containers: [{name: a, resources: {requests: {cpu: 1}}}]
        nodeSelector: {kubernetes.io/arch: arm64}
        tolerations:
        - operator: Exists
        - {key: gpu, operator: Exists, effect: NoSchedule}
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}
              - matchExpressions:
                - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
            preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 50
              preference:
                matchExpressions:
                - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: [5]}
          podAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 10
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector: {matchLabels: {app: cache}}
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector: {matchLabels: {app: web}}
              namespaceSelector: {}
              matchLabelKeys: [pod-template-hash]
        topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector: {matchLabels: {app: web}}
          minDomains: 3
          nodeTaintsPolicy: Honor
        - {maxSkew: 2, topologyKey: kubernetes.io/hostname}
        """
    )
    p = pod.Pod.from_manifest(manifest(spec))
    assert p.node_selector == {"kubernetes.io/arch": "arm64"}
    assert p.tolerations[0] == podspec.Toleration(operator="Exists")
    assert p.node_affinity is not None
    assert len(p.node_affinity.required) == 2
    assert p.node_affinity.required[0].match_expressions[0].values == ("us-east-1a", "us-east-1b")
    assert p.node_affinity.preferred[0].weight == 50
    assert p.node_affinity.preferred[0].preference.match_expressions[0].values == ("5",)
    assert p.pod_affinity is not None and p.pod_affinity.required == ()
    assert p.pod_affinity.preferred[0].term.label_selector == selectors.LabelSelector({"app": "cache"})
    assert p.pod_anti_affinity is not None
    anti = p.pod_anti_affinity.required[0]
    assert anti.namespace_selector is not None and anti.namespace_selector.is_empty
    assert anti.match_label_keys == ("pod-template-hash",)
    zone, host = p.topology_spread_constraints
    assert zone.when_unsatisfiable == "ScheduleAnyway"
    assert (zone.min_domains, zone.node_taints_policy) == (3, "Honor")
    assert zone.node_affinity_policy == "Honor"
    assert (host.when_unsatisfiable, host.label_selector, host.node_taints_policy) == (
        "DoNotSchedule", None, "Ignore")
    assert pod.Pod.from_manifest(p.to_manifest()) == p


def test_an_unknown_when_unsatisfiable_is_rejected_with_its_path() -> None:
    spec = {"containers": [], "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]}
    with pytest.raises(errors.ValidationError) as info:
        pod.Pod.from_manifest(manifest(spec))
    assert info.value.errors[0].path == "spec.topologySpreadConstraints[0].whenUnsatisfiable"


def test_a_toleration_tolerates_per_kubernetes_rules() -> None:
    taint = node.Taint("dedicated", "web", "NoSchedule")
    assert podspec.Toleration("dedicated", "Equal", "web", "NoSchedule").tolerates(taint)
    assert podspec.Toleration("dedicated", "Equal", "web").tolerates(taint)
    assert podspec.Toleration("dedicated", "Exists").tolerates(taint)
    assert podspec.Toleration(operator="Exists").tolerates(taint)
    assert not podspec.Toleration("dedicated", "Equal", "db").tolerates(taint)
    assert not podspec.Toleration("dedicated", "Exists", effect="NoExecute").tolerates(taint)
    assert not podspec.Toleration("other", "Exists").tolerates(taint)


def test_host_ports_come_from_containers_and_init_containers() -> None:
    spec = yaml.safe_load(
        """
        initContainers:
        - {name: i, ports: [{containerPort: 9000, hostPort: 9000, protocol: UDP}]}
        containers:
        - name: c
          ports: [{containerPort: 80}, {containerPort: 443, hostPort: 8443, hostIP: 10.0.0.1}]
        """
    )
    p = pod.Pod.from_manifest(manifest(spec))
    assert p.host_ports() == (("0.0.0.0", "UDP", 9000), ("10.0.0.1", "TCP", 8443))


def test_a_host_network_pod_uses_its_container_ports_on_the_host() -> None:
    p = pod.Pod.from_manifest(manifest({"hostNetwork": True, "containers": [
        {"name": "c", "ports": [{"containerPort": 10250}]}]}))
    assert p.host_ports() == (("0.0.0.0", "TCP", 10250),)


def test_daemonset_and_mirror_pods_are_recognised() -> None:
    owned = manifest({"containers": []}, ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True}])
    mirror = manifest({"containers": []}, annotations={"kubernetes.io/config.mirror": "abc"})
    plain = manifest({"containers": []}, ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds"}])  # not the controller
    assert pod.Pod.from_manifest(owned).is_daemonset_pod
    assert pod.Pod.from_manifest(mirror).is_daemonset_pod
    assert not pod.Pod.from_manifest(plain).is_daemonset_pod
    assert pod.Pod.from_manifest(plain).owner_kind is None


def test_critical_terminal_and_do_not_disrupt_flags() -> None:
    critical = pod.Pod.from_manifest(manifest({"priorityClassName": "system-node-critical"}))
    high = pod.Pod.from_manifest(manifest({"priority": 2_000_001_000}))
    done = pod.Pod.from_manifest({**manifest({}), "status": {"phase": "Succeeded"}})
    legacy = pod.Pod.from_manifest(manifest({}, annotations={"karpenter.sh/do-not-evict": "true"}))
    plain = pod.Pod.from_manifest(manifest({"priority": 1000}))
    assert critical.is_critical and high.is_critical and not plain.is_critical
    assert done.is_terminal and not plain.is_terminal
    assert legacy.do_not_disrupt and not plain.do_not_disrupt
    assert not plain.is_unschedulable


def test_a_pod_from_a_template_is_named_owned_and_labelled() -> None:
    owner = meta.OwnerReference("apps/v1", "DaemonSet", "agent", controller=True)
    template = {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {"containers": [container("a", cpu="200m")]},
    }
    p = pod.Pod.from_template(template, name="agent-template", namespace="monitoring", owner=owner)
    assert p.key == "monitoring/agent-template"
    assert p.labels == {"app": "agent"}
    assert p.is_daemonset_pod
    assert p.requests["cpu"] == 200


def test_a_bad_template_names_the_template() -> None:
    template = {"spec": {"containers": [container("a", memory="big")]}}
    with pytest.raises(errors.ValidationError) as info:
        pod.Pod.from_template(template, name="t", namespace="default", owner=None)
    err = info.value.errors[0]
    assert (err.obj, err.path) == ("PodTemplate default/t", "spec.containers[0].resources.requests.memory")


def test_equal_pods_hash_alike() -> None:
    a = pod.Pod.from_manifest(KUBECTL_POD)
    b = pod.Pod.from_manifest(KUBECTL_POD)
    assert a == b and len({a, b}) == 1


def test_the_builder_makes_a_pod_with_one_container() -> None:
    p = pod.build("web", requests={"cpu": "250m"}, labels={"app": "web"}, nodeSelector={"a": "b"})
    assert (p.key, p.requests["cpu"], p.node_selector) == ("default/web", 250, {"a": "b"})
