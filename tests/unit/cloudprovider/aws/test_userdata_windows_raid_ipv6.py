"""User data for Windows, RAID0 instance stores and IPv6 clusters, as Karpenter's AMI families render it."""

from __future__ import annotations

import tomllib
from typing import Any

import yaml

from karpy.api import kubeletconfig
from karpy.cloudprovider.aws import userdata


def opts(**kw: Any) -> userdata.Options:
    return userdata.Options(cluster_name="prod", cluster_endpoint="https://api.example", ca_bundle="Q0E=", **kw)


def test_windows_user_data_runs_the_eks_bootstrap_powershell_after_the_users_script() -> None:
    text = userdata.render("Windows2022", opts(
        labels={"team": "a"}, taints=[{"key": "os", "value": "windows", "effect": "NoSchedule"}],
        max_pods=110, custom="Write-Host hello", cluster_dns=("10.100.0.10",)))
    lines = text.split("\n")
    assert lines[0] == "<powershell>"
    assert lines[1] == "Write-Host hello"
    assert lines[2] == '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"'
    assert lines[3] == ("& $EKSBootstrapScriptFile -EKSClusterName 'prod' -APIServerEndpoint 'https://api.example' "
                        "-Base64ClusterCA 'Q0E=' -KubeletExtraArgs '--node-labels=team=a "
                        "--register-with-taints=os=windows:NoSchedule --max-pods=110' -DNSClusterIP '10.100.0.10'")
    assert lines[4] == "</powershell>"
    assert len(lines) == 5


def test_windows_user_data_leaves_out_what_is_not_known() -> None:
    text = userdata.render("Windows2025", userdata.Options(cluster_name="prod", cluster_endpoint="https://api"))
    assert text == ("<powershell>\n"
                    '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"\n'
                    "& $EKSBootstrapScriptFile -EKSClusterName 'prod' -APIServerEndpoint 'https://api'\n"
                    "</powershell>")


def test_raid0_on_al2_adds_local_disks_raid0_to_the_bootstrap_command() -> None:
    text = userdata.render("AL2", opts(instance_store_policy="RAID0"))
    assert "--local-disks raid0" in text
    assert "--local-disks" not in userdata.render("AL2", opts())


def _nodeconfig(text: str) -> dict[str, object]:
    part = text.split('Content-Type: application/node.eks.aws; charset="us-ascii"\n\n', 1)[1].split("\n--//", 1)[0]
    doc: dict[str, object] = yaml.safe_load(part)
    return doc


def test_raid0_on_al2023_sets_the_nodeconfig_local_storage_strategy() -> None:
    doc = _nodeconfig(userdata.render("AL2023", opts(instance_store_policy="RAID0")))
    assert doc["spec"] == {"cluster": {"name": "prod", "apiServerEndpoint": "https://api.example",
                                       "certificateAuthority": "Q0E="},
                           "kubelet": {}, "instance": {"localStorage": {"strategy": "RAID0"}}}
    plain = _nodeconfig(userdata.render("AL2023", opts()))
    assert "instance" not in plain["spec"]  # type: ignore[operator]


def test_raid0_on_bottlerocket_adds_the_ephemeral_storage_bootstrap_command() -> None:
    doc = tomllib.loads(userdata.render("Bottlerocket", opts(instance_store_policy="RAID0")))
    assert doc["settings"]["bootstrap-commands"] == {"000-mount-instance-storage": {
        "commands": [["apiclient", "ephemeral-storage", "init"],
                     ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet",
                      "/var/log/pods"]],
        "essential": True, "mode": "always"}}
    assert "bootstrap-commands" not in tomllib.loads(userdata.render("Bottlerocket", opts()))[
        "settings"]


def test_an_ipv6_cluster_dns_makes_al2_ipv6_and_every_family_uses_it_unless_the_nodeclass_sets_one() -> None:
    v6 = opts(cluster_dns=("fd30:1c53:5f8a::a",))
    al2 = userdata.render("AL2", v6)
    assert "--ip-family ipv6" in al2 and "--dns-cluster-ip 'fd30:1c53:5f8a::a'" in al2
    assert _nodeconfig(userdata.render("AL2023", v6))["spec"]["kubelet"] == {  # type: ignore[index]
        "config": {"clusterDNS": ["fd30:1c53:5f8a::a"]}}
    br = tomllib.loads(userdata.render("Bottlerocket", v6))
    assert br["settings"]["kubernetes"]["cluster-dns-ip"] == ["fd30:1c53:5f8a::a"]
    own = kubeletconfig.KubeletConfiguration(cluster_dns=("10.0.0.10",))
    mine = userdata.render("AL2", opts(cluster_dns=("fd30::a",), kubelet=own))
    assert "--dns-cluster-ip '10.0.0.10'" in mine and "--ip-family" not in mine
