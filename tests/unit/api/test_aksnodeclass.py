from __future__ import annotations

from karpy.api import aksnodeclass, kubeletconfig, nodeclass


def _manifest() -> dict[str, object]:
    return {"apiVersion": aksnodeclass.AKS_API_VERSION, "kind": aksnodeclass.AKS_KIND,
            "metadata": {"name": "default"},
            "spec": {"imageFamily": "Ubuntu2404", "osDiskSizeGB": 64, "maxPods": 30,
                     "kubelet": {"maxPods": 40, "evictionHard": {"memory.available": "5%"}},
                     "tags": {"team": "a"}}}


def test_the_aksnodeclass_module_reads_and_writes_the_manifest_it_was_given() -> None:
    nc = aksnodeclass.AKSNodeClass.from_manifest(_manifest())
    assert (nc.image_family, nc.os_disk_size_gb, nc.max_pods) == ("Ubuntu2404", 64, 30)
    assert isinstance(nc.kubelet, kubeletconfig.KubeletConfiguration)
    assert nc.kubelet.eviction_hard == {"memory.available": "5%"}
    assert aksnodeclass.AKSNodeClass.from_manifest(nc.to_manifest()) == nc


def test_the_old_names_in_nodeclass_are_the_same_objects_as_the_moved_ones() -> None:
    assert nodeclass.AKSNodeClass is aksnodeclass.AKSNodeClass
    assert nodeclass.AKSNodeClassStatus is aksnodeclass.AKSNodeClassStatus
    assert nodeclass.AKS_KIND == aksnodeclass.AKS_KIND == "AKSNodeClass"
    assert nodeclass.KubeletConfiguration is kubeletconfig.KubeletConfiguration
    assert nodeclass.stable_hash({"a": 1}) == kubeletconfig.stable_hash({"a": 1})


def test_the_hash_changes_with_the_spec_and_not_with_the_status() -> None:
    base = aksnodeclass.AKSNodeClass.from_manifest(_manifest())
    other = aksnodeclass.AKSNodeClass.from_manifest({**_manifest(), "spec": {"imageFamily": "AzureLinux"}})
    with_status = aksnodeclass.AKSNodeClass.from_manifest(
        {**_manifest(), "status": {"kubernetesVersion": "1.30.0"}})
    assert base.hash() != other.hash()
    assert base.hash() == with_status.hash()
