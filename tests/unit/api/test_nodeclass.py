from __future__ import annotations

from typing import Any

from karpy.api import nodeclass, quantity

GiB = 2**30 * quantity.MILLI


def _ec2(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}, {"id": "subnet-123"}],
        "securityGroupSelectorTerms": [{"name": "eks-cluster-sg"}],
        "role": "KarpenterNodeRole-demo",
    }
    base.update(spec)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": base,
    }


def test_an_ec2nodeclass_reads_selector_terms_and_defaults() -> None:
    nc = nodeclass.EC2NodeClass.from_manifest(_ec2())
    assert nc.ami_selector_terms[0].alias == "al2023@latest"
    assert nc.resolved_ami_family == "AL2023"
    assert nc.subnet_selector_terms[0].tags == {"karpenter.sh/discovery": "demo"}
    assert nc.subnet_selector_terms[1].id == "subnet-123"
    assert nc.metadata_options == nodeclass.MetadataOptions("enabled", "disabled", 1, "required")


def test_block_devices_and_kubelet_settings_are_typed() -> None:
    nc = nodeclass.EC2NodeClass.from_manifest(
        _ec2(
            blockDeviceMappings=[
                {
                    "deviceName": "/dev/xvda",
                    "rootVolume": True,
                    "ebs": {
                        "volumeSize": "100Gi",
                        "volumeType": "gp3",
                        "iops": 3000,
                        "throughput": 125,
                        "encrypted": True,
                        "kmsKeyID": "arn:aws:kms:key/1",
                        "deleteOnTermination": True,
                    },
                }
            ],
            kubelet={
                "maxPods": 110,
                "systemReserved": {"cpu": "100m", "memory": "100Mi"},
                "evictionHard": {"memory.available": "5%"},
                "clusterDNS": ["10.0.1.100"],
            },
        )
    )
    ebs = nc.block_device_mappings[0].ebs
    assert ebs is not None and ebs.volume_size == 100 * GiB and ebs.kms_key_id == "arn:aws:kms:key/1"
    assert nc.kubelet is not None
    assert nc.kubelet.system_reserved == {"cpu": 100, "memory": 100 * 2**20 * quantity.MILLI}
    assert nc.kubelet.cluster_dns == ("10.0.1.100",)


def test_an_ec2nodeclass_round_trips_through_its_manifest() -> None:
    nc = nodeclass.EC2NodeClass.from_manifest(
        _ec2(
            tags={"team": "web"},
            userData="#!/bin/bash\necho hi",
            detailedMonitoring=True,
            blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}],
            kubelet={"maxPods": 58, "kubeReserved": {"cpu": "200m"}},
            metadataOptions={"httpPutResponseHopLimit": 2},
            status={"subnets": [{"id": "subnet-1", "zone": "us-east-1a"}], "instanceProfile": "p"},
        )
    )
    manifest = nc.to_manifest()
    assert manifest["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "20Gi"
    assert nodeclass.EC2NodeClass.from_manifest(manifest) == nc


def test_the_ec2nodeclass_hash_ignores_selector_terms_but_not_user_data() -> None:
    base = nodeclass.EC2NodeClass.from_manifest(_ec2()).hash()
    other_subnets = _ec2(subnetSelectorTerms=[{"id": "subnet-999"}])
    assert nodeclass.EC2NodeClass.from_manifest(other_subnets).hash() == base
    assert nodeclass.EC2NodeClass.from_manifest(_ec2(userData="echo changed")).hash() != base


def test_an_aksnodeclass_reads_its_fields_and_defaults() -> None:
    d = {
        "apiVersion": "karpenter.azure.com/v1beta1",
        "kind": "AKSNodeClass",
        "metadata": {"name": "default"},
        "spec": {"imageFamily": "AzureLinux", "maxPods": 110, "kubelet": {"cpuManagerPolicy": "static"}},
    }
    nc = nodeclass.AKSNodeClass.from_manifest(d)
    assert nc.image_family == "AzureLinux"
    assert nc.os_disk_size_gb == 128
    assert nc.kubelet is not None and nc.kubelet.cpu_manager_policy == "static"
    assert nodeclass.AKSNodeClass.from_manifest(nc.to_manifest()) == nc


def test_the_aksnodeclass_hash_follows_the_os_disk_size() -> None:
    def aks(size: int) -> nodeclass.AKSNodeClass:
        return nodeclass.AKSNodeClass.from_manifest(
            {"kind": "AKSNodeClass", "metadata": {"name": "d"}, "spec": {"osDiskSizeGB": size}}
        )

    assert aks(128).hash() == aks(128).hash()
    assert aks(128).hash() != aks(256).hash()
