"""vhpc.lab.hints_probe: one lab run with the ranks' VHPC_STATS lines and the
slicers' counters (docs/lab.md, *The hint channel*)."""

from __future__ import annotations

import pytest

from vhpc import mpi, paths
from vhpc.host import placement
from vhpc.lab import hints_probe

HANDOVER = paths.REPO / "experiments" / "s4-hints-handover.toml"


def test_a_hinted_run_shows_its_ranks_stats_and_the_slicers_hand_overs():
    ok, reason = placement.freezer_available()
    if not ok:
        pytest.skip(f"freezer writes impossible here: {reason}")
    try:
        mpi.find("mpich")
    except mpi.MpiNotFound as exc:
        pytest.skip(str(exc))
    # VHPC_WAIT=yield overrides the cell's policy: the extra variables reach the ranks
    seen = hints_probe.probe(HANDOVER, "mpich", "one-cpu-hints", {"VHPC_WAIT": "yield"})
    assert seen.status == "ok" and seen.metrics["lat_8_us"][0] > 0, seen
    assert len(seen.ranks) == 2 and all(" policy=yield " in line for line in seen.ranks), seen.ranks
    (counters,) = seen.slicers
    # one CPU, two single-rank domains: the ranks hand the CPU over themselves
    assert 0 < counters["handovers"] <= counters["switches"], counters


def test_bad_arguments_are_refused_naming_them(capsys):
    with pytest.raises(SystemExit) as exc:
        hints_probe.main([str(HANDOVER), "mpich", "one-cpu-hints", "VHPC_STATS"])
    assert exc.value.code == 2
    assert "not VAR=VALUE: VHPC_STATS" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no runnable cell with mpi 'mpich' and config 'nope'"):
        hints_probe.probe(HANDOVER, "mpich", "nope", {})
