"""``karpy simulate`` with ``provider: azure`` works in every region of the shared Azure price data."""

from __future__ import annotations

import pytest

from karpy.api import errors, labels
from karpy.cloudprovider import catalog
from karpy.cloudprovider.azure import instancetypes
from karpy.simulator import engine, scenario
from support import scenario_docs


def _text(region: str) -> str:
    return scenario_docs.documents(
        scenario_docs.scenario(f"aks-{region}", f"{{provider: azure, region: {region}}}", until="3m", replicas=3),
        scenario_docs.node_class("karpenter.azure.com/v1alpha2", "AKSNodeClass",
                                 "{imageFamily: Ubuntu2204, osDiskSizeGB: 128}"),
        scenario_docs.nodepool("{name: default}", [scenario_docs.D_FAMILY, scenario_docs.ON_DEMAND,
                                                   scenario_docs.arch("amd64")],
                               api_version="karpenter.sh/v1beta1",
                               disruption="{consolidationPolicy: WhenUnderutilized, expireAfter: Never}"),
        scenario_docs.WEB)


def test_the_packaged_data_has_the_six_regions_of_the_shared_prices() -> None:
    assert instancetypes.regions() == ("eastus", "japaneast", "southcentralus", "westcentralus", "westeurope",
                                       "westus2")


@pytest.mark.parametrize("region", instancetypes.regions())
def test_a_d_family_node_is_launched_in_every_region(region: str) -> None:
    result = engine.Simulation(scenario.load_text(_text(region))).run()
    nodes = result.objects["nodes"]
    assert nodes, f"no node launched in {region}"
    types = {t.name: t for t in catalog.load("azure", region=region)}
    for n in nodes:
        lb = n["metadata"]["labels"]
        assert lb[labels.REGION] == region
        assert lb[labels.AZURE_SKU_FAMILY] == "D" and lb[labels.CAPACITY_TYPE] == "on-demand"
        assert lb[labels.INSTANCE_TYPE] in types
        zone = lb.get(labels.ZONE, "")
        assert zone == "" if region == "westcentralus" else zone.startswith(f"{region}-")
    assert result.timeline[-1].running_pods == 3 and result.timeline[-1].pending_pods == 0


NAP_MODE = """
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {name: aks-nap-mode}
spec:
  cloud: {provider: azure, region: japaneast, napMode: true}
  until: 10m
  seed: 2
  steps:
  - at: 5m
    delete: {kind: Pod, namespace: default, name: test}
---
apiVersion: v1
kind: Pod
metadata: {name: test, namespace: default}
spec:
  containers:
  - {name: test, image: nginx, resources: {requests: {cpu: 500m, memory: 1Gi}}}
"""


def test_a_nap_mode_scenario_runs_the_seed_on_aks_own_default_pool() -> None:
    result = engine.Simulation(scenario.load_text(NAP_MODE), until=240).run()
    [node] = result.objects["nodes"]
    lb = node["metadata"]["labels"]
    assert lb[labels.NODEPOOL] == "default" and lb[labels.AZURE_SKU_FAMILY] == "D"
    assert lb[labels.CAPACITY_TYPE] == "on-demand" and lb[labels.ZONE].startswith("japaneast-")
    pools = sorted(p["metadata"]["name"] for p in result.objects["nodepools"])
    assert pools == ["default", "system-surge"]
    full = engine.Simulation(scenario.load_text(NAP_MODE)).run()
    messages = {e["message"] for e in full.events if e["reason"] == "DisruptionTerminating"}
    assert messages == {"Disrupting Node: Consolidation/Delete"} and full.objects["nodes"] == []


def test_nap_mode_is_only_for_azure() -> None:
    with pytest.raises(errors.ValidationError, match="napMode"):
        scenario.load_text(NAP_MODE.replace("provider: azure, region: japaneast", "provider: aws"))
