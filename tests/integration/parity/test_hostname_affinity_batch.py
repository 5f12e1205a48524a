"""Issue 12 item 7: pod affinity on hostname within one scheduling batch.

As Karpenter's "should schedule a pod with affinity to a pod in the same batch": a pod that must
share a node with another pending pod is planned onto that pod's NodeClaim in the same round,
and the kube-scheduler binds both there.
"""

from __future__ import annotations

import pytest

from karpy.simulator import engine

from . import scenarios as sc

AFFINITY = """
affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector: {matchLabels: {app: leader}}
"""


def _run(followers: int = 1, *, leader_cpu: str = "1", follower_cpu: str = "500m") -> engine.Result:
    leader = sc.deployment("leader", 1, cpu=leader_cpu)
    follower = sc.deployment("follower", followers, cpu=follower_cpu, pod_spec=AFFINITY)
    return sc.run(sc.docs(sc.nodepool(), leader, follower), until="3m")


def test_a_pod_with_hostname_affinity_to_a_pending_pod_is_planned_on_its_nodeclaim_and_bound() -> None:
    result = _run()
    (leader,) = sc.running(result, "leader-")
    (follower,) = sc.running(result, "follower-")
    assert follower["spec"]["nodeName"] == leader["spec"]["nodeName"]
    assert sc.launched(result) == 1
    assert not [e for e in sc.events(result, "FailedScheduling")
                if e.get("source") == "karpenter" and "follower-" in e["involvedObject"]["name"]]
    nominations = {e["involvedObject"]["name"]: e["message"] for e in sc.events(result, "Nominated")}
    (leader_claim,) = {m for k, m in nominations.items() if k.startswith("leader-")}
    assert {m for k, m in nominations.items() if k.startswith("follower-")} == {leader_claim}


@pytest.mark.parametrize(("leader_cpu", "follower_cpu"), [("1", "500m"), ("250m", "1500m")])
def test_several_followers_all_join_the_leader(leader_cpu: str, follower_cpu: str) -> None:
    result = _run(followers=3, leader_cpu=leader_cpu, follower_cpu=follower_cpu)
    (leader,) = sc.running(result, "leader-")
    followers = sc.running(result, "follower-")
    assert len(followers) == 3
    assert {p["spec"]["nodeName"] for p in followers} == {leader["spec"]["nodeName"]}
    assert sc.launched(result) == 1
