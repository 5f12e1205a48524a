"""``karpy convert FILE...``: write v1 manifests for Karpenter objects of older versions.

Karpenter's own converter (``karpenter-convert``) was retired; users still bring v1alpha5
Provisioners and AWSNodeTemplates, v1alpha5 Machines and v1beta1 NodePools, NodeClaims and
EC2NodeClasses. :func:`convert_texts` runs every document through the same loader ``karpy simulate``
uses (:func:`karpy.api.manifest.load_documents`: conversion, then v1 validation), so it prints the
same warnings simulate prints, and it refuses input that simulate would refuse.

A caller may rely on:

* every document of every file comes out, in input order: Karpenter objects in their newest version
  (a Provisioner with an inline ``provider`` gives a NodePool and an EC2NodeClass), every other object
  unchanged;
* nothing is written when any document is invalid: the :class:`karpy.api.errors.ValidationError`
  names the file, the document, the field, what was expected and what was found;
* :attr:`Converted.warnings` says, per file, what conversion changed (old field and version, new
  field and version).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from karpy.api import errors, manifest


@dataclass(slots=True)
class Converted:
    """The v1 manifests of all inputs and the warnings conversion gave."""

    manifests: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    converted: int = 0
    """How many input objects were of an older Karpenter version."""

    def to_yaml(self) -> str:
        """Multi-document YAML, ``---`` separated, keys in the order the manifests give them."""
        return yaml.safe_dump_all(self.manifests, sort_keys=False, default_flow_style=False)


def convert_texts(inputs: Sequence[tuple[str, str]], *, default_instance_profile: str | None = None) -> Converted:
    """Convert ``(source name, YAML text)`` pairs; raises ValidationError naming the source.

    ``default_instance_profile`` plays Karpenter v0.x's ``aws.defaultInstanceProfile`` setting: it becomes
    ``spec.instanceProfile`` of EC2NodeClasses converted from Provisioners / AWSNodeTemplates that name no
    identity. Without it those EC2NodeClasses come out without one (v1 requires ``role`` or
    ``instanceProfile``), and a warning says so.
    """
    out = Converted()
    problems: list[errors.FieldError] = []
    for source, text in inputs:
        try:
            loaded = manifest.load_documents(text, source=source, default_instance_profile=default_instance_profile)
        except errors.ValidationError as exc:
            problems.extend(_prefixed(source, exc.errors))
            continue
        out.warnings.extend(f"{source}: {w}" for w in loaded.warnings)
        for obj in loaded.objects:
            out.manifests.append(_clean(obj.raw))
            if (obj.original_kind, obj.original_api_version) != (obj.kind, obj.api_version):
                out.converted += 1
    if problems:
        raise errors.ValidationError(problems)
    return out


def _prefixed(source: str, errs: Iterable[errors.FieldError]) -> list[errors.FieldError]:
    return [errors.FieldError(f"{source}: {e.obj}", e.path, e.expected, e.found) for e in errs]


def _clean(raw: dict[str, Any]) -> dict[str, Any]:
    """``apiVersion``, ``kind``, ``metadata`` first, then the rest as given."""
    head: dict[str, Any] = {k: raw[k] for k in ("apiVersion", "kind", "metadata") if k in raw}
    return {**head, **{k: v for k, v in raw.items() if k not in head}}
