"""Issue 21 section 3 (status): the NodePool's ``NodeRegistrationHealthy`` condition and its own
``karpenter.sh/nodepool-hash`` annotations, as Karpenter keeps them.

- ``pkg/controllers/nodeclaim/lifecycle/registration_test.go`` ("should add NodeRegistrationHealthy=true
  on the nodePool if registration succeeds ..."): a NodeClaim that registers makes it ``True``;
- ``liveness_test.go`` ("should update NodeRegistrationHealthy status condition to False if it was
  previously set to Unknown and there are >=2 registration failures"): two NodeClaims deleted for
  not registering make it ``False``, reason ``RegistrationFailed``;
- ``pkg/controllers/nodepool/registrationhealth/suite_test.go`` ("should set ... as Unknown if the
  nodePool is updated"): a NodePool change resets it to ``Unknown`` (and ``nodeClassObservedGeneration``
  follows the NodeClass);
- ``pkg/controllers/nodepool/hash/suite_test.go`` ("should update the drift hash when NodePool
  static field is updated"): the NodePool carries ``karpenter.sh/nodepool-hash`` (the value its
  NodeClaims carry) and ``karpenter.sh/nodepool-hash-version``.
"""

from __future__ import annotations

import textwrap
from typing import Any

from karpy.api import labels as wk
from karpy.api import nodepool as nodepool_mod
from karpy.controllers import registration_health as rh
from karpy.simulator import engine, scenario

from . import scenarios as sc


def _pool(result: engine.Result) -> dict[str, Any]:
    (pool,) = result.objects["nodepools"]
    return pool


def _condition(result: engine.Result) -> dict[str, Any]:
    pool = _pool(result)
    return next(c for c in pool["status"]["conditions"] if c["type"] == rh.CONDITION)


def test_a_registered_node_makes_the_nodepool_registration_healthy_and_it_carries_its_hash() -> None:
    result = sc.run(sc.docs(sc.nodepool(), sc.deployment("web", 1)), until="3m")
    cond = _condition(result)
    assert (cond["status"], cond["reason"]) == ("True", rh.CONDITION)
    pool = _pool(result)
    assert cond["observedGeneration"] == pool["metadata"]["generation"]
    assert pool["status"]["nodeClassObservedGeneration"] == 1
    annotations = pool["metadata"]["annotations"]
    assert annotations[wk.NODEPOOL_HASH] == nodepool_mod.NodePool.from_manifest(pool).hash()
    assert annotations[wk.NODEPOOL_HASH_VERSION] == nodepool_mod.HASH_VERSION
    (claim,) = result.objects["nodeclaims"]
    assert claim["metadata"]["annotations"][wk.NODEPOOL_HASH] == annotations[wk.NODEPOOL_HASH]


def test_two_nodes_that_never_register_make_it_false_with_karpenters_reason() -> None:
    text = sc.text(sc.docs(sc.nodepool(), sc.deployment("web", 1)), until="40m").replace(
        "  seed: 3\n", "  seed: 3\n  faults: {nodes: {neverRegister: 1.0}}\n")
    result = engine.Simulation(scenario.load_text(text, source="parity.yaml")).run()
    assert len(sc.events(result, "RegistrationTimeout")) >= 2
    cond = _condition(result)
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "RegistrationFailed",
                                                                "Failed to register node")


def test_a_nodepool_change_resets_it_to_unknown_and_updates_the_hash() -> None:
    changed = sc.nodepool(template_metadata="labels: {example.com/generation: two}")
    step = "- at: 3m\n  apply:\n  - " + textwrap.indent(changed.strip("\n"), "    ")[4:]
    result = sc.run(sc.docs(sc.nodepool(), sc.deployment("web", 1)), until="3m10s", steps=step)
    cond = _condition(result)
    pool = _pool(result)
    assert cond["status"] == "Unknown"
    assert cond["observedGeneration"] == pool["metadata"]["generation"] == 2
    assert pool["metadata"]["annotations"][wk.NODEPOOL_HASH] == nodepool_mod.NodePool.from_manifest(pool).hash()


def test_the_tracker_needs_half_of_four_outcomes_failed_to_be_unhealthy() -> None:
    t = rh.Tracker()
    assert t.status() == rh.UNKNOWN
    t.outcomes.extend([True, False])
    assert t.status() == rh.HEALTHY
    assert t.status(False) == rh.UNHEALTHY
    t.set_status(rh.UNHEALTHY)
    assert t.status(True) == rh.UNHEALTHY  # one success after two failures is not enough
    t.outcomes.extend([True, True])
    assert t.status(True) == rh.HEALTHY
