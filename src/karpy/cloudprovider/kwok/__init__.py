"""karpy.cloudprovider.kwok."""
