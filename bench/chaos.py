"""Chaos benchmark: several seeds x 6 simulated hours with every fault on, judged by an invariant
checker that does not use karpy's controllers (:mod:`karpy.simulator.invariants`).

The scenario (:mod:`karpy.simulator.chaos_scenario`) has spot interruptions, insufficient capacity
discovered at launch, API server and cloud errors, controller restarts, instances that never
register, NotReady nodes (node auto-repair on), pod start failures, graceful pod termination, scale
waves, PDBs, do-not-disrupt pods and drift. The scenario's fault plan (``spec.faults.plan``) makes every kind
of ``chaos_scenario.PLANNED`` fire in every seed, however many calls the controllers make.
Prints per seed: faults injected, launches, interruptions, disruptions, violations (and each
violation), then the wall time. Exit status 1 when any seed has a violation.

Run: ``python bench/chaos.py [--seeds 1 2 3] [--hours 6]``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from karpy import clock
from karpy.simulator import chaos_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--hours", type=float, default=6.0)
    args = parser.parse_args(argv)
    logging.getLogger("karpy").setLevel(logging.CRITICAL)  # the faults make the controllers log a lot
    bad = 0
    print(f"{'seed':>4} {'faults':>7} {'launches':>8} {'interruptions':>13} {'disruptions':>11} {'violations':>10}"
          f" {'wall':>7}  faults by kind")
    for seed in args.seeds:
        start = clock.perf_counter()
        out = chaos_scenario.run(seed, args.hours)
        wall = clock.perf_counter() - start
        kinds = ", ".join(f"{k}={v}" for k, v in out.faults.items())
        print(f"{seed:>4} {sum(out.faults.values()):>7} {out.launches:>8} {out.interruptions:>13} "
              f"{out.disruptions:>11} {len(out.violations):>10} {wall:>6.1f}s  {kinds}")
        for v in out.violations:
            print(f"       violation: {v}")
        if out.unexpected_errors:
            print(f"       {out.unexpected_errors} unexpected reconcile errors:")
            for line in out.error_lines:
                if "UNEXPECTED" in line:
                    print(f"         {line}")
        bad += len(out.violations)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
