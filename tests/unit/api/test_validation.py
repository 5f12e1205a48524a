from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy.api import errors, manifest, nodeclaim, nodeclass, nodepool, validation

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def _pool(requirements: list[dict[str, Any]] | None = None, **spec: Any) -> nodepool.NodePool:
    tspec: dict[str, Any] = {"nodeClassRef": REF, "requirements": requirements or []}
    tmpl: dict[str, Any] = {"spec": tspec}
    for key in ("labels",):
        if key in spec:
            tmpl["metadata"] = {key: spec.pop(key)}
    for key in ("taints", "startupTaints"):
        if key in spec:
            tspec[key] = spec.pop(key)
    if spec.pop("no_ref", False):
        del tspec["nodeClassRef"]
    return nodepool.NodePool.from_manifest(
        {"kind": "NodePool", "metadata": {"name": "default"}, "spec": {"template": tmpl, **spec}}
    )


def _only_error(errs: list[errors.FieldError]) -> errors.FieldError:
    assert len(errs) == 1, [str(e) for e in errs]
    return errs[0]


def _req(
    key: str = "example.com/team", operator: str = "In", values: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values is not None:
        out["values"] = values
    out.update(extra)
    return out


def test_a_valid_nodepool_has_no_errors() -> None:
    np = _pool(
        [
            _req("karpenter.sh/capacity-type", "In", ["spot"]),
            _req("karpenter.k8s.aws/instance-generation", "Gt", ["2"]),
            _req("node.kubernetes.io/instance-type", "In", ["m5.large", "m5.xlarge"], minValues=2),
        ],
        labels={"team": "web", "node.kubernetes.io/role": "web"},
        weight=10,
    )
    assert validation.validate_nodepool(np) == []


def test_errors_name_the_object_the_path_what_was_expected_and_what_was_found() -> None:
    err = _only_error(
        validation.validate_nodepool(_pool([_req(values=["a"]), _req(operator="In", values=[])]))
    )
    assert err.obj == "NodePool default"
    assert err.path == "spec.template.spec.requirements[1].values"
    assert "at least one value" in err.expected
    assert err.found == []


@pytest.mark.parametrize(
    "key",
    [
        "kubernetes.io/hostname",
        "karpenter.sh/registered",
        "karpenter.sh/custom",
        "team.karpenter.sh/custom",
        "karpenter.k8s.aws/instance-ami-id",
        "karpenter.azure.com/custom",
    ],
)
def test_a_requirement_on_a_restricted_label_is_rejected(key: str) -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req(key, "Exists")])))
    assert err.path == "spec.template.spec.requirements[0].key"
    assert "reserves" in err.expected
    assert err.found == key


@pytest.mark.parametrize(
    "key",
    [
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/arch",
        "karpenter.k8s.aws/instance-family",
        "node-restriction.kubernetes.io/team",
        "kops.k8s.io/ig",
        "karpenter.azure.com/sku-family",
        # Karpenter v1.12+ no longer reserves kubernetes.io and k8s.io (issue 12 item 9)
        "example.kubernetes.io/x",
        "k8s.io/thing",
        "kubernetes.io/role",
        "node-role.kubernetes.io/worker",
        "storage.k8s.io/tier",
    ],
)
def test_a_requirement_on_a_well_known_or_allowed_label_is_accepted(key: str) -> None:
    assert validation.validate_nodepool(_pool([_req(key, "Exists")])) == []


def test_the_nodepool_label_is_forbidden_in_requirements_but_allowed_in_nodeclaims() -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req("karpenter.sh/nodepool", "In", ["x"])])))
    assert err.path == "spec.template.spec.requirements[0].key"
    assert "karpenter.sh/nodepool" in err.expected
    claim = nodeclaim.NodeClaim.from_manifest(
        {
            "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {"nodeClassRef": REF, "requirements": [_req("karpenter.sh/nodepool", "In", ["default"])]},
        }
    )
    assert validation.validate_nodeclaim(claim) == []


def test_the_v1alpha5_provisioner_name_label_is_checked_as_the_nodepool_label() -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req("karpenter.sh/provisioner-name", "Exists")])))
    assert "karpenter.sh/nodepool" in err.expected


def test_a_requirement_key_that_is_not_a_qualified_name_is_rejected() -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req("Example.com/team", "Exists")])))
    assert err.path == "spec.template.spec.requirements[0].key"
    assert "DNS subdomain" in err.expected


def test_operator_in_with_no_values_is_rejected() -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req(operator="In")])))
    assert err.path == "spec.template.spec.requirements[0].values"
    assert "at least one value for operator In" in err.expected


@pytest.mark.parametrize("operator", ["Exists", "DoesNotExist"])
def test_exists_and_does_not_exist_take_no_values(operator: str) -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req(operator=operator, values=["x"])])))
    assert err.path == "spec.template.spec.requirements[0].values"
    assert f"no values for operator {operator}" in err.expected
    assert err.found == ["x"]


@pytest.mark.parametrize("values", [[], ["1", "2"], ["abc"], ["-1"]])
@pytest.mark.parametrize("operator", ["Gt", "Lt", "Gte", "Lte"])
def test_numeric_operators_take_exactly_one_non_negative_integer(operator: str, values: list[str]) -> None:
    err = _only_error(
        validation.validate_nodepool(_pool([_req("karpenter.k8s.aws/instance-cpu", operator, values)]))
    )
    assert err.path == "spec.template.spec.requirements[0].values"
    assert "exactly one non-negative integer" in err.expected


def test_requirement_values_must_be_valid_label_values() -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req(values=["ok", "not ok"])])))
    assert err.path == "spec.template.spec.requirements[0].values[1]"
    assert err.found == "not ok"


@pytest.mark.parametrize("min_values", [0, 51])
def test_min_values_must_be_between_1_and_50(min_values: int) -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req(values=["a"], minValues=min_values)])))
    assert err.path == "spec.template.spec.requirements[0].minValues"
    assert "between 1 and 50" in err.expected


def test_min_values_may_not_exceed_the_number_of_values_for_in() -> None:
    err = _only_error(validation.validate_nodepool(_pool([_req(values=["a", "b"], minValues=3)])))
    assert err.path == "spec.template.spec.requirements[0].minValues"
    assert "(2)" in err.expected
    assert err.found == 3


def test_template_labels_in_restricted_domains_are_rejected() -> None:
    err = _only_error(validation.validate_nodepool(_pool(labels={"kubernetes.io/hostname": "x"})))
    assert err.path == "spec.template.metadata.labels.kubernetes.io/hostname"
    assert err.found == "kubernetes.io/hostname"


def test_the_nodepool_label_is_forbidden_in_template_labels() -> None:
    err = _only_error(validation.validate_nodepool(_pool(labels={"karpenter.sh/nodepool": "x"})))
    assert err.path == "spec.template.metadata.labels.karpenter.sh/nodepool"


def test_template_label_values_longer_than_63_characters_are_rejected() -> None:
    err = _only_error(validation.validate_nodepool(_pool(labels={"team": "x" * 64})))
    assert err.path == "spec.template.metadata.labels.team"
    assert "at most 63" in err.expected


def test_a_taint_given_twice_across_taints_and_startup_taints_is_rejected() -> None:
    taint = {"key": "example.com/gpu", "effect": "NoSchedule"}
    err = _only_error(validation.validate_nodepool(_pool(taints=[taint], startupTaints=[taint])))
    assert err.path == "spec.template.spec.startupTaints[0]"
    assert err.found == "example.com/gpu:NoSchedule"


def test_a_taint_key_must_be_a_qualified_name() -> None:
    err = _only_error(
        validation.validate_nodepool(_pool(taints=[{"key": "bad key", "effect": "NoSchedule"}]))
    )
    assert err.path == "spec.template.spec.taints[0].key"


def test_an_unknown_taint_effect_is_rejected_when_read() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        _pool(taints=[{"key": "a", "effect": "NoScheduleX"}])
    assert exc.value.errors[0].path == "spec.template.spec.taints[0].effect"


def test_a_nodepool_without_node_class_ref_is_rejected() -> None:
    err = _only_error(validation.validate_nodepool(_pool(no_ref=True)))
    assert err.path == "spec.template.spec.nodeClassRef"
    assert err.found is None


def test_the_old_when_underutilized_policy_is_rejected_with_a_hint() -> None:
    np = _pool(disruption={"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": "0s"})
    err = _only_error(validation.validate_nodepool(np))
    assert err.path == "spec.disruption.consolidationPolicy"
    assert "WhenEmptyOrUnderutilized" in err.expected


@pytest.mark.parametrize("nodes", ["101%", "-1", "ten", "10.5%"])
def test_budget_nodes_must_be_a_count_or_a_percentage(nodes: str) -> None:
    np = _pool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": nodes}]})
    err = _only_error(validation.validate_nodepool(np))
    assert err.path == "spec.disruption.budgets[0].nodes"
    assert err.found == nodes


@pytest.mark.parametrize("nodes", ["0", "3", "100%", "0%", "10%"])
def test_budget_nodes_accept_counts_and_percentages(nodes: str) -> None:
    np = _pool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": nodes}]})
    assert validation.validate_nodepool(np) == []


def test_a_budget_schedule_requires_a_duration() -> None:
    np = _pool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "0", "schedule": "@daily"}]})
    err = _only_error(validation.validate_nodepool(np))
    assert err.path == "spec.disruption.budgets[0].duration"
    assert "together" in err.expected


def test_a_budget_duration_requires_a_schedule() -> None:
    np = _pool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "0", "duration": "1h"}]})
    err = _only_error(validation.validate_nodepool(np))
    assert err.path == "spec.disruption.budgets[0].schedule"


def test_a_budget_schedule_must_be_cron() -> None:
    np = _pool(
        disruption={
            "consolidateAfter": "0s",
            "budgets": [{"nodes": "0", "schedule": "every day", "duration": "1h"}],
        }
    )
    err = _only_error(validation.validate_nodepool(np))
    assert err.path == "spec.disruption.budgets[0].schedule"
    assert "cron" in err.expected


def test_a_budget_duration_in_seconds_is_rejected_when_read() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        _pool(
            disruption={
                "consolidateAfter": "0s",
                "budgets": [{"nodes": "0", "schedule": "@daily", "duration": "30s"}],
            }
        )
    assert exc.value.errors[0].path == "spec.disruption.budgets[0].duration"


def test_budget_reasons_must_be_known() -> None:
    np = _pool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "1", "reasons": ["Expired"]}]})
    err = _only_error(validation.validate_nodepool(np))
    assert err.path == "spec.disruption.budgets[0].reasons[0]"
    assert "Empty, Drifted, Underutilized" in err.expected


@pytest.mark.parametrize("weight", [0, 101])
def test_weight_must_be_between_1_and_100(weight: int) -> None:
    err = _only_error(validation.validate_nodepool(_pool(weight=weight)))
    assert err.path == "spec.weight"
    assert err.found == weight


def test_negative_limits_are_rejected() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        validation.validate_nodepool(_pool(limits={"cpu": "-1"}))
    assert [e.path for e in exc.value.errors] == ["spec.limits.cpu"]


def test_raise_if_invalid_carries_every_error() -> None:
    errs = validation.validate_nodepool(_pool([_req(operator="In")], weight=0))
    with pytest.raises(errors.ValidationError) as exc:
        validation.raise_if_invalid(errs)
    assert len(exc.value.errors) == 2
    validation.raise_if_invalid([])


# --- EC2NodeClass --------------------------------------------------------------------------------

EC2: dict[str, Any] = {
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": "KarpenterNodeRole",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    },
}


def _ec2(**spec: Any) -> nodeclass.EC2NodeClass:
    d = copy.deepcopy(EC2)
    for k, v in spec.items():
        if v is None:
            d["spec"].pop(k, None)
        else:
            d["spec"][k] = v
    return nodeclass.EC2NodeClass.from_manifest(d)


def test_a_valid_ec2nodeclass_has_no_errors() -> None:
    assert validation.validate_ec2nodeclass(_ec2()) == []


def test_an_ec2nodeclass_needs_subnet_selector_terms() -> None:
    err = _only_error(validation.validate_ec2nodeclass(_ec2(subnetSelectorTerms=None)))
    assert err.obj == "EC2NodeClass default"
    assert err.path == "spec.subnetSelectorTerms"
    assert "at least one subnet selector term" in err.expected


def test_an_ec2nodeclass_needs_exactly_one_of_role_and_instance_profile() -> None:
    err = _only_error(validation.validate_ec2nodeclass(_ec2(role=None)))
    assert err.path == "spec.role"
    err = _only_error(validation.validate_ec2nodeclass(_ec2(instanceProfile="p")))
    assert err.path == "spec.instanceProfile"
    assert "not both" in err.expected
    assert validation.validate_ec2nodeclass(_ec2(role=None), identity_from_settings=True) == []


def test_an_id_term_cannot_be_combined_with_other_fields() -> None:
    err = _only_error(
        validation.validate_ec2nodeclass(_ec2(subnetSelectorTerms=[{"id": "subnet-1", "tags": {"a": "b"}}]))
    )
    assert err.path == "spec.subnetSelectorTerms[0]"
    assert "'id' alone" in err.expected


def test_a_subnet_term_cannot_select_by_name() -> None:
    err = _only_error(validation.validate_ec2nodeclass(_ec2(subnetSelectorTerms=[{"name": "private"}])))
    assert err.path == "spec.subnetSelectorTerms[0].name"


def test_an_alias_must_be_alone_and_name_a_known_family() -> None:
    errs = validation.validate_ec2nodeclass(_ec2(amiSelectorTerms=[{"alias": "ubuntu@latest"}]))
    assert _only_error(errs).path == "spec.amiSelectorTerms[0].alias"
    errs = validation.validate_ec2nodeclass(_ec2(amiSelectorTerms=[{"alias": "al2@latest"}, {"id": "ami-1"}]))
    assert _only_error(errs).path == "spec.amiSelectorTerms[0]"


def test_ami_family_is_required_without_an_alias() -> None:
    err = _only_error(validation.validate_ec2nodeclass(_ec2(amiSelectorTerms=[{"id": "ami-123"}])))
    assert err.path == "spec.amiFamily"


def test_tags_karpenter_or_aws_set_themselves_are_rejected() -> None:
    errs = validation.validate_ec2nodeclass(
        _ec2(
            tags={
                "kubernetes.io/cluster/demo": "owned",
                "karpenter.sh/nodepool": "x",
                "aws:foo": "y",
                "team": "web",
            }
        )
    )
    assert sorted(e.path for e in errs) == [
        "spec.tags.aws:foo",
        "spec.tags.karpenter.sh/nodepool",
        "spec.tags.kubernetes.io/cluster/demo",
    ]


def test_block_devices_need_a_size_or_snapshot_and_a_known_volume_type() -> None:
    errs = validation.validate_ec2nodeclass(
        _ec2(blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp9"}}])
    )
    assert sorted(e.path for e in errs) == [
        "spec.blockDeviceMappings[0].ebs",
        "spec.blockDeviceMappings[0].ebs.volumeType",
    ]


def test_only_one_block_device_may_be_the_root_volume() -> None:
    bdm = {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}}
    err = _only_error(validation.validate_ec2nodeclass(_ec2(blockDeviceMappings=[bdm, bdm])))
    assert err.path == "spec.blockDeviceMappings[1].rootVolume"


def test_metadata_options_are_checked() -> None:
    errs = validation.validate_ec2nodeclass(
        _ec2(metadataOptions={"httpTokens": "maybe", "httpPutResponseHopLimit": 65})
    )
    assert sorted(e.path for e in errs) == [
        "spec.metadataOptions.httpPutResponseHopLimit",
        "spec.metadataOptions.httpTokens",
    ]


def test_kubelet_image_gc_high_must_exceed_low() -> None:
    err = _only_error(
        validation.validate_ec2nodeclass(
            _ec2(kubelet={"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60})
        )
    )
    assert err.path == "spec.kubelet.imageGCHighThresholdPercent"
    assert "(60)" in err.expected


def test_kubelet_eviction_signals_and_soft_grace_periods_must_match() -> None:
    errs = validation.validate_ec2nodeclass(
        _ec2(kubelet={"evictionHard": {"memory.free": "5%"}, "evictionSoft": {"memory.available": "500Mi"}})
    )
    assert sorted(e.path for e in errs) == [
        "spec.kubelet.evictionHard.memory.free",
        "spec.kubelet.evictionSoftGracePeriod.memory.available",
    ]


def test_kubelet_reserved_resources_are_limited_to_cpu_memory_storage_and_pid() -> None:
    err = _only_error(validation.validate_ec2nodeclass(_ec2(kubelet={"systemReserved": {"gpu": "1"}})))
    assert err.path == "spec.kubelet.systemReserved.gpu"


# --- AKSNodeClass --------------------------------------------------------------------------------


def _aks(**spec: Any) -> nodeclass.AKSNodeClass:
    return nodeclass.AKSNodeClass.from_manifest(
        {"kind": "AKSNodeClass", "metadata": {"name": "default"}, "spec": spec}
    )


def test_a_valid_aksnodeclass_has_no_errors() -> None:
    assert (
        validation.validate_aksnodeclass(_aks(imageFamily="AzureLinux", osDiskSizeGB=64, maxPods=110)) == []
    )


def test_an_unknown_aks_image_family_is_rejected() -> None:
    err = _only_error(validation.validate_aksnodeclass(_aks(imageFamily="Windows")))
    assert err.obj == "AKSNodeClass default"
    assert err.path == "spec.imageFamily"
    assert "Ubuntu, Ubuntu2204, Ubuntu2404, AzureLinux" in err.expected


def test_the_aks_os_disk_must_be_between_30_and_2048_gb() -> None:
    err = _only_error(validation.validate_aksnodeclass(_aks(osDiskSizeGB=10)))
    assert err.path == "spec.osDiskSizeGB"


def test_the_aks_subnet_must_be_a_resource_id() -> None:
    err = _only_error(validation.validate_aksnodeclass(_aks(vnetSubnetID="aks-subnet")))
    assert err.path == "spec.vnetSubnetID"
    good = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/sn"
    assert validation.validate_aksnodeclass(_aks(vnetSubnetID=good)) == []


def test_aks_max_pods_must_be_between_10_and_250() -> None:
    err = _only_error(validation.validate_aksnodeclass(_aks(maxPods=300)))
    assert err.path == "spec.maxPods"


def test_template_labels_in_the_kubernetes_domains_are_accepted_as_karpenter_v1_does() -> None:
    pool = _pool(labels={"node-role.kubernetes.io/worker": "", "example.k8s.io/team": "web"})
    assert validation.validate_nodepool(pool) == []


def test_the_balanced_policy_karpenters_crd_admits_is_accepted() -> None:
    """Karpenter v1.14's CRD enum: WhenEmpty, WhenEmptyOrUnderutilized, Balanced."""
    np = _pool(disruption={"consolidationPolicy": "Balanced", "consolidateAfter": "0s"})
    assert validation.validate_nodepool(np) == []
    assert np.disruption.consolidation_policy == nodepool.BALANCED


def test_loading_a_balanced_nodepool_gives_no_warning_now_that_karpy_implements_it() -> None:
    text = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bal}
spec:
  disruption: {consolidationPolicy: Balanced, consolidateAfter: 0s}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""
    result = manifest.load_documents(text)
    assert not [w for w in result.warnings if "Balanced" in w], result.warnings
