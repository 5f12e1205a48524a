"""The typed Pod decoder gives the same cached projection as decoding to dicts and projecting."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from karpy.kube import compact, fastdecode, informer


def realistic_pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{i}", "namespace": "default", "uid": f"u-{i}", "resourceVersion": str(10 + i),
            "creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": None, "generation": 1,
            "labels": {"app": "web"}, "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs"}],
            "finalizers": ["example.com/f"],
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {
            "nodeName": "n1", "priority": 0, "hostNetwork": False, "nodeSelector": None,
            "containers": [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}],
                            "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80, "hostPort": 80}],
                            "readinessProbe": {"httpGet": {"path": "/"}}}],
            "initContainers": [{"name": "sidecar", "image": "s:1", "restartPolicy": "Always", "command": ["x"]}],
            "volumes": [{"name": "token", "projected": {"sources": []}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        },
        "status": {
            "phase": "Pending", "nominatedNodeName": "n2",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None}
            ],
            "containerStatuses": [{"name": "app", "ready": False}], "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
            "qosClass": "Burstable",
        },
    }


def dict_path(pod: dict[str, Any]) -> dict[str, Any]:
    obj = informer.trim(copy.deepcopy(pod), "Pod", "v1")
    return compact.project_pod(obj)


def test_a_list_page_decodes_to_the_same_projection_as_the_dict_path() -> None:
    pods = [realistic_pod(i) for i in range(3)]
    body = orjson.dumps({"kind": "PodList", "metadata": {"resourceVersion": "99", "continue": "abc"}, "items": pods})
    meta, items = fastdecode.decode_pod_list(body)
    assert meta == {"resourceVersion": "99", "continue": "abc"}
    assert items == [dict_path(p) for p in pods]
    assert "managedFields" not in items[0]["metadata"]
    assert [v["name"] for v in items[0]["spec"]["volumes"]] == ["data", "scratch"]
    assert items[0]["spec"]["containers"] == [
        {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "1"}},
         "ports": [{"containerPort": 80, "hostPort": 80}]}
    ]
    assert items[0]["spec"]["nodeSelector"] is None


def test_watch_events_decode_pods_and_pass_error_statuses_whole() -> None:
    pod = realistic_pod(7)
    event_type, obj = fastdecode.decode_pod_event(orjson.dumps({"type": "MODIFIED", "object": pod}))
    assert (event_type, obj) == ("MODIFIED", dict_path(pod))
    status = {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"}
    assert fastdecode.decode_pod_event(orjson.dumps({"type": "ERROR", "object": status})) == ("ERROR", status)


def test_a_malformed_body_is_a_decode_error() -> None:
    with pytest.raises(fastdecode.DecodeError):
        fastdecode.decode_pod_list(b'{"items": [{"spec": {"containers": 3}}]}')
    with pytest.raises(fastdecode.DecodeError):
        fastdecode.decode_pod_event(b"not json")
