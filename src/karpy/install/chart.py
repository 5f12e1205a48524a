"""karpy's Helm chart (``charts/karpy``) rendered without helm, with helm's merge of values.

:func:`render` reads ``Chart.yaml``, ``values.yaml`` and ``templates/`` of a chart directory,
merges the caller's values over the defaults (maps merge key by key, anything else replaces, as
``helm install -f`` does), renders every template with :mod:`karpy.install.template` and returns
the Kubernetes objects in template order (``crds/`` is not included: helm applies it as is).
:func:`value_paths` lists the value names a chart's templates read, so a test can check that each
exists in ``values.yaml``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from karpy.install import template

DEFAULT_RELEASE = "karpy"
DEFAULT_NAMESPACE = "karpy"


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``: nested maps merge, other values replace; ``None`` deletes."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load(chart_dir: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(Chart.yaml, values.yaml, template name -> text) of a chart directory."""
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    values = yaml.safe_load((chart_dir / "values.yaml").read_text()) or {}
    templates = {p.name: p.read_text() for p in sorted((chart_dir / "templates").iterdir())
                 if p.suffix in (".yaml", ".tpl")}
    return chart, values, templates


def render(chart_dir: Path, values: Mapping[str, Any] | None = None, *, release: str = DEFAULT_RELEASE,
           namespace: str = DEFAULT_NAMESPACE, service: str = "Helm") -> list[dict[str, Any]]:
    """The objects ``helm template <release> <chart_dir> -n <namespace> -f values`` would print
    (``service`` is ``.Release.Service``, the ``app.kubernetes.io/managed-by`` label)."""
    chart, defaults, templates = load(chart_dir)
    root = {
        "Values": merge(defaults, values or {}),
        "Release": {"Name": release, "Namespace": namespace, "Service": service},
        "Chart": {"Name": chart["name"], "Version": chart["version"], "AppVersion": chart.get("appVersion", "")},
    }
    renderer = template.Renderer(templates)
    objects: list[dict[str, Any]] = []
    for name in templates:
        if name.startswith("_"):
            continue
        text = renderer.render(name, root)
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise template.TemplateError(f"{name} does not render to YAML: {exc}\n{text}") from None
        objects.extend(d for d in docs if d)
    return objects


_VALUE_REF = re.compile(r"\.Values((?:\.[A-Za-z_]\w*)+)")


def value_paths(templates: Mapping[str, str]) -> set[str]:
    """Every ``.Values.a.b`` path the templates read (``a.b``)."""
    return {m.group(1)[1:] for text in templates.values() for m in _VALUE_REF.finditer(text)}


def has_path(values: Mapping[str, Any], path: str) -> bool:
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True
