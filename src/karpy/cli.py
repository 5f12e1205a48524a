"""The ``karpy`` command line: a small click group; each subcommand's logic lives in its module.

``karpy catalog aws|azure|benchmark|kwok [--output table|json] [--zone Z ...] [--region R]`` lists a
built-in instance-type catalog (:mod:`karpy.cloudprovider.catalog`). Bad input exits with status 2
and a message naming what was expected.
"""

from __future__ import annotations

import sys

import click

import karpy
from karpy.api import errors
from karpy.cloudprovider import catalog


@click.group()
@click.version_option(karpy.__version__, prog_name="karpy")
def main() -> None:
    """karpy: Karpenter's node autoscaling behaviour in Python, with a deterministic simulator."""


@main.command("catalog")
@click.argument("name", type=click.Choice(catalog.NAMES))
@click.option("--output", "-o", type=click.Choice(catalog.OUTPUTS), default="table", show_default=True,
              help="A table like Karpenter's instance-types page, or the JSON form scenarios accept.")
@click.option("--zone", "zones", multiple=True, metavar="ZONE",
              help="Keep only offerings in this zone (repeatable).")
@click.option("--region", default=None, help="Region of the aws / azure catalog (default us-east-1 / southcentralus).")
def catalog_command(name: str, output: str, zones: tuple[str, ...], region: str | None) -> None:
    """List the instance types of catalog NAME with capacity, allocatable, prices and zones."""
    try:
        catalog.run_command(name, output=output, zones=zones, region=region, file=sys.stdout)
    except errors.ValidationError as exc:
        raise click.UsageError(str(exc)) from None


if __name__ == "__main__":
    main()
