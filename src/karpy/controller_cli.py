"""The ``karpy controller`` click command: options only; :mod:`karpy.controller_run` does the work.

Every Karpenter setting has its flag (``--cluster-name`` ... ``--kube-client-burst``, see
:data:`karpy.settings_sources.ENVIRONMENT`); flags win over the environment, which wins over
``--settings-file``. The exit status is :func:`karpy.controller_run.run`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from karpy import controller_run, settings_sources
from karpy.api import duration


def _settings_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for key, env in reversed(list(settings_sources.environment().items())):
        fn = click.option(settings_sources.flag_name(key), settings_sources.option_name(key), default=None,
                          metavar="VALUE", help=f"Karpenter's {env} (flag > environment > settings file).")(fn)
    return fn


def _seconds(text: str, flag: str) -> float:
    try:
        value = duration.parse_duration(text)
    except duration.DurationError:
        value = None
    if value is None or value <= 0:
        raise click.BadParameter(f"a positive duration such as 15s, not {text!r}", param_hint=flag)
    return value


@click.command("controller")
@click.option("--cloud-provider", required=True, type=click.Choice(controller_run.CLOUD_PROVIDERS),
              envvar="CLOUD_PROVIDER", help="Where nodes are launched (kwok needs no cloud account).")
@click.option("--settings-file", type=click.Path(dir_okay=False), default=None,
              help="YAML with camelCase settings (clusterName: ...), as Helm's settings.*.")
@click.option("--kubeconfig", default=None, help="Path to a kubeconfig (default: KUBECONFIG, then in-cluster).")
@click.option("--context", default=None, help="kubeconfig context to use.")
@click.option("--disable-leader-election", is_flag=True, envvar="DISABLE_LEADER_ELECTION",
              help="Reconcile without holding the Lease (only for a single replica).")
@click.option("--leader-election-namespace", default=None, envvar="LEADER_ELECTION_NAMESPACE",
              help="Namespace of the karpenter-leader-election Lease (default: SYSTEM_NAMESPACE, POD_NAMESPACE, "
                   "kube-system).")
@click.option("--leader-election-id", default=None, help="Name of the Lease (default karpenter-leader-election).")
@click.option("--lease-duration", default="15s", show_default=True, help="Leader election lease duration.")
@click.option("--renew-deadline", default="10s", show_default=True, help="Leader election renew deadline.")
@click.option("--retry-period", default="2s", show_default=True, help="Leader election retry period.")
@click.option("--bind-address", default="0.0.0.0", show_default=True,
              help="Address the metrics and health-probe servers listen on.")
@click.option("--log-format", type=click.Choice(("json", "console")), default="json", show_default=True)
@click.option("--log-level-for", "component_levels", multiple=True, metavar="COMPONENT=LEVEL",
              help="Level of one component, e.g. disruption=debug (repeatable).")
@click.option("--cloud-workers", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="Cloud calls (launches, terminations) run in parallel.")
@click.option("--region", default=None, help="Cloud region, passed to the aws / azure provider factory.")
@click.option("--in-memory-cluster", is_flag=True, hidden=True,
              help="Run on an empty in-memory cluster (smoke tests and demos only).")
@_settings_options
def controller_command(cloud_provider: str, settings_file: str | None, kubeconfig: str | None,
                       context: str | None, disable_leader_election: bool, leader_election_namespace: str | None,
                       leader_election_id: str | None, lease_duration: str, renew_deadline: str, retry_period: str,
                       bind_address: str, log_format: str, component_levels: tuple[str, ...], cloud_workers: int,
                       region: str | None, in_memory_cluster: bool, **settings_values: str | None) -> None:
    """Run karpy's controllers against a Kubernetes cluster (leader-elected, like Karpenter's controller)."""
    levels: dict[str, str] = {}
    for item in component_levels:
        component, sep, level = item.partition("=")
        if not sep or not component or not level:
            raise click.BadParameter(f"COMPONENT=LEVEL, not {item!r}", param_hint="--log-level-for")
        levels[component.strip()] = level.strip()
    by_option = {settings_sources.option_name(k): k for k in settings_sources.environment()}
    opts = controller_run.Options(
        cloud_provider=cloud_provider,
        settings_flags={by_option[name]: value for name, value in settings_values.items() if value is not None},
        settings_file=settings_file, kubeconfig=kubeconfig, context=context, in_memory_cluster=in_memory_cluster,
        leader_elect=not disable_leader_election, leader_election_namespace=leader_election_namespace,
        leader_election_id=leader_election_id,
        lease_duration=_seconds(lease_duration, "--lease-duration"),
        renew_deadline=_seconds(renew_deadline, "--renew-deadline"),
        retry_period=_seconds(retry_period, "--retry-period"),
        bind_address=bind_address, log_format=log_format, component_levels=levels, cloud_workers=cloud_workers,
        provider_options={"region": region} if region else {})
    sys.exit(controller_run.run(opts))
