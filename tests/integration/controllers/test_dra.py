"""A pod claiming DRA devices stays pending with Karpenter's reason, through the whole controller set.

Expectations from Karpenter v1.14: ``pkg/controllers/provisioning/dra_test.go`` "should reject DRA pods with
a DRAError when IgnoreDRARequests is enabled (N1)" (no NodeClaim, the pod not scheduled) and
``scheduling/scheduler.go`` ``Results.Record`` (a ``FailedScheduling`` event and the info log line
"skipping pod with Dynamic Resource Allocation requirements, not yet supported by Karpenter").
"""

from __future__ import annotations

import logging

import pytest

from karpy import settings
from karpy.provisioning import dra

from . import builders as b

CLAIM = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]


def test_a_dra_pod_stays_pending_with_a_failed_scheduling_event_and_no_nodeclaim(
        caplog: pytest.LogCaptureFixture) -> None:
    w = b.make_world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("gpu", resourceClaims=CLAIM))
    with caplog.at_level(logging.INFO, logger="karpy.controllers.provisioner"):
        w.run_for(120.0)
    assert w.nodeclaims() == []
    assert not w.cluster.get("Pod", "gpu", "default")["spec"].get("nodeName")
    (event,) = w.events("FailedScheduling", "gpu")
    assert event["message"].startswith("Failed to schedule pod, " + dra.MESSAGE)
    assert any(r.getMessage() == dra.LOG_MESSAGE for r in caplog.records)


def test_the_plain_pods_of_the_same_batch_get_a_nodeclaim() -> None:
    w = b.make_world()
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("gpu", resourceClaims=CLAIM))
    w.cluster.create(b.pending_pod("web"))
    w.run_for(180.0)
    assert len(w.nodeclaims()) == 1
    assert w.events("FailedScheduling", "web") == []
    assert len(w.events("FailedScheduling", "gpu")) == 1


def test_with_ignore_dra_requests_off_the_reason_says_karpy_allocates_no_devices() -> None:
    w = b.make_world(settings_=settings.Settings(cluster_name="test", ignore_dra_requests=False))
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("gpu", resourceClaims=CLAIM))
    w.run_for(120.0)
    assert w.nodeclaims() == []
    (event,) = w.events("FailedScheduling", "gpu")
    assert dra.NOT_ALLOCATED in event["message"]
