"""karpy.scheduling."""
