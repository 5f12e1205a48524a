"""Issue 21 "Also": the simulated cloud gives nodes the ephemeral-storage their NodeClass sets.

Karpenter's AWS provider (``pkg/providers/instancetype/types.go``, ``ephemeralStorage``) takes a
node's ephemeral-storage from the EC2NodeClass's root volume (the ``rootVolume: true`` block
device mapping, else the AMI family's root device) instead of the 20Gi default; the AKS provider
takes it from the AKSNodeClass's ``osDiskSizeGB``. The simulator kept the catalog default, so a
pod asking for more than 20Gi (128 GB on Azure) stayed pending whatever the NodeClass said.
"""

from __future__ import annotations

import textwrap

from karpy.api import quantity
from karpy.simulator import engine, scenario

from . import scenarios as sc

GI = 2**30 * quantity.MILLI


def _storage(result: engine.Result, prefix: str) -> int:
    (p,) = sc.running(result, prefix)
    node = next(n for n in result.objects["nodes"] if n["metadata"]["name"] == p["spec"]["nodeName"])
    return quantity.parse_milli(str(node["status"]["capacity"]["ephemeral-storage"]))


def _needs_storage(size: str) -> str:
    return sc.deployment("big", 1).replace(
        "resources: {requests: {cpu: 500m, memory: 512Mi}}",
        f"resources: {{requests: {{cpu: 500m, memory: 512Mi, ephemeral-storage: {size}}}}}")


def test_an_ec2nodeclass_root_volume_sets_the_nodes_ephemeral_storage() -> None:
    text = sc.text(sc.docs(sc.nodepool(), _needs_storage("60Gi")), until="3m").replace(
        "  role: KarpenterNodeRole-parity\n",
        "  role: KarpenterNodeRole-parity\n"
        "  blockDeviceMappings:\n"
        "  - {deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 100Gi, volumeType: gp3}}\n")
    result = engine.Simulation(scenario.load_text(text, source="parity.yaml")).run()
    assert _storage(result, "big-") == 100 * GI


AKS = """
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {name: aks-disk}
spec:
  cloud: {provider: azure, region: southcentralus, zones: [southcentralus-1, southcentralus-2]}
  settings: {clusterName: aks-disk}
  until: 3m
  seed: 3
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec: {imageFamily: Ubuntu2204, osDiskSizeGB: 256}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.azure.com/sku-family, operator: In, values: [D]}
"""


def test_an_aksnodeclass_os_disk_size_sets_the_nodes_ephemeral_storage() -> None:
    text = AKS + "---\n" + textwrap.dedent(_needs_storage("200G"))
    result = engine.Simulation(scenario.load_text(text, source="aks.yaml")).run()
    assert _storage(result, "big-") == 256 * 10**9 * quantity.MILLI
