"""Install artifacts: karpy's Helm charts rendered by the real helm (:mod:`karpy.install.chart`), the
generated kustomize directories, ``karpy crds``."""
