"""The :class:`karpy.kube.adapter.KubeCluster` that ``karpy controller`` and ``karpy whatif`` use.

:func:`connect` loads the configuration :func:`karpy.kube.config.load` picks and builds two clients
over it: the controllers' (``settings.kube_client_qps`` / ``kube_client_burst``, Karpenter's
``KUBE_CLIENT_QPS`` / ``KUBE_CLIENT_BURST``) and leader election's own (:data:`LEASE_QPS` /
:data:`LEASE_BURST`, a 5 s request timeout, two retries, separate connections), so that a
controller using its whole budget, or a pool of busy connections, never delays a Lease renewal.

It also starts, in the background, the informers of the kinds the controllers read without
watching (:data:`EAGER_KINDS`: volumes, CSINodes, ReplicaSets, DaemonSets, Deployments, StatefulSets),
so their first lists are in before a reconcile needs them; they are not required for readiness (a reconcile
that reads one still unsynced is retried later).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from karpy import clock as clock_mod
from karpy.kube import client as client_mod
from karpy.kube import config as config_mod
from karpy.settings import Settings

if TYPE_CHECKING:
    from karpy.kube.adapter import KubeCluster

EAGER_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "ReplicaSet", "DaemonSet", "Deployment",
               "StatefulSet", "CSINode")
LEASE_QPS, LEASE_BURST = 5.0, 10
"""The leader-election client's budget: a renewal is two requests every retry period (2 s)."""


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    settings: Settings | None = None,
    clock: clock_mod.Clock | None = None,
    **options: Any,
) -> KubeCluster:
    """A :class:`KubeCluster` for the chosen configuration (module docstring); ``options`` go to it."""
    from karpy.kube.adapter import KubeCluster

    del clock  # the adapter keeps no timestamps of its own; the API server stamps objects
    s = settings or Settings()
    conn = config_mod.load(kubeconfig, context)
    client = client_mod.KubeClient(conn, qps=float(s.kube_client_qps), burst=int(s.kube_client_burst))
    options.setdefault("lease_client", client_mod.KubeClient(
        conn, qps=LEASE_QPS, burst=LEASE_BURST, timeout=5.0, max_retries=2, user_agent="karpy/leader-election"))
    cluster = KubeCluster(client, **options)
    cluster.start(EAGER_KINDS, required=False)
    return cluster
