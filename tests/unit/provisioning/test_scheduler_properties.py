"""Properties of random mixes of generic pods on the benchmark catalog: every pod is placed exactly
once, every claim's cheapest type holds its pods plus the DaemonSet overhead, and no existing node
is over-committed."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.api import pod
from karpy.cloudprovider import catalog
from karpy.provisioning import results

from . import builders as b

CPUS = ["50m", "100m", "250m", "500m", "1", "1500m", "3", "7"]
MEMS = ["64Mi", "256Mi", "1Gi", "2Gi", "4Gi", "12Gi"]

shapes = st.tuples(st.sampled_from(CPUS), st.sampled_from(MEMS), st.integers(min_value=1, max_value=40))
nodes = st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from([2, 8, 32]), st.integers(min_value=0, max_value=3))


def _existing(spec: list[tuple[int, int, int]]) -> list[results.ExistingNode]:
    out = []
    for i, (cpu, mem, running) in enumerate(spec):
        name = f"node-{i}"
        pods = [b.make_pod(f"running-{i}-{j}", cpu="250m", memory="512Mi", node_name=name) for j in range(running)]
        out.append(b.existing_node(name, cpu=cpu, memory_gi=mem, running=pods))
    return out


@settings(max_examples=40, deadline=None)
@given(mix=st.lists(shapes, min_size=1, max_size=6), node_spec=st.lists(nodes, max_size=4),
       with_daemonset=st.booleans())
def test_random_generic_pods_are_each_placed_once_on_claims_and_nodes_that_hold_them(
        mix: list[tuple[str, str, int]], node_spec: list[tuple[int, int, int]], with_daemonset: bool) -> None:
    pods: list[pod.Pod] = []
    for s, (cpu, mem, count) in enumerate(mix):
        pods.extend(b.make_pods(f"shape{s}", count, cpu=cpu, memory=mem))
    existing = _existing(node_spec)
    daemonsets = [b.daemonset_pod("agent", cpu="100m", memory="128Mi")] if with_daemonset else []
    res = b.solve(pods, types=catalog.load("benchmark"), existing=existing, daemonsets=daemonsets)

    seen = Counter([p.key for c in res.new_claims for p in c.pods]
                   + [p.key for placed in res.existing.values() for p in placed])
    assert all(n == 1 for n in seen.values()), [k for k, n in seen.items() if n > 1]
    b.expect_all_placed(res, pods)
    assert sum(seen.values()) == len(pods)
    b.expect_claims_hold_their_pods(res, daemonsets)
    b.expect_not_overcommitted(res, existing)
    for c in res.new_claims:
        prices = [t.cheapest_price() or 0.0 for t in c.instance_types]
        assert c.price == prices[0]
        assert prices == sorted(prices), f"claim {c.hostname} options are not cheapest first"
