"""Free pods (no topology term) and the new NodeClaims constrained pods opened before them: the free
pods take the room those claims' cheapest types leave, and the packer decides the rest, so a claim
is never launched one size past what its pods need because free pods were poured into it."""

from __future__ import annotations

from typing import Any

from karpy.cloudprovider import instancetype
from karpy.provisioning import results
from unit.provisioning import builders as b

HOST = "kubernetes.io/hostname"
SPREAD: dict[str, Any] = {"topologySpreadConstraints": [b.spread(HOST, {"app": "x"})]}
SIZES = (1, 2, 4, 8, 16, 32, 64)


def _catalog() -> list[instancetype.InstanceType]:
    """One family priced per cpu, as Karpenter's KWOK instance types are."""
    return [b.make_type(f"c-{n}x", cpu=n, memory_gi=2 * n, price=0.027 * n) for n in SIZES]


def _full_nodes(count: int) -> list[results.ExistingNode]:
    """Nodes that each run one pod of the spread and have no room left."""
    return [b.existing_node(f"n{i}", cpu=1.5, memory_gi=2, running=[
        b.make_pod(f"x-running-{i}", cpu="1500m", labels={"app": "x"}, **SPREAD)]) for i in range(count)]


def test_free_pods_fill_the_room_of_hostname_spread_claims_without_making_them_larger() -> None:
    spread = b.make_pods("x", 5, cpu="1500m", labels={"app": "x"}, **SPREAD)
    free = b.make_pods("g", 30, cpu="250m", labels={"app": "g"})
    res = b.solve(spread + free, types=_catalog(), existing=_full_nodes(10))
    b.expect_all_placed(res, spread + free)
    b.expect_claims_hold_their_pods(res)
    spread_claims = [c for c in res.new_claims if any(p.labels.get("app") == "x" for p in c.pods)]
    assert len(spread_claims) == 5, b.describe(res)
    # each spread pod's claim is the 2-cpu type it needs, its other half-cpu taken by free pods
    assert all(c.instance_types[0].name == "c-2x" and len(c.pods) == 3 for c in spread_claims), b.describe(res)
    # 7.5 + 7.5 cpus of pods on 15 cpus of nodes: before, the first claim took every free pod
    # (9 cpus: a 16-cpu type) next to four 2-cpu claims, 24 cpus
    assert sum(c.price for c in res.new_claims) <= 0.027 * 15 + 1e-9, b.describe(res)
