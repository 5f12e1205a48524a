"""Strict input: unknown fields, shapes, names, duplicates and every crash class of issue 9 give
karpy's ValidationError (or a result), never another exception."""

from __future__ import annotations

import pytest

from karpy.api import errors, manifest, quantity

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  limits: {cpu: 100}
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, annotations: {built: 2024-01-02}}
spec:
  containers:
  - name: app
    image: nginx
    resources: {requests: {cpu: 500m, memory: 1Gi}}
"""


def _errors(text: str) -> list[errors.FieldError]:
    with pytest.raises(errors.ValidationError) as exc:
        manifest.load_documents(text)
    return list(exc.value.errors)


def test_a_misspelt_nodepool_field_is_an_error_suggesting_the_known_one() -> None:
    errs = _errors(NODEPOOL.replace("requirements:", "requirments:"))
    assert [e.path for e in errs] == ["spec.template.spec.requirments"]
    assert "did you mean requirements?" in str(errs[0])
    assert 'unknown field "requirments"' in str(errs[0])


def test_an_unknown_pod_container_field_is_an_error_naming_its_path() -> None:
    errs = _errors(POD.replace("image: nginx", "image: nginx\n    resource: {}"))
    assert [e.path for e in errs] == ["spec.containers[0].resource"]
    assert "did you mean resources?" in str(errs[0])


def test_every_valid_kubernetes_field_karpy_does_not_use_is_accepted() -> None:
    text = POD.replace("image: nginx", "image: nginx\n    livenessProbe: {httpGet: {path: /, port: 80}}\n"
                       "    env: [{name: A, value: b}]")
    assert manifest.load_documents(text).of_kind("Pod")


def test_an_unknown_field_of_a_v1beta1_nodepool_is_reported_before_conversion() -> None:
    text = """
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      kubelet: {maxpods: 10}
"""
    errs = _errors(text)
    assert [e.path for e in errs] == ["spec.template.spec.kubelet.maxpods"]
    assert "did you mean maxPods?" in str(errs[0])


def test_a_converted_kubelet_passes_the_same_v1_checks_as_a_native_one() -> None:
    text = """
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      kubelet: {evictionHard: {memory.available: abc}}
"""
    errs = _errors(text)
    assert any(e.path.endswith("evictionHard.memory.available") for e in errs)


def test_a_scalar_where_a_mapping_is_expected_is_a_validation_error() -> None:
    assert _errors(NODEPOOL.replace("  template:\n", "  template: 5\n  x:\n", 1))
    assert _errors("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: 3\n")


def test_negative_quantities_and_replicas_are_rejected() -> None:
    assert [e.path for e in _errors(POD.replace("cpu: 500m", "cpu: -1"))] == \
        ["spec.containers[0].resources.requests.cpu"]
    deployment = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: a}
spec:
  replicas: -2
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec: {containers: [{name: a, image: a}]}
"""
    assert [e.path for e in _errors(deployment)] == ["spec.replicas"]


def test_the_same_object_twice_is_an_error() -> None:
    errs = _errors(NODEPOOL + "---\n" + NODEPOOL)
    assert [(e.obj, e.path) for e in errs] == [("document 2 (NodePool/default)", "metadata.name")]


def test_a_name_that_is_not_rfc_1123_is_rejected_at_load() -> None:
    assert [e.path for e in _errors(POD.replace("name: web", "name: Web_1"))] == ["metadata.name"]


@pytest.mark.parametrize("text", [
    "a: " + "9" * 5000,
    "a: &x [*x]",
    "a: &x {b: *x}",
    "{1: a, true: b}",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {true: x}}\n",
    "[" * 1200 + "]" * 1200,
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, resources: {requests: "
    "{cpu: .inf}}}]}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, resources: {requests: "
    "{cpu: .nan}}}]}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, resources: {requests: "
    "{cpu: 1e400}}}]}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, resources: {requests: "
    "{cpu: '1e30'}}}]}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a, creationTimestamp: " + "1" * 400 + "}\nspec: {}\n",
    "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {template: {spec: "
    "{nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: a}}}, limits: {cpu: 1e300000}}\n",
    "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {template: {spec: "
    "{nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: a}}}, limits: {cpu: '1e2000000'}}\n",
])
def test_hostile_yaml_gives_a_validation_error(text: str) -> None:
    with pytest.raises(errors.ValidationError):
        manifest.load_documents(text)


def test_an_unquoted_date_stays_a_string_as_the_api_server_stores_it() -> None:
    loaded = manifest.load_documents(POD)
    assert loaded.objects[0].raw["metadata"]["annotations"]["built"] == "2024-01-02"


def test_an_unquoted_date_as_a_label_key_is_read_as_its_text() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {2024-01-01: x}}\nspec: {containers: []}\n"
    assert manifest.load_documents(text).objects[0].obj.metadata.labels == {"2024-01-01": "x"}


def test_quantities_are_bounded_and_non_negative() -> None:
    assert quantity.parse_milli("1e3") == 1_000_000
    for bad in ("-1", "1e41", "1e300000", float("inf"), float("nan"), "9" * 200):
        with pytest.raises(quantity.QuantityError):
            quantity.parse_milli(bad)
    assert quantity.parse_milli("1e-300000") == 1  # rounded up to one milli-unit, instantly


def test_a_value_nested_too_deeply_to_print_is_still_described() -> None:
    from karpy.api import errors as errors_mod

    deep: list[object] = []
    inner = deep
    for _ in range(20_000):
        nxt: list[object] = []
        inner.append(nxt)
        inner = nxt
    assert errors_mod.describe(deep).startswith("[[")
