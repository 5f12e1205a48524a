"""Generate ``tests/fixtures/karpenter/settings-v1.14.3.json``: every operator setting Karpenter reads
(environment variable, flag, Go type, default), from the ``options.go`` of Karpenter's core and AWS
provider modules at a pinned version (download them as ``scripts/karpenter_metrics.py`` says)::

    python scripts/karpenter_settings.py CORE_DIR AWS_DIR > tests/fixtures/karpenter/settings-v1.14.3.json

Karpenter declares each with ``fs.XxxVar(&o.Field, "flag", env.WithDefaultXxx("ENV", default), usage)``
or ``fs.BoolVarWithEnv(&o.Field, "flag", "ENV", default, usage)``; the default is kept as Go source text.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

_WITH_DEFAULT = re.compile(
    r'fs\.(\w+)Var\(&o\.[\w.]+,\s*"([\w-]+)",\s*(?:env|utils)\.WithDefault(\w+)\("(\w+)",\s*(.+?)\),\s*"', re.S)
_WITH_ENV = re.compile(r'fs\.BoolVarWithEnv\(&o\.\w+,\s*"([\w-]+)",\s*"(\w+)",\s*(\w+),')


def read(options_go: pathlib.Path, module: str) -> list[dict[str, str]]:
    text = options_go.read_text(encoding="utf-8")
    out = []
    for m in _WITH_DEFAULT.finditer(text):
        out.append({"env": m.group(4), "flag": "--" + m.group(2), "type": m.group(3).lower(),
                    "default": m.group(5).strip(), "module": module})
    for m in _WITH_ENV.finditer(text):
        out.append({"env": m.group(2), "flag": "--" + m.group(1), "type": "bool", "default": m.group(3),
                    "module": module})
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    core, aws = pathlib.Path(argv[1]), pathlib.Path(argv[2])
    rows = read(core / "pkg/operator/options/options.go", "sigs.k8s.io/karpenter") + \
        read(aws / "pkg/operator/options/options.go", "github.com/aws/karpenter-provider-aws")
    gates = re.search(r'"FEATURE_GATES",\s*"([^"]+)"', (core / "pkg/operator/options/options.go").read_text())
    doc = {"generated_by": "scripts/karpenter_settings.py",
           "modules": {"sigs.k8s.io/karpenter": core.name.rsplit("@", 1)[-1],
                       "github.com/aws/karpenter-provider-aws": aws.name.rsplit("@", 1)[-1]},
           "feature_gates": dict(g.split("=") for g in gates.group(1).split(",")) if gates else {},
           "settings": sorted(rows, key=lambda r: r["env"])}
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
