"""Record ``karpy simulate --output json`` for every scenario in ``examples/`` and compare two records
byte for byte: a refactoring that must not change behaviour runs ``record`` before and after and then
``compare``. Usage::

    python scripts/compare_outputs.py record /tmp/before [--until 20m --rerun FILE ...]
    python scripts/compare_outputs.py record /tmp/after  [--until 20m --rerun FILE ...]
    python scripts/compare_outputs.py compare /tmp/before /tmp/after

``record`` runs each example with its own ``spec.until`` and, for each file given after ``--rerun``,
once more with that duration (``NAME.until-20m.json``); it also keeps the exit code and stderr of each
run (``NAME.rc``, ``NAME.err``), since a scenario that fails must fail the same way. ``compare`` lists
every file missing on one side or differing, with the first differing line, and exits 1 if any does.
Runs use the ``karpy`` on ``PATH`` under the current ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _run(scenario: pathlib.Path, out: pathlib.Path, name: str, extra: list[str]) -> None:
    cmd = ["karpy", "simulate", str(scenario), "--output", "json", *extra]
    done = subprocess.run(cmd, capture_output=True, check=False)
    (out / f"{name}.json").write_bytes(done.stdout)
    (out / f"{name}.err").write_bytes(done.stderr)
    (out / f"{name}.rc").write_text(f"{done.returncode}\n")
    print(f"{name}: exit {done.returncode}, {len(done.stdout)} bytes", flush=True)


def record(out: pathlib.Path, until: str | None, with_until: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for scenario in sorted(EXAMPLES.glob("*.yaml")):
        _run(scenario, out, scenario.stem, [])
    for name in with_until:
        scenario = EXAMPLES / name
        if until is None:
            raise SystemExit("--rerun needs a duration: --until 20m --rerun FILE ...")
        _run(scenario, out, f"{scenario.stem}.until-{until}", ["--until", until])


def _first_difference(a: bytes, b: bytes) -> str:
    for number, (line_a, line_b) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), start=1):
        if line_a != line_b:
            return f"line {number}: {line_a[:200]!r} != {line_b[:200]!r}"
    return f"one is a prefix of the other ({len(a)} vs {len(b)} bytes)"


def compare(before: pathlib.Path, after: pathlib.Path) -> int:
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    differing = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"{name}: only in {before if a.exists() else after}")
            differing += 1
            continue
        left, right = a.read_bytes(), b.read_bytes()
        if left != right:
            print(f"{name}: differs, {_first_difference(left, right)}")
            differing += 1
    print(f"{len(names)} files compared, {differing} differ")
    return 1 if differing else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run every example into DIR")
    rec.add_argument("dir", type=pathlib.Path)
    rec.add_argument("--until", help="the duration of the --rerun runs")
    rec.add_argument("--rerun", nargs="+", default=[], metavar="FILE", help="examples run again with --until")
    cmp_ = sub.add_parser("compare", help="compare two recorded DIRs byte for byte")
    cmp_.add_argument("before", type=pathlib.Path)
    cmp_.add_argument("after", type=pathlib.Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.dir, args.until, args.rerun)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
