"""The field report's AKS NAP run, with karpy's controllers driving the Azure provider over the SDK.

A NAP-mode cluster in japaneast (the ``default`` NodePool and AKSNodeClass AKS creates), one pod:
karpy launches a D-family on-demand VM through ARM (the fake service on 127.0.0.1); the simulated
kubelet registers its Node; once the pod is deleted the empty node goes with "Disrupting Node:
Consolidation/Delete" and its VM, NIC and OS disk are deleted in ARM.
"""

from __future__ import annotations

import pytest

from karpy.api import labels, nodepool
from karpy.cloudprovider import catalog, errors
from karpy.cloudprovider.azure import bootstrap, factory, nap, provider
from karpy.simulator import engine, provider_bridge, scenario

from . import fake_arm

pytestmark = pytest.mark.e2e

REGION = "japaneast"
RG = "MC_rg-taniai_aks-karp-test_japaneast"
SUBNET = (f"/subscriptions/{fake_arm.SUBSCRIPTION}/resourceGroups/rg-taniai/providers/Microsoft.Network/"
          "virtualNetworks/aks-vnet-25367643/subnets/aks-subnet")
SEED = """
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {name: aks-nap-japaneast}
spec:
  cloud: {provider: azure, region: japaneast}
  settings: {clusterName: aks-karp-test}
  until: 10m
  seed: 5
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


def test_the_field_reports_aks_run_goes_through_the_azure_sdk() -> None:
    d_family = sorted(t.name for t in catalog.load("azure", region=REGION)
                      if t.labels[labels.AZURE_SKU_FAMILY] == "D" and t.labels[labels.AZURE_SKU_CPU] in ("2", "4"))
    assert "Standard_D2_v4" in d_family
    with fake_arm.FakeARM(skus=fake_arm.skus_from_catalog(REGION, [*d_family, "Standard_E2s_v3"])) as arm:
        sim = engine.Simulation(scenario.load_text(SEED))
        cloud = factory.build(sim.scenario.settings, sim.clock, sim.cluster, environ={},
                              subscription_id=fake_arm.SUBSCRIPTION, resource_group=RG, region=REGION,
                              subnet_id=SUBNET, endpoint_url=arm.endpoint, polling_interval=0,
                              retail_prices_endpoint="")
        assert isinstance(cloud, provider.AzureCloudProvider)
        sim.bridge = provider_bridge.ProviderBridge(cloud, sim.kubelet, clock=sim.clock)
        sim.wire()
        assert "NodePool/default" in nap.ensure(sim.cluster)  # a fresh NAP cluster: AKS's own pools

        result = sim.run()
        status = sim.cluster.get("AKSNodeClass", "default").get("status") or {}
        assert [c["status"] for c in status.get("conditions", []) if c["type"] == "Ready"] == ["True"]
        assert status["images"][0]["id"].endswith("/images/2204gen2containerd/versions/202501.02.0")

        [launch] = arm.put_calls("virtualMachines")
        size = launch.body["properties"]["hardwareProfile"]["vmSize"]
        pool = nodepool.NodePool.from_manifest(sim.cluster.get("NodePool", "default"))
        fitting = [t for t in cloud.get_instance_types(pool) if t.labels[labels.AZURE_SKU_FAMILY] == "D"
                   and t.labels[labels.ARCH] == "amd64" and t.allocatable["cpu"] >= 500]
        cheapest = min(fitting, key=lambda t: (t.cheapest_price(capacity_types=frozenset({"on-demand"})) or 9e9,
                                               t.name))
        assert size == cheapest.name
        assert launch.body["properties"]["priority"] == "Regular"
        assert launch.body["tags"]["karpenter.sh_nodepool"] == "default"
        joins = bootstrap.variables_of(bootstrap.decode(launch.body["properties"]["osProfile"]["customData"]))
        assert joins["TLS_BOOTSTRAP_TOKEN"] and joins["KUBE_CA_CRT"] and joins["API_SERVER_NAME"]
        assert f"{labels.NODEPOOL}=default" in joins["KUBELET_NODE_LABELS"].split(",")
        assert "karpenter.sh/unregistered:NoExecute" in joins["KUBELET_FLAGS"]
        nominated = [e["message"] for e in result.events if e["reason"] == "Nominated"]
        assert nominated and nominated[0].startswith("Pod should schedule on: nodeclaim/default-")

        before = [s for s in result.timeline if s.t == 240.0]
        assert before and before[0].nodes_by_nodepool.get("default") == 1 and before[0].running_pods == 1
        terminating = sorted((e["involvedObject"]["kind"], e["message"]) for e in result.events
                             if e["reason"] == "DisruptionTerminating")
        assert terminating == [("Node", "Disrupting Node: Consolidation/Delete"),
                               ("NodeClaim", "Disrupting Node: Consolidation/Delete")]
        assert result.objects["nodes"] == [] and result.objects["nodeclaims"] == []
        assert not arm.of_type("virtualmachines") and not arm.of_type("networkinterfaces")
        assert not arm.of_type("disks")
        assert result.metrics["simulator"]["instancesTerminated"] == 1
        assert result.metrics["simulator"]["costPerHour"] == 0.0
        with pytest.raises(errors.NodeClaimNotFoundError):
            cloud.get(cloud.provider_id(launch.path.rsplit("/", 1)[-1]))
