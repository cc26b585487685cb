"""Where a hinted run's time goes: runs of one lab cell with the evidence the
stored runs lack, each rank's `VHPC_STATS` line (calls, polls, yields, voluntary
and involuntary context switches) and each slicer's counters (switches, those
made by the ranks' own hand-overs and by the slicer on its doorbell). What found
why the hinted ping-pong missed issue 14's 2x (docs/lab.md, *The hint channel*).

    python -m vhpc.lab.hints_probe EXPERIMENT MPI CONFIG [--reps N] [VAR=VALUE ...]

Each VAR=VALUE goes to every rank (libvhpc_wait's knobs, e.g. VHPC_MPI_YIELD=0);
VHPC_STATS=1 always does. Nothing is stored.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

from vhpc.host import process, timeslice
from vhpc.lab import experiment, runner

STATS_PREFIX = "vhpc_wait: rank="


@dataclass
class Probe:
    status: str
    metrics: dict[str, tuple[float, str]]
    ranks: list[str] = field(default_factory=list)  #: the ranks' VHPC_STATS lines
    slicers: list[dict[str, object]] = field(default_factory=list)  #: counters at stop


@contextmanager
def watching(extra_env: dict[str, str]) -> Iterator[Probe]:
    """While open, lab runs give their ranks `extra_env` and VHPC_STATS=1, and the
    returned Probe collects the ranks' stats lines and the slicers' counters
    (read as each Slicer stops: they are gone after)."""
    probe = Probe("", {})
    policy_env, run_commands, stop = (runner.rt.policy_env, process.run_commands,
                                      timeslice.Slicer.stop)

    def env_with_extra(name, policy):
        env, preload = policy_env(name, policy)
        return {**env, "VHPC_STATS": "1", **extra_env}, preload

    def keeping_stderr(*args, **kwargs):
        outcomes = run_commands(*args, **kwargs)
        probe.ranks += [line for out in outcomes for line in out.stderr.text().splitlines()
                        if line.startswith(STATS_PREFIX) and " policy=" in line]
        return outcomes

    def counted_stop(slicer):
        probe.slicers.append({
            "switches": slicer.switches, "early": slicer.early_switches,
            "hinted": slicer.hinted_switches, "handovers": slicer.handovers,
            "slices": slicer.slices})
        stop(slicer)

    with mock.patch.object(runner.rt, "policy_env", env_with_extra), \
            mock.patch.object(runner.process, "run_commands", keeping_stderr), \
            mock.patch.object(timeslice.Slicer, "stop", counted_stop):
        yield probe


def probe(path: Path, mpi: str, config: str, extra_env: dict[str, str]) -> Probe:
    """One run of the cell(s) of experiment `path` with this MPI and config."""
    exp = experiment.load(path)
    cells = [c for c in runner.plan(exp).runnable if c.mpi == mpi and c.config.name == config]
    if not cells:
        raise SystemExit(f"{path}: no runnable cell with mpi {mpi!r} and config {config!r}")
    with watching(extra_env) as seen:
        result = runner.run_once(cells[0], exp.experiment.timeout_s)
    seen.status, seen.metrics = result.status, result.metrics
    return seen


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m vhpc.lab.hints_probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", type=Path)
    ap.add_argument("mpi")
    ap.add_argument("config")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("env", nargs="*", metavar="VAR=VALUE")
    args = ap.parse_intermixed_args(argv)
    bad = [kv for kv in args.env if "=" not in kv or not kv.split("=", 1)[0]]
    if bad:
        ap.error(f"not VAR=VALUE: {' '.join(bad)}")
    extra = dict(kv.split("=", 1) for kv in args.env)
    for rep in range(args.reps):
        seen = probe(args.experiment, args.mpi, args.config, extra)
        metrics = ", ".join(f"{k}={v:g} {u}" for k, (v, u) in sorted(seen.metrics.items()))
        print(f"run {rep}: {seen.status} {metrics}")
        for line in seen.ranks:
            print(f"  {line}")
        for k, counters in enumerate(seen.slicers):
            print(f"  slicer {k}: " + " ".join(f"{n}={v}" for n, v in counters.items()))


if __name__ == "__main__":
    main()
