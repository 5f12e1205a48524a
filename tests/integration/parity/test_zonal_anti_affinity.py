"""Issue 12 item 2: zonal pod anti-affinity is never violated.

As in Karpenter's topology tests: with a pod pinned to each zone and one more pod anti-affine to
them on ``topology.kubernetes.io/zone``, no zone is left, so Karpenter leaves that pod pending;
karpy must neither plan a node for it nor let the kube-scheduler bind it.
"""

from __future__ import annotations

import pytest

from karpy.simulator import engine

from . import scenarios as sc

ANTI = """
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: topology.kubernetes.io/zone
      labelSelector: {matchLabels: {tier: zonal}}
"""


def _pinned(zone: str, *, inverse: bool = False) -> str:
    selector = f"nodeSelector: {{topology.kubernetes.io/zone: {zone}}}"
    if inverse:  # the pinned pods carry the anti-affinity; the loner matches it
        return sc.deployment(f"pinned-{zone[-1]}", 1, cpu="2", pod_spec=selector + "\n" + ANTI)
    return sc.deployment(f"pinned-{zone[-1]}", 1, cpu="2", labels="tier: zonal", pod_spec=selector)


def _run(zones: tuple[str, ...], at: str = "2m", *, inverse: bool = False) -> engine.Result:
    loner = (sc.deployment("loner", 0, cpu="100m", labels="tier: zonal") if inverse
             else sc.deployment("loner", 0, cpu="100m", pod_spec=ANTI))
    return sc.run(sc.docs(sc.nodepool(), *(_pinned(z, inverse=inverse) for z in zones), loner), until="5m",
                  steps=f"- at: {at}\n  scale: {{kind: Deployment, namespace: default, name: loner, replicas: 1}}")


def _zone_of(result: engine.Result, node_name: str) -> str:
    node = next(n for n in result.objects["nodes"] if n["metadata"]["name"] == node_name)
    return str(node["metadata"]["labels"]["topology.kubernetes.io/zone"])


@pytest.mark.parametrize("inverse", [False, True], ids=["anti-affine-loner", "anti-affine-pinned-pods"])
def test_a_pod_anti_affine_to_pods_in_every_zone_stays_pending_and_no_node_is_launched_for_it(
        inverse: bool) -> None:
    result = _run(sc.ZONES, inverse=inverse)
    assert len(sc.running(result, "pinned-")) == 3
    assert len(sc.pending(result, "loner-")) == 1
    assert sc.launched(result) == 3
    zones_of_claims = sorted(c["metadata"]["labels"]["topology.kubernetes.io/zone"]
                             for c in result.objects["nodeclaims"])
    assert zones_of_claims == sorted(sc.ZONES)


def test_with_a_free_zone_the_anti_affine_pod_runs_there() -> None:
    result = _run(sc.ZONES[:2])
    (loner,) = sc.running(result, "loner-")
    assert _zone_of(result, loner["spec"]["nodeName"]) == sc.ZONES[2]


@pytest.mark.parametrize("inverse", [False, True], ids=["anti-affine-loner", "anti-affine-pinned-pods"])
def test_pods_already_pending_together_never_share_a_zone(inverse: bool) -> None:
    result = _run(sc.ZONES, at="0s", inverse=inverse)
    bound = sc.running(result, "pinned-") + sc.running(result, "loner-")
    zones = [_zone_of(result, p["spec"]["nodeName"]) for p in bound]
    assert len(zones) == len(set(zones)) == 3
    assert len(sc.pending(result, "")) == 1


def test_an_anti_affine_pod_pending_with_an_unpinned_matching_pod_waits() -> None:
    """Karpenter's "other schedules first": the matching pod's zone is not known when the
    anti-affine pod is planned, so it is not planned in the same round."""
    other = sc.deployment("other", 1, cpu="2", labels="tier: zonal")
    loner = sc.deployment("loner", 1, cpu="100m", pod_spec=ANTI)
    result = sc.run(sc.docs(sc.nodepool(), other, loner), until="4m")
    (o,) = sc.running(result, "other-")
    for lp in sc.running(result, "loner-"):
        assert _zone_of(result, lp["spec"]["nodeName"]) != _zone_of(result, o["spec"]["nodeName"])
