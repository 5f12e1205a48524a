"""A cluster dump plus a trace is a workload a design can be simulated on: the ReplicaSets re-create their
pods, the trace scales them, the design's pool launches nodes for them."""

from __future__ import annotations

from karpy.design import inputs, nodepools, space, trials

DUMP = """\
apiVersion: v1
kind: List
items:
- apiVersion: karpenter.sh/v1
  kind: NodePool
  metadata: {name: general}
  spec:
    template:
      spec:
        nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
        requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
    disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}
- apiVersion: karpenter.k8s.aws/v1
  kind: EC2NodeClass
  metadata: {name: default}
  spec:
    role: KarpenterNodeRole-shop
    amiSelectorTerms: [{alias: al2023@latest}]
    subnetSelectorTerms: [{tags: {karpenter.sh/discovery: shop}}]
    securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: shop}}]
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata:
    name: web-5d8f7
    namespace: default
    labels: {app: web, pod-template-hash: 5d8f7}
    ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u1, controller: true}]
  spec:
    replicas: 2
    selector: {matchLabels: {app: web, pod-template-hash: 5d8f7}}
    template:
      metadata: {labels: {app: web, pod-template-hash: 5d8f7}}
      spec: {containers: [{name: web, image: web:1, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-0-1.ec2.internal
    labels: {karpenter.sh/nodepool: general, node.kubernetes.io/instance-type: m5.large,
             topology.kubernetes.io/zone: us-east-1a, topology.kubernetes.io/region: us-east-1}
  spec: {providerID: "aws:///us-east-1a/i-0123456789abcdef0"}
  status: {allocatable: {cpu: "2", memory: 7Gi, pods: "29"}, capacity: {cpu: "2", memory: 8Gi, pods: "29"}}
"""
SPACE = """\
apiVersion: karpy.io/v1alpha1
kind: DesignSpace
metadata: {name: dump}
spec:
  variables:
    instanceFamily: [m5, c5]
"""


def test_a_dump_and_its_trace_run_as_a_workload_under_a_design() -> None:
    scn = inputs.load([("dump.yaml", DUMP)], trace=("t.csv", "at,namespace,deployment,replicas\n5m,default,web,8\n"),
                      until=900)
    sp = space.parse(SPACE)
    ctx = trials.Context(scn, nodepools.resolve(sp, scn), 900)
    outcome = trials.simulate(ctx, trials.Job("k", {"instanceFamily": "c5"}, 0))
    assert outcome.figures["nodesLaunched"] >= 2  # 2 pods at the start, 8 after the trace's step
    assert outcome.figures["cost"] > 0
    first, last = outcome.timeline[0], outcome.timeline[-1]
    assert first[1] == 0  # no managed node is kept from the dump
    assert last[3] == 0 and last[1] >= 2  # every pod bound by the end, on the design's nodes
