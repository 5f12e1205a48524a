"""The fast YAML path (:mod:`karpy.api.yaml_events`) against PyYAML's full loader: whenever it gives
documents they are the full loader's, with the same types and key order; whatever it does not take
(anchors, tags, keys given twice, bad YAML...) it leaves to the full loader; its flags never skip a
check that would have found something."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy.api import manifest, strict, yaml_events

EXAMPLES = int(os.environ.get("KARPY_FUZZ_EXAMPLES", "150"))


def full(text: str) -> list[Any]:
    loader = manifest._Loader(text)
    try:
        out = []
        while loader.check_data():
            out.append(loader.get_data())
        return out
    finally:
        loader.dispose()


def fast(text: str, prune: yaml_events.Prune | None = None) -> list[yaml_events.Document] | None:
    return yaml_events.read(manifest._Loader(text), prune)


def typed(value: Any) -> Any:
    """``value`` with every type and key order made part of what ``==`` compares."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def same_as_full(text: str) -> list[yaml_events.Document] | None:
    """The fast path's documents, checked against the full loader's (None when it left the text)."""
    docs = fast(text)
    try:
        expected = full(text)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        assert docs is None, "the fast path read what the full loader refuses"
        return None
    if docs is not None:
        assert [typed(d.data) for d in docs] == [typed(d) for d in expected]
        for d in docs:
            items = d.data["items"] if isinstance(d.data, dict) and d.data.get("kind") == "List" \
                and isinstance(d.data.get("items"), list) else [d.data]
            if d.plain_json:
                assert all(strict.check_structure(i, "x") == [] for i in items)
            if not d.dollar_brace:
                assert "${" not in repr(d.data)
    return docs


KUBECTL = """apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2026-01-01T00:00:00Z"
    labels:
      app: web
      "yes": "no"
    name: web-1
    namespace: default
  spec:
    containers:
    - image: nginx:1.27
      name: web
      resources:
        requests: {cpu: 250m, memory: 1Gi}
    nodeName: ip-10-0-0-1.ec2.internal
    priority: 0
    terminationGracePeriodSeconds: 30
  status:
    phase: Running
    startTime: 2026-01-01T00:00:00Z
- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      note: |
        a block
        scalar
    name: ip-10-0-0-1.ec2.internal
  status:
    capacity: {cpu: "4", pods: "58"}
    conditions: [{type: Ready, status: "True"}]
kind: List
metadata:
  resourceVersion: ""
"""


def test_a_kubectl_dump_is_read_by_the_fast_path_as_the_full_loader_reads_it() -> None:
    docs = same_as_full(KUBECTL)
    assert docs is not None and len(docs) == 1
    assert docs[0].plain_json and not docs[0].dollar_brace
    pod = docs[0].data["items"][0]
    assert pod["metadata"]["labels"] == {"app": "web", "yes": "no"}
    assert pod["status"]["startTime"] == "2026-01-01T00:00:00Z"  # an unquoted date stays a string
    assert pod["spec"]["priority"] == 0 and type(pod["spec"]["priority"]) is int


def test_prune_sees_each_item_of_a_list_once_as_soon_as_it_is_read() -> None:
    seen: list[str] = []

    def prune(obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["name"])
        obj.pop("status", None)

    docs = fast(KUBECTL, prune)
    assert docs is not None and docs[0].items_pruned
    assert seen == ["web-1", "ip-10-0-0-1.ec2.internal"]
    assert all("status" not in item for item in docs[0].data["items"])


def test_items_of_something_that_is_not_a_list_are_not_pruned() -> None:
    text = "kind: Thing\nitems:\n- a: 1\n  status: {x: 1}\n"
    assert fast(text, lambda obj: obj.clear()) is None  # read whole by the full loader instead
    docs = fast(text)
    assert docs is not None and docs[0].data == {"kind": "Thing", "items": [{"a": 1, "status": {"x": 1}}]}


@pytest.mark.parametrize("text", [
    "a: &x {b: 1}\nc: *x\n",  # anchor and alias
    "base: &b {x: 1}\nm:\n  <<: *b\n  y: 2\n",  # merge key
    "a: 1\na: 2\n",  # a key given twice (the full loader warns)
    "a: !local 1\n",  # a tag of its own
    "s: !!set {a, b}\n",
    "? [a, b]\n: 1\n",  # a list as a key
    "? {a: 1}\n: 1\n",
    "n: " + "9" * 5000 + "\n",  # an integer too large to read
    "a: [1, 2\n",  # does not parse
    "a: b: c\n",
    "x: " + "[" * 80 + "]" * 80 + "\n",  # deeper than the strict checks allow
    "=: 1\n",  # the value key
    "a: <<\n",
])
def test_what_the_fast_path_does_not_take_goes_to_the_full_loader(text: str) -> None:
    assert fast(text) is None
    same_as_full(text)


def test_the_structure_flag_stays_off_where_the_strict_checks_would_find_something() -> None:
    for text in ("1: a\n", "a: .inf\n", "a: .nan\n", "null: 1\n", "true: 1\n",
                 "x: " + "[" * 64 + "]" * 64 + "\n"):
        docs = same_as_full(text)
        assert docs is not None and not docs[0].plain_json, text
        assert strict.check_structure(docs[0].data, "x") != []


def test_a_list_item_with_more_values_than_allowed_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(strict, "MAX_NODES", 50)
    def small() -> dict[str, Any]:
        return {"kind": "ConfigMap", "data": {f"k{i}": "v" for i in range(10)}}

    big = {"kind": "ConfigMap", "data": {f"k{i}": "v" for i in range(60)}}
    for items, checked in (([small(), small()], True), ([small(), big], False)):
        docs = same_as_full(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
        assert docs is not None and docs[0].plain_json is checked
    assert strict.check_structure(big, "x") != []
    docs = same_as_full(yaml.safe_dump(big))  # a document on its own: all its values count
    assert docs is not None and not docs[0].plain_json


def test_a_shell_variable_anywhere_turns_the_dollar_brace_flag_on() -> None:
    for text in ("a: ${X}\n", "a: 'x ${X}'\n", "a: \"\\x24{X}\"\n", "${X}: 1\n", "a: |\n  run ${X}\n"):
        docs = same_as_full(text)
        assert docs is not None and docs[0].dollar_brace, text


def test_several_documents_empty_ones_and_scalars_read_as_the_full_loader_reads_them() -> None:
    for text in ("", "---\n", "a: 1\n---\nb: 2\n...\n---\n- x\n", "plain\n", "--- 3\n", "{}\n", "[]\n",
                 "a: ~\nb: null\nc: Null\nd: ''\ne:\n", "f: 0x1F\ng: 0o17\nh: 017\ni: 1_000\nj: 1:30\n",
                 "k: 1.5e3\nl: -.inf\nm: yes\nn: Off\no: 2026-01-01\np: '1'\n"):
        same_as_full(text)


_SCALARS = st.one_of(
    st.sampled_from(["yes", "no", "on", "1", "0x1F", "017", "1:30", "1e3", ".5", "~", "null", "", "2026-01-01",
                     "2026-01-01T00:00:00Z", "${X}", "a: b", "- x", "#c", "'q'", '"dq"', "<<", "=", ".inf",
                     "True", "100m", "1Gi", " lead", "trail ", "multi\nline", "tab\there", "ü", "*a", "&b", "!t"]),
    st.text(max_size=8), st.integers(min_value=-(2**70), max_value=2**70), st.booleans(), st.none(),
    st.floats(allow_nan=False, allow_infinity=False))
_KEYS = st.one_of(st.sampled_from(["metadata", "name", "yes", "1", "items", "kind", "List", "~", "<<"]),
                  st.text(min_size=1, max_size=6), st.integers(-5, 5))
_DATA = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=30)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(_DATA, min_size=1, max_size=3), flow=st.sampled_from([None, True, False]),
       style=st.sampled_from([None, "'", '"', "|"]))
def test_any_dumped_data_reads_as_the_full_loader_reads_it(docs: list[Any], flow: bool | None,
                                                           style: str | None) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow, default_style=style, sort_keys=False,
                              allow_unicode=True)
    result = same_as_full(text)
    assert result is not None or "&id" in text  # only data shared between places needs the full loader


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.tuples(st.integers(0, len(KUBECTL)), st.integers(0, 12),
                               st.sampled_from(["", ":", "- ", "\n", "  ", "&a ", "*a", "!!str ", "{", "]", "'",
                                                '"', "? ", "---\n", "a: 1\n", "\t", "%YAML 1.1\n", "${V}"])),
                     min_size=1, max_size=4))
def test_a_mangled_dump_reads_as_the_full_loader_reads_it_or_goes_to_it(cuts: list[tuple[int, int, str]]) -> None:
    text = KUBECTL
    for at, drop, insert in cuts:
        at = min(at, len(text))
        text = text[:at] + insert + text[at + drop:]
    same_as_full(text)


def test_a_float_key_that_is_not_finite_is_flagged() -> None:
    docs = same_as_full(".nan: 1\n")
    assert docs is not None and not docs[0].plain_json
    assert math.isnan(next(iter(docs[0].data)))
