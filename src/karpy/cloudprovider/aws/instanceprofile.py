"""Instance profiles for EC2NodeClasses, as Karpenter's instance profile provider manages them.

* ``spec.instanceProfile`` names an existing profile: it is used as is (checked to exist, except in an
  isolated VPC: IAM has no VPC endpoint).
* ``spec.role`` (a role name or ARN): karpy creates, once, a profile named
  ``<cluster>_<stable hash of region and role>``, tagged ``karpenter.sh/managed-by=<cluster>``,
  ``karpenter.k8s.aws/ec2nodeclass=<nodeclass>``, ``eks:eks-cluster-name=<cluster>`` and
  ``kubernetes.io/cluster/<cluster>=owned`` (plus the NodeClass's tags), and puts the role in it
  (replacing another role, as a profile holds at most one). Calling again finds and reuses it.
* :func:`delete` removes a profile karpy created (role first), for a deleted NodeClass.

Errors are :mod:`karpy.cloudprovider.errors` ones; a missing profile or role raises
:class:`karpy.cloudprovider.aws.session.AWSError` with ``code == "NoSuchEntity"``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import Any

from karpy.cloudprovider.aws import session

_lock = threading.Lock()


def role_name(role: str) -> str:
    """``arn:aws:iam::111:role/path/KarpenterNodeRole`` -> ``KarpenterNodeRole``."""
    return role.rsplit("/", 1)[-1]


def profile_name(cluster: str, region: str, role: str) -> str:
    digest = hashlib.sha256(f"{region}{role_name(role)}".encode()).digest()
    return f"{cluster}_{int.from_bytes(digest[:8], 'big')}"[:128]


def ensure(iam: Any, *, cluster: str, region: str, node_class: str, role: str | None,
           instance_profile: str | None, tags: Mapping[str, str] | None = None, verify: bool = True) -> str:
    """The instance profile name the NodeClass's instances get (module docstring); ``verify=False``: a named
    ``instance_profile`` is used without asking IAM (an isolated VPC, as Karpenter never asks)."""
    if instance_profile:
        if verify:
            session.call(iam, "get_instance_profile", InstanceProfileName=instance_profile)
        return instance_profile
    if not role:
        raise session.AWSError("the EC2NodeClass sets neither role nor instanceProfile", code="InvalidNodeClass",
                               operation="resolve instance profile")
    name = profile_name(cluster, region, role)
    wanted = role_name(role)
    with _lock:
        try:
            profile = session.call(iam, "get_instance_profile", InstanceProfileName=name)["InstanceProfile"]
        except session.AWSError as exc:
            if exc.code != "NoSuchEntity":
                raise
            all_tags = {**dict(tags or {}), "karpenter.sh/managed-by": cluster,
                        "karpenter.k8s.aws/ec2nodeclass": node_class, "eks:eks-cluster-name": cluster,
                        f"kubernetes.io/cluster/{cluster}": "owned"}
            try:
                profile = session.call(iam, "create_instance_profile", InstanceProfileName=name,
                                       Tags=[{"Key": k, "Value": v} for k, v in sorted(all_tags.items())]
                                       )["InstanceProfile"]
            except session.AWSError as exc2:
                if exc2.code != "EntityAlreadyExists":
                    raise
                profile = session.call(iam, "get_instance_profile", InstanceProfileName=name)["InstanceProfile"]
        roles = [r.get("RoleName") for r in profile.get("Roles") or ()]
        if wanted not in roles:
            for other in roles:
                session.call(iam, "remove_role_from_instance_profile", InstanceProfileName=name, RoleName=other)
            session.call(iam, "add_role_to_instance_profile", InstanceProfileName=name, RoleName=wanted)
    return name


def delete(iam: Any, name: str) -> None:
    """Remove a profile karpy created; a missing one is fine."""
    try:
        profile = session.call(iam, "get_instance_profile", InstanceProfileName=name)["InstanceProfile"]
    except session.AWSError as exc:
        if exc.code == "NoSuchEntity":
            return
        raise
    for r in profile.get("Roles") or ():
        session.call(iam, "remove_role_from_instance_profile", InstanceProfileName=name, RoleName=r["RoleName"])
    session.call(iam, "delete_instance_profile", InstanceProfileName=name)
