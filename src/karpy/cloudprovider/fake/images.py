"""The images of the simulated cloud and the drift they cause: which image an instance launches with and
whether a running instance has drifted from its NodeClass.

:class:`Images` is what :class:`karpy.cloudprovider.fake.provider.SimulatedCloud` asks when it starts or
adopts an instance and when Karpenter's drift controller asks ``is_drifted``. What a caller may rely on:

* **Resolution.** An instance records the image its NodeClass resolved to at launch: the first of an
  EC2NodeClass's ``status.amis`` matching the instance type, an AKSNodeClass's pinned ``imageVersion``,
  otherwise the latest image :meth:`Images.publish` announced for the NodeClass (or for every NodeClass),
  otherwise a default derived from the NodeClass's image selector (:func:`resolve_image`; deterministic, no
  randomness). :func:`azure_image` is an AKS node image in the community gallery.
* **Drift.** :meth:`Images.drift` reports ``"NodeClassDrift"`` when the NodeClaim's NodeClass hash
  annotation differs from the NodeClass's ``hash()``, and ``"AMIDrift"`` (AWS) / ``"ImageDrift"`` (Azure,
  KWOK) when the image the NodeClass would launch now differs from the instance's (``""``: no drift).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from karpy.api import labels, nodeclaim, nodeclass, stored
from karpy.cloudprovider.azure import images as azure_images
from karpy.cloudprovider.fake import capacity

NodeClass = capacity.NodeClass

_HASHES: stored.ByIdentity[str] = stored.ByIdentity(1024)
"""Hashes by the identity of the frozen model hashed (the entry keeps it alive): the NodeClass of a
stored version is parsed once, and every launch and drift check asks for its hash."""


def _hash_once(model: Any, compute: Callable[[], str]) -> str:
    return _HASHES.get(model, compute)


def nodeclass_hash(nc: NodeClass) -> str:
    """``nc.hash()``, computed once per NodeClass model (models are frozen)."""
    return _hash_once(nc, nc.hash)


def hash_annotation(nc: NodeClass) -> str:
    """The annotation a NodeClaim carries its NodeClass's hash in."""
    if isinstance(nc, nodeclass.EC2NodeClass):
        return labels.NODECLASS_HASH_AWS
    return labels.NODECLASS_HASH_AZURE


AZURE_IMAGE_GALLERY = "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images"
AZURE_DEFAULT_IMAGE_VERSION = azure_images.DEFAULT_VERSION


def resolve_image(fmt: str, region: str, nc: NodeClass | None, published: str | None,
                  node_labels: Mapping[str, str]) -> str:
    """The image an instance with ``node_labels`` launched with NodeClass ``nc`` gets now.

    In order: the first of an EC2NodeClass's ``status.amis`` whose requirements the labels meet
    (else its first), an AKSNodeClass's pinned ``imageVersion``, the ``published`` image, and a
    default derived from the region and the EC2NodeClass's ``amiSelectorTerms`` (so changing the
    selector changes the image, as AMI resolution does).
    """
    if isinstance(nc, nodeclass.EC2NodeClass) and nc.status.amis:
        for ami in nc.status.amis:
            if all(capacity.requirement_holds(r, node_labels.get(r.key)) for r in ami.requirements):
                return ami.id
        return nc.status.amis[0].id
    trusted = isinstance(nc, nodeclass.AKSNodeClass) and nc.trusted_launch()
    if isinstance(nc, nodeclass.AKSNodeClass) and nc.image_version:
        return azure_image(nc.image_family, nc.image_version, node_labels, trusted_launch=trusted)
    if published:
        return published
    if fmt == "azure":
        family = nc.image_family if isinstance(nc, nodeclass.AKSNodeClass) else "Ubuntu2204"
        return azure_image(family, AZURE_DEFAULT_IMAGE_VERSION, node_labels, trusted_launch=trusted)
    selector = ""
    if isinstance(nc, nodeclass.EC2NodeClass):
        terms = nc.ami_selector_terms
        selector = _hash_once(terms, lambda: nodeclass.stable_hash([t.to_dict() for t in terms])) \
            if type(terms) is tuple else nodeclass.stable_hash([t.to_dict() for t in terms])
    digest = hashlib.sha256(f"{region}/{selector}".encode()).hexdigest()
    if fmt == "aws":
        return f"ami-{digest[:17]}"
    return f"kwok-image-{digest[:12]}"


def azure_image(family: str, version: str, size_labels: Mapping[str, str] | None = None, *,
                trusted_launch: bool = False) -> str:
    """An AKS node image id in the community gallery, e.g. ``.../2204gen2containerd/versions/<v>``: the
    same family -> gallery image mapping as the Azure provider (:func:`karpy.cloudprovider.azure.images.image_for`:
    the size's arch and Hyper-V generation, Gen2 amd64 when not known; the trusted-launch image with
    ``trusted_launch``); an unknown family gets Ubuntu 22.04's."""
    found = azure_images.image_for(family, version, size_labels or {}, trusted_launch=trusted_launch)
    return found or azure_images.image_for("Ubuntu2204", version, size_labels or {}) or (
        f"{AZURE_IMAGE_GALLERY}/2204gen2containerd/versions/{version}")


class Images:
    """Published images by NodeClass name and the drift of instances; see the module docstring."""

    def __init__(self, provider_format: str, region: str) -> None:
        self.provider_format = provider_format
        self.region = region
        self._published: dict[str, str] = {}

    def publish(self, image_id: str, node_class: str = "") -> None:
        """A new image is released for ``node_class`` (``""``: every NodeClass without its own)."""
        self._published[node_class] = image_id

    def image_for(self, nc: capacity.NodeClass | None, node_labels: Mapping[str, str], nc_name: str = "") -> str:
        """The image an instance with ``node_labels`` launches with now under NodeClass ``nc`` (or, with none
        known, the one named ``nc_name``)."""
        name = nc.name if nc is not None else nc_name
        published = self._published.get(name) or self._published.get("")
        return resolve_image(self.provider_format, self.region, nc, published, node_labels)

    def drift(self, claim: nodeclaim.NodeClaim, inst: capacity.Instance, nc: capacity.NodeClass | None) -> str:
        """The drift reason of ``claim``'s running instance ``inst`` under its NodeClass ``nc`` (``""``: none)."""
        if nc is not None:
            have = claim.metadata.annotations.get(hash_annotation(nc))
            if have is not None and have != nodeclass_hash(nc):
                return "NodeClassDrift"
        reason = "AMIDrift" if self.provider_format == "aws" else "ImageDrift"
        if isinstance(nc, nodeclass.EC2NodeClass) and nc.status.amis:
            if inst.image_id not in {a.id for a in nc.status.amis}:
                return reason
            return ""
        if inst.image_id != self.image_for(nc, inst.labels, inst.node_class):
            return reason
        return ""
