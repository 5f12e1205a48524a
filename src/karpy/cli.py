"""The ``karpy`` command line: a small click group; each subcommand's logic lives in its module.

``karpy catalog aws|azure|benchmark|kwok [--output table|json] [--zone Z ...] [--region R]`` lists a
built-in instance-type catalog (:mod:`karpy.cloudprovider.catalog`). ``karpy simulate FILE [--until D]
[--seed N] [--output table|json|yaml] [--report DIR]`` runs a scenario
(:mod:`karpy.simulator.output`). ``karpy controller --cloud-provider aws|azure|kwok`` runs the controllers in
a real cluster (:mod:`karpy.controller_cli`). Bad input exits with status 2
and a message naming what was expected.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

import karpy
from karpy import controller_cli
from karpy.api import errors
from karpy.cloudprovider import catalog
from karpy.design import command as design_command
from karpy.install import cli as install_cli
from karpy.simulator import command_inputs


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
@click.option("--region", default=None,
              help="Region of the aws / azure catalog (default us-east-1 / southcentralus).")
def catalog_command(name: str, output: str, zones: tuple[str, ...], region: str | None) -> None:
    """List the instance types of catalog NAME with capacity, allocatable, prices and zones."""
    try:
        catalog.run_command(name, output=output, zones=zones, region=region, file=sys.stdout)
    except errors.ValidationError as exc:
        raise click.UsageError(str(exc)) from None


@main.command("simulate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--until", default=None, metavar="DURATION",
              help="Simulate this long (e.g. 15m, 24h); overrides the scenario's spec.until.")
@click.option("--seed", type=int, default=None,
              help="Seed of every random choice (default: spec.seed, else 0).")
@click.option("--output", "-o", type=click.Choice(("table", "json", "yaml")), default="table",
              show_default=True,
              help="Tables like kubectl, or the whole result (objects, events, metrics, timeline).")
@click.option("--wide", is_flag=True,
              help="With the table output: every node, event and pod, never grouped (past 50 nodes they are).")
@click.option("--report", "report_dir", default=None, metavar="DIR",
              help="Also write an HTML report with plots into DIR.")
@click.option("--verbose", "-v", is_flag=True, help="Log controller warnings to stderr.")
@click.option("--logs", "log_format", flag_value="json", default=None,
              help="Print the controllers' log stream (Karpenter's JSON lines) to stderr, in simulated time.")
@click.option("--log-format", "log_format", type=click.Choice(("json", "console")),
              help="Like --logs, in this format.")
@click.option("--autoscaler", type=click.Choice(("karpy", "cluster-autoscaler")), default="karpy", show_default=True,
              help="Run karpy, or a model of Cluster Autoscaler over node groups (spec.clusterAutoscaler).")
@click.option("--max-pods", type=int, default=None, metavar="N",
              help="Pods one run may hold (default 100000): a scenario asking for more is refused at load.")
@click.option("--max-nodes", type=int, default=None, metavar="N",
              help="Nodes one run may hold (default 10000): the run stops with an error above it.")
def simulate_command(file: str, until: str | None, seed: int | None, output: str, wide: bool,
                     report_dir: str | None, verbose: bool, log_format: str | None, autoscaler: str,
                     max_pods: int | None, max_nodes: int | None) -> None:
    """Run karpy's controllers against the simulated cluster and cloud of scenario FILE."""
    import logging

    from karpy.observability import logs
    from karpy.simulator import output as sim_output

    if log_format is not None:
        logs.configure("debug" if verbose else "info", fmt=log_format, stream=sys.stderr,
                       now=logs.VIRTUAL_TIME.now)
    else:
        logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("karpy").setLevel(logging.WARNING if verbose else logging.CRITICAL)
    try:
        status = sim_output.run_command(file, until=until, seed=seed, output=output, report_dir=report_dir,
                                        stdout=sys.stdout, stderr=sys.stderr, progress=sys.stderr.isatty(),
                                        autoscaler=autoscaler, wide=wide, max_pods=max_pods, max_nodes=max_nodes)
    except errors.ValidationError as exc:
        click.echo(f"Error: {file} cannot be simulated:", err=True)
        for e in exc.errors:
            click.echo(f"  {e}", err=True)
        sys.exit(2)
    if status:
        sys.exit(status)


@main.command("compare")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--until", default=None, metavar="DURATION", help="Simulate this long (overrides spec.until).")
@click.option("--seed", type=int, default=None)
@click.option("--output", "-o", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.option("--report", "report_dir", default=None, metavar="DIR", help="Also write an HTML report into DIR.")
def compare_command(file: str, until: str | None, seed: int | None, output: str, report_dir: str | None) -> None:
    """Run scenario FILE under karpy and under Cluster Autoscaler and compare them."""
    import logging

    from karpy.api import duration
    from karpy.simulator import compare, scenario

    logging.getLogger("karpy").setLevel(logging.CRITICAL)
    try:
        until_s = None
        if until is not None:
            try:
                until_s = duration.parse_duration(until)
            except duration.DurationError:
                until_s = None
            if until_s is None or until_s <= 0:
                raise errors.ValidationError.single("--until", "(option)", "a positive duration such as 15m", until)
        runs = compare.run(scenario.load(file, until=until_s), seed=seed)
    except errors.ValidationError as exc:
        _fail("cannot be compared", [file], exc)
    if output == "json":
        sys.stdout.write(compare.render_json(runs))
    else:
        compare.render_table(runs, sys.stdout)
    if report_dir:
        click.echo(f"report written to {compare.write_report(runs, report_dir)}", err=True)


@main.command("convert")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "-o", "out", default="-", metavar="FILE", help="Where to write the v1 manifests.")
@click.option("--default-instance-profile", default=None, metavar="NAME",
              help="Karpenter v0.x's aws.defaultInstanceProfile: the instance profile of converted EC2NodeClasses "
                   "that name none (v1 requires one).")
def convert_command(files: tuple[str, ...], out: str, default_instance_profile: str | None) -> None:
    """Write v1 manifests for v1alpha5 / v1beta1 Karpenter objects in FILES (other objects unchanged)."""
    from karpy.migration import convert

    try:
        result = convert.convert_texts([(f, command_inputs.read_file(f)) for f in files],
                                       default_instance_profile=default_instance_profile)
    except errors.ValidationError as exc:
        _fail("cannot be converted", files, exc)
    for warning in result.warnings:
        click.echo(f"Warning: {warning}", err=True)
    text = result.to_yaml()
    if out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
    click.echo(f"{result.converted} object(s) converted, {len(result.manifests)} manifest(s) written", err=True)


@main.command("whatif")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--kubeconfig", default=None, metavar="PATH",
              help="Read the state from a live cluster (read-only: lists only) instead of FILES.")
@click.option("--context", default=None, help="The kubeconfig context to use.")
@click.option("--nodepools", "nodepool_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="NodePools / NodeClasses to try instead of the cluster's (repeatable).")
@click.option("--for", "for_", default="15m", show_default=True, metavar="DURATION",
              help="How long to let karpy run on the cluster's state (virtual time).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--cluster-name", default="whatif", show_default=True)
@click.option("--region", default=None, help="Region of the catalog (default: the nodes' region label).")
@click.option("--output", "-o", type=click.Choice(("table", "json")), default="table", show_default=True)
@click.option("--report", "report_dir", default=None, metavar="DIR", help="Also write the HTML report into DIR.")
def whatif_command(files: tuple[str, ...], kubeconfig: str | None, context: str | None,
                   nodepool_files: tuple[str, ...], for_: str, seed: int, cluster_name: str, region: str | None,
                   output: str, report_dir: str | None) -> None:
    """What karpy would do to the cluster state dumped in FILES (kubectl get ... -A -o yaml), or to a live
    cluster's (--kubeconfig)."""
    import logging

    from karpy.api import duration
    from karpy.simulator import whatif

    logging.getLogger("karpy").setLevel(logging.CRITICAL)
    try:
        seconds = duration.parse_duration(for_)
    except duration.DurationError:
        seconds = None
    if seconds is None or seconds <= 0:
        _fail("cannot be replayed", files, errors.ValidationError.single(
            "--for", "(flag)", "a positive duration such as 15m or 2h", for_))
    if bool(files) == bool(kubeconfig):
        raise click.UsageError("give dump FILES or --kubeconfig, not both and not neither")
    inputs = [(f, command_inputs.read_file(f)) for f in files]
    if kubeconfig:
        inputs = [command_inputs.read_live_cluster(kubeconfig, context)]
    try:
        answer = whatif.run(inputs, nodepools=[(f, command_inputs.read_file(f)) for f in nodepool_files],
                            for_seconds=seconds, seed=seed, cluster_name=cluster_name, region=region)
    except errors.ValidationError as exc:
        _fail("cannot be replayed", files, exc)
    if output == "json":
        whatif.write_json(answer, sys.stdout)
    else:
        whatif.render_table(answer, sys.stdout)
    if report_dir and answer.result is not None:
        from karpy.simulator import report

        report.write(answer.result, report_dir)
        click.echo(f"report written to {report_dir}/index.html", err=True)


@main.command("migrate")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--cluster-name", default="", help="The EKS cluster (default: from the input).")
@click.option("--region", default=None, help="Region of the catalog used for vCPU counts (default us-east-1).")
@click.option("--output", "-o", "out", default="-", metavar="FILE",
              help="Where to write the NodePools and EC2NodeClass.")
@click.option("--steps", "steps_out", default=None, metavar="FILE",
              help="Write the migration steps here (default: stderr).")
def migrate_command(files: tuple[str, ...], cluster_name: str, region: str | None, out: str,
                    steps_out: str | None) -> None:
    """NodePools and an EC2NodeClass covering Cluster Autoscaler node groups (aws eks describe-nodegroup /
    aws autoscaling describe-auto-scaling-groups JSON in FILES), and the migration steps."""
    import yaml

    from karpy.migration import nodegroups

    try:
        groups = nodegroups.read_groups([(f, command_inputs.read_file(f)) for f in files])
        result = nodegroups.plan(groups, cluster_name=cluster_name, region=region)
    except errors.ValidationError as exc:
        _fail("cannot be migrated", files, exc)
    text = yaml.safe_dump_all(result.manifests, sort_keys=False)
    if out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
    for w in result.warnings:
        click.echo(f"Warning: {w}", err=True)
    if steps_out:
        with open(steps_out, "w", encoding="utf-8") as fh:
            fh.write(result.steps)
    else:
        click.echo(result.steps, err=True)


def _fail(what: str, files: tuple[str, ...] | list[str], exc: errors.ValidationError) -> NoReturn:
    click.echo(f"Error: {', '.join(files)} {what}:", err=True)
    for e in exc.errors:
        click.echo(f"  {e}", err=True)
    sys.exit(2)


main.add_command(controller_cli.controller_command)  # `karpy controller` (karpy.controller_run)
main.add_command(install_cli.crds_command)  # `karpy crds` (karpy.install.cli)
main.add_command(design_command.design_command)  # `karpy design` (karpy.design; optuna imported when run)


if __name__ == "__main__":
    main()
