"""``karpy crds``: print the CRDs of this karpy version, for ``kubectl apply -f -``.

A pip-installed karpy has no ``charts/`` directory, but its CRDs are in the package
(:mod:`karpy.api.schemas`): ``karpy crds | kubectl apply --server-side -f -`` installs or upgrades them
(Helm never upgrades a chart's ``crds/``, so upgrades go this way, as with Karpenter's).
``--kind`` limits the output to some kinds (``NodePool``, ``EC2NodeClass``...).
"""

from __future__ import annotations

import click

from karpy.api.schemas import crd


@click.command("crds")
@click.option("--kind", "kinds", multiple=True, type=click.Choice([k.kind for k in crd.KINDS]),
              help="Only this kind's CRD (repeatable); default all.")
def crds_command(kinds: tuple[str, ...]) -> None:
    """Print karpy's CustomResourceDefinitions (Karpenter's NodePool, NodeClaim, EC2NodeClass,
    AKSNodeClass, and KWOKNodeClass) as YAML documents."""
    for k in crd.KINDS:
        if not kinds or k.kind in kinds:
            click.echo(crd.render(crd.definition(k)), nl=False)
