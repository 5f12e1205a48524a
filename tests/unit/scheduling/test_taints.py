"""Taints and tolerations: Kubernetes matching rules and the scheduler's hard filter."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from karpy.scheduling import taints


@dataclass(frozen=True)
class Toleration:
    """Stands in for karpy.api.podspec.Toleration."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class Taint:
    """Stands in for karpy.api.node.Taint."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


GPU = Taint("nvidia.com/gpu", "true", "NoSchedule")
DISRUPTED = Taint("karpenter.sh/disrupted", "", "NoSchedule")
SOFT = Taint("example.com/spot", "yes", "PreferNoSchedule")
EVICT = Taint("node.kubernetes.io/unreachable", "", "NoExecute")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("", "Exists"), GPU, True),
        (Toleration("", "Exists"), EVICT, True),
        (Toleration("", "Exists", effect="NoExecute"), GPU, False),
        (Toleration("nvidia.com/gpu", "Exists"), GPU, True),
        (Toleration("nvidia.com/gpu", "Exists", "anything"), GPU, True),
        (Toleration("nvidia.com/gpu", "Equal", "true"), GPU, True),
        (Toleration("nvidia.com/gpu", "", "true"), GPU, True),
        (Toleration("nvidia.com/gpu", "Equal", "false"), GPU, False),
        (Toleration("nvidia.com/gpu", "Equal", ""), GPU, False),
        (Toleration("nvidia.com/gpu", "Equal", "true", "NoSchedule"), GPU, True),
        (Toleration("nvidia.com/gpu", "Equal", "true", "NoExecute"), GPU, False),
        (Toleration("nvidia.com/gpu", "Equal", "true", ""), GPU, True),
        (Toleration("amd.com/gpu", "Exists"), GPU, False),
        (Toleration("karpenter.sh/disrupted", "Exists", effect="NoSchedule"), DISRUPTED, True),
        (Toleration("karpenter.sh/disrupted", "Equal", ""), DISRUPTED, True),
        (Toleration("nvidia.com/gpu", "Gt", "0"), GPU, False),
    ],
)
def test_a_toleration_matches_a_taint_by_kubernetes_rules(
        toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert taints.toleration_matches(toleration, taint) is expected
    assert taints.tolerates([toleration], taint) is expected


def test_a_taint_is_tolerated_when_any_toleration_matches() -> None:
    tolerations = [Toleration("other", "Exists"), Toleration("nvidia.com/gpu", "Equal", "true")]
    assert taints.tolerates(tolerations, GPU)
    assert not taints.tolerates([], GPU)


def test_first_untolerated_returns_the_first_hard_taint_nobody_tolerates() -> None:
    tolerations = [Toleration("nvidia.com/gpu", "Exists")]
    assert taints.first_untolerated(tolerations, [GPU, SOFT, DISRUPTED, EVICT]) is DISRUPTED
    assert taints.first_untolerated(tolerations, [GPU]) is None
    assert taints.first_untolerated(tolerations, []) is None


def test_prefer_no_schedule_is_ignored_unless_the_scheduler_treats_it_as_hard() -> None:
    assert taints.first_untolerated([], [SOFT]) is None
    assert taints.first_untolerated([], [SOFT], effects=taints.ALL_EFFECTS) is SOFT
    assert taints.first_untolerated([Toleration("example.com/spot", "Exists")], [SOFT],
                                    effects=taints.ALL_EFFECTS) is None


def test_untolerated_lists_every_hard_taint_in_order() -> None:
    assert taints.untolerated([], [EVICT, SOFT, GPU]) == [EVICT, GPU]
    assert taints.untolerated([Toleration("", "Exists")], [EVICT, SOFT, GPU]) == []


def test_describe_prints_taints_as_kubectl_does() -> None:
    assert taints.describe(GPU) == "nvidia.com/gpu=true:NoSchedule"
    assert taints.describe(DISRUPTED) == "karpenter.sh/disrupted:NoSchedule"
    assert taints.reason(GPU) == "did not tolerate taint nvidia.com/gpu=true:NoSchedule"


def test_merge_adds_only_taints_with_a_new_key_and_effect() -> None:
    replaced_value = Taint("nvidia.com/gpu", "false", "NoSchedule")
    other_effect = Taint("nvidia.com/gpu", "true", "NoExecute")
    merged = taints.merge([GPU], [replaced_value, other_effect, DISRUPTED, DISRUPTED])
    assert merged == [GPU, other_effect, DISRUPTED]
    assert taints.same_taint(GPU, replaced_value)
    assert not taints.same_taint(GPU, other_effect)
