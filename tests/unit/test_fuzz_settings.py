"""Hypothesis fuzzing of the settings reader (``--settings-file``, environment, flags): any file text
or value gives Settings whose every number is in its range, or a ValidationError; never another
exception. Bounded in CI; ``KARPY_FUZZ_EXAMPLES=5000`` for a longer local run."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy import settings as settings_mod
from karpy import settings_sources
from karpy.api import errors

EXAMPLES = int(os.environ.get("KARPY_FUZZ_EXAMPLES", "150"))
BASE = {"clusterName": "prod", "batchIdleDuration": "1s", "batchMaxDuration": "10s", "registrationTTL": "15m",
        "launchTTL": "5m", "iceCacheTTL": "3m", "spotToSpotMinFlexibility": 15, "consolidationMinSaving": 0.01,
        "consolidationValidationDelay": "15s", "featureGates": "NodeRepair=true", "vmMemoryOverheadPercent": 0.075,
        "reservedENIs": 0, "isolatedVPC": False, "logLevel": "info", "metricsPort": 8080, "healthProbePort": 8081,
        "kubeClientQPS": 200, "kubeClientBurst": 300, "interruptionQueue": "q"}
TEXT = st.one_of(st.text(max_size=12), st.sampled_from([
    "inf", "-inf", "nan", ".inf", "1e400", "-1", "0", "1ns", "1us", "100000h", "9" * 30, "9" * 5000,
    "\uff18\uff10\uff18\uff10", "\u0668\u0660", "a\x00b", "a\nb", " 8080 ", "true", "NodeRepair=maybe", "x=y,=",
    "0x1F", "1_000", "\uff18\uff1080"]))
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63 - 2, max_value=10**300), TEXT,
    st.floats(allow_nan=True, allow_infinity=True), st.sets(st.integers(0, 3), max_size=2), st.binary(max_size=4),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
INSERTS = ["&a ", "*a", ": ", "\n", "- ", "{", "[", "!!binary ", "!!set ", "!!omap ", "!!python/object:os.system ",
           "!!timestamp ", "? ", ".inf", ".nan", "9" * 5000, "~", "---\n", "\t", "'"]


def _check(s: settings_mod.Settings) -> None:
    for name in ("batch_idle_duration", "batch_max_duration", "registration_ttl", "launch_ttl", "ice_cache_ttl",
                 "consolidation_validation_delay", "consolidation_min_saving", "vm_memory_overhead_percent"):
        value = getattr(s, name)
        assert math.isfinite(value) and value >= 0, (name, value)
    assert s.registration_ttl >= 1 and s.launch_ttl >= 1 and s.ice_cache_ttl >= 1
    assert 0 < s.metrics_port < 65536 and 0 < s.health_probe_port < 65536 and s.metrics_port != s.health_probe_port
    assert 0 <= s.reserved_enis <= 100 and 0 <= s.spot_to_spot_min_flexibility <= 1000
    assert s.cluster_name.isascii() and s.cluster_name.isprintable()


def _load(**kwargs: Any) -> None:
    with contextlib.suppress(errors.ValidationError):
        _check(settings_sources.load(**kwargs))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_settings_file_with_hostile_values_or_text_gives_settings_in_range_or_a_validation_error(
        tmp_path: Path, data: st.DataObject) -> None:
    doc = dict(BASE)
    for _ in range(data.draw(st.integers(0, 3))):
        doc[data.draw(st.sampled_from(sorted(BASE)))] = data.draw(HOSTILE)
    text = yaml.safe_dump(doc, sort_keys=False)
    for _ in range(data.draw(st.integers(0, 3))):
        pos = data.draw(st.integers(0, len(text)))
        text = text[:pos] + data.draw(st.sampled_from(INSERTS)) + text[pos:]
    f = tmp_path / "settings.yaml"
    f.write_text(text, encoding="utf-8")
    _load(flags={}, environ={}, file=f)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(settings_sources.environment().values())), TEXT, max_size=4),
       st.dictionaries(st.sampled_from(sorted(settings_sources.environment())), TEXT, max_size=3))
def test_hostile_environment_and_flag_values_give_settings_in_range_or_a_validation_error(
        environ: dict[str, str], flags: dict[str, str]) -> None:
    _load(flags=flags, environ=environ)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.dictionaries(st.one_of(st.sampled_from(sorted(BASE)), st.text(max_size=8)), HOSTILE, max_size=6))
def test_a_settings_mapping_of_hostile_values_gives_settings_in_range_or_a_validation_error(
        data: dict[str, Any]) -> None:
    with contextlib.suppress(errors.ValidationError):
        _check(settings_mod.Settings.from_mapping(data))
