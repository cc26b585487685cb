"""`make bench-ci`'s bookkeeping (vhpc.runtime.cibench, cistore) with the jobs faked:
every finished job is kept, a rerun after an interruption runs only the others, and
a module that hangs in every setting is checked without over-commitment and, when it
hangs there too, left out of the comparison. tests/test_runtime_wheels.py runs a real
module of mpi4py's suite."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

import pytest
from rich.console import Console

from vhpc.runtime import cibench, cistore

MODS = ["test_a", "test_hangs", "test_slow_as_is"]


def fake_mpi(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, inst=SimpleNamespace(identity=f"{name.upper()} 1.0"))


def groups_and_checks():
    mpi = fake_mpi("mpix")
    groups = [[cibench.Cell(mpi, place, s) for s in ("default", "vhpc run")]
              for place in ("2 CPUs", "1 CPU")]
    return groups, {mpi.name: cibench.Cell(mpi, cibench.CHECK_PLACE, "default")}


@pytest.fixture
def jobs(monkeypatch):
    """Fake run_module: test_hangs is capped everywhere (also without over-commitment),
    test_slow_as_is is capped as is only; the rest pass 3 tests in 1 s."""
    ran: list[tuple[str, str, str, int]] = []

    def run_module(cell, test, module, cap, ranks=cibench.RANKS):
        ran.append((cell.place, cell.setting, module, ranks))
        if module == "test_hangs" or (module == "test_slow_as_is" and cell.setting == "default"):
            outcome = cibench.Outcome(cap, None, capped=True)
        else:
            outcome = cibench.Outcome(1.0, cibench.Counts(3, 0, 1))
        cell.outcomes[module] = outcome
        if len(ran) == interrupt_at[0]:
            raise KeyboardInterrupt
        return outcome

    interrupt_at = [0]
    monkeypatch.setattr(cibench, "run_module", run_module)
    return SimpleNamespace(ran=ran, interrupt_at=interrupt_at)


def test_an_interrupted_run_keeps_its_jobs_and_the_rerun_runs_only_the_rest(tmp_path, jobs):
    console = Console(file=io.StringIO())
    jobs.interrupt_at[0] = 5
    groups, checks = groups_and_checks()
    with pytest.raises(cibench.Interrupted, match="every finished job is kept") as info:
        cibench.run_jobs(groups, checks, MODS, tmp_path, 100.0, tmp_path / "store", console)
    assert info.value.exit_code == 130
    # The fifth job raised after it ended, as a Ctrl-C between jobs would: four are kept.
    assert len(list((tmp_path / "store").rglob("*.parquet"))) == 4
    first = list(jobs.ran)
    # --kept: the table of what is kept so far, running nothing.
    groups, checks = groups_and_checks()
    cibench.run_jobs(groups, checks, MODS, tmp_path, 100.0, tmp_path / "store", console, run=False)
    assert jobs.ran == first and sum(len(c.outcomes) for g in groups for c in g) == 4
    table = cibench.markdown([c for g in groups for c in g], MODS, 100.0)
    assert "| MPIX 1.0 | 2 CPUs | vhpc run | 2 | 101 | 3 |" in table  # test_a and test_hangs
    assert "Run in part so far (`make bench-ci` goes on with them): MPIX 1.0 on 2 CPUs " \
        "(2 of 3 modules)." in table

    jobs.ran.clear()
    jobs.interrupt_at[0] = 0
    groups, checks = groups_and_checks()
    cibench.run_jobs(groups, checks, MODS, tmp_path, 100.0, tmp_path / "store", console)
    # Module by module across a group's settings; test_hangs once more with 2 ranks on
    # 2 CPUs after its 2-CPU group; nothing that was kept runs again.
    assert first[:4] == [("2 CPUs", "default", "test_a", 4), ("2 CPUs", "vhpc run", "test_a", 4),
                         ("2 CPUs", "default", "test_hangs", 4),
                         ("2 CPUs", "vhpc run", "test_hangs", 4)]
    assert jobs.ran[0] == ("2 CPUs", "default", "test_hangs", 2)
    assert not set(first[:4]) & set(jobs.ran)
    assert len(jobs.ran) == 2 * 3 * 2 + 1 - 4
    # A third run finds everything kept, and reads back the same outcomes.
    jobs.ran.clear()
    again, checks_again = groups_and_checks()
    cibench.run_jobs(again, checks_again, MODS, tmp_path, 100.0, tmp_path / "store", console)
    assert jobs.ran == []
    def kept(gs):
        return [{m: (o.seconds, o.counts, o.capped) for m, o in c.outcomes.items()}
                for g in gs for c in g]
    assert kept(again) == kept(groups)
    # Another cap is another experiment: nothing is reused.
    cibench.run_jobs(*groups_and_checks(), MODS, tmp_path, 50.0, tmp_path / "store", console)
    assert len(jobs.ran) == 2 * 3 * 2 + 1
    # So is another number of ranks (--ranks 5): every job with 5, the check still with 2,
    # and the table says so and names the command that made it.
    jobs.ran.clear()
    five, checks_five = groups_and_checks()
    cibench.run_jobs(five, checks_five, MODS, tmp_path, 100.0, tmp_path / "store", console,
                     ranks=5)
    assert {r for *_, r in jobs.ran} == {5, 2} and len(jobs.ran) == 2 * 3 * 2 + 1
    assert [r for r in jobs.ran if r[3] == 2] == [("2 CPUs", "default", "test_hangs", 2)]
    # Jobs just run carry when and at which revision they were kept, as read-back ones do.
    assert all(o.finished_at.endswith(" UTC") and o.revision
               for g in five for c in g for o in c.outcomes.values())
    table = cibench.markdown([c for g in five for c in g], MODS, 100.0, ranks=5,
                             command_line="vhpc runtime bench-ci --ranks 5")
    assert "Generated by `vhpc runtime bench-ci --ranks 5`; do not edit by hand. 5 ranks;" in table


def test_a_module_hanging_without_over_commitment_is_left_out_and_named(tmp_path, jobs):
    groups, checks = groups_and_checks()
    cibench.run_jobs(groups, checks, MODS, tmp_path, 100.0, tmp_path / "store",
                     Console(file=io.StringIO()))
    assert cibench.own_failures(list(checks.values())) == {"mpix": {"test_hangs": "capped"}}
    table = cibench.markdown([c for g in groups for c in g], MODS, 100.0,
                             checks=list(checks.values()))
    rows = {tuple(f.strip() for f in line.split("|")[2:4]): line.split("|")
            for line in table.splitlines() if line.startswith("| MPIX")}
    plain, fixed = rows[("2 CPUs", "default")], rows[("2 CPUs", "vhpc run")]
    # Two modules compared (test_hangs left out); as is: 1 s + the 100 s cap; vhpc: 2 s.
    assert [f.strip() for f in plain[4:7]] == ["2", "101", "3"]
    assert [f.strip() for f in fixed[4:7]] == ["2", "2", "6"]
    assert [f.strip() for f in fixed[10:14]] == ["–", "50.5×", "1.0× (1)", "none"]
    assert "- MPIX 1.0: hangs (capped)" in table



def test_counts_survive_interleaved_summaries():
    """Four ranks print their unittest summaries into one stream; unittest writes
    "OK" and " (skipped=12)" separately, so one rank's line can split another's."""
    ran = "Ran 60 tests in 0.2s\n"
    interleaved = ran * 2 + "OK\nOK (skipped=12)\n" + ran * 2 + "OK\n (skipped=12)\nOK (skipped=12)\n"
    assert cibench.parse(interleaved) == cibench.Counts(60, 0, 12)
    failed = ran + "FAILED\nOK (skipped=1)\n (failures=1, errors=2, skipped=1)\n"
    assert cibench.parse(failed) == cibench.Counts(60, 3, 1)
    assert cibench.parse("Ran 5 tests in 1s\n") is None  # no OK or FAILED: no summary


def test_counts_survive_summaries_glued_together():
    """A stream seen in a kept job (MPICH 5, 1 CPU, `vhpc run`, test_cco_pr_ngh_buf):
    two ranks' "Ran" lines and their "OK"s written with no newline between them,
    which the parser took for a job without a summary."""
    glued = ("--------\n\nRan 12 tests in 1.239s\nRan 12 tests in 1.235sRan 12 tests in "
             "1.228s\n\nRan 12 tests in 1.232s\n\n\n\n\n\nOKOK\nOKOK\n\n\n\n")
    assert cibench.parse(glued) == cibench.Counts(12, 0, 0)
    assert cibench.parse("Ran 3 tests in 0.1sOK (skipped=1)\n") == cibench.Counts(3, 0, 1)
    assert cibench.parse("Ran 3 tests in 0.1sFAILEDOK (failures=1)\n") == cibench.Counts(3, 1, 0)
    # An "OK" inside a word or a test's own output is no summary.
    assert cibench.parse("Ran 3 tests in 0.1s\nOKAY then\nBLOCK\n") is None


def test_vhpc_run_is_compared_with_the_best_own_setting_with_an_interval():
    """The *vs own best* column: vhpc run's summed wall over that of the MPI's fastest
    own setting, over the modules all of them finished, with a paired bootstrap
    interval that holds the ratio; the other rows leave it empty."""
    mpi = fake_mpi("mpix")
    mods = [f"test_{i}" for i in range(8)]
    times = {"default": [9.0] * 8,
             "own-slow": [2.0] * 8,
             "own-fast": [1.0, 2.0, 1.0, 3.0, 1.0, 2.0, 1.0, 1.0],
             "vhpc run": [1.1, 2.0, 1.3, 3.0, 0.9, 2.4, 1.0, 1.2]}
    cells = [cibench.Cell(mpi, "2 CPUs", s) for s in times]
    for c in cells:
        c.outcomes = {m: cibench.Outcome(t, cibench.Counts(3, 0, 1))
                      for m, t in zip(mods, times[c.setting])}
    cells[-1].outcomes["test_7"] = cibench.Outcome(100.0, None, capped=True)
    cells[2].outcomes["test_6"] = cibench.Outcome(100.0, None, capped=True)
    table = cibench.markdown(cells, mods, 100.0)
    rows = {line.split("|")[3].strip(): line.split("|")[-2].strip()
            for line in table.splitlines() if line.startswith("| MPIX")}
    assert rows["default"] == rows["own-slow"] == rows["own-fast"] == ""
    # test_6 and test_7 are left out (capped in one of them): 10.7 s against 10 s.
    ratio, low, high, best, n, verdict = re.fullmatch(
        r"(\S+) \((\S+)–(\S+)\) `(\S+)`, (\d+): (met|not met)", rows["vhpc run"]).groups()
    assert (float(ratio), best, int(n)) == (1.07, "own-fast", 6)
    assert float(low) <= float(ratio) <= float(high) and float(low) < float(high)
    # The verdict is the rule's on the unrounded upper end.
    assert verdict == ("met" if float(high) < cibench.OWN_BEST_LIMIT else "not met")


def test_an_mpi_without_own_settings_says_none():
    mpi = fake_mpi("mpix")
    cells = [cibench.Cell(mpi, "1 CPU", s) for s in ("default", "vhpc run")]
    for c in cells:
        c.outcomes = {m: cibench.Outcome(1.0, cibench.Counts(3, 0, 1)) for m in MODS}
    row = next(line for line in cibench.markdown(cells, MODS, 100.0).splitlines()
               if "| vhpc run |" in line)
    assert row.split("|")[-2].strip() == "none"


def test_a_group_is_never_made_of_two_machines_jobs(tmp_path, jobs, monkeypatch):
    """Kept jobs record their host. A group (an MPI and placement) finished on another
    machine is reused whole and the table names that machine for it; a group left
    unfinished there runs again here from the start; jobs kept before hosts were
    recorded are never reused."""
    console, store = Console(file=io.StringIO()), tmp_path / "store"
    monkeypatch.setattr(cibench.provenance, "host", lambda: "machine A")
    jobs.interrupt_at[0] = 2 * 3 + 1 + 2  # the 2-CPU group and its check, 2 jobs of 1 CPU
    with pytest.raises(cibench.Interrupted):
        cibench.run_jobs(*groups_and_checks(), MODS, tmp_path, 100.0, store, console)
    monkeypatch.setattr(cibench.provenance, "host", lambda: "machine B")
    jobs.ran.clear()
    jobs.interrupt_at[0] = 0
    groups, checks = groups_and_checks()
    cibench.run_jobs(groups, checks, MODS, tmp_path, 100.0, store, console)
    assert jobs.ran == [("1 CPU", s, m, 4) for m in MODS for s in ("default", "vhpc run")]
    assert {o.host for c in groups[0] for o in c.outcomes.values()} == {"machine A"}
    assert {o.host for c in groups[1] for o in c.outcomes.values()} == {"machine B"}
    footer = cibench.markdown([c for g in groups for c in g], MODS, 100.0).split("## Host")[1]
    assert "- host machine A: MPIX 1.0 on 2 CPUs\n- host machine B: MPIX 1.0 on 1 CPU" in footer

    # A job kept without a host (older stores) is never reused: in this host's group it
    # alone runs again; in the other machine's, the group is no longer one machine's
    # whole and runs again here.
    for place in ("1 CPU", "2 CPUs"):
        file = cistore.path(store, "mpix", place, "default", "test_a", 4)
        cistore.pq.write_table(cistore.pq.read_table(file).drop_columns(["host"]), file)
        jobs.ran.clear()
        cibench.run_jobs(*groups_and_checks(), MODS, tmp_path, 100.0, store, console)
        assert jobs.ran == ([("1 CPU", "default", "test_a", 4)] if place == "1 CPU" else
                            [("2 CPUs", s, m, 4) for m in MODS for s in ("default", "vhpc run")])


def test_a_job_that_exits_0_without_a_summary_runs_once_more(tmp_path, monkeypatch):
    """The launcher exits 0 but no rank's summary reached the stream: the job runs
    again, its second run makes the row, and the first one's streams are named."""
    from vhpc.host import process
    streams = iter([b"", b"Ran 3 tests in 0.1s\n\nOK (skipped=1)\n",
                    b"Ran 3 tests in 0.1s\n", b"Ran 3 tests in 0.1s\n"])

    def run_commands(cmds, env, timeout, cwds):
        out = process.Outcome(0)
        out.stderr.feed(next(streams))
        return [out]

    monkeypatch.setattr(cibench, "run_commands", run_commands)
    monkeypatch.setattr(cibench, "command", lambda cell, test, module, ranks: (["true"], {}, None))
    cell = cibench.Cell(fake_mpi("mpix"), "2 CPUs", "default")
    first = cibench.run_module(cell, tmp_path, "test_a", 100.0)
    assert first.counts == cibench.Counts(3, 0, 1) and not first.broken
    assert first.rerun.startswith(cibench.SILENT) and "stderr 0 bytes" in first.rerun
    # Kept and read back with its reason; the table counts it and names it.
    cistore.save(tmp_path, cell, "test_a", first, ranks=4, cap=100.0, revision="r", host="h")
    again = cibench.Outcome.from_row(cistore.load(tmp_path, cell, "test_a", ranks=4, cap=100.0))
    assert again.rerun == first.rerun
    table = cibench.markdown([cell], ["test_a"], 100.0)
    assert f"- mpix · 2 CPUs · default: test_a: {first.rerun}" in table
    # A summary cut short ("Ran" without OK or FAILED) runs again too, but only once:
    # a second silent run is the row, marked broken.
    second = cibench.run_module(cell, tmp_path, "test_b", 100.0)
    assert second.counts is None and second.broken.startswith(cibench.SILENT)
    assert "Ran 3 tests" in second.rerun


def test_repeated_runs_go_side_by_side_and_a_module_counts_its_median(tmp_path, monkeypatch):
    """--repeat 3: the settings take turns run by run; each module counts its median run,
    kept runs count in a later table (also without --repeat), and the table lists every
    run's time."""
    ran, times = [], iter([5.0, 1.0, 9.0, 2.0, 7.0, 3.0, 4.0, 8.0])

    def run_module(cell, test, module, cap, ranks=cibench.RANKS):
        ran.append((cell.setting, module))
        return cibench.Outcome(next(times), cibench.Counts(3, 0, 0))

    monkeypatch.setattr(cibench, "run_module", run_module)
    console, store = Console(file=io.StringIO()), tmp_path / "store"
    mpi = fake_mpi("mpix")
    group = [cibench.Cell(mpi, "2 CPUs", s) for s in ("default", "vhpc run")]
    check = {mpi.name: cibench.Cell(mpi, cibench.CHECK_PLACE, "default")}
    cibench.run_jobs([group], check, ["test_a"], tmp_path, 100.0, store, console, repeat=3)
    assert ran == [("default", "test_a"), ("vhpc run", "test_a")] * 3
    assert [c.outcomes["test_a"].seconds for c in group] == [7.0, 2.0]  # of 5/9/7, 1/2/3
    # One more run of each, asked for later: the median of four is the lower middle one.
    cibench.run_jobs([group], check, ["test_a"], tmp_path, 100.0, store, console, repeat=4)
    assert len(ran) == 8 and [c.outcomes["test_a"].seconds for c in group] == [5.0, 2.0]
    again = [cibench.Cell(mpi, "2 CPUs", s) for s in ("default", "vhpc run")]
    cibench.run_jobs([again], check, ["test_a"], tmp_path, 100.0, store, console)
    assert len(ran) == 8 and [len(c.runs["test_a"]) for c in again] == [4, 4]
    table = cibench.markdown(again, ["test_a"], 100.0)
    assert "- MPIX 1.0 · 2 CPUs · default: a 5.0 / 9.0 / 7.0 / 4.0 s" in table
    assert "| MPIX 1.0 | 2 CPUs | vhpc run | 1 | 2 |" in table
