"""karpy.observability."""
