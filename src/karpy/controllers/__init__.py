"""karpy's controllers: provisioner, NodeClaim lifecycle, termination, garbage collection, interruption,
NodePool counter, NodeClass status and node repair, each on a :class:`karpy.controllers.runtime.Manager`
over the watch-fed :class:`~karpy.controllers.state.ClusterState`.

They are wired together, with the disruption controller (:mod:`karpy.disruption.controller`, one layer
above), by :func:`karpy.operator.register_all`.
"""
