"""`vhpc reproduce s0`: every S0 experiment of the brief, in the simulator.

The scenarios are built from the files under ``scenarios/`` (``s0-*.toml``),
changing only what the experiment varies: the hypervisor scheduler, the MPI
library (original = ``busy_poll``, MPICH2's poll-then-guest-yield; revised
= ``hv_yield``, the published fix), the number of domUs, the benchmark, and a
noise VM.

Seeds: every cell starts with seeds 1 to 5. A cell whose seed-to-seed spread
leaves its mean uncertain (a 95 % confidence interval wider than
±`PRECISION` of the mean) gets more seeds, in rounds, up to `MAX_SEEDS`: the
high-variance cells (is.A.2 under the original library) take tens to
hundreds, the others stop at 5. Five, not S0's three samples: a cell whose
runs fall into two clusters can show three runs that agree, and a narrow
interval around the wrong mean (is.A.2, 3 domUs, original: seeds 1-3 gave
7.68, 7.61 and 7.55 s; `--precision 2` settles at 8.94 s). Each round is one
parallel batch in the native core. Which seeds run depends only on the
simulated results, so the records are as deterministic as the simulator.
`--seeds N` runs exactly seeds 1..N in every cell instead.

Records (``--json``) have the keys the issue specifies: experiment,
scheduler, config, domains, benchmark, library, mean_s, std_s, plus
``published_s`` where the brief gives a value, ``seeds`` (how many ran),
``ci95_s`` (the mean's 95 % confidence interval, Student's t) and, beside a
published value, ``range3_s`` (where a mean of 3 of the model's runs falls).
"""

from __future__ import annotations

import copy
import math
import random
import statistics
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from vhpc import paths
from vhpc.sim import run as sim

#: Seeds every cell starts with (module doc); `--seeds N` uses 1..N instead.
SEEDS = (1, 2, 3, 4, 5)
#: The default stopping rule: more seeds until the mean's 95 % confidence
#: interval is within ±PRECISION of it, or MAX_SEEDS ran.
PRECISION = 0.05
MAX_SEEDS = 200
#: S0 published means of this many runs; the model's range for such a mean
#: says whether a published figure is within its own sampling noise.
PUBLISHED_RUNS = 3
LIBRARIES = {"original": "busy_poll", "revised": "hv_yield"}
SCHEDULERS = ("credit", "sedf")
BENCHMARKS = {"lu.A.2": "npb.lu", "is.A.2": "npb.is"}
BEFF_CONFIGS = {
    "native_up": "s0-beff-native-up.toml",
    "intra_vm_pin": "s0-beff-intra-vm-credit-pin.toml",
    "inter_vm_pin": "s0-beff-inter-vm-credit-pin.toml",
}
PRESSURE = "s0-pressure.toml"
#: b_eff message sizes: 2^0 .. 2^20 bytes, each its own short run.
BEFF_SIZES = range(0, 21)
BEFF_REPS = 10

#: S0 Table 1 (Credit): (benchmark, domUs) -> (original, revised) seconds.
TABLE1 = {
    ("is.A.2", 1): (1.841, 1.852),
    ("is.A.2", 2): (4.711, 5.220),
    ("is.A.2", 3): (9.555, 5.986),
    ("is.A.2", 4): (13.980, 7.906),
    ("lu.A.2", 1): (105.047, 104.658),
    ("lu.A.2", 2): (265.270, 248.948),
    ("lu.A.2", 3): (389.371, 344.684),
    ("lu.A.2", 4): (522.217, 448.370),
}
#: S0's b_eff bandwidth improvement from the fix: (scheduler, config) -> factor.
BEFF_FACTORS = {
    ("credit", "inter_vm_pin"): 300.0,
    ("credit", "intra_vm_pin"): 700.0,
    ("sedf", "inter_vm_pin"): 3.0,
    ("sedf", "intra_vm_pin"): 4.0,
}


class ReproduceError(sim.SimError):
    """A scenario file of the reproduction is missing or broken."""


def scenario_dir() -> Path:
    return paths.REPO / "scenarios"


#: dom0's background activity for sensitivity runs: (interval_us, work_us),
#: or None to keep the scenario files' value.
Background = tuple[int, int] | None


def load(name: str, background: Background = None) -> dict[str, Any]:
    path = scenario_dir() / name
    try:
        sc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ReproduceError(f"{path}: {exc}") from exc
    if background is not None:
        for dom in sc["domains"]:
            if dom.get("dom0"):
                interval, work = background
                dom["background"] = {"interval_us": interval, "work_us": work}
    return sc


def set_scheduler(sc: dict[str, Any], scheduler: str) -> None:
    """Switch the hypervisor; under SEDF domUs get S0's slice 0 of 100 ms."""
    sc.setdefault("hypervisor", {})["scheduler"] = scheduler
    if scheduler == "sedf":
        for dom in sc["domains"]:
            if not dom.get("dom0") and not dom.get("native"):
                dom["sedf"] = {"period_us": 100_000, "slice_us": 0, "extratime": True}


@dataclass(frozen=True)
class Cell:
    """One published cell: every run that feeds one output record."""

    experiment: str
    scheduler: str
    config: str | None
    domains: int | None
    benchmark: str
    library: str


#: One simulation of a cell for each seed: the scenario file it derives from
#: (errors name it), its TOML text and its b_eff message size (log2) if any.
Run = tuple[str, str, int | None]
#: One finished simulation of a cell: its seed, b_eff size and report.
Result = tuple[int, int | None, dict[str, Any]]


@dataclass
class Batch:
    """Scenarios to run, each tagged with its cell, seed and b_eff size."""

    items: list[tuple[str, str, int]] = field(default_factory=list)
    tags: list[tuple[Cell, int, int | None]] = field(default_factory=list)

    def add(self, cell: Cell, run: Run, seed: int) -> None:
        source, text, size = run
        origin = f"{scenario_dir() / source} (reproduce s0: {cell.experiment}/{cell.scheduler}/" \
                 f"{cell.config or cell.domains}/{cell.benchmark}/{cell.library}" \
                 + (f"/2^{size})" if size is not None else ")")
        self.items.append((text, origin, seed))
        self.tags.append((cell, seed, size))


def beff_cells(plan: dict[Cell, list[Run]], background: Background) -> None:
    for scheduler in SCHEDULERS:
        for config, file in BEFF_CONFIGS.items():
            base = load(file, background)
            for library, policy in LIBRARIES.items():
                runs = plan[Cell("beff", scheduler, config, None, "beff", library)] = []
                for log2 in BEFF_SIZES:
                    sc = copy.deepcopy(base)
                    if config != "native_up":  # no hypervisor under native_up
                        set_scheduler(sc, scheduler)
                    job = sc["jobs"][0]
                    job["wait_policy"] = policy
                    job["params"] = {"min_log2": log2, "max_log2": log2, "reps": BEFF_REPS}
                    runs.append((file, tomli_w.dumps(sc), log2))


def pressure_scenario(scheduler: str, domus: int, workload: str, policy: str,
                      noise: bool, background: Background = None) -> dict[str, Any]:
    """S0's pressure setup with `domus` domUs (each 2 vCPUs, 2 ranks), and a
    1-vCPU noise VM if asked."""
    base = load(PRESSURE, background)
    dom0 = [d for d in base["domains"] if d.get("dom0")]
    template = next(d for d in base["domains"] if not d.get("dom0"))
    job = base["jobs"][0]
    base["domains"] = dom0 + [{**template, "name": f"domU{i}"} for i in range(1, domus + 1)]
    base["jobs"] = [{**job, "name": f"domU{i}", "workload": workload, "wait_policy": policy,
                     "ranks": [f"domU{i}"] * len(job["ranks"])} for i in range(1, domus + 1)]
    if noise:
        base["domains"].append({"name": "noise", "vcpus": 1})
        base["jobs"].append({"name": "noise", "workload": "noise", "ranks": ["noise"]})
    set_scheduler(base, scheduler)
    return base


def pressure_cells(plan: dict[Cell, list[Run]], quick: bool, background: Background) -> None:
    def add(cell: Cell, workload: str, noise: bool) -> None:
        policy = LIBRARIES[cell.library]
        sc = pressure_scenario(cell.scheduler, cell.domains, workload, policy, noise, background)
        plan[cell] = [(PRESSURE, tomli_w.dumps(sc), None)]

    for scheduler in ("credit",) if quick else SCHEDULERS:
        for domus in range(1, 5):
            for benchmark, workload in BENCHMARKS.items():
                for library in LIBRARIES:
                    add(Cell("pressure", scheduler, None, domus, benchmark, library), workload, False)
    for domus in range(1, 5):
        for library in LIBRARIES:
            add(Cell("noise", "credit", None, domus, "is.A.2", library), "npb.is", True)


def cell_plan(quick: bool, background: Background) -> dict[Cell, list[Run]]:
    """Every cell and the simulations one seed of it takes."""
    plan: dict[Cell, list[Run]] = {}
    # The long runs first, so a parallel batch does not end on one of them.
    pressure_cells(plan, quick, background)
    beff_cells(plan, background)
    return plan


def job_times(report: dict[str, Any]) -> list[float]:
    """Completion time of every finite job (one per domU), in seconds."""
    if not report["finished"]:
        raise ReproduceError(f"{report['scenario']}: hit its time limit before the jobs finished")
    return [j["completion_ns"] / 1e9 for j in report["jobs"] if j["workload"] != "noise"]


def half_rtt(report: dict[str, Any]) -> float:
    """A b_eff run's mean half round trip, seconds."""
    (t,) = job_times(report)
    return t / (2 * BEFF_REPS)


def by_seed(runs: list[Result], value: Any) -> list[list[float]]:
    """`value(size, report)` of every run, grouped by seed, in seed order."""
    grouped: dict[int, list[float]] = {}
    for seed, size, report in sorted(runs, key=lambda r: (r[0], r[1] or 0)):
        grouped.setdefault(seed, []).append(value(size, report))
    return list(grouped.values())


def seed_values(cell: Cell, runs: list[Result]) -> list[float]:
    """What a cell's mean is taken over, one value per seed: b_eff's mean half
    round trip over message sizes, or the mean completion time of the
    co-running domUs."""
    if cell.experiment == "beff":
        return [statistics.fmean(v) for v in by_seed(runs, lambda _, r: half_rtt(r))]
    return [statistics.fmean(job_times(r)) for (r,) in by_seed(runs, lambda _, r: r)]


def mean_interval(values: Sequence[float]) -> tuple[float, float]:
    """The mean's 95 % confidence interval (Student's t; a point for one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean
    from scipy.special import stdtrit  # not scipy.stats: a tenth of its import time

    half = float(stdtrit(len(values) - 1, 0.975)) * statistics.stdev(values) / math.sqrt(len(values))
    return mean - half, mean + half


def seeds_wanted(values: Sequence[float], precision: float, max_seeds: int) -> int:
    """How many seeds a cell with these per-seed values should have: as many as
    it has once the mean's 95 % interval is within ±`precision` of the mean or
    `max_seeds` ran; else enough by the normal approximation to the spread so
    far, and at least twice as many (three seeds can hide a wide spread)."""
    n = len(values)
    mean = statistics.fmean(values)
    low, high = mean_interval(values)
    if n >= max_seeds or (high - low) / 2 <= precision * abs(mean):
        return n
    z = statistics.NormalDist().inv_cdf(0.975)
    estimate = math.ceil((z * statistics.stdev(values) / (precision * abs(mean))) ** 2)
    return min(max_seeds, max(2 * n, estimate))


def more_seeds(plan: dict[Cell, list[Result]], precision: float,
               max_seeds: int) -> dict[Cell, list[int]]:
    """The seeds each unsettled cell runs next (`seeds_wanted`)."""
    more = {}
    for cell, runs in plan.items():
        values = seed_values(cell, runs)
        wanted = seeds_wanted(values, precision, max_seeds)
        if wanted > len(values):
            more[cell] = list(range(len(values) + 1, wanted + 1))
    return more


def summarise(results: dict[Cell, list[Result]]) -> list[dict[str, Any]]:
    order = {"beff": 0, "pressure": 1, "noise": 2}
    configs = list(BEFF_CONFIGS)
    cells = sorted(results, key=lambda c: (
        order[c.experiment], SCHEDULERS.index(c.scheduler), configs.index(c.config) if c.config else 0,
        c.domains or 0, c.benchmark, c.library))
    return [beff_record(cell, results[cell]) if cell.experiment == "beff"
            else pressure_record(cell, results[cell]) for cell in cells]


def beff_record(cell: Cell, runs: list[Result]) -> dict[str, Any]:
    """Mean half round trip over all sizes (seconds), and b_eff's bandwidth:
    the mean over sizes of size / half round trip."""
    bws = [statistics.fmean(v) for v in by_seed(runs, lambda size, r: (1 << size) / half_rtt(r))]
    by_size: dict[int, list[float]] = {}
    for _, size, report in sorted(runs, key=lambda r: (r[0], r[1] or 0)):
        by_size.setdefault(size, []).append(half_rtt(report))
    return record(cell, seed_values(cell, runs), None) | {
        "beff_MBps": statistics.fmean(bws) / 1e6,
        "half_rtt_by_log2": {size: statistics.fmean(v) for size, v in sorted(by_size.items())}}


def pressure_record(cell: Cell, runs: list[Result]) -> dict[str, Any]:
    """Mean over seeds of the mean over co-running domUs; std across domUs
    (averaged over seeds) when there are several, else across seeds."""
    spread = None
    if cell.domains and cell.domains > 1:
        spread = statistics.fmean(statistics.pstdev(job_times(r)) for (r,) in by_seed(runs, lambda _, r: r))
    return record(cell, seed_values(cell, runs), spread)


def published_range(values: Sequence[float], runs: int = PUBLISHED_RUNS,
                    draws: int = 2000) -> tuple[float, float]:
    """The central 95 % of means of `runs` runs drawn from the model's per-seed
    values (a bootstrap with a fixed seed): where a published mean of that many
    runs would fall if the model were right."""
    rng = random.Random(0)
    means = sorted(sum(rng.choices(values, k=runs)) / runs for _ in range(draws))
    return means[int(0.025 * draws)], means[int(0.975 * draws) - 1]


def record(cell: Cell, means: list[float], spread: float | None) -> dict[str, Any]:
    published = None
    if cell.experiment == "pressure" and cell.scheduler == "credit":
        pair = TABLE1.get((cell.benchmark, cell.domains))
        if pair:
            published = pair[0 if cell.library == "original" else 1]
    return {
        "experiment": cell.experiment,
        "scheduler": cell.scheduler,
        "config": cell.config,
        "domains": cell.domains,
        "benchmark": cell.benchmark,
        "library": cell.library,
        "mean_s": statistics.fmean(means),
        "std_s": spread if spread is not None else (statistics.stdev(means) if len(means) > 1 else 0.0),
        "published_s": published,
        "seeds": len(means),
        "ci95_s": list(mean_interval(means)),
        "range3_s": None if published is None else list(published_range(means)),
    }


def run_s0(quick: bool = False, dom0_background: Background = None,
           seeds: Sequence[int] | None = None, precision: float = PRECISION,
           max_seeds: int = MAX_SEEDS,
           max_memory: int | None = None) -> tuple[list[dict[str, Any]], float, int]:
    """All S0 records, the wall time and the number of simulations. `seeds`:
    exactly these in every cell; None: SEEDS, then more where the cell's
    spread asks for them (`precision`, `max_seeds`: module doc). Each round is
    one parallel batch (`max_memory` as in `vhpc.sim.run_texts`); Ctrl-C stops
    it at once."""
    plan = cell_plan(quick, dom0_background)
    results: dict[Cell, list[Result]] = {cell: [] for cell in plan}
    wanted = {cell: list(SEEDS if seeds is None else seeds) for cell in plan}
    n_sims = 0
    start = time.perf_counter()
    while wanted:
        batch = Batch()
        for cell, cell_seeds in wanted.items():
            for seed in cell_seeds:
                for run in plan[cell]:
                    batch.add(cell, run, seed)
        try:
            reports = sim.run_texts(batch.items, max_memory=max_memory)
        except sim.SimError as exc:
            raise ReproduceError(exc.message) from exc
        n_sims += len(reports)
        for (cell, seed, size), report in zip(batch.tags, reports):
            results[cell].append((seed, size, report))
        wanted = {} if seeds is not None else more_seeds(results, precision, max_seeds)
    return summarise(results), time.perf_counter() - start, n_sims


def beff_factors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Revised over original b_eff bandwidth per scheduler and configuration."""
    bw = {(r["scheduler"], r["config"], r["library"]): r["beff_MBps"]
          for r in records if r["experiment"] == "beff"}
    half = {(r["scheduler"], r["config"], r["library"]): r["half_rtt_by_log2"]
            for r in records if r["experiment"] == "beff"}
    out = []
    for (scheduler, config), published in BEFF_FACTORS.items():
        factor = bw[(scheduler, config, "revised")] / bw[(scheduler, config, "original")]
        orig, rev = half[(scheduler, config, "original")], half[(scheduler, config, "revised")]
        out.append({"scheduler": scheduler, "config": config, "factor": factor,
                    "published": published, "within_2x": published / 2 <= factor <= published * 2,
                    "by_log2": {size: orig[size] / rev[size] for size in orig}})
    return out


def table1_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Credit pressure cells beside Table 1, with the deviation."""
    rows = []
    for r in records:
        if r["experiment"] == "pressure" and r["published_s"]:
            dev = r["mean_s"] / r["published_s"] - 1
            low, high = r["range3_s"]
            rows.append(r | {"deviation": dev, "within_15pct": abs(dev) <= 0.15,
                             "in_range3": low <= r["published_s"] <= high})
    return rows


def _yes(ok: bool, no: str = "NO") -> str:
    return "yes" if ok else no


def _interval(pair: Sequence[float]) -> str:
    return f"{_fmt_s(pair[0])}–{_fmt_s(pair[1])}"


def _fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 100 else f"{x:.1f}"


def print_tables(records: list[dict[str, Any]], wall_s: float, n_sims: int, console: Any) -> None:
    """The human-readable output of `vhpc reproduce s0`."""
    from rich.table import Table

    beff = Table(title="b_eff ping-pong, 2 ranks, 1 B .. 1 MiB (mean half round trip, b_eff bandwidth)")
    for col in ("scheduler", "config", "library", "half RTT", "b_eff"):
        beff.add_column(col, justify="right" if col in ("half RTT", "b_eff") else "left")
    for r in records:
        if r["experiment"] == "beff":
            beff.add_row(r["scheduler"], r["config"], r["library"], f"{r['mean_s'] * 1e6:,.1f} µs",
                         f"{r['beff_MBps']:,.2f} MB/s")
    console.print(beff)
    factors = Table(title="b_eff improvement from the fix (revised / original bandwidth)")
    for col in ("scheduler", "config", "simulated", "published", "within 2x"):
        factors.add_column(col)
    for f in beff_factors(records):
        factors.add_row(f["scheduler"], f["config"], f"{f['factor']:,.1f}x", f"{f['published']:g}x",
                        "yes" if f["within_2x"] else "NO")
    console.print(factors)
    t1 = Table(title="Table 1, Credit: mean execution time (s) of co-running domUs, mean over seeds")
    for col in ("domUs", "benchmark", "library", "simulated", "95 % CI", "seeds", "published",
                "deviation", "±15 %", f"{PUBLISHED_RUNS}-run range", "in it"):
        t1.add_column(col)
    for r in table1_rows(records):
        t1.add_row(str(r["domains"]), r["benchmark"], r["library"], _fmt_s(r["mean_s"]),
                   _interval(r["ci95_s"]), str(r["seeds"]), _fmt_s(r["published_s"]),
                   f"{r['deviation'] * 100:+.1f} %", _yes(r["within_15pct"]),
                   _interval(r["range3_s"]), _yes(r["in_range3"]))
    console.print(t1)
    console.print(f"{PUBLISHED_RUNS}-run range: where {PUBLISHED_RUNS} of the model's runs would put "
                  f"a mean 95 % of the time (S0 published means of {PUBLISHED_RUNS} runs)")
    for experiment, scheduler, title in (
            ("pressure", "sedf", "SEDF pressure (no published values): mean (s) ± std"),
            ("noise", "credit", "Credit pressure + one noise VM, is.A.2: mean (s) ± std across domUs")):
        table = Table(title=title)
        for col in ("domUs", "benchmark", "original", "revised", "fix gain"):
            table.add_column(col)
        cells = {(r["domains"], r["benchmark"], r["library"]): r for r in records
                 if r["experiment"] == experiment and r["scheduler"] == scheduler}
        for (domains, benchmark, library), r in cells.items():
            if library != "original":
                continue
            rev = cells[(domains, benchmark, "revised")]
            table.add_row(str(domains), benchmark, f"{_fmt_s(r['mean_s'])} ± {_fmt_s(r['std_s'])}",
                          f"{_fmt_s(rev['mean_s'])} ± {_fmt_s(rev['std_s'])}",
                          f"{r['mean_s'] / rev['mean_s']:.2f}x")
        console.print(table)
    console.print(f"{n_sims} simulations in {wall_s:.2f} s")


def markdown(records: list[dict[str, Any]], wall_s: float, n_sims: int) -> str:
    """The same tables as `print_tables`, in Markdown (docs/results/s0-sim.md)."""
    from vhpc import provenance

    rev, dirty = provenance.git_revision()
    out = ["# S0 in the simulator: `vhpc reproduce s0`", "",
           f"Generated by `vhpc reproduce s0 --markdown` at revision {rev}"
           f"{' (with uncommitted changes)' if dirty else ''}: {n_sims} simulations "
           f"in {wall_s:.1f} s. The simulator is deterministic: the same revision "
           "gives the same numbers on any machine. Reading and explanations: "
           "[docs/validation.md](../validation.md).", ""]
    out += ["## Table 1 (Credit): mean execution time of the co-running domUs, seconds", "",
            f"Simulated: the mean over seeds, with its 95 % confidence interval. {PUBLISHED_RUNS}-run "
            f"range: the central 95 % of means of {PUBLISHED_RUNS} runs drawn from the model's runs "
            f"(S0 published means of {PUBLISHED_RUNS} runs), so a published figure inside it is within "
            "its own sampling noise of the model.", "",
            "| domUs | benchmark | library | simulated | 95 % CI | seeds | std | published | deviation "
            f"| within ±15 % | {PUBLISHED_RUNS}-run range | published in it |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table1_rows(records):
        out.append(f"| {r['domains']} | {r['benchmark']} | {r['library']} | {_fmt_s(r['mean_s'])} | "
                   f"{_interval(r['ci95_s'])} | {r['seeds']} | "
                   f"{_fmt_s(r['std_s'])} | {_fmt_s(r['published_s'])} | "
                   f"{r['deviation'] * 100:+.1f} % | {_yes(r['within_15pct'], '**no**')} | "
                   f"{_interval(r['range3_s'])} | {_yes(r['in_range3'], '**no**')} |")
    out += ["", "## b_eff: improvement from the fix (revised / original b_eff bandwidth)", "",
            "| scheduler | configuration | simulated | published | within 2× |", "|---|---|---|---|---|"]
    for f in beff_factors(records):
        out.append(f"| {f['scheduler']} | {f['config']} | {f['factor']:,.1f}× | {f['published']:g}× | "
                   f"{'yes' if f['within_2x'] else '**no**'} |")
    sizes = (0, 10, 15, 20)
    out += ["", "The same factor per message size (original / revised half round trip):", "",
            "| scheduler | configuration | " + " | ".join(f"{1 << s:,} B" for s in sizes) + " |",
            "|---|---|" + "---|" * len(sizes)]
    for f in beff_factors(records):
        out.append(f"| {f['scheduler']} | {f['config']} | "
                   + " | ".join(f"{f['by_log2'][s]:,.1f}×" for s in sizes) + " |")
    out += ["", "## b_eff: mean half round trip and b_eff bandwidth (1 B .. 1 MiB)", "",
            "| scheduler | configuration | library | half round trip | b_eff |", "|---|---|---|---|---|"]
    for r in records:
        if r["experiment"] == "beff":
            out.append(f"| {r['scheduler']} | {r['config']} | {r['library']} | "
                       f"{r['mean_s'] * 1e6:,.1f} µs | {r['beff_MBps']:,.2f} MB/s |")
    for experiment, scheduler, title in (
            ("pressure", "sedf", "SEDF pressure (no published values)"),
            ("noise", "credit", "Credit pressure plus one noise VM, is.A.2 (std across domUs)")):
        out += ["", f"## {title}: mean ± std, seconds", "",
                "| domUs | benchmark | original | revised | fix gain |", "|---|---|---|---|---|"]
        cells = {(r["domains"], r["benchmark"], r["library"]): r for r in records
                 if r["experiment"] == experiment and r["scheduler"] == scheduler}
        for (domains, benchmark, library), r in cells.items():
            if library == "original":
                v = cells[(domains, benchmark, "revised")]
                out.append(f"| {domains} | {benchmark} | {_fmt_s(r['mean_s'])} ± {_fmt_s(r['std_s'])} | "
                           f"{_fmt_s(v['mean_s'])} ± {_fmt_s(v['std_s'])} | "
                           f"{r['mean_s'] / v['mean_s']:.2f}× |")
    return "\n".join(out) + "\n"
