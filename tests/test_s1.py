"""S1 (flat scheduling domains for guests) in the simulator: `vhpc reproduce s1`'s
record format, determinism, and the brief's directions, compared between simulated
cells, never with fixed numbers. Directions the model does not reproduce are
strict xfails with the reason (docs/validation.md, "S1"), so a model change that
makes them hold is noticed.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vhpc.cli import main
from vhpc.sim.reproduce import s1

KEYS = set(s1.RECORD_KEYS)


@pytest.fixture(scope="module")
def records() -> list[dict]:
    recs, _, _ = s1.run()
    return recs


def pair(records, host, workload, p):
    [h] = [r for r in records if (r["host_cores"], r["workload"], r["parallelism"], r["domains"])
           == (host, workload, p, "hierarchical")]
    [f] = [r for r in records if (r["host_cores"], r["workload"], r["parallelism"], r["domains"])
           == (host, workload, p, "flat")]
    return h, f


LOW = [p for p in s1.LEVELS["pipe"] if p <= 4]
FULL = max(s1.LEVELS["pipe"])


def test_records_cover_every_cell_with_the_issue_keys(records):
    cells = {(r["host_cores"], r["workload"], r["parallelism"], r["domains"]) for r in records}
    expected = {(h, w, p, d) for h in s1.HOSTS for w, ps in s1.LEVELS.items() for p in ps
                for d in s1.DOMAINS}
    assert cells == expected
    for r in records:
        assert set(r) == KEYS
        assert r["experiment"] == "s1" and r["throughput"] > 0


def test_the_cli_prints_the_records_as_json():
    out = CliRunner().invoke(main, ["reproduce", "s1", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data and all(set(r) == KEYS for r in data)


def test_a_rerun_gives_the_same_records(records):
    again, _, _ = s1.run()
    assert again == records


@pytest.mark.parametrize("host", s1.HOSTS)
def test_flat_pipe_context_switching_is_faster_at_low_parallelism(records, host):
    for p in LOW:
        h, f = pair(records, host, "pipe", p)
        assert f["throughput"] > 1.5 * h["throughput"], (host, p)
        # ... and more hops per second means more context switches.
        assert f["context_switches"] > h["context_switches"], (host, p)


@pytest.mark.parametrize("host", s1.HOSTS)
def test_the_pipe_gain_shrinks_at_full_load(records, host):
    low = [f["throughput"] / h["throughput"] for h, f in (pair(records, host, "pipe", p)
                                                          for p in LOW)]
    h, f = pair(records, host, "pipe", FULL)
    assert f["throughput"] / h["throughput"] < min(low)


@pytest.mark.parametrize("host", s1.HOSTS)
def test_flat_migrates_less_in_a_build_at_full_load(records, host):
    h, f = pair(records, host, "build", max(s1.LEVELS["build"]))
    assert f["migrations"] < h["migrations"]


@pytest.mark.xfail(strict=True, reason="the model's flat wake-ups pull a wakee to its waker's "
                   "vCPU (wake_affine) where the hierarchy keeps it on its idle sibling: more "
                   "migrations at low parallelism (docs/validation.md, S1)")
def test_flat_always_migrates_less(records):
    for h, f in pairs_all(records):
        assert f["migrations"] < h["migrations"], (h, f)


@pytest.mark.xfail(strict=True, reason="Xen 3.4's tick-time _csched_cpu_pick never moves a lone "
                   "busy vCPU (its own socket counts it idle, a tie), so -j1 is not scattered over "
                   "the 48 cores, and a build gains < 0.1 % (docs/validation.md, S1)")
def test_flat_builds_faster_on_48_cores_at_j1(records):
    h, f = pair(records, 48, "build", 1)
    assert f["throughput"] > 1.005 * h["throughput"]


def test_the_host_size_now_changes_a_loaded_build(records):
    """Credit's tick-time pick moves busy vCPUs to the socket with more idle cores,
    so the three hosts, which split their idle cores differently, give different
    hierarchical -j16 builds (identical records before the pick was modelled)."""
    builds = {host: pair(records, host, "build", max(s1.LEVELS["build"]))[0] for host in s1.HOSTS}
    assert len({(r["migrations"], r["throughput"]) for r in builds.values()}) == len(s1.HOSTS)


def test_j1_is_the_same_on_every_host(records):
    """At -j1 one vCPU is busy at a time: its socket counts it idle, which ties with
    the other socket on every host, so no host size changes the run."""
    for d in s1.DOMAINS:
        cells = [r for r in records if (r["workload"], r["parallelism"], r["domains"])
                 == ("build", 1, d)]
        assert len({(r["migrations"], r["context_switches"], r["throughput"]) for r in cells}) == 1


def test_the_pick_barely_changes_a_longer_pipe(monkeypatch):
    """docs/validation.md's check that 20 ms (two credit ticks) do not hide the pick:
    over 200 ms on 48 cores it moves vCPUs (most at 8 copies) yet changes no pipe
    throughput by more than 0.01 %."""
    import tomli_w

    from vhpc.sim import run as sim

    costs = s1.host_costs()
    monkeypatch.setattr(s1, "PIPE_MS", 200)
    setups = [s1.Setup(48, d, "pipe", p) for p in s1.LEVELS["pipe"] for d in s1.DOMAINS]
    results = {}
    for pick in (False, True):
        monkeypatch.setattr(s1, "CPU_PICK", pick)
        reports = sim.run_texts([(tomli_w.dumps(st.scenario(costs)), "pick", None)
                                 for st in setups])
        results[pick] = [s1._measure(st, rep) for st, rep in zip(setups, reports)]
    assert sum(r[3] for r in results[False]) == 0
    assert sum(r[3] for r in results[True]) > 0
    for off, on in zip(results[False], results[True]):
        assert abs(on[2] / off[2] - 1) < 1e-4


def pairs_all(records):
    return s1.pairs(records)
