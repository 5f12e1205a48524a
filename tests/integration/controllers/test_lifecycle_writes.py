"""The lifecycle's status writes: a merge patch from the watch-fed copy stores what a whole-status
update would store, and a stale copy falls back to a fresh read."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy import clock
from karpy.controllers import claim_status, lifecycle
from karpy.kube import memory, memory_objects

_SCALAR = st.one_of(st.none(), st.text(max_size=3), st.integers(0, 3))
_VALUE = st.one_of(_SCALAR, st.lists(_SCALAR, max_size=2),
                   st.dictionaries(st.sampled_from(["cpu", "memory"]), _SCALAR, max_size=2))
_STATUS = st.dictionaries(st.sampled_from(["a", "b", "c", "capacity", "conditions"]), _VALUE, max_size=4)


@settings(max_examples=300, deadline=None)
@given(old=_STATUS, changes=_STATUS, drop=st.sets(st.sampled_from(["a", "b", "c", "capacity", "conditions"])))
def test_a_patch_said_to_express_a_new_status_merges_into_exactly_it(old: dict[str, Any], changes: dict[str, Any],
                                                                     drop: set[str]) -> None:
    new = dict(old)
    new.update(changes)
    for k in drop:
        new.pop(k, None)
    patch = {k: v for k, v in new.items() if old.get(k, claim_status.ABSENT) is not v}
    if claim_status.merge_patch_says(old, new, patch):
        merged = memory_objects.merge_patch(old, patch)
        assert merged == new and list(merged) == list(new)


def _claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
            "spec": {"requirements": []},
            "status": {"providerID": "kwok://x", "capacity": {"cpu": "1"}}}


def test_a_status_write_from_a_stale_copy_is_redone_on_a_fresh_read() -> None:
    from karpy.controllers import state

    cluster = memory.InMemoryCluster(clock.VirtualClock())
    st_ = state.ClusterState(cluster).start()
    cluster.create(_claim("c"))
    stale = st_.raw("NodeClaim", "c")
    assert stale is not None
    fresh = cluster.get("NodeClaim", "c")
    fresh["status"]["imageID"] = "ami-1"
    cluster.update_status(fresh)

    class Stale:
        def raw(self, kind: str, name: str) -> dict[str, Any] | None:
            return stale

    lc = object.__new__(lifecycle.Lifecycle)
    lc.cluster, lc.state, lc.clock = cluster, Stale(), clock.VirtualClock()  # type: ignore[assignment]
    stored = lc._write_status("c", lambda s, now: claim_status.set_condition(s, "Launched", "True", now))
    assert stored["status"]["imageID"] == "ami-1"  # the other writer's field survived
    assert [c["type"] for c in stored["status"]["conditions"]] == ["Launched", "Registered", "Initialized", "Ready"]
    assert stored["status"]["capacity"] == {"cpu": "1"}
