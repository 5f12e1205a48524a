from __future__ import annotations

import pytest

from karpy.api import duration, errors, fields


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("720h", 720 * 3600.0),
        ("1h30m", 5400.0),
        ("10m0s", 600.0),
        ("2h45m10s", 9910.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("0", 0.0),
        ("0s", 0.0),
    ],
)
def test_go_duration_strings_parse_to_seconds(text: str, seconds: float) -> None:
    assert duration.parse_duration(text) == pytest.approx(seconds)


def test_never_parses_to_none() -> None:
    assert duration.parse_duration("Never") is None


def test_an_integer_is_a_number_of_seconds_as_in_v1alpha5_ttl_fields() -> None:
    assert duration.parse_duration(2592000) == 2592000.0


@pytest.mark.parametrize("text", ["1d", "h", "-5m", "1h 30m", "never", "", "5 minutes", "+"])
def test_text_that_is_not_a_duration_is_rejected(text: str) -> None:
    with pytest.raises(duration.DurationError):
        duration.parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (30.0, "30s"),
        (720 * 3600.0, "720h"),
        (5400.0, "1h30m"),
        (0.0, "0s"),
        (None, "Never"),
        (1.5, "1.5s"),
        (3661.0, "1h1m1s"),
    ],
)
def test_format_duration_gives_the_short_go_form(seconds: float | None, text: str) -> None:
    assert duration.format_duration(seconds) == text
    assert duration.parse_duration(text) == seconds


def test_reading_a_field_enforces_karpenters_pattern_and_names_the_path() -> None:
    f = fields.Fields({"consolidateAfter": "1.5h"}, "NodePool default", "spec.disruption")
    with pytest.raises(errors.ValidationError) as exc:
        duration.read(f, "consolidateAfter")
    err = exc.value.errors[0]
    assert err.path == "spec.disruption.consolidateAfter"
    assert "1h30m" in err.expected
    assert err.found == "1.5h"


def test_reading_a_bare_number_says_to_write_seconds() -> None:
    f = fields.Fields({"expireAfter": 30}, "NodePool default", "spec.template.spec")
    with pytest.raises(errors.ValidationError) as exc:
        duration.read(f, "expireAfter")
    assert "'30s'" in exc.value.errors[0].expected


def test_never_is_refused_where_a_field_does_not_allow_it() -> None:
    f = fields.Fields({"terminationGracePeriod": "Never"}, "NodePool default", "spec.template.spec")
    with pytest.raises(errors.ValidationError):
        duration.read(f, "terminationGracePeriod", never=False)


def test_budget_durations_accept_only_minutes_and_hours() -> None:
    assert duration.is_budget_duration("8h")
    assert duration.is_budget_duration("1h30m")
    assert duration.is_budget_duration("10m0s")
    assert not duration.is_budget_duration("30s")
