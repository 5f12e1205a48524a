"""Issue 21 item 2.6: a DaemonSet's overhead counts on a NodeClaim only where the DaemonSet can run.

Karpenter (``pkg/controllers/provisioning/scheduling/scheduler.go``, ``getDaemonOverhead`` and
``isDaemonPodCompatible``) keeps one overhead per NodePool template *and instance type*: a
DaemonSet counts when it tolerates the NodePool's taints and its strict requirements, with one of
its OR'd required node affinity terms after another, are compatible with the template and
intersect the instance type's requirements. Its ``provisioning/suite_test.go`` has "should
consider a daemonset schedulable with multiple node affinity terms" (the second term matches:
the node is sized for the DaemonSet too) and "should filter out daemonsets based on instance
type requirements" (a DaemonSet pinned to other sizes does not enlarge the node). karpy read the
first term only, and counted a DaemonSet on every instance type of a claim.
"""

from __future__ import annotations

import textwrap

from karpy.api import quantity
from karpy.simulator import engine

from . import scenarios as sc


def _daemonset(cpu: str, affinity: str) -> str:
    return textwrap.dedent(f"""
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {{name: agent, namespace: kube-system}}
    spec:
      selector: {{matchLabels: {{app: agent}}}}
      template:
        metadata: {{labels: {{app: agent}}}}
        spec:
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: {affinity}}}
          containers:
          - name: agent
            image: registry.example/agent:1
            resources: {{requests: {{cpu: {cpu}, memory: 256Mi}}}}
    """)


def _capacity_cpu(result: engine.Result, node_name: str) -> int:
    node = next(n for n in result.objects["nodes"] if n["metadata"]["name"] == node_name)
    return quantity.parse_milli(str(node["status"]["capacity"]["cpu"]))


def test_a_daemonset_whose_second_or_term_matches_is_counted_and_one_node_holds_both() -> None:
    terms = ("[{matchExpressions: [{key: example.com/team, operator: In, values: [voo]}]},"
             " {matchExpressions: [{key: example.com/team, operator: In, values: [bar]}]}]")
    pool = sc.nodepool(template_metadata="labels: {example.com/team: bar}")
    result = sc.run(sc.docs(pool, _daemonset("1500m", terms), sc.deployment("web", 1, cpu="1")), until="6m")
    assert sc.launched(result) == 1
    (web,) = sc.running(result, "web-")
    agents = sc.running(result, "agent-")
    assert [a["spec"]["nodeName"] for a in agents] == [web["spec"]["nodeName"]]


def test_a_daemonset_pinned_to_other_instance_sizes_does_not_enlarge_the_node() -> None:
    terms = "[{matchExpressions: [{key: karpenter.k8s.aws/instance-size, operator: In, values: [large]}]}]"
    result = sc.run(sc.docs(sc.nodepool(), _daemonset("3", terms), sc.deployment("web", 1, cpu="1500m")),
                    until="4m")
    (web,) = sc.running(result, "web-")
    # a large (2 vCPUs) cannot hold 1.5 CPU plus the 3-CPU agent; an xlarge holds the pod alone
    assert _capacity_cpu(result, web["spec"]["nodeName"]) == 4 * quantity.MILLI
    assert sc.launched(result) == 1
