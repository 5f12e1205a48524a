"""A controller for one cloud watches only that cloud's NodeClass kind (a cluster with only Karpenter's
EKS CRDs has no AKSNodeClass to list or watch)."""

from __future__ import annotations

from . import builders


def kinds_touched(nodeclass_kinds: tuple[str, ...]) -> set[str]:
    kinds, _ = builders.register_recording(nodeclass_kinds=nodeclass_kinds)
    return kinds & {"EC2NodeClass", "AKSNodeClass", "KWOKNodeClass"}


def test_an_aws_controller_never_lists_or_watches_aks_nodeclasses() -> None:
    assert kinds_touched(("EC2NodeClass",)) == {"EC2NodeClass"}


def test_by_default_both_clouds_nodeclass_kinds_are_watched() -> None:
    assert kinds_touched(()) == {"EC2NodeClass", "AKSNodeClass"}
