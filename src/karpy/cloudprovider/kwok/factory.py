"""Build the KWOK cloud provider for ``karpy controller --cloud-provider kwok``.

The factory contract shared by every cloud (``karpy.cloudprovider.<cloud>.factory.build``): it takes
the operator settings, the clock and the cluster, plus cloud options, and returns a
:class:`karpy.cloudprovider.interface.CloudProvider`, or raises a non-retryable
:class:`karpy.cloudprovider.errors.CloudProviderError` saying what configuration is missing. KWOK
needs no credentials; ``zones`` (a sequence of zone names) narrows the catalog's four test zones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy.cloudprovider import errors
from karpy.cloudprovider.kwok import instancetypes, provider
from karpy.kube import interface


def build(settings: settings_mod.Settings, clock: clock_mod.Clock, cluster: interface.Cluster,
          **options: Any) -> provider.KwokCloudProvider:
    zones: Sequence[str] | None = options.pop("zones", None)
    options = {k: v for k, v in options.items() if v is not None}
    if options:
        raise errors.CloudProviderError(
            "the kwok cloud provider takes no options " + ", ".join(sorted(options)), retryable=False)
    types = instancetypes.kwok(tuple(zones)) if zones else None
    return provider.KwokCloudProvider(cluster, cluster_name=settings.cluster_name, types=types)
