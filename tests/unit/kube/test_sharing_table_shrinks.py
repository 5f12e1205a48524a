"""The informer's sharing table (karpy.kube.compact) shrinks when objects leave the cache (issue 19)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any, cast

import orjson

from karpy.kube import informer, paths


def job_pod(i: int, rv: int) -> dict[str, Any]:
    """A Job's pod: its labels, owner and timestamps are its own, as with CronJob or CI churn."""
    uid = f"{i:08d}-0000-4000-8000-000000000000"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"job-{i}-x7k2p", "namespace": "ci", "uid": f"p{uid}", "resourceVersion": str(rv),
            "creationTimestamp": f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "labels": {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": f"job-{i}",
                       "controller-uid": uid, "job-name": f"job-{i}"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"job-{i}", "uid": uid,
                                 "controller": True, "blockOwnerDeletion": True}],
            "finalizers": ["batch.kubernetes.io/job-tracking"],
        },
        "spec": {"nodeName": f"n{i % 50}", "restartPolicy": "Never",
                 "containers": [{"name": "build", "image": f"ci/build:{i}", "resources": {"requests": {"cpu": "1"}}}],
                 "tolerations": [{"key": "ci", "operator": "Exists"}]},
        "status": {"phase": "Succeeded", "startTime": f"2026-01-01T00:00:{i % 60:02d}Z",
                   "conditions": [{"type": "Ready", "status": "False", "reason": f"PodCompleted-{i}"}]},
    }


def line(event_type: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj})


def bookmark(rv: int) -> bytes:
    return line("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}})


def test_churning_20000_job_pods_through_an_informer_returns_the_table_to_its_base_size() -> None:
    inf = informer.Informer(cast(Any, None), paths.resource_for("Pod"), lambda *_: None)
    rv = 1
    for i in range(100):  # long-lived pods that stay cached throughout
        rv = int(inf._event(line("ADDED", job_pod(1_000_000 + i, rv + 1)), str(rv)))
    rv = int(inf._event(bookmark(rv), str(rv)))
    base_entries = len(inf.compactor)
    gc.collect()
    tracemalloc.start()
    base_bytes = tracemalloc.get_traced_memory()[0]
    peak_entries = 0
    for i in range(20_000):
        pod = job_pod(i, rv + 1)
        rv = int(inf._event(line("ADDED", pod), str(rv)))
        done = dict(pod, metadata={**pod["metadata"], "resourceVersion": str(rv + 1)})
        rv = int(inf._event(line("DELETED", done), str(rv)))
        peak_entries = max(peak_entries, len(inf.compactor))
    churned_entries = len(inf.compactor)
    rv = int(inf._event(bookmark(rv), str(rv)))  # a quiet moment
    gc.collect()
    after_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(inf) == 100
    # bounded during the churn (before the fix: about 11 entries a pod, 220,000 and more)
    assert peak_entries <= 2 * base_entries + 1024 + 20
    assert churned_entries <= 2 * base_entries + 1024 + 20
    assert len(inf.compactor) == base_entries  # back to the base size at the next quiet moment
    grown = after_bytes - base_bytes
    print(f"sharing table: {base_entries} entries before, peak {peak_entries} during, "
          f"{len(inf.compactor)} after 20,000 churned pods; traced memory +{grown / 1e6:.2f} MB")
    assert grown < 2_000_000, f"{grown} bytes still held after the churn"


def test_a_rebuild_keeps_the_cached_objects_equal_and_still_shared() -> None:
    inf = informer.Informer(cast(Any, None), paths.resource_for("Pod"), lambda *_: None)
    rv = 1
    for i in range(10):
        pod = job_pod(i, rv + 1)
        pod["metadata"]["labels"] = {"app": "web"}
        rv = int(inf._event(line("ADDED", pod), str(rv)))
    before = orjson.dumps(sorted(inf.items(), key=lambda p: p["metadata"]["name"]))
    inf.compactor.rebuild(inf.items(), "Pod")
    after = sorted(inf.items(), key=lambda p: p["metadata"]["name"])
    assert orjson.dumps(after) == before
    assert after[0]["metadata"]["labels"] is after[9]["metadata"]["labels"]
