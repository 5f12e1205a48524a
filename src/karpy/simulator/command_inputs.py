"""What the ``karpy`` commands read: input files, and a live cluster for ``--kubeconfig``.

``karpy whatif``, ``karpy design`` and ``karpy migrate`` read their inputs here so that every command reports
an unreadable input the same way:

* :func:`read_file`: a file's UTF-8 text; an unreadable file or one that is not UTF-8 is click's
  ``FileError`` (exit status 1 with the path and the reason).
* :func:`read_live_cluster`: the cluster of a kubeconfig (and context) as one ``(source, YAML text)``
  input (:func:`karpy.simulator.whatif_live.read`: list, never write); the kinds it skipped are printed
  as warnings on stderr; a cluster that cannot be read prints ``Error: cannot read the cluster of
  <kubeconfig>: <why>`` and exits with status 3.
"""

from __future__ import annotations

import sys

import click

from karpy.api import errors

EXIT_CLUSTER_UNREADABLE = 3


def read_file(path: str) -> str:
    """The text of ``path``; ``click.FileError`` when it cannot be read as UTF-8."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.FileError(path, hint=str(exc)) from None


def read_live_cluster(kubeconfig: str, context: str | None) -> tuple[str, str]:
    """The live cluster's objects as one input (see the module docstring); exits 3 when it cannot be read."""
    from karpy.kube import errors as kube_errors  # the HTTP client only when a cluster is read
    from karpy.simulator import whatif_live

    try:
        live, notes = whatif_live.read(kubeconfig, context)
    except (kube_errors.KubeError, errors.ValidationError) as exc:
        click.echo(f"Error: cannot read the cluster of {kubeconfig}: {exc}", err=True)
        sys.exit(EXIT_CLUSTER_UNREADABLE)
    for note in notes:
        click.echo(f"Warning: {note}", err=True)
    return live
