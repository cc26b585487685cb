"""`vhpc sim` and vhpc.sim: the simulator through the CLI and the native bindings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from vhpc import _core, paths, sim
from vhpc.cli import main

SCENARIOS = paths.REPO / "scenarios"
NATIVE = SCENARIOS / "s0-beff-native-up.toml"
CREDIT_PIN = SCENARIOS / "s0-beff-intra-vm-credit-pin.toml"


def invoke(*args: str | Path):
    return CliRunner().invoke(main, [str(a) for a in args])


def report_of(*args: str | Path) -> dict:
    result = invoke("sim", "run", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def broken(tmp_path):
    """write(old, new) -> path of the native scenario with `old` replaced by `new`."""

    def write(old: str, new: str) -> Path:
        text = NATIVE.read_text()
        assert old in text
        path = tmp_path / "broken.toml"
        path.write_text(text.replace(old, new, 1))
        return path

    return write


# --- vhpc sim run ------------------------------------------------------------


@pytest.mark.parametrize("scenario", [NATIVE, CREDIT_PIN], ids=lambda p: p.stem)
def test_run_prints_a_summary(scenario):
    result = invoke("sim", "run", scenario)
    assert result.exit_code == 0, result.output
    out = result.stdout
    report = report_of(scenario)
    assert report["scenario"] in out and str(scenario) in out
    assert f"scheduler {report['scheduler']}" in out
    assert "every job finished" in out
    for column in ["completion s", "useful %", "busy-poll %", "overhead %",
                   "utilisation %", "vCPU switches"]:
        assert column in out
    assert "vCPU migrations:" in out
    assert f"events: {report['events']} in" in out and "wall" in out


@pytest.mark.parametrize("scenario", [NATIVE, CREDIT_PIN], ids=lambda p: p.stem)
def test_run_json_is_the_full_report(scenario):
    report = report_of(scenario)
    assert report["finished"] is True
    assert report["end_ns"] > 0 and report["events"] > 0
    [job] = report["jobs"]
    assert job["name"] == "beff" and job["ranks"] == 2
    assert job["completion_ns"] == report["end_ns"]
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert len(report["cores"]) == {NATIVE: 1, CREDIT_PIN: 2}[scenario]
    assert report["vcpus"]


def test_run_scheduler_comes_from_the_scenario():
    assert report_of(NATIVE)["scheduler"] == "round_robin"
    assert report_of(CREDIT_PIN)["scheduler"] == "credit"


def test_same_seed_gives_identical_json():
    first = invoke("sim", "run", "--json", "--seed", "7", CREDIT_PIN)
    second = invoke("sim", "run", "--json", "--seed", "7", CREDIT_PIN)
    assert first.exit_code == second.exit_code == 0, first.output + second.output
    assert first.stdout == second.stdout
    assert json.loads(first.stdout)["seed"] == 7


def test_trace_has_one_track_per_core(tmp_path):
    trace_file = tmp_path / "out" / "trace.json"
    result = invoke("sim", "run", "--json", "--trace", trace_file, CREDIT_PIN)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # the trace notice goes to stderr
    assert str(trace_file) in result.stderr and "ui.perfetto.dev" in result.stderr
    events = json.loads(trace_file.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert slices
    cores = {c["core"] for c in report["cores"]}
    assert {e["tid"] for e in slices} <= cores
    assert all(isinstance(e["tid"], int) and e["dur"] >= 0 for e in slices)
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert names == {c: f"core {c}" for c in cores}
    # domU1's two vCPUs are pinned to core 0 and took turns there.
    on_core0 = {e["name"] for e in slices if e["tid"] == 0}
    assert {"domU1.v0", "domU1.v1"} <= on_core0
    assert not any(e["name"].startswith("domU1.") for e in slices if e["tid"] != 0)


def test_no_trace_file_without_the_option(tmp_path):
    result = invoke("sim", "run", NATIVE)
    assert result.exit_code == 0
    assert "perfetto" not in result.output


# --- errors: exit 2, the message, no traceback -------------------------------


def assert_user_error(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_unknown_field_exits_2_naming_file_and_field(broken):
    path = broken("cores = 1", "cores = 1\nhyperthreads = 2")
    assert_user_error(invoke("sim", "run", path), str(path), "hyperthreads")


def test_bad_value_exits_2_naming_file_and_field(broken):
    path = broken("cores = 1", "cores = 0")
    assert_user_error(invoke("sim", "run", path), str(path), "host.cores", "got 0")


def test_unknown_scheduler_lists_the_known_ones(broken):
    path = broken('scheduler = "round_robin"', 'scheduler = "bvt"')
    assert_user_error(invoke("sim", "run", path), str(path), "hypervisor.scheduler", "credit")


def test_missing_file_exits_2(tmp_path):
    missing = tmp_path / "nope.toml"
    assert_user_error(invoke("sim", "run", missing), "nope.toml")


# --- catalogue ------------------------------------------------------------------


def test_schedulers_lists_names_and_descriptions():
    result = invoke("sim", "schedulers")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == [
        "credit", "credit2", "sedf", "linux", "slicer", "gang", "round_robin",
    ]
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines)


def test_workloads_lists_workloads_and_wait_policies():
    result = invoke("sim", "workloads")
    assert result.exit_code == 0, result.output
    for name, _ in _core.workloads():
        assert f"\n{name} " in "\n" + result.output
    assert "wait policies: busy_poll, spin, hv_yield, block, adaptive" in result.output


def test_catalogue_matches_the_native_module():
    cat = sim.catalogue()
    assert [n for n, _ in cat["schedulers"]] == [
        "credit", "credit2", "sedf", "linux", "slicer", "gang", "round_robin",
    ]
    assert {"beff", "pingpong", "exchange", "noise"} <= {n for n, _ in cat["workloads"]}
    assert cat["wait_policies"] == ["busy_poll", "spin", "hv_yield", "block", "adaptive"]
    assert [n for n, _ in cat["hint_policies"]] == ["cosched"]


def test_sim_hints_lists_the_hint_policies():
    result = invoke("sim", "hints")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("cosched  co-schedule while synchronising")


# --- bindings and vhpc.sim ------------------------------------------------------


def test_core_run_returns_report_and_optional_trace():
    text = NATIVE.read_text()
    report, trace = _core.run(text, "x.toml")
    assert trace is None
    assert json.loads(report)["scenario"] == "s0-beff-native-up"
    report2, trace = _core.run(text, "x.toml", None, True)
    assert report2 == report
    assert "traceEvents" in json.loads(trace)


def test_core_run_raises_value_error_naming_origin_and_field():
    with pytest.raises(ValueError, match=r"^where\.toml: field `host\.cores`: "):
        _core.run(NATIVE.read_text().replace("cores = 1", "cores = 0"), "where.toml")


def test_run_many_keeps_order_and_equals_single_runs():
    items = [(NATIVE.read_text(), "a.toml", 3), (CREDIT_PIN.read_text(), "b.toml", None),
             (NATIVE.read_text(), "c.toml", None), (CREDIT_PIN.read_text(), "d.toml", 9)]
    many = _core.run_many(items)
    assert many == [_core.run(text, origin, seed)[0] for text, origin, seed in items]
    assert [json.loads(r)["scheduler"] for r in many] == ["round_robin", "credit"] * 2
    assert [json.loads(r)["seed"] for r in many] == [3, 1, 1, 9]


def test_run_many_names_the_invalid_scenario():
    good = NATIVE.read_text()
    items = [(good, "good.toml", None), (good.replace("cores = 1", "cores = 0"), "bad.toml", None)]
    with pytest.raises(ValueError, match=r"^bad\.toml: field `host\.cores`"):
        _core.run_many(items)


def test_sim_run_many_reads_files():
    reports = sim.run_many([NATIVE, (CREDIT_PIN, 5)])
    assert reports == [sim.run_file(NATIVE).report, sim.run_file(CREDIT_PIN, seed=5).report]


def test_sim_errors_are_sim_errors(tmp_path, broken):
    with pytest.raises(sim.SimError, match="no such scenario file"):
        sim.run_file(tmp_path / "missing.toml")
    path = broken("cores = 1", "cores = 0")
    with pytest.raises(sim.SimError, match="host.cores") as info:
        sim.run_many([NATIVE, path])
    assert info.value.exit_code == 2 and str(path) in info.value.message
    with pytest.raises(sim.SimError, match="seed"):
        sim.run_file(NATIVE, seed=-1)


def test_frames_have_one_row_per_record():
    run = sim.run_file(CREDIT_PIN, trace=True)
    dfs = sim.frames(run.report)
    assert set(dfs) == set(sim.SECTIONS)
    for name, df in dfs.items():
        assert len(df) == len(run.report[name])
    assert list(dfs["ranks"]["rank"]) == [0, 1]
    assert "utilisation" in dfs["cores"].columns
    assert run.trace is not None and run.trace["traceEvents"]


def test_ctrl_c_stops_a_long_run_promptly():
    """The native run waits on a worker thread and looks for signals, so SIGINT lands."""
    import signal
    import subprocess
    import sys
    import time

    exe = Path(sys.executable).with_name("vhpc")
    scale = paths.REPO / "scenarios" / "scale-credit-48c-192dom.toml"  # one simulated hour: ~20 s
    proc = subprocess.Popen([exe, "sim", "run", scale], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def native_call_started() -> bool:
        for comm in Path(f"/proc/{proc.pid}/task").glob("*/comm"):
            try:
                if comm.read_text().strip() == "vhpc-sim":
                    return True
            except OSError:  # a thread that just ended
                pass
        return False

    # Once the native core's simulation thread runs (not during Python's start-up).
    deadline = time.monotonic() + 60
    while not native_call_started():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(1)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 5
    assert proc.returncode == 130  # 128 + SIGINT, as `vhpc lab run`
    assert b"interrupted (SIGINT)" in err and b"Traceback" not in err
