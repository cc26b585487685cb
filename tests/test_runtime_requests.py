"""Completion calls return exactly what the MPI's own call returns, for every
kind of request (tests/runtime/requests.c): nonblocking and persistent
point-to-point, persistent collectives, partitioned, generalized requests,
MPI_REQUEST_NULL, inactive requests, arrays mixing them, and failing ones,
through MPI_Wait, Waitall, Waitany, Waitsome and the Test calls.

The program prints, per case and call, what the MPI returned (error classes,
statuses, data, handles, how often a generalized request's callbacks ran); the
lines must be the same with the library, under every policy, as without it.
adaptive passes calls straight to the MPI while each rank has a core of its own,
so it also runs with both ranks on one core, where it waits itself. One run per
MPI and variant serves every case; a case this MPI lacks (Open MPI 4.1 has no
partitioned communication) is skipped with the program's reason."""

from __future__ import annotations

import re

import pytest

N = 2
CASES = ["p2p", "persistent", "pcoll", "partitioned", "grequest", "null", "inactive",
         "mixed", "truncate", "greq-error"]
# variant -> (VHPC_WAIT policy or None, CPUs for taskset or None)
VARIANTS = {"no-preload": (None, None), "spin": ("spin", None), "yield": ("yield", None),
            "sleep": ("sleep", None), "adaptive": ("adaptive", None),
            "adaptive-one-core": ("adaptive", "0")}
LINE = re.compile(r"^requests: rank (\d+) case=(\S+) (call=.*)$", re.M)
UNSUPPORTED = re.compile(r"^requests: rank \d+ unsupported (\S+): (.*)$", re.M)


@pytest.fixture(scope="module")
def runs() -> dict:
    return {}  # (MPI name, variant) -> MpiRun, filled on first use


def _run(mpirun, mpi_impl, programs, runs, variant):
    key = (mpi_impl.name, variant)
    if key not in runs:
        policy, cpus = VARIANTS[variant]
        run = mpirun(N, [programs["requests"]], policy=policy, cpus=cpus, timeout=180)
        run.assert_ok("requests", N)
        runs[key] = run
    return runs[key]


def _case_lines(run, case: str) -> list[str]:
    """'rank <r> call=...' lines of one case, sorted (ranks print concurrently)."""
    return sorted(f"rank {r} {rest}" for r, c, rest in LINE.findall(run.stdout) if c == case)


def _skip_if_unsupported(run, case: str) -> None:
    for kind, why in UNSUPPORTED.findall(run.stdout):
        if kind == case:
            pytest.skip(why)


def test_cases_are_the_programs(mpirun, mpi_impl, programs, runs):
    """CASES lists every case the program runs, and nothing else."""
    run = _run(mpirun, mpi_impl, programs, runs, "no-preload")
    unsupported = {kind for kind, _ in UNSUPPORTED.findall(run.stdout)}
    assert {c for _, c, _ in LINE.findall(run.stdout)} == set(CASES) - unsupported


@pytest.mark.parametrize("case", CASES)
def test_baseline_is_meaningful(mpirun, mpi_impl, programs, runs, case):
    """Without the library every call of the case ran on both ranks and the data
    arrived: the comparison below compares real results."""
    run = _run(mpirun, mpi_impl, programs, runs, "no-preload")
    _skip_if_unsupported(run, case)
    lines = _case_lines(run, case)
    ran = [ln for ln in lines if "skipped:" not in ln]
    assert {ln.split()[1] for ln in ran} == {str(r) for r in range(N)}, run.describe()
    assert not [ln for ln in ran if "WRONG" in ln], run.describe()
    # Requests completed (null and inactive ones only through Wait, Waitall, Test...).
    assert all(re.search(r"\b\d+[RSCGE]:err=", ln) for ln in ran
               if not re.search(r"call=(Wait|Test)(any|some) ", ln)), run.describe()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "no-preload"])
def test_same_as_without_library(mpirun, mpi_impl, programs, runs, case, variant):
    expected = _run(mpirun, mpi_impl, programs, runs, "no-preload")
    _skip_if_unsupported(expected, case)
    run = _run(mpirun, mpi_impl, programs, runs, variant)
    want, got = _case_lines(expected, case), _case_lines(run, case)
    differ = sorted(set(got) ^ set(want))
    assert got == want, (
        f"{case}: results differ with libvhpc_wait (- without, + with):\n"
        + "\n".join(("+ " if d in got else "- ") + d for d in differ)
    )
