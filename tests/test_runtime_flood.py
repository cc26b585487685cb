"""The send flood (bench/sendflood, a row of `vhpc runtime bench`): every rank but
0 starts thousands of small MPI_Isend to rank 0 and waits for them with one
MPI_Waitall, rank 0 the matching MPI_Irecv. The program checks every message it
receives; here it must finish with right data, with more ranks than CPUs, without
the library and under every policy, and its checker must catch a spoiled
message. Speed is the benchmark's business: the bookkeeping of its target check
(d) is tested with made-up figures."""

from __future__ import annotations

import csv
import io

import pytest

from vhpc.runtime import bench as rb

RANKS = 5  # more than the 2 CPUs here: the flood's point


def flood(build, mpi_impl) -> str:
    return str(build / "bench" / mpi_impl.name / "sendflood")


def test_flood_delivers_every_message(mpirun, build, mpi_impl, policy):
    run = mpirun(RANKS, [flood(build, mpi_impl), "-n", "300", "-r", "2"], policy=policy,
                 timeout=120)
    assert run.returncode == 0 and not run.timed_out, run.describe()
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    assert len(rows) == 1 and rows[0]["test"] == "flood", run.describe()
    assert (int(rows[0]["ranks"]), int(rows[0]["messages"])) == (RANKS, 300)
    assert float(rows[0]["usec"]) > 0
    assert rb.parse_flood(run.stdout) == pytest.approx(float(rows[0]["usec"]) / 1000)


def test_flood_checker_catches_a_spoiled_message(mpirun, build, mpi_impl):
    run = mpirun(2, [flood(build, mpi_impl), "-n", "50", "-r", "1", "-C"], timeout=60)
    # Exit code 3 is the checker's own (MPI_Abort(..., 3)); its message is best
    # effort: Hydra's proxy can go before forwarding the aborting rank's stderr
    # (a clean-clone CI run got exit code 3 and no output at all, not even
    # MPICH's own "Abort(3)" line).
    assert run.returncode == 3 and not run.timed_out, run.describe()
    assert not run.stderr or "sendflood: round" in run.stderr, run.describe()


def test_flood_placement_oversubscribes():
    place = rb.flood_placement()
    assert place.nranks > len(rb.placement.allowed_cpus())
    assert rb.tests_for(place) == ("flood",)
    assert place.name in [p.name for p in rb.placements()]


def flood_row(policy: str, ms: float | None, note: str = "") -> dict:
    samples = [] if ms is None else [ms * f for f in (0.98, 1.0, 1.02)]
    return {"mpi": "MPICH 4.0.2 (Debian)", "mpi_key": "mpich",
            "placement_id": rb.flood_placement().name, "policy": policy,
            "flood_ms": None if ms is None else {"median": ms, "min": ms, "max": ms, "n": 3},
            "flood_samples": samples, "note": note}


def test_flood_check_compares_adaptive_with_the_best_fixed_policy():
    rows = [flood_row("spin", 900), flood_row("yield", 800), flood_row("sleep", 300),
            flood_row("adaptive", 250)]
    verdict = rb.check_flood(rows, "mpich")
    assert verdict["met"] is True and "sleep" in verdict["detail"]
    rows[-1] = flood_row("adaptive", 330)
    assert rb.check_flood(rows, "mpich")["met"] is False
    rows[-1] = flood_row("adaptive", None, "flood timed out (> 120 s); not repeated")
    assert rb.check_flood(rows, "mpich")["met"] is False
    assert rb.check_flood([flood_row("adaptive", 250)], "mpich")["met"] is None


def test_flood_rows_have_their_column():
    row = {**flood_row("adaptive", 12.5), "placement": "8 ranks over 2 CPUs",
           "lat_us": None, "bw_MBps": None}
    cells = rb.cells_of(row)
    assert len(cells) == len(rb.HEADERS)
    assert cells[rb.HEADERS.index("send flood ms/round")] == "12.5 (12.5–12.5)"


def test_flood_only_plans_no_floor():
    """`vhpc runtime bench --flood-only`: the flood rows alone, without the floors."""
    config = rb.Config(rb.mpi.MPIS["mpich"], rb.flood_placement(), "adaptive")
    plan = rb.rounds([config], reps=2, floors=())
    assert plan == [[(config, "flood")]] * 2


def test_flood_only_writes_no_page(tmp_path):
    with pytest.raises(rb.BenchError, match="--flood-only"):
        rb.run_bench(tmp_path / "bench.md", flood_only=True)
    assert not (tmp_path / "bench.md").exists()


def test_progress_probe_times_idle_calls(mpirun, build, mpi_impl):
    """bench/progress_probe: one row per count of posted receives, percentiles in order."""
    exe = str(build / "bench" / mpi_impl.name / "progress_probe")
    run = mpirun(2, [exe, "1", "500"], timeout=60)
    assert run.returncode == 0 and not run.timed_out, run.describe()
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    assert [(r["test"], int(r["posted"])) for r in rows] == [("idle_get_status", 1),
                                                              ("idle_get_status", 500)]
    for r in rows:
        assert 0 < float(r["p10_ns"]) <= float(r["median_ns"]) <= float(r["p90_ns"]), r
