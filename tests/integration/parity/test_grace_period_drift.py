"""Issue 21 item 2.2: a NodeClaim with a ``terminationGracePeriod`` is drifted even when a
do-not-disrupt pod or a blocking PDB sits on it; the grace period bounds the wait.

Karpenter: drift is an *eventual* disruption (``pkg/controllers/disruption/drift.go``, ``Class``);
``NewCandidate`` (``types.go``) keeps a node whose pods block eviction as a candidate when its
NodeClaim has a ``terminationGracePeriod``, and ``SimulateScheduling`` (``helpers.go``) plans no
capacity for pods not currently reschedulable (``drift_test.go``: "should not create
replacements for drifted nodes that have pods with the blocking PDBs when the NodePool's
TerminationGracePeriod is not nil"). Termination then waits for those pods at most the grace
period. karpy never chose such a node, so it stayed drifted for ever.
"""

from __future__ import annotations

import textwrap

from . import scenarios as sc


def _pool(template_label: str = "") -> str:
    meta = f"labels: {{example.com/generation: {template_label}}}" if template_label else ""
    text = sc.nodepool(template_metadata=meta, disruption="{consolidationPolicy: WhenEmpty, consolidateAfter: 1h}")
    return text.replace("      requirements:", "      terminationGracePeriod: 3m\n      requirements:")


STEP = "- at: 2m\n  apply:\n  - " + textwrap.indent(_pool("two").strip("\n"), "    ")[4:]


def _job(annotations: str = "") -> str:
    return textwrap.dedent(f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: job, namespace: default}}
    spec:
      replicas: 1
      selector: {{matchLabels: {{app: job}}}}
      template:
        metadata:
          labels: {{app: job}}
          annotations: {{{annotations}}}
        spec:
          containers:
          - name: app
            image: registry.example/app:1
            resources: {{requests: {{cpu: "1", memory: 512Mi}}}}
    """)


PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: job, namespace: default}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: job}}
"""


def _drifted_away(documents: str) -> None:
    result = sc.run(documents, until="12m", steps=STEP)
    terminating = sc.events(result, "DisruptionTerminating")
    assert terminating, "the drifted node was never disrupted"
    assert min(float(e["t"]) for e in terminating) < 4 * 60
    # the grace period (3m) bounds the drain: the old node is gone and the pod runs on a new one
    (job,) = sc.running(result, "job-")
    node = next(n for n in result.objects["nodes"] if n["metadata"]["name"] == job["spec"]["nodeName"])
    assert node["metadata"]["labels"].get("example.com/generation") == "two"
    assert len(sc.karpy_nodes(result)) == 1


def test_a_do_not_disrupt_pod_does_not_keep_a_node_with_a_grace_period_from_drifting() -> None:
    _drifted_away(sc.docs(_pool(), _job("karpenter.sh/do-not-disrupt: 'true'")))


def test_a_blocking_pdb_does_not_keep_a_node_with_a_grace_period_from_drifting() -> None:
    _drifted_away(sc.docs(_pool(), _job(), PDB))
