"""The Helm chart ``charts/karpy``, rendered by the real ``helm template``: Karpenter's value names,
what its templates render, least-privilege RBAC, and every rendered object valid for the Kubernetes API
(kubernetes-validate, strict). Skipped when helm is not built (scripts/realcluster/build.sh), as the
real-cluster suite is; tests/realcluster/test_chart.py also has the real apiserver accept them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from karpy import controller_cli, controller_run, settings_sources
from karpy.cloudprovider.azure import nap
from karpy.controllers import leader
from karpy.install import chart

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "karpy"
KUBERNETES_VERSION = "1.32"
REQUIRED = {"settings": {"clusterName": "prod"}}

pytestmark = pytest.mark.skipif(chart.helm_binary() is None,
                                reason="helm is not built (scripts/realcluster/build.sh) nor on PATH")

KARPENTER_VALUES = (
    "nameOverride", "fullnameOverride", "additionalLabels", "additionalAnnotations", "imagePullPolicy",
    "imagePullSecrets", "service.annotations", "serviceAccount.create", "serviceAccount.name",
    "serviceAccount.annotations", "additionalClusterRoleRules", "serviceMonitor.enabled",
    "serviceMonitor.additionalLabels", "serviceMonitor.endpointConfig", "replicas", "revisionHistoryLimit",
    "strategy", "podLabels", "podAnnotations", "podDisruptionBudget.name", "podDisruptionBudget.maxUnavailable",
    "podSecurityContext", "priorityClassName", "terminationGracePeriodSeconds", "hostNetwork", "schedulerName",
    "dnsPolicy", "dnsConfig", "nodeSelector", "affinity", "topologySpreadConstraints", "tolerations", "extraVolumes",
    "controller.containerName", "controller.image.repository", "controller.image.tag", "controller.image.digest",
    "controller.env", "controller.envFrom", "controller.resources", "controller.extraVolumeMounts",
    "controller.metrics.port", "controller.healthProbe.port", "logLevel", "settings.batchMaxDuration",
    "settings.batchIdleDuration", "settings.clusterName", "settings.clusterEndpoint", "settings.isolatedVPC",
    "settings.vmMemoryOverheadPercent", "settings.interruptionQueue", "settings.reservedENIs",
    "settings.featureGates.nodeRepair", "settings.featureGates.reservedCapacity",
    "settings.featureGates.spotToSpotConsolidation", "settings.featureGates.nodeOverlay",
    "settings.featureGates.staticCapacity",
)
"""Value names of Karpenter's chart (charts/karpenter/values.yaml) that karpy's chart keeps."""
KARPY_ONLY = ("cloudProvider", "settings.kubeClientQPS", "settings.kubeClientBurst", "settings.napMode",
              "leaderElection.id")
"""karpy's values Karpenter's chart does not have (KUBE_CLIENT_QPS/BURST are flags there; the Lease
name is a flag there too, and NAP mode is AKS-managed Karpenter's)."""
SETTINGS_ENV = {env: key for key, env in settings_sources.ENVIRONMENT.items()}
"""The environment ``karpy controller`` reads (Karpenter's names) -> the camelCase setting."""


def _leaves(values: Any, prefix: str = "") -> set[str]:
    if isinstance(values, dict) and values:
        out: set[str] = set()
        for k, v in values.items():
            out |= _leaves(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return {prefix}


@functools.cache
def _defaults() -> dict[str, Any]:
    return dict(chart.load(CHART)[1])


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return chart.render(CHART, chart.merge(REQUIRED, values or {}))


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return obj


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(c)


def env(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(objects)["env"]}


def expect_valid(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        if obj["kind"] == "ServiceMonitor":
            continue  # a prometheus-operator CRD: not in the Kubernetes schemas
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


# ----------------------------------------------------------------------------------- structure


def test_chart_yaml_names_karpy_with_a_version_and_app_version() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == "karpy"
    assert meta["version"] and meta["appVersion"]
    assert (CHART / "crds").is_dir() and (CHART / "templates" / "_helpers.tpl").is_file()


def test_values_use_karpenters_names_and_only_a_few_of_karpys_own() -> None:
    values = _defaults()
    missing = [p for p in KARPENTER_VALUES if not chart.has_path(values, p)]
    assert missing == []
    theirs = set(KARPENTER_VALUES) | set(KARPY_ONLY)
    unknown = sorted(p for p in _leaves(values) if not any(p == t or p.startswith(t + ".") for t in theirs))
    assert unknown == [], "values Karpenter's chart does not have: name them in KARPY_ONLY or rename them"
    assert values["replicas"] == 2 and values["logLevel"] == "info"


def test_every_value_a_template_reads_exists_in_values_yaml() -> None:
    _, values, templates = chart.load(CHART)
    paths = chart.value_paths(templates)
    assert len(paths) > 40
    assert sorted(p for p in paths if not chart.has_path(values, p)) == []


def test_the_chart_cannot_be_rendered_without_a_cluster_name() -> None:
    with pytest.raises(chart.ChartError, match=r"settings\.clusterName"):
        chart.render(CHART)


# ------------------------------------------------------------------------------ default render


def test_the_defaults_render_karpenters_objects_all_valid_for_the_api_server() -> None:
    objects = render()
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objects)
    assert kinds == [("ClusterRole", "karpy"), ("ClusterRole", "karpy-admin"), ("ClusterRole", "karpy-core"),
                     ("ClusterRoleBinding", "karpy"), ("ClusterRoleBinding", "karpy-core"), ("Deployment", "karpy"),
                     ("PodDisruptionBudget", "karpy"), ("Role", "karpy"), ("RoleBinding", "karpy"),
                     ("Service", "karpy"), ("ServiceAccount", "karpy")]
    expect_valid(objects)


def test_two_replicas_run_off_the_nodes_karpy_manages_on_different_nodes_and_zones() -> None:
    spec = one(render(), "Deployment")["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]
    (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    labels = spec["template"]["metadata"]["labels"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert all(labels[k] == v for k, v in anti["labelSelector"]["matchLabels"].items())
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]


def test_the_controller_runs_karpy_controller_non_root_on_a_read_only_root_file_system() -> None:
    c = container(render())
    assert c["args"] == ["controller", "--cloud-provider", "aws", "--leader-election-id", "karpenter-leader-election"]
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"http-metrics": 8080, "http": 8081}
    assert (c["livenessProbe"]["httpGet"], c["readinessProbe"]["httpGet"]) == (
        {"path": "/healthz", "port": "http"}, {"path": "/readyz", "port": "http"})
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]


def test_the_settings_reach_the_controller_as_the_environment_karpy_reads() -> None:
    objects = render({"settings": {"interruptionQueue": "Karpenter-prod", "clusterEndpoint": "https://k.example",
                                   "featureGates": {"spotToSpotConsolidation": True}, "isolatedVPC": True},
                      "logLevel": "debug"})
    variables = env(objects)
    assert variables["CLUSTER_NAME"] == "prod"
    assert variables["INTERRUPTION_QUEUE"] == "Karpenter-prod"
    assert variables["LOG_LEVEL"] == "debug"
    assert {"SYSTEM_NAMESPACE", "POD_NAME"} <= set(variables)
    assert set(variables) - set(SETTINGS_ENV) == {"SYSTEM_NAMESPACE", "POD_NAME"}
    parsed = settings_sources.load(environ=variables)
    assert parsed.cluster_name == "prod" and parsed.cluster_endpoint == "https://k.example"
    assert parsed.feature_gate("SpotToSpotConsolidation") and not parsed.feature_gate("NodeRepair")
    assert parsed.isolated_vpc and parsed.metrics_port == 8080 and parsed.health_probe_port == 8081
    assert (parsed.kube_client_qps, parsed.kube_client_burst) == (200, 300)


@pytest.mark.parametrize("cloud", controller_run.CLOUD_PROVIDERS)
def test_the_container_args_are_a_karpy_controller_command_line(cloud: str) -> None:
    args = container(render({"cloudProvider": cloud}))["args"]
    assert args[0] == "controller"
    ctx = controller_cli.controller_command.make_context("controller", list(args[1:]))
    assert ctx.params["cloud_provider"] == cloud


def test_unset_settings_are_left_to_karpys_defaults() -> None:
    variables = env(render())
    assert "INTERRUPTION_QUEUE" not in variables and "CLUSTER_ENDPOINT" not in variables
    assert "ISOLATED_VPC" not in variables


# ------------------------------------------------------------------------------------- values


def test_irsa_and_workload_identity_annotations_land_on_the_service_account() -> None:
    irsa = {"serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/K"}}}
    sa = one(render(irsa), "ServiceAccount")
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/K"}
    wi = render({"serviceAccount": {"annotations": {"azure.workload.identity/client-id": "abc"}},
                 "podLabels": {"azure.workload.identity/use": "true"}, "cloudProvider": "azure"})
    assert one(wi, "Deployment")["spec"]["template"]["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    expect_valid(wi)


def test_an_existing_service_account_is_used_when_create_is_false() -> None:
    objects = render({"serviceAccount": {"create": False, "name": "karpenter"}})
    assert [o for o in objects if o["kind"] == "ServiceAccount"] == []
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "karpenter"
    assert one(objects, "ClusterRoleBinding", "karpy-core")["subjects"][0]["name"] == "karpenter"


def test_the_controller_values_shape_the_container() -> None:
    objects = render({"controller": {"image": {"repository": "r.example/karpy", "tag": "1.2.3", "digest": "sha256:ab"},
                                     "env": [{"name": "EXTRA", "value": "1"}],
                                     "resources": {"requests": {"cpu": "1"}}},
                      "replicas": 3, "hostNetwork": True, "dnsPolicy": "Default",
                      "serviceMonitor": {"enabled": True, "endpointConfig": {"interval": "30s"}},
                      "additionalAnnotations": {"team": "platform"}})
    c = container(objects)
    assert c["image"] == "r.example/karpy:1.2.3@sha256:ab"
    assert c["env"][-1] == {"name": "EXTRA", "value": "1"}
    assert c["resources"] == {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}  # helm merges
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "Default"
    assert one(objects, "ServiceMonitor")["spec"]["endpoints"] == [
        {"port": "http-metrics", "path": "/metrics", "interval": "30s"}]
    assert all(o["metadata"]["annotations"]["team"] == "platform" for o in objects)
    expect_valid(objects)


def test_the_pdb_and_the_metrics_service_select_the_controller_pods() -> None:
    objects = render()
    labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    svc = one(objects, "Service")
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"] == [{"name": "http-metrics", "port": 8080, "targetPort": "http-metrics",
                                     "protocol": "TCP"}]


# --------------------------------------------------------------------------------------- RBAC


def _rules(objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    out = []
    for o in objects:
        if o["kind"] in ("ClusterRole", "Role") and not o["metadata"]["name"].endswith("-admin"):
            for r in o["rules"]:
                out += [(g, res, v) for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]]
    return out


def test_rbac_grants_what_karpenter_grants_and_nothing_wild() -> None:
    rules = _rules(render())
    assert not any("*" in t for rule in rules for t in rule)
    assert not any(res in ("secrets", "configmaps") for _, res, _ in rules)
    for needed in [("", "pods/eviction", "create"), ("", "nodes", "delete"), ("", "nodes", "patch"),
                   ("karpenter.sh", "nodeclaims", "create"), ("karpenter.sh", "nodeclaims/status", "patch"),
                   ("karpenter.sh", "nodepools/status", "patch"), ("", "events", "create"), ("", "pods", "list"),
                   ("karpenter.sh", "nodeoverlays", "watch"), ("karpenter.sh", "nodeoverlays/status", "update"),
                   ("karpenter.k8s.aws", "ec2nodeclasses", "watch"), ("karpenter.k8s.aws", "ec2nodeclasses/status",
                                                                      "patch"),
                   ("coordination.k8s.io", "leases", "update"), ("policy", "poddisruptionbudgets", "list")]:
        assert needed in rules, needed
    assert ("", "nodes", "create") not in rules
    assert not any(g == "karpenter.azure.com" for g, _, _ in rules)
    core = one(render(), "ClusterRole", "karpy-core")["rules"]  # kube-dns's address, as Karpenter reads it
    assert {"apiGroups": [""], "resources": ["services"], "resourceNames": ["kube-dns"], "verbs": ["get"]} in core
    (lease_write,) = [r for r in one(render(), "Role")["rules"] if "update" in r["verbs"]]
    assert lease_write["resourceNames"] == [leader.LEASE_NAME] == ["karpenter-leader-election"]


def test_each_cloud_gets_its_own_nodeclass_kind_only() -> None:
    azure = _rules(render({"cloudProvider": "azure"}))
    assert ("karpenter.azure.com", "aksnodeclasses/status", "patch") in azure
    assert not any(g == "karpenter.k8s.aws" for g, _, _ in azure)
    kwok = render({"cloudProvider": "kwok"})
    assert ("", "nodes", "create") in _rules(kwok)
    assert container(kwok)["args"][:3] == ["controller", "--cloud-provider", "kwok"]
    expect_valid(kwok)


def test_kubernetes_validate_rejects_an_invalid_object() -> None:
    objects = render()
    deployment = one(objects, "Deployment")
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        expect_valid([deployment])


def test_a_values_file_written_for_karpenters_chart_renders() -> None:
    karpenters = yaml.safe_load("""
        settings:
          clusterName: prod
          interruptionQueue: Karpenter-prod
          preferencePolicy: Respect
          minValuesPolicy: Strict
          eksControlPlane: false
          featureGates: {spotToSpotConsolidation: true, capacityBuffer: false}
          awsFeatureGates: {nodeClassCEL: false}
        serviceAccount:
          annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/KarpenterControllerRole-prod"}
        controller:
          resources: {requests: {cpu: 1, memory: 1Gi}, limits: {cpu: 1, memory: 1Gi}}
          sidecarContainer: []
          securityContext: {seccompProfile: {}}
        logOutputPaths: [stdout]
        logErrorOutputPaths: [stderr]
        webhook: {enabled: false}
        replicas: 2
    """)
    objects = chart.render(CHART, karpenters)
    variables = env(objects)
    assert variables["CLUSTER_NAME"] == "prod" and variables["INTERRUPTION_QUEUE"] == "Karpenter-prod"
    assert "SpotToSpotConsolidation=true" in variables["FEATURE_GATES"]
    assert container(objects)["resources"]["limits"] == {"cpu": 1, "memory": "1Gi"}
    assert settings_sources.load(environ=variables).feature_gate("SpotToSpotConsolidation")
    expect_valid(objects)


def test_the_lease_role_and_the_flag_follow_the_leader_election_id() -> None:
    objects = render({"leaderElection": {"id": "karpy-prod-leader"}})
    (lease_write,) = [r for r in one(objects, "Role")["rules"] if "update" in r["verbs"]]
    assert lease_write["resourceNames"] == ["karpy-prod-leader"]
    args = container(objects)["args"]
    ctx = controller_cli.controller_command.make_context("controller", list(args[1:]))
    assert ctx.params["leader_election_id"] == "karpy-prod-leader"


def test_aks_nap_mode_may_create_the_nodepools_and_aksnodeclasses_it_creates() -> None:
    plain = _rules(render({"cloudProvider": "azure"}))
    objects = render({"cloudProvider": "azure", "settings": {"napMode": True}})
    napped = _rules(objects)
    assert env(objects)["NAP_MODE"] == "true" and "NAP_MODE" not in env(render({"cloudProvider": "azure"}))
    for obj in nap.default_objects():
        group = obj["apiVersion"].split("/")[0]
        plural = {"AKSNodeClass": "aksnodeclasses", "NodePool": "nodepools"}[obj["kind"]]
        assert (group, plural, "create") in napped, obj["kind"]
        assert (group, plural, "create") not in plain, obj["kind"]
    assert "NAP_MODE" not in env(render({"settings": {"napMode": True}})), "NAP mode is Azure's"
    expect_valid(objects)


def test_rendering_without_an_executable_helm_is_a_chart_error_that_says_how_to_get_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(chart.ChartError, match="KARPY_HELM"):
        chart.render(CHART, REQUIRED, helm=tmp_path / "no-helm")
    monkeypatch.setenv("KARPY_HELM", str(tmp_path / "no-helm"))
    assert chart.helm_binary() is None
