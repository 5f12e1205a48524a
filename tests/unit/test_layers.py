"""karpy's import graph, read from the source with ``ast``: no two modules import each other (directly or
round a longer cycle), no module imports a module of a higher layer, and the layers are the ones
docs/architecture.md's table lists, with the same "may import" column.

Every ``import`` counts: at module level, inside functions, under ``if TYPE_CHECKING``. A layer may import
its own modules, the layers its row names and, transitively, what those may import.
"""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Layer:
    name: str
    modules: tuple[str, ...]
    """Module names or package prefixes; a module belongs to the layer naming the longest match."""
    may_import: tuple[str, ...]
    """Layers below this one (earlier in :data:`LAYERS`)."""


_DECISIONS = ("balanced", "budgets", "candidates", "consolidation", "drift", "emptiness", "milp", "milp_patterns",
              "prefilter",
              "simulation", "snapshot", "static_drift", "wave_config")
_FACTORIES = ("aws", "azure", "kwok")

LAYERS: tuple[Layer, ...] = (
    # bottom to top, as the table in docs/architecture.md
    Layer("clock", ("karpy.clock",), ()),
    Layer("api", ("karpy.api",), ("clock",)),
    Layer("scheduling", ("karpy.scheduling",), ("api",)),
    Layer("kube", ("karpy.kube",), ("clock",)),
    Layer("cloudprovider.contract", ("karpy.cloudprovider.interface", "karpy.cloudprovider.errors",
                                     "karpy.cloudprovider.instancetype"), ("api",)),
    Layer("cloudprovider", ("karpy.cloudprovider",), ("cloudprovider.contract", "scheduling", "kube")),
    Layer("settings", ("karpy.settings", "karpy.settings_sources"), ("cloudprovider",)),
    Layer("kube.adapter", ("karpy.kube.adapter", "karpy.kube.connect"), ("kube", "settings")),
    Layer("cloudprovider.factories", tuple(f"karpy.cloudprovider.{c}.factory" for c in _FACTORIES),
          ("cloudprovider", "settings")),
    Layer("observability", ("karpy.observability",), ("api", "kube")),
    Layer("provisioning", ("karpy.provisioning",), ("scheduling", "cloudprovider.contract")),
    Layer("disruption.decisions", tuple(f"karpy.disruption.{m}" for m in _DECISIONS), ("provisioning", "settings")),
    Layer("controllers", ("karpy.controllers",),
          ("provisioning", "disruption.decisions", "cloudprovider", "observability", "settings")),
    Layer("disruption.controller", ("karpy.disruption",), ("controllers",)),
    Layer("operator", ("karpy.operator",), ("disruption.controller",)),
    Layer("migration", ("karpy.migration",), ("cloudprovider",)),
    Layer("install", ("karpy.install",), ("api",)),
    Layer("simulator", ("karpy.simulator",), ("operator", "kube.adapter", "cloudprovider.factories", "migration")),
    Layer("controller_run", ("karpy.controller_run", "karpy.controller_cli"),
          ("operator", "kube.adapter", "cloudprovider.factories")),
    Layer("design", ("karpy.design",), ("simulator",)),
    Layer("cli", ("karpy.cli",), ("simulator", "design", "controller_run", "migration", "install")),
)
PENDING_CYCLES: dict[tuple[str, ...], str] = {}
"""Cycles known and being removed on another branch; every other cycle fails."""
ROOT_PACKAGE = "karpy"
"""``karpy/__init__.py`` (the version): any layer may import it."""


# ------------------------------------------------------------------------------------------ the graph


def modules_under(src: pathlib.Path, package: str) -> dict[str, pathlib.Path]:
    """Every module of ``package`` under ``src``, by dotted name (a package by its ``__init__``)."""
    out: dict[str, pathlib.Path] = {}
    for path in sorted((src / package.replace(".", "/")).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> Iterable[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        prefix = ".".join([*base, node.module] if node.module else base)
    else:
        prefix = node.module or ""
    yield prefix
    yield from (f"{prefix}.{alias.name}" for alias in node.names)


def import_graph(src: pathlib.Path, package: str) -> dict[str, set[str]]:
    """``module -> the modules of package it imports``; ``from p import x`` counts as ``p.x`` when that is a
    module, else as ``p``."""
    modules = modules_under(src, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets = list(_imported(name, path.name == "__init__.py", node))
            if isinstance(node, ast.ImportFrom):
                submodules = [t for t in targets[1:] if t in modules]
                targets = submodules if len(submodules) == len(targets) - 1 else [targets[0], *submodules]
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_of(module: str, layers: Iterable[Layer] = LAYERS) -> str | None:
    best: tuple[int, str] | None = None
    for layer in layers:
        for prefix in layer.modules:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), layer.name)
    return best[1] if best else None


def allowed(layers: tuple[Layer, ...] = LAYERS) -> dict[str, set[str]]:
    """Each layer -> itself and every layer it may import, transitively."""
    by_name = {layer.name: layer for layer in layers}
    out: dict[str, set[str]] = {}
    for layer in layers:  # bottom to top: what a layer names is already closed
        reach = {layer.name}
        for lower in layer.may_import:
            reach |= out[by_name[lower].name]
        out[layer.name] = reach
    return out


def climbs(graph: Mapping[str, Iterable[str]], layers: tuple[Layer, ...] = LAYERS) -> list[str]:
    """Every import from a module to one of a layer its own may not import, as ``a (layer) -> b (layer)``."""
    reach = allowed(layers)
    out = []
    for module in sorted(graph):
        src_layer = layer_of(module, layers)
        for dep in sorted(graph[module]):
            dst_layer = layer_of(dep, layers)
            if src_layer is None or dst_layer is None or dep == ROOT_PACKAGE:
                continue
            if dst_layer not in reach[src_layer]:
                out.append(f"{module} ({src_layer}) -> {dep} ({dst_layer})")
    return out


GRAPH = import_graph(SRC, "karpy")


# ------------------------------------------------------------------------------------------ karpy


def test_no_two_modules_of_karpy_import_each_other_directly_or_round_a_cycle() -> None:
    assert [c for c in cycles(GRAPH) if tuple(c) not in PENDING_CYCLES] == []


def test_no_module_of_karpy_imports_a_module_of_a_higher_layer() -> None:
    assert climbs(GRAPH) == []


def test_every_module_of_karpy_belongs_to_a_layer() -> None:
    assert [m for m in sorted(GRAPH) if m != ROOT_PACKAGE and layer_of(m) is None] == []


def test_every_layer_imports_only_layers_listed_before_it() -> None:
    seen: set[str] = set()
    for layer in LAYERS:
        assert set(layer.may_import) <= seen, f"{layer.name} may import a layer not below it"
        seen.add(layer.name)


def test_a_package_init_imports_nothing_of_karpy_since_every_import_of_a_submodule_runs_it() -> None:
    paths = modules_under(SRC, "karpy")
    inits = {m: deps for m, deps in GRAPH.items() if paths[m].name == "__init__.py"}
    assert {m: sorted(deps) for m, deps in inits.items() if deps} == {}


def _doc_table() -> list[tuple[str, set[str]]]:
    text = DOC.read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    names = {layer.name for layer in LAYERS}
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        rows.append((name, {t for t in re.findall(r"`([^`]+)`", cells[2]) if t in names}))
    return rows


def test_the_layers_are_the_rows_of_the_architecture_table_in_order_with_the_same_may_import_column() -> None:
    assert _doc_table() == [(layer.name, set(layer.may_import)) for layer in LAYERS]


# ------------------------------------------------------------------------------------------ the checker


def _tree(tmp_path: pathlib.Path, files: Mapping[str, str]) -> pathlib.Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_checker_finds_a_cycle_through_a_relative_import_and_a_function_body(tmp_path: pathlib.Path) -> None:
    src = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "def f():\n    from pkg.c import thing\n",
        "pkg/c.py": "from pkg import a\n",
        "pkg/d.py": "import pkg.a\n",
    })
    graph = import_graph(src, "pkg")
    assert graph["pkg.d"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_the_checker_finds_an_import_that_climbs_a_layer_even_under_type_checking(tmp_path: pathlib.Path) -> None:
    src = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import y\n",
        "pkg/high/__init__.py": "",
        "pkg/high/y.py": "from pkg.low import x\n",
    })
    layers = (Layer("low", ("pkg.low",), ()), Layer("high", ("pkg.high",), ("low",)))
    assert climbs(import_graph(src, "pkg"), layers) == ["pkg.low.x (low) -> pkg.high.y (high)"]
