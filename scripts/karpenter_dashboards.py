"""Generate ``tests/fixtures/karpenter/dashboards-v1.14.json``: every PromQL query of Karpenter's published
Grafana dashboards (capacity and performance), without the rest of the dashboards.

The dashboards ship in the ``aws/karpenter-provider-aws`` repository, under
``website/content/en/v1.14/getting-started/getting-started-with-karpenter/``; with a clone::

    python scripts/karpenter_dashboards.py REPO_DIR COMMIT > tests/fixtures/karpenter/dashboards-v1.14.json

Each query keeps its panel title and the JSON key it came from (``expr`` of a panel target, ``query``
or ``definition`` of a template variable). Data-source variables (``query: prometheus``) and label lists
of ad-hoc filters are left out: they are not PromQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

DIR = "website/content/en/v1.14/getting-started/getting-started-with-karpenter"
DASHBOARDS = ("karpenter-capacity-dashboard.json", "karpenter-performance-dashboard.json")


def queries(doc: Any, title: str = "") -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    if isinstance(doc, dict):
        here = str(doc.get("title") or title)
        kind = doc.get("type")
        for key in ("expr", "query", "definition"):
            value = doc.get(key)
            if isinstance(value, dict):
                value = value.get("query")
            if not isinstance(value, str) or not value.strip():
                continue
            if kind in ("datasource", "adhoc") or (key == "query" and "(" not in value):
                continue  # a data source name or a list of label names, not PromQL
            out.append({"panel": here, "key": key, "query": value})
        for value in doc.values():
            out.extend(queries(value, here))
    elif isinstance(doc, list):
        for value in doc:
            out.extend(queries(value, title))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    repo, commit = argv[1], argv[2]
    result: dict[str, Any] = {"generated_by": "scripts/karpenter_dashboards.py",
                              "repository": "github.com/aws/karpenter-provider-aws", "commit": commit,
                              "dashboards": {}}
    for name in DASHBOARDS:
        text = subprocess.run(["git", "-C", repo, "show", f"{commit}:{DIR}/{name}"], check=True,
                              capture_output=True, text=True).stdout
        seen: set[tuple[str, str]] = set()
        rows = []
        for q in queries(json.loads(text)):
            if (q["panel"], q["query"]) not in seen:
                seen.add((q["panel"], q["query"]))
                rows.append(q)
        result["dashboards"][f"{DIR}/{name}"] = rows
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
