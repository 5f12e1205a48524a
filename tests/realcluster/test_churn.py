"""Job churn: N pods of a Job are created, run and completed (KWOK completes Running pods owned by a Job:
its default ``pod-complete`` stage), then deleted with their Job, while karpy runs. Its resident memory
(VmRSS) must return to within 20 % of its level before the churn: caches that keep what was deleted get a
controller OOM-killed on a cluster with CronJob or CI churn (issue 19's informer sharing table).

N is 2,000 by default (CI), in Jobs of 10 pods; KARPY_CHURN_PODS=20000 for the figure of the issue.
The pods are bound at creation (``spec.nodeName``) to a KWOK node of the test's own, so the churn is
the API's and karpy's informers', not the scheduler's or the provisioner's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from e2e import controller_process as cp
from realcluster.conftest import Scope, wait_until
from support import realcluster

PODS = int(os.environ.get("KARPY_CHURN_PODS", "2000"))
JOB_PODS = 10
"""Pods per Job: CronJob and CI churn is many small Jobs, each with its own uid, labels and owner
references (a few big Jobs would share most of their pods' content in karpy's cache)."""
WAVE_JOBS = 40
"""Jobs created at once; a wave is deleted when it completed (the cluster never holds all N pods)."""
WARM_UP = 200
TOLERANCE = 0.20
NODE = "rc-churn-node"
FAST = {"pod-complete.stage.kwok.x-k8s.io/delay": "0", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "0"}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def kwok_node() -> dict[str, Any]:
    """A Node KWOK keeps Ready (its annotation) that karpy does not manage (no NodePool label)."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "type": "kwok"}},
            "spec": {"taints": [{"key": "rc/churn", "value": "true", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "256", "memory": "1Ti", "pods": "5000"},
                       "capacity": {"cpu": "256", "memory": "1Ti", "pods": "5000"}}}


def job(name: str, ns: str, completions: int, group: str, wave: str) -> dict[str, Any]:
    labels = {"rc/churn": group, "rc/wave": wave}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"completions": completions, "parallelism": completions, "backoffLimit": 0,
                     "template": {"metadata": {"labels": labels, "annotations": FAST},
                                  "spec": {"nodeName": NODE, "restartPolicy": "Never",
                                           "terminationGracePeriodSeconds": 0,
                                           "tolerations": [{"key": "rc/churn", "operator": "Exists"}],
                                           "containers": [{"name": "c", "image": "registry.invalid/job:1",
                                                           "resources": {"requests": {"cpu": "10m"}}}]}}}}


def _succeeded(real: realcluster.RealCluster, ns: str, wave: str) -> int:
    jobs = real.get_json("jobs", "-n", ns, "-l", f"rc/wave={wave}")["items"]
    return sum(int((j.get("status") or {}).get("succeeded", 0)) for j in jobs)


def _wait_wave(real: realcluster.RealCluster, ns: str, wave: str, pods: int, timeout: float) -> None:
    wait_until(lambda: _succeeded(real, ns, wave) >= pods, timeout,
               lambda: f"the Jobs of wave {wave} to complete ({_succeeded(real, ns, wave)} of {pods} pods did)",
               interval=1.0)


def churn(real: realcluster.RealCluster, ns: str, group: str, pods: int, timeout: float) -> float:
    """Run Jobs of :data:`JOB_PODS` pods, ``pods`` pods in all, in waves of :data:`WAVE_JOBS` Jobs: each
    wave runs to its end and is deleted (pods with it) while the next runs, as CronJobs come and go.
    The seconds it took until every pod was gone."""
    start = time.monotonic()
    deadline = start + timeout
    sizes = [min(JOB_PODS, pods - i) for i in range(0, pods, JOB_PODS)]
    for first in range(0, len(sizes), WAVE_JOBS):
        wave = f"{group}-{first // WAVE_JOBS}"
        batch = sizes[first:first + WAVE_JOBS]
        real.apply([job(f"{wave}-{i}", ns, n, group, wave) for i, n in enumerate(batch)])
        _wait_wave(real, ns, wave, sum(batch), max(deadline - time.monotonic(), 1.0))
        real.kubectl("delete", "jobs", "-n", ns, "-l", f"rc/wave={wave}", "--cascade=background", "--wait=false")
    listed = ("get", "pods", "-n", ns, "-l", f"rc/churn={group}", "-o", "name")
    wait_until(lambda: not real.kubectl(*listed).stdout.strip(), max(deadline - time.monotonic(), 60),
               f"the pods of the {group} Jobs to be deleted", interval=2.0)
    return time.monotonic() - start


def settled_rss(pid: int, seconds: float = 10.0) -> int:
    """The smallest VmRSS over ``seconds`` (reading after the informers delivered the deletions)."""
    lowest = rss_kib(pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(1.0)
        lowest = min(lowest, rss_kib(pid))
    return lowest


def test_the_controllers_memory_returns_within_20_percent_after_a_churn_of_job_pods(
        real: realcluster.RealCluster, scope: Scope, controller: cp.Controller) -> None:
    ns = scope.namespace("rc-churn")
    real.apply([kwok_node()])
    try:
        wait_until(lambda: any(c["type"] == "Ready" and c["status"] == "True"
                               for c in real.get_json("node", NODE).get("status", {}).get("conditions", [])),
                   60, "KWOK to make the churn node Ready")
        churn(real, ns, "warm-up", WARM_UP, 120)  # the informers' first pods, event handlers and pools
        before = settled_rss(controller.proc.pid)
        took = churn(real, ns, "churn", PODS, 60 + PODS / 10)
        after = settled_rss(controller.proc.pid, seconds=15.0)
        assert controller.proc.poll() is None, controller.log()[-3000:]
        figure = (f"{PODS} Job pods churned in {took:.0f}s: VmRSS {before / 1024:.0f} MiB before, "
                  f"{after / 1024:.0f} MiB after ({(after - before) / before:+.0%})")
        print(figure)
        (Path(controller.log_path).parent / "churn.txt").write_text(figure + "\n")
        assert after <= before * (1 + TOLERANCE), figure
    finally:
        real.kubectl("delete", "node", NODE, "--ignore-not-found", "--wait=false")
