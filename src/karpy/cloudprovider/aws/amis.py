"""AMI resolution for an EC2NodeClass: selector terms and AMI families -> images with requirements.

What a caller may rely on (Karpenter's AMI provider behaviour):

* ``alias: <family>@<version>`` (``al2023@latest``, ``al2@v20240807``, ``bottlerocket@latest``,
  ``windows2022@latest``) reads the public EKS SSM parameters of the family for the cluster's
  Kubernetes version, one per architecture (``x86_64``, ``arm64``) and variant (standard, nvidia,
  neuron); parameters that do not exist are skipped. Windows (``windows2019``, ``windows2022``,
  ``windows2025``) has one parameter, ``/aws/service/ami-windows-latest/Windows_Server-<year>-English-
  Core-EKS_Optimized-<k8s>/image_id`` (amd64); ``windows2025`` needs Kubernetes 1.35 or newer (an
  older cluster gets a non-retryable error, so the NodeClass is not Ready with ``AMINotFound``).
* A NodeClass with an ``amiFamily`` and no ``amiSelectorTerms`` (the older form) resolves like the
  family's ``@latest`` alias.
* ``id``, ``name`` (owners ``self`` and ``amazon`` unless ``owner`` is set), ``owner`` and ``tags``
  terms go to DescribeImages (available images only); ``ssmParameter`` reads the parameter's value as
  an image id.
* Every image gets requirements from its architecture (``kubernetes.io/arch``) and variant
  (NVIDIA: ``karpenter.k8s.aws/instance-gpu-count Exists``; Neuron: ``-accelerator-count Exists``;
  the standard image of an alias: neither may exist; Windows: ``kubernetes.io/os In [windows]`` and
  ``node.kubernetes.io/windows-build In [<build>]``); images with the same requirements keep only
  the newest (``CreationDate``, then id). The result is sorted newest first.
* :func:`compatible` says whether an instance type's labels satisfy an image's requirements, which is
  how the AMI's requirements join the instance types'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.api import labels, nodeclass, selectors
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import families, session

ARCHES = {"x86_64": "amd64", "arm64": "arm64"}
GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"


@dataclass(frozen=True, slots=True)
class Image:
    id: str
    name: str
    arch: str
    """``amd64`` or ``arm64``."""
    creation_date: str
    requirements: tuple[selectors.NodeSelectorRequirement, ...]

    def to_status(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "requirements": [r.to_dict() for r in self.requirements]}


@dataclass(frozen=True, slots=True)
class _Param:
    path: str
    arch: str
    variant: str


def _variant_requirements(variant: str) -> list[selectors.NodeSelectorRequirement]:
    if variant in families.WINDOWS_BUILDS:
        return [selectors.NodeSelectorRequirement(labels.OS, "In", ("windows",)),
                selectors.NodeSelectorRequirement(families.WINDOWS_BUILD_LABEL, "In",
                                                  (families.WINDOWS_BUILDS[variant],))]
    if variant == "nvidia":
        return [selectors.NodeSelectorRequirement(GPU_COUNT, "Exists", ())]
    if variant == "neuron":
        return [selectors.NodeSelectorRequirement(ACCELERATOR_COUNT, "Exists", ())]
    if variant == "standard":
        return [selectors.NodeSelectorRequirement(GPU_COUNT, "DoesNotExist", ()),
                selectors.NodeSelectorRequirement(ACCELERATOR_COUNT, "DoesNotExist", ())]
    return []


def ssm_parameters(family: str, k8s_version: str, version: str = "latest") -> list[_Param]:
    """The public SSM parameters holding the family's EKS-optimized AMIs (see the module docstring)."""
    k = k8s_version
    latest = version in ("", "latest")
    out: list[_Param] = []
    if family == "AL2023":
        for ec2_arch, arch in ARCHES.items():
            for variant in ("standard", "nvidia", "neuron"):
                if ec2_arch == "arm64" and variant == "neuron":
                    continue
                leaf = "recommended" if latest else f"amazon-eks-node-al2023-{ec2_arch}-{variant}-{k}-{version}"
                out.append(_Param(f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{ec2_arch}/{variant}/"
                                  f"{leaf}/image_id", arch, variant))
    elif family == "AL2":
        for suffix, ec2_arch, variant in (("", "x86_64", "standard"), ("-arm64", "arm64", "standard"),
                                          ("-gpu", "x86_64", "nvidia")):
            leaf = "recommended" if latest else f"amazon-eks{suffix}-node-{k}-{version}"
            out.append(_Param(f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2{suffix}/{leaf}/image_id",
                              ARCHES[ec2_arch], variant))
    elif family == "Bottlerocket":
        for ec2_arch, arch in ARCHES.items():
            for flavor, variant in (("", "standard"), ("-nvidia", "nvidia")):
                leaf = "latest" if latest else version.lstrip("v")
                out.append(_Param(f"/aws/service/bottlerocket/aws-k8s-{k}{flavor}/{ec2_arch}/{leaf}/image_id",
                                  arch, variant))
    elif family in families.WINDOWS_BUILDS:
        year = family[-4:]
        out.append(_Param(f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k}"
                          "/image_id", "amd64", family))
    return out


def _alias(term: nodeclass.SelectorTerm) -> tuple[str, str] | None:
    if term.alias is None:
        return None
    prefix, _, version = term.alias.partition("@")
    family = nodeclass.ALIAS_FAMILIES.get(prefix.lower())
    if family is None:
        raise errors.CloudProviderError(f"amiSelectorTerms alias {term.alias!r}: unknown family {prefix!r}",
                                        reason="InvalidAlias")
    return family, version or "latest"


def resolve(ec2: Any, ssm: Any, nc: nodeclass.EC2NodeClass, k8s_version: str) -> list[Image]:
    """The images ``nc`` selects, newest first (module docstring)."""
    terms = list(nc.ami_selector_terms)
    params: list[_Param] = []
    image_ids: list[str] = []
    describe_terms: list[nodeclass.SelectorTerm] = []
    if not terms and nc.ami_family and nc.ami_family != "Custom":
        families.check_version(nc.ami_family, k8s_version)
        params.extend(ssm_parameters(nc.ami_family, k8s_version))
    for term in terms:
        alias = _alias(term)
        if alias is not None:
            families.check_version(alias[0], k8s_version)
            params.extend(ssm_parameters(alias[0], k8s_version, alias[1]))
        elif term.ssm_parameter is not None:
            value = _ssm_value(ssm, term.ssm_parameter)
            if value:
                image_ids.append(value)
        else:
            describe_terms.append(term)
    found: dict[str, tuple[dict[str, Any], str]] = {}
    by_param: dict[str, _Param] = {}
    for p in params:
        value = _ssm_value(ssm, p.path)
        if value:
            by_param.setdefault(value, p)
    if by_param:
        for img in _describe(ec2, ImageIds=sorted(by_param)):
            found[img["ImageId"]] = (img, by_param[img["ImageId"]].variant)
    if image_ids:
        for img in _describe(ec2, ImageIds=sorted(set(image_ids))):
            found.setdefault(img["ImageId"], (img, ""))
    for term in describe_terms:
        kwargs: dict[str, Any] = {}
        fs: list[dict[str, Any]] = []
        if term.id is not None:
            fs.append({"Name": "image-id", "Values": [term.id]})
        if term.name is not None:
            fs.append({"Name": "name", "Values": [term.name]})
        for key, value in sorted(term.tags.items()):
            fs.append({"Name": "tag-key", "Values": [key]} if value == "*" else
                      {"Name": f"tag:{key}", "Values": [value]})
        if term.owner is not None:
            kwargs["Owners"] = [term.owner]
        elif term.name is not None and term.id is None:
            kwargs["Owners"] = ["self", "amazon"]
        if not fs and "Owners" not in kwargs:
            continue
        for img in _describe(ec2, Filters=fs, **kwargs):
            found.setdefault(img["ImageId"], (img, ""))
    newest: dict[tuple[Any, ...], Image] = {}
    for img, variant in found.values():
        if img.get("State", "available") != "available":
            continue
        arch = ARCHES.get(str(img.get("Architecture") or "x86_64"))
        if arch is None:
            continue
        reqs = (selectors.NodeSelectorRequirement(labels.ARCH, "In", (arch,)), *_variant_requirements(variant))
        image = Image(id=img["ImageId"], name=str(img.get("Name") or ""), arch=arch,
                      creation_date=str(img.get("CreationDate") or ""), requirements=reqs)
        group = tuple((r.key, r.operator, tuple(r.values)) for r in reqs)
        cur = newest.get(group)
        if cur is None or (image.creation_date, image.id) > (cur.creation_date, cur.id):
            newest[group] = image
    return sorted(newest.values(), key=lambda i: (i.creation_date, i.id), reverse=True)


def _ssm_value(ssm: Any, name: str) -> str:
    try:
        response = session.call(ssm, "get_parameter", Name=name)
    except session.AWSError as exc:
        if exc.code in ("ParameterNotFound", "ParameterVersionNotFound"):
            return ""
        raise
    return str((response.get("Parameter") or {}).get("Value") or "")


def _describe(ec2: Any, **params: Any) -> list[dict[str, Any]]:
    try:
        response = session.call(ec2, "describe_images", **params)
    except session.AWSError as exc:
        if exc.code.startswith("InvalidAMIID"):
            return []
        raise
    return list(response.get("Images") or ())


def compatible(image_requirements: Sequence[selectors.NodeSelectorRequirement],
               type_labels: Mapping[str, str]) -> bool:
    """Do an instance type's labels satisfy every requirement of an image?"""
    for r in image_requirements:
        value = type_labels.get(r.key)
        if r.operator == "In" and value not in r.values:
            return False
        if r.operator == "NotIn" and value in r.values:
            return False
        if r.operator == "Exists" and (value is None or value in ("", "0")):
            return False
        if r.operator == "DoesNotExist" and value not in (None, "", "0"):
            return False
    return True


def image_for(images: Sequence[Image], type_labels: Mapping[str, str]) -> Image | None:
    """The newest image whose requirements the type satisfies (``images`` newest first)."""
    for image in images:
        if compatible(image.requirements, type_labels):
            return image
    return None
