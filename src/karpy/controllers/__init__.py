"""karpy.controllers."""
