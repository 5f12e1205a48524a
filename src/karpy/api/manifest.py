"""Load a multi-document YAML manifest into typed karpy objects.

Users bring what they have: ``kubectl get -o yaml`` output (including ``kind: List``), Helm output,
blog snippets, Karpenter manifests of any version from v1alpha5 to v1. :func:`load_documents`
parses the YAML, converts older Karpenter versions to v1 (:mod:`karpy.api.conversion`), reads each
object into its model and checks Karpenter's rules (:mod:`karpy.api.validation`).

A caller may rely on:

* every problem of every document is reported at once, in one
  :class:`karpy.api.errors.ValidationError` whose errors name ``document N (Kind/name)`` (1-based,
  counting ``---`` separated documents; ``document N item M`` inside a List), the field path and
  what was expected and found;
* kinds karpy does not model are kept as raw dicts (with a warning for Karpenter kinds); an
  unsupported *version* of a Karpenter kind is an error naming the versions karpy reads;
* :class:`LoadResult` ``warnings`` say what conversion changed, which YAML keys were given twice
  (the later one wins, as with ``kubectl``) and which values look like unexpanded shell variables.

Pure: no file or network access; the caller reads the text.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from karpy.api import (
    capacitybuffer,
    conversion,
    errors,
    labels,
    meta,
    node,
    nodeclaim,
    nodeclass,
    nodeoverlay,
    nodepool,
    pod,
    strict,
    unimplemented,
    validation,
    workloads,
    yaml_events,
)

_SHELL_VAR = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_SCRIPT_FIELDS = ("userData", "data", "command", "args", "env")
"""Fields where ``${VAR}`` is expected (scripts, ConfigMap data): no unexpanded-variable warning."""

_CORE_MODELS: dict[tuple[str, str], Callable[[Mapping[str, Any]], Any]] = {
    ("v1", "Pod"): pod.Pod.from_manifest,
    ("v1", "Node"): node.Node.from_manifest,
    ("apps/v1", "DaemonSet"): workloads.DaemonSet.from_manifest,
    ("apps/v1", "Deployment"): workloads.Deployment.from_manifest,
    ("apps/v1", "ReplicaSet"): workloads.ReplicaSet.from_manifest,
    ("policy/v1", "PodDisruptionBudget"): workloads.PodDisruptionBudget.from_manifest,
    (capacitybuffer.API_VERSION, capacitybuffer.KIND): capacitybuffer.CapacityBuffer.from_manifest,
}


@dataclass(frozen=True, slots=True)
class Loaded:
    """One object of the input, in its newest form.

    ``obj`` is the typed model (``NodePool``, ``EC2NodeClass``, ``Pod``...) or, for kinds karpy
    does not model, the raw dict. ``raw`` is the manifest ``obj`` was read from (after conversion).
    ``original_kind`` / ``original_api_version`` are what the user wrote (a Provisioner gives a
    NodePool and possibly an EC2NodeClass, both with ``original_kind == "Provisioner"``).
    """

    doc_index: int
    """1-based number of the YAML document."""
    kind: str
    api_version: str
    original_kind: str
    original_api_version: str
    obj: Any
    raw: dict[str, Any]


@dataclass(slots=True)
class LoadResult:
    objects: list[Loaded] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Any]:
        """The models (or raw dicts) of every object of ``kind``, in input order."""
        return [o.obj for o in self.objects if o.kind == kind]


# --- YAML ----------------------------------------------------------------------------------------


_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it


_RESOLVED: dict[tuple[str, Any], str] = {}
"""(scalar text, implicit flags) -> tag, for :meth:`_Loader.resolve`; cleared when it reaches
:data:`_RESOLVED_MAX` entries."""
_RESOLVED_MAX = 200_000


class _Loader(_SafeLoader):  # type: ignore[misc]
    """A safe loader that remembers keys given twice in one mapping (the later value wins)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[str, int, int]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = key_node.value
                line = key_node.start_mark.line + 1
                if key in seen:
                    self.duplicates.append((str(key), seen[key], line))
                seen[key] = line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """The tag of a node; a plain scalar's is remembered by its text (this loader has no path
        resolvers, so the tag depends on nothing else): a big dump repeats the same values (times,
        ``"True"``, label values) hundreds of thousands of times, and each look-up ran regular expressions."""
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = _RESOLVED.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(_RESOLVED) >= _RESOLVED_MAX:
                _RESOLVED.clear()
            _RESOLVED[key] = tag
        return tag

    def construct_timestamp_as_str(self, node: yaml.ScalarNode) -> str:
        return str(self.construct_scalar(node))

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            value: int = super().construct_yaml_int(node)
            return value
        except ValueError:
            raise yaml.constructor.ConstructorError(None, None, "an integer too large to read (more than "
                                                    "4300 digits)", node.start_mark) from None


# Unquoted dates stay strings, as the API server (JSON) stores them; a huge integer is a YAML error.
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_timestamp_as_str)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


@dataclass(slots=True)
class _Doc:
    label: str  # "document 3" or "document 3 item 2"
    index: int
    data: Any
    duplicates: list[tuple[str, int, int]]
    pruned: bool = False
    """``prune`` has already seen ``data`` (an item of a List read by :mod:`karpy.api.yaml_events`)."""
    plain_json: bool = False
    """:func:`karpy.api.strict.check_structure` is known to find nothing in ``data``."""
    dollar_brace: bool = True
    """``data`` may hold a string with ``${``."""


def parse_yaml(text: str, source: str = "<input>", *, string_keys: bool = True) -> list[Any]:
    """The documents of a YAML text as plain data, dates kept as strings (as the API server stores
    them). Anything JSON cannot carry (see :func:`karpy.api.strict.check_structure`) or YAML that does
    not parse raises :class:`errors.ValidationError`; nothing else is raised."""
    docs = _parse_yaml(text, source)
    problems = [e for d in docs if not d.plain_json
                for e in strict.check_structure(d.data, f"{source} {d.label}", string_keys=string_keys)]
    if problems:
        raise errors.ValidationError(problems)
    return [d.data for d in docs]


def _parse_yaml(text: str, source: str, prune: yaml_events.Prune | None = None) -> list[_Doc]:
    fast = yaml_events.read(_Loader(text), prune)
    if fast is not None:
        return [_Doc(f"document {i}", i, d.data, [], d.items_pruned, d.plain_json, d.dollar_brace)
                for i, d in enumerate(fast, 1)]
    loader = _Loader(text)
    docs: list[_Doc] = []
    try:
        index = 0
        while loader.check_data():
            index += 1
            loader.duplicates = []
            data = loader.get_data()
            docs.append(_Doc(f"document {index}", index, data, list(loader.duplicates)))
    except (ValueError, OverflowError, TypeError) as exc:  # a constructor's own error: still bad YAML
        raise errors.ValidationError.single(f"{source} document {len(docs) + 1}", "(document)", "valid YAML",
                                            str(exc)) from None
    except RecursionError:
        raise errors.ValidationError.single(f"{source} document {len(docs) + 1}", "(document)",
                                            f"at most {strict.MAX_DEPTH} levels of nesting",
                                            "deeper nesting") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "(document)"
        problem = getattr(exc, "problem", None) or str(exc)
        raise errors.ValidationError.single(f"{source} document {len(docs) + 1}", where, "valid YAML",
                                            problem) from None
    finally:
        loader.dispose()
    return docs


def _expand_lists(docs: list[_Doc]) -> Iterator[_Doc]:
    for d in docs:
        if isinstance(d.data, Mapping) and d.data.get("kind") == "List" and isinstance(d.data.get("items"),
                                                                                       list):
            for i, item in enumerate(d.data["items"]):
                yield _Doc(f"{d.label} item {i + 1}", d.index, item, d.duplicates if i == 0 else [], d.pruned,
                           d.plain_json, d.dollar_brace)
        elif d.data is not None:
            yield d


def _shell_variables(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        if _SHELL_VAR.search(value):
            yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if k not in _SCRIPT_FIELDS:
                yield from _shell_variables(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _shell_variables(v, f"{path}[{i}]")


# --- loading -------------------------------------------------------------------------------------


def _name_of(d: Mapping[str, Any]) -> str:
    """``metadata.name`` (or ``namespace/name``) for messages; ``(unnamed)`` when missing."""
    return meta.object_name("object", d).split(" ", 1)[1]


def _label(doc: _Doc, kind: str, name: str, converted: str | None = None) -> str:
    text = f"{doc.label} ({kind}/{name})"
    return text if converted is None else f"{doc.label} ({kind}/{name}, as {converted})"


def _rewrap(exc: errors.ValidationError, obj: str) -> list[errors.FieldError]:
    return [dataclasses.replace(e, obj=obj) for e in exc.errors]


def _node_class_index(docs: list[_Doc]) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for d in docs:
        if not isinstance(d.data, Mapping):
            continue
        group = conversion.split_api_version(str(d.data.get("apiVersion") or ""))[0]
        kind = d.data.get("kind")
        md = d.data.get("metadata")
        name = md.get("name") if isinstance(md, Mapping) else None
        if not isinstance(name, str):
            continue
        if group == labels.AWS_GROUP and kind in ("EC2NodeClass", "AWSNodeTemplate"):
            out[name] = (labels.AWS_GROUP, nodeclass.EC2_KIND)
        elif group == labels.AZURE_GROUP and kind == nodeclass.AKS_KIND:
            out[name] = (labels.AZURE_GROUP, nodeclass.AKS_KIND)
        elif kind == "Provisioner" and isinstance(d.data.get("spec"), Mapping) \
                and d.data["spec"].get("provider"):
            out[name] = (labels.AWS_GROUP, nodeclass.EC2_KIND)
    return out


def _model(manifest: dict[str, Any], identity_from_settings: bool) -> tuple[Any, list[errors.FieldError]]:
    """The typed model of a v1 manifest and its rule violations (raises ValidationError on bad types)."""
    api_version = str(manifest.get("apiVersion") or "")
    kind = str(manifest.get("kind") or "")
    if kind == nodepool.KIND and api_version == nodepool.API_VERSION:
        np = nodepool.NodePool.from_manifest(manifest)
        errs = validation.validate_nodepool(np)
        try:
            errs.extend(validation.validate_kubelet(np.compat_kubelet(), f"{nodepool.KIND} {np.name}",
                                                    f"metadata.annotations.{nodepool.KUBELET_COMPAT_ANNOTATION}"))
        except errors.ValidationError as exc:
            errs.extend(exc.errors)
        return np, errs
    if kind == nodeclaim.KIND and api_version == nodeclaim.API_VERSION:
        nc = nodeclaim.NodeClaim.from_manifest(manifest)
        return nc, validation.validate_nodeclaim(nc)
    if kind == nodeoverlay.KIND and api_version == nodeoverlay.API_VERSION:
        overlay = nodeoverlay.NodeOverlay.from_manifest(manifest)
        return overlay, nodeoverlay.validate(overlay)
    if kind == nodeclass.EC2_KIND and api_version == nodeclass.EC2_API_VERSION:
        ec2 = nodeclass.EC2NodeClass.from_manifest(manifest)
        return ec2, validation.validate_ec2nodeclass(ec2, identity_from_settings=identity_from_settings)
    if kind == nodeclass.AKS_KIND and api_version == nodeclass.AKS_API_VERSION:
        aks = nodeclass.AKSNodeClass.from_manifest(manifest)
        return aks, validation.validate_aksnodeclass(aks)
    parse = _CORE_MODELS.get((api_version, kind))
    if parse is not None:
        return parse(manifest), []
    return manifest, []


def load_documents(
    text: str, *, source: str = "<input>", default_instance_profile: str | None = None,
    prune: yaml_events.Prune | None = None,
) -> LoadResult:
    """Every object of a (multi-document) YAML text, converted to v1, typed and validated.

    ``default_instance_profile`` plays Karpenter v0.x's ``aws.defaultInstanceProfile`` setting for
    v1alpha5/v1alpha1 objects that name no instance profile. ``prune`` is given every object that is
    a mapping (a document, or an item of a List as soon as it is read) before anything else looks at
    it, to drop in place what the caller never reads (it must accept any mapping). Raises
    :class:`karpy.api.errors.ValidationError` carrying the errors of all documents.
    """
    docs = list(_expand_lists(_parse_yaml(text, source, prune)))
    if prune is not None:
        for doc in docs:
            if not doc.pruned and isinstance(doc.data, dict):
                prune(doc.data)
    return _load(docs, default_instance_profile)


def load_parsed(documents: Sequence[Any], *, default_instance_profile: str | None = None) -> LoadResult:
    """:func:`load_documents` of documents already read (by :func:`parse_yaml`): ``documents[i]`` is
    document ``i + 1`` of the text, None for one to skip (errors keep the text's numbering). The
    documents are checked as they are (nothing JSON cannot carry, string keys) and not changed."""
    return _load(list(_expand_lists([_Doc(f"document {i}", i, d, []) for i, d in enumerate(documents, 1)])),
                 default_instance_profile)


def _load(docs: list[_Doc], default_instance_profile: str | None) -> LoadResult:
    result = LoadResult()
    problems: list[errors.FieldError] = []
    ctx = conversion.Context(node_classes=_node_class_index(docs),
                             default_instance_profile=default_instance_profile)
    converted: dict[int, tuple[_Doc, conversion.Result]] = {}
    claims: list[tuple[int, _Doc]] = []

    for pos, doc in enumerate(docs):
        if not isinstance(doc.data, Mapping):
            problems.append(errors.FieldError(doc.label, "(root)", "a mapping with apiVersion and kind",
                                              doc.data))
            continue
        structure = [] if doc.plain_json else strict.check_structure(doc.data, doc.label)
        if structure:
            problems.extend(structure)
            continue
        kind = str(doc.data.get("kind") or "")
        api_version = str(doc.data.get("apiVersion") or "")
        name = _name_of(doc.data)
        shape = strict.check_fields(doc.data, _label(doc, kind, name)) + \
            strict.check_rules(doc.data, _label(doc, kind, name))
        if shape:
            problems.extend(shape)
            continue
        for key, first, second in doc.duplicates:
            result.warnings.append(f"{_label(doc, kind, name)}: line {second}: key {key!r} is given twice "
                                   f"(first on line {first}); the later value is used, as kubectl does")
        for path, value in _shell_variables(doc.data, "") if doc.dollar_brace else ():
            result.warnings.append(f"{_label(doc, kind, name)}: {path} is {value!r}, which looks like an "
                                   "unexpanded shell variable (run the file through envsubst first?)")
        if not kind or not api_version:
            missing = "kind" if not kind else "apiVersion"
            problems.append(errors.FieldError(_label(doc, kind or "?", name), missing, f"a {missing}", None))
            continue
        group = conversion.split_api_version(api_version)[0]
        if group in conversion.KARPENTER_GROUPS:
            known_kind = any(g == group and k == kind for g, k in conversion.SUPPORTED_VERSIONS)
            if not known_kind:
                result.warnings.append(f"{_label(doc, kind, name)}: karpy does not model {api_version} "
                                       f"{kind}; kept as is")
            elif kind in ("NodeClaim", "Machine"):
                claims.append((pos, doc))
                continue
            else:
                try:
                    converted[pos] = (doc, conversion.convert(doc.data, ctx))
                except errors.ValidationError as exc:
                    problems.extend(_rewrap(exc, _label(doc, kind, name)))
                continue
        converted[pos] = (doc, conversion.Result(manifests=[dict(doc.data)]))

    expire: dict[str, str] = {}
    for _, conv in converted.values():
        for m in conv.manifests:
            if m.get("kind") == nodepool.KIND and m.get("apiVersion") == nodepool.API_VERSION:
                tspec = ((m.get("spec") or {}).get("template") or {}).get("spec") or {}
                md = m.get("metadata") or {}
                if isinstance(md, Mapping) and isinstance(md.get("name"), str) and isinstance(tspec, Mapping):
                    expire[md["name"]] = str(tspec.get("expireAfter", "720h"))
    claim_ctx = dataclasses.replace(ctx, expire_after=expire)
    for pos, doc in claims:
        kind = str(doc.data.get("kind"))
        name = _name_of(doc.data)
        try:
            converted[pos] = (doc, conversion.convert(doc.data, claim_ctx))
        except errors.ValidationError as exc:
            problems.extend(_rewrap(exc, _label(doc, kind, name)))

    seen: dict[tuple[str, str, str], str] = {}
    for pos in sorted(converted):
        doc, conv = converted[pos]
        result.warnings.extend(conv.warnings)
        kind = str(doc.data.get("kind"))
        api_version = str(doc.data.get("apiVersion"))
        name = _name_of(doc.data)
        for manifest in conv.manifests:
            new_kind = str(manifest.get("kind"))
            new_name = _name_of(manifest)
            as_text = None if (new_kind, new_name) == (kind, name) else f"{new_kind}/{new_name}"
            label = _label(doc, kind, name, as_text)
            ident = strict.identity(manifest)
            if ident[2] and ident in seen and strict.known_kind(str(manifest.get("apiVersion")), new_kind):
                problems.append(errors.FieldError(label, "metadata.name", f"a {new_kind} name not used before "
                                                  f"(the same object is given in {seen[ident]})", ident[2]))
            seen.setdefault(ident, label)
            try:
                model, errs = _model(manifest, new_name in conv.identity_from_settings)
            except errors.ValidationError as exc:
                problems.extend(_rewrap(exc, label))
                continue
            problems.extend(dataclasses.replace(e, obj=label) for e in errs)
            result.warnings.extend(unimplemented.warnings_for(manifest))
            result.objects.append(Loaded(doc.index, new_kind, str(manifest.get("apiVersion")), kind,
                                         api_version, model, manifest))
    if problems:
        raise errors.ValidationError(problems)
    _carry_kubelet(result)
    return result


def _carry_kubelet(result: LoadResult) -> None:
    """Put a v1beta1/v1alpha5 NodePool kubelet (kept in the compatibility annotation) on its
    EC2NodeClass when that is unambiguous: the class has no kubelet of its own and every NodePool
    using it carries the same settings. Otherwise the annotation keeps winning per NodePool, as in
    Karpenter v1.0."""
    by_class: dict[str, list[nodepool.NodePool]] = {}
    for o in result.objects:
        if isinstance(o.obj, nodepool.NodePool) and o.obj.node_class_ref is not None \
                and o.obj.node_class_ref.kind == nodeclass.EC2_KIND:
            by_class.setdefault(o.obj.node_class_ref.name, []).append(o.obj)
    for i, o in enumerate(result.objects):
        if not isinstance(o.obj, nodeclass.EC2NodeClass) or o.obj.kubelet is not None:
            continue
        pools = by_class.get(o.obj.name, [])
        texts = {p.metadata.annotations.get(nodepool.KUBELET_COMPAT_ANNOTATION) for p in pools}
        if len(texts) != 1 or None in texts:
            if len(texts) > 1 and any(t is not None for t in texts):
                result.warnings.append(
                    f"EC2NodeClass {o.obj.name}: its NodePools ({', '.join(p.name for p in pools)}) carry "
                    "different kubelet settings; each keeps its own via "
                    f"{nodepool.KUBELET_COMPAT_ANNOTATION} (give each its own EC2NodeClass to migrate)")
            continue
        kubelet = pools[0].compat_kubelet()
        raw = json.loads(json.dumps(o.raw))
        raw.setdefault("spec", {})["kubelet"] = kubelet.to_dict() if kubelet else {}
        result.objects[i] = dataclasses.replace(o, obj=dataclasses.replace(o.obj, kubelet=kubelet), raw=raw)
        result.warnings.append(
            f"EC2NodeClass {o.obj.name}: spec.kubelet is now the kubelet settings of NodePool(s) "
            f"{', '.join(p.name for p in pools)} (kept in their {nodepool.KUBELET_COMPAT_ANNOTATION} "
            "annotation)")
