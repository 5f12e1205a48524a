"""``karpy simulate`` decides with the AKSNodeClass fields that change a decision, as the Azure provider does:
encryption at host, trusted launch, LocalDNS and artifact streaming narrow the sizes; FIPS launches nothing
(no FIPS image in the community galleries); ``osDiskSizeGB`` is the nodes' ephemeral-storage."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import labels, quantity
from karpy.cloudprovider.azure import instancetypes as azure_types
from karpy.simulator import engine, scenario
from support import scenario_docs


def _text(spec: str) -> str:
    return scenario_docs.documents(
        scenario_docs.scenario("aks-fields", "{provider: azure, region: southcentralus}", until="3m", replicas=2),
        scenario_docs.node_class("karpenter.azure.com/v1beta1", "AKSNodeClass", spec),
        scenario_docs.nodepool(scenario_docs.AKS_REF, [scenario_docs.D_FAMILY, scenario_docs.ON_DEMAND,
                                                       scenario_docs.arch("amd64", "arm64")]),
        scenario_docs.WEB)


def _run(spec: str) -> tuple[list[dict[str, Any]], Any]:
    result = engine.Simulation(scenario.load_text(_text(spec))).run()
    return result.objects["nodes"], result


def _labels(nodes: list[dict[str, Any]]) -> list[dict[str, str]]:
    assert nodes, "no node launched"
    return [n["metadata"]["labels"] for n in nodes]


def test_without_narrowing_fields_the_cheapest_d_size_is_arm64() -> None:
    nodes, _ = _run("{imageFamily: Ubuntu2204}")
    assert {lb[labels.ARCH] for lb in _labels(nodes)} == {"arm64"}


def test_encryption_at_host_launches_only_sizes_that_support_it() -> None:
    nodes, result = _run("{security: {encryptionAtHost: true}}")
    for lb in _labels(nodes):
        assert lb[labels.AZURE_SKU_ENCRYPTION_AT_HOST] == "true"
    assert result.timeline[-1].pending_pods == 0


def test_trusted_launch_launches_gen2_amd64_sizes_from_the_trusted_launch_image() -> None:
    nodes, result = _run("{security: {trustedLaunch: {secureBoot: true}}}")
    for lb in _labels(nodes):
        assert lb[labels.ARCH] == "amd64" and lb[labels.AZURE_SKU_HYPERV_GENERATION] == "2"
    claims = result.objects["nodeclaims"]
    assert claims and all("/images/2204gen2TLcontainerd/versions/" in c["status"]["imageID"] for c in claims)


def test_artifact_streaming_leaves_out_arm64() -> None:
    nodes, _ = _run("{artifactStreaming: {enabled: true}}")
    for lb in _labels(nodes):
        assert lb[labels.ARCH] == "amd64"


def test_required_local_dns_launches_sizes_of_four_vcpus_or_more() -> None:
    nodes, _ = _run("{localDNS: {mode: Required, kubeDNSOverrides: [], vnetDNSOverrides: []}}")
    for lb in _labels(nodes):
        assert int(lb[labels.AZURE_SKU_CPU]) >= 4


def test_fips_mode_launches_nothing_and_the_node_class_is_not_ready() -> None:
    nodes, result = _run("{imageFamily: AzureLinux, fipsMode: FIPS}")
    assert nodes == []
    assert result.timeline[-1].pending_pods == 2
    messages = {e["message"] for e in result.events if e["reason"] == "FailedScheduling"}
    assert any("AKSNodeClass default is not ready: fipsMode FIPS" in m for m in messages), messages


@pytest.mark.parametrize("gb", [64, 256])
def test_the_os_disk_size_is_the_nodes_ephemeral_storage(gb: int) -> None:
    nodes, _ = _run(f"{{osDiskSizeGB: {gb}}}")
    for n in nodes:
        assert quantity.parse_milli(n["status"]["capacity"]["ephemeral-storage"]) == gb * 10**9 * quantity.MILLI


AMD_POD = """
---
apiVersion: v1
kind: Pod
metadata: {name: render, namespace: default}
spec:
  containers:
  - {name: render, image: rocm, resources: {requests: {cpu: "1", amd.com/gpu: "1"}, limits: {amd.com/gpu: "1"}}}
"""


@pytest.mark.parametrize(("mode", "launched"), [("None", True), ("Driver", False)])
def test_an_amd_gpu_pod_gets_a_node_only_when_the_node_class_installs_no_driver(mode: str, launched: bool) -> None:
    text = _text(f"{{imageFamily: Ubuntu2204, gpu: {{mode: {mode}}}}}").replace(
        "values: [D]}", "values: [N]}") + AMD_POD
    result = engine.Simulation(scenario.load_text(text)).run()
    gpu_nodes = [n for n in result.objects["nodes"]
                 if n["metadata"]["labels"].get(labels.AZURE_SKU_GPU_MANUFACTURER) == "amd"]
    if launched:
        [node] = gpu_nodes
        # the cheapest: a sixth of a V710, one amd.com/gpu device as the Resource SKUs API counts partial GPUs
        assert node["metadata"]["labels"][labels.INSTANCE_TYPE] == "Standard_NV4ads_V710_v5"
        assert node["metadata"]["labels"][labels.AZURE_SKU_GPU_COUNT] == "1"
        assert node["status"]["capacity"]["amd.com/gpu"] == "1"
        render = [p for p in result.objects["pods"] if p["metadata"]["name"] == "render"]
        assert render and render[0]["spec"].get("nodeName") == node["metadata"]["name"]
    else:
        assert gpu_nodes == []
        render = [p for p in result.objects["pods"] if p["metadata"]["name"] == "render"]
        assert render and not render[0]["spec"].get("nodeName")


def _ultra_text(value: str) -> str:
    return scenario_docs.documents(
        scenario_docs.scenario("aks-ultra", "{provider: azure, region: southcentralus}", until="3m", replicas=2),
        scenario_docs.node_class("karpenter.azure.com/v1beta1", "AKSNodeClass", "{imageFamily: Ubuntu2204}"),
        scenario_docs.nodepool(scenario_docs.AKS_REF, [
            scenario_docs.D_FAMILY, scenario_docs.ON_DEMAND,
            f"{{key: {labels.AZURE_SKU_STORAGE_ULTRA_SSD}, operator: In, values: [{value}]}}"]),
        scenario_docs.WEB)


def test_a_pool_that_requires_ultra_ssd_launches_only_sizes_with_ultra_ssd_in_that_zone() -> None:
    result = engine.Simulation(scenario.load_text(_ultra_text("\"true\""))).run()
    nodes = result.objects["nodes"]
    assert result.timeline[-1].pending_pods == 0
    for lb in _labels(nodes):
        assert lb[labels.AZURE_SKU_STORAGE_ULTRA_SSD] == "true"
        rec = azure_types.record("southcentralus", lb[labels.INSTANCE_TYPE]) or {}
        assert lb[labels.ZONE].rsplit("-", 1)[-1] in rec.get("ultra_ssd_zones", ())
    cheapest = _labels(_run("{imageFamily: Ubuntu2204}")[0])[0]
    assert cheapest[labels.AZURE_SKU_STORAGE_ULTRA_SSD] == "false"  # without the requirement: not Ultra SSD
    assert cheapest[labels.INSTANCE_TYPE] != _labels(nodes)[0][labels.INSTANCE_TYPE]  # the decision changed
