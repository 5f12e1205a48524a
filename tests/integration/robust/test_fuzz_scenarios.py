"""Hypothesis fuzzing of whole scenarios: a mutated scenario either fails to load with karpy's
ValidationError, or runs and renders in every output format; nothing else is raised."""

from __future__ import annotations

import copy
import io
import os
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpy.api import errors
from karpy.simulator import engine, output, scenario
from support import fuzzing

EXAMPLES = int(os.environ.get("KARPY_FUZZ_EXAMPLES", "25"))

DOCS: list[dict[str, Any]] = [
    {"apiVersion": "karpy.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "fuzz"},
     "spec": {"cloud": {"provider": "aws", "region": "us-east-1", "zones": ["us-east-1a"]},
              "settings": {"clusterName": "fuzz"}, "until": "3m", "seed": 1,
              "steps": [{"at": "1m", "scale": {"kind": "Deployment", "name": "web", "replicas": 3}}]}},
    {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
     "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "R",
              "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}},
    {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
     "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                     "name": "default"},
                                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                      "values": ["on-demand"]}]}},
              "limits": {"cpu": "100"}}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"built": "2024-01-02"}},
                           "spec": {"containers": [{"name": "web", "image": "nginx",
                                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}},
]

HOSTILE = st.one_of(st.none(), st.booleans(), st.integers(-5, 40), st.floats(allow_nan=True),
                    st.integers(min_value=2**63, max_value=10**300),  # above int32 and Go's durations (issue 22)
                    st.sets(st.integers(0, 3), max_size=2), st.binary(max_size=4),  # !!set, !!binary
                    st.text(max_size=6), st.dates(),
                    st.sampled_from(["1e30", "-1", "1e300000", "0", "1m", "2m", ".inf", "Web_1", "spot"]),
                    st.lists(st.integers(), max_size=2),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def mutated(draw: st.DrawFn) -> list[Any]:
    docs: list[Any] = copy.deepcopy(DOCS)
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from([p for p in fuzzing.paths(docs) if len(p) > 1]))
        parent = fuzzing.parent_of(docs, path)
        if draw(st.booleans()):
            parent[path[-1]] = draw(HOSTILE)
        else:
            del parent[path[-1]]
    return docs


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_mutated_scenario_loads_and_renders_everywhere_or_is_a_validation_error(docs: list[Any]) -> None:
    text = yaml.safe_dump_all(docs, sort_keys=False)
    try:
        scn = scenario.load_text(text, source="fuzz")
    except errors.ValidationError:
        return
    result = engine.Simulation(scn).run()
    for fmt in output.OUTPUTS:
        buf = io.StringIO()
        output.render(result, fmt, buf, width=120)
        assert buf.getvalue()


def test_the_unmutated_scenario_runs_and_an_unquoted_date_renders_in_json() -> None:
    scn = scenario.load_text(yaml.safe_dump_all(DOCS, sort_keys=False).replace("'2024-01-02'", "2024-01-02"))
    result = engine.Simulation(scn).run()
    buf = io.StringIO()
    output.render(result, "json", buf)
    assert '"built": "2024-01-02"' in buf.getvalue()
