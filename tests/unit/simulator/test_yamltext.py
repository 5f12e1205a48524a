"""The fast YAML writer: byte for byte PyYAML's text of any JSON-shaped data (hypothesis, with strings made
of the tokens that change a scalar's style: indicators, resolvable words, breaks, unicode, long lines),
its fast path taken for the data of a run, and PyYAML's text wherever it is unsure.
``KARPY_FUZZ_EXAMPLES=5000`` for a longer local run."""

from __future__ import annotations

import math
import os
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy.simulator import yamltext

EXAMPLES = int(os.environ.get("KARPY_FUZZ_EXAMPLES", "400"))
TOKENS = [
    # words the writer leaves plain
    "app", "default", "kubernetes.io/arch", "us-east-1a", "100m", "1Gi", "i-0abc", "aws:///us-east-1a/i-1", "a_b",
    "/path", "x=y", "k8s", "nodepool-7f9c",
    # words the resolver reads as something else
    "true", "False", "no", "Yes", "on", "OFF", "y", "n", "~", "null", "Null", "", "0", "-1", "+12", "0x1F", "0o17",
    "1_000", "1e3", "1.5", "1.0e+20", ".inf", "-.Inf", ".NaN", "2024-01-01", "2024-01-01T00:00:00Z",
    "2001-12-14 21:59:43.10 -5", "12:30", "190:20:30", "<<", "=", "!", "&", "*",
    # indicators and whitespace
    "---", "...", "-", "?", ":", "#", " #", "# ", ": ", "- ", "? ", "'", '"', "%", "@", "`", "{", "}", "[", "]", ",",
    "|", ">", " ", "  ", "\n", "\n\n", "\r", "\t", "\x00", "\x07", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff",
    "\ufffe", "\u00a0", "é", "日本語", "😀", "\U0010fffd", "\ud7ff", "\ue000",
    # long ones (folding at column 120)
    "word " * 30, "x" * 130, "a b" * 50, "long-" * 30, "k" * 99, "k" * 100, "k" * 127, "k" * 128,
    "w " * 55,
]
TEXT = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=6).map("".join),
    st.lists(st.sampled_from(["lorem", "ipsum", "dolor", "sit", "amet", "a", "bc"]), max_size=40).map(" ".join),
    st.text(max_size=12),
)
NUMBERS = st.one_of(
    st.integers(), st.integers(min_value=2**63 - 2, max_value=10**30), st.booleans(), st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e16, 1e17, 1e-05, 2.5e-07, 1e300, 123456789.125, 0.1, 3.0]),
)
SCALARS = st.one_of(TEXT, NUMBERS)
DATA = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=25)
DOCS = st.one_of(st.dictionaries(TEXT, DATA, max_size=5), st.lists(DATA, max_size=5))


class PythonNoAliases(yaml.SafeDumper):
    """``yaml.safe_dump``'s pure-Python dumper, no anchors: the text the document's contract names."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def python_dump(value: Any) -> str:
    text: str = yaml.dump(value, Dumper=PythonNoAliases, sort_keys=False, allow_unicode=True, width=120)
    return text


def has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, dict):
        return any(has_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(has_nan(v) for v in value)
    return False


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "app-7f9c-x2x", "namespace": "default", "labels": {"app": "web", "tier": "1"},
                    "creationTimestamp": "2024-01-01T00:00:10Z", "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app-7f9c", "controller": True}]},
       "spec": {"nodeName": "ip-10-0-1-2.ec2.internal", "containers": [
           {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}},
            "args": ["--port", "8080"], "env": []}], "tolerations": [], "nodeSelector": {}},
       "status": {"phase": "Running", "conditions": [
           {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:40Z"}],
           "startedAt": 30.5, "restarts": 0, "ip": None, "message": "Pod should schedule on: nodeclaim/default-x2x"}}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCS)
def test_the_fast_writer_writes_pyyamls_text_of_any_json_shaped_document(doc: Any) -> None:
    assert yamltext.fast(doc) == yamltext.pyyaml(doc)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DATA, st.sampled_from([0, 2]))
def test_an_item_the_fast_writer_is_sure_of_reads_as_in_pyyamls_text_of_the_whole_list(item: Any,
                                                                                          indent: int) -> None:
    text = yamltext.block_item(item, indent)
    whole = {"items": [item]} if indent == 0 else {"objects": {"items": [item]}}
    expected = yamltext.pyyaml(whole).split("\n", 1 + indent // 2)[-1]
    assert text is None or text == expected


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCS)
def test_the_fast_writers_text_reads_back_as_the_same_data(doc: Any) -> None:
    if has_nan(doc):  # NaN is not equal to itself
        return
    assert yaml.safe_load(yamltext.fast(doc)) == ({} if doc == {} else [] if doc == [] else doc)


def test_a_pod_like_object_is_written_by_the_fast_path_as_pyyaml_writes_it() -> None:
    text = yamltext.block_item(POD, 2)
    assert text is not None
    assert text == yamltext.pyyaml({"objects": {"pods": [POD]}}).split("\n", 2)[2]
    assert "creationTimestamp: '2024-01-01T00:00:10Z'" in text  # a timestamp, quoted to stay a string
    assert "    status: 'True'\n" in text and "  - apiVersion: v1\n" in text and "env: []" in text


def test_every_kind_of_scalar_the_fast_path_takes_is_spelt_as_pyyaml_spells_it() -> None:
    values = ["plain", "", "true", "no", "~", "null", "123", "0x1F", "1e3", ".inf", "2024-01-01", "12:30", "<<",
              "=", "-", "- a", "-a", "?", "?a", ":a", "a:", "a: b", "a:b", "a #b", "a#b", "#a", "---x", "...x",
              " a", "a ", "it's", "'q'", '"dq"', "é日本", "\u00a0x", "@x", "%x", "a, b", "[x]", "{x}", "a b c",
              None, True, False, 0, -7, 2**70, 0.5, -0.0, 1e17, 1e-05, float("inf"), float("-inf"),
              float("nan")]
    for value in values:
        doc = {"k": value, "l": [value], "n": [[value]], "m": [{"k": value}]}
        assert yamltext.block_item(doc, 0) is not None, value
        assert yamltext.fast(doc) == yamltext.pyyaml(doc), value


def test_what_the_fast_path_is_unsure_of_is_left_to_pyyaml() -> None:
    class Name(str):
        pass

    unsure = [{"k" * 130: 1}, {"": 1}, {1: "int key"}, {"multi\nline": 1}, ("a", "tuple"), Name("x")]
    for value in unsure:
        doc = {"key": value}
        assert yamltext.block_item(doc, 0) is None, value
        if isinstance(value, dict):  # the safe dumper refuses the others, as it always did
            assert yamltext.fast(doc) == yamltext.pyyaml(doc), value


def test_a_string_pyyaml_folds_quotes_over_lines_or_escapes_is_its_text_of_that_string_alone_at_that_place() -> None:
    for value in ["two\nlines", "trailing\n", " lead\n\n space", "tab\there", "emoji 😀", "nel\x85", "bom\ufeff",
                  "\x00", "word " * 30, "it's " * 30, "- " + "x " * 70, "\u2028 " * 50]:
        for doc in ({"key": value}, {"l": [value]}, {"m": [{"k": value, "d": {"e": [[value]]}}]}):
            for indent in (0, 2):
                text = yamltext.block_item(doc, indent)
                whole = {"items": [doc]} if indent == 0 else {"objects": {"items": [doc]}}
                assert text == yamltext.pyyaml(whole).split("\n", 1 + indent // 2)[-1], (value, doc, indent)


def test_a_long_plain_scalar_without_a_space_is_written_on_one_line_by_the_fast_path() -> None:
    doc = {"key": "x" * 300, "list": ["y" * 300]}
    text = yamltext.block_item(doc, 0)
    assert text is not None and text == yamltext.pyyaml({"items": [doc]}).split("\n", 1)[1]
    assert max(len(line) for line in text.splitlines()) > 300


def test_around_column_120_a_scalar_with_a_space_is_written_as_pyyaml_folds_it_or_not() -> None:
    for length in range(100, 131):
        for text in ("x" * (length - 2) + " y", "y " + "x" * (length - 2), "it's " + "x" * (length - 5)):
            for doc in ({"key": text}, {"list": [text]}, {"l": [{"deeper": text}]}, {"true": [[text]]}):
                assert yamltext.fast(doc) == yamltext.pyyaml(doc), (length, doc)
                fast = yamltext.block_item(doc, 2)
                assert fast is None or fast == python_dump({"o": {"i": [doc]}}).split("\n", 2)[2], (length, doc)


def test_keys_near_the_simple_key_limit_are_written_as_pyyaml_writes_them() -> None:
    for length in range(90, 131):
        doc = {"k" * length: "v", "n": {"k" * length: ["v"]}}
        assert yamltext.fast(doc) == yamltext.pyyaml(doc), length
        fast = yamltext.block_item(doc, 0)
        assert fast is None or fast == python_dump({"i": [doc]}).split("\n", 1)[1], length


def test_a_foldable_string_under_a_key_the_resolver_would_misread_is_spliced_not_left_whole_to_pyyaml() -> None:
    for key in ("yes", "null", "1.5", "on"):
        item = {key: "word " * 40, "after": 1}
        text = yamltext.block_item(item, 0)
        assert text is not None  # the key is quoted and the long string spliced: the item stays on the fast path
        assert text == yamltext.pyyaml([item])
