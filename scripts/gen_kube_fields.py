"""Generate ``src/karpy/api/kube_fields.json``: the field names and types of the Kubernetes kinds
karpy reads (Pod, Node, workloads, PDB, volumes), for strict field validation
(:mod:`karpy.api.strict`).

The source is the OpenAPI-generated models of the official ``kubernetes`` Python client, read as
text (their ``openapi_types`` / ``attribute_map`` class attributes), so the package is needed only
to run this script, never at run time::

    pip download --no-deps kubernetes -d /tmp/k8s && cd /tmp/k8s && unzip -q kubernetes-*.whl
    python scripts/gen_kube_fields.py /tmp/k8s/kubernetes/client/models > src/karpy/api/kube_fields.json
"""

from __future__ import annotations

import ast
import json
import pathlib
import re
import sys
from typing import Any

ROOTS = {
    "v1/Pod": "V1Pod", "v1/Node": "V1Node", "v1/PersistentVolume": "V1PersistentVolume",
    "v1/PersistentVolumeClaim": "V1PersistentVolumeClaim", "v1/Namespace": "V1Namespace",
    "apps/v1/Deployment": "V1Deployment", "apps/v1/ReplicaSet": "V1ReplicaSet",
    "apps/v1/StatefulSet": "V1StatefulSet", "apps/v1/DaemonSet": "V1DaemonSet",
    "policy/v1/PodDisruptionBudget": "V1PodDisruptionBudget", "batch/v1/Job": "V1Job",
    "storage.k8s.io/v1/StorageClass": "V1StorageClass",
    "scheduling.k8s.io/v1/PriorityClass": "V1PriorityClass",
}
_SCALARS = {"str": "str", "int": "int", "bool": "bool", "float": "float", "datetime": "str",
            "date": "str", "object": "any", "bytearray": "str"}


def _class_attrs(path: pathlib.Path) -> tuple[dict[str, str], dict[str, str]] | None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id in ("openapi_types", "attribute_map") and node.value is not None:
            found[node.target.id] = ast.literal_eval(node.value)
    if "openapi_types" not in found or "attribute_map" not in found:
        return None
    return found["openapi_types"], found["attribute_map"]


def _norm(t: str) -> str:
    t = t.strip()
    m = re.fullmatch(r"List\[(.*)\]", t)
    if m:
        return "list:" + _norm(m.group(1))
    m = re.fullmatch(r"Dict\[str,\s*(.*)\]", t)
    if m:
        return "map:" + _norm(m.group(1))
    return _SCALARS.get(t, t)


def main(models_dir: str) -> None:
    by_class: dict[str, dict[str, str]] = {}
    for path in sorted(pathlib.Path(models_dir).glob("*.py")):
        attrs = _class_attrs(path)
        if attrs is None:
            continue
        types, names = attrs
        cls = re.search(r"^class (\w+)\(", path.read_text(encoding="utf-8"), re.M)
        if cls:
            by_class[cls.group(1)] = {names[k]: _norm(v) for k, v in types.items()}
    models: dict[str, dict[str, str]] = {}
    todo = list(ROOTS.values())
    while todo:
        name = todo.pop()
        if name in models:
            continue
        models[name] = by_class[name]
        for t in models[name].values():
            base = t.split(":")[-1]
            if base in by_class:
                todo.append(base)
    json.dump({"roots": ROOTS, "models": dict(sorted(models.items()))}, sys.stdout, indent=0,
              sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
