"""Write the kustomize base and per-cloud directories (``deploy/kustomize/{base,azure,kwok}``) from the
Helm chart and the CRD schemas.

    python scripts/generate_kustomize.py            # (re)write the base
    python scripts/generate_kustomize.py --check    # exit 1 and name the files that differ

``tests/integration/install/test_kustomize.py`` fails when the base differs from what this produces.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from karpy.install import kustomize

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "karpy"
KUSTOMIZE = ROOT / "deploy" / "kustomize"
GENERATED = ("base", *kustomize.CLOUDS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the kustomize directories from charts/karpy.")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a file differs")
    args = parser.parse_args(argv)
    want = kustomize.files(CHART)
    stale = [n for n, text in want.items()
             if not (KUSTOMIZE / n).exists() or (KUSTOMIZE / n).read_text() != text]
    extra = sorted(str(p.relative_to(KUSTOMIZE)) for d in GENERATED if (KUSTOMIZE / d).exists()
                   for p in (KUSTOMIZE / d).rglob("*.yaml") if str(p.relative_to(KUSTOMIZE)) not in want)
    if args.check:
        for name in stale:
            print(f"{KUSTOMIZE / name} differs from charts/karpy: run python scripts/generate_kustomize.py")
        for name in extra:
            print(f"{KUSTOMIZE / name} is not generated: remove it")
        return 1 if stale or extra else 0
    for name, text in want.items():
        (KUSTOMIZE / name).parent.mkdir(parents=True, exist_ok=True)
        (KUSTOMIZE / name).write_text(text)
    print(f"wrote {len(want)} files under {KUSTOMIZE} ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
