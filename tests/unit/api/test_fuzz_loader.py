"""Hypothesis fuzzing of the manifest loader: mutations of valid manifests (values replaced by
hostile ones, keys renamed, subtrees dropped) and of their YAML text give a result or karpy's
ValidationError, never another exception."""

from __future__ import annotations

import contextlib
import copy
import os
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy.api import errors, manifest
from support import fuzzing

EXAMPLES = int(os.environ.get("KARPY_FUZZ_EXAMPLES", "150"))
"""More with KARPY_FUZZ_EXAMPLES=4000 (what was run before committing)."""

BASES: list[dict[str, Any]] = [
    {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
     "spec": {"template": {"metadata": {"labels": {"team": "a"}},
                           "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                     "name": "default"},
                                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                      "values": ["on-demand"]}],
                                    "taints": [{"key": "a", "effect": "NoSchedule"}],
                                    "expireAfter": "720h"}},
              "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s",
                             "budgets": [{"nodes": "10%"}]},
              "limits": {"cpu": "100", "memory": "100Gi"}, "weight": 10}},
    {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
     "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "KarpenterNodeRole",
              "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
              "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
              "kubelet": {"maxPods": 20, "evictionHard": {"memory.available": "5%"},
                          "systemReserved": {"cpu": "100m"}},
              "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}]}},
    {"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "metadata": {"name": "old"},
     "spec": {"template": {"spec": {"nodeClassRef": {"name": "default"},
                                    "kubelet": {"maxPods": 30, "evictionHard": {"memory.available": "1Gi"}}}},
              "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "24h"}}},
    {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "p"},
     "spec": {"provider": {"subnetSelector": {"a": "b"}, "securityGroupSelector": {"a": "b"}},
              "ttlSecondsAfterEmpty": 30, "limits": {"resources": {"cpu": 10}},
              "kubeletConfiguration": {"maxPods": 10}}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                           "spec": {"containers": [{"name": "web", "image": "nginx",
                                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                                    "nodeSelector": {"karpenter.sh/capacity-type": "spot"},
                                    "tolerations": [{"key": "a", "operator": "Exists"}],
                                    "topologySpreadConstraints": [
                                        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                         "whenUnsatisfiable": "DoNotSchedule",
                                         "labelSelector": {"matchLabels": {"app": "web"}}}]}}}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
     "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}},
     "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": [{"key": "a", "effect": "NoSchedule"}]},
     "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}},
]

BIG = st.one_of(st.integers(min_value=2**63 - 2, max_value=2**64), st.integers(min_value=10**300, max_value=10**4000),
                st.sampled_from(["9" * 400 + "h", "2562048h", "9" * 30 + "s", "1e400", "9" * 400, "-" + "9" * 40]))
"""Numbers too large for int64, for a float or for a Go duration (issue 22 item 6)."""
YAML_ONLY = st.one_of(st.sets(st.integers(0, 5), max_size=3), st.binary(max_size=8))
"""Values only YAML has (``safe_dump`` writes them as ``!!set`` and ``!!binary``)."""

HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**20, max_value=10**40), BIG, YAML_ONLY,
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(["-1", "1e400", "1e300000", "abc", "", "1Ki", "-5m", ".inf", "2024-01-01", "${X}",
                     "9" * 80, "Web_1", "WhenEmpty"]),
    st.dates(), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(),
                                                                    max_size=3),
)


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    return fuzzing.mutate(draw, copy.deepcopy(draw(st.sampled_from(BASES))), HOSTILE, ["replace", "rename", "drop"])


def _load(text: str) -> None:
    with contextlib.suppress(errors.ValidationError):
        manifest.load_documents(text)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_manifests_load_or_give_a_validation_error(doc: Any) -> None:
    _load(yaml.safe_dump(doc, sort_keys=False))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(BASES), st.data())
def test_text_mutations_load_or_give_a_validation_error(doc: dict[str, Any], data: st.DataObject) -> None:
    text = yaml.safe_dump(doc, sort_keys=False)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        insert = data.draw(st.sampled_from(["&a ", "*a", ": ", "\n", "- ", "{", "[", "!!binary ", "? ", "1e400",
                                            "2024-01-01 ", "0x", "\t", "'", "~", "---\n", "!!set ", "!!omap ",
                                            "!!pairs ", "!!timestamp ", "!!python/object/apply:os.getcwd ",
                                            "!!python/name:os.system ", "!!float ", "!!int ", "!!str ",
                                            "9" * 400, "2562048h"]))
        text = text[:pos] + insert + text[pos:]
    _load(text)



def _numeric_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every number and every string that starts with a digit (durations, quantities)."""
    return [p for p in fuzzing.paths(value, prefix) if p and _leaf_is_numeric(value, p)]


def _leaf_is_numeric(doc: Any, path: tuple[Any, ...]) -> bool:
    for k in path:
        doc = doc[k]
    return (isinstance(doc, int | float) and not isinstance(doc, bool)) or (isinstance(doc, str) and doc[:1].isdigit())


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(BASES), st.data())
def test_big_numbers_in_every_numeric_and_duration_field_give_a_validation_error_or_a_result(
        doc: dict[str, Any], data: st.DataObject) -> None:
    doc = copy.deepcopy(doc)
    path = data.draw(st.sampled_from(_numeric_paths(doc)))
    parent: Any = doc
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = data.draw(BIG)
    _load(yaml.safe_dump(doc, sort_keys=False))
