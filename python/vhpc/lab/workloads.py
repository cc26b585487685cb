"""What a workload runs and how its output becomes metrics `{name: (value, unit)}`.

Three parsers: `pingpong` (CSV test,size,iters,usec,MBps), `kernel` (the bench
kernels' CSV metric,value,unit, failed unless `verified` is 1) and `hpcc` (the
Debian HPC Challenge package: key=value lines of hpccoutf.txt's summary).

Output that cannot be read fails the run (RunFailed); output that reads but
cannot be trusted makes it invalid (Invalid): a metric printed twice, a value
that is not finite, a negative time, rate or count (`problems`).
"""

from __future__ import annotations

import csv
import io
import math
import re
import shutil
from pathlib import Path

from vhpc import paths
from vhpc.lab.experiment import Workload

Metrics = dict[str, tuple[float, str]]
HPCC_OUTPUT = "hpccoutf.txt"
HPCC_INPUT = "hpccinf.txt"


HPCC_OUTPUT_LIMIT = 16 << 20  # bytes of hpccoutf.txt read (a normal one is ~30 KB)
MAX_METRICS = 10_000
MAX_NAME = 200
#: Units of quantities that cannot be negative: times, rates (anything per second), counts.
NON_NEGATIVE_UNITS = ("s", "us", "count", "bool")


class RunFailed(ValueError):
    """The program ran but its output says it failed (or cannot be read)."""


class Invalid(ValueError):
    """The output reads, but its figures cannot be trusted (stored as status `invalid`)."""


def non_negative(unit: str) -> bool:
    return unit in NON_NEGATIVE_UNITS or unit.endswith("/s")


def problems(metrics: Metrics) -> list[str]:
    """Why these metrics cannot be stored as ok: non-finite, or negative where the unit forbids."""
    found = []
    if len(metrics) > MAX_METRICS:
        found.append(f"{len(metrics)} metrics, more than {MAX_METRICS}")
    for name, (value, unit) in metrics.items():
        if len(name) > MAX_NAME:
            found.append(f"metric name of {len(name)} characters ({name[:40]}...)")
        elif not math.isfinite(value):
            found.append(f"{name} = {value} is not finite")
        elif value < 0 and non_negative(unit):
            found.append(f"{name} = {value:g} {unit} is negative")
    return found


def put(metrics: Metrics, name: str, value: float, unit: str) -> None:
    """Add a metric; one printed twice makes the run invalid rather than keep either value."""
    if name in metrics:
        raise Invalid(f"metric {name} printed twice ({metrics[name][0]:g}, then {value:g})")
    metrics[name] = (value, unit)


def csv_rows(text: str, parser: str):
    try:
        yield from csv.DictReader(io.StringIO(text))
    except csv.Error as exc:
        raise RunFailed(f"{parser} output is not CSV: {exc}") from exc


def bench_binary(program: str, mpi: str) -> Path:
    return paths.build_dir() / "bench" / mpi / program


def argv(w: Workload, mpi: str) -> list[str]:
    head = [str(bench_binary(w.program, mpi))] if w.program else list(w.command)
    return [*head, *w.args]


def unavailable(w: Workload, mpi: str) -> str | None:
    """Why this workload cannot run with this MPI here, or None."""
    if w.program is not None:
        binary = bench_binary(w.program, mpi)
        return None if binary.is_file() else f"{binary} not built (run `make -C bench`)"
    if w.parser == "hpcc":
        if shutil.which(w.command[0]) is None:
            return f"`{w.command[0]}` not found: apt-get install hpcc"
        if mpi != "openmpi":
            return "Debian's hpcc is linked against Open MPI: use mpis = [\"openmpi\"]"
    elif shutil.which(w.command[0]) is None:
        return f"`{w.command[0]}` not found on PATH"
    return None


def prepare(w: Workload, workdir: Path) -> None:
    """Write the input files the program expects in its working directory."""
    if w.parser == "hpcc":
        (workdir / HPCC_INPUT).write_text(hpcc_input(w.ranks))


def parse(w: Workload, stdout: str, workdir: Path) -> Metrics:
    if w.output_parser == "pingpong":
        return parse_pingpong(stdout)
    if w.output_parser == "kernel":
        return parse_kernel(stdout)
    out = workdir / HPCC_OUTPUT
    if not out.is_file():
        raise RunFailed(f"hpcc wrote no {HPCC_OUTPUT}")
    with open(out, "rb") as f:
        data = f.read(HPCC_OUTPUT_LIMIT + 1)
    if len(data) > HPCC_OUTPUT_LIMIT:
        raise RunFailed(f"{HPCC_OUTPUT} is over {HPCC_OUTPUT_LIMIT >> 20} MiB")
    return parse_hpcc(data.decode("utf-8", errors="replace"))


def bad_row(parser: str, row: dict, exc: Exception) -> RunFailed:
    return RunFailed(f"bad {parser} row {str(row)[:200]}: {str(exc)[:200]}")


def parse_pingpong(text: str) -> Metrics:
    """lat, fresh and exch rows give `<test>_<size>_us` (a half round trip, an
    exchange), bw and bibw rows `<test>_<size>_MBps`."""
    metrics: Metrics = {}
    for row in csv_rows(text, "pingpong"):
        try:
            test, size = row["test"], int(row["size"])
            if size < 0:
                raise ValueError(f"negative size {size}")
            if test in ("lat", "fresh", "exch"):
                value, name, unit = float(row["usec"]), f"{test}_{size}_us", "us"
            else:
                value, name, unit = float(row["MBps"]), f"{test}_{size}_MBps", "MB/s"
        except (KeyError, TypeError, ValueError) as exc:
            raise bad_row("pingpong", row, exc) from exc
        put(metrics, name, value, unit)
    if not metrics:
        raise RunFailed(f"no pingpong rows in output: {text[-200:]!r}")
    return metrics


def parse_kernel(text: str) -> Metrics:
    metrics: Metrics = {}
    for row in csv_rows(text, "kernel"):
        try:
            name, value, unit = row["metric"], float(row["value"]), row["unit"]
            if not isinstance(name, str) or not isinstance(unit, str):
                raise ValueError("missing field")
        except (KeyError, TypeError, ValueError) as exc:
            raise bad_row("kernel", row, exc) from exc
        put(metrics, name, value, unit)
    if "verified" not in metrics:
        raise RunFailed(f"no `verified` row in output: {text[-200:]!r}")
    if metrics["verified"][0] != 1:
        raise RunFailed("the kernel's result failed its own verification (verified != 1)")
    return metrics


HPCC_UNITS = (("_Tflops", "Tflop/s"), ("_GFlops", "Gflop/s"), ("_GBs", "GB/s"),
              ("_GUPs", "GUP/s"), ("_usec", "us"), ("_time", "s"))
HPCC_STREAM = re.compile(r"STREAM_(Copy|Scale|Add|Triad)$")


def hpcc_unit(key: str) -> str:
    for suffix, unit in HPCC_UNITS:
        if key.endswith(suffix):
            return unit
    return "GB/s" if HPCC_STREAM.search(key) else ""


def parse_hpcc(text: str) -> Metrics:
    """Numeric key=value lines between hpcc's summary markers; a `Failure` flag fails the run."""
    summary = text.partition("Begin of Summary section.")[2].partition("End of Summary section.")[0]
    metrics: Metrics = {}
    for line in summary.splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep:
            continue
        try:
            number = float(value)
        except ValueError:
            continue  # text fields (versions, dates)
        put(metrics, key, number, hpcc_unit(key))
    if not metrics:
        raise RunFailed("no summary section in hpccoutf.txt")
    if metrics.get("Failure", (0.0, ""))[0] != 0:
        raise RunFailed("hpcc reports a failed verification (Failure != 0)")
    return metrics


def hpcc_input(ranks: int, n: int = 1000) -> str:
    """A small hpccinf.txt: one HPL problem of size n on a 1 × ranks process grid."""
    return f"""HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
1            Ps
{ranks}      Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200 10000 30000                values of N
0                               number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64        values of NB
"""
