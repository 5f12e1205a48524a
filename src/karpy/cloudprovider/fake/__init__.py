"""karpy.cloudprovider.fake."""
