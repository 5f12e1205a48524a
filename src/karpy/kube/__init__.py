"""karpy.kube."""
