"""EFA in ``karpy simulate``: a pod asking for ``vpc.amazonaws.com/efa`` runs only on a type with EFA interfaces, and
an EC2NodeClass's ``networkInterfaces`` set the EFA count and the max pods as Karpenter's AWS provider does.

Karpenter's AWS provider gives each type with EFA its ``MaximumEfaInterfaces`` as ``vpc.amazonaws.com/efa``; with
``networkInterfaces`` on the EC2NodeClass, the count is the ``efa-only`` entries instead, and those on network card
0 take an ENI each out of the ENI-limited max pods.
"""

from __future__ import annotations

from typing import Any

from karpy.cloudprovider.aws import instancetypes as aws
from karpy.simulator import engine, scenario

from . import scenarios as sc

EFA = "vpc.amazonaws.com/efa"
POOL = """
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
"""


def _efa_app(name: str = "mpi") -> str:
    return sc.deployment(name, 1).replace(
        "resources: {requests: {cpu: 500m, memory: 512Mi}}",
        f"resources: {{requests: {{cpu: 500m, memory: 512Mi, {EFA}: '1'}}, limits: {{{EFA}: '1'}}}}")


def _node_of(result: Any, prefix: str) -> dict[str, Any]:
    (pod,) = sc.running(result, prefix)
    found: dict[str, Any] = next(n for n in result.objects["nodes"]
                                 if n["metadata"]["name"] == pod["spec"]["nodeName"])
    return found


def _type(node: dict[str, Any]) -> str:
    return str(node["metadata"]["labels"]["node.kubernetes.io/instance-type"])


def test_an_efa_pod_runs_on_the_cheapest_type_with_efa_where_a_plain_pod_gets_a_cheaper_type_without() -> None:
    efa_node = _node_of(sc.run(sc.docs(sc.nodepool(requirements=POOL), _efa_app()), until="3m"), "mpi-")
    web_node = _node_of(sc.run(sc.docs(sc.nodepool(requirements=POOL), sc.deployment("web", 1)), until="3m"), "web-")
    types = aws.data()["types"]
    assert types[_type(efa_node)].get("efa", 0) >= 1
    assert efa_node["status"]["capacity"][EFA] == str(types[_type(efa_node)]["efa"])
    cheapest_efa = min(t["price"] for n, t in types.items() if t.get("efa") and n[0] in "cm" and
                       "x86_64" in t["arch"])
    assert types[_type(efa_node)]["price"] == cheapest_efa
    assert not types[_type(web_node)].get("efa")
    assert EFA not in web_node["status"]["capacity"]
    assert types[_type(web_node)]["price"] < cheapest_efa


def test_an_efa_pod_stays_pending_when_the_pool_has_no_type_with_efa() -> None:
    pool = POOL.replace("values: [c, m]", "values: [t]")
    result = sc.run(sc.docs(sc.nodepool(requirements=pool), _efa_app()), until="3m")
    assert len(sc.pending(result, "mpi-")) == 1
    assert not sc.karpy_nodes(result)


def test_efa_only_network_interfaces_set_the_efa_count_and_take_their_card_0_enis_out_of_max_pods() -> None:
    """As in Karpenter, the count is the efa-only entries on every type (the NodeClass says what it attaches), so
    the EFA pod's cheapest fit moves from c5n.9xlarge (the cheapest c5n with its own EFA) to c5n.large."""
    interfaces = ("  networkInterfaces:\n"
                  "  - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}\n"
                  "  - {networkCardIndex: 0, deviceIndex: 1, interfaceType: efa-only}\n"
                  "  - {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}\n")
    pool = POOL.replace("values: [c, m]", "values: [c]") + \
        "    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5n]}\n"
    plain = _node_of(sc.run(sc.docs(sc.nodepool(requirements=pool), _efa_app()), until="3m"), "mpi-")
    assert _type(plain) == "c5n.9xlarge" and plain["status"]["capacity"][EFA] == "1"
    assert plain["status"]["capacity"]["pods"] == str(8 * (30 - 1) + 2)  # 8 ENIs, 30 IPv4 each
    text = sc.text(sc.docs(sc.nodepool(requirements=pool), _efa_app()), until="3m").replace(
        "  role: KarpenterNodeRole-parity\n", "  role: KarpenterNodeRole-parity\n" + interfaces, 1)
    node = _node_of(engine.Simulation(scenario.load_text(text, source="efa.yaml")).run(), "mpi-")
    assert _type(node) == "c5n.large"
    assert node["status"]["capacity"][EFA] == "2"  # the two efa-only entries
    assert node["status"]["capacity"]["pods"] == str((3 - 1) * (10 - 1) + 2)  # one of c5n.large's 3 ENIs is EFA
