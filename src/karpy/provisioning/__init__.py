"""karpy.provisioning."""
