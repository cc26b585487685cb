"""The simulator from Python: run scenario files, read their reports.

`run_file` reads a scenario (TOML, see docs/sim.md), runs it in the native
core (`vhpc._core`, the Rust crate vhpc-sim) and returns a `SimRun` whose
`report` is the parsed JSON report: plain dicts and lists with the sections
``jobs``, ``ranks``, ``cores`` and ``vcpus`` (one record per item, times in
integer nanoseconds). `frames` turns those sections into pandas DataFrames;
`run_many` runs a batch in parallel. `print_summary` is what
``vhpc sim run`` shows.

An invalid scenario raises `SimError` (exit code 2 in the CLI) whose message
names the file and the field; so does a scenario whose estimated memory
exceeds the limit (`max_memory`, memory.py), before anything is built. Ctrl-C
raises KeyboardInterrupt within a fraction of a second, in setup as in the
run. A trace written to a file (`trace_file`) is streamed as the run goes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhpc import _core
from vhpc.sim import memory, profile

if TYPE_CHECKING:  # pandas is imported only when a DataFrame is asked for
    import pandas as pd
    from rich.console import Console

#: The report's record sections, each a list of dicts (one per item).
SECTIONS = ("jobs", "ranks", "cores", "vcpus")

PERFETTO_URL = "https://ui.perfetto.dev"


class SimError(Exception):
    """A scenario that cannot run: unreadable file, bad TOML, invalid field."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code


@dataclass
class SimRun:
    """One simulation: the report (and trace) as the native core returned them."""

    origin: str
    report_json: str
    trace_json: str | None = None
    #: Wall-clock seconds of the native call (parse, validate, simulate, serialise).
    wall_s: float = 0.0
    #: The file the trace was streamed to (`trace_file`), if any.
    trace_path: Path | None = None

    @cached_property
    def report(self) -> dict[str, Any]:
        """The report: scenario, scheduler, seed, end_ns, finished, events and the SECTIONS."""
        return json.loads(self.report_json)

    @cached_property
    def trace(self) -> dict[str, Any] | None:
        """The Chrome/Perfetto trace (``traceEvents``), if the run was traced in memory."""
        return None if self.trace_json is None else json.loads(self.trace_json)

    def trace_cut(self) -> dict[str, Any] | None:
        """The trace's ``otherData`` (``slice_limit``, ``truncated_at_us``) if the
        slice limit cut it, else None; a streamed trace is not read whole for it."""
        if self.trace_json is not None:
            return (self.trace or {}).get("otherData")
        if self.trace_path is None:
            return None
        return streamed_trace_cut(self.trace_path)

    def write_trace(self, path: str | Path) -> Path:
        """Write the trace JSON to `path` (parents created); returns the path."""
        if self.trace_json is None:
            raise ValueError("this run was not traced (run with trace=True)")
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.trace_json)
        except OSError as exc:
            raise SimError(f"{path}: cannot write the trace: {exc.strerror or exc}") from None
        return path


#: Largest scenario file read: a million ranks named in their jobs fit in
#: about 10 MiB; parsing a larger file would itself take gigabytes.
MAX_SCENARIO_BYTES = 32 << 20


def read_scenario(path: str | Path) -> str:
    """The text of a scenario file; SimError if it cannot be read, is not
    UTF-8 or is larger than MAX_SCENARIO_BYTES (read no further: /dev/zero)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCENARIO_BYTES + 1)
        if len(data) > MAX_SCENARIO_BYTES:
            raise SimError(f"{path}: larger than {MAX_SCENARIO_BYTES >> 20} MiB: "
                           "not a scenario file vhpc reads")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise SimError(f"{path}: no such scenario file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SimError(f"{path}: cannot read: {exc}") from None


def with_profile(text: str, origin: str) -> str:
    """The scenario with its `host.profile` resolved into parameters (docs/sim.md)."""
    try:
        return profile.resolve(text, origin)
    except profile.ProfileMismatch as exc:
        raise SimError(str(exc)) from None


def streamed_trace_cut(path: Path) -> dict[str, Any] | None:
    """The ``otherData`` a streamed trace ends with, read from its last bytes."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 512))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    marker = tail.rfind('"otherData":')
    if marker < 0:
        return None
    try:
        return json.loads(tail[marker + len('"otherData":'):].rstrip().removesuffix("}"))
    except ValueError:
        return None


def run_text(text: str, origin: str, *, seed: int | None = None, trace: bool = False,
             trace_file: str | Path | None = None, max_memory: int | None = None) -> SimRun:
    """Run scenario TOML `text`; `origin` names it in errors, `seed` overrides its seed.

    `trace` keeps the trace in memory (`SimRun.trace`); `trace_file` streams it
    to that file instead (written whole or not at all). `max_memory` (bytes;
    None: half of the machine's memory) refuses a scenario estimated to need more.
    """
    text = with_profile(text, origin)
    memory.check(text, origin, max_memory,
                 trace="file" if trace_file is not None else "memory" if trace else "off")
    part = None
    if trace_file is not None:
        trace_file = Path(trace_file)
        part = trace_file.with_name(trace_file.name + ".part")
        try:
            trace_file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SimError(f"{trace_file}: cannot write the trace: {exc.strerror or exc}") from None
    start = time.perf_counter()
    try:
        report_json, trace_json = _core.run(text, origin, seed, trace and part is None,
                                            None if part is None else str(part))
        if part is not None:
            os.replace(part, trace_file)  # type: ignore[arg-type]
    except ValueError as exc:
        raise SimError(str(exc)) from None
    except OverflowError:
        raise SimError(f"{origin}: seed must be between 0 and 2^64 - 1, got {seed}") from None
    except OSError as exc:  # the trace file
        raise SimError(str(exc).replace(str(part), str(trace_file)), exit_code=1) from None
    finally:
        if part is not None:
            part.unlink(missing_ok=True)
    return SimRun(origin, report_json, trace_json, time.perf_counter() - start,
                  None if trace_file is None else Path(trace_file))


def run_file(path: str | Path, *, seed: int | None = None, trace: bool = False,
             trace_file: str | Path | None = None, max_memory: int | None = None) -> SimRun:
    """Run the scenario file at `path` (named in errors as given); see `run_text`."""
    return run_text(read_scenario(path), str(path), seed=seed, trace=trace,
                    trace_file=trace_file, max_memory=max_memory)


def run_many(items: Iterable[str | Path | tuple[str | Path, int | None]], *,
             max_memory: int | None = None) -> list[dict[str, Any]]:
    """Run many scenario files in parallel: each item is a path or (path, seed).

    Every scenario is validated before any runs; returns the parsed reports in
    input order (each equal to ``run_file(path, seed=seed).report``).
    """
    batch = []
    for item in items:
        path, seed = item if isinstance(item, tuple) else (item, None)
        batch.append((with_profile(read_scenario(path), str(path)), str(path), seed))
    return run_texts(batch, max_memory=max_memory)


def run_texts(batch: Sequence[tuple[str, str, int | None]], *,
              max_memory: int | None = None) -> list[dict[str, Any]]:
    """Run many scenarios given as (TOML text, origin named in errors, seed or None)
    in parallel, validated before any runs; the parsed reports in input order.
    The batch's estimated memory (one scenario per CPU at a time, every report
    kept) must stay under `max_memory` (None: the default limit)."""
    memory.check_batch(batch, max_memory)
    try:
        return [json.loads(r) for r in _core.run_many(list(batch))]
    except ValueError as exc:
        raise SimError(str(exc)) from None
    except OverflowError:
        raise SimError("seeds must be between 0 and 2^64 - 1") from None


def frames(report: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The report's SECTIONS as pandas DataFrames (one row per job, rank, core, vCPU)."""
    return {name: frame(report, name) for name in SECTIONS}


def frame(report: dict[str, Any], section: str) -> pd.DataFrame:
    """One section of a report as a DataFrame, columns in report order."""
    import pandas as pd

    if section not in SECTIONS:
        raise ValueError(f"unknown section {section!r}; known: {', '.join(SECTIONS)}")
    return pd.DataFrame.from_records(report[section])


def catalogue() -> dict[str, list[tuple[str, str]] | list[str]]:
    """What a scenario can name: schedulers, workloads, host presets and hint policies
    (name, description), wait policies."""
    return {
        "schedulers": _core.schedulers(),
        "hosts": _core.hosts(),
        "workloads": _core.workloads(),
        "wait_policies": _core.wait_policies(),
        "hint_policies": _core.hint_policies(),
    }


# --- the summary `vhpc sim run` prints ----------------------------------------


def _seconds(ns: int | None) -> str:
    return "—" if ns is None else f"{ns / 1e9:.6g}"


def _percents(parts: Sequence[int]) -> list[str]:
    total = sum(parts)
    return [f"{100 * p / total:.1f}" if total else "—" for p in parts]


def print_summary(run: SimRun, console: Console) -> None:
    """Scenario, end time, per-job completion and CPU split, per-core load, counts."""
    from rich.table import Table

    r = run.report
    console.print(f"[bold]{r['scenario'] or '(unnamed)'}[/bold]  ({run.origin})")
    console.print(f"scheduler {r['scheduler']}, seed {r['seed']}")
    end = _seconds(r["end_ns"])
    if r["finished"]:
        console.print(f"simulated {end} s: every job finished")
    else:
        console.print(f"simulated {end} s: [yellow]hit the limit (limit_ms) before every job finished[/yellow]")

    jobs = Table(title="jobs", title_justify="left")
    for name, justify in [("job", "left"), ("workload", "left"), ("wait policy", "left"),
                          ("ranks", "right"), ("completion s", "right"), ("CPU s", "right"),
                          ("useful %", "right"), ("busy-poll %", "right"), ("overhead %", "right")]:
        jobs.add_column(name, justify=justify)  # type: ignore[arg-type]
    for j in r["jobs"]:
        parts = [j["useful_ns"], j["poll_ns"], j["overhead_ns"]]
        if j["completion_ns"] is not None:
            completion = _seconds(j["completion_ns"])
        else:
            completion = "endless" if r["finished"] else "unfinished"
        jobs.add_row(j["name"], j["workload"], j["wait_policy"], str(j["ranks"]), completion,
                     _seconds(sum(parts)), *_percents(parts))
    console.print(jobs)

    cores = Table(title="cores", title_justify="left")
    for name in ["core", "utilisation %", "busy s", "vCPU switches"]:
        cores.add_column(name, justify="right")
    for c in r["cores"]:
        cores.add_row(str(c["core"]), f"{100 * c['utilisation']:.1f}", _seconds(c["busy_ns"]),
                      str(c["vcpu_switches"]))
    console.print(cores)

    migrations = sum(v["migrations"] for v in r["vcpus"])
    rate = f" ({r['events'] / run.wall_s / 1e6:.2f} M events/s)" if run.wall_s > 0 else ""
    console.print(f"vCPU migrations: {migrations} over {len(r['vcpus'])} vCPUs")
    console.print(f"events: {r['events']} in {run.wall_s:.3f} s wall{rate}")
