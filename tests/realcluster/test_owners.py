"""Pods owned by a Job, a StatefulSet and a custom resource (a CRD of this test's own) under
PodDisruptionBudgets, on karpy's nodes, while consolidation and drift evaluate them: karpy must not stall
(issue 19's first finding). `/readyz` stays 200, the leader keeps renewing its Lease and never exits, and
the log shows no refused or missing owner lookup and no informer sync time-out.

The controller runs as the chart's ServiceAccount, so an owner lookup karpy's RBAC does not allow (a Job:
the chart grants no batch/jobs) is a real 403, and a custom resource's owner a real 404.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import controller_process as cp
from realcluster import workloads as w
from realcluster.conftest import NAMESPACE, Scope, start_controller
from support import realcluster

LEASE = "karpenter-leader-election"
GROUP = "rc.karpy.test"
POOL = "owners"
RENEW_DEADLINE = 10.0
OBSERVE = 30.0
"""Seconds watched before and again after the drift (an owner lookup that blocks does so for 60 s)."""
NO_COMPLETION = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h",
                 "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h"}
"""Asks KWOK's pod-complete stage to keep Job pods Running (kwokctl's fast stages may complete them anyway)."""


def widget_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def _pod_spec(pool: str) -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "registry.invalid/app:1",
                            "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}],
            "nodeSelector": {"rc/pool": pool}, "terminationGracePeriodSeconds": 0}


def job(name: str, ns: str, pool: str, parallelism: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
                     "template": {"metadata": {"labels": {"app": name}, "annotations": NO_COMPLETION},
                                  "spec": {**_pod_spec(pool), "restartPolicy": "Never"}}}}


def statefulset(name: str, ns: str, pool: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": _pod_spec(pool)}}}


def owned_pod(name: str, ns: str, pool: str, owner: dict[str, Any], app: str) -> dict[str, Any]:
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": True}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app}, "ownerReferences": [ref]},
            "spec": _pod_spec(pool)}


def _lease(real: realcluster.RealCluster) -> dict[str, Any]:
    return dict(real.get_json("lease", LEASE, "-n", NAMESPACE)["spec"])


def _age(renew_time: str) -> float:
    when = dt.datetime.fromisoformat(renew_time.replace("Z", "+00:00"))
    return (dt.datetime.now(dt.UTC) - when).total_seconds()


class Watch:
    """What the test saw of the controller each second: /readyz, the Lease, the process."""

    def __init__(self, real: realcluster.RealCluster, controller: cp.Controller) -> None:
        self.real, self.controller = real, controller
        self.problems: list[str] = []
        self.renewals: set[str] = set()
        self.holder = str(_lease(real).get("holderIdentity") or "")

    def observe(self, seconds: float, until: Callable[[], bool] | None = None) -> bool:
        """Watch for ``seconds``, or until ``until()`` holds (True) or a problem is seen (False)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if until is not None and until():
                return True
            stamp = time.strftime("%H:%M:%S")
            if self.controller.proc.poll() is not None:
                self.problems.append(f"{stamp} the controller exited with {self.controller.proc.returncode}")
                return False
            status, _ = self.controller.get("/readyz")
            if status != 200:
                self.problems.append(f"{stamp} /readyz answered {status}")
            lease = _lease(self.real)
            renew = str(lease.get("renewTime") or "")
            self.renewals.add(renew)
            if lease.get("holderIdentity") != self.holder:
                self.problems.append(f"{stamp} the Lease moved to {lease.get('holderIdentity')!r}")
            elif not renew or _age(renew) > RENEW_DEADLINE:
                self.problems.append(f"{stamp} the Lease was last renewed at {renew or 'never'}")
            time.sleep(1.0)
        return until is None


_TROUBLE = re.compile(r"\b(403|404|Forbidden|NotFound)\b|/api//|timed out|did not sync|leader election")


def _troubled_lines(log: str) -> list[str]:
    """Warnings and errors of the log that are owner lookups refused or missing, informer syncs that timed
    out, or a lost Lease."""
    return [line for line in log.splitlines()
            if ('"level":"INFO"' not in line and '"level":"DEBUG"' not in line) and _TROUBLE.search(line)]


def _job_pods_ran(real: realcluster.RealCluster, ns: str) -> bool:
    """The Job's two pods were bound and ran: kwokctl's fast pod stages complete pods owned by a Job at once,
    whatever their annotations, so Succeeded counts as well as Running."""
    pods = w.pods(real, ns, "app=batch")
    return len(pods) == 2 and all(p.get("status", {}).get("phase") in ("Running", "Succeeded") for p in pods)


@pytest.fixture
def guarded(real: realcluster.RealCluster, installed: Path,
            tmp_path: Path) -> Iterator[tuple[Scope, list[cp.Controller]]]:
    """A controller and a Scope; when the stall killed the controller, a fresh one does the clean-up so
    that the suite's later tests find an empty cluster."""
    real.apply([w.node_class()])
    controllers = [start_controller(installed, tmp_path / "karpy.log")]
    controllers[0].wait_for("/readyz", timeout=60)
    scope = Scope(real)
    try:
        yield scope, controllers
    finally:
        if controllers[-1].proc.poll() is not None:
            controllers[-1].log_file.close()
            controllers.append(start_controller(installed, tmp_path / "karpy-cleanup.log"))
        try:
            scope.cleanup(timeout=150)
        finally:
            controllers[-1].terminate(timeout=40)


def test_pods_owned_by_a_job_a_statefulset_and_a_custom_resource_under_pdbs_never_stall_karpy(
        real: realcluster.RealCluster, guarded: tuple[Scope, list[cp.Controller]]) -> None:
    scope, controllers = guarded
    controller = controllers[0]
    real.apply([widget_crd()])
    real.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/widgets.{GROUP}")
    ns = scope.namespace("rc-owners")
    scope.nodepool(w.nodepool(POOL))  # WhenEmptyOrUnderutilized after 0s: consolidation evaluates every node
    real.apply([w.pdb(app, ns, {"app": app}, 1) for app in ("batch", "db", "widget")])
    real.apply([job("batch", ns, POOL, 2), statefulset("db", ns, POOL, 2),
                {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "widget", "namespace": ns},
                 "spec": {"size": 2}}])
    widget = real.get_json("widget", "widget", "-n", ns)
    watch = Watch(real, controller)
    real.apply([owned_pod(f"widget-{i}", ns, POOL, widget, "widget") for i in range(2)])
    running = watch.observe(150, until=lambda: _job_pods_ran(real, ns) and all(
        w.running(real, ns, f"app={app}", 2) for app in ("db", "widget")))
    if not watch.problems:
        assert running, (f"6 Running pods within 150 s:\n{real.kubectl('get', 'pods', '-n', ns, '-o', 'wide').stdout}"
                         f"\n{controller.log()[-1500:]}")
        owners = {p["metadata"]["ownerReferences"][0]["kind"] for p in w.pods(real, ns, "app in (batch,db,widget)")}
        assert owners == {"Job", "StatefulSet", "Widget"}
        watch.observe(OBSERVE)  # consolidation evaluates the nodes and their budgets
    if not watch.problems:
        real.kubectl("patch", "nodepool", POOL, "--type", "merge",
                     "-p", json.dumps({"spec": {"template": {"metadata": {"labels": {"rc/version": "2"}}}}}))
        watch.observe(OBSERVE)  # drift evaluates them too

    troubled = _troubled_lines(controller.log())
    assert not watch.problems and not troubled, (
        "karpy stalled on the pods' owners:\n" + "\n".join(watch.problems[:20]) + "\n--- log:\n"
        + "\n".join(troubled[:30]))
    assert len(watch.renewals) >= OBSERVE / 2 / 2, f"the Lease was renewed only {len(watch.renewals)} times"
