"""A cluster in NAP mode gets AKS's default and system-surge NodePools and AKSNodeClasses, once."""

from __future__ import annotations

from karpy import clock
from karpy.api import aksnodeclass, nodepool, validation
from karpy.cloudprovider.azure import nap
from karpy.kube import memory


def test_missing_nap_objects_are_created_and_parse_as_karpenter_objects() -> None:
    cluster = memory.InMemoryCluster(clock.VirtualClock())
    created = nap.ensure(cluster)
    assert created == ["AKSNodeClass/default", "AKSNodeClass/system-surge", "NodePool/default",
                       "NodePool/system-surge"]
    default = nodepool.NodePool.from_manifest(cluster.get("NodePool", "default"))
    assert default.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert {r.key: r.values for r in default.template.spec.requirements}["karpenter.azure.com/sku-family"] == ("D",)
    surge = nodepool.NodePool.from_manifest(cluster.get("NodePool", "system-surge"))
    assert [t.key for t in surge.template.spec.taints] == ["CriticalAddonsOnly"]
    assert surge.template.labels["kubernetes.azure.com/mode"] == "system"
    assert surge.disruption.consolidation_policy == "WhenEmpty" and surge.disruption.consolidate_after == 60
    nc = aksnodeclass.AKSNodeClass.from_manifest(cluster.get("AKSNodeClass", "default"))
    assert (nc.image_family, nc.os_disk_size_gb) == ("Ubuntu2204", 128)
    assert validation.validate_aksnodeclass(nc) == []
    assert validation.validate_nodepool(default) == [] and validation.validate_nodepool(surge) == []


def test_objects_the_user_changed_or_created_first_are_left_alone() -> None:
    cluster = memory.InMemoryCluster(clock.VirtualClock())
    nap.ensure(cluster)
    mine = cluster.get("NodePool", "default")
    mine = {**mine, "spec": {**mine["spec"], "weight": 10}}
    cluster.update(mine)
    cluster.delete("NodePool", "system-surge")
    assert nap.ensure(cluster) == ["NodePool/system-surge"]
    assert cluster.get("NodePool", "default")["spec"]["weight"] == 10
    assert nap.ensure(cluster) == []
