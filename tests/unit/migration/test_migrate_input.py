"""``karpy migrate`` against malformed node-group JSON: each problem is a ValidationError naming the
file and field, numbers are bounded, and what it writes passes the manifest loader; plus a Hypothesis
fuzz test (bounded in CI; ``KARPY_FUZZ_EXAMPLES=5000`` locally)."""

from __future__ import annotations

import copy
import json
import os
import pathlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy.api import errors
from karpy.migration import nodegroups
from support import fuzzing

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "migration"
ASG = json.loads((FIXTURES / "asg-mixed.json").read_text())
EKS = json.loads((FIXTURES / "eks-nodegroup-worknode.json").read_text())
EXAMPLES = int(os.environ.get("KARPY_FUZZ_EXAMPLES", "150"))


def _error(doc: Any) -> errors.FieldError:
    with pytest.raises(errors.ValidationError) as info:
        nodegroups.plan(nodegroups.read_groups([("in.json", json.dumps(doc))]))
    (err, *_) = info.value.errors
    return err


def _asg(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(ASG)
    doc["AutoScalingGroups"][0].update(changes)
    return doc


def _eks(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(EKS)
    doc["nodegroup"].update(changes)
    return doc


@pytest.mark.parametrize(("doc", "path"), [
    (_asg(MixedInstancesPolicy="c5.large"), "AutoScalingGroups[0].MixedInstancesPolicy"),
    (_asg(MixedInstancesPolicy={"InstancesDistribution": "spot"}),
     "AutoScalingGroups[0].MixedInstancesPolicy.InstancesDistribution"),
    (_asg(MixedInstancesPolicy={"LaunchTemplate": {"Overrides": "c5.large"}}),
     "AutoScalingGroups[0].MixedInstancesPolicy.LaunchTemplate.Overrides"),
    (_asg(MixedInstancesPolicy={"LaunchTemplate": {"Overrides": [{"InstanceType": 5}]}}),
     "AutoScalingGroups[0].MixedInstancesPolicy.LaunchTemplate.Overrides[0].InstanceType"),
    (_asg(MixedInstancesPolicy={"InstancesDistribution": {"OnDemandPercentageAboveBaseCapacity": 101}}),
     "AutoScalingGroups[0].MixedInstancesPolicy.InstancesDistribution.OnDemandPercentageAboveBaseCapacity"),
    (_asg(Tags={"Key": "a"}), "AutoScalingGroups[0].Tags"),
    (_asg(Tags=[{"Key": "k8s.io/cluster-autoscaler/node-template/taint/a", "Value": "v:Sometimes"}]),
     "AutoScalingGroups[0].Tags[k8s.io/cluster-autoscaler/node-template/taint/a]"),
    (_asg(VPCZoneIdentifier=["subnet-1"]), "AutoScalingGroups[0].VPCZoneIdentifier"),
    (_asg(MaxSize=int("9" * 4000)), "AutoScalingGroups[0].MaxSize"),
    (_eks(taints=[{"key": "a", "effect": {"NO_SCHEDULE": True}}]), "nodegroup.taints[0]"),
    (_eks(labels={"team": 5}), "nodegroup.labels.team"),
    (_eks(subnets="subnet-1"), "nodegroup.subnets"),
    (_eks(scalingConfig={"minSize": 0, "maxSize": 10**30}), "nodegroup.scalingConfig.maxSize"),
    (_eks(diskSize=10**12), "nodegroup.diskSize"),
    (_eks(instanceTypes="t3.medium"), "nodegroup.instanceTypes"),
])
def test_malformed_node_group_json_is_a_validation_error_naming_the_field(doc: Any, path: str) -> None:
    err = _error(doc)
    assert (err.obj, err.path) == ("in.json", path)


def test_a_4000_digit_max_size_never_reaches_limits_cpu() -> None:
    err = _error(_asg(MaxSize=int("9" * 4000)))
    assert "an integer from 0 to 100000" in err.expected and "digits" in errors.describe(err.found)


def test_what_migrate_writes_goes_through_the_manifest_loader_naming_the_node_group() -> None:
    err = _error(_asg(Tags=[{"Key": "k8s.io/cluster-autoscaler/node-template/label/karpenter.sh/nodepool",
                             "Value": "x"}]))
    assert err.obj.startswith("node group batch-spot") and err.path.startswith("spec.template.metadata.labels")


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=10**18, max_value=10**400),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10),
              st.sampled_from(["NO_SCHEDULE", "SPOT", "c5.large", "true:NoSchedule", "subnet-1,subnet-2",
                               "AL2_x86_64"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    return fuzzing.mutate(draw, copy.deepcopy(draw(st.sampled_from([ASG, EKS]))), JSON, ["replace", "replace", "drop"])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_node_group_json_migrates_or_gives_a_validation_error(doc: Any) -> None:
    try:
        result = nodegroups.plan(nodegroups.read_groups([("in.json", json.dumps(doc))]))
    except errors.ValidationError:
        return
    for m in result.manifests:
        cpu = ((m.get("spec") or {}).get("limits") or {}).get("cpu")
        assert cpu is None or len(cpu) <= 12
