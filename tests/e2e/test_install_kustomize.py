"""The kustomize base and overlay: ``kubectl kustomize`` renders them, every object is valid for the
Kubernetes API (kubernetes-validate, strict), the base is the chart's default render, and the CRDs
are the generated ones (so chart and base cannot drift apart)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from karpy.api.schemas import crd
from karpy.install import chart, kustomize

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "karpy"
KUSTOMIZE = ROOT / "deploy" / "kustomize"
BASE = KUSTOMIZE / "base"
OVERLAY = KUSTOMIZE / "overlays" / "example"
AKS_OVERLAY = KUSTOMIZE / "overlays" / "aks-example"
KUBERNETES_VERSION = "1.32"

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
              pytest.mark.skipif(chart.helm_binary() is None, reason="helm is not built nor on PATH (the chart's "
                                                                     "render is helm's)")]


@functools.cache
def _build(directory: Path) -> tuple[dict[str, Any], ...]:
    out = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=60,
                         check=True)
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def build(directory: Path) -> list[dict[str, Any]]:
    return [dict(d) for d in _build(directory)]


def key(obj: dict[str, Any]) -> tuple[str, str]:
    return (obj["kind"], obj["metadata"]["name"])


def test_the_generated_directories_on_disk_are_what_the_chart_and_schemas_generate() -> None:
    want = kustomize.files(CHART)
    have = {str(p.relative_to(KUSTOMIZE)): p.read_text()
            for d in ("base", *kustomize.CLOUDS) for p in (KUSTOMIZE / d).rglob("*.yaml")}
    assert sorted(have) == sorted(want), "run python scripts/generate_kustomize.py"
    assert [n for n in want if have[n] != want[n]] == [], "run python scripts/generate_kustomize.py"


@pytest.mark.parametrize("cloud", ["aws", *kustomize.CLOUDS])
def test_kubectl_kustomize_renders_each_cloud_as_the_chart_renders_it(cloud: str) -> None:
    rendered = {key(o): o for o in build(BASE if cloud == "aws" else KUSTOMIZE / cloud)}
    from_chart = {key(o): o for o in kustomize.render(CHART, cloud)}
    crds = {key(d): d for d in crd.definitions()}
    assert set(rendered) == set(from_chart) | set(crds)
    for k, obj in from_chart.items():
        assert rendered[k] == obj, k
    for k, definition in crds.items():
        assert rendered[k] == definition, k
    (c,) = rendered[("Deployment", "karpy")]["spec"]["template"]["spec"]["containers"]
    assert c["args"][:3] == ["controller", "--cloud-provider", cloud]


def test_every_object_of_the_base_and_the_overlay_is_valid_for_the_api_server() -> None:
    objects = build(BASE) + build(OVERLAY)
    objects += [o for d in [*(KUSTOMIZE / c for c in kustomize.CLOUDS), AKS_OVERLAY] for o in build(d)
                if o["kind"] != "CustomResourceDefinition"]  # the same CRDs as the base's
    assert len(objects) > 40
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_overlay_sets_namespace_image_irsa_and_settings() -> None:
    objects = {key(o): o for o in build(OVERLAY)}
    assert objects[("Namespace", "karpy")]
    sa = objects[("ServiceAccount", "karpy")]
    assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    (c,) = objects[("Deployment", "karpy")]["spec"]["template"]["spec"]["containers"]
    assert c["image"].endswith("/karpy:0.1.0")
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["CLUSTER_NAME"] == "prod" and env["INTERRUPTION_QUEUE"] == "Karpenter-prod"
    assert env["METRICS_PORT"] == "8080"
    binding = objects[("ClusterRoleBinding", "karpy-core")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "karpy", "namespace": "karpy"}]


def test_the_base_ships_karpenters_crds_with_their_names() -> None:
    names = sorted(o["metadata"]["name"] for o in build(BASE) if o["kind"] == "CustomResourceDefinition")
    assert names == ["aksnodeclasses.karpenter.azure.com", "capacitybuffers.autoscaling.x-k8s.io",
                     "ec2nodeclasses.karpenter.k8s.aws", "kwoknodeclasses.karpenter.kwok.sh", "nodeclaims.karpenter.sh",
                     "nodeoverlays.karpenter.sh", "nodepools.karpenter.sh"]


def test_the_aks_overlay_sets_workload_identity_on_the_azure_directory() -> None:
    objects = {key(o): o for o in build(AKS_OVERLAY)}
    sa = objects[("ServiceAccount", "karpy")]
    assert "azure.workload.identity/client-id" in sa["metadata"]["annotations"]
    template = objects[("Deployment", "karpy")]["spec"]["template"]
    assert template["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    (c,) = template["spec"]["containers"]
    assert c["args"][:3] == ["controller", "--cloud-provider", "azure"]
    assert {e["name"]: e.get("value") for e in c["env"]}["CLUSTER_NAME"] == "aks-prod"
    rules = objects[("ClusterRole", "karpy")]["rules"]
    assert {g for r in rules for g in r["apiGroups"]} == {"karpenter.azure.com"}
