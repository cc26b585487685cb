"""`vhpc reproduce s4`: brief S4 (VT-ASOS, an application-aware hypervisor) in the
simulator: two experiments.

`quad` (module `s4_quad`, where its parameters are stated): NPB-like OpenMP and MPI
kernels on a quad-core host natively, under Xen's default setup, with static tuning
(pinning and a lower guest timer rate), with hint-driven adaptive control, and (OpenMP
only) with adaptive control and concurrency throttling per parallel loop, beside the
brief's findings. Records: `experiment`, `workload`, `kind`, `config`, `time_s`,
`ci95_s`, `seeds`, `vs_native`, `brief` (the brief's finding for that configuration),
and for `throttle`, `loop_threads`.

The other asks S0: would co-scheduling alone have fixed it?

`s0-schedulers` runs S0's pressure experiment (1 to 4 domUs of two vCPUs, each
running a 2-rank NPB job, on S0's 2-core testbed with dom0 beside them; the
scenario of `vhpc reproduce s0`) with the original library (MPICH2's busy poll)
under Credit, gang scheduling (a domain's vCPUs run together or not at all) and
Credit2, and with the revised library (S0's fix, a yield to the hypervisor) under
Credit, the published answer. Credit's rows sit beside S0's Table 1.

Seeds 1 to `SEEDS` in every cell; a cell's value is the mean over seeds of the mean
completion of its co-running jobs, with the mean's 95 % interval. Records
(`--json`): `experiment`, `workload`, `config` (the scheduler), `library`, `domus`,
`time_s`, `ci95_s`, `seeds`, `published_s` (S0's Table 1, Credit's rows only).
"""

from __future__ import annotations

import copy
import statistics
import time
from typing import Any

import tomli_w

from vhpc.sim import run as sim
from vhpc.sim.reproduce import s0, s4_quad

SEEDS = 5
#: (scheduler, library) pairs of `s0-schedulers`, in the table's order.
CONFIGS = (("credit", "original"), ("credit", "revised"), ("gang", "original"),
           ("credit2", "original"))
BENCHMARKS = {"is.A.2": "npb.is", "lu.A.2": "npb.lu"}
#: The quick default runs IS only (LU's runs are 100-500 simulated seconds each).
QUICK_BENCHMARKS = ("is.A.2",)


def s0_schedulers_cells(quick: bool) -> list[tuple[dict[str, Any], str]]:
    """(the cell's keys, its scenario TOML) for every cell."""
    cells = []
    for benchmark in QUICK_BENCHMARKS if quick else BENCHMARKS:
        for domus in range(1, 5):
            for scheduler, library in CONFIGS:
                sc = s0.pressure_scenario(scheduler, domus, BENCHMARKS[benchmark],
                                          s0.LIBRARIES[library], noise=False)
                key = {"experiment": "s0-schedulers", "workload": benchmark,
                       "config": scheduler, "library": library, "domus": domus}
                cells.append((key, tomli_w.dumps(sc)))
    return cells


EXPERIMENTS = ("quad", "s0-schedulers")
#: The brief's finding beside each `quad` configuration (brief S4).
BRIEF = {
    "native": "the reference (Linux on the quad-core Xeon 5335)",
    "default": "a virtualization loss; OpenMP thread creation and management 2-3x slower "
               "under Xen, locks and atomics at most 1.2x",
    "static": "Xen-static (offline pinning and timer frequency) recovers the loss, "
              "OpenMP and MPI",
    "adaptive": "Xen-adapt beats native Linux on OpenMP codes; MPI gains small, in "
                "communication-heavy codes",
    "throttle": "Xen-adapt (run-time concurrency throttling and phase-aware thread-to-core "
                "mapping per parallel loop) beats native Linux on OpenMP codes",
}


def run(quick: bool = True, seeds: int = SEEDS,
        only: tuple[str, ...] = EXPERIMENTS) -> tuple[list[dict[str, Any]], float]:
    """Every record (`quad` first) and the wall time."""
    start = time.perf_counter()
    quad = s4_quad.cells() if "quad" in only else []
    cells = s0_schedulers_cells(quick) if "s0-schedulers" in only else []
    batch = [(text, f"reproduce s4: quad {key['workload']}/{key['config']}", seed)
             for key, text in quad for seed in range(1, seeds + 1)]
    batch += [(text, f"{s0.scenario_dir() / s0.PRESSURE} (reproduce s4: {key['workload']}/"
               f"{key['config']}/{key['library']}/{key['domus']} domUs)", seed)
              for key, text in cells for seed in range(1, seeds + 1)]
    try:
        all_reports = sim.run_texts(batch)
    except sim.SimError as exc:
        raise s0.ReproduceError(exc.message) from exc
    records = s4_quad.records(quad, all_reports[:len(quad) * seeds], seeds)
    for r in records:
        r["brief"] = BRIEF[r["config"]]
    reports = iter(all_reports[len(quad) * seeds:])
    for key, _ in cells:
        means = [statistics.fmean(s0.job_times(next(reports))) for _ in range(seeds)]
        published = None
        if key["config"] == "credit":
            pair = s0.TABLE1[(key["workload"], key["domus"])]
            published = pair[0 if key["library"] == "original" else 1]
        records.append(copy.copy(key) | {
            "time_s": statistics.fmean(means), "ci95_s": list(s0.mean_interval(means)),
            "seeds": seeds, "published_s": published})
    return records, time.perf_counter() - start


def print_quad(records: list[dict[str, Any]], console: Any) -> None:
    from rich.table import Table

    table = Table(title="S4 on a quad-core host (4 threads / ranks, class A): mean s over "
                        "seeds (time / native)")
    table.add_column("workload")
    table.add_column("kind")
    for config in s4_quad.CONFIGS:
        table.add_column(config, justify="right")
    for workload in dict.fromkeys(r["workload"] for r in records):
        rows = {r["config"]: r for r in records if r["workload"] == workload}
        cells = [f"{rows[c]['time_s']:.4g} ({rows[c]['vs_native']:.3f})" if c in rows else "—"
                 for c in s4_quad.CONFIGS]
        table.add_row(workload, rows[s4_quad.CONFIGS[0]]["kind"], *cells)
    console.print(table)
    for config in s4_quad.CONFIGS:
        console.print(f"  brief, {config}: {BRIEF[config]}")


def print_tables(records: list[dict[str, Any]], wall_s: float, console: Any) -> None:
    from rich.table import Table

    quad = [r for r in records if r["experiment"] == "quad"]
    if quad:
        print_quad(quad, console)
    s0_records = [r for r in records if r["experiment"] == "s0-schedulers"]
    for workload in dict.fromkeys(r["workload"] for r in s0_records):
        rows = [r for r in s0_records if r["workload"] == workload]
        table = Table(title=f"S0's pressure experiment, {workload}: would co-scheduling alone "
                            "have fixed S0? (mean s over seeds, 95 % interval; S0's Table 1)")
        table.add_column("domUs", justify="right")
        for scheduler, library in CONFIGS:
            table.add_column(f"{scheduler}, {library}", justify="right")
        for domus in sorted({r["domus"] for r in rows}):
            cells = []
            for scheduler, library in CONFIGS:
                r = next(x for x in rows if (x["domus"], x["config"], x["library"])
                         == (domus, scheduler, library))
                lo, hi = r["ci95_s"]
                text = f"{r['time_s']:.3g} ({lo:.3g}–{hi:.3g})"
                if r["published_s"] is not None:
                    text += f" [S0 {r['published_s']:.4g}]"
                cells.append(text)
            table.add_row(str(domus), *cells)
        console.print(table)
    console.print(f"{len(records) * records[0]['seeds']} simulations in {wall_s:.2f} s")
