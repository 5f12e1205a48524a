"""Candidate rules: ownership, initialization, do-not-disrupt, blocking PDBs, emptiness."""

from __future__ import annotations

from karpy.api import labels, meta, node, nodeclaim, nodepool, pod, podspec, selectors
from karpy.disruption import candidates

POOL = nodepool.NodePool(metadata=meta.ObjectMeta(name="default"))
CLAIM = nodeclaim.NodeClaim(metadata=meta.ObjectMeta(name="n1", labels={labels.NODEPOOL: "default"}))


def a_node(**extra_labels: str) -> node.Node:
    lbls = {labels.NODEPOOL: "default", labels.INITIALIZED: "true", **extra_labels}
    return node.Node(metadata=meta.ObjectMeta(name="n1", labels=lbls), conditions={"Ready": "True"})


def a_pod(name: str, *, app: str = "web", phase: str = "Running", owner: str | None = None) -> pod.Pod:
    refs: tuple[meta.OwnerReference, ...] = ()
    if owner:
        refs = (meta.OwnerReference(api_version="apps/v1", kind=owner, name="o", uid="u", controller=True),)
    return pod.Pod(metadata=meta.ObjectMeta(name=name, namespace="default", labels={"app": app},
                                            owner_references=refs), node_name="n1", phase=phase)


def test_an_initialized_karpy_node_is_a_candidate() -> None:
    assert candidates.why_not(a_node(), CLAIM, POOL, [a_pod("p")]) is None


def test_a_node_without_a_nodeclaim_is_not_karpys() -> None:
    assert candidates.why_not(a_node(), None, POOL, []) == "node is not managed by karpy"


def test_an_uninitialized_node_is_not_a_candidate() -> None:
    n = a_node(**{labels.INITIALIZED: "false"})
    assert candidates.why_not(n, CLAIM, POOL, []) == "node is not initialized"


def test_a_pdb_allowing_no_disruption_blocks_the_node() -> None:
    pdb = candidates.Pdb("default", "web", selectors.LabelSelector(match_labels={"app": "web"}), 0)
    assert candidates.why_not(a_node(), CLAIM, POOL, [a_pod("p")], [pdb]) == 'pdb "default/web" prevents pod evictions'
    other = candidates.Pdb("default", "db", selectors.LabelSelector(match_labels={"app": "db"}), 0)
    assert candidates.why_not(a_node(), CLAIM, POOL, [a_pod("p")], [other]) is None


def test_daemonset_and_finished_pods_leave_a_node_empty() -> None:
    assert candidates.is_empty([a_pod("ds", owner="DaemonSet"), a_pod("done", phase="Succeeded")])
    assert not candidates.is_empty([a_pod("ds", owner="DaemonSet"), a_pod("web")])


def a_protected_pod(value: str, created: float, *, started: float | None = -1.0) -> pod.Pod:
    """A running pod created 60 s before it started (``started`` -1: at ``created``; None: not yet)."""
    return pod.Pod(metadata=meta.ObjectMeta(name="job", namespace="default", creation_timestamp=created - 60,
                                            annotations={labels.DO_NOT_DISRUPT: value}),
                   node_name="n1", phase="Running", start_time=created if started == -1.0 else started)


def test_a_do_not_disrupt_duration_protects_the_node_only_until_it_has_passed_since_the_pod_started() -> None:
    p = a_protected_pod("5m", created=1000.0)
    assert candidates.why_not(a_node(), CLAIM, POOL, [p], now=1000.0 + 299) == (
        'pod "default/job" has "karpenter.sh/do-not-disrupt" annotation')
    assert candidates.why_not(a_node(), CLAIM, POOL, [p], now=1000.0 + 300) is None


def test_a_do_not_disrupt_duration_counts_from_the_pods_start_time_and_protects_a_pod_not_started() -> None:
    """Karpenter ``IsDoNotDisruptActive`` (pkg/utils/pod/scheduling.go): pod age is now - status.startTime;
    no startTime fails safe (protected)."""
    assert a_protected_pod("5m", created=1000.0).protected(1000.0 + 299)  # 359 s after creation
    assert a_protected_pod("5m", created=1000.0, started=None).protected(10**9)


def test_do_not_disrupt_true_protects_for_good_and_a_bad_value_protects_nothing() -> None:
    assert a_protected_pod("true", created=0.0).protected(10**9)
    assert not a_protected_pod("soon", created=0.0).protected(1.0)
    assert a_protected_pod("1h30m", created=0.0).protected(5399.0)
    assert not a_protected_pod("1h30m", created=0.0).protected(5400.0)


def test_a_pod_under_two_pdbs_keeps_its_node_from_being_chosen_even_when_both_allow_disruptions() -> None:
    """The Eviction API refuses a pod more than one budget selects (500), so the node could never drain."""
    web = candidates.Pdb("default", "web", selectors.LabelSelector(match_labels={"app": "web"}), 3)
    every = candidates.Pdb("default", "all", selectors.LabelSelector(), 5)
    why = candidates.why_not(a_node(), CLAIM, POOL, [a_pod("p")], candidates.Budgets([web, every]))
    assert why == ('pod "default/p" is selected by more than one PodDisruptionBudget (default/web, default/all), '
                   "which the Eviction API refuses")
    assert candidates.why_not(a_node(), CLAIM, POOL, [a_pod("p")], [web, every]) == why


def test_a_daemonset_pod_under_a_fully_blocking_pdb_keeps_its_node_from_being_chosen() -> None:
    """Karpenter's ``CanEvictPods`` reads every evictable pod, DaemonSet pods included."""
    pdb = candidates.Pdb("default", "agent", selectors.LabelSelector(match_labels={"app": "agent"}), 0)
    pods = [a_pod("agent-x", app="agent", owner="DaemonSet"), a_pod("p")]
    assert candidates.why_not(a_node(), CLAIM, POOL, pods, [pdb]) == 'pdb "default/agent" prevents pod evictions'


def test_an_unready_pod_under_an_always_allow_pdb_does_not_block() -> None:
    pdb = candidates.Pdb("default", "web", selectors.LabelSelector(match_labels={"app": "web"}), 0,
                         always_evict_unhealthy=True)
    unready = pod.Pod(metadata=meta.ObjectMeta(name="p", namespace="default", labels={"app": "web"}),
                      node_name="n1", phase="Running",
                      conditions=(podspec.PodCondition(type="Ready", status="False"),))
    assert candidates.why_not(a_node(), CLAIM, POOL, [unready], [pdb]) is None
    assert candidates.why_not(a_node(), CLAIM, POOL, [a_pod("p")], [pdb]) == 'pdb "default/web" prevents pod evictions'


def test_an_eventual_disruption_ignores_blocking_pods_only_for_a_nodeclaim_with_a_grace_period() -> None:
    """Karpenter ``NewCandidate``: with ``EventualDisruptionClass`` and a terminationGracePeriod,
    pods that block eviction do not keep the node from being a candidate; the node's own
    do-not-disrupt annotation still does."""
    import dataclasses

    p = a_protected_pod("true", created=0.0)
    with_grace = dataclasses.replace(CLAIM, spec=dataclasses.replace(CLAIM.spec, termination_grace_period=300.0))
    assert candidates.why_not(a_node(), CLAIM, POOL, [p], now=1.0, eventual=True) is not None
    assert candidates.why_not(a_node(), with_grace, POOL, [p], now=1.0) is not None
    assert candidates.why_not(a_node(), with_grace, POOL, [p], now=1.0, eventual=True) is None
    blocked = node.Node(metadata=meta.ObjectMeta(name="n1", labels=a_node().labels,
                                                 annotations={labels.DO_NOT_DISRUPT: "true"}),
                        conditions={"Ready": "True"})
    assert candidates.why_not(blocked, with_grace, POOL, [p], now=1.0, eventual=True) is not None
