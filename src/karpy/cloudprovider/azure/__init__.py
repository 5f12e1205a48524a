"""karpy.cloudprovider.azure."""
