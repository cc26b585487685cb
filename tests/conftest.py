"""Fixtures for the libvhpc_wait tests (tests/test_runtime_*.py).

`mpi_impl` is every MPI vhpc knows, skipped when not installed; `wait_lib` is
libvhpc_wait built for it; `programs` are the self-checking MPI programs of
tests/runtime/ compiled with its wrappers; `mpirun` launches one of them and
returns an `MpiRun` with helpers to read what the ranks printed.
`tiny_experiment` is the text of a one-cell lab experiment (tests/test_lab_*.py);
`smoke_sweep` writes the smoke sweep with shorter points (tests/test_sim_sweep*.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from vhpc import mpi, paths, runtime


@pytest.fixture(autouse=True)
def _scheduling_policy_unchanged():
    """Every test leaves this process at SCHED_OTHER. Seen once (2026-11-27, a
    clean-clone `make test`): the test process's main thread ended up SCHED_FIFO at
    the native slicer's priority (10), cause not found; every process started after
    inherited it, and two MPI ranks spinning at FIFO on one CPU starved each other
    for good. The test that leaves it so fails here, and the policy is put back so
    the rest of the suite runs."""
    yield
    if os.sched_getscheduler(0) != os.SCHED_OTHER:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        pytest.fail("this test left the test process SCHED_FIFO/RR (processes it starts "
                    "next would inherit it); reset to SCHED_OTHER")

POLICIES = ["spin", "yield", "sleep", "adaptive"]
SOURCES = Path(__file__).parent / "runtime"
C_PROGRAMS = ["semantics", "standard", "threads", "errors", "progress", "requests", "collorder",
              "waitall", "hints", "doorbell", "sleeper"]
FORTRAN_PROGRAMS = {"semantics_f": "semantics_f.f90", "semantics_mpifh": "semantics_mpifh.f"}
F08_PROGRAMS = {"semantics_f08": "semantics_f08.f90"}  # built where the MPI has `use mpi_f08`

STATS_RE = re.compile(
    r"^vhpc_wait: rank=(?P<rank>\d+) policy=(?P<policy>\w+) calls=(?P<calls>\d+) "
    r"waited_s=(?P<waited_s>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?) polls=(?P<polls>\d+) "
    r"yields=(?P<yields>\d+) sleeps=(?P<sleeps>\d+) native=(?P<native>\d+) "
    r"vcsw=(?P<vcsw>\d+) ivcsw=(?P<ivcsw>\d+) rings=(?P<rings>\d+) woken=(?P<woken>\d+)$"
)


@pytest.fixture(scope="session", params=list(mpi.MPIS), ids=list(mpi.MPIS))
def mpi_impl(request) -> mpi.MpiImpl:
    try:
        return mpi.find(request.param)
    except mpi.MpiNotFound as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def wait_lib(mpi_impl) -> Path:
    """libvhpc_wait.so for this MPI, built (idempotently) by runtime/'s Makefile."""
    if not (paths.REPO / "runtime" / "Makefile").is_file():
        pytest.skip("runtime/ (the libvhpc_wait sources) is not there yet")
    try:
        return runtime.build([mpi_impl.name])[mpi_impl.name]
    except runtime.Error as exc:
        pytest.fail(f"{exc.message}\n{exc.output or ''}")


def _compile(cmd: list[str], source: Path, out: Path) -> None:
    """Compile unless `out` is newer than its sources; atomic for concurrent sessions."""
    deps = [source, SOURCES / "check.h"]
    if out.exists() and all(out.stat().st_mtime >= d.stat().st_mtime for d in deps):
        return
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    proc = subprocess.run([*cmd, "-o", str(tmp), str(source)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"compiling {source.name} failed: {' '.join(cmd)}\n{proc.stderr}")
    tmp.replace(out)


@pytest.fixture(scope="session")
def programs(mpi_impl) -> dict[str, Path]:
    """Test programs compiled for this MPI into <build>/tests/<mpi>/ (Fortran if possible)."""
    out = paths.build_dir() / "tests" / mpi_impl.name
    out.mkdir(parents=True, exist_ok=True)
    built = {}
    for name in C_PROGRAMS:
        _compile([mpi_impl.mpicc, "-O1", "-g", "-pthread"], SOURCES / f"{name}.c", out / name)
        built[name] = out / name
    if mpi_impl.has_fortran():
        # Without explicit interfaces gfortran >= 10 rejects MPI's choice buffers.
        flags = ["-O1", "-g", "-fallow-argument-mismatch"]
        for name, source in FORTRAN_PROGRAMS.items():
            _compile([mpi_impl.mpif90, *flags], SOURCES / source, out / name)
            built[name] = out / name
        if _has_mpi_f08(mpi_impl, out):
            for name, source in F08_PROGRAMS.items():
                # -J: the program's own module files go beside it, not into the cwd.
                _compile([mpi_impl.mpif90, *flags, f"-J{out}"], SOURCES / source, out / name)
                built[name] = out / name
    return built


@pytest.fixture(scope="session")
def links_ucx(programs) -> bool:
    """Whether this MPI is MPICH's ch4:ucx (its programs link libucp): its progress
    then runs through the library's ucp_worker_progress (runtime/ucx.c), and adaptive
    keeps its blocking collectives on a shared CPU."""
    ldd = subprocess.run(["ldd", str(programs["progress"])], capture_output=True, text=True)
    return "libucp.so" in ldd.stdout


def _has_mpi_f08(mpi_impl, out: Path) -> bool:
    """Whether the MPI's Fortran compiler finds the mpi_f08 module."""
    probe = out / ".f08probe"
    probe.mkdir(exist_ok=True)
    (probe / "t.f90").write_text("program t\n  use mpi_f08\nend program t\n")
    proc = subprocess.run([mpi_impl.mpif90, "-fsyntax-only", f"-J{probe}", "t.f90"],
                          cwd=probe, capture_output=True, text=True)
    return proc.returncode == 0


@pytest.fixture
def fortran(mpi_impl, programs):
    """Skips the test when the Fortran programs could not be built."""
    if "semantics_f" not in programs:
        pytest.skip(f"no Fortran compiler: {mpi_impl.mpif90} or gfortran is missing")


@pytest.fixture
def fortran08(mpi_impl, programs, fortran):
    """Skips the test when the `use mpi_f08` programs could not be built."""
    if "semantics_f08" not in programs:
        pytest.skip(f"{mpi_impl.mpif90} has no mpi_f08 module (`use mpi_f08` does not compile)")


@pytest.fixture(params=[None, *POLICIES], ids=["no-preload", *POLICIES])
def policy(request) -> str | None:
    """A wait policy of libvhpc_wait, or None: the program runs without the library."""
    return request.param


@pytest.fixture(params=POLICIES)
def wait_policy(request) -> str:
    """A wait policy of libvhpc_wait (always preloaded)."""
    return request.param


@dataclass
class MpiRun:
    cmd: list[str]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    def describe(self) -> str:
        def tail(text: str) -> str:
            return "\n".join(text.splitlines()[-40:])

        return (
            f"command: {' '.join(self.cmd)}\nexit code: {self.returncode}"
            f"{' (timed out)' if self.timed_out else ''}\n"
            f"--- stdout ---\n{tail(self.stdout)}\n--- stderr ---\n{tail(self.stderr)}"
        )

    def rank_values(self, prog: str, key: str) -> dict[int, int]:
        """{rank: n} from lines '<prog>: rank <r> ... <key>=<n>' on stdout."""
        pat = re.compile(rf"^{re.escape(prog)}: rank (\d+)\b.*\b{key}=(\d+)", re.M)
        return {int(r): int(v) for r, v in pat.findall(self.stdout)}

    def finalized(self, prog: str) -> list[int]:
        """Ranks that printed '<prog>: rank <r> finalized' (after MPI_Finalize)."""
        pat = re.compile(rf"^{re.escape(prog)}: rank (\d+) finalized$", re.M)
        return sorted(int(r) for r in pat.findall(self.stdout))

    def stats(self) -> dict[int, dict]:
        """The VHPC_STATS lines by rank; fails on a malformed or repeated line."""
        found: dict[int, dict] = {}
        for line in self.stderr.splitlines():
            if not line.startswith("vhpc_wait: rank="):
                continue
            m = STATS_RE.match(line)
            assert m, f"malformed stats line: {line!r}\n{self.describe()}"
            fields = {k: (v if k == "policy" else float(v) if k == "waited_s" else int(v))
                      for k, v in m.groupdict().items()}
            assert fields["rank"] not in found, f"two stats lines for rank {fields['rank']}"
            found[fields["rank"]] = fields
        return found

    def assert_ok(self, prog: str, n: int) -> None:
        """Clean exit, and every rank got through MPI_Finalize."""
        assert self.returncode == 0 and not self.timed_out, self.describe()
        assert self.finalized(prog) == list(range(n)), self.describe()

    def assert_counted(self, prog: str, n: int, policy: str | None) -> None:
        """assert_ok, every rank printed '<prog>: rank <r> blocking=<k>', and the
        library (with a policy) counted at least those k calls in VHPC_STATS, or
        (without one) stayed out."""
        self.assert_ok(prog, n)
        made = self.rank_values(prog, "blocking")
        assert sorted(made) == list(range(n)), self.describe()
        if policy is None:
            assert "vhpc_wait" not in self.stderr, self.describe()
            return
        stats = self.stats()
        assert sorted(stats) == list(range(n)), self.describe()
        for rank, s in stats.items():
            assert s["policy"] == policy
            assert s["calls"] >= made[rank], f"rank {rank}: {s} but made {made[rank]}\n{self.describe()}"


def _clean_env() -> dict[str, str]:
    # MPICH's launcher forwards its whole environment: keep ours out of the ranks.
    return {k: v for k, v in os.environ.items() if not k.startswith("VHPC_") and k != "LD_PRELOAD"}


@pytest.fixture
def launcher_env(mpi_impl) -> dict[str, str]:
    """The environment the mpirun fixture starts this MPI's launcher with."""
    return mpi_impl.launcher_env(_clean_env())


@pytest.fixture
def mpirun(mpi_impl, request):
    """run(n, argv, policy=None, env=None, cpus=None, timeout=120) -> MpiRun.

    With a policy, libvhpc_wait is preloaded and VHPC_WAIT set to it; `cpus`
    confines the launcher and so every rank (taskset -c)."""

    def run(n, argv, *, policy=None, env=None, cpus=None, timeout=120):
        rank_env = dict(env or {})
        preload = None
        if policy is not None:
            preload = request.getfixturevalue("wait_lib")
            rank_env["VHPC_WAIT"] = policy
        cmd = mpi_impl.launch(n, [str(a) for a in argv], env=rank_env, preload=preload)
        if cpus is not None:
            cmd = ["taskset", "-c", str(cpus), *cmd]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=mpi_impl.launcher_env(_clean_env()), start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            return MpiRun(cmd, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the launcher's own process group
            out, err = proc.communicate()
            return MpiRun(cmd, proc.returncode, out, err, timed_out=True)

    return run


@pytest.fixture(scope="session")
def build(tmp_path_factory) -> Path:
    """bench/ built once into a fresh directory with the project's Makefile,
    without a compiler warning."""
    if shutil.which("make") is None or shutil.which("gcc") is None:
        pytest.skip("make and gcc are needed to build bench/")
    out = tmp_path_factory.mktemp("build")
    proc = subprocess.run(["make", "-C", str(paths.REPO / "bench"), f"BUILD={out}"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning" not in proc.stderr, proc.stderr
    return out


@pytest.fixture
def tiny_experiment() -> str:
    """A lab experiment of one cell: MPICH, two ranks on their own CPUs, an 8-byte
    ping-pong for 0.05 s, twice."""
    return """
[experiment]
name = "tiny"
repetitions = 2
warmup = 0
timeout_s = 60
mpis = ["mpich"]
[[workload]]
name = "pp8"
program = "pingpong"
args = ["-s", "8", "-T", "lat", "-t", "0.05"]
[[config]]
name = "native"
kind = "native"
"""


@pytest.fixture
def smoke_sweep(tmp_path) -> Callable[[int], Path]:
    """`make(limit_ms)`: scenarios/sweeps/smoke.toml with each point `limit_ms` of
    simulated time (its own is 300 s), written into tmp_path (tests/test_sim_sweep*.py)."""

    def make(limit_ms: int) -> Path:
        smoke = paths.REPO / "scenarios" / "sweeps" / "smoke.toml"
        base = paths.REPO / "scenarios" / "overcommit-vms.toml"
        text = smoke.read_text().replace("../overcommit-vms.toml", str(base))
        path = tmp_path / f"smoke-{limit_ms}.toml"
        path.write_text(re.sub(r"(?m)^limit_ms = \d+$", f"limit_ms = {limit_ms}", text))
        return path

    return make


@pytest.fixture
def flip_page_bit() -> Callable[[Path, str], None]:
    """`flip(path, column)`: flips one bit in the last byte of that column's chunk in the
    Parquet file's first row group: the last data page's payload, which the page
    checksum covers. (A byte picked by position may fall in a page header, which no
    checksum covers, and then the damage goes unseen only sometimes.)"""
    import pyarrow.parquet as pq

    def flip(path: Path, column: str) -> None:
        meta = pq.ParquetFile(path).metadata
        chunk = meta.row_group(0).column(meta.schema.to_arrow_schema().names.index(column))
        start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        data = bytearray(path.read_bytes())
        data[start + chunk.total_compressed_size - 1] ^= 0x01
        path.write_bytes(bytes(data))

    return flip
