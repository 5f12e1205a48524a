"""Issue 21 item 1: pod (anti-)affinity terms with a ``namespaceSelector``.

Karpenter (``pkg/controllers/provisioning/scheduling/topology.go``, ``buildNamespaceList``) counts
the pods of the union of the term's ``namespaces`` and the Namespaces whose labels the selector
matches; ``namespaceSelector: {}`` selects every namespace. Its ``topology_test.go`` ("should
filter pod affinity topologies by namespace, empty namespace selector") schedules such a pod
next to the pod of another namespace it selects. karpy raised ``TypeError`` for any
``namespaceSelector`` and failed the provisioner's whole batch for ever.
"""

from __future__ import annotations

import textwrap

from karpy.simulator import engine

from . import scenarios as sc

NAMESPACES = """
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {team: b}}
"""


def _db(namespace: str, zone: str) -> str:
    """One ``security: s2`` pod in ``namespace``, pinned to ``zone``."""
    return textwrap.dedent(f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: db, namespace: {namespace}}}
    spec:
      replicas: 1
      selector: {{matchLabels: {{app: db}}}}
      template:
        metadata: {{labels: {{app: db, security: s2}}}}
        spec:
          nodeSelector: {{topology.kubernetes.io/zone: {zone}}}
          containers:
          - name: app
            image: registry.example/db:1
            resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}
    """)


def _follower(name: str, namespace_selector: str, key: str = "topology.kubernetes.io/zone") -> str:
    """A Deployment of no pods (scaled to one by :func:`_later`) with a required pod affinity."""
    return sc.deployment(name, 0, cpu="100m", memory="64Mi", pod_spec=f"""
        affinity:
          podAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: {key}
              labelSelector: {{matchLabels: {{security: s2}}}}
              namespaceSelector: {namespace_selector}
        """)


def _later(*names: str) -> str:
    """Steps scaling the followers to one pod at 2m, once the ``db`` pods run."""
    return "\n".join(f"- at: 2m\n  scale: {{kind: Deployment, namespace: default, name: {n}, replicas: 1}}"
                     for n in names)


def _zone_of(result: engine.Result, prefix: str) -> str:
    (p,) = sc.running(result, prefix)
    node = next(n for n in result.objects["nodes"] if n["metadata"]["name"] == p["spec"]["nodeName"])
    return str(node["metadata"]["labels"]["topology.kubernetes.io/zone"])


def test_an_empty_namespace_selector_provisions_instead_of_failing_every_batch() -> None:
    anti = """
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector: {matchLabels: {app: web}}
              namespaceSelector: {}
        """
    result = sc.run(sc.docs(sc.nodepool(), sc.deployment("web", 3, pod_spec=anti)), until="4m")
    assert len(sc.running(result, "web-")) == 3
    assert len({p["spec"]["nodeName"] for p in sc.running(result, "web-")}) == 3


def test_an_empty_namespace_selector_joins_the_pod_of_another_namespace() -> None:
    result = sc.run(sc.docs(sc.nodepool(), NAMESPACES, _db("team-a", "us-east-1b"),
                            _follower("follower", "{}", "kubernetes.io/hostname")), until="5m",
                    steps=_later("follower"))
    (db,) = sc.running(result, "db-")
    (follower,) = sc.running(result, "follower-")
    assert follower["spec"]["nodeName"] == db["spec"]["nodeName"]


def test_a_labelled_namespace_selector_counts_only_the_namespaces_it_selects() -> None:
    result = sc.run(sc.docs(sc.nodepool(), NAMESPACES, _db("team-a", "us-east-1b"), _db("team-b", "us-east-1c"),
                            _follower("with-a", "{matchLabels: {team: a}}"),
                            _follower("with-b", "{matchExpressions: [{key: team, operator: In, values: [b]}]}")),
                    until="5m", steps=_later("with-a", "with-b"))
    assert _zone_of(result, "with-a-") == "us-east-1b"
    assert _zone_of(result, "with-b-") == "us-east-1c"


def test_a_namespace_selector_that_selects_no_namespace_leaves_the_pod_pending() -> None:
    result = sc.run(sc.docs(sc.nodepool(), NAMESPACES, _db("team-a", "us-east-1b"),
                            _follower("lonely", "{matchLabels: {team: nobody}}")), until="5m",
                    steps=_later("lonely"))
    assert sc.running(result, "db-")
    assert len(sc.pending(result, "lonely-")) == 1
