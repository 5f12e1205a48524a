"""What every Karpenter conversion works with: its :class:`Context`, its :class:`Result` and the
metadata every converted object keeps.

:mod:`karpy.api.conversion` (the entry point, which re-exports :class:`Context` and :class:`Result`)
and :mod:`karpy.api.conversion_nodeclass` build on it. A caller may rely on:

* :meth:`Result.warn` appends the warning and logs it once per process on the
  ``karpy.api.conversion`` logger;
* :func:`metadata_of` is the old object's metadata without ``namespace`` (every Karpenter object is
  cluster-scoped) and ``managedFields``, a deep copy; :func:`name_of` its name, ``(unnamed)`` when
  it has none.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import fields

log = logging.getLogger("karpy.api.conversion")

_logged: set[str] = set()


@dataclass(frozen=True, slots=True)
class Context:
    """What a conversion may need to know about the other objects of the same input.

    ``node_classes`` maps a NodeClass name to its ``(group, kind)`` so a v1beta1 ``nodeClassRef``
    without a kind is resolved to the class actually given; ``expire_after`` maps a NodePool name
    to its v1 ``expireAfter`` text for NodeClaims converted from Machines or v1beta1 NodeClaims.
    ``default_instance_profile`` is Karpenter v0.x's ``aws.defaultInstanceProfile`` setting.
    """

    node_classes: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    expire_after: Mapping[str, str] = field(default_factory=dict)
    default_instance_profile: str | None = None


@dataclass(slots=True)
class Result:
    """What one conversion produced: the v1 manifests and one warning per changed field."""

    manifests: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    identity_from_settings: set[str] = field(default_factory=set)
    """Names of generated EC2NodeClasses whose IAM identity was left to global settings."""

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        if message not in _logged:
            _logged.add(message)
            log.warning("%s", message)


def metadata_of(f: fields.Fields) -> dict[str, Any]:
    """The metadata a converted object keeps (see the module docstring)."""
    md = copy.deepcopy(dict(f.sub("metadata").data))
    md.pop("namespace", None)  # every Karpenter object is cluster-scoped
    md.pop("managedFields", None)
    return md


def name_of(f: fields.Fields) -> str:
    """The object's name, ``(unnamed)`` when it has none."""
    return f.sub("metadata").str("name") or "(unnamed)"
