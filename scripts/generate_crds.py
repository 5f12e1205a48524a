"""Write karpy's CRDs (``charts/karpy/crds/*.yaml`` and the CRD chart's ``charts/karpy-crd/templates/*.yaml``,
the same text) from the schemas in ``karpy.api.schemas``.

    python scripts/generate_crds.py            # (re)write the files
    python scripts/generate_crds.py --check    # exit 1 and name the files that differ

The kustomize base keeps a copy under ``deploy/kustomize/base/crds`` (kustomize reads no file outside
a base's directory), written by ``scripts/generate_kustomize.py``. ``tests/unit/api/test_crd_schemas.py``
fails when the files differ from what this produces.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from karpy.api.schemas import crd

ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = ROOT / "charts" / "karpy" / "crds"
CRD_CHART_DIR = ROOT / "charts" / "karpy-crd" / "templates"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write karpy's CRDs from karpy.api.schemas.")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a file differs")
    parser.add_argument("--out", type=Path, action="append",
                        help=f"directory to write (repeatable; default: {CRD_DIR} and {CRD_CHART_DIR})")
    args = parser.parse_args(argv)
    code = 0
    for out in args.out or [CRD_DIR, CRD_CHART_DIR]:
        code |= _write(out, args.check)
    return code


def _write(out: Path, check: bool) -> int:
    want = crd.files()
    stale = [name for name, text in want.items() if not (out / name).exists() or (out / name).read_text() != text]
    extra = sorted(p.name for p in out.glob("*.yaml") if p.name not in want) if out.exists() else []
    if check:
        for name in stale:
            print(f"{out / name} differs from karpy.api.schemas: run python scripts/generate_crds.py")
        for name in extra:
            print(f"{out / name} is not generated: remove it")
        return 1 if stale or extra else 0
    out.mkdir(parents=True, exist_ok=True)
    for name, text in want.items():
        (out / name).write_text(text)
    print(f"wrote {len(want)} CRDs to {out} ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
