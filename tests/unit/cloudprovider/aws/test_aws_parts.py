"""Pure parts of the AWS provider: selector filters, subnet choice, AMI parameters and requirements,
user data per family, price parsing, error translation, launch template names."""

from __future__ import annotations

import base64
import json
import tomllib

import botocore.exceptions

from karpy.api import nodeclass
from karpy.api import selectors as api_selectors
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import amis, launchtemplates, pricing, selectors, session, userdata


def test_a_star_tag_value_selects_on_the_key_alone_and_ids_and_names_become_their_filters() -> None:
    term = nodeclass.SelectorTerm(tags={"karpenter.sh/discovery": "*", "team": "a*"}, id="sg-1", name="nodes")
    assert selectors.filters(term, id_filter="group-id", name_filter="group-name") == [
        {"Name": "group-id", "Values": ["sg-1"]}, {"Name": "group-name", "Values": ["nodes"]},
        {"Name": "tag-key", "Values": ["karpenter.sh/discovery"]}, {"Name": "tag:team", "Values": ["a*"]}]


def test_the_older_aws_ids_tag_becomes_one_id_term_per_id() -> None:
    terms = selectors.expand([nodeclass.SelectorTerm(tags={"aws-ids": "subnet-1, subnet-2"})])
    assert [t.id for t in terms] == ["subnet-1", "subnet-2"]


def test_one_subnet_per_zone_is_the_one_with_the_most_free_addresses() -> None:
    subnets = [selectors.Subnet("subnet-b", "us-east-1a", "use1-az1", 100),
               selectors.Subnet("subnet-a", "us-east-1a", "use1-az1", 4000),
               selectors.Subnet("subnet-c", "us-east-1b", "use1-az2", 10)]
    chosen = selectors.subnet_per_zone(subnets)
    assert {z: s.id for z, s in chosen.items()} == {"us-east-1a": "subnet-a", "us-east-1b": "subnet-c"}


def test_an_al2023_alias_reads_the_eks_parameters_of_the_clusters_version_per_arch_and_variant() -> None:
    params = amis.ssm_parameters("AL2023", "1.31")
    paths = {p.path for p in params}
    assert "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id" in paths
    assert "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/nvidia/recommended/image_id" in paths
    pinned = amis.ssm_parameters("AL2023", "1.31", "v20241121")
    assert any(p.path.endswith("amazon-eks-node-al2023-x86_64-standard-1.31-v20241121/image_id") for p in pinned)
    assert {p.path for p in amis.ssm_parameters("Bottlerocket", "1.30")} >= {
        "/aws/service/bottlerocket/aws-k8s-1.30/arm64/latest/image_id"}


def test_image_requirements_keep_gpu_types_off_the_standard_image_and_on_the_nvidia_one() -> None:
    arch = api_selectors.NodeSelectorRequirement("kubernetes.io/arch", "In", ("amd64",))
    standard = amis.Image("ami-s", "s", "amd64", "2024-11-21", (arch, *amis._variant_requirements("standard")))
    nvidia = amis.Image("ami-n", "n", "amd64", "2024-11-20", (arch, *amis._variant_requirements("nvidia")))
    gpu = {"kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-gpu-count": "1"}
    cpu = {"kubernetes.io/arch": "amd64"}
    assert amis.image_for([standard, nvidia], gpu) is nvidia
    assert amis.image_for([standard, nvidia], cpu) is standard
    assert amis.image_for([standard, nvidia], {"kubernetes.io/arch": "arm64"}) is None


def _options(custom: str | None = None) -> userdata.Options:
    return userdata.Options("prod", "https://api.example", "Q0E=", labels={"karpenter.sh/nodepool": "default"},
                            taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}], max_pods=58,
                            custom=custom)


def test_al2_user_data_keeps_the_users_script_first_then_runs_bootstrap_with_labels_and_taints() -> None:
    text = userdata.render("AL2", _options("#!/bin/bash\necho custom"))
    assert text.index("echo custom") < text.index("/etc/eks/bootstrap.sh 'prod'")
    assert "--b64-cluster-ca 'Q0E='" in text
    assert "--node-labels=karpenter.sh/nodepool=default" in text
    assert "--register-with-taints=gpu=true:NoSchedule" in text
    assert "--max-pods=58" in text


def test_bottlerocket_user_data_merges_karpys_kubernetes_settings_into_the_users_toml() -> None:
    text = userdata.render("Bottlerocket", _options('[settings.kubernetes]\nimage-gc-low-threshold-percent = 40\n'
                                                    '[settings.host-containers.admin]\nenabled = true\n'))
    doc = tomllib.loads(text)
    kube = doc["settings"]["kubernetes"]
    assert kube["cluster-name"] == "prod" and kube["api-server"] == "https://api.example"
    assert kube["image-gc-low-threshold-percent"] == 40
    assert kube["node-taints"] == {"gpu": ["true:NoSchedule"]}
    assert doc["settings"]["host-containers"]["admin"]["enabled"] is True


def test_custom_user_data_is_passed_as_written_and_encoding_is_base64() -> None:
    assert userdata.render("Custom", _options("raw data")) == "raw data"
    assert base64.b64decode(userdata.encode("x")).decode() == "x"


def test_pricing_reads_the_on_demand_usd_price_of_each_product() -> None:
    entry = json.dumps({"product": {"attributes": {"instanceType": "m5.large"}},
                        "terms": {"OnDemand": {"a": {"priceDimensions": {"b": {"pricePerUnit": {"USD": "0.0960"}}}}}}})
    assert pricing.parse_products([entry, json.dumps({"product": {}})]) == {"m5.large": 0.096}


def _client_error(code: str, status: int = 400) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "CreateFleet")


def test_botocore_errors_become_karpy_errors_that_say_whether_a_retry_helps() -> None:
    ice = session.translate(_client_error("InsufficientInstanceCapacity"), "create_fleet")
    assert isinstance(ice, errors.InsufficientCapacityError) and ice.retryable
    gone = session.translate(_client_error("InvalidInstanceID.NotFound"), "terminate_instances")
    assert isinstance(gone, errors.NodeClaimNotFoundError)
    throttled = session.translate(_client_error("RequestLimitExceeded", 503), "describe_instances")
    assert isinstance(throttled, session.AWSError) and throttled.retryable and throttled.code == "RequestLimitExceeded"
    denied = session.translate(_client_error("UnauthorizedOperation", 403), "create_fleet")
    assert not denied.retryable
    offline = session.translate(botocore.exceptions.EndpointConnectionError(endpoint_url="http://x"), "x")
    assert offline.retryable


def test_launch_template_names_are_stable_per_content_and_differ_when_it_changes() -> None:
    config = launchtemplates.Config("default", "ami-1", "dXNlcg==", "profile", ("sg-1",))
    data = launchtemplates.template_data(config)
    assert launchtemplates.name_of("c", data) == launchtemplates.name_of("c", launchtemplates.template_data(config))
    other = launchtemplates.template_data(launchtemplates.Config("default", "ami-2", "dXNlcg==", "profile", ("sg-1",)))
    assert launchtemplates.name_of("c", data) != launchtemplates.name_of("c", other)
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["BlockDeviceMappings"][0]["Ebs"] == {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True,
                                                     "DeleteOnTermination": True}
