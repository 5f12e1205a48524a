"""What karpy accepts (Karpenter's API has it, so manifests keep validating) but does not implement yet.

Nothing is accepted and silently ignored: each field here gets a warning when a manifest is loaded
(``karpy simulate`` / ``convert`` print them) and, in ``karpy controller``, a Kubernetes Event and a log
line naming the object, the field and :data:`MESSAGE`, once per object generation
(:mod:`karpy.controllers.unimplemented`). ``docs/unimplemented.md`` lists the same entries; a test
keeps the two equal, and another walks every field of every CRD schema karpy ships and fails for one
that no model reads and that is not listed here. When karpy learns a field, its entry goes.

* :data:`FIELDS`: ``(kind, field path)``; a path ends at the field whose presence is warned about
  (``spec.networkInterfaces``); paths inside a Pod template of a workload are not warned (the Pod is).
* :data:`KINDS`: whole kinds karpy does not act on (none today; CapacityBuffers are implemented).
* Settings and feature gates: :func:`karpy.settings.Settings.unimplemented`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

MESSAGE = "karpy does not implement this yet"


class Field(NamedTuple):
    kind: str
    path: str
    what: str
    """What Karpenter does with it (for the warning and the docs)."""


_AFFINITY = "spec.affinity.{}.{}DuringSchedulingIgnoredDuringExecution[].{}{}"

FIELDS: tuple[Field, ...] = (
    Field("EC2NodeClass", "spec.blockDeviceMappings[].ebs.volumeInitializationRate",
          "the EBS volume initialization rate of volumes made from snapshots"),
    Field("KWOKNodeClass", "spec.nodeRegistrationDelay", "how long a KWOK node takes to register"),
    *(Field("Pod", _AFFINITY.format(term, when, inner, key),
            f"the pod's own values of these label keys {verb} the term's selector ({term})")
      for term in ("podAffinity", "podAntiAffinity")
      for key, verb in (("matchLabelKeys", "added to"), ("mismatchLabelKeys", "excluded by"))
      for when, inner in (("required", ""), ("preferred", "podAffinityTerm."))),
)
"""Fields accepted and warned about, by kind."""

KINDS: dict[str, str] = {}
"""Kinds karpy does not act on, with what Karpenter does with them."""


def _present(data: Any, parts: list[str]) -> bool:
    if not parts:
        return data is not None and data not in ("", [], {})
    if isinstance(data, list):
        return any(_present(item, parts) for item in data)
    if not isinstance(data, Mapping):
        return False
    return _present(data.get(parts[0].removesuffix("[]")), parts[1:])


def set_fields(kind: str, manifest: Mapping[str, Any]) -> list[Field]:
    """The listed fields of ``kind`` that ``manifest`` sets (a non-empty value), in list order."""
    return [f for f in FIELDS if f.kind == kind and _present(manifest, f.path.split("."))]


def warning(kind: str, name: str, field: Field) -> str:
    """The warning for one field of one object: names the object, the field and :data:`MESSAGE`."""
    return f"{kind} {name}: {field.path} is accepted but {MESSAGE} ({field.what}); it has no effect"


def kind_warning(kind: str, name: str) -> str:
    return f"{kind} {name}: {MESSAGE} ({KINDS[kind]}); the object has no effect"


def warnings_for(manifest: Mapping[str, Any]) -> list[str]:
    """Every warning for one manifest (its kind and the fields it sets)."""
    kind = str(manifest.get("kind") or "")
    meta = manifest.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    namespace = str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""
    label = f"{namespace}/{name}" if namespace else name
    if kind in KINDS:
        return [kind_warning(kind, label)]
    out = [warning(kind, label, f) for f in set_fields(kind, manifest)]
    if kind in WORKLOADS:
        template = ((manifest.get("spec") or {}).get("template") or {}) if isinstance(manifest.get("spec"), Mapping) \
            else {}
        if isinstance(template, Mapping):
            out.extend(f"{kind} {label}: template: " + warning("Pod", "", f).removeprefix("Pod : ")
                       for f in set_fields("Pod", template))
    return out


WORKLOADS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"})
"""Kinds whose Pod template is checked like a Pod."""
