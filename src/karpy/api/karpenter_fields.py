"""The field names and shapes of Karpenter's kinds, every version karpy reads, for strict field
validation (:mod:`karpy.api.strict`).

Types use the notation of ``kube_fields.json``: ``str``/``int``/``bool``/``float`` (any scalar),
``any`` (not checked), ``list:T``, ``map:T`` (string keys, values of type T) or a model name
(a mapping with exactly the listed fields). Kubernetes models (``V1ObjectMeta``, ``V1Taint``...)
come from ``kube_fields.json``. ``status`` is not checked: it is written by controllers, not users.
"""

from __future__ import annotations

_REQUIREMENT = {"key": "str", "operator": "str", "values": "list:str", "minValues": "int"}
_V1_KUBELET = {
    "clusterDNS": "list:str", "maxPods": "int", "podsPerCore": "int", "systemReserved": "map:str",
    "kubeReserved": "map:str", "evictionHard": "map:str", "evictionSoft": "map:str",
    "evictionSoftGracePeriod": "map:str", "evictionMaxPodGracePeriod": "int",
    "imageGCHighThresholdPercent": "int", "imageGCLowThresholdPercent": "int", "cpuCFSQuota": "bool",
}
_V1BETA1_KUBELET = {**_V1_KUBELET, "containerRuntime": "str"}
_AKS_KUBELET = {
    "cpuManagerPolicy": "str", "cpuCFSQuota": "bool", "cpuCFSQuotaPeriod": "str",
    "imageGCHighThresholdPercent": "int", "imageGCLowThresholdPercent": "int",
    "topologyManagerPolicy": "str", "allowedUnsafeSysctls": "list:str", "containerLogMaxSize": "str",
    "containerLogMaxFiles": "int", "podPidsLimit": "int", "maxPods": "int", "failSwapOn": "bool",
    "systemReserved": "map:str", "kubeReserved": "map:str", "evictionHard": "map:str",
    "evictionSoft": "map:str", "evictionSoftGracePeriod": "map:str", "evictionMaxPodGracePeriod": "int",
}
_EBS = {"deleteOnTermination": "bool", "encrypted": "bool", "iops": "int", "kmsKeyID": "str",
        "snapshotID": "str", "throughput": "int", "volumeInitializationRate": "int", "volumeSize": "str",
        "volumeType": "str"}
_METADATA_OPTIONS = {"httpEndpoint": "str", "httpProtocolIPv6": "str", "httpPutResponseHopLimit": "int",
                     "httpTokens": "str"}

MODELS: dict[str, dict[str, str]] = {
    "KarpenterRequirement": _REQUIREMENT,
    "KarpenterNodeClassRef": {"group": "str", "kind": "str", "name": "str", "apiVersion": "str"},
    "KarpenterTemplateMetadata": {"labels": "map:str", "annotations": "map:str"},
    "KarpenterResources": {"requests": "map:str"},
    "KarpenterBudget": {"nodes": "str", "schedule": "str", "duration": "str", "reasons": "list:str"},
    "KarpenterKubeletV1": _V1_KUBELET,
    "KarpenterKubeletAKS": _AKS_KUBELET,
    "KarpenterKubeletV1beta1": _V1BETA1_KUBELET,
    # karpenter.sh/v1
    "NodePool": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta", "spec": "NodePoolSpec",
                 "status": "any"},
    "NodePoolSpec": {"template": "NodePoolTemplate", "disruption": "NodePoolDisruption", "limits": "map:str",
                     "weight": "int", "replicas": "int"},
    "NodePoolTemplate": {"metadata": "KarpenterTemplateMetadata", "spec": "NodeClaimTemplateSpec"},
    "NodeClaimTemplateSpec": {"nodeClassRef": "KarpenterNodeClassRef", "taints": "list:V1Taint",
                              "startupTaints": "list:V1Taint", "requirements": "list:KarpenterRequirement",
                              "expireAfter": "str", "terminationGracePeriod": "str"},
    "NodePoolDisruption": {"consolidationPolicy": "str", "consolidateAfter": "str",
                           "budgets": "list:KarpenterBudget"},
    "NodeClaim": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta", "spec": "NodeClaimSpec",
                  "status": "any"},
    "NodeClaimSpec": {"nodeClassRef": "KarpenterNodeClassRef", "taints": "list:V1Taint",
                      "startupTaints": "list:V1Taint", "requirements": "list:KarpenterRequirement",
                      "resources": "KarpenterResources", "expireAfter": "str", "terminationGracePeriod": "str"},
    # karpenter.sh/v1alpha1
    "NodeOverlay": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta", "spec": "NodeOverlaySpec",
                    "status": "any"},
    "NodeOverlaySpec": {"requirements": "list:NodeOverlayRequirement", "price": "any", "priceAdjustment": "any",
                        "capacity": "map:str", "weight": "int"},
    "NodeOverlayRequirement": {"key": "str", "operator": "str", "values": "list:str"},
    # karpenter.k8s.aws/v1
    "EC2NodeClass": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
                     "spec": "EC2NodeClassSpec", "status": "any"},
    "EC2NodeClassSpec": {
        "subnetSelectorTerms": "list:EC2SelectorTerm", "securityGroupSelectorTerms": "list:EC2SelectorTerm",
        "capacityReservationSelectorTerms": "list:EC2SelectorTerm", "amiSelectorTerms": "list:EC2SelectorTerm",
        "associatePublicIPAddress": "bool", "amiFamily": "str", "userData": "str", "role": "str",
        "instanceProfile": "str", "tags": "map:str", "kubelet": "KarpenterKubeletV1",
        "blockDeviceMappings": "list:EC2BlockDeviceMapping", "instanceStorePolicy": "str",
        "detailedMonitoring": "bool", "metadataOptions": "EC2MetadataOptions", "context": "str",
        "ipPrefixDelegation": "any", "ipPrefixCount": "int", "networkInterfaces": "any",
        "placementGroupSelector": "any", "connectionTracking": "any", "cpuOptions": "any"},
    "EC2SelectorTerm": {"tags": "map:str", "id": "str", "name": "str", "owner": "str", "alias": "str",
                        "ssmParameter": "str", "ownerID": "str", "instanceMatchCriteria": "str"},
    "EC2BlockDeviceMapping": {"deviceName": "str", "rootVolume": "bool", "ebs": "EC2BlockDevice"},
    "EC2BlockDevice": _EBS,
    "EC2MetadataOptions": _METADATA_OPTIONS,
    # karpenter.azure.com
    "AKSNodeClass": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
                     "spec": "AKSNodeClassSpec", "status": "any"},
    "AKSNodeClassSpec": {"vnetSubnetID": "str", "osDiskSizeGB": "int", "imageFamily": "str",
                         "imageVersion": "str", "fipsMode": "str", "tags": "map:str",
                         "kubelet": "KarpenterKubeletAKS", "maxPods": "int", "security": "any",
                         "localDNS": "any", "artifactStreaming": "any", "gpu": "any", "linuxOSConfig": "any"},
    # karpenter.sh/v1beta1
    "NodePoolV1beta1": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
                        "spec": "NodePoolSpecV1beta1", "status": "any"},
    "NodePoolSpecV1beta1": {"template": "NodePoolTemplateV1beta1", "disruption": "NodePoolDisruptionV1beta1",
                            "limits": "map:str", "weight": "int"},
    "NodePoolTemplateV1beta1": {"metadata": "KarpenterTemplateMetadata", "spec": "NodeClaimSpecV1beta1"},
    "NodePoolDisruptionV1beta1": {"consolidationPolicy": "str", "consolidateAfter": "str",
                                  "expireAfter": "str", "budgets": "list:KarpenterBudget"},
    "NodeClaimV1beta1": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
                         "spec": "NodeClaimSpecV1beta1", "status": "any"},
    "NodeClaimSpecV1beta1": {"nodeClassRef": "KarpenterNodeClassRef", "taints": "list:V1Taint",
                             "startupTaints": "list:V1Taint", "requirements": "list:KarpenterRequirement",
                             "resources": "KarpenterResources", "kubelet": "KarpenterKubeletV1beta1"},
    "EC2NodeClassV1beta1": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
                            "spec": "EC2NodeClassSpecV1beta1", "status": "any"},
    "EC2NodeClassSpecV1beta1": {
        "subnetSelectorTerms": "list:EC2SelectorTerm", "securityGroupSelectorTerms": "list:EC2SelectorTerm",
        "amiSelectorTerms": "list:EC2SelectorTerm", "associatePublicIPAddress": "bool", "amiFamily": "str",
        "userData": "str", "role": "str", "instanceProfile": "str", "tags": "map:str",
        "blockDeviceMappings": "list:EC2BlockDeviceMapping", "instanceStorePolicy": "str",
        "detailedMonitoring": "bool", "metadataOptions": "EC2MetadataOptions", "context": "str"},
    # karpenter.sh/v1alpha5 and karpenter.k8s.aws/v1alpha1
    "Provisioner": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta", "spec": "ProvisionerSpec",
                    "status": "any"},
    "ProvisionerSpec": {
        "labels": "map:str", "annotations": "map:str", "taints": "list:V1Taint", "startupTaints": "list:V1Taint",
        "requirements": "list:KarpenterRequirement", "kubeletConfiguration": "KarpenterKubeletV1beta1",
        "provider": "AWSNodeTemplateSpec", "providerRef": "KarpenterNodeClassRef", "ttlSecondsAfterEmpty": "int",
        "ttlSecondsUntilExpired": "int", "limits": "ProvisionerLimits", "weight": "int",
        "consolidation": "ProvisionerConsolidation"},
    "ProvisionerLimits": {"resources": "map:str"},
    "ProvisionerConsolidation": {"enabled": "bool"},
    "Machine": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta", "spec": "MachineSpec",
                "status": "any"},
    "MachineSpec": {"taints": "list:V1Taint", "startupTaints": "list:V1Taint",
                    "requirements": "list:KarpenterRequirement", "resources": "KarpenterResources",
                    "kubelet": "KarpenterKubeletV1beta1", "machineTemplateRef": "KarpenterNodeClassRef"},
    "AWSNodeTemplate": {"apiVersion": "str", "kind": "str", "metadata": "V1ObjectMeta",
                        "spec": "AWSNodeTemplateSpec", "status": "any"},
    "AWSNodeTemplateSpec": {
        "subnetSelector": "map:str", "securityGroupSelector": "map:str", "amiSelector": "map:str",
        "instanceProfile": "str", "launchTemplate": "str", "amiFamily": "str", "tags": "map:str",
        "metadataOptions": "EC2MetadataOptions", "blockDeviceMappings": "list:EC2BlockDeviceMapping",
        "context": "str", "userData": "str", "detailedMonitoring": "bool", "apiVersion": "str"},
}

ROOTS: dict[str, str] = {
    "karpenter.sh/v1/NodePool": "NodePool",
    "karpenter.sh/v1/NodeClaim": "NodeClaim",
    "karpenter.sh/v1alpha1/NodeOverlay": "NodeOverlay",
    "karpenter.sh/v1beta1/NodePool": "NodePoolV1beta1",
    "karpenter.sh/v1beta1/NodeClaim": "NodeClaimV1beta1",
    "karpenter.sh/v1alpha5/Provisioner": "Provisioner",
    "karpenter.sh/v1alpha5/Machine": "Machine",
    "karpenter.k8s.aws/v1/EC2NodeClass": "EC2NodeClass",
    "karpenter.k8s.aws/v1beta1/EC2NodeClass": "EC2NodeClassV1beta1",
    "karpenter.k8s.aws/v1alpha1/AWSNodeTemplate": "AWSNodeTemplate",
    "karpenter.azure.com/v1beta1/AKSNodeClass": "AKSNodeClass",
    "karpenter.azure.com/v1alpha2/AKSNodeClass": "AKSNodeClass",
}
"""``apiVersion/kind`` -> model name."""
