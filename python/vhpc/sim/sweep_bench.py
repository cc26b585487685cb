"""`make bench-sweep`: the same points through `vhpc sim sweep`'s local Dask cluster
and through `run_many`, side by side (docs/sweep-bench.md).

The points are scenarios/sweeps/bench.toml with `--points N` seeds (each about
1 s of simulation here). `run_many` runs them in one native batch, one thread
per core, reports kept in memory; the sweep runs them as it always does: a
local cluster of one worker process per core started, one task per point, one
Parquet file written per point. The cluster's overhead per point is what the
workers' time did not simulate: (wall × workers − Σ simulation times) / points,
the simulation times being what each task measured around its native call.

    python -m vhpc.sim.sweep_bench --points 1000 --out docs/sweep-bench.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from vhpc import paths
from vhpc.provenance import cpu_model, git_revision
from vhpc.sim import sweep, sweep_run, sweep_store
from vhpc.sim.run import run_texts

BENCH = paths.REPO / "scenarios" / "sweeps" / "bench.toml"


def points_of(n: int) -> sweep.Sweep:
    """The bench sweep with seeds 1..n: n points."""
    sw = sweep.load(BENCH)
    head = sw.spec.sweep.model_copy(update={"seeds": n})
    sw.spec = sw.spec.model_copy(update={"sweep": head})
    return sw


def bench(n: int, workers: int) -> dict:
    sw = points_of(n)
    points = sw.points()
    sw.validate(points)
    start = time.perf_counter()
    run_texts([(p.scenario, p.origin, None) for p in points])
    many_s = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="vhpc-sweep-bench-") as out:
        outcome = sweep_run.run(sw, Path(out), workers=workers)
        sims = list(sweep_store.read(Path(out)).sim_wall_s)
    sweep_s = outcome.wall_s
    return {"points": n, "workers": outcome.workers, "run_many_s": many_s, "sweep_s": sweep_s,
            "median_sim_s": statistics.median(sims), "sum_sim_s": sum(sims),
            "overhead_s": (sweep_s * outcome.workers - sum(sims)) / n}


def markdown(r: dict) -> str:
    rev, dirty = git_revision()
    share = r["overhead_s"] / r["median_sim_s"]
    return "\n".join([
        "# Sweep benchmark: the local Dask cluster against run_many", "",
        f"`make bench-sweep` (`python -m vhpc.sim.sweep_bench --points {r['points']}`): "
        f"{r['points']} points of `scenarios/sweeps/bench.toml` (one configuration, seeds "
        f"1..{r['points']}), run once through `run_many` (one native batch, a thread per core) "
        f"and once through `vhpc sim sweep`'s path (a local cluster of {r['workers']} worker "
        "processes started, a Dask task per point, a Parquet file written per point).", "",
        "| | wall s | per point s |", "| --- | --: | --: |",
        f"| run_many | {r['run_many_s']:.1f} | {r['run_many_s'] / r['points']:.3f} |",
        f"| sweep on the local Dask cluster | {r['sweep_s']:.1f} | {r['sweep_s'] / r['points']:.3f} |",
        "", f"- median simulation time of a point (measured in the task): {r['median_sim_s']:.3f} s; "
        f"sum over the points: {r['sum_sim_s']:.1f} s",
        f"- cluster overhead per point, (wall × workers − Σ simulation) / points: "
        f"{r['overhead_s'] * 1000:.1f} ms, {100 * share:.1f} % of the median point "
        "(target: below 5 % for points of 1 s or more)",
        f"- sweep wall / run_many wall: {r['sweep_s'] / r['run_many_s']:.3f}", "",
        f"Host: {cpu_model()}, {os.cpu_count()} CPUs (shared with other work while measured); "
        f"git {rev}{' (dirty)' if dirty else ''}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, help="Also write the Markdown here.")
    args = ap.parse_args()
    text = markdown(bench(args.points, args.workers))
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
