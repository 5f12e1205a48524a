"""Decode and cache 100,000 pods and 10,000 nodes the way the adapter's informers do.

Builds realistic list pages as an API server returns them (``limit=500`` pages; each pod with
managedFields, a ReplicaSet owner, the service-account projected volume, probes, env, container
statuses, per-pod uids / IPs / container IDs and timestamps spread over time), then feeds them
through :class:`karpy.kube.informer.Informer`'s real list path (Pods: msgspec's typed partial
decode of :mod:`karpy.kube.fastdecode`; Nodes: orjson; then trim, compaction, cache insert, change
events). Building the JSON is not timed.

Prints pods/s decoded and cached (median of ``--runs`` runs) and the memory the cache holds over
the base, measured by tracemalloc in a separate run (tracemalloc slows allocation down).
Targets: >= 30,000 pods/s, <= 300 MB.

Run: ``python bench/kube_decode.py [--pods 100000] [--nodes 10000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tracemalloc
from collections.abc import Iterator
from typing import Any

import orjson

from karpy import clock
from karpy.kube import informer, paths

PAGE = 500


def _ts(second: int) -> str:
    return clock.rfc3339(1_767_225_600.0 + second)


def pod(i: int, nodes: int) -> dict[str, Any]:
    rs = f"web-{i % 200:03d}-7c9d8f5b4"
    app = f"web-{i % 200:03d}"
    created = i // 40  # 40 pods a second
    ip = f"10.{1 + i // 65025 % 250}.{i // 255 % 255}.{i % 255}"
    volume = f"kube-api-access-{i:05x}"[-21:]
    image = f"123456789012.dkr.ecr.us-west-2.amazonaws.com/{app}:v1.2.3"
    return {
        "metadata": {
            "name": f"{rs}-{i:06x}",
            "generateName": f"{rs}-",
            "namespace": f"team-{i % 20}",
            "uid": f"{i:08x}-1111-4222-8333-{i * 7919 % 10**12:012x}",
            "resourceVersion": str(1_000_000 + i),
            "creationTimestamp": _ts(created),
            "labels": {"app": app, "pod-template-hash": "7c9d8f5b4", "tier": "frontend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": f"rs-{i % 200}",
                 "controller": True, "blockOwnerDeletion": True}
            ],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": _ts(created), "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}},
                                             "f:ownerReferences": {".": {}, f'k:{{"uid":"rs-{i % 200}"}}': {}}},
                              "f:spec": {"f:containers": {'k:{"name":"app"}': {
                                  ".": {}, "f:image": {}, "f:name": {}, "f:ports": {}, "f:resources": {
                                      ".": {}, "f:limits": {".": {}, "f:memory": {}},
                                      "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}}},
                                  "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": _ts(created + 5),
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {'k:{"type":"Ready"}': {
                     ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
                     "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
                     "f:podIPs": {".": {}, f'k:{{"ip":"{ip}"}}': {".": {}, "f:ip": {}}}, "f:startTime": {}}}},
            ],
        },
        "spec": {
            "volumes": [{"name": volume, "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                    "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}], "defaultMode": 420}}],
            "containers": [{
                "name": "app", "image": image,
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "LOG_LEVEL", "value": "info"}],
                "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "512Mi"}},
                "volumeMounts": [{"name": volume, "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                   "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
                                   "failureThreshold": 3},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": f"ip-10-0-{i % nodes}",
            "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _ts(created + d)}
                for t, d in (("Initialized", 1), ("Ready", 4), ("ContainersReady", 4), ("PodScheduled", 0))
            ],
            "hostIP": f"10.0.{i % nodes // 250}.{i % nodes % 250}", "podIP": ip, "podIPs": [{"ip": ip}],
            "startTime": _ts(created),
            "containerStatuses": [{
                "name": "app", "state": {"running": {"startedAt": _ts(created + 3)}}, "lastState": {},
                "ready": True, "restartCount": 0, "image": image,
                "imageID": f"123456789012.dkr.ecr.us-west-2.amazonaws.com/web@sha256:{i % 200:064x}",
                "containerID": f"containerd://{i * 104729:064x}", "started": True}],
            "qosClass": "Burstable",
        },
    }


def node(i: int) -> dict[str, Any]:
    name = f"ip-10-0-{i}"
    return {
        "metadata": {
            "name": name, "uid": f"node-{i:08x}", "resourceVersion": str(2_000_000 + i),
            "creationTimestamp": _ts(i), "labels": {
                "kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "m5.xlarge",
                "topology.kubernetes.io/zone": f"us-west-2{'abc'[i % 3]}", "karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "on-demand", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
            "annotations": {"karpenter.sh/nodepool-hash": "12345", "node.alpha.kubernetes.io/ttl": "0"},
            "finalizers": ["karpenter.sh/termination"],
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                               "time": _ts(i), "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {"providerID": f"aws:///us-west-2a/i-{i:017x}", "taints": []},
        "status": {
            "capacity": {"cpu": "4", "memory": "16072324Ki", "pods": "58", "ephemeral-storage": "20959212Ki"},
            "allocatable": {"cpu": "3920m", "memory": "15056516Ki", "pods": "58", "ephemeral-storage": "18242267924"},
            "conditions": [{"type": t, "status": "False" if t != "Ready" else "True",
                            "lastHeartbeatTime": _ts(10_000 + i), "lastTransitionTime": _ts(i), "reason": t,
                            "message": f"kubelet reports {t}"}
                           for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
            "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.31.2-eks-1234", "containerRuntimeVersion": "containerd://1.7.22",
                         "osImage": "Amazon Linux 2023", "architecture": "amd64", "operatingSystem": "linux",
                         "kernelVersion": "6.1.112", "machineID": f"{i:032x}", "systemUUID": f"ec2{i:029x}",
                         "bootID": f"{i:08x}-aaaa-bbbb-cccc-dddddddddddd", "kubeProxyVersion": "v1.31.2"},
        },
    }


def pages(kind: str, count: int, build: Any) -> list[bytes]:
    out = []
    for start in range(0, count, PAGE):
        items = [build(i) for i in range(start, min(count, start + PAGE))]
        meta: dict[str, Any] = {"resourceVersion": "3000000"}
        if start + PAGE < count:
            meta["continue"] = str(start + PAGE)
        out.append(orjson.dumps({"kind": f"{kind}List", "apiVersion": "v1", "metadata": meta, "items": items}))
    return out


class PageClient:
    """Answers the informer's paginated LIST with prepared bodies (the informer decodes them)."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies

    def request_bytes(self, method: str, path: str, *, params: dict[str, str], **_: Any) -> bytes:
        return self.bodies[int(params.get("continue") or 0) // PAGE]


def fill(kind: str, bodies: list[bytes]) -> informer.Informer:
    inf = informer.Informer(PageClient(bodies), paths.resource_for(kind), lambda k, t, o: None)  # type: ignore[arg-type]
    inf._list()
    return inf


def iterate(bodies: list[bytes]) -> Iterator[bytes]:
    yield from bodies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    t = clock.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    print(f"machine load check: a 10M-iteration Python loop takes {clock.perf_counter() - t:.2f}s "
          "(about 0.4s on an idle core)")
    pod_pages = pages("Pod", args.pods, lambda i: pod(i, args.nodes))
    node_pages = pages("Node", args.nodes, node)
    size = sum(len(b) for b in pod_pages)
    print(f"{args.pods} pods in {len(pod_pages)} pages, {size / args.pods:.0f} bytes of JSON a pod; {args.nodes} nodes")
    rates = []
    for _ in range(args.runs):
        gc.collect()
        t0 = clock.perf_counter()
        pods = fill("Pod", pod_pages)
        t1 = clock.perf_counter()
        nodes = fill("Node", node_pages)
        assert len(pods) == args.pods and len(nodes) == args.nodes
        rates.append(args.pods / (t1 - t0))
        del pods, nodes
    print(f"decoded and cached: {statistics.median(rates):,.0f} pods/s (median of {args.runs}: "
          + ", ".join(f"{r:,.0f}" for r in rates) + ")")
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    pods = fill("Pod", pod_pages)
    nodes = fill("Node", node_pages)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    print(f"cache memory over the base: {held / 1e6:,.0f} MB for {len(pods)} pods + {len(nodes)} nodes "
          f"({held / (len(pods) + len(nodes)):,.0f} bytes an object)")
    print("targets: >= 30,000 pods/s, <= 300 MB")


if __name__ == "__main__":
    main()
