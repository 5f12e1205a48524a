"""``karpy whatif`` on dumps as real clusters write them: what the simulator never reads (managedFields,
last-applied annotations, container statuses, probes and env, node image lists) is dropped as each
object is read and changes nothing in the answer; the fast YAML path and the full loader give the
same state; the JSON answer is streamed."""

from __future__ import annotations

import copy
import io
import json
import pathlib
from typing import Any

import pytest
import yaml

from karpy.api import errors, manifest, yaml_events
from karpy.kube import compact, interface
from karpy.simulator import engine, scenario, whatif, whatif_state

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"
DUMPED_KINDS = ("Node", "Pod", "Deployment", "ReplicaSet", "DaemonSet", "PodDisruptionBudget", "NodePool",
                "NodeClaim", "EC2NodeClass")
T0 = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def items() -> list[dict[str, Any]]:
    """The objects of the simulated ``whatif-source`` cluster at 6m, without what real dumps add."""
    sim = engine.Simulation(scenario.load(EXAMPLES / "whatif-source.yaml"), seed=3)
    sim.run()
    out = [copy.deepcopy(o) for kind in DUMPED_KINDS for o in sim.cluster.list(kind)]
    for o in out:
        whatif_state.prune(o)
        if o["kind"] == "Pod":  # what the simulated kubelet wrote and the pruning drops
            o["status"] = {k: v for k, v in (o.get("status") or {}).items() if k not in compact.DROPPED_POD_STATUS}
    return out


def _dump(objs: list[dict[str, Any]]) -> str:
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objs}, sort_keys=True)
    assert "&id" not in text  # no YAML anchors: the fast path reads it
    return text


def _as_real_clusters_dump_them(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for o in copy.deepcopy(objs):
        md = o["metadata"]
        md["managedFields"] = [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                                "time": T0, "fieldsType": "FieldsV1",
                                "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {"f:x": {}}}}]
        md.setdefault("annotations", {})[compact.LAST_APPLIED] = json.dumps(
            {"apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": {"name": md.get("name")}})
        if o["kind"] == "Pod":
            for c in o["spec"]["containers"]:
                c.update({"env": [{"name": "A", "value": "1"}], "command": ["/bin/app", "--serve"],
                          "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
                          "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets"}],
                          "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log"})
            o.setdefault("status", {}).update({
                "podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}], "hostIPs": [{"ip": "10.0.0.1"}],
                "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0, "image": c["image"],
                                       "imageID": "sha256:abc", "containerID": "containerd://x",
                                       "state": {"running": {"startedAt": T0}}}
                                      for c in o["spec"]["containers"]]})
        if o["kind"] == "Node":
            o.setdefault("status", {})["images"] = [{"names": [f"registry.example/img-{i}:1"], "sizeBytes": 10 ** 8}
                                                    for i in range(5)]
        out.append(o)
    return out


def test_a_dump_with_what_real_clusters_add_gives_the_same_answer_as_the_same_dump_stripped(
        items: list[dict[str, Any]]) -> None:
    stripped = whatif.run([("stripped.yaml", _dump(items))], for_seconds=1200.0)
    full = whatif.run([("full.yaml", _dump(_as_real_clusters_dump_them(items)))], for_seconds=1200.0)
    assert full.to_dict() == stripped.to_dict()
    assert any(a["action"] == "disrupt" for a in full.actions)  # the run decides something
    assert full.result is not None and stripped.result is not None
    pods = {interface.name_of(p): p["spec"].get("nodeName") for p in full.result.objects["pods"]}
    assert pods == {interface.name_of(p): p["spec"].get("nodeName") for p in stripped.result.objects["pods"]}


def test_what_the_simulator_never_reads_is_gone_from_the_state(items: list[dict[str, Any]]) -> None:
    state = whatif_state.read([("full.yaml", _dump(_as_real_clusters_dump_them(items)))])
    kept = [*state.objects, *state.nodes, *state.nodeclaims, *state.bound_pods, *state.pending_pods]
    assert kept and state.bound_pods
    for o in kept:
        assert "managedFields" not in o["metadata"]
        assert compact.LAST_APPLIED not in (o["metadata"].get("annotations") or {})
    for p in state.bound_pods:
        assert "containerStatuses" not in p["status"] and "podIP" not in p["status"]
        assert all(set(c) <= set(compact.CONTAINER_FIELDS) for c in p["spec"]["containers"])
    assert all("images" not in n["status"] for n in state.nodes)


def test_the_fast_yaml_path_and_the_full_loader_give_the_same_state(
        items: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    text = _dump(_as_real_clusters_dump_them(items))
    assert yaml_events.read(manifest._Loader(text)) is not None
    fast = whatif_state.read([("full.yaml", text)])

    def full_loader_only(loader: Any, prune: Any = None) -> None:
        loader.dispose()

    monkeypatch.setattr(yaml_events, "read", full_loader_only)
    slow = whatif_state.read([("full.yaml", text)])
    assert fast == slow


def test_a_malformed_field_the_simulator_never_reads_does_not_stop_whatif_but_a_read_one_does(
        items: list[dict[str, Any]]) -> None:
    objs = _as_real_clusters_dump_them(items)
    pod = next(o for o in objs if o["kind"] == "Pod")
    pod["metadata"]["managedFields"] = "not a list"
    pod["spec"]["containers"][0]["livenessProbe"] = ["not", "a", "probe"]
    state = whatif_state.read([("dump.yaml", _dump(objs))])
    assert interface.name_of(pod) in {interface.name_of(p) for p in state.bound_pods}
    pod["spec"]["containers"][0]["resources"] = ["not", "resources"]
    with pytest.raises(errors.ValidationError) as exc:
        whatif_state.read([("dump.yaml", _dump(objs))])
    assert any(f"Pod/{pod['metadata']['namespace']}/{interface.name_of(pod)}" in e.obj
               and "resources" in e.path for e in exc.value.errors), exc.value.errors


def test_the_json_answer_is_streamed_in_pieces_and_equals_the_whole_document(items: list[dict[str, Any]]) -> None:
    answer = whatif.run([("stripped.yaml", _dump(items))], for_seconds=1200.0)
    writes: list[str] = []

    class Sink(io.StringIO):
        def write(self, s: str) -> int:
            writes.append(s)
            return super().write(s)

    sink = Sink()
    whatif.write_json(answer, sink, chunk=256)
    assert json.loads(sink.getvalue()) == answer.to_dict()
    assert sink.getvalue() == whatif.render_json(answer)
    assert len(writes) > 3 and max(len(w) for w in writes) < 1024
