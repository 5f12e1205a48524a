"""Drift wave arithmetic: max surge as a count or a percentage, the stricter of surge and budget, and the
annotations read (or reported and ignored)."""

from __future__ import annotations

import pytest

from karpy.disruption import wave_config


def test_a_count_max_surge_is_the_count_whatever_the_pool_size() -> None:
    assert wave_config.surge_nodes("3", 12) == 3
    assert wave_config.surge_nodes("3", 1) == 3
    assert wave_config.surge_nodes(" 5 ", 100) == 5


def test_a_percentage_max_surge_is_rounded_up_and_never_zero() -> None:
    assert wave_config.surge_nodes("25%", 12) == 3
    assert wave_config.surge_nodes("10%", 12) == 2
    assert wave_config.surge_nodes("1%", 5) == 1
    assert wave_config.surge_nodes("100%", 7) == 7
    assert wave_config.surge_nodes("50%", 0) == 1


@pytest.mark.parametrize("text", ["0", "0%", "101%", "-1", "three", "3.5", "", "%", "3 nodes", "1e3"])
def test_a_max_surge_karpy_cannot_read_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="expected a positive whole number"):
        wave_config.surge_nodes(text, 10)


def test_the_stricter_of_max_surge_and_budget_sizes_the_wave() -> None:
    assert wave_config.wave_size(3, 2, 12) == 2
    assert wave_config.wave_size(3, 10, 12) == 3
    assert wave_config.wave_size(3, 10, 1) == 1
    assert wave_config.wave_size(3, 0, 12) == 0
    assert wave_config.wave_size(3, -1, 12) == 0


def test_a_pool_without_the_annotations_has_no_waves() -> None:
    assert wave_config.parse("default", {"other": "x"}) == (None, [])


def test_both_annotations_are_read() -> None:
    cfg, problems = wave_config.parse("default", {wave_config.MAX_SURGE: "25%", wave_config.WAVE_SETTLE: "1m30s"})
    assert problems == []
    assert cfg == wave_config.Config(max_surge="25%", settle=90.0)
    assert cfg.surge(12) == 3


def test_a_settle_alone_waits_between_waves_of_one_node() -> None:
    cfg, _ = wave_config.parse("default", {wave_config.WAVE_SETTLE: "2m"})
    assert cfg == wave_config.Config(max_surge="1", settle=120.0)
    assert cfg.surge(50) == 1


def test_a_surge_alone_starts_the_next_wave_once_the_last_is_done() -> None:
    cfg, _ = wave_config.parse("default", {wave_config.MAX_SURGE: "4"})
    assert cfg == wave_config.Config(max_surge="4", settle=0.0)


def test_a_bad_max_surge_is_reported_naming_object_field_expected_found_and_its_default_kept() -> None:
    cfg, problems = wave_config.parse("gpu", {wave_config.MAX_SURGE: "0", wave_config.WAVE_SETTLE: "2m"})
    assert cfg == wave_config.Config(max_surge=wave_config.DEFAULT_SURGE, settle=120.0)
    (p,) = problems
    assert str(p) == ("NodePool gpu: metadata.annotations.karpy.io/drift-max-surge: expected a positive whole "
                      "number of nodes (\"3\") or a percentage of the NodePool's nodes (\"1%\"-\"100%\"), found '0'")
    assert "waves of one drifted node" in wave_config.default_kept(p)


def test_bad_values_in_both_annotations_leave_karpenters_drift() -> None:
    cfg, problems = wave_config.parse("gpu", {wave_config.MAX_SURGE: "lots", wave_config.WAVE_SETTLE: "soon"})
    assert cfg is None
    assert [p.path for p in problems] == ["metadata.annotations.karpy.io/drift-max-surge",
                                          "metadata.annotations.karpy.io/drift-wave-settle"]
    assert problems[1].found == "soon"
    assert "0s" in wave_config.default_kept(problems[1])


@pytest.mark.parametrize("text", ["Never", "-1m", "2 minutes", ""])
def test_a_settle_that_is_not_a_finite_duration_is_reported(text: str) -> None:
    cfg, problems = wave_config.parse("default", {wave_config.MAX_SURGE: "2", wave_config.WAVE_SETTLE: text})
    assert cfg == wave_config.Config(max_surge="2", settle=0.0)
    assert [p.path for p in problems] == ["metadata.annotations.karpy.io/drift-wave-settle"]


def test_the_problems_of_nodepool_manifests_are_listed_for_simulate() -> None:
    manifests = [
        {"kind": "NodePool", "metadata": {"name": "a", "annotations": {wave_config.MAX_SURGE: "150%"}}},
        {"kind": "NodePool", "metadata": {"name": "b", "annotations": {wave_config.MAX_SURGE: "2"}}},
        {"kind": "Deployment", "metadata": {"name": "c", "annotations": {wave_config.MAX_SURGE: "x"}}},
        {"kind": "NodePool", "metadata": {"name": "d"}},
    ]
    (only,) = wave_config.problems_of(manifests)
    assert only.startswith("NodePool a: metadata.annotations.karpy.io/drift-max-surge: expected")
    assert only.endswith("found '150%'; the annotation is ignored (no max surge: waves of one drifted node)")
