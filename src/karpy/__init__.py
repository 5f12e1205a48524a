"""karpy: a Kubernetes node autoscaler with Karpenter's behaviour and a deterministic simulator."""

__version__ = "0.1.0"
