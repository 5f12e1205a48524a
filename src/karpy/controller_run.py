"""``karpy controller``: karpy's controllers in a real cluster, as Karpenter's controller binary runs.

:func:`run` is the whole command, in order; nothing is started before every input was checked:

1. settings from flags > environment > settings file > defaults (:mod:`karpy.settings_sources`);
   a bad value exits 2 naming the setting;
2. logging (:mod:`karpy.observability.logs`): JSON lines by default at ``LOG_LEVEL``;
3. the cluster: the Kubernetes adapter (``karpy.kube.adapter``) from ``--kubeconfig`` / ``KUBECONFIG``
   / in-cluster config (``--in-memory-cluster`` instead runs on an empty in-memory cluster, for
   smoke tests and demos only);
4. the cloud: ``karpy.cloudprovider.<aws|azure|kwok>.factory.build(settings, clock, cluster, ...)``;
   a missing module or a :class:`~karpy.cloudprovider.errors.CloudProviderError` from it exits 3
   saying that the provider is not available and why;
5. the Manager with every controller (:func:`karpy.operator.register_all`), cloud calls on a
   bounded pool, leader election on the ``karpenter-leader-election`` Lease (unless disabled),
   ``/metrics`` on ``METRICS_PORT`` and ``/healthz`` ``/readyz`` on ``HEALTH_PROBE_PORT``;
6. the real-time driver (:mod:`karpy.controllers.realtime`) until SIGTERM/SIGINT (graceful: in-flight
   cloud calls finish and are written, the lease is released; exit 0) or until the lease is lost
   (exit 1, so that Kubernetes restarts the pod, as controller-runtime does). A shutdown still running
   ``shutdown_grace + 10`` seconds after the signal dumps every thread's stack to the log and exits 5;
   ``kill -USR1`` dumps the stacks at any time.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from karpy import clock as clock_mod
from karpy import settings as settings_mod
from karpy import settings_sources
from karpy.api import errors
from karpy.kube import errors as kube_errors

log = logging.getLogger("karpy.controller")

CLOUD_PROVIDERS = ("aws", "azure", "kwok")
NODECLASS_KINDS = {"aws": ("EC2NodeClass",), "azure": ("AKSNodeClass",), "kwok": ("KWOKNodeClass",)}
"""The NodeClass kind each cloud serves: the only one the controllers watch, so a cluster that has only
that cloud's CRDs (Karpenter's own install) still syncs and reports ready."""
EXIT_OK = 0
EXIT_LOST_LEADERSHIP = 1
EXIT_BAD_INPUT = 2
EXIT_PROVIDER_UNAVAILABLE = 3
EXIT_CLUSTER_UNAVAILABLE = 4
EXIT_SHUTDOWN_TIMEOUT = 5


@dataclass
class Options:
    """Everything ``karpy controller`` takes besides the settings."""

    cloud_provider: str
    settings_flags: dict[str, Any] = field(default_factory=dict)
    settings_file: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    in_memory_cluster: bool = False
    leader_elect: bool = True
    leader_election_namespace: str | None = None
    leader_election_id: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    bind_address: str = "0.0.0.0"
    log_format: str = "json"
    component_levels: dict[str, str] = field(default_factory=dict)
    cloud_workers: int = 100
    provider_options: dict[str, Any] = field(default_factory=dict)


class Unavailable(Exception):
    """A cloud provider or the cluster cannot be used; the message says why."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def identity(environ: Mapping[str, str]) -> str:
    """The leader-election identity: the pod name (``POD_NAME``) or host name, plus the process id."""
    return f"{environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"


def build_cloud(name: str, settings: settings_mod.Settings, clock: clock_mod.Clock, cluster: Any,
                options: Mapping[str, Any]) -> Any:
    """``karpy.cloudprovider.<name>.factory.build(...)``, or :class:`Unavailable` saying why not."""
    from karpy.cloudprovider import errors as cp_errors

    if name not in CLOUD_PROVIDERS:
        raise Unavailable(f"cloud provider {name!r} is not one of {', '.join(CLOUD_PROVIDERS)}",
                          EXIT_PROVIDER_UNAVAILABLE)
    module_name = f"karpy.cloudprovider.{name}.factory"
    try:
        factory = importlib.import_module(module_name)
    except ImportError as exc:
        raise Unavailable(f"cloud provider {name} is not available in this build of karpy "
                          f"({module_name}: {exc})", EXIT_PROVIDER_UNAVAILABLE) from None
    build = getattr(factory, "build", None)
    if not callable(build):
        raise Unavailable(f"cloud provider {name} is not available: {module_name} has no build()",
                          EXIT_PROVIDER_UNAVAILABLE)
    try:
        provider = build(settings, clock, cluster, **dict(options))
        if settings.commitments:
            from karpy.cloudprovider import committed

            return committed.CommittedProvider(provider, settings.commitments, clock)
        return provider
    except cp_errors.CloudProviderError as exc:
        raise Unavailable(f"cloud provider {name} is not available: {exc}", EXIT_PROVIDER_UNAVAILABLE) from None
    except Exception as exc:  # a factory that breaks its contract is as unavailable
        raise Unavailable(f"cloud provider {name} is not available: {type(exc).__name__}: {exc}",
                          EXIT_PROVIDER_UNAVAILABLE) from None


def connect(opts: Options, settings: settings_mod.Settings, clock: clock_mod.Clock) -> Any:
    """The cluster: the Kubernetes adapter, or the in-memory cluster when asked."""
    if opts.in_memory_cluster:
        from karpy.kube import deferred, memory

        return deferred.DeferredWatches(memory.InMemoryCluster(clock))
    try:
        adapter = importlib.import_module("karpy.kube.connect")
    except ImportError as exc:
        raise Unavailable(f"the Kubernetes client adapter is not available in this build of karpy ({exc})",
                          EXIT_CLUSTER_UNAVAILABLE) from None
    connect_fn: Callable[..., Any] | None = getattr(adapter, "connect", None)
    if connect_fn is None:
        raise Unavailable("the Kubernetes client adapter has no connect()", EXIT_CLUSTER_UNAVAILABLE)
    try:
        return connect_fn(kubeconfig=opts.kubeconfig, context=opts.context, settings=settings, clock=clock)
    except Exception as exc:  # the adapter's own errors say what is missing (no kubeconfig, no server)
        raise Unavailable(f"cannot connect to the Kubernetes API server: {exc}", EXIT_CLUSTER_UNAVAILABLE) from None


def _synced_check(cluster: Any) -> Callable[[], bool] | None:
    """Whether the cluster's caches have their first lists (``has_synced()`` or ``wait_for_sync(0)``)."""
    has_synced = getattr(cluster, "has_synced", None)
    if callable(has_synced):
        return lambda: bool(has_synced())
    wait_for_sync = getattr(cluster, "wait_for_sync", None)
    if callable(wait_for_sync):
        return lambda: bool(wait_for_sync(0))
    return None


def _force_exit(after: float, err: IO[str]) -> None:
    """Exit ``after`` seconds from now if the graceful shutdown has not finished by then."""
    threading.Event().wait(after)
    log.error("shutdown did not finish within %.0fs of the signal; exiting", after)
    with contextlib.suppress(Exception):
        faulthandler.dump_traceback(file=err, all_threads=True)
        err.flush()
    os._exit(EXIT_SHUTDOWN_TIMEOUT)


def run(opts: Options, *, environ: Mapping[str, str] | None = None, stderr: IO[str] | None = None,
        install_signals: bool = True) -> int:
    """The ``karpy controller`` command; returns the exit status (see the module docstring)."""
    from karpy import operator
    from karpy.controllers import cloudcalls, leader, realtime, runtime
    from karpy.kube import events_background
    from karpy.observability import logs, serve

    env = os.environ if environ is None else environ
    err = stderr if stderr is not None else sys.stderr
    try:
        settings_sources.check_bind_address(opts.bind_address)
        settings = settings_sources.load(opts.settings_flags, env, opts.settings_file)
        logs.configure(settings.log_level, fmt=opts.log_format, components=opts.component_levels, stream=err)
        lease_config = leader.Config(
            namespace=opts.leader_election_namespace or settings.leader_election_namespace
            or env.get("SYSTEM_NAMESPACE") or env.get("POD_NAMESPACE") or "kube-system",
            identity=identity(env), name=opts.leader_election_id or settings.leader_election_name,
            lease_duration=opts.lease_duration, renew_deadline=opts.renew_deadline, retry_period=opts.retry_period)
    except errors.ValidationError as exc:
        err.write("Error: invalid settings:\n" + "".join(f"  {e}\n" for e in exc.errors))
        return EXIT_BAD_INPUT
    except ValueError as exc:
        err.write(f"Error: invalid leader election settings: {exc}\n")
        return EXIT_BAD_INPUT
    wall = clock_mod.WallClock()
    try:
        cluster = connect(opts, settings, wall)
        cloud = build_cloud(opts.cloud_provider, settings, wall, cluster, opts.provider_options)
    except Unavailable as exc:
        log.error(str(exc))
        err.write(f"Error: {exc}\n")
        return exc.exit_code

    driver_ref: list[realtime.Driver] = []
    caches_synced = _synced_check(cluster)

    def probe() -> serve.Health:
        if not driver_ref:  # still starting: the controllers' first lists are being read
            return serve.Health(synced=False, leader=False, running=False, stalled_for=0.0)
        st = driver_ref[0].status()
        return serve.Health(synced=st.synced, leader=st.leader, running=st.running,
                            stalled_for=max(0.0, wall.now() - st.last_loop) if st.last_loop else 0.0)

    # probes first: /readyz answers 503 while the caches sync (controller-runtime serves them before)
    try:
        probes = serve.serve_probes(probe, opts.bind_address, settings.health_probe_port)
    except OSError as exc:  # an address that is not this host's, a port in use: say which, no traceback
        err.write(f"Error: cannot listen on --bind-address {opts.bind_address} --health-probe-port "
                  f"{settings.health_probe_port}: {exc}\n")
        with contextlib.suppress(Exception):
            cluster.close()
        return EXIT_BAD_INPUT
    pool = cloudcalls.Pool(opts.cloud_workers, wake=lambda: driver_ref[0].wake() if driver_ref else None)
    manager = runtime.Manager(cluster, wall, calls=pool)
    recorder = events_background.BackgroundRecorder(cluster, wall, "karpenter")  # Events never wait on the loop
    try:
        built = operator.register_all(manager, cluster, cloud, wall, settings, recorder=recorder,
                                      nodeclass_kinds=NODECLASS_KINDS.get(opts.cloud_provider, ()))
    except kube_errors.KubeError as exc:  # a first list that never came (no access, no server)
        probes.stop()
        log.error("cannot start the controllers: %s", exc.message)
        err.write(f"Error: cannot start the controllers: {exc.message}\n")
        recorder.close(0.0)
        with contextlib.suppress(Exception):
            cluster.close()
        return EXIT_CLUSTER_UNAVAILABLE
    built.metrics.registry.register(recorder.collector())
    cache_metrics = getattr(cluster, "metrics_collector", None)
    if callable(cache_metrics):  # karpy_decode_errors_total, karpy_informer_synced...
        built.metrics.registry.register(cache_metrics())
    from karpy.controllers import unimplemented

    unimplemented.log_settings(settings)
    leader_elect = opts.leader_elect and not settings.disable_leader_election
    elector = leader.LeaderElector(cluster, wall, lease_config) if leader_elect else None
    pump = cluster if callable(getattr(cluster, "pump", None)) else None
    driver = realtime.Driver(manager, wall, pool=pool, elector=elector, pump=pump, synced=caches_synced,
                             shutdown_grace=max(1.0, opts.renew_deadline),
                             renew_in_background=not opts.in_memory_cluster)
    driver_ref.append(driver)

    import prometheus_client

    prometheus_client.Gauge(
        "leader_election_master_status", "Gauge of if the reporting system is master of the relevant lease, "
        "0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
        ["name"], registry=built.metrics.registry,
    ).labels(lease_config.name).set_function(lambda: 1.0 if driver.is_leader() else 0.0)

    servers: list[serve.Server] = [probes]
    try:
        servers.insert(0, serve.serve_metrics(built.metrics.registry, opts.bind_address, settings.metrics_port))
    except OSError as exc:  # an address that is not this host's, a port in use: say which, no traceback
        probes.stop()
        err.write(f"Error: cannot listen on --bind-address {opts.bind_address} --metrics-port "
                  f"{settings.metrics_port}: {exc}\n")
        recorder.close(0.0)
        close = getattr(cluster, "close", None)
        if callable(close):
            close()
        return EXIT_BAD_INPUT
    if install_signals:
        watchdog: list[threading.Thread] = []

        def on_signal(_signum: int, _frame: object) -> None:
            driver.stop()
            if not watchdog:  # a shutdown that hangs still ends, with every thread's stack in the log
                watchdog.append(threading.Thread(target=_force_exit, args=(driver.shutdown_grace + 10.0, err),
                                                 name="karpy-shutdown-watchdog", daemon=True))
                watchdog[0].start()

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        faulthandler.register(signal.SIGUSR1, file=err, all_threads=True)  # `kill -USR1`: every thread's stack
    log.info("karpy controller starting", extra=logs.fields(
        "", cloudProvider=opts.cloud_provider, clusterName=settings.cluster_name, identity=lease_config.identity,
        leaderElection=leader_elect, metricsPort=servers[0].port, healthProbePort=servers[1].port))
    try:
        outcome = driver.run()
    finally:
        if not recorder.close(5.0):
            log.warning("shutting down: %d events not written", recorder.pending())
        for s in servers:
            s.stop()
        stop = getattr(cluster, "close", None)
        if callable(stop):
            stop()
    if outcome == realtime.LOST_LEADERSHIP:
        err.write("Error: leader election lost\n")
        return EXIT_LOST_LEADERSHIP
    log.info("karpy controller stopped")
    return EXIT_OK
