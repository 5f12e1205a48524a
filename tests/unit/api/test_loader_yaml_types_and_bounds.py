"""The loader against YAML-only values, durations too long for Go and v1beta1 kubelet errors: each is
a ValidationError naming the user's field, never a TypeError, OverflowError or infinite duration."""

from __future__ import annotations

import pytest

from karpy.api import duration, errors, manifest
from karpy.migration import convert

V1BETA1 = """apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      kubelet:
        maxPods: 30
        evictionHard: EVICTION
"""

V1 = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: a}
spec:
  template:
    metadata:
      labels: {team: LABEL}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: EXPIRE
"""


def _errors(text: str) -> list[errors.FieldError]:
    with pytest.raises(errors.ValidationError) as info:
        manifest.load_documents(text)
    return list(info.value.errors)


@pytest.mark.parametrize(("value", "found"), [
    ("!!set {a, b}", "a YAML set"), ("!!binary aGVsbG8=", "YAML binary data"),
    ("!!omap [{a: 1}]", "ordered mapping"), ("!!pairs [{a: 1}]", "ordered mapping"),
])
def test_a_yaml_only_value_anywhere_is_a_validation_error_naming_the_field(value: str, found: str) -> None:
    (err,) = _errors(V1.replace("LABEL", value).replace("EXPIRE", "720h"))
    assert err.path.startswith("spec.template.metadata.labels.team")
    assert found in str(err.found)


@pytest.mark.parametrize("value", ['{"memory.available": !!binary aGVsbG8=}', "!!set {a}",
                                   '{"memory.available": !!omap [{a: 1}]}'])
def test_a_v1beta1_kubelet_holding_a_yaml_set_or_binary_is_a_validation_error_in_load_and_convert(
        value: str) -> None:
    text = V1BETA1.replace("EVICTION", value)
    (err,) = _errors(text)
    assert err.path.startswith("spec.template.spec.kubelet.evictionHard")
    with pytest.raises(errors.ValidationError):
        convert.convert_texts([("old.yaml", text)])


def test_a_python_tag_is_refused_by_safe_loading() -> None:
    (err,) = _errors(V1.replace("LABEL", "!!python/object/apply:os.system ['true']").replace("EXPIRE", "1h"))
    assert err.expected == "valid YAML"


@pytest.mark.parametrize("expire", ["9" * 400 + "h", "2562048h", "99999999999999999999999s"])
def test_a_duration_longer_than_gos_largest_is_a_clear_error(expire: str) -> None:
    (err,) = _errors(V1.replace("LABEL", "a").replace("EXPIRE", expire))
    assert err.path == "spec.template.spec.expireAfter" and "Go's largest" in err.expected


def test_an_integer_too_large_for_a_float_in_a_seconds_field_is_a_clear_error() -> None:
    text = ("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\n"
            "spec:\n  providerRef: {name: default}\n  ttlSecondsAfterEmpty: " + "9" * 400 + "\n")
    (err,) = _errors(text)
    assert err.path == "spec.ttlSecondsAfterEmpty" and "Go's largest" in err.expected


@pytest.mark.parametrize("value", [10**400, 1e300, "9" * 5000, "9" * 400 + "ms", 2**63],
                         ids=["int-400-digits", "1e300", "5000-digit-string", "400-digit-ms", "2^63"])
def test_parse_duration_refuses_what_go_cannot_hold_without_overflow(value: object) -> None:
    with pytest.raises(duration.DurationTooLargeError):
        duration.parse_duration(value)  # type: ignore[arg-type]


def test_v1beta1_kubelet_errors_name_the_users_field_not_the_compatibility_annotation() -> None:
    (err,) = _errors(V1BETA1.replace("EVICTION", '{"memory.available": abc}'))
    assert err.path == "spec.template.spec.kubelet.evictionHard.memory.available"


def test_an_empty_unknown_key_is_named() -> None:
    (err,) = _errors(V1BETA1.replace("EVICTION", '{"": "5%"}'))
    assert err.path == 'spec.template.spec.kubelet.evictionHard[""]'


@pytest.mark.parametrize("text", ["9" * 2000 + "x", "1" * 3000 + ".", "5" * 1000 + "hm"])
def test_a_long_duration_text_is_refused_at_once_not_after_regex_backtracking(text: str) -> None:
    import time

    start = time.perf_counter()
    with pytest.raises(duration.DurationError):
        duration.parse_duration(text)
    assert time.perf_counter() - start < 0.5  # 24 s for "9" * 2000 + "x" before the length bound
