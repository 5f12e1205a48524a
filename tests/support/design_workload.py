"""A tiny workload for ``karpy design`` tests: one Deployment on the AWS catalog, scaled by a trace."""

from __future__ import annotations

SCENARIO = """\
apiVersion: karpy.io/v1alpha1
kind: Scenario
metadata: {name: tiny}
spec:
  cloud: {provider: aws, region: us-east-1, zones: [us-east-1a, us-east-1b]}
  settings: {clusterName: tiny}
  until: 20m
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
      - {key: karpenter.k8s.aws/instance-size, operator: In, values: [large, xlarge, 2xlarge]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-tiny
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: tiny}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: tiny}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec:
      containers:
      - {name: web, image: web:1, resources: {requests: {cpu: "1", memory: 1Gi}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      containers:
      - {name: worker, image: worker:1, resources: {requests: {cpu: "2", memory: 4Gi}}}
"""

TRACE_CSV = """\
at,namespace,deployment,replicas
5m,default,web,10
12m,default,web,3
"""

SPACE = """\
apiVersion: karpy.io/v1alpha1
kind: DesignSpace
metadata: {name: tiny}
spec:
  variables:
    instanceCategory: [[c, m], [m], [c]]
    consolidateAfter: [30s, 5m]
"""
