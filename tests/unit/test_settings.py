"""Operator settings read from camelCase mappings."""

from __future__ import annotations

import pytest

from karpy import settings
from karpy.api import errors


def test_defaults_are_karpenters() -> None:
    s = settings.Settings()
    assert (s.batch_idle_duration, s.batch_max_duration) == (1.0, 10.0)
    assert (s.registration_ttl, s.launch_ttl, s.ice_cache_ttl) == (900.0, 300.0, 180.0)
    assert s.spot_to_spot_consolidation is False
    assert s.consolidation_min_saving == 0.01
    assert s.consolidation_validation_delay == 15.0


def test_camel_case_keys_with_go_durations_are_read() -> None:
    s = settings.Settings.from_mapping({
        "clusterName": "prod", "batchIdleDuration": "500ms", "batchMaxDuration": "30s",
        "registrationTTL": "20m", "launchTTL": 120, "iceCacheTTL": "1m30s",
        "spotToSpotConsolidation": "true", "consolidationMinSaving": "0.05",
        "consolidationValidationDelay": "5s"})
    assert s.cluster_name == "prod"
    assert s.batch_idle_duration == 0.5
    assert s.batch_max_duration == 30.0
    assert s.registration_ttl == 1200.0
    assert s.launch_ttl == 120.0
    assert s.ice_cache_ttl == 90.0
    assert s.spot_to_spot_consolidation is True
    assert s.consolidation_min_saving == 0.05
    assert s.consolidation_validation_delay == 5.0


def test_absent_and_empty_mappings_give_the_defaults() -> None:
    assert settings.Settings.from_mapping(None) == settings.Settings()
    assert settings.Settings.from_mapping({}) == settings.Settings()


def test_to_mapping_round_trips() -> None:
    s = settings.Settings(cluster_name="x", batch_idle_duration=2.0, spot_to_spot_consolidation=True)
    assert settings.Settings.from_mapping(s.to_mapping()) == s
    assert s.to_mapping()["batchIdleDuration"] == "2s"


def test_a_bad_duration_names_the_field_expected_and_found() -> None:
    with pytest.raises(errors.ValidationError) as info:
        settings.Settings.from_mapping({"batchIdleDuration": "soon"})
    (err,) = info.value.errors
    assert (err.obj, err.path, err.found) == ("Settings", "batchIdleDuration", "soon")
    assert "duration" in err.expected


def test_an_unknown_key_suggests_the_closest_setting() -> None:
    with pytest.raises(errors.ValidationError) as info:
        settings.Settings.from_mapping({"batchIdleDurration": "1s"})
    assert "did you mean batchIdleDuration?" in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(errors.ValidationError) as info:
        settings.Settings.from_mapping({"clusterName": "", "spotToSpotConsolidation": "yes",
                                        "consolidationMinSaving": -1})
    assert sorted(e.path for e in info.value.errors) == ["clusterName", "consolidationMinSaving",
                                                         "spotToSpotConsolidation"]


def test_batch_max_duration_below_the_idle_duration_is_rejected() -> None:
    with pytest.raises(errors.ValidationError) as info:
        settings.Settings.from_mapping({"batchIdleDuration": "5s", "batchMaxDuration": "2s"})
    (err,) = info.value.errors
    assert err.path == "batchMaxDuration"
    assert "at least batchIdleDuration (5s)" in err.expected


def test_never_is_not_a_valid_setting_duration() -> None:
    with pytest.raises(errors.ValidationError, match="Never is not allowed"):
        settings.Settings.from_mapping({"launchTTL": "Never"})


def test_a_non_mapping_is_rejected() -> None:
    with pytest.raises(errors.ValidationError, match="a mapping of settings"):
        settings.Settings.from_mapping(["clusterName"])  # type: ignore[arg-type]


def test_the_spot_to_spot_flexibility_defaults_to_karpenters_fifteen_and_reads_an_integer() -> None:
    from karpy import settings as settings_mod

    assert settings_mod.Settings().spot_to_spot_min_flexibility == 15
    assert settings_mod.Settings.from_mapping({"spotToSpotMinFlexibility": 20}).spot_to_spot_min_flexibility == 20


def test_a_fractional_spot_to_spot_flexibility_is_rejected_naming_the_field() -> None:
    import pytest

    from karpy import settings as settings_mod
    from karpy.api import errors

    with pytest.raises(errors.ValidationError, match="spotToSpotMinFlexibility"):
        settings_mod.Settings.from_mapping({"spotToSpotMinFlexibility": 1.5})


def test_feature_gates_are_read_from_karpenters_comma_separated_form() -> None:
    s = settings.Settings.from_mapping({"featureGates": "NodeRepair=true,SpotToSpotConsolidation=false"})
    assert s.feature_gate("NodeRepair") is True
    assert s.feature_gate("SpotToSpotConsolidation") is False
    assert s.feature_gate("ReservedCapacity") is True  # on by default since Karpenter 1.6
    assert s.feature_gate("CapacityBuffer") is False


def test_an_unknown_feature_gate_is_an_error_naming_it() -> None:
    with pytest.raises(errors.ValidationError) as err:
        settings.Settings.from_mapping({"featureGates": "NodeRepiar=true"})
    assert "NodeRepiar" in str(err.value)


def test_karpenters_operator_settings_have_its_defaults() -> None:
    s = settings.Settings()
    assert (s.metrics_port, s.health_probe_port, s.kube_client_qps, s.kube_client_burst) == (8080, 8081, 200, 300)
    assert s.vm_memory_overhead_percent == 0.075
    assert s.interruption_queue == "" and s.log_level == "info"


def test_a_bad_port_is_an_error_naming_the_setting() -> None:
    with pytest.raises(errors.ValidationError) as err:
        settings.Settings.from_mapping({"metricsPort": 70000})
    assert "metricsPort" in str(err.value)
