"""``karpenter.azure.com`` AKSNodeClass (``v1beta1``, also served as deprecated ``v1alpha2``).

Every field of AKS Node Auto-Provisioning's AKSNodeClass: image family, OS disk, subnet, tags,
kubelet, maxPods, FIPS, security (encryption at host, trusted launch), GPU mode, artifact
streaming, Linux OS configuration (sysctls, transparent huge pages, swap) and LocalDNS, with
their enums, ranges, defaults and CEL rules; plus one karpy extension, ``imageVersion`` (karpy's
model pins an image version with it; an API server would prune a field its CRD does not declare).
Both versions share one schema (as upstream's do); ``v1beta1`` is the storage version.
"""

from __future__ import annotations

from karpy.api import nodeclass as model
from karpy.api.schemas import common, dsl

GROUP = "karpenter.azure.com"
KIND = model.AKS_KIND
PLURAL = "aksnodeclasses"
SINGULAR = "aksnodeclass"
SHORT_NAMES = ("aksnc", "aksncs")
CATEGORIES = ("karpenter", "nap")
VERSIONS = ("v1alpha2", "v1beta1")
STORAGE_VERSION = "v1beta1"

IMAGE_FAMILIES = ("Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux")
SIZE = r"^\d+(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$"
SUBNET_ID = (r"(?i)^\/subscriptions\/[^\/]+\/resourceGroups\/[a-zA-Z0-9_\-().]{0,89}[a-zA-Z0-9_\-()]\/providers\/"
             r"Microsoft\.Network\/virtualNetworks\/[^\/]+\/subnets\/[^\/]+$")
DNS_ZONE = (r"^(\.|[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*"
            r"\.?)$")
SYSCTLS: tuple[tuple[str, int, int], ...] = (
    ("fsAioMaxNr", 65536, 6553500), ("fsFileMax", 8192, 12000500), ("fsInotifyMaxUserWatches", 781250, 2097152),
    ("fsNrOpen", 8192, 20000500), ("kernelThreadsMax", 20, 513785), ("netCoreNetdevMaxBacklog", 1000, 3240000),
    ("netCoreOptmemMax", 20480, 4194304), ("netCoreRmemDefault", 212992, 134217728),
    ("netCoreRmemMax", 212992, 134217728), ("netCoreSomaxconn", 4096, 3240000),
    ("netCoreWmemDefault", 212992, 134217728), ("netCoreWmemMax", 212992, 134217728),
    ("netIPv4NeighDefaultGcThresh1", 128, 80000), ("netIPv4NeighDefaultGcThresh2", 512, 90000),
    ("netIPv4NeighDefaultGcThresh3", 1024, 100000), ("netIPv4TCPFinTimeout", 5, 120),
    ("netIPv4TCPKeepaliveIntvl", 10, 90), ("netIPv4TCPKeepaliveProbes", 1, 15),
    ("netIPv4TCPKeepaliveTime", 30, 432000), ("netIPv4TCPMaxSynBacklog", 128, 3240000),
    ("netIPv4TCPMaxTwBuckets", 8000, 1440000), ("netNetfilterNfConntrackBuckets", 65536, 524288),
    ("netNetfilterNfConntrackMax", 131072, 2097152), ("vmMaxMapCount", 65530, 262144), ("vmSwappiness", 0, 100),
    ("vmVfsCachePressure", 0, 100),
)
"""Integer sysctls: (field, minimum, maximum)."""
ORDERED_SYSCTLS = (("netCoreRmemDefault", "netCoreRmemMax"), ("netCoreWmemDefault", "netCoreWmemMax"),
                   ("netIPv4NeighDefaultGcThresh1", "netIPv4NeighDefaultGcThresh2"),
                   ("netIPv4NeighDefaultGcThresh2", "netIPv4NeighDefaultGcThresh3"))
_TRUSTED = ("has(self.security) && has(self.security.trustedLaunch) && ((has(self.security.trustedLaunch.vtpm) && "
            "self.security.trustedLaunch.vtpm) || (has(self.security.trustedLaunch.secureBoot) && "
            "self.security.trustedLaunch.secureBoot))")


def kubelet() -> dsl.Schema:
    return dsl.obj({
        "allowedUnsafeSysctls": dsl.array(dsl.string()),
        "containerLogMaxFiles": dsl.int32(2, default=5),
        "containerLogMaxSize": dsl.string(pattern=SIZE, default="50Mi"),
        "cpuCFSQuota": dsl.boolean(default=True),
        "cpuCFSQuotaPeriod": dsl.string(default="100ms"),
        "cpuManagerPolicy": dsl.string(enum=("none", "static"), default="none"),
        "failSwapOn": dsl.boolean(),
        "imageGCHighThresholdPercent": dsl.int32(0, 100),
        "imageGCLowThresholdPercent": dsl.int32(0, 100),
        "podPidsLimit": dsl.int64(),
        "topologyManagerPolicy": dsl.string(enum=("restricted", "best-effort", "none", "single-numa-node"),
                                            default="none"),
    }, rules=[dsl.rule("has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ? "
                       "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true",
                       "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent")],
        doc="Kubelet defines args to be used when configuring kubelet on provisioned nodes.")


def _sysctls() -> dsl.Schema:
    props: dict[str, dsl.Schema] = {name: dsl.int32(lo, hi) for name, lo, hi in SYSCTLS}
    props["netIPv4IPLocalPortRange"] = dsl.string(pattern=r"^\d+ \d+$")
    props["netIPv4TCPTwReuse"] = dsl.boolean()
    first = "int(self.netIPv4IPLocalPortRange.split(' ')[0])"
    last = "int(self.netIPv4IPLocalPortRange.split(' ')[1])"
    rules = [dsl.rule(f"has(self.{a}) && has(self.{b}) ? self.{a} <= self.{b} : true", f"{a} must be <= {b}")
             for a, b in ORDERED_SYSCTLS]
    rules += [
        dsl.rule(f"!has(self.netIPv4IPLocalPortRange) || ({first} >= 1024 && {first} <= 60999)",
                 "netIPv4IPLocalPortRange first port must be in [1024, 60999]"),
        dsl.rule(f"!has(self.netIPv4IPLocalPortRange) || ({last} >= 32768 && {last} <= 65535)",
                 "netIPv4IPLocalPortRange last port must be in [32768, 65535]"),
        dsl.rule(f"!has(self.netIPv4IPLocalPortRange) || {first} <= {last}",
                 "netIPv4IPLocalPortRange first port must be <= last port"),
    ]
    return dsl.obj(dict(sorted(props.items())), rules=rules)


def _dns_overrides(*, vnet: bool) -> dsl.Schema:
    duration = dsl.string(pattern=common.DURATION)
    item = dsl.obj({
        "cacheDuration": duration,
        "forwardDestination": dsl.string(enum=("ClusterCoreDNS", "VnetDNS")),
        "forwardPolicy": dsl.string(enum=("Sequential", "RoundRobin", "Random")),
        "maxConcurrent": dsl.int32(0),
        "protocol": dsl.string(enum=("PreferUDP", "ForceTCP")),
        "queryLogging": dsl.string(enum=("Error", "Log")),
        "serveStale": dsl.string(enum=("Verify", "Immediate", "Disable")),
        "serveStaleDuration": duration,
        "zone": dsl.string(min_len=1, max_len=254, pattern=DNS_ZONE),
    }, required=["cacheDuration", "forwardDestination", "forwardPolicy", "maxConcurrent", "protocol",
                 "queryLogging", "serveStale", "serveStaleDuration", "zone"], rules=[
        dsl.rule("!(self.zone.endsWith('cluster.local') && self.forwardDestination == 'VnetDNS')",
                 "'cluster.local' cannot be forwarded to VnetDNS"),
        dsl.rule("!(self.serveStale == 'Verify' && self.protocol == 'ForceTCP')",
                 "serveStale Verify cannot be used with protocol ForceTCP"),
    ])
    rules = [dsl.rule("['.', 'cluster.local'].all(z, self.exists(x, x.zone == z))",
                      "must contain required zones '.' and 'cluster.local'")]
    if vnet:
        rules += [
            dsl.rule("!self.exists(x, x.zone == '.' && x.forwardDestination == 'ClusterCoreDNS')",
                     "root zone '.' cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides"),
            dsl.rule("!self.exists(x, x.zone != '.' && !x.zone.endsWith('cluster.local') && "
                     "x.forwardDestination == 'ClusterCoreDNS')",
                     "external domains cannot be forwarded to ClusterCoreDNS from vnetDNSOverrides"),
        ]
    return dsl.array(item, max_items=100, list_type="map", map_keys=("zone",), rules=rules)


def spec() -> dsl.Schema:
    return dsl.obj({
        "artifactStreaming": dsl.obj({"enabled": dsl.boolean()}),
        "fipsMode": dsl.string(enum=("FIPS", "Disabled")),
        "gpu": dsl.obj({"mode": dsl.string(enum=("Driver", "None"), default="Driver")}),
        "imageFamily": dsl.string(enum=IMAGE_FAMILIES, default="Ubuntu", doc="the OS image family of the nodes"),
        "imageVersion": dsl.string(doc="karpy extension: pin the node image version of the family (nodes on "
                                       "another version drift); unset, the newest"),
        "kubelet": kubelet(),
        "linuxOSConfig": dsl.obj({
            "swapFileSize": dsl.string(pattern=SIZE),
            "sysctls": _sysctls(),
            "transparentHugePageDefrag": dsl.string(enum=("always", "defer", "defer+madvise", "madvise", "never")),
            "transparentHugePageEnabled": dsl.string(enum=("always", "madvise", "never")),
        }),
        "localDNS": dsl.obj({
            "kubeDNSOverrides": _dns_overrides(vnet=False),
            "mode": dsl.string(enum=("Preferred", "Required", "Disabled")),
            "vnetDNSOverrides": _dns_overrides(vnet=True),
        }, required=["kubeDNSOverrides", "mode", "vnetDNSOverrides"]),
        "maxPods": dsl.int32(10, 250, doc="the maximum number of pods per node"),
        "osDiskSizeGB": dsl.int32(30, 2048, default=128, doc="the OS disk size of the nodes in GB"),
        "security": dsl.obj({"encryptionAtHost": dsl.boolean(),
                             "trustedLaunch": dsl.obj({"secureBoot": dsl.boolean(), "vtpm": dsl.boolean()})}),
        "tags": dsl.str_map(rules=[
            dsl.rule("self.all(k, size(k) <= 512)", "tags keys must be less than 512 characters"),
            dsl.rule("self.all(k, !k.matches('[<>%&?]'))", "tags keys must not contain '<', '>', '%', '&', or '?'"),
            dsl.rule("self.all(k, !k.contains('\\\\'))", "tags keys must not contain '\\'"),
            dsl.rule("self.all(k, size(self[k]) <= 256)", "tags values must be less than 256 characters"),
        ], doc="Tags to be applied on Azure resources like instances."),
        "vnetSubnetID": dsl.string(pattern=SUBNET_ID, doc="the subnet the nodes' NICs are placed in"),
    }, rules=[
        dsl.rule("has(self.fipsMode) && self.fipsMode == 'FIPS' ? (has(self.imageFamily) && "
                 "self.imageFamily != 'Ubuntu2404') : true", "FIPS is not yet supported for Ubuntu2404"),
        dsl.rule("has(self.fipsMode) && self.fipsMode == 'FIPS' ? (has(self.imageFamily) && "
                 f"(self.imageFamily != 'Ubuntu2204' || ({_TRUSTED}))) : true",
                 "TrustedLaunch is required for FIPS support with Ubuntu2204"),
        dsl.rule(f"has(self.fipsMode) && self.fipsMode == 'FIPS' && {_TRUSTED} ? (!has(self.imageFamily) || "
                 "self.imageFamily == 'Ubuntu' || self.imageFamily == 'Ubuntu2204') : true",
                 "TrustedLaunch with FIPSMode FIPS is only supported for Ubuntu and Ubuntu2204"),
        dsl.rule("!has(self.linuxOSConfig) || !has(self.linuxOSConfig.swapFileSize) || (has(self.kubelet) && "
                 "has(self.kubelet.failSwapOn) && self.kubelet.failSwapOn == false)",
                 "kubelet.failSwapOn must be set to false when linuxOSConfig.swapFileSize is specified"),
    ], doc="AKSNodeClassSpec is the top level specification for AKS Karpenter Provider.")


def status() -> dsl.Schema:
    return dsl.obj({
        "conditions": common.conditions(strict=True, as_map=False),
        "images": dsl.array(dsl.obj({"id": dsl.string(), "requirements": common.resolved_requirements()},
                                    required=["id", "requirements"])),
        "kubernetesVersion": dsl.string(),
        "localDNSState": dsl.string(enum=("Enabled", "Disabled")),
    }, doc="AKSNodeClassStatus contains the resolved state of the AKSNodeClass")


def schema() -> dsl.Schema:
    return dsl.obj({"apiVersion": dsl.string(), "kind": dsl.string(), "metadata": dsl.obj(),
                    "spec": spec(), "status": status()},
                   doc="AKSNodeClass is the Schema for the AKSNodeClass API")


PRINTER_COLUMNS = (
    {"jsonPath": ".status.conditions[?(@.type=='Ready')].status", "name": "Ready", "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    {"jsonPath": ".spec.imageFamily", "name": "ImageFamily", "priority": 1, "type": "string"},
)
SUBRESOURCES: dict[str, dict[str, str]] = {"status": {}}
