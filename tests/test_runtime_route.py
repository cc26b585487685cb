"""libvhpc_wait refuses the wrong MPI (runtime/route.c): preloaded into a process
that runs another MPI than the one it was built for, it prints one line naming
both and stands aside, so that the program runs unmodified, and it never loads a
second MPI (it has no DT_NEEDED on any). Checked both ways between Debian's MPICH
and Open MPI, for a program linked with its MPI and for one that opens its MPI
with dlopen(RTLD_LOCAL) after start-up, as Python's mpi4py does
(tests/runtime/route.c, route_loader.c). The right MPI is still intercepted:
loaded at start-up always, and loaded later where the library can reach it
(MPICH; Open MPI's handles are data the library resolved when it was loaded)."""

from __future__ import annotations

import re
import subprocess

import pytest

from vhpc import mpi, paths, runtime
from vhpc.runtime import library

N = 2
SOURCES = paths.REPO / "tests" / "runtime"
REFUSED = re.compile(r"^vhpc_wait: built for (.+?), (.+): not intercepting, the program runs "
                     r"as without libvhpc_wait$", re.M)
CORE_LIB = {"mpich": "libmpich.so", "openmpi": "libmpi.so"}


def _version(name: str) -> str:
    """The MPI's version as the library names it ('MPICH 4.0.2', 'Open MPI 4.1.4')."""
    return mpi.MPIS[name].version


@pytest.fixture(scope="module")
def route_programs(mpi_impl, tmp_path_factory) -> dict[str, str]:
    """route (linked with the MPI), route.so (opened late) and route_loader."""
    out = paths.build_dir() / "tests" / mpi_impl.name
    out.mkdir(parents=True, exist_ok=True)
    cmds = {
        "route": [mpi_impl.mpicc, "-O1", "-g", "-o", out / "route", SOURCES / "route.c"],
        "route.so": [mpi_impl.mpicc, "-O1", "-g", "-fPIC", "-shared", "-DROUTE_LIB",
                     "-o", out / "route.so", SOURCES / "route.c"],
        "route_loader": ["cc", "-O1", "-g", "-o", out / "route_loader",
                         SOURCES / "route_loader.c", "-ldl"],
    }
    for name, cmd in cmds.items():
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        assert proc.returncode == 0, f"building {name}: {proc.stderr}"
    return {name: str(out / name) for name in cmds}


def _other(mpi_impl) -> str:
    others = [n for n in mpi.MPIS if n != mpi_impl.name and mpi.MPIS[n].available()]
    if not others:
        pytest.skip(f"needs a second MPI beside {mpi_impl.name}")
    return others[0]


def _lib(name: str):
    try:
        return runtime.build([name])[name]
    except library.Error as exc:
        pytest.fail(f"{exc.message}\n{exc.output or ''}")


def _run(mpi_impl, argv, lib, env=None):
    rank_env = {"VHPC_WAIT": "sleep", "VHPC_STATS": "1", **(env or {})}
    cmd = mpi_impl.launch(N, [str(a) for a in argv], env=rank_env, preload=lib)
    clean = {k: v for k, v in mpi_impl.launcher_env().items()
             if not k.startswith("VHPC_") and k != "LD_PRELOAD"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=clean, timeout=120)
    return proc


def _assert_ran(proc, mpi_impl) -> None:
    """Right results on every rank, with the program's MPI the only one mapped."""
    described = f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.returncode == 0, described
    mapped = re.findall(r"^route: rank (\d+) ok sum=1 mpis=(\S*)$", proc.stdout, re.M)
    assert sorted(int(r) for r, _ in mapped) == list(range(N)), described
    for _, libs in mapped:
        assert libs.split(",") and all(lib.startswith(CORE_LIB[mpi_impl.name])
                                       for lib in libs.split(",")), described
        assert len(libs.split(",")) == 1, f"two MPIs in one process: {libs}\n{described}"
    assert sorted(map(int, re.findall(r"^route: rank (\d+) finalized$", proc.stdout, re.M))) \
        == list(range(N)), described


def _stats_lines(proc) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("vhpc_wait: rank=")]


def test_library_needs_no_mpi(wait_lib):
    """No DT_NEEDED on any MPI: loading the library never loads one."""
    dynamic = subprocess.run(["readelf", "-d", str(wait_lib)], capture_output=True,
                             text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", dynamic)
    assert needed and not [n for n in needed if "mpi" in n.lower()], needed


@pytest.mark.parametrize("late", [False, True], ids=["linked", "dlopen"])
def test_own_mpi_is_intercepted(mpi_impl, wait_lib, route_programs, late):
    argv = ([route_programs["route_loader"], route_programs["route.so"]] if late
            else [route_programs["route"]])
    proc = _run(mpi_impl, argv, wait_lib)
    _assert_ran(proc, mpi_impl)
    refused = REFUSED.findall(proc.stderr)
    if late and mpi_impl.name == "openmpi":
        assert refused == [(_version("openmpi"), "which this process loaded after start-up")] * N, \
            proc.stderr
        assert not _stats_lines(proc), proc.stderr
    else:
        assert not refused, proc.stderr
        assert len(_stats_lines(proc)) == N, proc.stderr


@pytest.mark.parametrize("late", [False, True], ids=["linked", "dlopen"])
def test_other_mpi_is_refused(mpi_impl, route_programs, late):
    other = _other(mpi_impl)
    argv = ([route_programs["route_loader"], route_programs["route.so"]] if late
            else [route_programs["route"]])
    proc = _run(mpi_impl, argv, _lib(other))
    _assert_ran(proc, mpi_impl)
    want = (_version(other), f"this process runs {_version(mpi_impl.name)}")
    assert REFUSED.findall(proc.stderr) == [want] * N, proc.stderr
    assert not _stats_lines(proc), proc.stderr  # not one call intercepted


# semantics_f08: the other build exports mpi_f08 entry points too (Open MPI's
# mpi_send_f08_..., MPICH's mpi_wait_f08_...), some of which this MPI's program calls.
@pytest.mark.parametrize("prog", ["semantics_f", "semantics_f08"])
def test_other_mpi_is_refused_in_fortran(mpi_impl, programs, prog):
    if prog not in programs:
        pytest.skip(f"no Fortran compiler, or no mpi_f08 module: {mpi_impl.mpif90}")
    other = _other(mpi_impl)
    proc = _run(mpi_impl, [programs[prog]], _lib(other))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    finalized = re.findall(rf"^{prog}: rank (\d+) finalized$", proc.stdout, re.M)
    assert sorted(map(int, finalized)) == list(range(N)), proc.stdout + proc.stderr
    assert len(REFUSED.findall(proc.stderr)) == N and not _stats_lines(proc), proc.stderr
