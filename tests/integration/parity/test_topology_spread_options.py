"""Issue 21 item 2.7: topology spread options, in the provisioner, consolidation and the simulated
kube-scheduler (all three schedule with the same core).

Expectations from Karpenter's ``pkg/controllers/provisioning/scheduling/topology_test.go``:

- "should support matchLabelKeys": the pod's value of each key is ANDed into the selector, so
  two label values spread separately (two nodes holding one pod of each, not four);
- "should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=honor)":
  a NodePool whose taints the pods do not tolerate brings no domain;
- "should balance pods across a label (NodeAffinityPolicy=honor)": nodes that do not match the
  pods' nodeSelector are neither counted nor domains;
- "should not limit spread options by preferred node affinity": 6 pods preferring two zones
  still spread 2/2/2 over three.
"""

from __future__ import annotations

import textwrap
from collections import Counter

from karpy.simulator import engine

from . import scenarios as sc

RACK = "example.com/rack"


def _spread_pods(name: str, replicas: int, spread: str, *, labels: str = "", extra: str = "",
                 cpu: str = "250m") -> str:
    own = f"{{app: web, deploy: {name}{', ' + labels if labels else ''}}}"
    return textwrap.dedent(f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: {name}, namespace: default}}
    spec:
      replicas: {replicas}
      selector: {{matchLabels: {{deploy: {name}}}}}
      template:
        metadata: {{labels: {own}}}
        spec:
          topologySpreadConstraints: [{spread}]
          containers:
          - name: app
            image: registry.example/app:1
            resources: {{requests: {{cpu: {cpu}, memory: 256Mi}}}}
    """) + textwrap.indent(textwrap.dedent(extra).strip("\n"), "      ") + ("\n" if extra else "")


def _domains(result: engine.Result, prefix: str, key: str) -> Counter[str]:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in result.objects["nodes"]}
    return Counter(nodes[p["spec"]["nodeName"]].get(key, "") for p in sc.running(result, prefix))


def test_match_label_keys_spread_each_version_separately() -> None:
    spread = ("{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,"
              " labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [version]}")
    result = sc.run(sc.docs(sc.nodepool(), _spread_pods("web-a", 2, spread, labels="version: a"),
                            _spread_pods("web-b", 2, spread, labels="version: b")), until="4m")
    assert len(sc.running(result, "web-")) == 4
    per_node = Counter(p["spec"]["nodeName"] for p in sc.running(result, "web-"))
    assert sorted(per_node.values()) == [2, 2]
    assert sc.launched(result) == 2


def test_node_taints_policy_honor_leaves_out_the_domains_of_a_tainted_nodepool() -> None:
    plain = sc.nodepool("plain", requirements=f"""
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}}
        - {{key: {RACK}, operator: In, values: [foo]}}
        """)
    tainted = sc.nodepool("tainted", requirements=f"""
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [m]}}
        - {{key: {RACK}, operator: In, values: [bar]}}
        """).replace("      requirements:", "      taints: [{key: dedicated, value: gpu, effect: NoSchedule}]\n"
                                                  "      requirements:")
    spread = (f"{{maxSkew: 1, topologyKey: {RACK}, whenUnsatisfiable: DoNotSchedule,"
              " labelSelector: {matchLabels: {app: web}}, nodeTaintsPolicy: Honor}")
    result = sc.run(sc.docs(plain, tainted, _spread_pods("web", 2, spread, cpu="1500m")), until="4m")
    assert _domains(result, "web-", RACK) == Counter({"foo": 2})


STATIC = """
apiVersion: v1
kind: Node
metadata:
  name: static-{rack}
  labels: {{kubernetes.io/hostname: static-{rack}, topology.kubernetes.io/zone: us-east-1a,
           kubernetes.io/os: linux, {key}: {rack}, example.com/selector: mismatch}}
spec: {{providerID: "aws:///us-east-1a/i-00000000000000{rack}"}}
status:
  capacity: {{cpu: 100m, memory: 1Gi, pods: "110"}}
  allocatable: {{cpu: 100m, memory: 1Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
"""


def test_node_affinity_policy_honor_ignores_nodes_outside_the_pods_node_selector() -> None:
    pool = sc.nodepool(template_metadata=f"labels: {{{RACK}: baz, example.com/selector: value}}")
    spread = (f"{{maxSkew: 1, topologyKey: {RACK}, whenUnsatisfiable: DoNotSchedule,"
              " labelSelector: {matchLabels: {app: web}}, nodeAffinityPolicy: Honor}")
    pods = _spread_pods("web", 5, spread, cpu="1", extra="nodeSelector: {example.com/selector: value}")
    result = sc.run(sc.docs(STATIC.format(rack="aa", key=RACK), STATIC.format(rack="bb", key=RACK), pool, pods),
                    until="4m")
    assert _domains(result, "web-", RACK) == Counter({"baz": 5})


def test_a_preferred_node_affinity_does_not_narrow_the_zones_a_spread_counts() -> None:
    spread = ("{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,"
              " labelSelector: {matchLabels: {app: web}}}")
    prefer = """
        affinity:
          nodeAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 10
              preference:
                matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}]
        """
    result = sc.run(sc.docs(sc.nodepool(), _spread_pods("web", 6, spread, extra=prefer)), until="4m")
    # the provisioner's plan (Karpenter's test checks the same): two pods on each of three NodeClaims,
    # one per zone (the simulated kube-scheduler then binds to the nodes registered by then)
    planned = Counter(e["message"].rsplit("/", 1)[-1] for e in sc.events(result, "Nominated"))
    assert sorted(planned.values()) == [2, 2, 2]
    assert sc.launched(result) == 3
