"""Build karpy's AWS cloud provider from settings: ``build(settings, clock, cluster, **options)``.

Options (all optional): ``endpoint_url`` (one URL for EC2, SSM, SQS, IAM, EKS and Pricing, e.g. a moto
server), ``region`` (else boto3's: ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / config), ``kubernetes_version``
(``"1.31"``; else the cluster's ``server_version()`` when the Cluster has one, else
:data:`DEFAULT_KUBERNETES_VERSION` with a warning), ``ca_bundle`` (base64 cluster CA for user data),
``queue_wait_seconds`` (SQS long poll; 20 by default, 0 in the simulator), ``boto_session``.

Missing cluster endpoint, CA bundle or Kubernetes version are looked up with ``eks:DescribeCluster``
of ``settings.cluster_name`` (a failure is a warning, as the lookup is a convenience).

The cluster's DNS address (and so its IP family: an IPv6 address makes an IPv6 cluster) is, as
Karpenter finds it, the ``clusterIP`` of the ``kube-system/kube-dns`` Service; else option
``cluster_dns``; else, when DescribeCluster was read, the tenth address of its service range
(``kubernetesNetworkConfig``: ``serviceIpv6Cidr`` ``fd00:...::/108`` gives ``fd00:...::a``,
``serviceIpv4Cidr`` ``172.20.0.0/16`` gives ``172.20.0.10``).
``settings.reserved_enis`` (``RESERVED_ENIS``) and ``settings.isolated_vpc`` (``ISOLATED_VPC``) go to the
provider (max pods; no Pricing API calls). Credentials come from the environment as boto3 reads them.
Missing configuration (no region) raises
:class:`karpy.cloudprovider.errors.CloudProviderError`, not retryable, saying what to set. With
``settings.interruption_queue`` set, the provider also serves the interruption queue
(:func:`interruption_queue` builds it alone).
"""

from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import interruption, provider, session, unavailable
from karpy.kube import errors as kube_errors
from karpy.kube import interface as kube_interface

log = logging.getLogger("karpy.cloudprovider.aws")

DEFAULT_KUBERNETES_VERSION = "1.31"
_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def kubernetes_version(cluster: kube_interface.Cluster, given: str | None) -> str:
    """``major.minor`` from ``given``, else the API server's version, else the default."""
    text = given
    if not text:
        getter = getattr(cluster, "server_version", None)
        if callable(getter):
            try:
                text = str(getter())
            except Exception as exc:  # the API server's own errors are the adapter's; fall back
                log.warning("could not read the Kubernetes version from the API server: %s", exc)
    if text:
        m = _VERSION.match(text.strip())
        if m is None:
            raise errors.CloudProviderError(f"kubernetes version {text!r} is not like 1.31", reason="Configuration")
        return f"{m.group(1)}.{m.group(2)}"
    log.warning("Kubernetes version unknown, resolving AMIs for %s", DEFAULT_KUBERNETES_VERSION)
    return DEFAULT_KUBERNETES_VERSION


def _session(options: dict[str, Any]) -> session.Session:
    try:
        return session.Session(options.get("region"), endpoint_url=options.get("endpoint_url"),
                               boto_session=options.get("boto_session"))
    except session.AWSError as exc:
        raise errors.CloudProviderError(exc.message, reason="Configuration", retryable=False) from exc


def describe_cluster(sess: session.Session, name: str) -> dict[str, Any]:
    """EKS ``DescribeCluster`` of ``name`` (``{}`` with a warning when it cannot be read)."""
    try:
        found: dict[str, Any] = session.call(sess.eks, "describe_cluster", name=name).get("cluster") or {}
    except errors.CloudProviderError as exc:
        log.warning("could not look the cluster up with eks:DescribeCluster (%s); set settings.clusterEndpoint "
                    "and the CA bundle: %s", name, exc)
        return {}
    return found


def kube_dns_ip(cluster: kube_interface.Cluster) -> str:
    """The ``clusterIP`` of ``kube-system/kube-dns`` (``""`` when there is none or it cannot be read)."""
    try:
        svc = cluster.get("Service", "kube-dns", "kube-system")
    except kube_errors.KubeError:
        return ""
    ip = (svc.get("spec") or {}).get("clusterIP") if isinstance(svc, dict) else None
    return str(ip) if ip and ip != "None" else ""


def dns_of_service_range(eks: dict[str, Any]) -> str:
    """The tenth address of the cluster's service range (IPv6 first) from DescribeCluster, else ``""``."""
    net = eks.get("kubernetesNetworkConfig") or {}
    cidr = net.get("serviceIpv6Cidr") if net.get("ipFamily") == "ipv6" else None
    cidr = cidr or net.get("serviceIpv4Cidr")
    if not cidr:
        return ""
    try:
        return str(ipaddress.ip_network(str(cidr), strict=False).network_address + 10)
    except ValueError:
        log.warning("DescribeCluster's service range %r is not a CIDR; no cluster DNS address", cidr)
        return ""


def build(settings: settings_mod.Settings, clock: clock_mod.Clock, cluster: kube_interface.Cluster,
          **options: Any) -> provider.AWSCloudProvider:
    sess = _session(options)
    endpoint = settings.cluster_endpoint or ""
    ca_bundle = str(options.get("ca_bundle") or settings.cluster_ca_bundle or "")
    version = options.get("kubernetes_version")
    eks: dict[str, Any] = {}
    if not endpoint or not ca_bundle or not (version or callable(getattr(cluster, "server_version", None))):
        eks = describe_cluster(sess, settings.cluster_name)  # as Karpenter: endpoint and CA from EKS
    prov = provider.AWSCloudProvider(
        sess, clock, cluster, cluster_name=settings.cluster_name,
        kubernetes_version=kubernetes_version(cluster, version or (
            None if callable(getattr(cluster, "server_version", None)) else eks.get("version"))),
        cluster_endpoint=endpoint or str(eks.get("endpoint") or ""),
        ca_bundle=ca_bundle or str((eks.get("certificateAuthority") or {}).get("data") or ""),
        vm_memory_overhead_percent=settings.vm_memory_overhead_percent,
        reserved_capacity=settings.feature_gate("ReservedCapacity"),
        reserved_enis=settings.reserved_enis, isolated_vpc=settings.isolated_vpc,
        cluster_dns=kube_dns_ip(cluster) or str(options.get("cluster_dns") or "") or dns_of_service_range(eks))
    if settings.interruption_queue:
        prov.queue = interruption.SQSQueue(sess, settings.interruption_queue, clock, prov.ice,
                                           wait_seconds=int(options.get("queue_wait_seconds", 20)))
    return prov


def interruption_queue(settings: settings_mod.Settings, clock: clock_mod.Clock,
                       **options: Any) -> interruption.SQSQueue | None:
    """The SQS queue of ``settings.interruption_queue`` (``None`` when not set)."""
    if not settings.interruption_queue:
        return None
    ice = options.pop("ice", None)
    return interruption.SQSQueue(_session(options), settings.interruption_queue, clock,
                                 ice if isinstance(ice, unavailable.UnavailableOfferings) else None,
                                 wait_seconds=int(options.get("queue_wait_seconds", 20)))
