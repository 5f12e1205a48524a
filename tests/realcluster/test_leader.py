"""Leader election on the real apiserver's Lease: two karpy replicas, exactly one leads; SIGKILL of the
leader hands over within the lease duration (+ retry period); SIGTERM releases the Lease and the other
takes over at once; karpy and Karpenter's own KWOK provider (built from its Go module) holding the same
Lease never both lead.

Runs on the ``second`` cluster (Karpenter's CRDs replaced by karpy's, see test_chart), as the cluster admin:
the Lease Role of the chart is test_chart's business; here the election itself is.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import controller_process as cp
from realcluster import karpenter
from realcluster.conftest import wait_until
from support import realcluster

NS = "rc-leader"
LEASE = "karpenter-leader-election"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 6.0, 4.0, 1.0
"""Short timings for karpy replicas of this test (Karpenter's defaults are 15 s / 10 s / 2 s)."""
SLACK = 2.0
"""Seconds of process start, API latency and this test's 0.2 s polling allowed on top of the bounds."""


@pytest.fixture(scope="module")
def cluster(second: realcluster.RealCluster) -> realcluster.RealCluster:
    karpenter.replaced_by_karpys(second, karpenter.require_module())
    if second.kubectl("get", "namespace", NS, check=False).returncode != 0:
        second.kubectl("create", "namespace", NS)
    return second


@pytest.fixture
def procs(cluster: realcluster.RealCluster) -> Iterator[list[Any]]:
    """Every karpy Controller / Karpenter Popen a test starts; all stopped (and the Lease deleted) after it."""
    started: list[Any] = []
    yield started
    for p in started:
        if isinstance(p, cp.Controller):
            p.kill()
        elif p.poll() is None:
            p.kill()
            p.wait(10)
    cluster.kubectl("delete", "lease", LEASE, "-n", NS, "--ignore-not-found")


def karpy(cluster: realcluster.RealCluster, log: Path, lease_duration: float = LEASE_DURATION,
          renew_deadline: float = RENEW_DEADLINE, retry_period: float = RETRY_PERIOD) -> cp.Controller:
    return cp.Controller(["--cloud-provider", "kwok", "--kubeconfig", str(cluster.kubeconfig), "--cluster-name", NS,
                          "--leader-election-namespace", NS, "--leader-election-id", LEASE,
                          "--lease-duration", f"{lease_duration:g}s", "--renew-deadline", f"{renew_deadline:g}s",
                          "--retry-period", f"{retry_period:g}s", "--log-format", "json"], log)


def lease(cluster: realcluster.RealCluster) -> dict[str, Any]:
    proc = cluster.kubectl("get", "lease", LEASE, "-n", NS, "-o", "json", check=False)
    if proc.returncode != 0:
        return {}
    return dict(json.loads(proc.stdout).get("spec") or {})


def holder(cluster: realcluster.RealCluster) -> str:
    return str(lease(cluster).get("holderIdentity") or "")


def holder_pid(cluster: realcluster.RealCluster) -> int | None:
    """The pid of the karpy holding the Lease (karpy's identity is ``<host>_<pid>``), else None."""
    ident = holder(cluster)
    tail = ident.rpartition("_")[2]
    return int(tail) if tail.isdigit() else None


def led(c: cp.Controller) -> bool:
    return "-> leading" in c.log()


def _wait_holder(cluster: realcluster.RealCluster, predicate: Any, timeout: float, what: str) -> float:
    """Poll the Lease every 0.2 s until ``predicate(holder)``; the seconds it took."""
    start = time.monotonic()
    wait_until(lambda: predicate(holder(cluster)), timeout, what, interval=0.2)
    return time.monotonic() - start


def test_two_replicas_one_leads_and_a_sigkill_of_the_leader_hands_over_within_the_lease_duration(
        cluster: realcluster.RealCluster, procs: list[Any], tmp_path: Path) -> None:
    a = karpy(cluster, tmp_path / "a.log")
    b = karpy(cluster, tmp_path / "b.log")
    procs += [a, b]
    _wait_holder(cluster, bool, 60, "a holder of the Lease")
    time.sleep(3 * RETRY_PERIOD)  # both have tried several times by now
    pids = {a.proc.pid: a, b.proc.pid: b}
    leader = pids[holder_pid(cluster) or -1]
    follower = b if leader is a else a
    assert led(leader) and not led(follower), "exactly one replica leads"
    for c in (a, b):
        c.wait_for("/healthz", timeout=30)

    before = holder(cluster)
    leader.proc.send_signal(signal.SIGKILL)
    took = _wait_holder(cluster, lambda h: h and h != before, LEASE_DURATION + RETRY_PERIOD + 30,
                        "the follower to take the Lease over")
    assert holder_pid(cluster) == follower.proc.pid
    assert took <= LEASE_DURATION + RETRY_PERIOD + SLACK, f"handover took {took:.1f}s"
    wait_until(lambda: led(follower), 10, "the follower's log to say it leads")


def _leader_and_follower(cluster: realcluster.RealCluster, procs: list[Any],
                         tmp_path: Path) -> tuple[cp.Controller, cp.Controller]:
    a = karpy(cluster, tmp_path / "a.log")
    procs.append(a)
    _wait_holder(cluster, lambda h: h.endswith(f"_{a.proc.pid}"), 60, "the first replica to lead")
    b = karpy(cluster, tmp_path / "b.log")
    procs.append(b)
    b.wait_for("/healthz", timeout=60)
    time.sleep(2 * RETRY_PERIOD)
    assert not led(b)
    return a, b


def test_sigterm_releases_the_lease_and_the_other_replica_takes_over_at_once(
        cluster: realcluster.RealCluster, procs: list[Any], tmp_path: Path) -> None:
    a, b = _leader_and_follower(cluster, procs, tmp_path)
    a.proc.send_signal(signal.SIGTERM)
    took = _wait_holder(cluster, lambda h: h.endswith(f"_{b.proc.pid}"), 30, "the other replica to take over")
    assert took <= RETRY_PERIOD + SLACK, f"takeover after a release took {took:.1f}s (a lease lasts {LEASE_DURATION}s)"
    assert "leading -> released" in a.log()


def test_sigterm_of_an_idle_leader_exits_0_within_its_shutdown_grace(
        cluster: realcluster.RealCluster, procs: list[Any], tmp_path: Path) -> None:
    """An empty cluster: the informers' watches carry no event, and shutdown must not wait for one."""
    a, _ = _leader_and_follower(cluster, procs, tmp_path)
    start = time.monotonic()
    a.proc.send_signal(signal.SIGTERM)
    try:
        code = a.proc.wait(30)
    except subprocess.TimeoutExpired:
        code = None
    took = time.monotonic() - start
    stuck = [line for line in a.log().splitlines() if '"level":"ERROR"' in line]
    assert code == 0, f"exit {code} after {took:.1f}s of SIGTERM: {stuck}"


def start_karpenter(cluster: realcluster.RealCluster, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "SYSTEM_NAMESPACE": NS, "CLUSTER_NAME": NS,
           "DISABLE_WEBHOOK": "true"}
    out = log.open("wb")
    return subprocess.Popen([str(karpenter.binary()), "--leader-election-namespace", NS,
                             "--leader-election-name", LEASE, "--health-probe-port", str(cp.free_port()),
                             "--metrics-port", str(cp.free_port()), "--log-level", "debug"],
                            stdout=out, stderr=subprocess.STDOUT, env=env)


def _renewed_recently(cluster: realcluster.RealCluster) -> bool:
    renew = str(lease(cluster).get("renewTime") or "")
    if not renew:
        return False
    when = dt.datetime.fromisoformat(renew.replace("Z", "+00:00"))
    return (dt.datetime.now(dt.UTC) - when).total_seconds() < 10


def test_karpy_and_karpenter_holding_the_same_lease_never_both_lead(
        cluster: realcluster.RealCluster, procs: list[Any], tmp_path: Path) -> None:
    kp = start_karpenter(cluster, tmp_path / "karpenter.log")
    procs.append(kp)
    _wait_holder(cluster, bool, 90, f"Karpenter to take the Lease:\n{(tmp_path / 'karpenter.log').read_text()[-3000:]}")
    karpenters = holder(cluster)
    assert holder_pid(cluster) is None, f"Karpenter's identity is not karpy's form: {karpenters}"

    k = karpy(cluster, tmp_path / "karpy.log")  # karpy's own default timings must respect Karpenter's record
    procs.append(k)
    k.wait_for("/healthz", timeout=60)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # Karpenter renews; karpy stays a follower
        assert holder(cluster) == karpenters and _renewed_recently(cluster)
        assert not led(k), k.log()[-3000:]
        time.sleep(1)

    kp.send_signal(signal.SIGTERM)  # karpy takes over at the latest when Karpenter's record expires (15 s)
    kp.wait(30)
    _wait_holder(cluster, lambda h: h.endswith(f"_{k.proc.pid}"), 15 + RETRY_PERIOD + SLACK + 10,
                 "karpy to take over from Karpenter")
    assert led(k)

    # and the other way round: while karpy leads, Karpenter does not take the Lease
    kp2 = start_karpenter(cluster, tmp_path / "karpenter2.log")
    procs.append(kp2)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert holder(cluster).endswith(f"_{k.proc.pid}"), (tmp_path / "karpenter2.log").read_text()[-3000:]
        time.sleep(1)
    karpenter_log = (tmp_path / "karpenter2.log").read_text()
    assert "successfully acquired lease" not in karpenter_log.lower(), karpenter_log[-3000:]
