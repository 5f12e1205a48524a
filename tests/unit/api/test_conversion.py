from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from karpy.api import conversion, errors, nodeclaim, nodeclass, nodepool


def _provisioner(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "providerRef": {"name": "default"},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
        ],
    }
    base.update(spec)
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": "default"},
        "spec": base,
    }


def _pool_of(result: conversion.Result) -> nodepool.NodePool:
    return nodepool.NodePool.from_manifest(result.manifests[0])


def _v1beta1_pool(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"template": {"spec": {"nodeClassRef": {"name": "default"}, "requirements": []}}}
    base.update(spec)
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "web"},
        "spec": base,
    }


# --- v1alpha5 Provisioner ------------------------------------------------------------------------


def test_ttl_seconds_after_empty_becomes_when_empty_with_consolidate_after() -> None:
    result = conversion.convert(_provisioner(ttlSecondsAfterEmpty=30))
    np = _pool_of(result)
    assert np.disruption.consolidation_policy == "WhenEmpty"
    assert np.disruption.consolidate_after == 30.0
    assert any(
        "spec.ttlSecondsAfterEmpty (karpenter.sh/v1alpha5) is now spec.disruption.consolidationPolicy="
        "WhenEmpty + consolidateAfter=30s on NodePool default (karpenter.sh/v1)" in w
        for w in result.warnings
    )


def test_consolidation_enabled_becomes_when_empty_or_underutilized_after_0s() -> None:
    np = _pool_of(conversion.convert(_provisioner(consolidation={"enabled": True})))
    assert np.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert np.disruption.consolidate_after == 0.0


def test_a_provisioner_without_emptiness_or_consolidation_never_removes_nodes() -> None:
    np = _pool_of(conversion.convert(_provisioner()))
    assert np.disruption.consolidation_policy == "WhenEmpty"
    assert np.disruption.consolidate_after is None


def test_ttl_seconds_after_empty_and_consolidation_together_are_rejected() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        conversion.convert(_provisioner(ttlSecondsAfterEmpty=30, consolidation={"enabled": True}))
    assert exc.value.errors[0].path == "spec.consolidation.enabled"


def test_ttl_seconds_until_expired_becomes_expire_after_and_absent_means_never() -> None:
    assert (
        _pool_of(conversion.convert(_provisioner(ttlSecondsUntilExpired=2592000))).template.spec.expire_after
        == 720 * 3600.0
    )
    assert _pool_of(conversion.convert(_provisioner())).template.spec.expire_after is None


def test_provisioner_fields_move_to_the_nodepool_template() -> None:
    np = _pool_of(
        conversion.convert(
            _provisioner(
                labels={"team": "web"},
                annotations={"a": "b"},
                weight=50,
                taints=[{"key": "gpu", "effect": "NoSchedule"}],
                startupTaints=[{"key": "init", "effect": "NoExecute"}],
                limits={"resources": {"cpu": "1000", "memory": "1000Gi"}},
            )
        )
    )
    assert np.template.labels == {"team": "web"}
    assert np.template.annotations == {"a": "b"}
    assert np.weight == 50
    assert [t.key for t in np.template.spec.taints] == ["gpu"]
    assert [t.key for t in np.template.spec.startup_taints] == ["init"]
    assert np.limits["cpu"] == 1_000_000


def test_missing_capacity_type_and_arch_get_the_v1alpha5_defaults() -> None:
    result = conversion.convert(_provisioner(requirements=[]))
    reqs = {r.key: r.values for r in _pool_of(result).template.spec.requirements}
    assert reqs == {"karpenter.sh/capacity-type": ("on-demand",), "kubernetes.io/arch": ("amd64",)}


def test_the_provisioner_name_requirement_becomes_the_nodepool_label() -> None:
    result = conversion.convert(
        _provisioner(requirements=[{"key": "karpenter.sh/provisioner-name", "operator": "Exists"}])
    )
    keys = [r.key for r in _pool_of(result).template.spec.requirements]
    assert "karpenter.sh/nodepool" in keys and "karpenter.sh/provisioner-name" not in keys


def test_a_provider_ref_becomes_a_node_class_ref_to_the_ec2nodeclass_of_that_name() -> None:
    np = _pool_of(conversion.convert(_provisioner(providerRef={"name": "tmpl"})))
    assert np.node_class_ref == nodeclaim.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "tmpl")


def test_an_inline_provider_becomes_an_ec2nodeclass_named_after_the_provisioner() -> None:
    result = conversion.convert(
        _provisioner(
            providerRef=None,
            provider={
                "subnetSelector": {"karpenter.sh/discovery": "demo"},
                "securityGroupSelector": {"aws-ids": "sg-1,sg-2"},
                "instanceProfile": "KarpenterNodeInstanceProfile",
                "tags": {"team": "web"},
                "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "50Gi"}}],
            },
            kubeletConfiguration={"maxPods": 20, "containerRuntime": "containerd"},
        )
    )
    assert [m["kind"] for m in result.manifests] == ["NodePool", "EC2NodeClass"]
    nc = nodeclass.EC2NodeClass.from_manifest(result.manifests[1])
    assert nc.name == "default"
    assert [t.tags for t in nc.subnet_selector_terms] == [{"karpenter.sh/discovery": "demo"}]
    assert [t.id for t in nc.security_group_selector_terms] == ["sg-1", "sg-2"]
    assert nc.instance_profile == "KarpenterNodeInstanceProfile"
    assert nc.ami_selector_terms[0].alias == "al2@latest"
    assert nc.kubelet is not None and nc.kubelet.max_pods == 20
    assert _pool_of(result).node_class_ref == nodeclaim.NodeClassRef(
        "karpenter.k8s.aws", "EC2NodeClass", "default"
    )
    assert any("containerRuntime is dropped" in w for w in result.warnings)


def test_a_provisioner_needs_a_provider_or_a_provider_ref() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        conversion.convert(_provisioner(providerRef=None))
    assert exc.value.errors[0].path == "spec.providerRef"


def test_a_provider_ref_kubelet_is_kept_in_the_compatibility_annotation() -> None:
    np = _pool_of(conversion.convert(_provisioner(kubeletConfiguration={"maxPods": 30})))
    kubelet = np.compat_kubelet()
    assert kubelet is not None and kubelet.max_pods == 30


# --- v1alpha1 AWSNodeTemplate --------------------------------------------------------------------


def test_an_awsnodetemplate_becomes_an_ec2nodeclass_with_its_disks_and_tags() -> None:
    result = conversion.convert(
        {
            "apiVersion": "karpenter.k8s.aws/v1alpha1",
            "kind": "AWSNodeTemplate",
            "metadata": {"name": "t"},
            "spec": {
                "subnetSelector": {"Name": "*private*"},
                "securityGroupSelector": {"karpenter.sh/discovery": "x"},
                "amiSelector": {"aws::ids": "ami-1, ami-2"},
                "amiFamily": "Bottlerocket",
                "detailedMonitoring": True,
                "userData": "[settings]",
                "tags": {"team": "web"},
                "metadataOptions": {"httpTokens": "optional"},
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "30Gi", "kmsKeyID": "arn:k"}}
                ],
            },
        }
    )
    nc = nodeclass.EC2NodeClass.from_manifest(result.manifests[0])
    assert [t.id for t in nc.ami_selector_terms] == ["ami-1", "ami-2"]
    assert nc.ami_family == "Bottlerocket"
    assert nc.detailed_monitoring is True
    assert nc.user_data == "[settings]"
    ebs = nc.block_device_mappings[0].ebs
    assert ebs is not None and ebs.kms_key_id == "arn:k"
    assert nc.metadata_options.http_tokens == "optional"
    assert nc.metadata_options.http_put_response_hop_limit == 2  # the v1alpha1/v1beta1 default is kept
    assert "t" in result.identity_from_settings


def test_an_ami_selector_by_name_and_owner_becomes_name_and_owner_terms() -> None:
    result = conversion.convert(
        {
            "apiVersion": "karpenter.k8s.aws/v1alpha1",
            "kind": "AWSNodeTemplate",
            "metadata": {"name": "t"},
            "spec": {
                "amiSelector": {"aws::name": "my-ami-*", "aws::owners": "self,123456789012"},
                "amiFamily": "AL2",
                "instanceProfile": "p",
                "subnetSelector": {"a": "b"},
                "securityGroupSelector": {"a": "b"},
            },
        }
    )
    terms = result.manifests[0]["spec"]["amiSelectorTerms"]
    assert terms == [{"name": "my-ami-*", "owner": "self"}, {"name": "my-ami-*", "owner": "123456789012"}]


def test_a_launch_template_cannot_be_converted() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        conversion.convert(
            {
                "apiVersion": "karpenter.k8s.aws/v1alpha1",
                "kind": "AWSNodeTemplate",
                "metadata": {"name": "t"},
                "spec": {"launchTemplate": "my-lt"},
            }
        )
    assert exc.value.errors[0].path == "spec.launchTemplate"


# --- v1beta1 -------------------------------------------------------------------------------------


def test_when_underutilized_becomes_when_empty_or_underutilized_after_0s() -> None:
    np = _pool_of(conversion.convert(_v1beta1_pool(disruption={"consolidationPolicy": "WhenUnderutilized"})))
    assert np.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert np.disruption.consolidate_after == 0.0


def test_v1beta1_disruption_expire_after_moves_to_the_template() -> None:
    np = _pool_of(conversion.convert(_v1beta1_pool(disruption={"expireAfter": "Never"})))
    assert np.template.spec.expire_after is None
    np = _pool_of(conversion.convert(_v1beta1_pool()))
    assert np.template.spec.expire_after == 720 * 3600.0


def test_v1beta1_when_empty_without_consolidate_after_is_rejected() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        conversion.convert(_v1beta1_pool(disruption={"consolidationPolicy": "WhenEmpty"}))
    assert exc.value.errors[0].path == "spec.disruption.consolidateAfter"


def test_a_v1beta1_kubelet_goes_to_the_compatibility_annotation() -> None:
    d = _v1beta1_pool()
    d["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 20, "evictionHard": {"memory.available": "5%"}}
    result = conversion.convert(d)
    annotation = result.manifests[0]["metadata"]["annotations"][nodepool.KUBELET_COMPAT_ANNOTATION]
    assert json.loads(annotation) == {"maxPods": 20, "evictionHard": {"memory.available": "5%"}}
    assert "kubelet" not in result.manifests[0]["spec"]["template"]["spec"]


def test_a_node_class_ref_without_kind_resolves_to_the_class_given_alongside() -> None:
    ctx = conversion.Context(node_classes={"default": ("karpenter.azure.com", "AKSNodeClass")})
    np = _pool_of(conversion.convert(_v1beta1_pool(), ctx))
    assert np.node_class_ref == nodeclaim.NodeClassRef("karpenter.azure.com", "AKSNodeClass", "default")
    np = _pool_of(conversion.convert(_v1beta1_pool()))
    assert np.node_class_ref == nodeclaim.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")


def test_a_v1beta1_ec2nodeclass_family_without_terms_becomes_an_alias() -> None:
    result = conversion.convert(
        {
            "apiVersion": "karpenter.k8s.aws/v1beta1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "d"},
            "spec": {"amiFamily": "AL2023", "role": "r"},
        }
    )
    assert result.manifests[0]["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert result.manifests[0]["apiVersion"] == "karpenter.k8s.aws/v1"


def test_ubuntu_is_not_available_in_v1() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        conversion.convert(
            {
                "apiVersion": "karpenter.k8s.aws/v1beta1",
                "kind": "EC2NodeClass",
                "metadata": {"name": "d"},
                "spec": {"amiFamily": "Ubuntu"},
            }
        )
    assert exc.value.errors[0].path == "spec.amiFamily"


def test_a_v1beta1_nodeclaim_takes_expire_after_from_its_nodepool() -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": {"name": "web-x", "labels": {"karpenter.sh/nodepool": "web"}},
        "spec": {
            "nodeClassRef": {
                "name": "default",
                "kind": "EC2NodeClass",
                "apiVersion": "karpenter.k8s.aws/v1beta1",
            },
            "requirements": [],
        },
    }
    nc = nodeclaim.NodeClaim.from_manifest(
        conversion.convert(claim, conversion.Context(expire_after={"web": "24h"})).manifests[0]
    )
    assert nc.spec.expire_after == 24 * 3600.0
    assert nc.spec.node_class_ref == nodeclaim.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")


# --- v1alpha5 Machine, v1alpha2 AKSNodeClass -----------------------------------------------------


def test_a_machine_becomes_a_nodeclaim_with_renamed_conditions_and_labels() -> None:
    machine = {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Machine",
        "metadata": {"name": "default-x", "labels": {"karpenter.sh/provisioner-name": "default"}},
        "spec": {
            "machineTemplateRef": {"name": "default"},
            "requirements": [],
            "resources": {"requests": {"cpu": "1"}},
        },
        "status": {
            "providerID": "aws:///z/i-1",
            "conditions": [{"type": "MachineLaunched", "status": "True"}],
        },
    }
    nc = nodeclaim.NodeClaim.from_manifest(conversion.convert(machine).manifests[0])
    assert nc.nodepool_name == "default"
    assert nc.is_true("Launched")
    assert nc.spec.expire_after is None  # v1alpha5 never expired nodes by default
    assert nc.spec.node_class_ref == nodeclaim.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")
    assert nc.spec.resources_requests == {"cpu": 1000}


def test_a_v1alpha2_aksnodeclass_becomes_v1beta1_unchanged() -> None:
    result = conversion.convert(
        {
            "apiVersion": "karpenter.azure.com/v1alpha2",
            "kind": "AKSNodeClass",
            "metadata": {"name": "default"},
            "spec": {"osDiskSizeGB": 128},
        }
    )
    assert result.manifests[0]["apiVersion"] == "karpenter.azure.com/v1beta1"
    assert result.manifests[0]["spec"] == {"osDiskSizeGB": 128}


# --- general -------------------------------------------------------------------------------------


def test_a_v1_object_passes_through_without_warnings() -> None:
    d = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "x"}, "spec": {}}
    result = conversion.convert(d)
    assert result.manifests == [d] and result.manifests[0] is not d
    assert result.warnings == []


def test_an_unknown_version_names_the_supported_ones() -> None:
    with pytest.raises(errors.ValidationError) as exc:
        conversion.convert({"apiVersion": "karpenter.sh/v2", "kind": "NodePool", "metadata": {"name": "x"}})
    err = exc.value.errors[0]
    assert err.path == "apiVersion"
    assert "karpenter.sh/v1, karpenter.sh/v1beta1" in err.expected


def test_conversion_does_not_change_its_input() -> None:
    d = _provisioner(ttlSecondsAfterEmpty=30)
    before = json.dumps(d, sort_keys=True)
    conversion.convert(d)
    assert json.dumps(d, sort_keys=True) == before


def test_each_warning_is_logged_once_per_process_but_returned_every_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    d = _provisioner(ttlSecondsAfterEmpty=31)
    d["metadata"] = {"name": "logged-once"}
    with caplog.at_level(logging.WARNING, logger="karpy.api.conversion"):
        first = conversion.convert(d)
        second = conversion.convert(d)
    assert first.warnings == second.warnings and first.warnings
    logged = [r.getMessage() for r in caplog.records if "logged-once" in r.getMessage()]
    assert len(logged) == len(first.warnings)
