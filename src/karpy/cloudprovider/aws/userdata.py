"""User data per AMI family, merged with the NodeClass's ``userData``, as Karpenter's AMI families build it.

:func:`render` returns the user data text (not yet base64) for one launch configuration:

* **AL2**: a MIME multi-part document: the NodeClass's ``userData`` parts first (a MIME document is
  merged part by part, a plain script is one part), then a ``text/x-shellscript`` part running
  ``/etc/eks/bootstrap.sh <cluster> --apiserver-endpoint ... --b64-cluster-ca ...`` with
  ``--use-max-pods false`` and ``--kubelet-extra-args`` carrying ``--node-labels``,
  ``--register-with-taints``, ``--max-pods`` and the kubelet reservations / eviction thresholds.
* **AL2023**: a MIME multi-part document: the NodeClass's parts first, then an
  ``application/node.eks.aws`` part with a ``node.eks.aws/v1alpha1`` ``NodeConfig`` (cluster name,
  API server endpoint, certificate authority, CIDR; kubelet ``config`` and ``flags``). nodeadm
  merges NodeConfigs in order, so the user's own NodeConfig settings are kept unless karpy sets them.
* **Bottlerocket**: TOML: the NodeClass's TOML, with ``settings.kubernetes`` (``cluster-name``,
  ``api-server``, ``cluster-certificate``, ``max-pods``, ``node-labels``, ``node-taints``,
  reservations, eviction) set by karpy on top.
* **Windows2019/2022/2025**: a ``<powershell>`` block: the NodeClass's ``userData`` first, then
  ``Start-EKSBootstrap.ps1 -EKSClusterName ... -APIServerEndpoint ...`` with ``-Base64ClusterCA``,
  ``-KubeletExtraArgs`` (labels, taints, max pods, reservations) and ``-DNSClusterIP`` when known.
* **Custom**: the NodeClass's ``userData`` exactly as written.

The cluster DNS is the kubelet's ``clusterDNS`` when the NodeClass sets it, else
:attr:`Options.cluster_dns` (the provider's discovered kube-dns address); an IPv6 address makes the
node IPv6 (AL2: ``--ip-family ipv6``). ``instanceStorePolicy: RAID0`` builds a RAID0 array of the
instance stores for ephemeral storage: AL2 ``--local-disks raid0``, AL2023 NodeConfig
``spec.instance.localStorage.strategy: RAID0``, Bottlerocket a ``000-mount-instance-storage``
bootstrap command (``apiclient ephemeral-storage init`` then ``bind`` of containerd, kubelet and pod
logs).

The output depends only on the inputs (sorted keys), so equal configurations give equal launch
templates.
"""

from __future__ import annotations

import base64
import email.message
import email.parser
import email.policy
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from karpy.api import nodeclass, quantity

BOUNDARY = "//"


@dataclass(frozen=True)
class Options:
    """What the node needs to join the cluster."""

    cluster_name: str
    cluster_endpoint: str = ""
    ca_bundle: str = ""
    """The cluster CA, base64 (as ``--b64-cluster-ca`` takes it)."""
    cluster_cidr: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, Any]] = ()
    kubelet: nodeclass.KubeletConfiguration | None = None
    max_pods: int | None = None
    custom: str | None = None
    cluster_dns: tuple[str, ...] = ()
    """The discovered kube-dns address(es), used when the kubelet settings name none."""
    instance_store_policy: str | None = None


RAID0 = "RAID0"
BOTTLEROCKET_RAID_COMMAND = "000-mount-instance-storage"


def cluster_dns(o: Options) -> tuple[str, ...]:
    """The kubelet's cluster DNS: the NodeClass's ``clusterDNS``, else the discovered one."""
    if o.kubelet is not None and o.kubelet.cluster_dns:
        return tuple(o.kubelet.cluster_dns)
    return tuple(o.cluster_dns)


def is_ipv6(o: Options) -> bool:
    dns = cluster_dns(o)
    return bool(dns) and ":" in dns[0]


def encode(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def render(family: str, o: Options) -> str:
    if family == "Custom":
        return o.custom or ""
    if family == "AL2":
        return _mime([*_user_parts(o.custom), ("text/x-shellscript", _al2_script(o))])
    if family == "Bottlerocket":
        return _bottlerocket(o)
    if family.startswith("Windows"):
        return _windows(o)
    return _mime([*_user_parts(o.custom), ("application/node.eks.aws", _nodeconfig(o))])


def _labels_flag(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _taints_flag(taints: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for t in taints:
        value = t.get("value")
        parts.append(f"{t['key']}={value}:{t['effect']}" if value else f"{t['key']}:{t['effect']}")
    return ",".join(parts)


def _reserved(values: Mapping[str, int]) -> str:
    return ",".join(f"{k}={quantity.format_quantity(k, v)}" for k, v in sorted(values.items()))


def _kubelet_args(o: Options) -> list[str]:
    args = []
    if o.labels:
        args.append(f"--node-labels={_labels_flag(o.labels)}")
    if o.taints:
        args.append(f"--register-with-taints={_taints_flag(o.taints)}")
    if o.max_pods is not None:
        args.append(f"--max-pods={o.max_pods}")
    k = o.kubelet
    if k is not None:
        if k.system_reserved:
            args.append(f"--system-reserved={_reserved(k.system_reserved)}")
        if k.kube_reserved:
            args.append(f"--kube-reserved={_reserved(k.kube_reserved)}")
        if k.eviction_hard:
            args.append("--eviction-hard=" + ",".join(f"{s}<{v}" for s, v in sorted(k.eviction_hard.items())))
        if k.eviction_soft:
            args.append("--eviction-soft=" + ",".join(f"{s}<{v}" for s, v in sorted(k.eviction_soft.items())))
        if k.image_gc_high_threshold_percent is not None:
            args.append(f"--image-gc-high-threshold={k.image_gc_high_threshold_percent}")
        if k.image_gc_low_threshold_percent is not None:
            args.append(f"--image-gc-low-threshold={k.image_gc_low_threshold_percent}")
        if k.cpu_cfs_quota is not None:
            args.append(f"--cpu-cfs-quota={str(k.cpu_cfs_quota).lower()}")
    return args


def _al2_script(o: Options) -> str:
    lines = ["#!/bin/bash -xe", "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1"]
    cmd = f"/etc/eks/bootstrap.sh '{o.cluster_name}' --apiserver-endpoint '{o.cluster_endpoint}'"
    if o.ca_bundle:
        cmd += f" --b64-cluster-ca '{o.ca_bundle}'"
    if is_ipv6(o):
        cmd += " \\\n--ip-family ipv6"
    dns = cluster_dns(o)
    if dns:
        cmd += f" --dns-cluster-ip '{dns[0]}'"
    cmd += " --use-max-pods false"
    args = _kubelet_args(o)
    if args:
        cmd += " \\\n--kubelet-extra-args '" + " ".join(args) + "'"
    if o.instance_store_policy == RAID0:
        cmd += " \\\n--local-disks raid0"
    lines.append(cmd)
    return "\n".join(lines) + "\n"


def _nodeconfig(o: Options) -> str:
    cluster: dict[str, Any] = {"name": o.cluster_name, "apiServerEndpoint": o.cluster_endpoint,
                               "certificateAuthority": o.ca_bundle}
    if o.cluster_cidr:
        cluster["cidr"] = o.cluster_cidr
    config: dict[str, Any] = {}
    if o.max_pods is not None:
        config["maxPods"] = o.max_pods
    if cluster_dns(o):
        config["clusterDNS"] = list(cluster_dns(o))
    k = o.kubelet
    if k is not None:
        if k.system_reserved:
            config["systemReserved"] = quantity.format_list(k.system_reserved)
        if k.kube_reserved:
            config["kubeReserved"] = quantity.format_list(k.kube_reserved)
        if k.eviction_hard:
            config["evictionHard"] = dict(k.eviction_hard)
        if k.eviction_soft:
            config["evictionSoft"] = dict(k.eviction_soft)
        if k.image_gc_high_threshold_percent is not None:
            config["imageGCHighThresholdPercent"] = k.image_gc_high_threshold_percent
        if k.image_gc_low_threshold_percent is not None:
            config["imageGCLowThresholdPercent"] = k.image_gc_low_threshold_percent
        if k.cpu_cfs_quota is not None:
            config["cpuCFSQuota"] = k.cpu_cfs_quota
    flags = []
    if o.labels:
        flags.append(f"--node-labels={_labels_flag(o.labels)}")
    if o.taints:
        flags.append(f"--register-with-taints={_taints_flag(o.taints)}")
    kubelet: dict[str, Any] = {"config": config} if config else {}
    if flags:
        kubelet["flags"] = flags
    spec: dict[str, Any] = {"cluster": cluster, "kubelet": kubelet}
    if o.instance_store_policy == RAID0:
        spec["instance"] = {"localStorage": {"strategy": RAID0}}
    doc = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    return str(yaml.safe_dump(doc, sort_keys=True))


def _user_parts(custom: str | None) -> list[tuple[str, str]]:
    if not custom or not custom.strip():
        return []
    if custom.lstrip().lower().startswith("mime-version"):
        msg = email.parser.Parser(policy=email.policy.compat32).parsestr(custom)
        if msg.is_multipart():
            out = []
            for part in msg.get_payload():
                if not isinstance(part, email.message.Message):
                    continue
                payload = part.get_payload(decode=True)
                text = payload.decode() if isinstance(payload, bytes) else str(part.get_payload())
                out.append((part.get_content_type(), text))
            return out
    content_type = "application/node.eks.aws" if "kind: NodeConfig" in custom else "text/x-shellscript"
    return [(content_type, custom)]


def _mime(parts: Sequence[tuple[str, str]]) -> str:
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for content_type, text in parts:
        lines += [f"--{BOUNDARY}", f'Content-Type: {content_type}; charset="us-ascii"', "", text.rstrip("\n"), ""]
    lines.append(f"--{BOUNDARY}--")
    return "\n".join(lines) + "\n"


def _bottlerocket(o: Options) -> str:
    doc: dict[str, Any] = tomllib.loads(o.custom) if o.custom and o.custom.strip() else {}
    settings = doc.setdefault("settings", {})
    kube = settings.setdefault("kubernetes", {})
    kube["cluster-name"] = o.cluster_name
    kube["api-server"] = o.cluster_endpoint
    if o.ca_bundle:
        kube["cluster-certificate"] = o.ca_bundle
    if o.max_pods is not None:
        kube["max-pods"] = o.max_pods
    if o.labels:
        kube["node-labels"] = dict(sorted(o.labels.items()))
    if o.taints:
        taints: dict[str, list[str]] = {}
        for t in o.taints:
            taints.setdefault(str(t["key"]), []).append(f"{t.get('value') or ''}:{t['effect']}")
        kube["node-taints"] = taints
    if cluster_dns(o):
        kube["cluster-dns-ip"] = list(cluster_dns(o))
    if o.instance_store_policy == RAID0:
        commands = settings.setdefault("bootstrap-commands", {})
        commands[BOTTLEROCKET_RAID_COMMAND] = {
            "commands": [["apiclient", "ephemeral-storage", "init"],
                         ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd",
                          "/var/lib/kubelet", "/var/log/pods"]],
            "essential": True, "mode": "always"}
    k = o.kubelet
    if k is not None:
        if k.system_reserved:
            kube["system-reserved"] = quantity.format_list(k.system_reserved)
        if k.kube_reserved:
            kube["kube-reserved"] = quantity.format_list(k.kube_reserved)
        if k.eviction_hard:
            kube["eviction-hard"] = dict(k.eviction_hard)
    return dump_toml(doc)


def dump_toml(doc: Mapping[str, Any]) -> str:
    """A small TOML writer for nested tables of strings, numbers, booleans and lists (sorted keys)."""
    out: list[str] = []

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return str(v)
        if isinstance(v, list | tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, Mapping):
            return "{" + ", ".join(f"{key(k)} = {value(x)}" for k, x in sorted(v.items())) + "}"
        escaped = str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'

    def key(k: str) -> str:
        return k if k.replace("-", "").replace("_", "").isalnum() else value(k)

    def table(path: list[str], t: Mapping[str, Any]) -> None:
        scalars = [(k, v) for k, v in sorted(t.items()) if not isinstance(v, Mapping)]
        subs = [(k, v) for k, v in sorted(t.items()) if isinstance(v, Mapping)]
        if path and scalars:
            out.append("[" + ".".join(key(p) for p in path) + "]")
        for k, v in scalars:
            out.append(f"{key(k)} = {value(v)}")
        if path and scalars:
            out.append("")
        for k, v in subs:
            table([*path, k], v)

    table([], doc)
    return "\n".join(out).rstrip("\n") + "\n"


def _windows(o: Options) -> str:
    lines = ["<powershell>"]
    if o.custom and o.custom.strip():
        lines.append(o.custom.strip("\n"))
    lines.append("[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"")
    cmd = f"& $EKSBootstrapScriptFile -EKSClusterName '{o.cluster_name}' -APIServerEndpoint '{o.cluster_endpoint}'"
    if o.ca_bundle:
        cmd += f" -Base64ClusterCA '{o.ca_bundle}'"
    args = _kubelet_args(o)
    if args:
        cmd += " -KubeletExtraArgs '" + " ".join(args) + "'"
    dns = cluster_dns(o)
    if dns:
        cmd += f" -DNSClusterIP '{dns[0]}'"
    lines.append(cmd)
    lines.append("</powershell>")
    return "\n".join(lines)
