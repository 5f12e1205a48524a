"""Issue 21 "Also" items: what karpy tells a user matches the NodePool.

- A pod that only a NodePool's ``minValues`` keeps pending is told so, as Karpenter's
  ``InstanceTypes.SatisfiesMinValues`` error says ("minValues requirement is not met for
  label(s)", ``pkg/cloudprovider/types.go``), not that limits were used up (the NodePool has none).
- The end-of-run note on a Node whose drain waits for a do-not-disrupt pod says how the wait
  ends: for good without a ``terminationGracePeriod``, at the NodeClaim's termination timestamp
  with one (Karpenter's termination controller deletes the pods then).
"""

from __future__ import annotations

from . import scenarios as sc
from .test_grace_period_drift import STEP, _job, _pool


def test_a_pod_kept_pending_by_min_values_is_told_so_and_not_about_limits() -> None:
    reqs = """
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, m6i, m7i], minValues: 3}
    """
    pinned = sc.deployment("web", 1, pod_spec="nodeSelector: {karpenter.k8s.aws/instance-family: m5}")
    result = sc.run(sc.docs(sc.nodepool(requirements=reqs), pinned), until="2m")
    messages = [e["message"] for e in sc.events(result, "FailedScheduling") if "NodePool" in e["message"]]
    assert messages
    assert all("minValues requirement is not met for label(s) karpenter.k8s.aws/instance-family" in m
               for m in messages)
    assert not any("limits" in m for m in messages)
    assert sc.launched(result) == 0


def test_the_drain_note_names_the_grace_period_of_a_nodeclaim_that_has_one() -> None:
    result = sc.run(sc.docs(_pool(), _job("karpenter.sh/do-not-disrupt: 'true'")), until="3m30s", steps=STEP)
    notes = [n["message"] for n in result.notes if "draining" in n["message"]]
    assert len(notes) == 1
    assert "terminationGracePeriod 3m: they are deleted at " in notes[0]
    assert "no terminationGracePeriod" not in notes[0]
