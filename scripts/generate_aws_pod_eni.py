"""Generate karpy's branch-ENI table (src/karpy/cloudprovider/aws/data/pod-eni.json).

``vpc.amazonaws.com/pod-eni`` (security groups for pods) is the number of branch ENIs the VPC
resource controller gives a trunking-compatible instance type. EC2's DescribeInstanceTypes does not
publish it; the VPC resource controller and Karpenter's AWS provider carry it in a generated VPC
limits table (Go source, ``"<type>": {... IsTrunkingCompatible: true, BranchInterface: N, ...}``).
This script reads such a file and writes ``{"source": ..., "branch_enis": {type: N}}`` for the
trunking-compatible types, one per line, sorted, so reruns on the same input give the same file.

    python scripts/generate_aws_pod_eni.py VPC_LIMITS_GO [--output PATH]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re

DEFAULT_OUTPUT = (pathlib.Path(__file__).resolve().parent.parent / "src" / "karpy" / "cloudprovider" / "aws"
                  / "data" / "pod-eni.json")
_ENTRY = re.compile(r'^\t"(?P<name>[a-z0-9\-]+\.[a-z0-9\-]+)": \{(?P<body>.*?)^\t\},', re.M | re.S)
_FIELD = re.compile(r"^\s*(IsTrunkingCompatible|BranchInterface):\s*(\w+),", re.M)


def parse(text: str) -> dict[str, int]:
    """Type -> branch ENIs of every trunking-compatible type in the Go source ``text``."""
    out: dict[str, int] = {}
    for m in _ENTRY.finditer(text):
        fields = dict(_FIELD.findall(m.group("body")))
        if fields.get("IsTrunkingCompatible") == "true" and int(fields.get("BranchInterface", "0")) > 0:
            out[m.group("name")] = int(fields["BranchInterface"])
    return out


def render(branch: dict[str, int], source: str) -> str:
    lines = ["{", f'"source": {json.dumps(source)},', '"branch_enis": {']
    lines.append(",\n".join(f"{json.dumps(k)}: {v}" for k, v in sorted(branch.items())))
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("vpc_limits", type=pathlib.Path)
    parser.add_argument("--output", type=pathlib.Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    text = args.vpc_limits.read_text(encoding="utf-8")
    stamp = re.search(r"generated at (\S+)", text)
    source = ("branch ENIs of trunking-compatible types from the VPC limits table of the VPC resource "
              f"controller / Karpenter's AWS provider (generated {stamp.group(1) if stamp else 'unknown'})")
    branch = parse(text)
    args.output.write_text(render(branch, source), encoding="utf-8")
    print(f"wrote {len(branch)} trunking-compatible types to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
