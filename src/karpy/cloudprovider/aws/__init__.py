"""karpy.cloudprovider.aws."""
