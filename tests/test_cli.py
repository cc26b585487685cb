"""The `vhpc` command line: version, and `vhpc runtime build|path`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import vhpc
from vhpc import _core, mpi, paths, runtime
from vhpc.cli import main


@pytest.fixture
def run():
    """Invoke the CLI in-process; returns click's Result."""

    def invoke(*args: str, env: dict[str, str] | None = None):
        return CliRunner().invoke(main, list(args), env=env)

    return invoke


@pytest.fixture
def empty_build(tmp_path, monkeypatch) -> Path:
    build = tmp_path / "build"
    build.mkdir()
    monkeypatch.setenv("VHPC_BUILD_DIR", str(build))
    return build


@pytest.fixture
def no_mpi(tmp_path, monkeypatch) -> None:
    """A PATH on which no MPI compiler wrapper can be found."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


# --- version ---------------------------------------------------------------


def test_version_comes_from_native_core(run):
    result = run("--version")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"vhpc, version {_core.version()}"
    assert vhpc.__version__ == _core.version() == _core.__version__
    assert vhpc.__version__.count(".") >= 2


def test_installed_console_script_reports_version():
    exe = Path(sys.executable).with_name("vhpc")
    if not exe.exists():
        pytest.skip("vhpc console script not installed next to this interpreter")
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert _core.version() in proc.stdout


def test_core_stub_matches_native_module():
    import ast

    stub = Path(vhpc.__file__).with_name("_core.pyi")
    declared = set()
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)
    exported = {name for name in dir(_core) if not name.startswith("__")} | {"__version__"}
    assert declared == exported


# --- runtime path ----------------------------------------------------------


def test_path_unknown_mpi_lists_valid_names(run):
    result = run("runtime", "path", "--mpi", "nosuch")
    assert result.exit_code == 2
    assert "nosuch" in result.output
    for name in mpi.MPIS:
        assert name in result.output


def test_path_function_rejects_unknown_mpi():
    with pytest.raises(runtime.UnknownMpi, match="valid names: mpich, openmpi"):
        runtime.path("nosuch")


@pytest.mark.parametrize("name", sorted(mpi.MPIS))
def test_path_not_built(run, empty_build, name):
    if not mpi.MPIS[name].available():
        pytest.skip(f"{name} not installed")
    result = run("runtime", "path", "--mpi", name)
    assert result.exit_code == 2
    assert (
        f"libvhpc_wait for {name} is not built; run `vhpc runtime build`" in result.output
    )
    assert not list(empty_build.rglob("*")), "path must not create anything"


@pytest.mark.parametrize("name", sorted(mpi.MPIS))
def test_path_mpi_not_installed(run, empty_build, no_mpi, name):
    result = run("runtime", "path", "--mpi", name)
    assert result.exit_code == 2
    assert f"MPI '{name}' is not installed (mpicc.{name} not found)" in result.output


@pytest.mark.parametrize("name", sorted(mpi.MPIS))
def test_path_prints_absolute_path_only(run, empty_build, name):
    if not mpi.MPIS[name].available():
        pytest.skip(f"{name} not installed")
    lib = empty_build / "runtime" / name / "libvhpc_wait.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    result = run("runtime", "path", "--mpi", name)
    assert result.exit_code == 0, result.output
    assert result.output == f"{lib.resolve()}\n"
    assert Path(result.output.strip()).is_absolute()


def test_build_dir_is_read_lazily(empty_build):
    assert paths.build_dir() == empty_build.resolve()
    assert runtime.lib_path("mpich") == empty_build.resolve() / "runtime/mpich/libvhpc_wait.so"


# --- runtime build -------------------------------------------------------------


def test_build_without_any_mpi_names_packages(run, empty_build, no_mpi):
    result = run("runtime", "build")
    assert result.exit_code != 0
    for package in ("libmpich-dev", "openmpi-bin", "libopenmpi-dev"):
        assert package in result.output
    assert "no MPI found" in result.output


class FakeMpi:
    """Stands in for mpi.MpiImpl so build() can be tested against a fake runtime/."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.mpicc = f"mpicc.{name}"
        self.mpif90 = f"mpif90.{name}"


@pytest.fixture
def fake_repo(tmp_path, monkeypatch, empty_build):
    """A repo whose runtime/Makefile is under the test's control."""
    repo = tmp_path / "repo"
    (repo / "runtime").mkdir(parents=True)
    monkeypatch.setattr(paths, "REPO", repo)
    monkeypatch.setattr(mpi, "available", lambda: [FakeMpi("mpich"), FakeMpi("openmpi")])

    def write(makefile: str) -> None:
        (repo / "runtime" / "Makefile").write_text(makefile)

    return write


def test_build_runs_make_per_mpi_and_returns_paths(run, fake_repo, empty_build):
    fake_repo(
        "all:\n"
        "\tmkdir -p $(OUT)\n"
        "\techo '$(MPI) $(MPICC)' > $(OUT)/libvhpc_wait.so\n"
    )
    built = runtime.build()
    assert sorted(built) == ["mpich", "openmpi"]
    for name, lib in built.items():
        assert lib == (empty_build / "runtime" / name / "libvhpc_wait.so").resolve()
        assert lib.read_text().split() == [name, f"mpicc.{name}"]

    result = run("runtime", "build")
    assert result.exit_code == 0, result.output
    assert str(built["mpich"]) in result.output.replace("\n", "")


def test_build_failure_shows_make_output(run, fake_repo):
    fake_repo("all:\n\t@echo 'compiler exploded on line 42'\n\t@exit 3\n")
    result = run("runtime", "build")
    assert result.exit_code == 1
    assert "compiler exploded on line 42" in result.output
    assert "building libvhpc_wait for mpich failed (make exited with status" in result.output
    with pytest.raises(runtime.BuildFailed) as info:
        runtime.build()
    assert "compiler exploded" in info.value.output


def test_build_reports_missing_library(fake_repo):
    fake_repo("all:\n\t@true\n")
    with pytest.raises(runtime.BuildFailed, match="did not produce .*libvhpc_wait.so"):
        runtime.build()
