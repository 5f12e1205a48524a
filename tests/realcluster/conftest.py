"""Fixtures of the real-cluster suite: upstream kube-apiserver, etcd, kube-controller-manager,
kube-scheduler and KWOK (built by scripts/realcluster/build.sh), karpy's CRDs and chart installed with
the real kubectl and helm, and `karpy controller` running outside the cluster as the chart's
ServiceAccount.

The suite runs when the binaries are built (CI builds them) or KARPY_REALCLUSTER=1 asks for a build;
otherwise it is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import controller_process as cp
from realcluster import workloads
from support import realcluster

NAMESPACE = "karpy"
CLUSTER_NAME = "realcluster"
ACCOUNT = "karpy"
REPO = realcluster.REPO


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realcluster)


@pytest.fixture(scope="session")
def upstream_bin() -> Path:
    if realcluster.missing_binaries():
        if os.environ.get("KARPY_REALCLUSTER") != "1":
            pytest.skip(f"upstream binaries not built ({', '.join(realcluster.missing_binaries())}); "
                        "run scripts/realcluster/build.sh or set KARPY_REALCLUSTER=1")
        realcluster.build()
    return realcluster.bin_dir()


@pytest.fixture(scope="session")
def real(upstream_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[realcluster.RealCluster]:
    workdir = tmp_path_factory.mktemp("realcluster")
    cluster = realcluster.start("karpy-rc", workdir, bins=upstream_bin)
    try:
        yield cluster
    finally:
        cluster.stop()


def karpy_cli(*args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([sys.executable, "-m", "karpy.cli", *args], input=stdin, capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="session")
def installed(real: realcluster.RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CRDs applied server-side, the chart installed by helm (RBAC, ServiceAccount, Lease Role, PDB,
    Service), and a kubeconfig that authenticates as the chart's ServiceAccount."""
    real.apply(karpy_cli("crds"))
    real.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/nodepools.karpenter.sh",
                 "crd/nodeclaims.karpenter.sh", "crd/kwoknodeclasses.karpenter.kwok.sh")
    chart = str(REPO / "charts" / "karpy")
    values = ["--set", "cloudProvider=kwok", "--set", f"settings.clusterName={CLUSTER_NAME}",
              "--set", "replicas=0"]
    real.helm("lint", chart, *values)
    real.helm("install", "karpy", chart, "--namespace", NAMESPACE, "--create-namespace", "--skip-crds",
              *values, "--wait", "--timeout", "120s")
    path = tmp_path_factory.mktemp("sa") / "karpy.kubeconfig"
    return realcluster.service_account_kubeconfig(real, NAMESPACE, ACCOUNT, path)


class Scope:
    """What one test created: its namespaces and NodePools are deleted (and their nodes drained by the
    still-running controller) when the test ends, so the next test starts from an empty cluster."""

    def __init__(self, real: realcluster.RealCluster) -> None:
        self.real = real
        self.namespaces: list[str] = []
        self.nodepools: list[str] = []

    def namespace(self, name: str) -> str:
        self.real.kubectl("create", "namespace", name)
        self.namespaces.append(name)
        return name

    def nodepool(self, obj: dict[str, Any]) -> None:
        self.real.apply([obj])
        self.nodepools.append(str(obj["metadata"]["name"]))

    def cleanup(self, timeout: float = 90.0) -> None:
        for ns in self.namespaces:
            self.real.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        for pool in self.nodepools:
            self.real.kubectl("delete", "nodepool", pool, "--wait=false", check=False)

        def gone() -> bool:
            claims = self.real.get_json("nodeclaims")["items"]
            return not [c for c in claims if c["metadata"].get("labels", {}).get("karpenter.sh/nodepool")
                        in self.nodepools]

        wait_until(gone, timeout, f"the NodeClaims of {self.nodepools} to go")


def start_controller(installed: Path, log: Path, *extra: str, env: dict[str, str] | None = None) -> cp.Controller:
    return cp.Controller(["--cloud-provider", "kwok", "--kubeconfig", str(installed), "--cluster-name", CLUSTER_NAME,
                          "--leader-election-namespace", NAMESPACE, "--batch-idle-duration", "1s",
                          "--batch-max-duration", "3s", "--log-format", "json", *extra], log, env=env)


@pytest.fixture
def scope(real: realcluster.RealCluster, controller: cp.Controller) -> Iterator[Scope]:
    """The test's namespaces and NodePools, cleaned up while ``controller`` still runs."""
    s = Scope(real)
    yield s
    s.cleanup()


@contextlib.contextmanager
def running_controller(real: realcluster.RealCluster, installed: Path, log: Path, *, env: dict[str, str] | None = None,
                       crd: str | None = None) -> Iterator[cp.Controller]:
    """`karpy controller` (with ``env``: a feature gate, a setting) started once ``crd`` (when given) is
    Established and the KWOKNodeClass applied, ready when it answers ``/readyz``; stopped on exit."""
    if crd is not None:
        real.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd}")
    real.apply([workloads.node_class()])
    c = start_controller(installed, log, env=env)
    try:
        c.wait_for("/readyz", timeout=60)
        yield c
    finally:
        c.terminate()


@pytest.fixture
def controller(real: realcluster.RealCluster, installed: Path, tmp_path: Path) -> Iterator[cp.Controller]:
    """One `karpy controller` as the chart's ServiceAccount; it outlives the test's ``scope`` cleanup."""
    with running_controller(real, installed, tmp_path / "karpy.log") as c:
        yield c


def wait_until(predicate: Callable[[], Any], timeout: float, what: str | Callable[[], str],
               interval: float = 0.5) -> Any:
    """Poll ``predicate`` until it is truthy; ``what`` (or its value, read at the time-out) says what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what if isinstance(what, str) else what()}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def second(upstream_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[realcluster.RealCluster]:
    """A second cluster for what must not touch ``real``'s state: Karpenter's CRDs replaced by karpy's,
    Karpenter itself and karpy replicas competing for a Lease (test_chart, test_leader)."""
    workdir = tmp_path_factory.mktemp("second")
    cluster = realcluster.start("karpy-rc2", workdir, bins=upstream_bin)
    try:
        yield cluster
    finally:
        cluster.stop()
