"""``karpy simulate``'s outputs at scale: JSON / YAML streamed with the standard text, the table
summarised past 50 nodes (``--wide``: every row) and telling what karpy did."""

from __future__ import annotations

import functools
import io
import json
from typing import Any

import yaml

from karpy.simulator import document, engine, output, scenario, table

from .test_engine import seed_run


def _scenario_text(replicas: int, nodes: int) -> str:
    """An EKS-like cluster of ``nodes`` unmanaged nodes and a Deployment that makes karpy launch."""
    static = "\n".join(
        f"""---
apiVersion: v1
kind: Node
metadata:
  name: static-{i}
  labels: {{kubernetes.io/os: linux, node.kubernetes.io/instance-type: m5.large,
           topology.kubernetes.io/zone: us-east-1a, kubernetes.io/hostname: static-{i}}}
status:
  conditions: [{{type: Ready, status: "True"}}]
  capacity: {{cpu: "2", memory: 8Gi, pods: "29"}}
  allocatable: {{cpu: 1930m, memory: 7Gi, pods: "29"}}""" for i in range(nodes))
    return f"""apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {{name: scale}}
spec:
  cloud: {{provider: aws, region: us-east-1, zones: [us-east-1a, us-east-1b]}}
  settings: {{clusterName: t}}
  until: 3m
  steps:
  - at: 10s
    scale: {{kind: Deployment, namespace: default, name: big, replicas: {replicas}}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  amiSelectorTerms: [{{alias: al2023@latest}}]
  role: r
  subnetSelectorTerms: [{{tags: {{k: v}}}}]
  securityGroupSelectorTerms: [{{tags: {{k: v}}}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [c5.large]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: big, namespace: default}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: big}}}}
  template:
    metadata: {{labels: {{app: big}}}}
    spec:
      containers:
      - name: app
        image: app:1
        resources: {{requests: {{cpu: 1500m, memory: 1Gi}}}}
{static}
"""


@functools.cache
def _big_run() -> engine.Result:
    """60 static nodes and 70 pods of one per c5.large node: past 50 nodes either way."""
    return engine.Simulation(scenario.load_text(_scenario_text(70, 60), source="scale.yaml")).run()


def _table(result: engine.Result, **kw: Any) -> str:
    buf = io.StringIO()
    output.render(result, "table", buf, **kw)
    return buf.getvalue()


def test_the_streamed_json_is_the_standard_librarys_text_of_the_whole_document() -> None:
    result = seed_run(900.0)
    expected = json.dumps(document.document(result), indent=2, ensure_ascii=False) + "\n"
    assert output.render_json(result) == expected


def test_items_the_fast_encoder_would_spell_differently_are_written_by_the_standard_library() -> None:
    for value in ({"tiny": 1e-05, "small": 2.5e-07, "name": "value-1"}, {"big": 2 ** 70}, {1: "int key"},
                  [0.00001234, "e-1", {"x": -3e-9}], {"unicode": "é\u2028\x00"}, 1e16, 0.0001):
        assert document._encode(value) == json.dumps(value, indent=2, ensure_ascii=False), value


def test_the_streamed_yaml_is_the_whole_document_without_aliases() -> None:
    result = seed_run(900.0)

    class NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    expected = yaml.dump(document.document(result), Dumper=NoAliases, sort_keys=False, allow_unicode=True,
                         width=120)
    text = output.render_yaml(result)
    assert text == expected
    assert "&id" not in text
    assert yaml.safe_load(text) == json.loads(output.render_json(result))


def test_an_examples_streamed_yaml_is_safe_dumps_text_byte_for_byte_written_by_the_fast_writer() -> None:
    import pathlib

    from karpy.simulator import yamltext

    path = pathlib.Path(__file__).resolve().parents[3] / "examples" / "drift-waves.yaml"
    result = engine.Simulation(scenario.load(str(path))).run()
    doc = document.document(result)

    class NoAliases(yaml.SafeDumper):  # yaml.safe_dump's pure-Python dumper, without &id anchors
        def ignore_aliases(self, data: Any) -> bool:
            return True

    expected = yaml.dump(doc, Dumper=NoAliases, sort_keys=False, allow_unicode=True, width=120)
    assert output.render_yaml(result) == expected
    items = [*doc["events"], *doc["timeline"], *(o for objs in doc["objects"].values() for o in objs)]
    assert len(items) > 100
    assert all(yamltext.block_item(item, 0) is not None for item in items)  # none left to PyYAML


def test_the_table_tells_that_karpy_launched_three_r5_large_and_removed_them_when_empty() -> None:
    text = _table(seed_run(900.0))
    launched = text.split("NODECLAIMS LAUNCHED\n", 1)[1].split("NODES DISRUPTED", 1)[0]
    rows = [line for line in launched.splitlines()[2:] if line.strip()]
    assert len(rows) == 3
    assert all("r5.large" in r and "default" in r and "on-demand" in r and "provisioning" in r for r in rows)
    disrupted = text.split("NODES DISRUPTED\n", 1)[1].split("NODES\n", 1)[0]
    assert disrupted.count("Empty/Delete") == 3


def test_past_fifty_nodes_the_table_groups_nodes_events_and_pods() -> None:
    result = _big_run()
    assert len(result.objects["nodes"]) > table.SUMMARISE_PAST
    text = _table(result)
    assert "NODES (grouped)" in text
    nodes = text.split("NODES (grouped)\n", 1)[1].split("\n\n", 1)[0].split("NODECLAIMS", 1)[0]
    static_row = next(line for line in nodes.splitlines() if line.startswith("(unmanaged)"))
    assert static_row.split()[:3] == ["(unmanaged)", "m5.large", "us-east-1a"]
    assert "60" in static_row.split()
    assert "EVENTS (source=karpenter) (grouped)" in text
    assert "NODECLAIMS LAUNCHED (grouped)" in text
    names = {n["metadata"]["name"] for n in result.objects["nodes"]}
    assert not any(line.split(" ", 1)[0] in names for line in text.splitlines())  # no per-node row


def test_wide_prints_every_node_and_event() -> None:
    result = _big_run()
    text = _table(result, wide=True)
    assert "(grouped)" not in text
    assert all(n["metadata"]["name"] in text for n in result.objects["nodes"])
    karpenter_events = [e for e in result.events if e["source"] == table.KARPENTER]
    events = text.split("EVENTS (source=karpenter)\n", 1)[1]
    assert len([line for line in events.splitlines()[2:] if line.startswith("+")]) == len(karpenter_events)


def test_the_report_module_does_not_import_the_output_module() -> None:
    import ast
    import inspect

    from karpy.simulator import report

    tree = ast.parse(inspect.getsource(report))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "output" not in imported


def test_steps_at_one_time_draw_one_line_in_the_report() -> None:
    import types

    import matplotlib.pyplot as plt

    from karpy.simulator import report

    steps = [types.SimpleNamespace(at=10.0) for _ in range(600)] + [types.SimpleNamespace(at=70.0)]
    run = types.SimpleNamespace(scenario=types.SimpleNamespace(steps=steps), until=180.0)
    fig, ax = plt.subplots()
    report._steps_on(ax, run, 60.0)  # type: ignore[arg-type]
    segments = [seg for coll in ax.collections for seg in coll.get_segments()]  # type: ignore[attr-defined]
    plt.close(fig)
    assert sorted(seg[0][0] for seg in segments) == [10.0 / 60, 70.0 / 60]
    assert not ax.lines


def test_a_spot_interruption_shows_as_a_disruption_replaced_by_the_next_launch() -> None:
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[3] / "examples" / "spot-interruption.yaml"
    result = engine.Simulation(scenario.load(str(path))).run()
    text = _table(result)
    disrupted = text.split("NODES DISRUPTED\n", 1)[1].split("NODES\n", 1)[0]
    (row,) = [line for line in disrupted.splitlines()[1:] if line.startswith("+")]
    assert "SpotInterrupted" in row
    launched = [c for c in result.nodeclaims if c["created"] > 290]
    assert [c["name"] for c in launched] == [row.split()[-1]]
    assert all(c["pods"] == 3 for c in result.nodeclaims)  # three app pods on each, DaemonSet pods aside
