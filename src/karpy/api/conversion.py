"""Conversion of older Karpenter API versions to ``karpenter.sh/v1`` / ``karpenter.k8s.aws/v1``.

Users bring manifests written for Karpenter v0.x: ``karpenter.sh/v1alpha5`` Provisioner and Machine,
``karpenter.k8s.aws/v1alpha1`` AWSNodeTemplate, ``karpenter.sh/v1beta1`` NodePool and NodeClaim,
``karpenter.k8s.aws/v1beta1`` EC2NodeClass and ``karpenter.azure.com/v1alpha2`` AKSNodeClass.
:func:`convert` turns one such manifest (a plain dict) into the newest form, choosing the v1 values
that keep the old behaviour, and says what it changed.

A caller may rely on:

* :func:`convert` never mutates its input; it returns :class:`Result` with the v1 manifests (a
  Provisioner with an inline ``provider`` gives two: the NodePool and a generated EC2NodeClass of
  the same name) and one human-readable warning per changed field, naming the old field and
  version and the new field and version.
* Every warning is also logged once per process on the ``karpy.api.conversion`` logger.
* Input that cannot be converted raises :class:`karpy.api.errors.ValidationError` naming object,
  path (in the *old* manifest), expected and found.
* Objects already in the newest version pass through unchanged, without warnings.

The karpenter.sh kinds are converted here; the NodeClass kinds (AWSNodeTemplate, EC2NodeClass
v1beta1, AKSNodeClass v1alpha2 and a Provisioner's inline ``provider``) in
:mod:`karpy.api.conversion_nodeclass`; :class:`Context` and :class:`Result` are
:mod:`karpy.api.conversion_result`'s, named here too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from karpy.api import (
    conversion_nodeclass,
    conversion_result,
    duration,
    errors,
    fields,
    labels,
    meta,
    nodeclaim,
    nodeclass,
    nodepool,
    validation,
)

SUPPORTED_VERSIONS: dict[tuple[str, str], tuple[str, ...]] = {
    (labels.GROUP, "NodePool"): ("v1", "v1beta1"),
    (labels.GROUP, "NodeClaim"): ("v1", "v1beta1"),
    (labels.GROUP, "NodeOverlay"): ("v1alpha1",),
    (labels.GROUP, "Provisioner"): ("v1alpha5",),  # converted to NodePool (+ EC2NodeClass)
    (labels.GROUP, "Machine"): ("v1alpha5",),  # converted to NodeClaim
    (labels.AWS_GROUP, "EC2NodeClass"): ("v1", "v1beta1"),
    (labels.AWS_GROUP, "AWSNodeTemplate"): ("v1alpha1",),  # converted to EC2NodeClass
    (labels.AZURE_GROUP, "AKSNodeClass"): ("v1beta1", "v1alpha2"),
}
"""(group, kind) -> versions karpy reads, newest first."""

KARPENTER_GROUPS = (labels.GROUP, labels.AWS_GROUP, labels.AZURE_GROUP)
V1_NODEPOOL = "karpenter.sh/v1"
V1_EC2 = conversion_nodeclass.V1_EC2
_MACHINE_CONDITIONS = {"MachineLaunched": "Launched", "MachineRegistered": "Registered",
                       "MachineInitialized": "Initialized", "MachineDrifted": "Drifted",
                       "MachineEmpty": "Empty", "MachineExpired": "Expired"}

Context = conversion_result.Context
"""What a conversion may need to know about the other objects of the same input."""
Result = conversion_result.Result
"""What one conversion produced: the v1 manifests and one warning per changed field."""

def split_api_version(api_version: str) -> tuple[str, str]:
    """``"karpenter.sh/v1"`` -> ``("karpenter.sh", "v1")``; ``"v1"`` -> ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


def is_supported(api_version: str, kind: str) -> bool:
    group, version = split_api_version(api_version)
    return version in SUPPORTED_VERSIONS.get((group, kind), ())


def is_newest(api_version: str, kind: str) -> bool:
    """True for the versions karpy models directly (no conversion needed)."""
    group, version = split_api_version(api_version)
    return is_supported(api_version, kind) and (group, kind, version) not in _CONVERTERS


def convert(doc: Mapping[str, Any], ctx: Context | None = None) -> Result:
    """The newest form(s) of a Karpenter manifest of a supported version (see :data:`SUPPORTED_VERSIONS`)."""
    ctx = ctx or Context()
    api_version = str(doc.get("apiVersion") or "")
    kind = str(doc.get("kind") or "")
    group, version = split_api_version(api_version)
    obj = meta.object_name(kind, doc)
    supported = SUPPORTED_VERSIONS.get((group, kind))
    if supported is None or version not in supported:
        expected = (f"{kind} in {', '.join(f'{group}/{v}' for v in supported)}" if supported
                    else "a Karpenter kind karpy knows")
        raise errors.ValidationError.single(obj, "apiVersion", expected, api_version)
    result = Result()
    if (group, kind, version) not in _CONVERTERS:
        result.manifests.append(copy.deepcopy(dict(doc)))
        return result
    f = meta.reader(kind, doc)
    converter = _CONVERTERS[(group, kind, version)]
    converter(f, ctx, result)
    return result


# --- helpers -------------------------------------------------------------------------------------


def _requirements(f: fields.Fields, key: str, obj: str, result: Result, where: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in f.items(key):
        item = copy.deepcopy(dict(r.data))
        k = r.str("key")
        if k == labels.PROVISIONER_NAME:
            item["key"] = labels.NODEPOOL
            result.warn(f"{obj}: requirement key {labels.PROVISIONER_NAME} in {r.path} is now "
                        f"{labels.NODEPOOL} on {where}")
        if "values" in item and isinstance(item["values"], list):
            item["values"] = [str(v) if not isinstance(v, str) else v for v in r.raw("values", [])]
        out.append(item)
    return out


def _node_class_ref(
    f: fields.Fields, key: str, ctx: Context, *, obj: str, result: Result, where: str
) -> dict[str, str]:
    ref = f.sub(key)
    name = ref.req_str("name")
    kind = ref.str("kind")
    group = split_api_version(ref.str("apiVersion") or "")[0] or None
    known = ctx.node_classes.get(name)
    if kind is None or group is None:
        if known is not None and (kind is None or kind == known[1]):
            group, kind = group or known[0], kind or known[1]
        else:
            kind = kind or nodeclaim.DEFAULT_NODECLASS_KIND
            group = group or (labels.AZURE_GROUP if kind == nodeclass.AKS_KIND else labels.AWS_GROUP)
        result.warn(f"{obj}: {ref.path} {{name: {name}}} is now {ref.path} "
                    f"{{group: {group}, kind: {kind}, name: {name}}} on {where}")
    return {"group": group, "kind": kind, "name": name}


def _kubelet(f: fields.Fields, key: str, obj: str, result: Result) -> dict[str, Any] | None:
    if not f.has(key):
        return None
    kubelet = copy.deepcopy(dict(f.sub(key).data))
    if kubelet.pop("containerRuntime", None) is not None:
        result.warn(f"{obj}: {f.at(key)}.containerRuntime is dropped: Karpenter v1 nodes always use "
                    "containerd")
    # read it here, where the user wrote it: an error names spec.template.spec.kubelet.evictionHard, not the
    # compatibility annotation karpy moves it into
    problems = validation.validate_kubelet(nodeclass.KubeletConfiguration.parse(fields.Fields(kubelet, obj, f.at(key))),
                                           obj, f.at(key))
    if problems:
        raise errors.ValidationError(problems)
    return kubelet


def _seconds(f: fields.Fields, key: str) -> str | None:
    value = duration.read_seconds(f, key)
    return None if value is None else duration.format_duration(value)


# --- karpenter.sh/v1beta1 ------------------------------------------------------------------------


def _nodepool_v1beta1(f: fields.Fields, ctx: Context, result: Result) -> None:
    obj = f.obj
    name = conversion_result.name_of(f)
    where = f"NodePool {name} ({V1_NODEPOOL})"
    spec_f = f.sub("spec")
    spec = copy.deepcopy(dict(spec_f.data))
    md = conversion_result.metadata_of(f)
    tmpl_f = spec_f.sub("template")
    tspec_f = tmpl_f.sub("spec")
    template = copy.deepcopy(dict(tmpl_f.data))
    tspec: dict[str, Any] = copy.deepcopy(dict(tspec_f.data))
    tspec.pop("resources", None)
    if tspec_f.has("nodeClassRef"):
        tspec["nodeClassRef"] = _node_class_ref(tspec_f, "nodeClassRef", ctx, obj=obj, result=result,
                                                where=where)
    if tspec_f.has("requirements"):
        tspec["requirements"] = _requirements(tspec_f, "requirements", obj, result, where)
    kubelet = _kubelet(tspec_f, "kubelet", obj, result)
    tspec.pop("kubelet", None)
    if kubelet is not None:
        annotations = dict(md.get("annotations") or {})
        annotations[nodepool.KUBELET_COMPAT_ANNOTATION] = json.dumps(kubelet, sort_keys=True)
        md["annotations"] = annotations
        ref = tspec.get("nodeClassRef") or {}
        result.warn(f"{obj}: {tspec_f.at('kubelet')} (karpenter.sh/v1beta1) is now spec.kubelet of "
                    f"{ref.get('kind', 'the NodeClass')} {ref.get('name', '')} (karpenter.k8s.aws/v1), "
                    f"kept meanwhile in the {nodepool.KUBELET_COMPAT_ANNOTATION} annotation of {where}")
    d_f = spec_f.sub("disruption")
    disruption = copy.deepcopy(dict(d_f.data))
    policy = d_f.str("consolidationPolicy", "WhenUnderutilized") or "WhenUnderutilized"
    expire = disruption.pop("expireAfter", None)
    if expire is not None:
        tspec.setdefault("expireAfter", expire)
        result.warn(f"{obj}: {d_f.at('expireAfter')}={expire} (karpenter.sh/v1beta1) is now "
                    f"spec.template.spec.expireAfter={expire} on {where}")
    after = d_f.raw("consolidateAfter")
    if policy == "WhenUnderutilized":
        disruption["consolidationPolicy"] = nodepool.WHEN_EMPTY_OR_UNDERUTILIZED
        if after is None:
            disruption["consolidateAfter"] = "0s"
        elif str(after) != duration.NEVER:
            result.warn(f"{obj}: {d_f.at('consolidateAfter')}={after} with consolidationPolicy "
                        "WhenUnderutilized is rejected by Karpenter v1beta1; karpenter.sh/v1 accepts it and "
                        f"waits {after} before consolidating on {where}")
        result.warn(f"{obj}: {d_f.at('consolidationPolicy')}=WhenUnderutilized (karpenter.sh/v1beta1) is "
                    f"now spec.disruption.consolidationPolicy=WhenEmptyOrUnderutilized + consolidateAfter="
                    f"{disruption['consolidateAfter']} on {where}")
    elif after is None:
        raise d_f.fail("consolidateAfter", "a duration such as 30s (required with consolidationPolicy "
                       "WhenEmpty)", None)
    else:
        disruption["consolidationPolicy"] = policy
    spec["disruption"] = disruption
    template["spec"] = tspec
    spec["template"] = template
    result.manifests.append({"apiVersion": V1_NODEPOOL, "kind": "NodePool", "metadata": md, "spec": spec})


def _nodeclaim_common(
    f: fields.Fields, ctx: Context, result: Result, where: str, *, requirements: list[dict[str, Any]],
    ref: dict[str, str] | None, kubelet: dict[str, Any] | None, md: dict[str, Any], default_expire: str,
) -> dict[str, Any]:
    spec_f = f.sub("spec")
    spec: dict[str, Any] = {"requirements": requirements}
    for key in ("taints", "startupTaints", "resources", "terminationGracePeriod"):
        if spec_f.has(key):
            spec[key] = copy.deepcopy(spec_f.raw(key))
    if ref is not None:
        spec["nodeClassRef"] = ref
    pool = (md.get("labels") or {}).get(labels.NODEPOOL)
    spec["expireAfter"] = ctx.expire_after.get(pool, default_expire) if pool else default_expire
    if kubelet is not None:
        annotations = dict(md.get("annotations") or {})
        annotations[nodepool.KUBELET_COMPAT_ANNOTATION] = json.dumps(kubelet, sort_keys=True)
        md["annotations"] = annotations
    out: dict[str, Any] = {"apiVersion": V1_NODEPOOL, "kind": "NodeClaim", "metadata": md, "spec": spec}
    return out


def _nodeclaim_v1beta1(f: fields.Fields, ctx: Context, result: Result) -> None:
    obj = f.obj
    where = f"NodeClaim {conversion_result.name_of(f)} ({V1_NODEPOOL})"
    spec_f = f.sub("spec")
    ref: dict[str, str] | None = None
    if spec_f.has("nodeClassRef"):
        ref = _node_class_ref(spec_f, "nodeClassRef", ctx, obj=obj, result=result, where=where)
    out = _nodeclaim_common(
        f, ctx, result, where, requirements=_requirements(spec_f, "requirements", obj, result, where),
        ref=ref, kubelet=_kubelet(spec_f, "kubelet", obj, result), md=conversion_result.metadata_of(f),
        default_expire="720h",
    )
    if f.has("status"):
        out["status"] = copy.deepcopy(dict(f.sub("status").data))
    result.manifests.append(out)


# --- karpenter.sh/v1alpha5 -----------------------------------------------------------------------


def _machine_v1alpha5(f: fields.Fields, ctx: Context, result: Result) -> None:
    obj = f.obj
    name = conversion_result.name_of(f)
    where = f"NodeClaim {name} ({V1_NODEPOOL})"
    md = conversion_result.metadata_of(f)
    md_labels = dict(md.get("labels") or {})
    if labels.PROVISIONER_NAME in md_labels:
        md_labels[labels.NODEPOOL] = md_labels.pop(labels.PROVISIONER_NAME)
        md["labels"] = md_labels
        result.warn(f"{obj}: label {labels.PROVISIONER_NAME} (karpenter.sh/v1alpha5) is now "
                    f"{labels.NODEPOOL} on {where}")
    spec_f = f.sub("spec")
    ref: dict[str, str] | None = None
    if spec_f.has("machineTemplateRef"):
        ref = _node_class_ref(spec_f, "machineTemplateRef", ctx, obj=obj, result=result, where=where)
        result.warn(f"{obj}: spec.machineTemplateRef (karpenter.sh/v1alpha5) is now spec.nodeClassRef "
                    f"on {where}")
    out = _nodeclaim_common(
        f, ctx, result, where, requirements=_requirements(spec_f, "requirements", obj, result, where),
        ref=ref, kubelet=_kubelet(spec_f, "kubelet", obj, result), md=md, default_expire=duration.NEVER,
    )
    result.warn(f"Machine {name} (karpenter.sh/v1alpha5) is now NodeClaim {name} ({V1_NODEPOOL}) with "
                f"expireAfter={out['spec']['expireAfter']}")
    status_f = f.sub("status")
    if status_f.data:
        status = copy.deepcopy(dict(status_f.data))
        conditions = []
        for c in status_f.items("conditions"):
            cond = copy.deepcopy(dict(c.data))
            ctype = c.str("type") or ""
            cond["type"] = _MACHINE_CONDITIONS.get(ctype, ctype.removeprefix("Machine"))
            conditions.append(cond)
        if conditions:
            status["conditions"] = conditions
        out["status"] = status
    result.manifests.append(out)


def _provisioner_v1alpha5(f: fields.Fields, ctx: Context, result: Result) -> None:
    obj = f.obj
    name = conversion_result.name_of(f)
    where = f"NodePool {name} ({V1_NODEPOOL})"
    spec_f = f.sub("spec")
    md = conversion_result.metadata_of(f)
    requirements = _requirements(spec_f, "requirements", obj, result, where)
    keys = {labels.NORMALIZED_LABELS.get(str(r.get("key")), str(r.get("key"))) for r in requirements}
    if labels.CAPACITY_TYPE not in keys:
        requirements.append({"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]})
        result.warn(f"{obj}: no {labels.CAPACITY_TYPE} requirement: Karpenter v1alpha5 defaulted it to "
                    f"on-demand, now the explicit requirement {labels.CAPACITY_TYPE} In [on-demand] "
                    f"on {where}")
    if labels.ARCH not in keys:
        requirements.append({"key": labels.ARCH, "operator": "In", "values": ["amd64"]})
        result.warn(f"{obj}: no {labels.ARCH} requirement: Karpenter v1alpha5 defaulted it to amd64, now "
                    f"the explicit requirement {labels.ARCH} In [amd64] on {where}")
    tspec: dict[str, Any] = {"requirements": requirements}
    for key in ("taints", "startupTaints"):
        if spec_f.has(key):
            tspec[key] = copy.deepcopy(spec_f.raw(key))
    template: dict[str, Any] = {}
    tmd: dict[str, Any] = {}
    for key in ("labels", "annotations"):
        if spec_f.has(key):
            tmd[key] = spec_f.str_map(key)
            result.warn(f"{obj}: spec.{key} (karpenter.sh/v1alpha5) is now spec.template.metadata.{key} "
                        f"on {where}")
    if tmd:
        template["metadata"] = tmd

    # Expiry: v1alpha5 never expired nodes unless ttlSecondsUntilExpired was set.
    expire = _seconds(spec_f, "ttlSecondsUntilExpired")
    if expire is None:
        tspec["expireAfter"] = duration.NEVER
        result.warn(f"{obj}: no spec.ttlSecondsUntilExpired (karpenter.sh/v1alpha5: nodes never expire) is "
                    f"now spec.template.spec.expireAfter=Never on {where} (the v1 default would be 720h)")
    else:
        tspec["expireAfter"] = expire
        result.warn(f"{obj}: spec.ttlSecondsUntilExpired (karpenter.sh/v1alpha5) is now "
                    f"spec.template.spec.expireAfter={expire} on {where}")

    # Emptiness and consolidation.
    empty = _seconds(spec_f, "ttlSecondsAfterEmpty")
    consolidation = spec_f.sub("consolidation").bool("enabled")
    if empty is not None and consolidation:
        raise spec_f.fail("consolidation.enabled",
                          "either consolidation.enabled or ttlSecondsAfterEmpty, not both", True)
    if empty is not None:
        # v1alpha5 removed every empty node once its TTL passed, with no budget: keep that
        disruption = {"consolidationPolicy": nodepool.WHEN_EMPTY, "consolidateAfter": empty,
                      "budgets": [{"nodes": "100%"}]}
        result.warn(f"{obj}: spec.ttlSecondsAfterEmpty (karpenter.sh/v1alpha5) is now "
                    f"spec.disruption.consolidationPolicy=WhenEmpty + consolidateAfter={empty} on {where}, "
                    f"with budgets [nodes: 100%] so that every empty node still goes at once as in v1alpha5")
    elif consolidation:
        disruption = {"consolidationPolicy": nodepool.WHEN_EMPTY_OR_UNDERUTILIZED, "consolidateAfter": "0s"}
        result.warn(f"{obj}: spec.consolidation.enabled=true (karpenter.sh/v1alpha5) is now "
                    f"spec.disruption.consolidationPolicy=WhenEmptyOrUnderutilized + consolidateAfter=0s "
                    f"on {where}")
    else:
        disruption = {"consolidationPolicy": nodepool.WHEN_EMPTY, "consolidateAfter": duration.NEVER}
        result.warn(f"{obj}: neither spec.ttlSecondsAfterEmpty nor spec.consolidation "
                    f"(karpenter.sh/v1alpha5: nodes are never removed for being empty or underused) is now "
                    f"spec.disruption.consolidationPolicy=WhenEmpty + consolidateAfter=Never on {where}")

    spec: dict[str, Any] = {"disruption": disruption}
    if spec_f.sub("limits").has("resources"):
        spec["limits"] = copy.deepcopy(spec_f.sub("limits").raw("resources"))
        result.warn(f"{obj}: spec.limits.resources (karpenter.sh/v1alpha5) is now spec.limits on {where}")
    if spec_f.has("weight"):
        spec["weight"] = spec_f.int("weight")

    kubelet = _kubelet(spec_f, "kubeletConfiguration", obj, result)
    has_provider, has_ref = spec_f.has("provider"), spec_f.has("providerRef")
    if has_provider and has_ref:
        raise spec_f.fail("providerRef", "either spec.provider or spec.providerRef, not both",
                          spec_f.raw("providerRef"))
    if not has_provider and not has_ref:
        raise spec_f.fail("providerRef",
                          "spec.providerRef naming an AWSNodeTemplate, or an inline spec.provider", None)
    if has_provider:
        nc_name = name
        nc_where = f"EC2NodeClass {nc_name} ({V1_EC2})"
        nc_spec = conversion_nodeclass.aws_template_spec(spec_f.sub("provider"), ctx, result, obj=obj,
                                                         name=nc_name, where=nc_where,
                                                         version="karpenter.sh/v1alpha5")
        if kubelet is not None:
            nc_spec["kubelet"] = kubelet
            result.warn(f"{obj}: spec.kubeletConfiguration (karpenter.sh/v1alpha5) is now spec.kubelet on "
                        f"{nc_where}")
        result.warn(f"{obj}: spec.provider (karpenter.sh/v1alpha5) is now {nc_where}, referenced by "
                    f"spec.template.spec.nodeClassRef of {where}")
        tspec["nodeClassRef"] = {"group": labels.AWS_GROUP, "kind": nodeclass.EC2_KIND, "name": nc_name}
        result.manifests.append({
            "apiVersion": V1_EC2, "kind": nodeclass.EC2_KIND, "metadata": {"name": nc_name}, "spec": nc_spec,
        })
    else:
        ref_f = spec_f.sub("providerRef")
        ref_name = ref_f.req_str("name")
        tspec["nodeClassRef"] = {"group": labels.AWS_GROUP, "kind": nodeclass.EC2_KIND, "name": ref_name}
        result.warn(f"{obj}: spec.providerRef (karpenter.sh/v1alpha5, AWSNodeTemplate {ref_name}) is now "
                    f"spec.template.spec.nodeClassRef (EC2NodeClass {ref_name}) on {where}")
        if kubelet is not None:
            annotations = dict(md.get("annotations") or {})
            annotations[nodepool.KUBELET_COMPAT_ANNOTATION] = json.dumps(kubelet, sort_keys=True)
            md["annotations"] = annotations
            result.warn(f"{obj}: spec.kubeletConfiguration (karpenter.sh/v1alpha5) is now spec.kubelet of "
                        f"EC2NodeClass {ref_name} ({V1_EC2}), kept meanwhile in the "
                        f"{nodepool.KUBELET_COMPAT_ANNOTATION} annotation of {where}")
    template["spec"] = tspec
    spec["template"] = template
    result.manifests.insert(0, {"apiVersion": V1_NODEPOOL, "kind": "NodePool", "metadata": md, "spec": spec})


_CONVERTERS = {
    (labels.GROUP, "NodePool", "v1beta1"): _nodepool_v1beta1,
    (labels.GROUP, "NodeClaim", "v1beta1"): _nodeclaim_v1beta1,
    (labels.GROUP, "Provisioner", "v1alpha5"): _provisioner_v1alpha5,
    (labels.GROUP, "Machine", "v1alpha5"): _machine_v1alpha5,
    (labels.AWS_GROUP, "AWSNodeTemplate", "v1alpha1"): conversion_nodeclass.awsnodetemplate_v1alpha1,
    (labels.AWS_GROUP, "EC2NodeClass", "v1beta1"): conversion_nodeclass.ec2nodeclass_v1beta1,
    (labels.AZURE_GROUP, "AKSNodeClass", "v1alpha2"): conversion_nodeclass.aksnodeclass_v1alpha2,
}
