"""karpy.cloudprovider."""
