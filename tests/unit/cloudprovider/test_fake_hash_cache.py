"""The fake cloud's per-model hash cache answers what hashing afresh answers."""

from __future__ import annotations

from karpy.api import nodeclass
from karpy.cloudprovider.fake import images


def _nc(name: str, family: str) -> nodeclass.EC2NodeClass:
    return nodeclass.EC2NodeClass.from_manifest({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
        "spec": {"role": "r", "amiSelectorTerms": [{"alias": f"{family}@latest"}],
                 "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}})


def test_a_nodeclass_hash_is_the_fresh_hash_for_each_model() -> None:
    a, b = _nc("a", "al2023"), _nc("b", "bottlerocket")
    for _ in range(2):
        assert images.nodeclass_hash(a) == a.hash()
        assert images.nodeclass_hash(b) == b.hash()


def test_a_resolved_image_is_the_same_when_asked_again() -> None:
    a = _nc("a", "al2023")
    first = images.resolve_image("aws", "us-west-2", a, None, {})
    images._HASHES.clear()
    assert images.resolve_image("aws", "us-west-2", a, None, {}) == first
    assert images.resolve_image("aws", "us-west-2", a, None, {}) == first
