"""karpy.simulator."""
