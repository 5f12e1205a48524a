"""Karpenter's effective zone of a pending pod (karpenter_scheduler_pending_pods_by_effective_zone_count)."""

from __future__ import annotations

from karpy.api import labels as wk
from karpy.controllers import state_metrics

from . import builders as pb


def test_a_pending_pods_effective_zone_is_its_one_allowed_zone_or_flexible_or_none() -> None:
    def affinity(*zone_sets: list[str]) -> dict[str, object]:
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": zones}]} for zones in zone_sets]}}}

    assert state_metrics.effective_zone(pb.make_pod("a")) == "flexible"
    assert state_metrics.effective_zone(pb.make_pod("b", nodeSelector={wk.ZONE: "z1"})) == "z1"
    assert state_metrics.effective_zone(pb.make_pod("c", affinity=affinity(["z1", "z2"]))) == "flexible"
    assert state_metrics.effective_zone(pb.make_pod("d", affinity=affinity(["z2"]))) == "z2"
    assert state_metrics.effective_zone(pb.make_pod("e", affinity=affinity(["z1"], ["z2"]),
                                                    nodeSelector={wk.ZONE: "z2"})) == "z2"
    assert state_metrics.effective_zone(pb.make_pod("f", affinity=affinity(["z2"]),
                                                    nodeSelector={wk.ZONE: "z1"})) == "none"
