"""bench/ kernels (beff, stream, lu, npb_*): CSV shape, self-checks, options.

Every kernel runs briefly in class S on 1, 2 and 3 ranks with each installed
MPI. Speed is not checked (that is the benchmark's business); what is checked:
the CSV, that the kernel verified its own result, that figures which do not
depend on the number of ranks agree across rank counts, that bad options fail
with the usage, and that each kernel's check really fails on a corrupted value.
"""

from __future__ import annotations

import csv
import io
import math
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from vhpc import mpi

MPIS = mpi.available()
needs_mpi = pytest.mark.skipif(not MPIS, reason="no MPI installed (mpicc.mpich / mpicc.openmpi)")
RANKS = [1, 2, 3]
SIZES = [2**k for k in range(11)]  # beff -M 1024


@dataclass(frozen=True)
class Kernel:
    args: tuple[str, ...]           # short class S run, the same on every rank count
    metrics: tuple[str, ...]        # figures it must report besides time and verified
    corrupt_message: str            # what -C must make it say on stderr
    same_for_any_ranks: dict[str, float]  # figure -> relative tolerance across rank counts


KERNELS = {
    "beff": Kernel(("-M", "1024", "-t", "0.005"),
                   ("beff_MBps", "lat_us",
                    *(f"{p}_{s}_MBps" for s in SIZES for p in ("ring", "random"))),
                   "received byte", {}),
    "stream": Kernel(("-n", "100000", "-r", "3"),
                     ("copy_MBps", "scale_MBps", "add_MBps", "triad_MBps"),
                     "mean relative error", {"elements_per_rank": 0}),
    # lu's residual is rounding error itself: the order of its sums changes it.
    "lu": Kernel(("-c", "S"), ("n", "mflops", "residual"), "scaled residual", {}),
    "npb_is": Kernel(("-c", "S"), ("mops", "keys"), "npb_is:", {"keys": 0}),
    "npb_ep": Kernel(("-c", "S"), ("mops", "sx", "sy", "gaussian_pairs"), "sx =",
                     {"sx": 1e-9, "sy": 1e-9, "gaussian_pairs": 0}),
    "npb_cg": Kernel(("-c", "S", "-i", "3"), ("mflops", "zeta", "residual", "nnz"),
                     "relative residual", {"zeta": 1e-9, "nnz": 0}),
    "npb_ssor": Kernel(("-c", "S", "-i", "5"),
                       ("mops", "residual_initial", "residual_final"),
                       "serial recomputation gives",
                       {"residual_initial": 1e-9, "residual_final": 1e-9}),
}


def run(build: Path, impl: mpi.MpiImpl, kernel: str, n: int, *args: str):
    cmd = impl.launch(n, [str(build / "bench" / impl.name / kernel), *args])
    return subprocess.run(cmd, env=impl.launcher_env(), capture_output=True, text=True,
                          timeout=60)


def figures(stdout: str) -> dict[str, tuple[float, str]]:
    reader = csv.reader(io.StringIO(stdout))
    assert next(reader) == ["metric", "value", "unit"]
    table = {}
    for metric, value, unit in reader:
        assert metric not in table, f"{metric} reported twice"
        table[metric] = (float(value), unit)
    return table


@pytest.fixture(scope="module")
def results(build):
    """figures(impl, kernel, n): one verified run's figures, run once per module."""
    cache: dict[tuple[str, str, int], dict] = {}

    def get(impl: mpi.MpiImpl, kernel: str, n: int) -> dict:
        key = (impl.name, kernel, n)
        if key not in cache:
            proc = run(build, impl, kernel, n, *KERNELS[kernel].args)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            cache[key] = figures(proc.stdout)
        return cache[key]

    return get


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n", RANKS)
def test_kernel_verifies_and_reports(results, impl, kernel, n):
    table = results(impl, kernel, n)
    assert table["verified"] == (1.0, "bool")
    seconds, unit = table["time"]
    assert unit == "s" and seconds > 0
    missing = set(KERNELS[kernel].metrics) - set(table)
    assert not missing, f"missing figures: {sorted(missing)}"
    for metric, (value, _) in table.items():
        assert math.isfinite(value), metric
    for metric in KERNELS[kernel].metrics:
        if metric.endswith(("_MBps", "mops", "mflops")) or metric == "lat_us":
            assert table[metric][0] > 0, metric


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
@pytest.mark.parametrize("kernel", [k for k in KERNELS if KERNELS[k].same_for_any_ranks])
def test_kernel_result_does_not_depend_on_rank_count(results, impl, kernel):
    # The same problem split differently: only the order of sums may differ.
    one = results(impl, kernel, 1)
    for n in RANKS[1:]:
        other = results(impl, kernel, n)
        for metric, rel in KERNELS[kernel].same_for_any_ranks.items():
            assert other[metric][0] == pytest.approx(one[metric][0], rel=rel, abs=0), (metric, n)


@needs_mpi
def test_beff_warms_up_unmeasured_and_still_verifies(build):
    # -w: 1-byte ring exchanges for that long before the first size is measured.
    impl = MPIS[0]
    started = time.monotonic()
    proc = run(build, impl, "beff", 2, *KERNELS["beff"].args, "-w", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started >= 0.5
    table = figures(proc.stdout)
    assert table["verified"] == (1.0, "bool") and table["lat_us"][0] > 0


@needs_mpi
def test_npb_ep_reproduces_npb_class_s_sums(results):
    # NPB 3.3 ep.f's class S reference values; the kernel checks them to 1e-8
    # itself, this guards the printed figures.
    table = results(MPIS[0], "npb_ep", 2)
    assert table["sx"][0] == pytest.approx(-3.247834652034740e3, rel=1e-9)
    assert table["sy"][0] == pytest.approx(-6.958407078382297e3, rel=1e-9)


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_check_catches_a_corrupted_value(build, impl, kernel):
    # -C spoils one value after the timed part: the check must fail cleanly.
    proc = run(build, impl, kernel, 2, *KERNELS[kernel].args, "-C")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert KERNELS[kernel].corrupt_message in proc.stderr
    assert "verified" not in proc.stdout


@needs_mpi
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("bad", [["-x"], ["-c", "Z"], ["extra"]])
def test_kernel_rejects_bad_options(build, kernel, bad):
    impl = MPIS[0]
    if bad[0] == "-c" and kernel in ("beff", "stream"):
        bad = ["-t" if kernel == "beff" else "-n", "0"]
    proc = run(build, impl, kernel, 1, *bad)
    assert proc.returncode == 2
    assert "usage:" in proc.stderr
    assert "metric,value" not in proc.stdout


@needs_mpi
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_help(build, kernel):
    impl = MPIS[-1]
    proc = run(build, impl, kernel, 1, "-h")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage:")


@needs_mpi
def test_kernel_states_its_rank_limit(build):
    # npb_ssor needs an interior grid row per rank: class S's 12^3 grid has 10.
    impl = MPIS[-1]
    proc = run(build, impl, "npb_ssor", 11, "-c", "S", "-i", "1")
    assert proc.returncode == 2
    assert "more ranks than interior grid rows" in proc.stderr
