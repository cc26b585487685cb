"""The simulator's whole-run benchmark: `make bench-sim` (docs/sim-bench.md).

Measures, side by side in one run, what the issue sets targets for:

* the wall time of `vhpc reproduce s0 --json` as a user runs it (a fresh
  process: interpreter start, imports, every S0 simulation, JSON out);
* the 48-core, 192-domain scale scenario (scenarios/scale-credit-48c-192dom.toml)
  for one simulated hour: wall time, events handled, events per second and
  peak RSS, each run a fresh process of the release example
  `target/release/examples/run`;
* memory flatness: the same scenario cut to 60 s and 600 s simulated, peak
  RSS side by side with the hour;
* the scale scenario with the NUMA memory model on (`[memory]`, memory-aware
  compute; issue 13), 600 s simulated, its events/s against the credit-only
  engine's on the plain scenario;
* earlier engines side by side, in the same rounds: the credit-only engine
  (bb67a65) and the previous revision's (2c4114c) on the scale scenario at
  600 s simulated, and `vhpc reproduce s0` of the previous revision (its
  Python with its extension). Each is built once from git into
  ~/.cache/vhpc/sim-baseline/<commit>, without profile-guided optimisation
  (RUSTFLAGS dropped); this revision's engine is built as `make bench-sim`
  builds it (with the PGO profile of scripts/pgo-profile.sh), which the
  report's header states.

The machine is noisy, so every measurement runs `reps` times, in a shuffled
order each round, and the table shows medians with min–max. Peak RSS comes
from GNU time (`/usr/bin/time -f %M`). If `cargo bench -p vhpc-sim --bench engine`
ran before (make bench-sim runs it first), its criterion estimates are read
from target/criterion and shown too.

    .venv/bin/python -m vhpc.sim.bench [--reps 5] [--out docs/sim-bench.md]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import tomli_w
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vhpc import paths, provenance
from vhpc.host import placement
from vhpc.host.load import BUSY_LOAD, cpu_times, steal_percent

COMMAND = "make bench-sim"
SEED = 20240601
REPS = 5
RUN_TIMEOUT_S = 600.0

SCALE_FILE = "scale-credit-48c-192dom.toml"
#: Simulated seconds of the scale runs; the last is the issue's hour.
SCALE_LIMITS_S = (60, 600, 3600)
HOUR_S = 3600

# The targets (issue 15, "a faster engine").
TARGET_EVENTS_PER_S = 20e6
TARGET_REPRODUCE_S = 2.0
TARGET_HOUR_WALL_S = 10.0
#: "Flat": the hour's peak RSS at most this much above the 60 s run's.
FLAT_RATIO = 1.10

#: Simulated seconds of the side-by-side scale runs (one of SCALE_LIMITS_S).
BASELINE_LIMIT_S = 600


@dataclass(frozen=True)
class Reference:
    """An earlier revision's engine, built from git into the cache and run in
    the same shuffled rounds (its cells are keyed `key` and `key:reproduce`)."""

    key: str
    rev: str
    what: str
    #: The verdict: events/s now ≥ this × its on the scale scenario (None: the
    #: ratio is shown, no verdict).
    min_ratio: float | None
    #: Whether its own `vhpc reproduce s0` (its Python and extension) runs too.
    reproduce: bool


#: The engine before the `linux` and `slicer` models (docs/sim-bench.md of
#: 2026-11-22 was measured on it): the "credit-only figure" the engine must
#: stay within 10 % of.
BASELINE = Reference("baseline", "bb67a65", "the credit-only engine", 0.90, False)
#: The previous revision (main before the engine-speed2 branch, which folds
#: futile yields): the speed-up shown. Its `vhpc reproduce s0` has today's
#: seeds rule, so it is compared with today's at its defaults.
PREVIOUS = Reference("previous", "2c4114c", "the previous revision's engine", None, True)
REFERENCES = (BASELINE, PREVIOUS)

#: cargo bench -p vhpc-sim --bench engine (crates/vhpc-sim/benches/engine.rs):
#: criterion id -> description. Whole runs first, then the queue alone.
CRITERION_RUNS = {
    "pingpong_busy_poll_credit_2c/run": "busy_poll ping-pong, 1 VM, 2 vCPUs pinned to 2 cores, Credit",
    "pressure_hv_yield_lu_w/run": "S0 pressure shape: 2 domUs, npb.lu class W, hv_yield, Credit",
    "scale_credit_48c_192dom_3s/run": "scale scenario cut to 3 simulated seconds",
}
CRITERION_QUEUE = {
    f"event_queue_hold/pending_{n}": f"EventQueue alone: pop + push with {n} pending" for n in (16, 256, 4096)
}


class BenchError(RuntimeError):
    """The benchmark cannot run (example binary missing and not buildable)."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Sample:
    """One finished process: wall seconds, peak RSS (KiB) and what it printed."""

    wall_s: float
    maxrss_kib: int
    stdout: str


@dataclass
class Cell:
    """Samples of one measurement and what went wrong in the other runs."""

    wall_s: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    simulated_s: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: The round of each sample (side-by-side ratios pair runs of one round).
    rounds: list[int] = field(default_factory=list)

    @property
    def events_per_s(self) -> list[float]:
        return [e / w for e, w in zip(self.events, self.wall_s) if w > 0]


# ---------------------------------------------------------------- running


#: GNU time: reports the peak RSS of the process it starts. Measuring from
#: here instead (os.wait4) would count this Python process too: a child's
#: ru_maxrss keeps the high-water mark of the image it was forked from.
GNU_TIME = Path("/usr/bin/time")


def rss_method() -> str:
    if GNU_TIME.is_file():
        return "Peak RSS is the process's own peak resident set, from `/usr/bin/time -f %M`."
    return ("Peak RSS is `ru_maxrss` from os.wait4 (/usr/bin/time is missing): it includes the "
            "benchmark's Python process, whose image the child was forked from.")


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_measured(argv: list[str], timeout_s: float = RUN_TIMEOUT_S,
                 env: dict[str, str] | None = None) -> tuple[Sample | None, str]:
    """Run `argv` as a fresh process (with `env` added to the environment);
    its wall time, peak RSS and stdout, or None and why it failed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r", prefix="vhpc-rss-") as rss:
        cmd = [str(GNU_TIME), "-f", "%M", "-o", rss.name, *argv] if GNU_TIME.is_file() else argv
        start = time.perf_counter()
        # A session of its own: a timeout kills GNU time and the program under it.
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **(env or {})})
        timer = threading.Timer(timeout_s, kill_group, (proc.pid,))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # Ctrl-C does not reach the child's session: stop it here
            kill_group(proc.pid)
            proc.wait()
            raise
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        maxrss = usage.ru_maxrss  # KiB on Linux
        if GNU_TIME.is_file():
            lines = rss.read().split()
            maxrss = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    if proc.returncode != 0:
        if wall >= timeout_s:
            return None, "timeout"
        last = stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        return None, f"exit code {proc.returncode}: {last[0][:200]}"
    return Sample(wall, maxrss, stdout), ""


def venv_bin(name: str) -> Path:
    return Path(sys.executable).parent / name


def reproduce_command() -> tuple[list[str], str]:
    """`vhpc reproduce s0 --json`, or the Python call if the CLI has no such command."""
    vhpc = venv_bin("vhpc")
    if not vhpc.is_file() and (found := shutil.which("vhpc")):
        vhpc = Path(found)
    probe = subprocess.run([str(vhpc), "reproduce", "s0", "--help"], capture_output=True, text=True) \
        if vhpc.is_file() else None
    if probe is not None and probe.returncode == 0:
        return [str(vhpc), "reproduce", "s0", "--json"], "`vhpc reproduce s0 --json > /dev/null`"
    code = "from vhpc import reproduce; reproduce.run_s0()"
    return ([sys.executable, "-c", code],
            f"`python -c \"{code}\"` (the CLI has no `reproduce s0` yet: the Python call instead)")


def cargo() -> str:
    return shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")


def example_binary() -> Path:
    """target/release/examples/run, built (or brought up to date) with cargo if cargo is there."""
    binary = paths.REPO / "target" / "release" / "examples" / "run"
    if Path(cargo()).is_file():
        cmd = [cargo(), "build", "--quiet", "--release", "-p", "vhpc-sim", "--example", "run"]
        proc = subprocess.run(cmd, cwd=paths.REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BenchError(f"`{' '.join(cmd)}` failed:\n{proc.stdout}{proc.stderr}")
    if not binary.is_file():
        raise BenchError(f"{binary} is missing and cargo was not found to build it "
                         "(cargo build --release -p vhpc-sim --example run)")
    return binary


def build_mode() -> str:
    """How this revision's engine was built: with the PGO profile (RUSTFLAGS
    from `make bench-sim`) or plain."""
    flags = os.environ.get("RUSTFLAGS", "")
    if "-Cprofile-use=" in flags:
        return (f"profile-guided (RUSTFLAGS `{flags.replace(str(paths.REPO) + '/', '')}`, "
                "profile from scripts/pgo-profile.sh; the earlier engines without)")
    return "plain release build (no PGO profile; `make bench-sim` uses one)"


def reference_tree(rev: str) -> tuple[Path | None, str]:
    """~/.cache/vhpc/sim-baseline/<commit>, with the sources of git revision
    `rev` in src/ (extracted once); (None, why) when it cannot be had."""
    git = ["git", "-C", str(paths.REPO)]
    found = subprocess.run([*git, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        return None, f"revision {rev} is not in this clone's history"
    commit = found.stdout.strip()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    root = cache / "vhpc" / "sim-baseline" / commit
    src = root / "src"
    if (src / "Cargo.toml").is_file():
        return root, ""
    src.mkdir(parents=True, exist_ok=True)
    return root, build_step(root, f"{' '.join(git)} archive {commit} | tar -x -C {src}", None)


def build_step(root: Path, command: str, cwd: Path | None) -> str:
    """Run one build command for the tree at `root` (its own target dir); why it failed, or ''."""
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd,
                          capture_output=True, text=True,
                          env={**{k: v for k, v in os.environ.items() if k != "RUSTFLAGS"},
                               "CARGO_TARGET_DIR": str(root / "target"),
                               "PYO3_PYTHON": sys.executable})
    if proc.returncode != 0:
        return f"`{command}` failed: {(proc.stderr or proc.stdout).strip()[-300:]}"
    return ""


def baseline_binary(rev: str = BASELINE.rev) -> tuple[Path | None, str]:
    """The release example `run` of the engine at git revision `rev`, built once
    into the cache (reference_tree); (None, why) when it cannot be had."""
    root, problem = reference_tree(rev)
    if root is None or problem:
        return None, problem
    binary = root / "target" / "release" / "examples" / "run"
    if not binary.is_file():
        command = f"{cargo()} build --quiet --release -p vhpc-sim --example run"
        if problem := build_step(root, command, root / "src"):
            return None, problem
    return binary, ""


def reference_python(rev: str) -> tuple[Path | None, str]:
    """The python/ directory of revision `rev` with its own native extension
    (vhpc._core built from its crates, once, into the cache): put first on
    PYTHONPATH, this interpreter runs that revision's vhpc. (None, why) when
    it cannot be had."""
    root, problem = reference_tree(rev)
    if root is None or problem:
        return None, problem
    python = root / "src" / "python"
    extension = python / "vhpc" / "_core.abi3.so"
    if not extension.is_file():
        command = (f"{cargo()} build --quiet --release -p vhpc-py --features extension-module "
                   f"&& cp {root / 'target' / 'release' / 'lib_core.so'} {extension}")
        if problem := build_step(root, command, root / "src"):
            return None, problem
    return python, ""


def scale_files(directory: Path) -> dict[int, Path]:
    """The scale scenario with limit_ms set to each of SCALE_LIMITS_S."""
    source = paths.REPO / "scenarios" / SCALE_FILE
    try:
        base = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BenchError(f"{source}: {exc}") from exc
    files = {}
    for limit_s in SCALE_LIMITS_S:
        path = directory / f"scale-{limit_s}s.toml"
        path.write_text(tomli_w.dumps({**base, "limit_ms": limit_s * 1000}), encoding="utf-8")
        files[limit_s] = path
    return files


#: The scale scenario with the NUMA memory model on (issue 13: engine speed with
#: the memory model within 20 % of the credit-only figure): first-touch placement,
#: every rank's 1 ms compute half memory stalls over a 64 MiB footprint, the
#: host's four nodes at their defaults (crates/vhpc-sim/src/host.rs), joined in a
#: square of 4000 MB/s links (the Opteron preset's), and hardware-assisted paging
#: on: every cost of the model is exercised.
NUMA = "numa"
NUMA_MIN_RATIO = 0.80


def numa_scale_file(directory: Path) -> Path:
    """The scale scenario at BASELINE_LIMIT_S with `[memory]` and memory-aware jobs."""
    source = paths.REPO / "scenarios" / SCALE_FILE
    try:
        base = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BenchError(f"{source}: {exc}") from exc
    base["limit_ms"] = BASELINE_LIMIT_S * 1000
    base["name"] = base.get("name", "scale") + "-numa"
    base["memory"] = {"placement": "first_touch"}
    base["host"]["links"] = [{"nodes": list(pair), "bandwidth_mb_s": 4000}
                             for pair in ((0, 1), (0, 2), (1, 3), (2, 3))]
    base["host"]["hap"] = True
    for job in base["jobs"]:
        job.setdefault("params", {}).update({"mem_intensity_ppm": 500_000, "footprint_mib": 64})
    path = directory / f"scale-numa-{BASELINE_LIMIT_S}s.toml"
    path.write_text(tomli_w.dumps(base), encoding="utf-8")
    return path


def numa_check(cells: dict) -> dict:
    """Events/s of the scale scenario with the memory model against the credit-only
    engine's (BASELINE) on the plain one, and against today's plain run, same rounds."""
    what = (f"memory model on within {1 - NUMA_MIN_RATIO:.0%} of {BASELINE.what} "
            f"({BASELINE.rev}): median events/s of the scale scenario with [memory], "
            f"{BASELINE_LIMIT_S} s simulated, ≥ {NUMA_MIN_RATIO:.2f} × its on the plain one")
    numa, base, plain = cells.get(NUMA), cells.get(BASELINE.key), cells[BASELINE_LIMIT_S]
    if numa is None or not numa.events_per_s:
        return check(what, None, (problems_of(numa) if numa else "") or "no figures")
    m = median(numa.events_per_s)
    against_plain = (f"; {m / median(plain.events_per_s):.3f} × today's plain run "
                     f"({median(plain.events_per_s) / 1e6:.1f} M/s)" if plain.events_per_s else "")
    if base is None or not base.events_per_s:
        return check(what, None, f"now {m / 1e6:.1f} M/s{against_plain}; "
                                 f"{problems_of(base) if base else 'no baseline'}")
    ratio = m / median(base.events_per_s)
    return check(what, ratio >= NUMA_MIN_RATIO,
                 f"ratio {ratio:.3f}{ratio_note(per_round_ratios(numa, base, events_per_s))} "
                 f"(with [memory] {m / 1e6:.1f} M/s, {BASELINE.rev} "
                 f"{median(base.events_per_s) / 1e6:.1f} M/s){against_plain}")


REPRODUCE = "reproduce"
#: `vhpc reproduce s0 --seeds 3`: every cell 3 seeds (the default before the
#: seeds rule), a fixed amount of work whatever the seeds rule decides.
REPRODUCE_3 = "reproduce-3-seeds"
SAME_WORK = ["--seeds", "3"]


@dataclass
class Job:
    """One measurement: the process to start, and whether it prints a scale
    report (JSON, events read) or is `vhpc reproduce s0` (wall and RSS only)."""

    label: str
    argv: list[str]
    scale: bool
    env: dict[str, str] | None = None


def record(cell: Cell, rnd: int, job: Job, sample: Sample | None, problem: str) -> None:
    if sample is None:
        cell.problems.append(problem)
        return
    if job.scale:
        try:
            report = json.loads(sample.stdout)
        except json.JSONDecodeError as exc:
            cell.problems.append(f"unreadable report: {exc}")
            return
        cell.events.append(int(report["events"]))
        cell.simulated_s.append(report["end_ns"] / 1e9)
    cell.wall_s.append(sample.wall_s)
    cell.rss_kib.append(sample.maxrss_kib)
    cell.rounds.append(rnd)


def reproduce_key(ref: Reference) -> str:
    return f"{ref.key}:{REPRODUCE}"


def current_jobs(reproduce_argv: list[str], binary: Path, files: dict[int, Path]) -> dict:
    jobs: dict = {REPRODUCE: Job("vhpc reproduce s0", reproduce_argv, scale=False),
                  REPRODUCE_3: Job("vhpc reproduce s0 --seeds 3", reproduce_argv + SAME_WORK,
                                   scale=False)}
    for limit_s in SCALE_LIMITS_S:
        jobs[limit_s] = Job(f"scale, {limit_s} s simulated", [str(binary), str(files[limit_s])],
                            scale=True)
    return jobs


def reference_jobs(ref: Reference, scale_file: Path) -> tuple[dict, dict[str, str]]:
    """The jobs of an earlier revision, and why those that cannot run cannot (by key)."""
    jobs, missing = {}, {}
    binary, problem = baseline_binary(ref.rev)
    if binary is None:
        missing[ref.key] = problem
    else:
        jobs[ref.key] = Job(f"scale, {BASELINE_LIMIT_S} s simulated, engine at {ref.rev}",
                            [str(binary), str(scale_file)], scale=True)
    if ref.reproduce:
        python, problem = reference_python(ref.rev)
        if python is None:
            missing[reproduce_key(ref)] = problem
        else:
            code = "from vhpc.cli import main; main()"
            jobs[reproduce_key(ref)] = Job(
                f"vhpc reproduce s0 at {ref.rev}",
                [sys.executable, "-c", code, "reproduce", "s0", "--json"], scale=False,
                env={"PYTHONPATH": str(python)})
    return jobs, missing


def measure_all(reps: int, jobs: dict, console: Console) -> dict:
    """Samples per job; every round runs each job once, in a seeded shuffled order."""
    keys = list(jobs)
    cells: dict = {key: Cell() for key in keys}
    rng = random.Random(SEED)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[now]}"))
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("sim bench", total=len(keys) * reps, now="")
        for rep in range(reps):
            order = keys[:]
            rng.shuffle(order)
            for key in order:
                job = jobs[key]
                progress.update(task, description=f"round {rep + 1}/{reps}", now=job.label)
                record(cells[key], rep, job, *run_measured(job.argv, env=job.env))
                progress.advance(task)
    return cells


# ---------------------------------------------------------------- criterion


def criterion_estimates() -> list[dict]:
    """The engine bench's last criterion estimates (median time per iteration), if any."""
    root = paths.REPO / "target" / "criterion"
    rows = []
    for bench_id, what in {**CRITERION_RUNS, **CRITERION_QUEUE}.items():
        new = root / bench_id / "new"
        try:
            estimates = json.loads((new / "estimates.json").read_text())
            meta = json.loads((new / "benchmark.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        elements = (meta.get("throughput") or {}).get("Elements")
        median_ns = estimates["median"]["point_estimate"]
        when = datetime.fromtimestamp((new / "estimates.json").stat().st_mtime, timezone.utc)
        rows.append({"id": bench_id, "what": what, "median_ns": median_ns, "elements": elements,
                     "per_s": elements / (median_ns / 1e9) if elements else None,
                     "whole_run": bench_id in CRITERION_RUNS, "when": when})
    return rows


# ---------------------------------------------------------------- targets


def check(what: str, met: bool | None, detail: str) -> dict:
    return {"what": what, "met": met, "detail": detail}


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def target_checks(cells: dict) -> list[dict]:
    hour = cells[HOUR_S]
    checks = []

    what = (f"engine ≥ {TARGET_EVENTS_PER_S / 1e6:.0f} M events/s on the scale scenario "
            "(whole process, one simulated hour)")
    if (m := median(hour.events_per_s)) is None:
        checks.append(check(what, False if hour.problems else None, problems_of(hour) or "no figures"))
    else:
        shorter = "; ".join(f"{s} s simulated: {median(cells[s].events_per_s) / 1e6:.1f} M/s"
                            for s in SCALE_LIMITS_S if s != HOUR_S and cells[s].events_per_s)
        checks.append(check(what, m >= TARGET_EVENTS_PER_S and not hour.problems,
                            f"median {m / 1e6:.1f} M/s "
                            f"({fmt_range([r / 1e6 for r in hour.events_per_s], '.1f')} M/s); "
                            f"{shorter}{problem_note(hour)}"))

    rep = cells[REPRODUCE]
    what = f"`vhpc reproduce s0` < {TARGET_REPRODUCE_S:.0f} s wall"
    if (m := median(rep.wall_s)) is None:
        checks.append(check(what, False if rep.problems else None, problems_of(rep) or "no figures"))
    else:
        checks.append(check(what, m < TARGET_REPRODUCE_S and not rep.problems,
                            f"median {m:.2f} s ({fmt_range(rep.wall_s, '.2f')} s){problem_note(rep)}"))

    what = (f"scale (48 cores, 192 domains), one simulated hour < {TARGET_HOUR_WALL_S:.0f} s wall")
    if (m := median(hour.wall_s)) is None:
        checks.append(check(what, False if hour.problems else None, problems_of(hour) or "no figures"))
    else:
        whole = all(s >= HOUR_S for s in hour.simulated_s)
        note = "" if whole else f"; stopped early at {min(hour.simulated_s):.0f} s simulated"
        checks.append(check(what, m < TARGET_HOUR_WALL_S and whole and not hour.problems,
                            f"median {m:.1f} s ({fmt_range(hour.wall_s, '.1f')} s){note}"
                            f"{problem_note(hour)}"))

    checks += [reference_check(cells, ref) for ref in REFERENCES if ref.min_ratio is not None]
    if NUMA in cells:
        checks.append(numa_check(cells))

    first, last = cells[SCALE_LIMITS_S[0]], hour
    what = (f"memory flat in the simulated duration: peak RSS at {HOUR_S} s ≤ "
            f"{FLAT_RATIO:.2f} × at {SCALE_LIMITS_S[0]} s simulated")
    if not first.rss_kib or not last.rss_kib:
        checks.append(check(what, None, "no figures"))
    else:
        ratio = median(last.rss_kib) / median(first.rss_kib)
        sizes = ", ".join(f"{s} s: {mib(median(cells[s].rss_kib))} MiB"
                          for s in SCALE_LIMITS_S if cells[s].rss_kib)
        checks.append(check(what, ratio <= FLAT_RATIO, f"ratio {ratio:.3f} ({sizes})"))
    return checks


def per_round_ratios(num: Cell, den: Cell, values) -> list[float]:
    """values(num) / values(den) for every round in which both ran."""
    theirs = dict(zip(den.rounds, values(den)))
    return [v / theirs[r] for r, v in zip(num.rounds, values(num)) if theirs.get(r)]


def events_per_s(cell: Cell) -> list[float]:
    return cell.events_per_s


def wall_s(cell: Cell) -> list[float]:
    return cell.wall_s


def ratio_note(ratios: list[float]) -> str:
    return f"; per round {fmt_range(ratios, '.3f')}" if ratios else ""


def reference_check(cells: dict, ref: Reference) -> dict:
    """Events per second now against the engine at `ref.rev`, same file, same rounds."""
    assert ref.min_ratio is not None
    what = (f"engine within {1 - ref.min_ratio:.0%} of {ref.what} ({ref.rev}): "
            f"median events/s on the scale scenario, {BASELINE_LIMIT_S} s simulated, "
            f"side by side, ≥ {ref.min_ratio:.2f} × its")
    base, now = cells.get(ref.key), cells[BASELINE_LIMIT_S]
    if base is None or not base.events_per_s or not now.events_per_s:
        return check(what, None, (problems_of(base) if base else "") or "no figures")
    ratio = median(now.events_per_s) / median(base.events_per_s)
    return check(what, ratio >= ref.min_ratio,
                 f"ratio {ratio:.3f}{ratio_note(per_round_ratios(now, base, events_per_s))} "
                 f"(now {median(now.events_per_s) / 1e6:.1f} M/s, "
                 f"{ref.rev} {median(base.events_per_s) / 1e6:.1f} M/s)")


def side_by_side_rows(cells: dict) -> list[tuple[str, ...]]:
    """Now against every earlier revision measured: scale events/s (now / then)
    and `vhpc reproduce s0` wall (then / now), ratio of medians and per round."""
    rows = []
    now = cells[BASELINE_LIMIT_S]
    for ref in REFERENCES:
        pairs = [(f"scale, {BASELINE_LIMIT_S} s simulated: M events/s", now, cells.get(ref.key),
                  events_per_s, 1e-6, False)]
        if ref.reproduce:
            pairs.append(("`vhpc reproduce s0` at its defaults (the same seeds rule): wall s",
                          cells[REPRODUCE], cells.get(reproduce_key(ref)), wall_s, 1.0, True))
        for what, mine, theirs, values, unit, inverse in pairs:
            rows.append(side_by_side_row(ref, what, mine, theirs, values, unit, inverse))
    return rows


def side_by_side_row(ref: Reference, what: str, mine: Cell, theirs: Cell | None, values,
                     unit: float, inverse: bool) -> tuple[str, ...]:
    def shown(v: float) -> str:
        return f"{v * unit:.2f}"

    if theirs is None or not values(theirs) or not values(mine):
        why = problems_of(theirs) if theirs else "not measured"
        return (f"`{ref.rev}`", what, fmt_cell(values(mine), shown), "—", "—", why or "no figures")
    num, den = (theirs, mine) if inverse else (mine, theirs)
    ratio = median(values(num)) / median(values(den))
    per_round = per_round_ratios(num, den, values)
    return (f"`{ref.rev}`", what, fmt_cell(values(mine), shown), fmt_cell(values(theirs), shown),
            f"{ratio:.2f}", fmt_range(per_round, ".2f") if per_round else "—")


def problems_of(cell: Cell) -> str:
    if not cell.problems:
        return ""
    distinct = sorted(set(cell.problems))
    return f"{len(cell.problems)} runs failed: " + "; ".join(distinct)[:300]


def problem_note(cell: Cell) -> str:
    return f"; {problems_of(cell)}" if cell.problems else ""


def check_line(c: dict) -> str:
    verdict = {True: "met", False: "NOT met", None: "not evaluated"}[c["met"]]
    return f"{c['what']}: {verdict} — {c['detail']}"


# ---------------------------------------------------------------- output


def mib(kib: float | None) -> str:
    return "—" if kib is None else f"{kib / 1024:.1f}"


def fmt_range(values: list[float], spec: str) -> str:
    return f"{format(min(values), spec)}–{format(max(values), spec)}"


def fmt_cell(values: list[float], fmt) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{fmt(values[0])} (1 run)"
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def fmt_events(values: list[int]) -> str:
    if not values:
        return "—"
    if len(set(values)) == 1:  # deterministic: every run handles the same events
        return f"{values[0]:,}"
    return fmt_cell(values, lambda v: f"{v:,.0f}")


HEADERS = ("run", "wall s", "events", "M events/s", "peak RSS MiB", "note")


def default_seeds() -> str:
    from vhpc.sim.reproduce import s0

    return (f"{len(s0.SEEDS)} seeds a cell, more until each mean is within "
            f"±{s0.PRECISION * 100:g} %")


def table_rows(cells: dict, reproduce_label: str) -> list[tuple[str, ...]]:
    rep = cells[REPRODUCE]
    same = cells[REPRODUCE_3]
    rows = [(reproduce_label, fmt_cell(rep.wall_s, lambda v: f"{v:.2f}"), "—", "—",
             fmt_cell(rep.rss_kib, mib), problems_of(rep) or default_seeds()),
            (f"`vhpc reproduce s0 --json {' '.join(SAME_WORK)}`", fmt_cell(same.wall_s, lambda v: f"{v:.2f}"),
             "—", "—", fmt_cell(same.rss_kib, mib), problems_of(same) or "every cell 3 seeds")]
    for limit_s in SCALE_LIMITS_S:
        cell = cells[limit_s]
        name = f"`{SCALE_FILE}`, limit_ms = {limit_s * 1000}"
        rows.append(scale_row(name, cell))
    for ref in REFERENCES:
        if ref.key in cells:
            rows.append(scale_row(f"the same, limit_ms = {BASELINE_LIMIT_S * 1000}, engine at "
                                  f"`{ref.rev}`", cells[ref.key]))
        if reproduce_key(ref) in cells:
            old = cells[reproduce_key(ref)]
            rows.append((f"`vhpc reproduce s0 --json` at `{ref.rev}`",
                         fmt_cell(old.wall_s, lambda v: f"{v:.2f}"), "—", "—",
                         fmt_cell(old.rss_kib, mib), problems_of(old)))
    return rows


def scale_row(name: str, cell: Cell) -> tuple[str, ...]:
    return (name, fmt_cell(cell.wall_s, lambda v: f"{v:.2f}"), fmt_events(cell.events),
            fmt_cell(cell.events_per_s, lambda v: f"{v / 1e6:.1f}"),
            fmt_cell(cell.rss_kib, mib), problems_of(cell))


def md_table(headers: tuple[str, ...], rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines


def criterion_lines(crit: list[dict]) -> list[str]:
    if not crit:
        return ["No criterion results in target/criterion: run "
                "`cargo bench -p vhpc-sim --bench engine` first (make bench-sim does)."]
    when = min(r["when"] for r in crit).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    for r in crit:
        per_iter = r["median_ns"] / 1e6
        rows.append((f"`{r['id']}`", r["what"], f"{per_iter:.3f}",
                     f"{r['elements']:,}" if r["elements"] else "—",
                     f"{r['per_s'] / 1e6:.1f}" if r["per_s"] else "—"))
    lines = [f"`cargo bench -p vhpc-sim --bench engine` (crates/vhpc-sim/benches/engine.rs), "
             f"measured {when}: criterion's median time per iteration, 10 samples. Whole runs "
             "count `report.events` (for the hv_yield pressure run, poll windows folded with "
             "futile yields included: counted, not handled one by one); the queue rows count one "
             "pop plus one push as one event.", ""]
    lines += md_table(("benchmark", "what", "ms / iteration", "events / iteration", "M events/s"),
                      rows, {2, 3, 4})
    return lines


def host_facts(conditions: dict[str, str]) -> dict[str, str]:
    return {
        "CPU": provenance.cpu_model(),
        "CPUs allowed": str(len(placement.allowed_cpus())),
        "kernel": provenance.kernel(),
        **conditions,
    }


def markdown(cells: dict, crit: list[dict], checks: list[dict], reps: int, minutes: float,
             reproduce_label: str, argv: list[str], conditions: dict[str, str]) -> str:
    rev, dirty = provenance.git_revision()
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# vhpc-sim: simulator benchmark",
        "",
        f"Generated by `{COMMAND}` (`python -m vhpc.sim.bench {' '.join(argv)}`); "
        "do not edit by hand.",
        "",
        f"- date: {date}",
        f"- git revision: {rev}" + (" (with uncommitted changes)" if dirty else ""),
        f"- CPU: {provenance.cpu_model()} ({len(placement.allowed_cpus())} CPUs allowed)",
        f"- build of this revision's engine: {build_mode()}",
        "",
        "## Whole runs",
        "",
        f"Each row a fresh process, {reps} run{'s' if reps > 1 else ''} each, in a shuffled "
        f"order every round (seed {SEED}); cells show the median (min–max). Wall time is the whole process "
        "(start, parse, simulate, report out). The scale rows run "
        f"`target/release/examples/run` on `scenarios/{SCALE_FILE}` (48 cores, 192 "
        "single-vCPU domains under Credit plus dom0, busy_poll pairs) with `limit_ms` "
        "set as shown; events are the report's count (`report.events`: the events the engine "
        "handled, plus the poll windows a fold of futile yields accounted for without an event "
        "each; the scale scenario's busy_poll ranks never yield, so there every one was handled), "
        f"per second of that wall time. {rss_method()} Whole run: {minutes:.1f} min.",
        "",
    ]
    lines += md_table(HEADERS, table_rows(cells, reproduce_label), {1, 2, 3, 4})
    lines += ["", "The rows naming a revision are earlier engines, built from git into "
                  "~/.cache/vhpc/sim-baseline and run in the same shuffled rounds on the same "
                  "file: " + "; ".join(f"`{r.rev}`, {r.what}" for r in REFERENCES) + ". "
                  f"`vhpc reproduce s0` at `{PREVIOUS.rev}` is that revision's Python with its "
                  "own extension (vhpc._core built from its crates), run by this interpreter."]
    first, last = cells[SCALE_LIMITS_S[0]], cells[HOUR_S]
    if first.rss_kib and last.rss_kib:
        ratio = median(last.rss_kib) / median(first.rss_kib)
        lines += ["", f"Peak RSS, {HOUR_S} s over {SCALE_LIMITS_S[0]} s simulated: {ratio:.3f} "
                      f"(medians; flat means ≤ {FLAT_RATIO:.2f})."]
    lines += ["", "## Side by side with earlier engines", "",
              "Medians of this run's rounds (min–max). The ratio is the speed-up: events/s "
              "now over then, or `vhpc reproduce s0` wall time then over now; per round is "
              "the same ratio within each shuffled round (both ran in it), min–max.", ""]
    lines += md_table(("revision", "measurement", "now", "then", "ratio (of medians)",
                       "per round"), side_by_side_rows(cells), {2, 3, 4, 5})
    lines += ["", "## Engine micro-benchmarks", ""]
    lines += criterion_lines(crit)
    lines += ["", "## Target checks (medians of this run)", ""]
    lines += [f"- {check_line(c)}" for c in checks]
    lines += ["", "## Host", ""]
    lines += [f"- {k}: {v}" for k, v in host_facts(conditions).items()]
    lines += ["", f"Command: `{COMMAND}`", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- entry point


def run_bench(out: Path | None, reps: int = REPS, argv: list[str] | None = None,
              console: Console | None = None) -> str:
    """Measure everything in one run; print the Markdown, write it to `out` if given."""
    console = console or Console(stderr=True)
    binary = example_binary()
    reproduce_argv, reproduce_label = reproduce_command()
    started, cpu_before, load_before = time.monotonic(), cpu_times(), os.getloadavg()[0]
    if load_before >= BUSY_LOAD:
        console.print(f"[yellow]warning:[/] load average {load_before:.2f}: other work on this "
                      "machine will disturb the figures (recorded with the results)")
    with tempfile.TemporaryDirectory(prefix="vhpc-sim-bench-") as tmp:
        files = scale_files(Path(tmp))
        jobs, missing = current_jobs(reproduce_argv, binary, files), {}
        jobs[NUMA] = Job(f"scale + memory model, {BASELINE_LIMIT_S} s simulated",
                         [str(binary), str(numa_scale_file(Path(tmp)))], scale=True)
        for ref in REFERENCES:
            with console.status(f"building the engine at {ref.rev} (once, into ~/.cache/vhpc) ..."):
                more, why = reference_jobs(ref, files[BASELINE_LIMIT_S])
            jobs |= more
            missing |= why
        cells = measure_all(reps, jobs, console)
    for key, why in missing.items():
        cells[key] = Cell(problems=[f"not measured: {why}"])
    conditions = {
        "steal time during the run": f"{steal_percent(cpu_before, cpu_times()):.1f} % of CPU time",
        "load average (1 min) before / after": f"{load_before:.2f} / {os.getloadavg()[0]:.2f}",
    }
    minutes = (time.monotonic() - started) / 60
    crit = criterion_estimates()
    checks = target_checks(cells)
    text = markdown(cells, crit, checks, reps, minutes, reproduce_label,
                    argv if argv is not None else [f"--reps {reps}"], conditions)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        console.print(f"wrote {out}")
    return text


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m vhpc.sim.bench",
        description="Whole-run simulator benchmark: `vhpc reproduce s0` wall time, the "
                    "48-core scale scenario for one simulated hour, memory against "
                    "simulated duration. Prints a Markdown report.")
    parser.add_argument("--reps", type=int, default=REPS,
                        help=f"runs of every measurement; medians are reported (default {REPS})")
    parser.add_argument("--out", default="docs/sim-bench.md",
                        help="also write the report here, relative to the repository "
                             "(default docs/sim-bench.md; '-' to only print)")
    ns = parser.parse_args(args)
    if ns.reps < 1:
        parser.error("--reps must be at least 1")
    out = None if ns.out == "-" else paths.REPO / ns.out
    shown = [f"--reps {ns.reps}"] + ([f"--out {ns.out}"] if out is not None else [])
    try:
        run_bench(out, reps=ns.reps, argv=shown)
    except BenchError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
