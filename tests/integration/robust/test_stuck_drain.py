"""Draining that never ends is visible: which do-not-disrupt pod holds the node, and for how long."""

from __future__ import annotations

from karpy.controllers import drain as drain_report
from karpy.simulator import drains

from ..controllers import builders


def test_a_node_held_by_a_do_not_disrupt_pod_says_which_pod_and_how_long() -> None:
    w = builders.make_world()
    w.cluster.create(builders.nodepool_manifest())
    w.cluster.create(builders.pending_pod("a"))
    w.at(120)
    (node,) = w.nodes()
    name = node["metadata"]["name"]
    w.cluster.delete("Pod", "a", "default")
    w.cluster.create(builders.running_pod("a", name, annotations={"karpenter.sh/do-not-disrupt": "true"}))
    (claim,) = w.nodeclaims()
    w.cluster.delete("NodeClaim", claim["metadata"]["name"])
    w.run_for(20 * 60)
    assert name in [n["metadata"]["name"] for n in w.nodes()]  # still draining
    messages = [e["message"] for e in w.events("FailedDraining", name)]
    assert any("default/a" in m and "over 15m" in m and "terminationGracePeriod" in m for m in messages), messages
    notes = drains.stuck(w.cluster, w.clock.now())
    assert len(notes) == 1 and "default/a" in notes[0] and name in notes[0] and "20m" in notes[0]


def test_durations_are_rounded_to_steps_so_events_aggregate() -> None:
    assert drain_report.rounded_age(0) == 0
    assert drain_report.rounded_age(299) == 0
    assert drain_report.rounded_age(1000) == 900
    assert drain_report.rounded_age(3 * 86400 + 5) == 3 * 86400
