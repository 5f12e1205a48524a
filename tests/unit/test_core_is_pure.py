"""The scheduling core imports nothing that does I/O (no asyncio, Kubernetes client, cloud SDK,
HTTP client), checked in a fresh interpreter after exercising the core."""

from __future__ import annotations

import json
import subprocess
import sys

CORE = [
    "karpy.api.manifest",
    "karpy.api.validation",
    "karpy.scheduling.requirements",
    "karpy.scheduling.topology",
    "karpy.scheduling.taints",
    "karpy.scheduling.hostports",
    "karpy.provisioning.scheduler",
    "karpy.cloudprovider.instancetype",
    "karpy.cloudprovider.catalog",
]
FORBIDDEN = ["asyncio", "kubernetes", "kubernetes_asyncio", "boto3", "botocore", "requests", "urllib3",
             "http.client", "aiohttp", "azure", "kmock", "moto"]

PROGRAM = """
import importlib, json, sys
for name in {core!r}:
    importlib.import_module(name)
from karpy.api import pod, nodepool
from karpy.cloudprovider import catalog
from karpy.provisioning import scheduler
np_ = nodepool.NodePool.from_manifest({{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
    "metadata": {{"name": "default"}}, "spec": {{"template": {{"spec": {{"requirements": [],
    "nodeClassRef": {{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}}}}}})
pods = [pod.build(f"p{{i}}", namespace="default", requests={{"cpu": "500m", "memory": "1Gi"}}) for i in range(60)]
scheduler.Scheduler([np_], {{"default": catalog.load("aws")}}).solve(pods)
print(json.dumps(sorted(m for m in {forbidden!r} if m in sys.modules)))
"""


def test_the_scheduling_core_loads_no_io_module_even_after_a_full_solve() -> None:
    out = subprocess.run([sys.executable, "-c", PROGRAM.format(core=CORE, forbidden=FORBIDDEN)],
                         check=True, capture_output=True, text=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == [], f"the core imported I/O modules: {loaded}"
