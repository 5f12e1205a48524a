"""karpy.api."""
