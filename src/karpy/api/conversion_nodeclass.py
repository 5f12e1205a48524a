"""Conversion of older NodeClass kinds to ``karpenter.k8s.aws/v1`` EC2NodeClass and
``karpenter.azure.com/v1beta1`` AKSNodeClass (the :mod:`karpy.api.conversion` entry point dispatches here).

A caller may rely on:

* :func:`awsnodetemplate_v1alpha1` turns a ``karpenter.k8s.aws/v1alpha1`` AWSNodeTemplate into an
  EC2NodeClass of the same name; :func:`aws_template_spec` builds that spec and the one a
  ``karpenter.sh/v1alpha5`` Provisioner's inline ``provider`` becomes: ``amiFamily`` (AL2 by
  default; Ubuntu and ``launchTemplate`` are refused), the tag selectors as ``*SelectorTerms``
  (``aws::ids`` become id terms; ``aws::name``/``aws::owners`` AMI terms), an
  ``<family>@latest`` alias where no AMI selector was given, ``instanceProfile`` (else the
  context's default, else the name is put in ``Result.identity_from_settings``) and
  ``metadataOptions.httpPutResponseHopLimit`` 2 unless set;
* :func:`ec2nodeclass_v1beta1` keeps the spec and status, refuses Ubuntu, adds the alias term where
  ``amiSelectorTerms`` is empty and the hop limit 2 unless set;
* :func:`aksnodeclass_v1alpha2` changes only the apiVersion;
* every change is a warning on the :class:`karpy.api.conversion_result.Result`; bad input raises
  :class:`karpy.api.errors.ValidationError` with the path in the old manifest.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from karpy.api import conversion_result, fields, nodeclass

V1_EC2 = nodeclass.EC2_API_VERSION
_AMI_ID_KEYS = ("aws::ids", "aws-ids")
_V1BETA1_HOP_LIMIT = 2


def _selector_terms(
    f: fields.Fields, key: str, result: conversion_result.Result, *, obj: str, where: str, version: str, new_key: str,
    ami: bool = False,
) -> list[dict[str, Any]]:
    # (str() copies: fields.Fields' annotations name its own str method, which mypy cannot read)
    tags: dict[str, str] = {str(k): str(v) for k, v in f.str_map(key).items()}
    if not tags:
        return []
    terms: list[dict[str, Any]] = []
    ids: list[str] = []
    for id_key in _AMI_ID_KEYS:
        if id_key in tags:
            ids.extend(i.strip() for i in tags.pop(id_key).split(",") if i.strip())
    name = tags.pop("aws::name", None) if ami else None
    owners = [o.strip() for o in tags.pop("aws::owners", "").split(",") if o.strip()] if ami else []
    if ids:
        terms.extend({"id": i} for i in ids)
        if tags or name or owners:
            result.warn(f"{obj}: {f.at(key)} mixes ids with other keys; the ids alone select in "
                        f"spec.{new_key} of {where}")
    elif name or owners:
        for owner in owners or [""]:
            term: dict[str, Any] = {}
            if name:
                term["name"] = name
            if owner:
                term["owner"] = owner
            if tags:
                term["tags"] = dict(tags)
            terms.append(term)
    elif tags:
        terms.append({"tags": tags})
    result.warn(f"{obj}: {f.at(key)} ({version}) is now spec.{new_key} {json.dumps(terms)} on {where}")
    return terms


def aws_template_spec(
    f: fields.Fields, ctx: conversion_result.Context, result: conversion_result.Result, *, obj: str, name: str,
    where: str, version: str,
) -> dict[str, Any]:
    """An EC2NodeClass v1 spec from a v1alpha1 AWSNodeTemplate spec or a v1alpha5 inline provider."""
    if f.has("launchTemplate"):
        raise f.fail("launchTemplate", "no launchTemplate: Karpenter v1 builds its own launch templates; "
                     "move its settings (AMI, user data, disks, security groups) into the EC2NodeClass",
                     f.raw("launchTemplate"))
    family = f.str("amiFamily") or "AL2"
    if family == "Ubuntu":
        raise f.fail("amiFamily", "one of " + ", ".join(nodeclass.AMI_FAMILIES)
                     + " (Karpenter v1 dropped Ubuntu; use Custom with amiSelectorTerms)", family)
    spec: dict[str, Any] = {"amiFamily": family}
    terms = functools.partial(_selector_terms, f, result=result, obj=obj, where=where, version=version)
    ami_terms = terms("amiSelector", new_key="amiSelectorTerms", ami=True)
    if not ami_terms:
        if family == "Custom":
            raise f.fail("amiSelector", "an amiSelector when amiFamily is Custom", None)
        ami_terms = [{"alias": f"{family.lower()}@latest"}]
        result.warn(f"{obj}: {f.at('amiFamily')}={family} without amiSelector ({version}) is now "
                    "spec.amiSelectorTerms "
                    f"[{{alias: {family.lower()}@latest}}] on {where}")
    spec["amiSelectorTerms"] = ami_terms
    spec["subnetSelectorTerms"] = terms("subnetSelector", new_key="subnetSelectorTerms")
    spec["securityGroupSelectorTerms"] = terms("securityGroupSelector", new_key="securityGroupSelectorTerms")
    profile = f.str("instanceProfile") or ctx.default_instance_profile
    if profile:
        spec["instanceProfile"] = profile
    else:
        result.identity_from_settings.add(name)
        result.warn(f"{obj}: no instanceProfile: Karpenter v0.x used its aws.defaultInstanceProfile setting; "
                    f"set spec.role or spec.instanceProfile on {where}")
    for key in ("tags", "userData", "context", "detailedMonitoring", "blockDeviceMappings"):
        if f.has(key):
            spec[key] = copy.deepcopy(f.raw(key))
    mo = dict(copy.deepcopy(f.sub("metadataOptions").data))
    mo.setdefault("httpPutResponseHopLimit", _V1BETA1_HOP_LIMIT)
    spec["metadataOptions"] = mo
    return spec


def awsnodetemplate_v1alpha1(f: fields.Fields, ctx: conversion_result.Context,
                             result: conversion_result.Result) -> None:
    name = conversion_result.name_of(f)
    where = f"EC2NodeClass {name} ({V1_EC2})"
    spec = aws_template_spec(f.sub("spec"), ctx, result, obj=f.obj, name=name, where=where,
                              version="karpenter.k8s.aws/v1alpha1")
    result.warn(f"AWSNodeTemplate {name} (karpenter.k8s.aws/v1alpha1) is now {where}")
    result.manifests.append({"apiVersion": V1_EC2, "kind": nodeclass.EC2_KIND,
                             "metadata": conversion_result.metadata_of(f),
                             "spec": spec})


def ec2nodeclass_v1beta1(f: fields.Fields, ctx: conversion_result.Context,
                         result: conversion_result.Result) -> None:
    name = conversion_result.name_of(f)
    where = f"EC2NodeClass {name} ({V1_EC2})"
    spec_f = f.sub("spec")
    spec = copy.deepcopy(dict(spec_f.data))
    family = spec_f.str("amiFamily")
    if family == "Ubuntu":
        raise spec_f.fail("amiFamily", "one of " + ", ".join(nodeclass.AMI_FAMILIES)
                          + " (Karpenter v1 dropped Ubuntu; use Custom with amiSelectorTerms)", family)
    if not spec_f.list("amiSelectorTerms") and family and family != "Custom":
        alias = f"{family.lower()}@latest"
        spec["amiSelectorTerms"] = [{"alias": alias}]
        result.warn(f"{f.obj}: spec.amiFamily={family} without amiSelectorTerms (karpenter.k8s.aws/v1beta1) "
                    f"is now spec.amiSelectorTerms [{{alias: {alias}}}] on {where}")
    mo = dict(copy.deepcopy(spec_f.sub("metadataOptions").data))
    if "httpPutResponseHopLimit" not in mo:
        mo["httpPutResponseHopLimit"] = _V1BETA1_HOP_LIMIT
    spec["metadataOptions"] = mo
    result.manifests.append({"apiVersion": V1_EC2, "kind": nodeclass.EC2_KIND,
                             "metadata": conversion_result.metadata_of(f),
                             "spec": spec, **({"status": copy.deepcopy(f.raw("status"))} if f.has("status")
                                              else {})})


def aksnodeclass_v1alpha2(f: fields.Fields, ctx: conversion_result.Context,
                          result: conversion_result.Result) -> None:
    name = conversion_result.name_of(f)
    out = copy.deepcopy(dict(f.data))
    out["apiVersion"] = nodeclass.AKS_API_VERSION
    result.warn(f"AKSNodeClass {name} (karpenter.azure.com/v1alpha2) is now AKSNodeClass {name} "
                f"({nodeclass.AKS_API_VERSION}) with the same fields")
    result.manifests.append(out)
