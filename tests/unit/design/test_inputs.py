"""The workload of ``karpy design``: a scenario or a dump, and a trace in CSV or YAML."""

from __future__ import annotations

import pytest

from karpy.api import errors
from karpy.design import inputs
from karpy.simulator import scenario_steps
from support import design_workload

YAML_TRACE = """\
apiVersion: karpy.io/v1alpha1
kind: Trace
steps:
- {at: 12m, namespace: default, deployment: web, replicas: 3}
- {at: 300, deployment: web, replicas: 10}
"""


def test_a_csv_and_a_yaml_trace_give_the_same_rows_sorted_by_time() -> None:
    csv_rows = inputs.read_trace("t.csv", design_workload.TRACE_CSV)
    yaml_rows = inputs.read_trace("t.yaml", YAML_TRACE)
    assert csv_rows == yaml_rows == [inputs.TraceRow(300.0, "default", "web", 10),
                                     inputs.TraceRow(720.0, "default", "web", 3)]


def test_a_bad_csv_row_is_named_by_line_and_column() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        inputs.read_trace("t.csv", "at,namespace,deployment,replicas\n5m,default,web,ten\nsoon,default,web,1\n")
    assert [(e.obj, e.path, e.found) for e in exc.value.errors] == [
        ("t.csv", "line 2.replicas", "ten"), ("t.csv", "line 3.at", "soon")]


def test_a_yaml_trace_with_an_unknown_field_is_refused() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        inputs.read_trace("t.yaml", YAML_TRACE.replace("replicas: 3}", "replicas: 3, zone: a}"))
    [e] = exc.value.errors
    assert (e.path, e.found) == ("steps[0].zone", "zone")


def test_a_trace_adds_scale_steps_to_a_scenario_and_must_name_its_deployments() -> None:
    scn = inputs.load([("tiny.yaml", design_workload.SCENARIO)], trace=("t.csv", design_workload.TRACE_CSV),
                      until=1200)
    assert [(s.at, s.action) for s in scn.steps] == [
        (300.0, scenario_steps.Scale("Deployment", "default", "web", 10)),
        (720.0, scenario_steps.Scale("Deployment", "default", "web", 3))]
    assert scn.until == 1200
    with pytest.raises(errors.ValidationError) as exc:
        inputs.load([("tiny.yaml", design_workload.SCENARIO)],
                    trace=("t.csv", "at,namespace,deployment,replicas\n1m,default,api,3\n"), until=1200)
    [e] = exc.value.errors
    assert (e.obj, e.found, e.expected) == ("t.csv", "api", "a Deployment of the input")


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
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata:
    name: web-5d8f7
    namespace: shop
    labels: {app: web, pod-template-hash: 5d8f7}
    ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: u1, controller: true}]
  spec:
    replicas: 3
    selector: {matchLabels: {app: web}}
    template:
      metadata: {labels: {app: web, pod-template-hash: 5d8f7}}
      spec: {containers: [{name: web, image: web:1, resources: {requests: {cpu: "1"}}}]}
- apiVersion: v1
  kind: Node
  metadata:
    name: ip-10-0-0-1.ec2.internal
    labels: {karpenter.sh/nodepool: general, node.kubernetes.io/instance-type: m5.large,
             topology.kubernetes.io/zone: us-east-1a, topology.kubernetes.io/region: us-east-1}
  spec: {providerID: "aws:///us-east-1a/i-0123456789abcdef0"}
  status: {allocatable: {cpu: "2", memory: 7Gi, pods: "29"}, capacity: {cpu: "2", memory: 8Gi, pods: "29"}}
"""


def test_a_dump_becomes_a_workload_without_managed_nodes_and_its_trace_scales_the_active_replica_set() -> None:
    scn = inputs.load([("dump.yaml", DUMP)], trace=("t.csv", "at,namespace,deployment,replicas\n1h,shop,web,9\n"),
                      until=7200)
    kinds = sorted(str(o["kind"]) for o in scn.objects)
    assert kinds == ["NodePool", "ReplicaSet"]  # the managed node is left for the designs to replace
    assert scn.cloud.provider == "aws" and scn.cloud.region == "us-east-1"
    [step] = scn.steps
    assert (step.at, step.action) == (3600.0, scenario_steps.Scale("ReplicaSet", "shop", "web-5d8f7", 9))
