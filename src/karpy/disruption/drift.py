"""Drift: has a NodeClaim drifted from its NodePool (or its NodeClass, as the cloud sees it)?

Karpenter v1 (``concepts/disruption``, Drift) in karpy's words. A NodeClaim is drifted when:

* **static drift** (:data:`NODEPOOL_DRIFTED`): its ``karpenter.sh/nodepool-hash`` annotation
  differs from the NodePool's current :meth:`karpy.api.nodepool.NodePool.hash` (template labels,
  annotations, taints, startup taints, nodeClassRef, expireAfter, terminationGracePeriod). Only
  when its ``karpenter.sh/nodepool-hash-version`` is the current
  :data:`karpy.api.nodepool.HASH_VERSION`: a claim stamped by another hash version is not
  drifted; :func:`needs_restamp` tells the caller to write the current hash and version onto it
  silently (Karpenter does the same after an upgrade changes the hash function). karpy's hash
  versions are its own (``karpy-v1``), never Karpenter's (``v3`` / ``v4``): the NodeClaims of a
  cluster Karpenter ran carry Karpenter's hashes, which karpy cannot reproduce, so taking over
  re-stamps them instead of replacing every node. The NodeClass hash (``ec2nodeclass-hash`` /
  ``aksnodeclass-hash`` with its ``-version``) is re-stamped the same way;
* **requirements drift** (:data:`REQUIREMENTS_DRIFTED`): its labels (the NodeClaim's, plus its
  Node's) no longer satisfy the NodePool's ``spec.template.spec.requirements``: every requirement
  key must be defined by a label whose value the requirement admits, unless the requirement admits
  an absent label (``NotIn``, ``DoesNotExist``). A requirement widened to still admit the
  claim's value is not drift, and neither are requirements the claim was launched under
  (:func:`launched_under`: each pool requirement admits all the claim's own requirement on that
  key admits), whatever labels the node ended up with;
* **cloud drift**: the cloud provider's ``is_drifted(claim)`` returns a reason (``AMIDrift``,
  ``NodeClassDrift``...). The caller makes that call (this module does no I/O) and passes the
  answer to :func:`drift_reason`.

Behavioural NodePool fields (weight, limits, disruption) never cause drift. Pure functions (a
NodePool's hash and parsed requirements are remembered per NodePool object, see :func:`pool_view`;
a changed NodePool is a new object).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from karpy.api import labels as wk
from karpy.api import nodeclaim as nodeclaim_mod
from karpy.api import nodeclass as nodeclass_mod
from karpy.api import nodepool as nodepool_mod
from karpy.scheduling import requirements as reqs_mod

NODEPOOL_DRIFTED = "NodePoolDrifted"
REQUIREMENTS_DRIFTED = "RequirementsDrifted"


_NODECLASS_HASHES = (wk.NODECLASS_HASH_AWS, wk.NODECLASS_HASH_AZURE)
_POOL_VIEWS_MAX = 64
_ANSWERS_MAX = 4096


class PoolView(NamedTuple):
    """What drift reads of one NodePool object: its hash and its parsed template requirements
    (``None`` when karpy cannot read them)."""

    pool: nodepool_mod.NodePool
    hash: str
    requirements: reqs_mod.Requirements | None
    label_keys: tuple[str, ...]
    """The node label keys the requirements read: theirs, and the legacy keys that stand for them."""
    answers: dict[tuple[tuple[str, str], ...], str | None]
    """:func:`requirements_drift` by the node's labels on :attr:`label_keys` (nodes of one NodePool
    share a few combinations of them; at most :data:`_ANSWERS_MAX` are remembered)."""


_pool_views: dict[int, PoolView] = {}


def pool_view(pool: nodepool_mod.NodePool) -> PoolView:
    """``pool``'s :class:`PoolView`, computed once per NodePool object (models are never changed in
    place: a new version of the NodePool is a new object; at most a few dozen are remembered)."""
    view = _pool_views.get(id(pool))
    if view is not None and view.pool is pool:
        return view
    try:
        wanted: reqs_mod.Requirements | None = reqs_mod.Requirements.from_node_selector_requirements(
            pool.template.spec.requirements)
    except ValueError:
        wanted = None
    keys = tuple(sorted({k for k in wanted} | {old for old, new in wk.NORMALIZED_LABELS.items() if new in wanted})
                 ) if wanted is not None else ()
    view = PoolView(pool, pool.hash(), wanted, keys, {})
    if len(_pool_views) >= _POOL_VIEWS_MAX:
        _pool_views.clear()
    _pool_views[id(pool)] = view
    return view


def needs_restamp(claim: nodeclaim_mod.NodeClaim) -> bool:
    """The claim's NodePool hash, or the NodeClass hash it carries, was written by another hash
    version (or none, as Karpenter before hash versions): re-stamp, do not drift."""
    annotations = claim.metadata.annotations
    if annotations.get(wk.NODEPOOL_HASH_VERSION) != nodepool_mod.HASH_VERSION:
        return True
    return any(key in annotations
               and annotations.get(key + wk.HASH_VERSION_SUFFIX) != nodeclass_mod.HASH_VERSION
               for key in _NODECLASS_HASHES)


def restamp_patch(pool: nodepool_mod.NodePool,
                  nodeclass_hash: tuple[str, str] | None = None) -> dict[str, object]:
    """The metadata merge patch that stamps ``pool``'s current hash and hash version on a claim and,
    when given, the current NodeClass hash ``(annotation, value)`` with karpy's NodeClass hash version."""
    annotations = {wk.NODEPOOL_HASH: pool.hash(), wk.NODEPOOL_HASH_VERSION: nodepool_mod.HASH_VERSION}
    if nodeclass_hash is not None:
        annotations[nodeclass_hash[0]] = nodeclass_hash[1]
        annotations[nodeclass_hash[0] + wk.HASH_VERSION_SUFFIX] = nodeclass_mod.HASH_VERSION
    return {"metadata": {"annotations": annotations}}


def static_drift(claim: nodeclaim_mod.NodeClaim, pool: nodepool_mod.NodePool) -> str | None:
    """:data:`NODEPOOL_DRIFTED` when the stamped hash (of the current version) is not the pool's."""
    if needs_restamp(claim):
        return None
    stamped = claim.metadata.annotations.get(wk.NODEPOOL_HASH)
    if stamped is None or stamped == pool_view(pool).hash:
        return None
    return NODEPOOL_DRIFTED


def requirements_drift(pool: nodepool_mod.NodePool, node_labels: Mapping[str, str]) -> str | None:
    """:data:`REQUIREMENTS_DRIFTED` when ``node_labels`` do not satisfy the pool's requirements."""
    view = pool_view(pool)
    wanted = view.requirements
    if wanted is None:
        return None  # requirements karpy cannot read are not evidence of drift
    # only the keys the pool constrains are compared: the node's other labels cannot change the answer
    read = tuple((k, node_labels[k]) for k in view.label_keys if k in node_labels)
    answers = view.answers
    if read in answers:
        return answers[read]
    have = reqs_mod.Requirements.from_labels(dict(read))
    answer = REQUIREMENTS_DRIFTED if have.compatible(wanted, frozenset()) is not None else None
    if len(answers) >= _ANSWERS_MAX:
        answers.clear()
    answers[read] = answer
    return answer


def launched_under(claim: nodeclaim_mod.NodeClaim, pool: nodepool_mod.NodePool) -> bool:
    """Every requirement of ``pool`` admits all the claim's own ``spec.requirements`` admit on its key.

    Then the pool's requirements are the ones the claim was launched under (or wider), and a node
    karpy launched from them is never requirements-drifted by karpy itself."""
    wanted = pool_view(pool).requirements
    if wanted is None:
        return False
    try:
        had = reqs_mod.Requirements.from_node_selector_requirements(claim.spec.requirements)
    except ValueError:
        return False
    for key, w in wanted.items():
        if key not in had:
            return False
        h = had[key]
        if h.intersection(w) != h:
            return False
    return True


def drift_reason(claim: nodeclaim_mod.NodeClaim, pool: nodepool_mod.NodePool,
                 node_labels: Mapping[str, str] | None = None, cloud_reason: str = "") -> str | None:
    """Why ``claim`` has drifted (static, then requirements, then the cloud's reason), else ``None``.

    ``node_labels`` are the Node's labels when it has registered (merged over the claim's own).
    """
    static = static_drift(claim, pool)
    if static is not None:
        return static
    merged = dict(claim.labels)
    if node_labels:
        merged.update(node_labels)
    req = requirements_drift(pool, merged)
    if req is not None and not launched_under(claim, pool):
        return req
    return cloud_reason or None
