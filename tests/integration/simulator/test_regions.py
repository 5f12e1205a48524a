"""A scenario picks any region the packaged price tables hold, AWS or Azure, with that region's zones; a
region or zone the tables do not hold is refused naming what they do hold."""

from __future__ import annotations

import random

import pytest

from karpy import clock
from karpy.api import errors, labels
from karpy.cloudprovider import catalog
from karpy.cloudprovider.azure import instancetypes as azure_types
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.simulator import engine, scenario
from support import scenario_docs

AWS = ("karpenter.k8s.aws", "v1", "EC2NodeClass", scenario_docs.EC2_SPEC)
AZURE = ("karpenter.azure.com", "v1beta1", "AKSNodeClass", "{}")


def _text(cloud: str, kinds: tuple[str, str, str, str]) -> str:
    group, version, kind, spec = kinds
    return scenario_docs.documents(
        scenario_docs.scenario("regions", cloud, until="2m", replicas=2, at="5s"),
        scenario_docs.nodepool(f"{{group: {group}, kind: {kind}, name: default}}", [scenario_docs.ON_DEMAND]),
        scenario_docs.node_class(f"{group}/{version}", kind, spec),
        scenario_docs.WEB)


@pytest.mark.parametrize(("provider", "region", "zone"), [
    ("aws", "us-east-1", "us-east-1b"),
    *(("azure", r, f"{r}-2") for r in azure_types.regions() if r != "westcentralus"),
    ("azure", "westcentralus", ""),
])
def test_a_scenario_launches_in_a_chosen_zone_of_every_packaged_region(provider: str, region: str, zone: str) -> None:
    cloud = f'{{provider: {provider}, region: {region}, zones: ["{zone}"]}}'
    result = engine.Simulation(scenario.load_text(_text(cloud, AWS if provider == "aws" else AZURE))).run()
    nodes = result.objects["nodes"]
    assert nodes
    prices = {t.name: t for t in catalog.load(provider, region=region)}
    for n in nodes:
        lb = n["metadata"]["labels"]
        assert lb[labels.REGION] == region and lb.get(labels.ZONE, "") == zone
        assert lb[labels.INSTANCE_TYPE] in prices  # priced from that region's table


def test_the_simulated_cloud_prices_a_size_from_the_chosen_regions_table() -> None:
    prices = {}
    for region in ("eastus", "japaneast"):
        cloud = fake_provider.SimulatedCloud(clock.VirtualClock(), random.Random(1), catalog="azure", region=region)
        [d2] = [t for t in cloud.get_instance_types(None) if t.name == "Standard_D2_v5"]
        assert {o.zone.rsplit("-", 1)[0] for o in d2.offerings} == {region}
        prices[region] = d2.cheapest_price(capacity_types=frozenset({"on-demand"}))
        assert prices[region] == azure_types.on_demand_prices(region)["Standard_D2_v5"]
    assert prices["eastus"] != prices["japaneast"]


@pytest.mark.parametrize(("cloud", "path", "expected"), [
    ("{provider: azure, region: westeurope, zones: [westeurope-1, eastus-1]}", "spec.cloud.zones[1]",
     "a zone of region westeurope: westeurope-1, westeurope-2, westeurope-3"),
    ("{provider: azure, region: uksouth}", "spec.cloud.region",
     "one of eastus, japaneast, southcentralus, westcentralus, westeurope, westus2"),
    ("{provider: aws, region: eu-west-1}", "spec.cloud.region", "us-east-1"),
    ("{provider: aws, zones: [us-east-1z]}", "spec.cloud.zones[0]", "a zone of region us-east-1: us-east-1a"),
])
def test_a_region_or_zone_the_tables_do_not_hold_is_refused_naming_what_they_hold(
        cloud: str, path: str, expected: str) -> None:
    with pytest.raises(errors.ValidationError) as info:
        scenario.load_text(_text(cloud, AZURE))
    [err] = [e for e in info.value.errors if e.path.startswith("spec.cloud")]
    assert err.path == path and err.expected.startswith(expected)
