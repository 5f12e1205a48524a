"""Generate ``tests/fixtures/karpenter/metrics-v<version>.json``: every ``karpenter_*`` metric Karpenter
exports (name, Prometheus type, label names), read from Karpenter's Go source at a pinned version.

The source is the Go module download (nothing of Karpenter's code is kept, only this list)::

    cd $(mktemp -d) && go mod init x
    GOTOOLCHAIN=go1.27.3 GOFLAGS=-mod=mod go mod download -json sigs.k8s.io/karpenter@v1.14.3
    GOTOOLCHAIN=go1.27.3 GOFLAGS=-mod=mod go mod download -json github.com/aws/karpenter-provider-aws@v1.14.3
    python scripts/karpenter_metrics.py CORE_DIR AWS_DIR > tests/fixtures/karpenter/metrics-v1.14.3.json

(each ``"Dir"`` the download prints). Karpenter declares its metrics with operatorpkg's
``opmetrics.NewPrometheus{Counter,Gauge,Histogram,Summary}(registry, prometheus.XxxOpts{Namespace,
Subsystem, Name, ...}, labels)``; this script finds those calls, resolves the string constants they
name (``metrics.Namespace``, ``metrics.NodePoolLabel``...) through each file's imports, and the label
lists built by a helper function in the same package. Label lists derived at run time from the
well-known node labels (``karpenter_nodes_*``) are expanded from ``v1.WellKnownLabels`` of the core
module (the AWS provider adds its own at start-up; those are not listed) and flagged ``"dynamic"``.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
from typing import Any

CORE_MODULE = "sigs.k8s.io/karpenter"
AWS_MODULE = "github.com/aws/karpenter-provider-aws"
_CALL = re.compile(r"opmetrics\.NewPrometheus(Counter|Gauge|Histogram|Summary)\(")
_CONST = re.compile(r'^\s*(\w+)\s*(?:\w+\s*)?=\s*"([^"]*)"', re.M)
_IMPORT = re.compile(r'^\s*(?:(\w+)\s+)?"([^"]+)"\s*$', re.M)
_OPT = re.compile(r"\b(Namespace|Subsystem|Name)\s*:\s*([\w.]+|\"[^\"]*\")")
_WELL_KNOWN_KEYS = {  # Kubernetes' and Karpenter's label key constants named in v1.WellKnownLabels
    "NodePoolLabelKey": "karpenter.sh/nodepool", "CapacityTypeLabelKey": "karpenter.sh/capacity-type",
    "v1.LabelTopologyZone": "topology.kubernetes.io/zone", "v1.LabelTopologyRegion": "topology.kubernetes.io/region",
    "v1.LabelInstanceTypeStable": "node.kubernetes.io/instance-type", "v1.LabelArchStable": "kubernetes.io/arch",
    "v1.LabelOSStable": "kubernetes.io/os", "v1.LabelWindowsBuild": "node.kubernetes.io/windows-build",
}


def _balanced(text: str, start: int, open_: str = "(", close: str = ")") -> str:
    """The text from ``start`` (just after an opening bracket) to its matching closing bracket."""
    depth, i = 1, start
    while depth:
        c = text[i]
        if c == '"':
            i = text.index('"', i + 1)
        elif c == "`":
            i = text.index("`", i + 1)
        elif c == open_:
            depth += 1
        elif c == close:
            depth -= 1
        i += 1
    return text[start:i - 1]


def _split_args(text: str) -> list[str]:
    out, depth, cur, in_str = [], 0, [], ""
    for c in text:
        if in_str:
            cur.append(c)
            if c == in_str:
                in_str = ""
            continue
        if c in "\"`":
            in_str = c
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _read(path: pathlib.Path) -> str:
    """Go source without its comments (a line comment is cut where no string is open)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cut = re.match(r'^((?:[^"`/]|"(?:[^"\\]|\\.)*"|`[^`]*`|/(?!/))*)//', line)
        out.append(cut.group(1) if cut else line)
    text = "\n".join(out)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


class Module:
    """One Go module's packages: string constants and source text by package directory."""

    def __init__(self, path: str, root: pathlib.Path) -> None:
        self.path, self.root = path, root
        self.consts: dict[str, dict[str, str]] = {}
        self.files: dict[str, list[pathlib.Path]] = {}
        for f in sorted(root.glob("pkg/**/*.go")):
            if f.name.endswith("_test.go") or "/test/" in str(f):
                continue
            pkg = str(f.parent.relative_to(root))
            self.files.setdefault(pkg, []).append(f)
            text = _read(f)
            consts = self.consts.setdefault(pkg, {})
            for block in re.finditer(r"\bconst\s*\(", text):
                for m in _CONST.finditer(_balanced(text, block.end())):
                    consts[m.group(1)] = m.group(2)
            for m in re.finditer(r'^const\s+(\w+)\s*(?:\w+\s*)?=\s*"([^"]*)"', text, re.M):
                consts[m.group(1)] = m.group(2)


def _imports(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for block in re.finditer(r"\bimport\s*\(", text):
        for m in _IMPORT.finditer(_balanced(text, block.end())):
            out[m.group(1) or m.group(2).rsplit("/", 1)[-1]] = m.group(2)
    return out


def _resolve(expr: str, pkg: str, mod: Module, imports: dict[str, str], mods: list[Module]) -> str:
    expr = expr.strip()
    if expr.startswith('"'):
        return expr.strip('"')
    if "." in expr:
        alias, name = expr.split(".", 1)
        path = imports.get(alias, "")
        for m in mods:
            if path.startswith(m.path + "/"):
                value = m.consts.get(path[len(m.path) + 1:], {}).get(name)
                if value is not None:
                    return value
        raise LookupError(f"cannot resolve {expr} (import {path or alias})")
    value = mod.consts.get(pkg, {}).get(expr)
    if value is None:
        raise LookupError(f"cannot resolve constant {expr} in {pkg}")
    return value


def _label_list(expr: str, pkg: str, mod: Module, imports: dict[str, str], mods: list[Module],
                sources: str) -> tuple[list[str], bool]:
    expr = expr.strip()
    if expr.startswith("[]string{"):
        inner = _balanced(expr, len("[]string{"), "{", "}")
        return [_resolve(a, pkg, mod, imports, mods) for a in _split_args(inner)], False
    if expr.startswith("append("):
        args = _split_args(_balanced(expr, len("append(")))
        first, dynamic = _label_list(args[0], pkg, mod, imports, mods, sources)
        return first + [_resolve(a, pkg, mod, imports, mods) for a in args[1:]], dynamic
    if "getWellKnownLabels" in expr:
        return sorted(_well_known(mods)), True
    m = re.fullmatch(r"(\w+)\(\)", expr)
    if m:  # a helper of the same package returning the list
        fn = re.search(r"func " + m.group(1) + r"\(\)\s*\[\]string\s*\{", sources)
        if fn is None:
            raise LookupError(f"cannot find label helper {expr} in {pkg}")
        body = _balanced(sources, fn.end(), "{", "}")
        ret = body[body.index("return") + len("return"):].strip()
        return _label_list(ret, pkg, mod, imports, mods, sources)
    raise LookupError(f"cannot read label list {expr!r} in {pkg}")


def _well_known(mods: list[Module]) -> list[str]:
    """``v1.WellKnownLabels`` of the core module as snake_case label names (Karpenter's conversion)."""
    core = next(m for m in mods if m.path == CORE_MODULE)
    text = (core.root / "pkg/apis/v1/labels.go").read_text(encoding="utf-8")
    start = text.index("WellKnownLabels = sets.New(") + len("WellKnownLabels = sets.New(")
    out = []
    for key in _split_args(_balanced(text, start)):
        full = _WELL_KNOWN_KEYS.get(key)
        if full is None:
            raise LookupError(f"unknown well-known label constant {key}")
        out.append(full.split("/", 1)[1].lower().replace("-", "_"))
    return out


def extract(mods: list[Module]) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for mod in mods:
        for pkg, files in mod.files.items():
            sources = "\n".join(_read(f) for f in files)
            for f in files:
                text = _read(f)
                imports = _imports(text)
                for call in _CALL.finditer(text):
                    args = _split_args(_balanced(text, call.end()))
                    opts = {k: _resolve(v, pkg, mod, imports, mods) for k, v in _OPT.findall(args[1])}
                    name = "_".join(p for p in (opts.get("Namespace"), opts.get("Subsystem"), opts["Name"]) if p)
                    labels, dynamic = _label_list(args[2], pkg, mod, imports, mods, sources)
                    entry = {"name": name, "type": call.group(1).lower(), "labels": labels,
                             "source": f"{mod.path}/{f.relative_to(mod.root)}"}
                    if dynamic:
                        entry["dynamic_labels"] = True
                    found[name] = entry
    return [found[k] for k in sorted(found) if k.startswith("karpenter_")]


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    mods = [Module(CORE_MODULE, pathlib.Path(argv[1]))]
    if len(argv) == 3:
        mods.append(Module(AWS_MODULE, pathlib.Path(argv[2])))
    versions = {m.path: m.root.name.rsplit("@", 1)[-1] for m in mods}
    doc = {"generated_by": "scripts/karpenter_metrics.py", "modules": versions, "metrics": extract(mods)}
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
