"""Found while fixing issue 21 item 1: a NodeClaim takes on the requirements of every pod put on it.

Karpenter's ``NodeClaim.CanAdd`` / ``Add`` (``pkg/controllers/provisioning/scheduling/nodeclaim.go``)
intersect the claim's requirements with each pod's: a pod pinned to a zone that joins a claim
opened for another pod pins the claim's zone. karpy kept the first pod's requirements, so the
claim could launch in another zone; the pinned pod then never bound, and the empty node was
consolidated and launched again, for ever.
"""

from __future__ import annotations

from . import scenarios as sc
from .test_namespace_selector import NAMESPACES, _db


def test_a_zone_pinned_pod_joining_a_claim_pins_its_zone() -> None:
    # larger than db: planned first, on a claim that db then joins
    follower = sc.deployment("follower", 1, cpu="1", memory="256Mi", pod_spec="""
        affinity:
          podAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector: {matchLabels: {security: s2}}
              namespaceSelector: {}
        """)
    result = sc.run(sc.docs(sc.nodepool(), NAMESPACES, _db("team-a", "us-east-1b"), follower), until="5m")
    (db,) = sc.running(result, "db-")
    (fol,) = sc.running(result, "follower-")
    assert fol["spec"]["nodeName"] == db["spec"]["nodeName"]
    (node,) = sc.karpy_nodes(result)
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "us-east-1b"
    assert sc.launched(result) == 1
    assert not sc.events(result, "DisruptionTerminating")
