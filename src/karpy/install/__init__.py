"""Install artifacts: rendering karpy's Helm chart without helm (:mod:`karpy.install.chart`)."""
