"""A sweep's results: one Parquet file of one row per finished point.

`<dir>/point-<id>.parquet` holds the point's parameters (one column per axis,
and `seed`), the metrics of its report and provenance; it is written whole or
not at all (vhpc.durable), so an interrupted sweep keeps every finished point
and a rerun skips them: a file is trusted if it reads, its pages match their
checksums, it holds its own point and was simulated from the same scenario
text (else the point runs again and its file is replaced). `<dir>/sweep.json`
says which sweep wrote the directory (axes, report defaults); `<dir>/.lock` is
flock()ed by the one `vhpc sim sweep` writing it. `read` gives the dataset as a
DataFrame.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vhpc import __version__, durable
from vhpc.provenance import git_revision
from vhpc.sim.run import SimError
from vhpc.sim.sweep import Point, Sweep, SweepError

MANIFEST = "sweep.json"
LOCK = ".lock"

JOB = pa.struct([("name", pa.string()), ("workload", pa.string()),
                 ("wait_policy", pa.string()), ("completion_ns", pa.int64()),
                 ("useful_ns", pa.int64()), ("poll_ns", pa.int64()), ("overhead_ns", pa.int64())])
#: The metrics of a point's report, in column order (the `jobs` list last).
METRICS = pa.schema([
    ("finished", pa.bool_()), ("end_ns", pa.int64()), ("events", pa.int64()),
    ("jobs_finished", pa.int32()), ("mean_completion_s", pa.float64()),
    ("max_completion_s", pa.float64()), ("useful_ns", pa.int64()), ("poll_ns", pa.int64()),
    ("overhead_ns", pa.int64()), ("useful_share", pa.float64()), ("poll_share", pa.float64()),
    ("utilisation", pa.float64()), ("vcpu_switches", pa.int64()), ("migrations", pa.int64()),
    ("jobs", pa.list_(JOB)),
])
PROVENANCE = pa.schema([
    ("vhpc_version", pa.string()), ("git_revision", pa.string()), ("git_dirty", pa.bool_()),
    ("sweep_sha", pa.string()), ("scenario_sha", pa.string()), ("sim_wall_s", pa.float64()),
    ("worker", pa.string()), ("written_at", pa.timestamp("us", tz="UTC")),
])
#: Columns that differ between two runs of the same point (where and how fast it ran).
CIRCUMSTANTIAL = ("sim_wall_s", "worker", "written_at")


def metrics(report: dict[str, Any]) -> dict[str, Any]:
    """The METRICS of one report: totals over jobs, shares of the host's CPU time."""
    jobs = [{k: j[k] for k in JOB.names} for j in report["jobs"]]
    done = [j["completion_ns"] / 1e9 for j in jobs if j["completion_ns"] is not None]
    useful, poll, overhead = (sum(j[k] for j in jobs) for k in ("useful_ns", "poll_ns", "overhead_ns"))
    cores, end = len(report["cores"]), report["end_ns"]
    spent = useful + poll + overhead
    return {
        "finished": report["finished"], "end_ns": end, "events": report["events"],
        "jobs_finished": len(done),
        "mean_completion_s": sum(done) / len(done) if done else None,
        "max_completion_s": max(done) if done else None,
        "useful_ns": useful, "poll_ns": poll, "overhead_ns": overhead,
        # The host's capacity is cores × simulated time: the share doing useful work.
        "useful_share": useful / (cores * end) if cores and end else None,
        "poll_share": poll / spent if spent else None,
        "utilisation": sum(c["utilisation"] for c in report["cores"]) / cores if cores else None,
        "vcpu_switches": sum(c["vcpu_switches"] for c in report["cores"]),
        "migrations": sum(v["migrations"] for v in report["vcpus"]),
        "jobs": jobs,
    }


def arrow_type(values: list[Any]) -> pa.DataType:
    """The column type of an axis (sweep.check_axes made its values one type)."""
    v = values[0]
    if isinstance(v, bool):
        return pa.bool_()
    if isinstance(v, int):
        return pa.int64()
    if isinstance(v, float):
        return pa.float64()
    return pa.string()  # strings, and tables or lists as JSON text


def column_value(v: Any) -> Any:
    return v if isinstance(v, (bool, int, float, str)) else json.dumps(v, sort_keys=True)


def schema(sweep: Sweep) -> pa.Schema:
    """The columns of the sweep's rows; SweepError if an axis takes a result column's name."""
    for name in sweep.spec.axes:
        if name in METRICS.names or name in PROVENANCE.names:
            raise SweepError(f"{sweep.path}: axes.{name}: `{name}` is a column of the results "
                             "(a metric or provenance): name the axis otherwise")
    axes = [pa.field(n, arrow_type(a.expand())) for n, a in sweep.spec.axes.items()]
    return pa.schema([("point", pa.string()), ("sweep", pa.string()), *axes,
                      ("seed", pa.uint64()), *METRICS, *PROVENANCE])


class Store:
    """The results directory of one sweep."""

    def __init__(self, sweep: Sweep, out: Path) -> None:
        self.sweep, self.out = sweep, Path(out)
        self.schema = schema(sweep)
        rev, dirty = git_revision()
        self.provenance = {"vhpc_version": __version__, "git_revision": rev, "git_dirty": dirty,
                           "sweep_sha": sweep.sha}

    def path(self, point_id: str) -> Path:
        return self.out / f"point-{point_id}.parquet"

    def done(self, points: list[Point]) -> set[str]:
        """Ids of the points whose file can be trusted (see the module's docstring)."""
        return {p.id for p in points if self.trusted(p)}

    def trusted(self, point: Point) -> bool:
        path = self.path(point.id)
        if not path.exists():
            return False
        try:
            t = pq.read_table(path, page_checksum_verification=True)
        except (OSError, pa.ArrowException, ValueError):
            return False
        return (t.schema.equals(self.schema, check_metadata=False) and t.num_rows == 1
                and t["point"][0].as_py() == point.id
                and t["scenario_sha"][0].as_py() == point.scenario_sha)

    def write(self, point: Point, result: dict[str, Any]) -> Path:
        """Store one finished point: `result` is what sweep_run.simulate returned."""
        row = {"point": point.id, "sweep": self.sweep.name,
               **{k: column_value(v) for k, v in point.params.items()},
               **result["metrics"], **self.provenance, "scenario_sha": point.scenario_sha,
               "seed": result["seed"], "sim_wall_s": result["sim_wall_s"],
               "worker": result["worker"], "written_at": datetime.now(timezone.utc)}
        table = pa.Table.from_pylist([row], schema=self.schema)
        try:
            return durable.write_parquet(table, self.path(point.id))
        except OSError as exc:
            raise SimError(f"cannot store point {point.id} in {self.out}: "
                           f"{exc.strerror or exc}", exit_code=1) from exc

    def write_manifest(self, total: int) -> None:
        manifest = {"sweep": self.sweep.name, "file": str(self.sweep.path),
                    "sweep_sha": self.sweep.sha, "points": total, "axes": self.sweep.axes,
                    "report": self.sweep.spec.report.model_dump()}
        path = self.out / MANIFEST
        tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(manifest, indent=1) + "\n")
        os.replace(tmp, path)

    @contextmanager
    def locked(self) -> Iterator["Store"]:
        """Hold `<out>/.lock` (SimError naming --out if another sweep holds it);
        remove what a writer killed mid-write left."""
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise SimError(f"--out {self.out}: cannot write there: {exc.strerror or exc}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SimError(f"--out {self.out}: another `vhpc sim sweep` is writing there; "
                               "wait for it or choose another --out") from None
            for stale in self.out.glob(".point-*.tmp"):
                stale.unlink(missing_ok=True)
            yield self
        finally:
            os.close(fd)


def is_sweep_dir(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def manifest(out: Path) -> dict[str, Any]:
    return json.loads((Path(out) / MANIFEST).read_text())


def read(out: Path):
    """Every point stored in `out` as a pandas DataFrame, one row per point,
    sorted by the axes (SimError if there is none)."""
    files = sorted(Path(out).glob("point-*.parquet"))
    tables = []
    for f in files:
        try:
            tables.append(pq.read_table(f))
        except (OSError, pa.ArrowException) as exc:
            raise SimError(f"{f}: unreadable ({exc}); rerun the sweep to redo its point") from None
    if not tables:
        raise SimError(f"{out}: no finished point to read")
    df = pa.concat_tables(tables).to_pandas()
    axes = [a for a in manifest(out)["axes"] if a in df.columns]
    return df.sort_values([*axes, "seed", "point"], kind="stable").reset_index(drop=True)

