"""Nothing karpy accepts is silently ignored (issue 21 section 4).

Every field of every CRD schema karpy ships (``karpy.api.schemas``, the ``spec`` of each kind) is
either read by karpy's model when it parses a manifest setting every field (the ``*-full.yaml``
fixtures; reads are observed on :class:`karpy.api.fields.Fields`, the reader every model uses) or
listed in :data:`karpy.api.unimplemented.FIELDS`, which ``docs/unimplemented.md`` documents and the
loader warns about.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from karpy.api import fields, manifest, nodeclaim, nodeclass, nodepool, quantity, unimplemented
from karpy.api.schemas import crd, dsl

from . import crd_check

ROOT = Path(__file__).resolve().parents[3]
FIXTURES: dict[str, tuple[str, ...]] = {
    "NodePool": ("nodepool-full.yaml", "nodepool-static.yaml"),
    "NodeClaim": ("nodeclaim-full.yaml",),
    "EC2NodeClass": ("ec2nodeclass-full.yaml", "ec2nodeclass-custom.yaml"),
    "AKSNodeClass": ("aksnodeclass-full.yaml",),
    "KWOKNodeClass": ("kwoknodeclass-full.yaml",),
}
PARSERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "NodePool": nodepool.NodePool.from_manifest,
    "NodeClaim": nodeclaim.NodeClaim.from_manifest,
    "EC2NodeClass": nodeclass.EC2NodeClass.from_manifest,
    "AKSNodeClass": nodeclass.AKSNodeClass.from_manifest,
    "KWOKNodeClass": lambda m: None,  # the KWOK provider reads no KWOKNodeClass field
}
_WHOLE = ("raw", "list", "str_list", "str_map", "str", "req_str", "int", "bool")
"""Accessors that take a field's whole value (a read of it and of everything inside it); so does
:func:`karpy.api.quantity.read_list`."""
_STEP = ("has", "sub", "items")


def _norm(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def _reads(kind: str, obj: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[set[str], set[str]]:
    """(paths read whole, paths stepped into) while ``kind``'s model parses ``obj``."""
    whole: set[str] = set()
    step: set[str] = set()
    for name in (*_WHOLE, *_STEP):
        original = getattr(fields.Fields, name)
        into = whole if name in _WHOLE else step

        def traced(self: fields.Fields, key: Any, *args: Any, _original: Any = original, _into: set[str] = into,
                   **kwargs: Any) -> Any:
            _into.add(_norm(self.at(key)))
            return _original(self, key, *args, **kwargs)

        monkeypatch.setattr(fields.Fields, name, traced)
    read_list = quantity.read_list

    def traced_list(f: fields.Fields, key: str) -> Any:
        whole.add(_norm(f.at(key)))
        return read_list(f, key)

    monkeypatch.setattr(quantity, "read_list", traced_list)
    monkeypatch.setattr(nodeclaim, "_EXPIRE_AFTER", {})  # a text read before would skip the reader
    try:
        PARSERS[kind](obj)
    finally:
        monkeypatch.undo()
    return whole, step


def _spec_fields(kind: str) -> Iterator[str]:
    for path, _ in dsl.walk(crd.schema_of(kind)):
        if path.startswith("spec.") and "{}" not in path and not path.endswith("[]"):
            yield path


def _inside(path: str, outer: str) -> bool:
    return path.startswith(outer + ".") or path.startswith(outer + "[]")


def _read(path: str, whole: set[str], step: set[str]) -> bool:
    """Read: the field, or a field holding it, was read whole; or the model read something inside it.
    Only stepping into a field (``sub``, ``has``, ``items``) without reading what it holds is no read."""
    return any(path == w or _inside(path, w) for w in whole) or \
        any(_inside(r, path) for r in whole)


def _warned(kind: str, path: str) -> bool:
    return any(f.kind == kind and (path == f.path or path.startswith(f.path + ".") or path.startswith(f.path + "[]"))
               for f in unimplemented.FIELDS)


@pytest.mark.parametrize("kind", sorted(FIXTURES))
def test_every_schema_field_is_read_by_a_model_or_warned_about(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    whole: set[str] = set()
    step: set[str] = set()
    for name in FIXTURES[kind]:
        w, s = _reads(kind, crd_check.fixture(name), monkeypatch)
        whole |= w
        step |= s
    ignored = [p for p in _spec_fields(kind) if not _read(p, whole, step) and not _warned(kind, p)]
    assert ignored == [], f"{kind} fields neither read by karpy's model nor warned about: {ignored}"


def test_every_warned_field_is_a_field_of_karpys_schemas_or_of_a_pod() -> None:
    for f in unimplemented.FIELDS:
        if f.kind == "Pod":  # Kubernetes' own fields: pod (anti-)affinity label keys
            assert f.path.startswith("spec.affinity.pod"), f
            assert f.path.endswith(("matchLabelKeys", "mismatchLabelKeys")), f
            continue
        paths = {p for p, _ in dsl.walk(crd.schema_of(f.kind))}
        assert f.path in paths, f


def test_the_documented_list_is_the_list_karpy_warns_about() -> None:
    text = (ROOT / "docs" / "unimplemented.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| (\w+) \| `([\w.\[\]]+)` \|", text, re.M))
    assert documented == {(f.kind, f.path) for f in unimplemented.FIELDS}
    for kind in unimplemented.KINDS:
        assert f"| {kind} | (the kind) |" in text


def test_loading_a_manifest_warns_about_each_unimplemented_field_it_sets() -> None:
    for name, kind in (("ec2nodeclass-full.yaml", "EC2NodeClass"), ("aksnodeclass-full.yaml", "AKSNodeClass"),
                       ("nodepool-static.yaml", "NodePool")):
        loaded = manifest.load_documents((ROOT / "tests" / "fixtures" / "crds" / name).read_text(encoding="utf-8"))
        warned = [w for w in loaded.warnings if unimplemented.MESSAGE in w]
        expected = {f.path for f in unimplemented.FIELDS if f.kind == kind}
        assert {w.split(": ", 1)[1].split(" ", 1)[0] for w in warned} == expected
        assert all(w.startswith(f"{kind} ") for w in warned)


def test_neither_a_capacity_buffer_nor_a_workload_whose_pods_claim_dra_resources_is_warned_unimplemented() -> None:
    """DRA pods are refused by the scheduler with Karpenter's reason (karpy.provisioning.dra); buffers are
    implemented (gate CapacityBuffer)."""
    text = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: gpu}}
  template:
    metadata: {labels: {app: gpu}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
      containers: [{name: app, image: app:1}]
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: headroom, namespace: default}
spec: {podTemplateRef: {name: t}, replicas: 2}
"""
    warnings = manifest.load_documents(text).warnings
    assert not any("resourceClaims" in w for w in warnings), warnings
    assert not any(w.startswith("CapacityBuffer") and unimplemented.MESSAGE in w for w in warnings), warnings


def test_a_pod_affinity_term_with_match_label_keys_is_warned_about_not_silently_ignored() -> None:
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}},
            "matchLabelKeys": ["pod-template-hash"]}
    deployment = {"kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
                  "spec": {"template": {"spec": {"affinity": {"podAntiAffinity": {
                      "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]}}}}}}
    (warning,) = unimplemented.warnings_for(deployment)
    assert warning.startswith("Deployment shop/web: template: spec.affinity.podAntiAffinity.preferred")
    assert "podAffinityTerm.matchLabelKeys" in warning and unimplemented.MESSAGE in warning
