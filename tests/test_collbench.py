"""`make bench-coll` (vhpc.runtime.collbench): bench/coll_probe measures every call
it names under each setting, with the settings reaching the ranks, and the table
compares the library's choice with the twins."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from vhpc import mpi, runtime
from vhpc.runtime import collbench
from vhpc.runtime.bench import build_bench


class FakeMpi(NamedTuple):
    name: str
    label: str


@pytest.fixture(scope="module")
def debian_mpich() -> mpi.MpiImpl:
    try:
        impl = mpi.find("mpich")
    except mpi.MpiNotFound as exc:
        pytest.skip(str(exc))
    build_bench()
    runtime.build(["mpich"])
    return impl


@pytest.mark.parametrize("op", collbench.OPS)
def test_every_call_is_measured_on_a_shared_cpu(debian_mpich, op):
    us = collbench.run_cell(collbench.Cell(debian_mpich, "1 CPU", collbench.CHOICE, op), 50)
    assert 0 < us < 10_000  # as is, MPICH busy-polls for milliseconds a call here


def test_the_settings_reach_the_ranks(debian_mpich):
    twins, _ = collbench.command(collbench.Cell(debian_mpich, "1 CPU", collbench.TWINS,
                                                "fence"), 10)
    choice, _ = collbench.command(collbench.Cell(debian_mpich, "2 CPUs", collbench.CHOICE,
                                                 "fence"), 10)
    assert twins[:3] == ["taskset", "-c", "0"] and choice[:3] == ["taskset", "-c", "0,1"]
    line = " ".join(twins)
    assert "VHPC_WAIT adaptive" in line and "VHPC_COLLECTIVES nonblocking" in line
    assert "libvhpc_wait.so" in line and "VHPC_COLLECTIVES" not in " ".join(choice)
    assert collbench.settings(debian_mpich) == [collbench.TWINS, collbench.CHOICE]


def test_a_run_without_a_figure_is_an_error():
    with pytest.raises(ValueError, match="no us_per_call"):
        collbench.parse("op,barrier\n")
    assert collbench.parse("op,barrier\nus_per_call,12.500\n") == 12.5


def test_the_table_gives_the_ratio_of_medians_with_its_interval():
    impl = FakeMpi("mpix", "MPIX 1.0")
    samples = {collbench.Cell(impl, "1 CPU", collbench.TWINS, "barrier"): [20.0, 22.0, 21.0],
               collbench.Cell(impl, "1 CPU", collbench.CHOICE, "barrier"): [10.0, 11.0, 10.5],
               collbench.Cell(impl, "1 CPU", "mpich-throttle", "barrier"): [15.0, 16.0, 14.0]}
    text = collbench.markdown(samples, reps=3, iterations=100)
    row = next(line for line in text.splitlines() if line.startswith("| MPIX 1.0"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[:6] == ["MPIX 1.0", "1 CPU", "barrier", "21.0 (20.0–22.0)",
                         "10.5 (10.0–11.0)", "15.0 (14.0–16.0)"]
    ratio, interval = cells[6].split(" ", 1)
    assert ratio == "0.50"
    low, high = (float(x) for x in interval.strip("()").split("–"))
    assert low <= 0.5 <= high
    assert "`mpich-throttle` µs" in text
