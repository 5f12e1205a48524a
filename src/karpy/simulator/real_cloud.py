"""The real cloud provider a scenario asks for with ``spec.cloud.endpointURL``, bridged into the simulator.

:func:`bridge` builds the cloud's provider through its factory
(``karpy.cloudprovider.<aws|azure>.factory.build``) with the scenario's settings, region,
``spec.kubernetesVersion`` and the endpoint (credentials from the environment, as the SDK reads
them), and wraps it in a :class:`karpy.simulator.provider_bridge.ProviderBridge` so that the
simulated kubelet registers a Node for every instance it launches. The interruption queue is polled
without waiting (the simulator's clock is virtual). A provider that cannot be built (no credentials,
no factory for the cloud) is reported as a :class:`karpy.api.errors.ValidationError` on
``spec.cloud.endpointURL``.
"""

from __future__ import annotations

import importlib

from karpy import clock as clock_mod
from karpy.api import errors
from karpy.cloudprovider import errors as cp_errors
from karpy.kube import interface
from karpy.simulator import kubelet as kubelet_mod
from karpy.simulator import provider_bridge, scenario


def bridge(scn: scenario.Scenario, clock: clock_mod.Clock, cluster: interface.Cluster,
           kubelet: kubelet_mod.SimulatedKubelet) -> provider_bridge.ProviderBridge:
    cloud = scn.cloud.catalog
    where = f"scenario {scn.name}"
    try:
        factory = importlib.import_module(f"karpy.cloudprovider.{cloud}.factory")
    except ImportError as exc:
        raise errors.ValidationError.single(where, "spec.cloud.endpointURL",
                                            f"a cloud with a real provider (the {cloud} one is not available)",
                                            str(exc)) from None
    try:
        provider = factory.build(scn.settings, clock, cluster, endpoint_url=scn.cloud.endpoint_url,
                                 region=scn.cloud.region, kubernetes_version=scn.cloud.kubernetes_version,
                                 queue_wait_seconds=0)
    except cp_errors.CloudProviderError as exc:
        raise errors.ValidationError.single(where, "spec.cloud.endpointURL", "a usable endpoint and credentials",
                                            exc.message) from None
    return provider_bridge.ProviderBridge(provider, kubelet, clock=clock)
