"""``interface.changed_parts`` (run for every watched write) against a plain reference implementation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from karpy.kube import interface


def _reference(old: Mapping[str, Any], new: Mapping[str, Any]) -> frozenset[str]:
    """What changed_parts means, written the obvious way (its first implementation)."""
    out: set[str] = set()
    for key in old.keys() | new.keys():
        before, after = old.get(key), new.get(key)
        if before is after:
            continue
        if key == "metadata" and isinstance(before, Mapping) and isinstance(after, Mapping):
            if any(before.get(k) != after.get(k) for k in before.keys() | after.keys() if k != "resourceVersion"):
                out.add(key)
        elif key == interface.STATUS and isinstance(before, Mapping) and isinstance(after, Mapping):
            if _reference_messages_only(before, after):
                out.add(interface.CONDITION_MESSAGES)
            elif before != after:
                out.add(key)
        elif before != after:
            out.add(key)
    return frozenset(out)


def _reference_messages_only(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Different, and equal once every condition's message is blanked (a message added or removed is more)."""
    def without_messages(status: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(status)
        conditions = out.get("conditions")
        if isinstance(conditions, list):
            out["conditions"] = [{k: None if k == "message" else v for k, v in c.items()}
                                 if isinstance(c, Mapping) else c for c in conditions]
        return out

    return before != after and without_messages(before) == without_messages(after)


_values = st.one_of(st.none(), st.sampled_from(["a", "b", "1"]), st.integers(0, 2), st.booleans())
_conditions = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["Ready", "PodScheduled"])},
                                             optional={"status": st.sampled_from(["True", "False"]),
                                                       "message": st.sampled_from(["x", "y"])}), max_size=2)
_metadata = st.dictionaries(st.sampled_from(["name", "labels", "resourceVersion", "uid", "finalizers"]),
                            _values, max_size=4)
_status = st.dictionaries(st.sampled_from(["phase", "conditions"]),
                          st.one_of(_values, _conditions), max_size=2)
_objects = st.fixed_dictionaries({}, optional={"metadata": _metadata, "status": _status, "spec": _values,
                                               "kind": st.just("Pod")})


@settings(max_examples=400, deadline=None)
@given(old=_objects, new=_objects)
def test_changed_parts_says_what_the_reference_says_for_any_two_versions(old: dict[str, Any],
                                                                         new: dict[str, Any]) -> None:
    assert interface.changed_parts(old, new) == _reference(old, new)


@settings(max_examples=200, deadline=None)
@given(old=_objects, status=_status, metadata=_metadata)
def test_changed_parts_agrees_when_a_write_keeps_some_parts_as_the_same_objects(
        old: dict[str, Any], status: dict[str, Any], metadata: dict[str, Any]) -> None:
    for new in ({**old, "status": status}, {**old, "metadata": {**old.get("metadata", {}), **metadata}}, dict(old)):
        assert interface.changed_parts(old, new) == _reference(old, new)


@settings(max_examples=200, deadline=None)
@given(old=_objects, conditions=st.lists(st.fixed_dictionaries({"type": st.just("PodScheduled"),
                                                                 "message": st.sampled_from(["x", "y"])}),
                                          min_size=1, max_size=2))
def test_a_write_that_only_rewords_conditions_says_so_as_the_reference_does(
        old: dict[str, Any], conditions: list[dict[str, Any]]) -> None:
    before = {**old, "status": {"phase": "Pending", "conditions": conditions}}
    reworded = [{**c, "message": c["message"] + "!"} for c in conditions]
    after = {**before, "status": {"phase": "Pending", "conditions": reworded}}
    assert interface.changed_parts(before, after) == _reference(before, after) == {interface.CONDITION_MESSAGES}
