"""``karpy simulate`` runs the Azure provider against ``spec.cloud.endpointURL`` (the fake ARM service).

The engine's ``endpointURL`` wiring is :mod:`karpy.simulator.real_cloud` (skipped only where it is missing).
"""

from __future__ import annotations

import importlib.util

import pytest

from karpy.api import labels
from karpy.cloudprovider.azure import factory
from karpy.simulator import engine, scenario

from . import fake_arm

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(importlib.util.find_spec("karpy.simulator.real_cloud") is None,
                       reason="spec.cloud.endpointURL is not wired into the simulator yet"),
]

SCENARIO = """
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {{name: aks-emulated}}
spec:
  cloud: {{provider: azure, region: japaneast, endpointURL: "{endpoint}", napMode: true}}
  settings: {{clusterName: aks-emulated}}
  until: 4m
  seed: 3
---
apiVersion: v1
kind: Pod
metadata: {{name: test, namespace: default}}
spec:
  containers:
  - {{name: test, image: nginx, resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}}}
"""


def test_a_scenario_with_an_endpoint_launches_through_arm() -> None:
    defaults = factory.emulator_defaults("aks-emulated", "japaneast")
    sizes = ["Standard_D2_v4", "Standard_D2s_v5", "Standard_D4_v4"]
    with fake_arm.FakeARM(skus=fake_arm.skus_from_catalog("japaneast", sizes),
                          subscription=defaults["subscription_id"]) as arm:
        result = engine.Simulation(scenario.load_text(SCENARIO.format(endpoint=arm.endpoint))).run()
        vms = arm.of_type("virtualmachines")
    [node] = result.objects["nodes"]
    assert node["metadata"]["labels"][labels.INSTANCE_TYPE] in sizes
    assert [vm["properties"]["hardwareProfile"]["vmSize"] for vm in vms.values()] == [
        node["metadata"]["labels"][labels.INSTANCE_TYPE]]
    assert any(c.path == "/api/retail/prices" for c in arm.requests)  # prices asked of the emulator
