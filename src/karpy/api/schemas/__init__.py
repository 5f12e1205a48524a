"""Declarative OpenAPI v3 schemas of karpy's custom resources, and the CRDs made from them.

One module per kind (:mod:`nodepool`, :mod:`nodeclaim`, :mod:`nodeoverlay`, :mod:`ec2nodeclass`, :mod:`aksnodeclass`,
:mod:`kwoknodeclass`)
declares its fields, types, enums, patterns, defaults and CEL rules once, with the builders of
:mod:`dsl` and the shared pieces of :mod:`common`; :mod:`crd` turns them into
``apiextensions.k8s.io/v1`` CustomResourceDefinitions, drop-in for Karpenter's own (same group,
names, short names, categories, printer columns and subresources). ``scripts/generate_crds.py``
writes them to ``charts/karpy/crds/``; a test fails when the files drift from what it produces.

Pure data: no I/O. A caller may rely on :func:`karpy.api.schemas.crd.definitions` returning every CRD
karpy ships, and on :func:`karpy.api.schemas.crd.schema_of` giving a version's ``openAPIV3Schema``
(e.g. to validate a manifest with ``jsonschema``).
"""
