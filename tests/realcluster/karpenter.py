"""Karpenter's own artefacts for the real-cluster tests: its Go module source (CRDs, the KWOK catalog)
and its KWOK provider binary (``karpenter-kwok``, built by scripts/realcluster/build.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support import realcluster

VERSION = "v1.14.3"
"""The Karpenter module build.sh builds (keep equal to its KARPENTER_VERSION)."""


def module_dir() -> Path | None:
    """``$GOMODCACHE/sigs.k8s.io/karpenter@VERSION`` when the module is downloaded, else None."""
    cache = os.environ.get("GOMODCACHE")
    if not cache and shutil.which("go"):
        proc = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=False, timeout=30)
        cache = proc.stdout.strip() if proc.returncode == 0 else None
    if not cache:
        cache = str(Path.home() / "go" / "pkg" / "mod")
    path = Path(cache) / "sigs.k8s.io" / f"karpenter@{VERSION}"
    return path if path.is_dir() else None


def require_module() -> Path:
    path = module_dir()
    if path is None:
        pytest.skip(f"Karpenter's Go module sigs.k8s.io/karpenter@{VERSION} is not in the module cache "
                    "(scripts/realcluster/build.sh downloads it)")
    return path


def crd_files(module: Path) -> list[Path]:
    """Karpenter's CRDs for its KWOK provider: NodePool, NodeClaim, NodeOverlay, CapacityBuffer, KWOKNodeClass."""
    return sorted((module / "kwok" / "charts" / "crds").glob("*.yaml")) + sorted(
        (module / "kwok" / "apis" / "crds").glob("*.yaml"))


def binary() -> Path:
    path = realcluster.bin_dir() / "karpenter-kwok"
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built (scripts/realcluster/build.sh karpenter)")
    return path
