"""A controller for one cloud watches only that cloud's NodeClass kind (a cluster with only Karpenter's
EKS CRDs has no AKSNodeClass to list or watch)."""

from __future__ import annotations

import random
from typing import Any

from karpy import clock, operator
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.controllers import runtime
from karpy.kube import interface, memory


class Recording:
    """The in-memory cluster, remembering which kinds were listed or watched."""

    def __init__(self, inner: memory.InMemoryCluster) -> None:
        self.inner = inner
        self.kinds: set[str] = set()

    def list(self, kind: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        self.kinds.add(kind)
        return self.inner.list(kind, *args, **kwargs)

    def watch(self, kind: str, handler: interface.WatchHandler) -> interface.Unsubscribe:
        self.kinds.add(kind)
        return self.inner.watch(kind, handler)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def kinds_touched(nodeclass_kinds: tuple[str, ...]) -> set[str]:
    vclock = clock.VirtualClock()
    cluster = Recording(memory.InMemoryCluster(vclock, rng=random.Random(1)))
    manager = runtime.Manager(cluster, vclock)
    cloud = fake_provider.SimulatedCloud(vclock, random.Random(2), catalog="aws")
    operator.register_all(manager, cluster, cloud, vclock, nodeclass_kinds=nodeclass_kinds)
    return cluster.kinds & {"EC2NodeClass", "AKSNodeClass", "KWOKNodeClass"}


def test_an_aws_controller_never_lists_or_watches_aks_nodeclasses() -> None:
    assert kinds_touched(("EC2NodeClass",)) == {"EC2NodeClass"}


def test_by_default_both_clouds_nodeclass_kinds_are_watched() -> None:
    assert kinds_touched(()) == {"EC2NodeClass", "AKSNodeClass"}
