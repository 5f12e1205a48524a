"""The seed AKS Node Auto-Provisioning run: a pod gets a D-family VM; once the pod is gone, so is the VM.

The NodePool is written in the ``karpenter.sh/v1beta1`` form AKS NAP documents
(``consolidationPolicy: WhenUnderutilized``, ``expireAfter: Never``); karpy converts it to v1
(``WhenEmptyOrUnderutilized``, ``consolidateAfter: 0s``). The empty node goes through the Emptiness
method (budget reason ``Empty``) and, as AKS NAP users see it, the event says "Disrupting Node:
Consolidation/Delete" (a ``WhenEmpty`` NodePool's empty node says "Empty/Delete").
"""

from __future__ import annotations

from karpy.api import labels
from karpy.kube import interface
from karpy.simulator import engine, scenario

SEED = """
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {name: aks-consolidation}
spec:
  cloud: {provider: azure, region: southcentralus, zones: [southcentralus-1, southcentralus-2, southcentralus-3]}
  settings: {clusterName: aks-seed}
  until: 10m
  seed: 5
  steps:
  - at: 5m
    delete: {kind: Pod, namespace: default, name: web}
---
apiVersion: karpenter.azure.com/v1alpha2
kind: AKSNodeClass
metadata: {name: default}
spec:
  imageFamily: Ubuntu2204
---
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements:
      - {key: karpenter.azure.com/sku-family, operator: In, values: [D]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: kubernetes.io/os, operator: In, values: [linux]}
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: Never
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
  - name: web
    image: mcr.microsoft.com/azuredocs/aks-helloworld:v1
    resources: {requests: {cpu: 500m, memory: 1Gi}}
"""


def test_the_aks_seed_run_removes_the_node_of_a_deleted_pod_with_empty_delete() -> None:
    sim = engine.Simulation(scenario.load_text(SEED))
    result = sim.run()
    before = [s for s in result.timeline if s.t == 240.0]
    assert before and before[0].nodes_by_nodepool.get("default") == 1 and before[0].running_pods == 1
    launched = [e for e in result.events if e["reason"] == "Launched" or e["reason"] == "Nominated"]
    assert launched
    terminating = [(e["involvedObject"]["kind"], e["message"]) for e in result.events
                   if e["reason"] == "DisruptionTerminating"]
    assert sorted(terminating) == [("Node", "Disrupting Node: Consolidation/Delete"),
                                   ("NodeClaim", "Disrupting Node: Consolidation/Delete")]
    assert min(e["t"] for e in result.events if e["reason"] == "DisruptionTerminating") <= 320.0
    assert result.objects["nodes"] == []
    assert result.objects["nodeclaims"] == []
    assert result.metrics["simulator"]["instancesTerminated"] == 1


def test_the_aks_seed_node_is_a_d_family_on_demand_vm() -> None:
    sim = engine.Simulation(scenario.load_text(SEED), until=240)
    result = sim.run()
    (node,) = result.objects["nodes"]
    node_labels = interface.labels_of(node)
    assert node_labels["karpenter.azure.com/sku-family"] == "D"
    assert node_labels[labels.CAPACITY_TYPE] == "on-demand"
    (claim,) = result.objects["nodeclaims"]
    assert claim["spec"].get("expireAfter") == "Never"
