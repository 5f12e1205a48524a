"""``karpy design``: search NodePool designs against a cluster's own workload (``docs/design.md``).

``space`` (the design space and its validation), ``inputs`` (the workload: a scenario, or a dump and a
trace), ``nodepools`` (a design applied to the input's NodePools), ``trials`` (one design simulated
with several seeds, summarised), ``search`` (Optuna's NSGA-II, the front, the recommendation),
``runners`` (serial, local process pool, Ray), ``output`` and ``report`` (what the user reads),
``command`` (the click command). Optuna and Ray are imported only when a search runs.
"""
