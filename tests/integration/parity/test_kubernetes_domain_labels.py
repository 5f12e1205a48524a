"""Issue 12 item 9: NodePool labels and requirements in the Kubernetes domains.

Karpenter v1 (v1.12+) reserves only ``karpenter.sh`` (and the provider's group) and
``kubernetes.io/hostname``: a NodePool may label its nodes ``node-role.kubernetes.io/worker`` or
require ``example.k8s.io/team``, and pods selecting those keys are scheduled onto its nodes.
"""

from __future__ import annotations

import pytest

from karpy.api import errors

from . import scenarios as sc

REQUIREMENTS = """
- {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
- {key: kubernetes.io/arch, operator: In, values: [amd64]}
- {key: example.k8s.io/team, operator: In, values: [web]}
"""


def test_a_nodepool_with_kubernetes_domain_labels_runs_pods_that_select_them() -> None:
    pool = sc.nodepool(requirements=REQUIREMENTS, template_metadata='labels: {node-role.kubernetes.io/worker: ""}')
    selector = 'nodeSelector: {example.k8s.io/team: web, node-role.kubernetes.io/worker: ""}'
    result = sc.run(sc.docs(pool, sc.deployment("web", 2, pod_spec=selector)), until="3m")
    assert len(sc.running(result, "web-")) == 2
    for n in sc.karpy_nodes(result):
        assert n["metadata"]["labels"]["node-role.kubernetes.io/worker"] == ""
        assert n["metadata"]["labels"]["example.k8s.io/team"] == "web"


def test_the_hostname_and_the_karpenter_domain_stay_restricted() -> None:
    for labels in ("{kubernetes.io/hostname: x}", "{karpenter.sh/team: x}"):
        pool = sc.nodepool(template_metadata=f"labels: {labels}")
        with pytest.raises(errors.ValidationError) as info:
            sc.run(sc.docs(pool), until="10s")
        assert "reserves" in str(info.value)
