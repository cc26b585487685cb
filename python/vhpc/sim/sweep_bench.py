"""`make bench-sweep`: the same points through `vhpc sim sweep`'s local Dask cluster
and through `run_many`, side by side (docs/sweep-bench.md).

The points are scenarios/sweeps/bench.toml with `--points N` seeds (each about
1 s of simulation here), run in two halves (see `bench`). `run_many` runs a
half in one native batch, one thread per core, reports kept in memory; the
sweep runs it as it always does: a local cluster of one worker process per core
started, one task per point, one Parquet file written per point. The cluster's overhead per point is what the
workers' time did not simulate: (wall × workers − Σ simulation times) / points,
the simulation times being what each task measured around its native call.
The sweep's wall time counts from after its points were expanded and validated
(about 2 s for 1000 points here); run_many's includes its batch's memory check.

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


def points_of(seeds: list[int]) -> sweep.Sweep:
    """The bench sweep with these seeds: one point per seed."""
    sw = sweep.load(BENCH)
    head = sw.spec.sweep.model_copy(update={"seeds": seeds})
    sw.spec = sw.spec.model_copy(update={"sweep": head})
    return sw


def run_many_s(sw: sweep.Sweep) -> float:
    points = sw.points()
    start = time.perf_counter()
    run_texts([(p.scenario, p.origin, None) for p in points])
    return time.perf_counter() - start


def sweep_s(sw: sweep.Sweep, workers: int) -> tuple[float, int, list[float]]:
    """(wall, workers, each point's simulation time) of the sweep on a local cluster."""
    with tempfile.TemporaryDirectory(prefix="vhpc-sweep-bench-") as out:
        outcome = sweep_run.run(sw, Path(out), workers=workers)
        return outcome.wall_s, outcome.workers, list(sweep_store.read(Path(out)).sim_wall_s)


def bench(n: int, workers: int) -> dict:
    """Each method runs every point once, in the order run_many, sweep on the first
    half of the seeds and sweep, run_many on the second: a load that drifts
    steadily (other work on a shared machine) weighs on both alike."""
    first, second = points_of(list(range(1, n // 2 + 1))), points_of(list(range(n // 2 + 1, n + 1)))
    loads = [os.getloadavg()[0]]
    many = run_many_s(first)
    loads.append(os.getloadavg()[0])
    wall_a, n_workers, sims_a = sweep_s(first, workers)
    loads.append(os.getloadavg()[0])
    wall_b, _, sims_b = sweep_s(second, workers)
    loads.append(os.getloadavg()[0])
    many += run_many_s(second)
    loads.append(os.getloadavg()[0])
    sims, swept = sims_a + sims_b, wall_a + wall_b
    return {"points": n, "workers": n_workers, "run_many_s": many, "sweep_s": swept,
            "median_sim_s": statistics.median(sims), "sum_sim_s": sum(sims),
            "overhead_s": (swept * n_workers - sum(sims)) / n,
            "excess_s": (swept - many) * n_workers / n, "loads": loads}


def markdown(r: dict) -> str:
    rev, dirty = git_revision()
    share = r["overhead_s"] / r["median_sim_s"]
    return "\n".join([
        "# Sweep benchmark: the local Dask cluster against run_many", "",
        f"`make bench-sweep` (`python -m vhpc.sim.sweep_bench --points {r['points']}`): "
        f"{r['points']} points of `scenarios/sweeps/bench.toml` (one configuration, seeds "
        f"1..{r['points']}), each run once through `run_many` (native batches, a thread per "
        f"core) and once through `vhpc sim sweep`'s path (a local cluster of {r['workers']} "
        "worker processes started, a Dask task per point, a Parquet file written per point), "
        "in two halves.", "",
        "| | wall s | per point s |", "| --- | --: | --: |",
        f"| run_many | {r['run_many_s']:.1f} | {r['run_many_s'] / r['points']:.3f} |",
        f"| sweep on the local Dask cluster | {r['sweep_s']:.1f} | {r['sweep_s'] / r['points']:.3f} |",
        "", f"- median simulation time of a point (measured in the task): {r['median_sim_s']:.3f} s; "
        f"sum over the points: {r['sum_sim_s']:.1f} s",
        f"- cluster overhead per point, (wall × workers − Σ simulation) / points: "
        f"{r['overhead_s'] * 1000:.1f} ms, {100 * share:.1f} % of the median point "
        "(target: below 5 % for points of 1 s or more)",
        f"- the sweep's wall beyond run_many's, in worker time per point, (sweep wall − "
        f"run_many wall) × workers / points: {r['excess_s'] * 1000:.1f} ms, "
        f"{100 * r['excess_s'] / r['median_sim_s']:.1f} % of the median point",
        f"- sweep wall / run_many wall: {r['sweep_s'] / r['run_many_s']:.3f} (the sweep's wall "
        "counts from after its points were expanded and validated)",
        "- order: run_many then the sweep on seeds 1..N/2, the sweep then run_many on the rest; "
        "1-minute load average before, between and after them: "
        + ", ".join(f"{x:.1f}" for x in r["loads"]), "",
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
