"""karpy's charts against the real tools: `helm lint` and `helm template` with each cloud's values (and AKS
NAP mode), every rendered object accepted by the real kube-apiserver (`kubectl apply --server-side
--dry-run=server`); the CRD chart renders exactly karpy's CRDs; Karpenter's own CRDs (from its Go module)
replaced by karpy's without an error on the objects that already exist, and `helm upgrade` of the CRD
chart takes them over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.api.schemas import crd
from karpy.install import chart as chart_mod
from realcluster import karpenter
from support import realcluster

REPO = realcluster.REPO
CHART = REPO / "charts" / "karpy"
CRD_CHART = REPO / "charts" / "karpy-crd"
NAMESPACE = "rc-chart"
COMBINATIONS: dict[str, dict[str, Any]] = {
    "aws": {"cloudProvider": "aws"},
    "azure": {"cloudProvider": "azure"},
    "aks-nap": {"cloudProvider": "azure", "settings": {"napMode": True}},
    "kwok": {"cloudProvider": "kwok"},
    "custom-lease": {"cloudProvider": "kwok", "leaderElection": {"id": "karpy-custom-leader"}, "replicas": 1,
                     "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/K"}},
                     "additionalLabels": {"team": "platform"}},
}


@pytest.fixture(scope="module")
def cluster(second: realcluster.RealCluster) -> realcluster.RealCluster:
    if second.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0:
        second.kubectl("create", "namespace", NAMESPACE)
    return second


def _values(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(chart_mod.merge({"settings": {"clusterName": "rc-chart"}}, values)))
    return str(path)


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_each_value_combination_lints_renders_and_every_object_is_accepted_by_the_apiserver(
        cluster: realcluster.RealCluster, combination: str, tmp_path: Path) -> None:
    values = _values(tmp_path, COMBINATIONS[combination])
    lint = cluster.helm("lint", str(CHART), "-f", values, "--strict")
    assert "0 chart(s) failed" in lint.stdout, lint.stdout
    rendered = cluster.helm("template", "karpy", str(CHART), "--namespace", NAMESPACE, "-f", values).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    assert {o["kind"] for o in objects} >= {"Deployment", "ServiceAccount", "ClusterRole", "Role", "Service",
                                             "PodDisruptionBudget"}
    out = cluster.kubectl("apply", "--server-side", "--dry-run=server", "-o", "json", "-f", "-", stdin=rendered)
    accepted = json.loads(out.stdout)
    items = accepted["items"] if accepted.get("kind") == "List" else [accepted]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in items) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in objects)


def test_the_lease_role_follows_the_leader_election_id_on_the_apiserver(
        cluster: realcluster.RealCluster, tmp_path: Path) -> None:
    values = _values(tmp_path, COMBINATIONS["custom-lease"])
    rendered = cluster.helm("template", "karpy", str(CHART), "--namespace", NAMESPACE, "-f", values).stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    role = next(o for o in objects if o["kind"] == "Role")
    (write,) = [r for r in role["rules"] if "update" in r["verbs"]]
    assert write["resourceNames"] == ["karpy-custom-leader"]
    (container,) = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["args"][container["args"].index("--leader-election-id") + 1] == "karpy-custom-leader"


def test_the_crd_chart_lints_and_renders_exactly_karpys_crds(cluster: realcluster.RealCluster) -> None:
    lint = cluster.helm("lint", str(CRD_CHART), "--strict")
    assert "0 chart(s) failed" in lint.stdout, lint.stdout
    rendered = chart_mod.render(CRD_CHART, release="karpy-crd", namespace=NAMESPACE, helm=cluster.bin / "helm")
    assert sorted(rendered, key=lambda o: o["metadata"]["name"]) == sorted(
        crd.definitions(), key=lambda o: o["metadata"]["name"])


def _karpenter_objects() -> list[dict[str, Any]]:
    """A NodePool (with Karpenter v1.14's Balanced policy) and a NodeClaim as Karpenter's users have them."""
    ref = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    reqs = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    return [
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "from-karpenter"},
         "spec": {"template": {"spec": {"nodeClassRef": ref, "requirements": reqs, "expireAfter": "720h"}},
                  "disruption": {"consolidationPolicy": "Balanced", "consolidateAfter": "30s",
                                 "budgets": [{"nodes": "10%"}]},
                  "limits": {"cpu": "100"}}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
         "metadata": {"name": "from-karpenter-abcde", "labels": {"karpenter.sh/nodepool": "from-karpenter"}},
         "spec": {"nodeClassRef": ref, "requirements": reqs, "expireAfter": "720h",
                  "resources": {"requests": {"cpu": "1"}}}},
    ]


def test_karpenters_crds_are_replaced_by_karpys_and_the_objects_made_under_them_stay_readable_and_valid(
        cluster: realcluster.RealCluster) -> None:
    module = karpenter.require_module()
    karpenter.apply_crds(cluster, module)
    cluster.apply(_karpenter_objects())
    before = {o["kind"]: cluster.get_json(o["kind"].lower(), o["metadata"]["name"]) for o in _karpenter_objects()}

    cluster.apply(karpenter.crds_text())  # server-side: a real structural-schema check and CEL compile
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *karpenter.KARPY_CRDS)
    for kind, old in before.items():
        now = cluster.get_json(kind.lower(), old["metadata"]["name"])
        assert now.get("spec") == old.get("spec"), kind
        assert now["metadata"]["uid"] == old["metadata"]["uid"], kind
    # the objects still validate under karpy's schemas: an update of each goes through
    for obj in _karpenter_objects():
        cluster.kubectl("label", obj["kind"].lower(), obj["metadata"]["name"], "rc/touched=1", "--overwrite")
    cluster.apply(_karpenter_objects())

    # helm takes the CRDs over and upgrades them from the CRD chart
    cluster.helm("upgrade", "--install", "karpy-crd", str(CRD_CHART), "--namespace", NAMESPACE, "--take-ownership",
                 "--wait", "--timeout", "60s")
    owned = cluster.get_json("crd", "nodepools.karpenter.sh")
    assert owned["metadata"]["annotations"]["meta.helm.sh/release-name"] == "karpy-crd"
    assert cluster.get_json("nodepool", "from-karpenter")["spec"]["disruption"]["consolidationPolicy"] == "Balanced"
    for obj in reversed(_karpenter_objects()):  # nothing left for the controllers test_leader starts here
        cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--wait=true", "--timeout=30s")
