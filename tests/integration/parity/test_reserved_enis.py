"""``RESERVED_ENIS`` in ``karpy simulate``: the reserved ENIs leave the ENI-limited max pods of every AWS type, as in
Karpenter's AWS provider, so a node holds fewer pods and more nodes are launched for the same pods."""

from __future__ import annotations

from karpy.cloudprovider.aws import instancetypes as aws
from karpy.simulator import scenario

from . import scenarios as sc

POOL = """
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
"""


def test_reserved_enis_lower_a_nodes_pods_and_more_nodes_are_launched_for_the_same_pods() -> None:
    spec = aws.data()["types"]["m5.large"]
    assert (spec["enis"], spec["ipv4"]) == (3, 10)
    app = sc.deployment("tiny", 50, cpu="10m", memory="16Mi")
    plain = sc.run(sc.docs(sc.nodepool(requirements=POOL), app), until="4m")
    reserved = sc.run(sc.docs(sc.nodepool(requirements=POOL), app), until="4m", settings="reservedENIs: 1")
    assert {n["status"]["capacity"]["pods"] for n in sc.karpy_nodes(plain)} == {"29"}  # 3 * 9 + 2
    assert {n["status"]["capacity"]["pods"] for n in sc.karpy_nodes(reserved)} == {"20"}  # (3 - 1) * 9 + 2
    assert len(sc.running(plain, "tiny-")) == len(sc.running(reserved, "tiny-")) == 50
    assert len(sc.karpy_nodes(plain)) == 2 and len(sc.karpy_nodes(reserved)) == 3
    assert not [w for w in scenario.load_text(sc.text("", settings="reservedENIs: 1")).warnings
                if "reservedENIs" in w]
