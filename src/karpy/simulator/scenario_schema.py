"""The fields of a ``karpy.io/v1alpha1`` Scenario document, for strict reading
(:func:`karpy.api.strict.check_against`): an unknown field in a scenario is an error naming its path,
with a suggestion when a known field is close, as for every other kind karpy reads.

Notation of :mod:`karpy.api.karpenter_fields`. ``spec.settings`` is checked by
:meth:`karpy.settings.Settings.from_mapping`, manifests under ``apply`` by the manifest loader and
``spec.faults`` by :mod:`karpy.simulator.faultspec`, ``spec.clusterAutoscaler`` by
:mod:`karpy.simulator.ca_config`, ``spec.cloud.commitments`` by :mod:`karpy.cloudprovider.commitments`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

API_VERSION = "karpy.io/v1alpha1"
KIND = "Scenario"
ROOT = "Scenario"

MODELS: dict[str, dict[str, str]] = {
    "Scenario": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta", "spec": "ScenarioSpec"},
    "ScenarioSpec": {"cloud": "ScenarioCloud", "settings": "any", "until": "str", "seed": "int",
                     "launchLatency": "str", "steps": "list:ScenarioStep", "faults": "any",
                     "clusterAutoscaler": "any", "kubernetesVersion": "str"},
    "ScenarioCloud": {"provider": "str", "region": "str", "zones": "list:str", "endpointURL": "str",
                      "kubernetesVersion": "str", "commitments": "any", "napMode": "bool",
                      "capacityReservations": "list:ScenarioReservation", "volumeLimits": "map:int"},
    "ScenarioReservation": {"id": "str", "instanceType": "str", "zone": "str", "count": "int", "type": "str",
                            "instanceMatchCriteria": "str", "ownerID": "str", "tags": "map:str",
                            "endAfter": "str"},
    "ScenarioStep": {"at": "str", "scale": "ScenarioScale", "apply": "list:any", "delete": "ScenarioRef",
                     "interrupt": "ScenarioInterrupt", "insufficientCapacity": "ScenarioCapacity"},
    "ScenarioScale": {"kind": "str", "namespace": "str", "name": "str", "replicas": "int"},
    "ScenarioRef": {"kind": "str", "namespace": "str", "name": "str"},
    "ScenarioInterrupt": {"node": "str", "nodeSelector": "map:str", "kind": "str"},
    "ScenarioCapacity": {"instanceType": "str", "zone": "str", "capacityType": "str", "for": "str"},
}


def is_scenario(d: Any) -> bool:
    """Whether document ``d`` is a Scenario (of any ``karpy.io`` version: a wrong one is reported later)."""
    return isinstance(d, Mapping) and d.get("kind") == KIND and \
        str(d.get("apiVersion", "")).startswith("karpy.io/")
