"""Who a simulated instance is: its tags, instance ID, provider ID and host name, per provider format.

:class:`Identity` is what :class:`karpy.cloudprovider.fake.provider.SimulatedCloud` asks when it starts or
adopts an instance and when it decides ownership. What a caller may rely on:

* **Tags.** :meth:`Identity.tags` gives karpy's own tags: NodePool and NodeClaim (``karpenter.sh/...``;
  ``karpenter.sh_...`` on Azure, whose tag keys allow no ``/``), the NodeClass tag
  (:meth:`nodeclass_tag_key`), on AWS ``eks:eks-cluster-name``, and this cluster's ownership tag
  (:meth:`ownership_tag`). :meth:`owns` is true only when an instance carries the ownership tag *and* the
  NodePool and NodeClass tags: a node group's instance, tagged with the cluster only, is never karpy's.
* **Names.** :meth:`names` returns ``(instance id, provider id, host name)`` in the real formats: AWS
  ``i-`` + 17 hex digits from the seeded ``rng`` (never repeated) with an ``ip-10-a-b-c`` private DNS name,
  Azure VM ``aks-<name>``, KWOK ``<name>`` (see :mod:`karpy.cloudprovider.interface`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping


class Identity:
    """Tags and names of one simulated cloud's instances; see the module docstring."""

    def __init__(self, provider_format: str, cluster_name: str, rng: random.Random) -> None:
        self.provider_format = provider_format
        self.cluster_name = cluster_name
        self.rng = rng
        self.region = ""
        self.subscription_id = ""
        self.resource_group = ""
        self.used_ids: set[str] = set()

    @property
    def _sep(self) -> str:
        return "_" if self.provider_format == "azure" else "/"

    def ownership_tag(self) -> tuple[str, str]:
        """The tag ``(key, value)`` marking an instance as launched for this cluster."""
        if self.provider_format == "aws":
            return (f"kubernetes.io/cluster/{self.cluster_name}", "owned")
        if self.provider_format == "azure":
            return ("karpenter.azure.com_cluster", self.cluster_name)
        return (f"karpenter.sh_cluster_{self.cluster_name}", "owned")

    def nodeclass_tag_key(self) -> str:
        """The tag naming an instance's NodeClass (AWS ``karpenter.k8s.aws/ec2nodeclass``)."""
        if self.provider_format == "aws":
            return "karpenter.k8s.aws/ec2nodeclass"
        if self.provider_format == "azure":
            return "karpenter.azure.com_aksnodeclass"
        return "karpenter.sh/nodeclass"

    def tags(self, nodepool: str, nodeclaim: str, node_class: str, *, base: Mapping[str, str] | None = None,
             eks: bool | None = None) -> dict[str, str]:
        """Every tag karpy puts on an instance it launches, over the NodeClass's own ``base`` tags.
        ``eks``: add ``eks:eks-cluster-name`` (default: on AWS)."""
        out = dict(base or {})
        out[f"karpenter.sh{self._sep}nodepool"] = nodepool
        out[f"karpenter.sh{self._sep}nodeclaim"] = nodeclaim
        out[self.nodeclass_tag_key()] = node_class
        if self.provider_format == "aws" if eks is None else eks:
            out["eks:eks-cluster-name"] = self.cluster_name
        key, value = self.ownership_tag()
        out[key] = value
        return out

    def owns(self, tags: Mapping[str, str]) -> bool:
        key, value = self.ownership_tag()
        return tags.get(key) == value and f"karpenter.sh{self._sep}nodepool" in tags and \
            self.nodeclass_tag_key() in tags

    def names(self, zone: str, name: str) -> tuple[str, str, str]:
        """``(instance id, provider id, host name)`` of a new instance; ``name`` names Azure VMs and KWOK nodes."""
        if self.provider_format == "aws":
            iid = self._aws_instance_id()
            a, b, c = self.rng.randrange(256), self.rng.randrange(256), self.rng.randrange(1, 255)
            suffix = "ec2.internal" if self.region == "us-east-1" else f"{self.region}.compute.internal"
            return iid, f"aws:///{zone}/{iid}", f"ip-10-{a}-{b}-{c}.{suffix}"
        if self.provider_format == "azure":
            iid = f"aks-{name}"
            return iid, (f"azure:///subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}"
                         f"/providers/Microsoft.Compute/virtualMachines/{iid}"), iid
        return name, f"kwok://{name}", name

    def _aws_instance_id(self) -> str:
        while True:
            iid = f"i-{self.rng.getrandbits(68):017x}"
            if iid not in self.used_ids:
                return iid
