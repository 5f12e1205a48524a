"""karpy.disruption."""
