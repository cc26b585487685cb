"""`vhpc reproduce s4`: S0's pressure experiment under co-scheduling. The checks are
the directions the model shows and the record format, never the values."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vhpc.cli import main
from vhpc.sim.reproduce import s0, s4


@pytest.fixture(scope="module")
def records() -> list[dict]:
    result = CliRunner().invoke(main, ["reproduce", "s4", "--json", "--seeds", "2"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def cell(records: list[dict], config: str, library: str, domus: int) -> dict:
    (r,) = [r for r in records if (r["config"], r["library"], r["domus"]) == (config, library, domus)]
    return r


def test_records_have_the_issues_keys_and_every_cell(records):
    assert len(records) == len(s4.CONFIGS) * 4  # IS only by default, 1-4 domUs
    for r in records:
        assert {"experiment", "workload", "config", "time_s"} <= r.keys()
        assert r["experiment"] == "s0-schedulers" and r["workload"] == "is.A.2"
        lo, hi = r["ci95_s"]
        assert lo <= r["time_s"] <= hi and r["seeds"] == 2
        assert (r["published_s"] is not None) == (r["config"] == "credit")
    assert cell(records, "credit", "revised", 3)["published_s"] == s0.TABLE1[("is.A.2", 3)][1]


def test_co_scheduling_removes_what_busy_polling_costs_under_credit(records):
    for domus in (2, 3, 4):
        busy = cell(records, "credit", "original", domus)["time_s"]
        assert cell(records, "gang", "original", domus)["time_s"] < busy
        assert cell(records, "credit", "revised", domus)["time_s"] < busy
    # one domU alone on the two cores: nothing to co-schedule against
    alone = [cell(records, c, lib, 1)["time_s"] for c, lib in s4.CONFIGS]
    assert max(alone) / min(alone) < 1.05
