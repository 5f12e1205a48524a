"""karpy's Helm charts (``charts/karpy``, ``charts/karpy-crd``) rendered by the real ``helm``.

:func:`render` runs ``helm template`` (the binary :func:`helm_binary` finds: ``$KARPY_HELM``, ``helm``
on ``PATH``, or the one scripts/realcluster/build.sh builds) with the caller's values and returns the
Kubernetes objects; Helm merges the values over ``values.yaml`` itself. :func:`load` reads a chart's
files, :func:`value_paths` lists the value names its templates read (so a test can check that each
exists in ``values.yaml``), :func:`merge` merges values as ``helm -f`` does (for callers composing
several value sets).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

DEFAULT_RELEASE = "karpy"
DEFAULT_NAMESPACE = "karpy"
MANAGED_BY = "app.kubernetes.io/managed-by"


class ChartError(RuntimeError):
    """helm is missing, or refused to render the chart; the message is helm's."""


def helm_binary() -> Path | None:
    """``$KARPY_HELM``, else ``helm`` on ``PATH``, else the upstream build's cache
    (``$KARPY_UPSTREAM_CACHE/bin/helm``, default ``~/.cache/karpy-upstream/bin/helm``); None if none."""
    explicit = os.environ.get("KARPY_HELM")
    if explicit:
        return Path(explicit) if os.access(explicit, os.X_OK) else None
    found = shutil.which("helm")
    if found:
        return Path(found)
    cache = Path(os.environ.get("KARPY_UPSTREAM_CACHE") or Path.home() / ".cache" / "karpy-upstream")
    built = cache / "bin" / "helm"
    return built if os.access(built, os.X_OK) else None


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
    values_file = chart_dir / "values.yaml"
    values = (yaml.safe_load(values_file.read_text()) if values_file.exists() else None) or {}
    templates = {p.name: p.read_text() for p in sorted((chart_dir / "templates").iterdir())
                 if p.suffix in (".yaml", ".tpl")}
    return chart, values, templates


def render(chart_dir: Path, values: Mapping[str, Any] | None = None, *, release: str = DEFAULT_RELEASE,
           namespace: str = DEFAULT_NAMESPACE, service: str = "Helm", helm: Path | None = None,
           timeout: float = 120.0) -> list[dict[str, Any]]:
    """The objects ``helm template <release> <chart_dir> -n <namespace> -f values`` prints. ``service``
    other than ``Helm`` replaces the ``app.kubernetes.io/managed-by`` label (Helm always renders
    ``.Release.Service`` as ``Helm``; the kustomize base says ``kustomize``)."""
    binary = helm or helm_binary()
    if binary is None or not os.access(binary, os.X_OK):
        raise ChartError(f"helm is not installed{f' at {binary}' if binary else ''} (KARPY_HELM: "
                         f"{os.environ.get('KARPY_HELM') or 'unset'}): set KARPY_HELM to an executable helm, put "
                         "helm on PATH or run scripts/realcluster/build.sh")
    with tempfile.TemporaryDirectory(prefix="karpy-helm-") as home:
        values_file = Path(home) / "values.yaml"
        values_file.write_text(yaml.safe_dump(dict(values or {})))
        env = {**os.environ, "HELM_CACHE_HOME": f"{home}/cache", "HELM_CONFIG_HOME": f"{home}/config",
               "HELM_DATA_HOME": f"{home}/data"}
        proc = subprocess.run([str(binary), "template", release, str(chart_dir), "--namespace", namespace,
                               "-f", str(values_file)], capture_output=True, text=True, env=env, check=False,
                              timeout=timeout)
    if proc.returncode != 0:
        raise ChartError(f"helm template {chart_dir.name} failed: {proc.stderr.strip()}")
    objects = [d for d in yaml.safe_load_all(proc.stdout) if d]
    if service != "Helm":
        for obj in objects:
            obj_labels = (obj.get("metadata") or {}).get("labels")
            if isinstance(obj_labels, dict) and obj_labels.get(MANAGED_BY) == "Helm":
                obj_labels[MANAGED_BY] = service
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
