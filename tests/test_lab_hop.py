"""The host state probe (bench/hop_probe, vhpc.lab.hop): how far apart the two
CPUs are, and when a set of probes shows two states."""

from __future__ import annotations

import subprocess

import pytest

from vhpc import paths
from vhpc.lab import calibrate, hop

PROBE = paths.build_dir() / "bench" / "hop_probe"


def test_two_groups_of_hops_a_factor_apart_are_two_states():
    cut = hop.threshold([30, 31, 29, 28, 160, 150, 170, 155])
    assert 31 < cut < 150
    assert [hop.state(h, cut) for h in (29, 165)] == ["near", "far"]


def test_one_state_and_a_few_stalled_probes_are_one_state():
    assert hop.threshold([30, 31, 29, 33, 28, 32]) is None
    # 5 % of the probes far above the rest: stalled, not a state
    assert hop.threshold([30.0] * 38 + [5000, 7000]) is None
    assert hop.threshold([]) is None and hop.threshold([30]) is None


def test_a_state_needs_both_a_threshold_and_a_hop():
    assert hop.state(None, 70) is None and hop.state(30, None) is None


@pytest.fixture(scope="module")
def built():
    calibrate.build_bench()
    return PROBE


def test_the_probe_reports_a_one_way_hop_between_two_cpus(built):
    if hop.cpus() is None:
        pytest.skip("one CPU allowed here: no hop to measure")
    out = subprocess.run([str(built), "-b", "200"], capture_output=True, text=True, check=True)
    header, row = out.stdout.strip().splitlines()
    assert header == "batches,median_ns,p10_ns,p90_ns"
    batches, median, p10, p90 = map(int, row.split(","))
    assert batches == 200 and 0 < p10 <= median <= p90
    assert hop.measure() > 0


@pytest.mark.parametrize("args", [["-c", "0,0"], ["-c", "x"], ["-b", "0"], ["-z"]])
def test_the_probe_rejects_bad_usage(built, args):
    assert subprocess.run([str(built), *args], capture_output=True).returncode == 2
