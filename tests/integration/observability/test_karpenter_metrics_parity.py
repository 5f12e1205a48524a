"""karpy's /metrics against Karpenter v1.14.3's metrics and its published Grafana dashboards.

The expectations are data read from Karpenter's source and repository, not written by hand:
``tests/fixtures/karpenter/metrics-v1.14.3.json`` (``scripts/karpenter_metrics.py`` over
``sigs.k8s.io/karpenter`` and ``github.com/aws/karpenter-provider-aws`` v1.14.3) and
``tests/fixtures/karpenter/dashboards-v1.14.json`` (``scripts/karpenter_dashboards.py`` over the
capacity and performance dashboards of ``website/content/en/v1.14``).
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import pytest
from prometheus_client import parser

from karpy.observability import catalog

from ..controllers import builders as b

FIXTURES = pathlib.Path(__file__).parents[2] / "fixtures" / "karpenter"
KARPENTER = json.loads((FIXTURES / "metrics-v1.14.3.json").read_text(encoding="utf-8"))
DASHBOARDS = json.loads((FIXTURES / "dashboards-v1.14.json").read_text(encoding="utf-8"))
NOT_KARPENTERS = frozenset({"node_time_seconds", "node_boot_time_seconds"})
"""The capacity dashboard's node-exporter metrics: exported by node-exporter, not by Karpenter."""
TARGET_LABELS = frozenset({"job", "cluster", "instance"})
"""Labels Prometheus adds to every scraped series (target labels), not the exporter."""
KARPY_EXTRAS = frozenset({"karpenter_nodeclaims_launched_total", "karpenter_nodeclaims_registered_total",
                          "karpenter_nodeclaims_initialized_total"})
"""Karpenter v0.3x metrics karpy still exports (documented in docs/metrics.md)."""


@pytest.fixture(scope="module")
def scrape() -> dict[str, Any]:
    """A NodePool with limits; a pod launches a node, goes away, and consolidation deletes the empty node
    (drain, termination, disruption metrics); a second pod launches another node that keeps running."""
    w = b.make_world(launch_latency=10.0)
    pool = b.nodepool_manifest(limits={"cpu": "100", "memory": "400Gi"})
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    w.cluster.create(pool)
    w.cluster.create(b.pending_pod("web"))
    w.at(60.0)
    first = w.nodes()[0]["metadata"]["name"]
    w.cluster.create(b.running_pod("agent", first, owner=b.daemonset_owner("agent")))
    w.cluster.delete("Pod", "web", "default")
    w.at(600.0)
    assert first not in {n["metadata"]["name"] for n in w.nodes()}
    w.cluster.create(b.pending_pod("again"))
    w.at(660.0)
    second = w.nodes()[0]["metadata"]["name"]
    w.cluster.create(b.running_pod("bound", second))
    w.cluster.create(b.running_pod("agent-2", second, owner=b.daemonset_owner("agent")))
    families = {f.name: f for f in parser.text_string_to_metric_families(w.karpy.metrics.exposition().decode())}
    return {"families": families, "metrics": w.karpy.metrics}


def _family_of(families: dict[str, Any], sample: str) -> Any:
    for suffix in ("", "_bucket", "_count", "_sum", "_total"):
        if suffix and sample.endswith(suffix) and sample[: -len(suffix)] in families:
            return families[sample[: -len(suffix)]]
    return families.get(sample)


def test_every_metric_karpenter_exports_is_declared_with_its_type_and_labels() -> None:
    declared = {row.name: row for row in (*catalog.ROWS, *catalog.GAUGES)}
    missing = [m["name"] for m in KARPENTER["metrics"] if m["name"] not in declared]
    assert not missing, f"karpy lacks {missing}"
    wrong = [(m["name"], m["type"], m["labels"], declared[m["name"]].kind, declared[m["name"]].labels)
             for m in KARPENTER["metrics"]
             if (m["type"], tuple(m["labels"])) != (declared[m["name"]].kind, declared[m["name"]].labels)]
    assert not wrong
    assert KARPENTER["modules"] == {"sigs.k8s.io/karpenter": "v1.14.3",
                                    "github.com/aws/karpenter-provider-aws": "v1.14.3"}
    assert len(KARPENTER["metrics"]) >= 70


def test_metrics_exports_every_karpenter_name_with_karpenters_type(scrape: dict[str, Any]) -> None:
    families = scrape["families"]
    for m in KARPENTER["metrics"]:
        name = m["name"][: -len("_total")] if m["type"] == "counter" else m["name"]  # the parser's family name
        assert name in families, f"/metrics lacks {m['name']}"
        assert families[name].type == m["type"], m["name"]
    ours = {n for n in families if n.startswith("karpenter_")}
    theirs = {m["name"].removesuffix("_total") if m["type"] == "counter" else m["name"] for m in KARPENTER["metrics"]}
    assert ours - theirs == {n.removesuffix("_total") for n in KARPY_EXTRAS}


def test_the_samples_of_a_running_cluster_carry_karpenters_labels(scrape: dict[str, Any]) -> None:
    families = scrape["families"]
    seen = 0
    for m in KARPENTER["metrics"]:
        family = families[m["name"].removesuffix("_total") if m["type"] == "counter" else m["name"]]
        for sample in family.samples:
            extra = {"le"} if sample.name.endswith("_bucket") else \
                {"quantile"} if "quantile" in sample.labels else set()
            assert set(sample.labels) == set(m["labels"]) | extra, (sample.name, sample.labels)
            seen += 1
    assert seen > 50


@pytest.mark.parametrize("name", ["karpenter_nodes_drained_total", "karpenter_nodeclaims_disrupted_total",
                                  "karpenter_voluntary_disruption_decisions_by_nodepool_total",
                                  "karpenter_nodes_lifetime_duration_seconds_count",
                                  "karpenter_nodepools_limit", "karpenter_nodes_allocatable",
                                  "karpenter_nodes_termination_duration_seconds_count",
                                  "karpenter_pods_bound_duration_seconds_count",
                                  "karpenter_pods_eviction_requests_total", "karpenter_cluster_state_synced",
                                  "karpenter_nodepools_cost_total", "controller_runtime_reconcile_total"])
def test_a_metric_of_a_behaviour_karpy_has_is_updated_where_it_happens(scrape: dict[str, Any], name: str) -> None:
    assert scrape["metrics"].value(name) > 0, name


def test_the_node_metrics_of_a_drained_node_say_which_nodepool() -> None:
    w = b.make_world(launch_latency=10.0)
    w.cluster.create(b.nodepool_manifest())
    w.cluster.create(b.pending_pod("web"))
    w.at(60.0)
    m = w.karpy.metrics
    node = w.nodes()[0]
    w.cluster.create(b.running_pod("bound", node["metadata"]["name"]))
    assert m.value("karpenter_nodes_allocatable", node_name=node["metadata"]["name"], resource_type="cpu",
                   nodepool="default", managed="true") > 0
    assert m.value("karpenter_nodes_total_pod_requests", node_name=node["metadata"]["name"], resource_type="cpu") \
        == 0.01
    w.cluster.delete("Node", node["metadata"]["name"])
    w.at(400.0)
    assert m.value("karpenter_nodes_drained_total", nodepool="default") == 1
    assert m.value("karpenter_nodes_lifetime_duration_seconds_count", nodepool="default") == 1
    assert m.value("karpenter_nodes_termination_duration_seconds", nodepool="default", quantile="1") >= 0
    assert m.value("karpenter_pods_eviction_requests_total", code="200") == 1


_NAME = re.compile(r"\b((?:karpenter|controller_runtime|node)_[a-zA-Z0-9_]+)(\{[^}]*\})?")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_LABEL_VALUES = re.compile(
    r"label_values\(\s*([a-zA-Z_][a-zA-Z0-9_]*)(?:\{[^}]*\})?\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)")


def _queries() -> list[tuple[str, str]]:
    return [(path.rsplit("/", 1)[-1], q["query"]) for path, rows in DASHBOARDS["dashboards"].items() for q in rows]


def test_the_dashboards_fixture_holds_both_dashboards_queries() -> None:
    assert {p.rsplit("/", 1)[-1] for p in DASHBOARDS["dashboards"]} == {
        "karpenter-capacity-dashboard.json", "karpenter-performance-dashboard.json"}
    assert len(_queries()) >= 40


@pytest.mark.parametrize(("dashboard", "query"), _queries())
def test_every_dashboard_query_reads_metrics_and_labels_karpy_exports(
        scrape: dict[str, Any], dashboard: str, query: str) -> None:
    families = scrape["families"]
    found = 0
    query = re.sub(r'"[^"]*"', '""', query)  # string literals name no metric (label_replace's "node_name")
    for name, selector in _NAME.findall(query):
        if name in NOT_KARPENTERS:
            continue
        family = _family_of(families, name)
        assert family is not None, f"{dashboard}: {name} is not in /metrics ({query})"
        assert family.samples, f"{dashboard}: {name} has no sample in a running cluster"
        found += 1
        labels = set().union(*(s.labels for s in family.samples))
        for label in _MATCHER.findall(selector or ""):
            assert label in labels or label in TARGET_LABELS, f"{dashboard}: {name} has no label {label}"
    for name, label in _LABEL_VALUES.findall(query):
        family = _family_of(families, name)
        assert label in set().union(*(s.labels for s in family.samples)) or label in TARGET_LABELS
    assert found or all(n in NOT_KARPENTERS for n, _ in _NAME.findall(query))
