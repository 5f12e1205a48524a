"""Concurrent launches through karpy's AWS provider against a moto server with slow CreateFleet.

Starts a moto server on 127.0.0.1 (a free port), seeds an account (subnets, security group, role,
EKS AMIs and SSM parameters: the helpers of ``tests/e2e/aws/moto_world.py``), builds the provider
with ``karpy.cloudprovider.aws.factory.build``, warms it up (instance types, prices, NodeClass
resolution, launch templates: one NodeClaim launched first), injects ``--latency`` seconds before
every CreateFleet, then launches ``--count`` NodeClaims at once from a thread pool of ``--workers``
threads (as the real-time driver's cloud-call pool does) and prints the wall time, the number of
CreateFleet calls (identical requests are batched) and launches per second. Target: 100 NodeClaims
with 200 ms of CreateFleet latency in <= 3 s.

Run: ``python bench/aws_launch.py [--count 100] [--latency 0.2] [--workers 100] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import os
import pathlib
import random
import statistics
import sys
import time
from typing import Any

from karpy import clock, settings
from karpy.api import nodeclaim
from karpy.cloudprovider.aws import factory
from karpy.kube import memory

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _moto_world() -> Any:
    spec = importlib.util.spec_from_file_location("moto_world", ROOT / "tests" / "e2e" / "aws" / "moto_world.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["moto_world"] = module
    spec.loader.exec_module(module)
    return module


def claim(name: str) -> nodeclaim.NodeClaim:
    return nodeclaim.NodeClaim.from_manifest({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [
                     {"key": "node.kubernetes.io/instance-type", "operator": "In",
                      "values": ["m5.large", "c5.large", "m5.xlarge"]},
                     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                 "resources": {"requests": {"cpu": "1"}}}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--workers", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(key, value)
    mw = _moto_world()
    server, url = mw.start_server()
    try:
        account = mw.seed_account(url)
        vclock = clock.VirtualClock()
        cluster = memory.InMemoryCluster(vclock, rng=random.Random(1))
        cluster.create({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
                        "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": account.role,
                                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": mw.CLUSTER}}],
                                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": mw.CLUSTER}}]}})
        prov = factory.build(settings.Settings(cluster_name=mw.CLUSTER), vclock, cluster, endpoint_url=url,
                             region="us-east-1", kubernetes_version=mw.K8S_VERSION)
        mw.PricingStub({"m5.large": 0.096, "c5.large": 0.085, "m5.xlarge": 0.192}).attach(prov.session.pricing)
        prov.create(claim("warmup"))
        mw.Latency(args.latency).attach(prov.session.ec2)
        walls = []
        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
            for r in range(args.repeat):
                calls = prov.fleet.calls
                start = time.perf_counter()
                futures = [pool.submit(prov.create, claim(f"bench-{r}-{i}")) for i in range(args.count)]
                launched = [f.result() for f in futures]
                wall = time.perf_counter() - start
                walls.append(wall)
                ids = {c.status.provider_id for c in launched}
                assert len(ids) == args.count, "every NodeClaim got its own instance"
                print(f"run {r + 1}: {args.count} NodeClaims launched in {wall:.2f} s wall "
                      f"({prov.fleet.calls - calls} CreateFleet calls, {args.count / wall:.0f} launches/s)")
        print(f"median wall time: {statistics.median(walls):.2f} s for {args.count} NodeClaims, "
              f"{args.latency * 1000:.0f} ms CreateFleet latency, {args.workers} workers (target <= 3 s)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
