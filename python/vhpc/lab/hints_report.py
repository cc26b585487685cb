"""docs/results/s4-hints.md: issue 14's hint channel measured (`make s4-hints`).

Reads the stored runs of experiments/s4-hints-pingpong.toml and
s4-hints-pressure.toml (vhpc.lab.store) and writes, side by side from one run:
the time-sliced ping-pong with and without hints beside the one-core
(`native_up`) figure, with the target check (hinted at most 2x one-core), and
the pressure experiment's times with and without hints. Figures are medians
with 95 % percentile-bootstrap intervals (of the median, and of the ratio of two
medians, runs resampled within each side; seeded, as vhpc.runtime.bench does),
so that a run's noise shows and a lucky median cannot pass a target.

    python -m vhpc.lab.hints_report PINGPONG_DIR PRESSURE_DIR --load FILE --out FILE
"""

from __future__ import annotations

import argparse
import math
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from vhpc import paths
from vhpc.lab import store
from vhpc.bootstrap import median_interval, median_ratio_interval

TARGET = 2.0  # issue 14: hinted time-sliced ping-pong at most 2x the one-core figure


def fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


def cell(values: list[float]) -> str:
    if not values:
        return "no run"
    ci = median_interval(values)
    med = float(np.median(values))
    return f"{fmt(med)} ({fmt(ci[0])}–{fmt(ci[1])})" if ci else fmt(med)


def ratio_cell(a: list[float], b: list[float]) -> tuple[str, tuple[float, float] | None]:
    if not a or not b:
        return "—", None
    r = float(np.median(a) / np.median(b))
    ci = median_ratio_interval(a, b)
    return (f"{fmt(r)} ({fmt(ci[0])}–{fmt(ci[1])})" if ci else fmt(r)), ci


def values(df, **where) -> list[float]:
    sel = df
    for k, v in where.items():
        sel = sel[sel[k] == v]
    return [float(v) for v in sel["value"]]


def ok_runs(directory: Path):
    df = store.read(directory)
    counts = df.drop_duplicates("run_key")["status"].value_counts().to_dict()
    return df[df["status"] == "ok"], counts


PINGPONG_CONFIGS = [("native_up", "native_up: one core (CPU 0), Linux"),
                    ("one-core", "one core (CPU 1), Linux: the reference"),
                    ("one-cpu", "time-sliced, one CPU, no hints"),
                    ("one-cpu-hints", "time-sliced, one CPU, hints"),
                    ("two-cpus", "time-sliced, two CPUs, no hints"),
                    ("two-cpus-hints", "time-sliced, two CPUs, hints")]


def pingpong_section(df) -> list[str]:
    df = df[df["metric"] == "lat_8_us"]
    out = ["## Time-sliced ping-pong (experiments/s4-hints-pingpong.toml)", "",
           "8-byte half round trip in µs, `adaptive`; median of the runs (95 % bootstrap "
           "interval of the median). Ratio: to the one-core reference of the same MPI (interval of the "
           "ratio of medians); the target is the hinted ratio at most "
           f"{TARGET:g} (met only when the whole interval is).", "",
           "| MPI | configuration | n | µs | ratio to one core |",
           "|---|---|---:|---:|---:|"]
    checks = []
    reference = "one-core" if "one-core" in set(df["config"]) else "native_up"
    for mpi in sorted(df["mpi"].unique()):
        ref = values(df, mpi=mpi, config=reference)
        for config, label in PINGPONG_CONFIGS:
            v = values(df, mpi=mpi, config=config)
            r, ci = ratio_cell(v, ref) if config != reference else ("1", None)
            out.append(f"| {mpi} | {label} | {len(v)} | {cell(v)} | {r} |")
            if config.endswith("-hints") and v and ref:
                med = float(np.median(v) / np.median(ref))
                side = "met" if med <= TARGET else "not met"
                verdict = (f"{side} on the median (too few runs for an interval)" if ci is None
                           else "met" if ci[1] <= TARGET else "not met" if ci[0] > TARGET
                           else f"{side} on the median, the interval spans the target")
                checks.append(f"- {mpi}, {config}: {fmt(med)}× one core: **{verdict}**")
    hint_gain = []
    for mpi in sorted(df["mpi"].unique()):
        for base in ("one-cpu", "two-cpus"):
            r, _ = ratio_cell(values(df, mpi=mpi, config=base),
                              values(df, mpi=mpi, config=base + "-hints"))
            hint_gain.append(f"{mpi} {base}: {r}")
    out += ["", "Target (hinted ≤ 2× one core):", "", *checks, "",
            "Without hints over with hints (how many times faster the hints make it): "
            + "; ".join(hint_gain) + "."]
    return out


def pressure_section(df) -> list[str]:
    df = df[df["metric"] == "time"]
    out = ["## Pressure (experiments/s4-hints-pressure.toml)", "",
           "`time` in s (the mean over the co-running jobs of a run), `adaptive`, MPICH; "
           "median of the runs (95 % bootstrap interval). Ratio: hinted over not hinted "
           "(below 1: hints faster), interval of the ratio of medians.", "",
           "| slicing | domains | workload | no hints | hints | ratio | cosched | ratio |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    bases = sorted({c for c in df["config"].unique()
                    if not c.endswith(("-hints", "-cosched"))},
                   key=lambda c: (c.split("-")[0], c))
    for base in bases:
        slicing, rest = base.split("-", 1)
        for workload in sorted(df["workload"].unique()):
            plain = values(df, config=base, workload=workload)
            hinted = values(df, config=base + "-hints", workload=workload)
            cos = values(df, config=base + "-cosched", workload=workload)
            r1, _ = ratio_cell(hinted, plain)
            r2, _ = ratio_cell(cos, plain) if cos else ("—", None)
            out.append(f"| {slicing} | {rest} | {workload} | {cell(plain)} | {cell(hinted)} | "
                       f"{r1} | {cell(cos) if cos else '—'} | {r2} |")
    return out


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=paths.REPO,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=paths.REPO, capture_output=True, text=True).stdout.strip()
        return rev + (" (uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write(pingpong: Path, pressure: Path | None, load: Path | None, out: Path) -> str:
    pp, pp_counts = ok_runs(pingpong)
    lines = ["# Issue 14: the lab's hint-driven slicer, measured", "",
             "Written by `make s4-hints` (`python -m vhpc.lab.hints_report`); do not edit by "
             f"hand. Commit {git_revision()}, "
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. The runs are in "
             f"`{pingpong.name}/`" + (f" and `{pressure.name}/`" if pressure else "") +
             " under `results/`; figures and the full statistics per experiment in "
             "[s4-hints/](s4-hints/).", "",
             f"Ping-pong runs: {pp_counts}."]
    if load is not None and load.exists():
        lines += ["", "Load average (`/proc/loadavg`; 2 vCPUs shared with other jobs) at each "
                  "step of the run:", "", "```", load.read_text().strip(), "```"]
    lines += ["", *pingpong_section(pp)]
    if pressure is not None and pressure.exists():
        pr, pr_counts = ok_runs(pressure)
        lines += ["", f"Pressure runs: {pr_counts}.", "", *pressure_section(pr)]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pingpong", type=Path)
    ap.add_argument("pressure", type=Path, nargs="?")
    ap.add_argument("--load", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    print(write(args.pingpong, args.pressure, args.load, args.out))


if __name__ == "__main__":
    main()
