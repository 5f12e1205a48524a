"""Karpenter's own artefacts for the real-cluster tests: its Go module source (CRDs, the KWOK catalog)
and its KWOK provider binary (``karpenter-kwok``, built by scripts/realcluster/build.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from karpy.api.schemas import crd
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


def apply_crds(cluster: realcluster.RealCluster, module: Path) -> list[str]:
    """Karpenter's CRDs applied server-side (as its karpenter-crd chart would install them); their names."""
    names = []
    for path in crd_files(module):
        cluster.apply(path.read_text())
        names.append(f"crd/{yaml.safe_load(path.read_text())['metadata']['name']}")
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    return names


def replaced_by_karpys(cluster: realcluster.RealCluster, module: Path) -> None:
    """Karpenter's CRDs first, karpy's over them: the state of a cluster that moved from Karpenter to karpy
    (NodeOverlay stays Karpenter's: karpy has none; CapacityBuffer is karpy's too)."""
    apply_crds(cluster, module)
    cluster.apply(crds_text())
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *KARPY_CRDS)


def crds_text() -> str:
    """karpy's CRDs as `karpy crds` prints them."""
    return "".join(crd.render(crd.definition(k)) for k in crd.KINDS)


KARPY_CRDS = ("crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh", "crd/kwoknodeclasses.karpenter.kwok.sh",
              "crd/ec2nodeclasses.karpenter.k8s.aws", "crd/aksnodeclasses.karpenter.azure.com",
              "crd/capacitybuffers.autoscaling.x-k8s.io")
