"""`vhpc calibrate`: the quick profile loads back whole, TCP is really TCP, a malformed
profile is refused naming file and key, the probes' parsers and the C probes' options.
No timing assertions: the figures are whatever this machine gives."""

from __future__ import annotations

import copy
import math
import os
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from vhpc import mpi, paths, provenance, sim
from vhpc.cli import main
from vhpc.host import placement
from vhpc.lab import calibrate, probes
from vhpc.host import profile as prof
from vhpc.host.profile import Inline, ProfileError, load_profile


def invoke(*args: str):
    return CliRunner().invoke(main, ["calibrate", *args])


# ---------------------------------------------------------------- the quick run


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("calibrate") / "quick.toml"
    result = invoke("--quick", "--force", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out, load_profile(out)


def figures(node, path=""):
    """(dotted path, figure) for every measured or skipped figure below node."""
    for key, value in node.items():
        where = f"{path}.{key}" if path else key
        if isinstance(value, dict) and ("median" in value or set(value) == {"skipped"}):
            yield where, value
        elif isinstance(value, dict):
            yield from figures(value, where)


def test_quick_profile_has_every_section_with_finite_positive_medians(quick):
    out, data = quick
    assert data["profile"]["format"] == prof.FORMAT
    assert data["profile"]["name"] == "quick"
    assert data["provenance"]["quick"] is True and data["provenance"]["reps"] == 1
    assert "--quick" in data["provenance"]["command"]
    for section in ("os", "slicer", "mpi", "kernels"):
        assert section in data["measured"]
    measured = 0
    for path, fig in figures(data["measured"]):
        if "skipped" in fig:
            assert fig["skipped"].strip(), f"{path}: skipped without a reason"
            continue
        medians = fig["median"] if isinstance(fig["median"], list) else [fig["median"]]
        assert all(math.isfinite(m) for m in medians), path
        if path.rsplit(".", 1)[-1] not in prof.SIGNED + prof.NON_NEGATIVE:
            assert all(m > 0 for m in medians), (path, medians)
        if path.rsplit(".", 1)[-1] != "hop":  # a hop per probe run, not per repetition
            assert fig["n"] == 1, path
        measured += 1
    assert measured > 20
    # The OS section is measurable anywhere these programs build.
    os_section = data["measured"]["os"]
    for key in ("wakeup_same_cpu", "yield_handover", "yield_alone", "sched_slice"):
        assert "median" in os_section[key], (key, os_section[key])
    assert os_section["sleep"]["x"] == list(calibrate.SLEEP_US)


def test_quick_profile_skips_with_reasons_what_it_cannot_measure(quick):
    _, data = quick
    ok, why = placement.freezer_available()
    slicer = data["measured"]["slicer"]
    if ok:
        assert "two_cpus" in slicer and slicer["slice_ms"] == 30.0
    else:
        assert slicer == {"skipped": why}
    for name, impl in mpi.MPIS.items():
        section = data["measured"]["mpi"][name]
        if impl.available():
            assert section["version"] == impl.version
        else:
            assert "not installed" in section["skipped"]


def test_tcp_is_measured_with_its_transport_setting_and_differs_from_shm(quick):
    _, data = quick
    installed = [impl.name for impl in mpi.available()]
    if not installed:
        pytest.skip("no MPI installed")
    for name in installed:
        section = data["measured"]["mpi"][name]
        shm, tcp = section["shm"], section["tcp"]
        if "skipped" in tcp:
            pytest.fail(f"{name}: TCP not measured: {tcp['skipped']}")
        assert tcp["env"] == calibrate.TCP_ENV[name]
        assert "tcp" in tcp["transport"]  # what the MPI itself said it used
        assert "tcp" not in shm["transport"] and shm["env"] == {}
        assert tcp["transport"] != shm["transport"]
        assert tcp["lat"]["x"] == shm["lat"]["x"]
        assert all(math.isfinite(v) for v in tcp["lat"]["median"])


def test_quick_run_leaves_no_cgroup_behind(quick):
    mine = f"{placement.GROUP_PREFIX}{os.getpid()}-"
    assert not [g for g in placement.leftover_groups() if g.name.startswith(mine)]


def test_quick_profile_kernels_are_class_s_with_work_figures(quick):
    _, data = quick
    kernels = data["measured"]["kernels"]
    if "skipped" in kernels:
        pytest.skip(kernels["skipped"])
    assert kernels["ranks"] == 1
    assert set(kernels["npb_is"]) == {"S"}  # --quick: class S only
    assert kernels["npb_is"]["S"]["args"] == ["-c", "S"]
    assert kernels["npb_is"]["S"]["time"]["unit"] == "s"
    assert "sx" not in kernels["npb_ep"]["S"]  # check values are not work figures
    # the kernels predict reads also ran as two copies at once, one on each CPU
    if calibrate.two_cpus()[1] is None:
        pytest.skip("one CPU: no kernel pairs")
    for program in calibrate.PAIRED:
        pair = kernels[program]["S"]["pair_time"]
        assert pair["unit"] == "s" and pair["median"] > 0, program
    assert "pair_time" not in kernels["npb_cg"]["S"]


# ---------------------------------------------------------------- the format


def minimal() -> dict:
    """A small valid profile built with the module's own figure builders."""
    ns = prof.scalar([100.0, 120.0, 110.0], "ns")
    sweep = prof.series([1, 10], "us", [[50.0, 60.0], [55.0, 65.0]], "ns")
    hops = {f"{h}{s}": ns for h in ("wakeup_same_cpu", "wakeup_cross_cpu", "yield_handover")
            for s in ("", "_p99", "_mean")}
    return {
        "profile": {"name": "t", "description": "test", "format": prof.FORMAT},
        "provenance": {"command": "vhpc calibrate", "date": "2026-01-01T00:00:00Z", "host": "h",
                       "cpu_model": "c", "cpus_allowed": [0], "kernel": "k",
                       "mpi": Inline(mpich="MPICH 4"), "git_revision": "abc",
                       "git_dirty": False, "load_before": 0.1, "steal_percent": 0.0,
                       "duration_s": 1.0, "reps": 3, "quick": False, "seed": 1},
        "measured": {
            "os": {"cpus": [0], **hops, "yield_alone": ns, "sleep": sweep, "sleep_p99": sweep,
                   "sleep_slack_1us": sweep, "sleep_slack_1us_p99": sweep,
                   "timer_slack_default_ns": 50000, "sched_slice": ns,
                   "sched_switch": prof.scalar([-5.0, 3.0, -1.0], "ns"), "hz": 250,
                   "hz_source": "test"},
            "slicer": {"skipped": "no freezer"},
            "mpi": {"mpich": {"version": "MPICH 4",
                              "shm": {"placement": "p", "policy": "default", "env": Inline(),
                                      "lat": prof.series([1, 2], "B", [[1.0, 2.0]], "ns")},
                              "tcp": {"skipped": "no tcp"}},
                    "openmpi": {"skipped": "not installed here"}},
            "kernels": {"mpi": "mpich", "ranks": 1,
                        "lu": {"S": {"args": ["-c", "S"], "time": prof.scalar([1.0], "s")}}},
        },
    }


def write(tmp_path: Path, data: dict, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(prof.dumps(data))
    return path


def test_a_written_profile_reads_back_equal(tmp_path):
    data = minimal()
    path = tmp_path / "sub" / "ok.toml"
    prof.write_profile(path, data)
    back = load_profile(path)
    assert back == tomllib.loads(prof.dumps(data))
    assert back["measured"]["os"]["sleep"]["median"] == [52.5, 62.5]
    assert back["measured"]["os"]["sched_slice"] == {"median": 110.0, "lo": 100.0, "hi": 120.0,
                                                      "n": 3, "unit": "ns"}
    assert not list(path.parent.glob(".*tmp"))


def test_figures_are_inline_tables_and_sections_tables():
    text = prof.dumps(minimal())
    assert "[measured.os]" in text and "[measured.mpi.mpich.shm]" in text
    assert 'yield_alone = { median = 110.0, lo = 100.0, hi = 120.0, n = 3, unit = "ns" }' in text
    assert 'openmpi = { skipped = "not installed here" }' not in text  # a skipped section
    assert '[measured.mpi.openmpi]\nskipped = "not installed here"' in text


@pytest.mark.parametrize("mutate, key", [
    (lambda d: d["measured"]["os"].pop("sleep"), "measured.os.sleep: missing"),
    (lambda d: d["profile"].__setitem__("format", 99), "profile.format: 99 is not"),
    (lambda d: d.pop("profile"), "profile.format: missing"),
    (lambda d: d["measured"].pop("kernels"), "measured.kernels: missing"),
    (lambda d: d["measured"]["os"]["yield_alone"].__setitem__("median", -1.0),
     "measured.os.yield_alone.median: must be positive"),
    (lambda d: d["measured"]["os"]["yield_alone"].__setitem__("median", float("nan")),
     "measured.os.yield_alone.median: must be finite"),
    (lambda d: d["measured"]["os"]["yield_alone"].__setitem__("median", "fast"),
     "measured.os.yield_alone.median: median, lo and hi must be numbers"),
    (lambda d: d["measured"]["os"]["yield_alone"].__setitem__("median", 500.0),
     "measured.os.yield_alone.median: must lie within lo..hi"),
    (lambda d: d["measured"]["os"]["yield_alone"].pop("n"), "measured.os.yield_alone.n: missing"),
    (lambda d: d["measured"]["os"]["sleep"].__setitem__("lo", [1.0]),
     "measured.os.sleep.lo: must be an array of 2 numbers"),
    (lambda d: d["measured"]["os"].__setitem__("sleep", d["measured"]["os"]["yield_alone"]),
     "measured.os.sleep.x: missing"),
    (lambda d: d["measured"]["os"].__setitem__("hz", "250"),
     "measured.os.hz: must be an integer, not str"),
    (lambda d: d["measured"]["mpi"]["mpich"]["shm"].pop("lat"),
     "measured.mpi.mpich.shm.lat: missing"),
    (lambda d: d["measured"]["kernels"]["lu"]["S"].pop("args"),
     "measured.kernels.lu.S.args: missing"),
    (lambda d: d["measured"]["kernels"]["lu"]["S"]["time"].__setitem__("unit", 3),
     "measured.kernels.lu.S.time.unit: must be a string"),
    (lambda d: d["provenance"].pop("git_revision"), "provenance.git_revision: missing"),
])
def test_a_malformed_profile_names_the_file_and_the_key(tmp_path, mutate, key):
    data = copy.deepcopy(minimal())
    mutate(data)
    path = write(tmp_path, data)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert f"{path}: {key}" in caught.value.message
    assert caught.value.exit_code == 2


def test_a_signed_figure_may_be_negative_but_not_others(tmp_path):
    data = minimal()
    assert data["measured"]["os"]["sched_switch"]["median"] == -1.0
    load_profile(write(tmp_path, data))


def test_unreadable_and_non_toml_profiles_name_the_file(tmp_path):
    with pytest.raises(ProfileError, match=r"nothing\.toml: cannot read"):
        load_profile(tmp_path / "nothing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[profile\n")
    with pytest.raises(ProfileError, match=r"bad\.toml: not valid TOML"):
        load_profile(bad)


def test_a_profile_failing_its_check_is_kept_aside_not_written(tmp_path):
    data = minimal()
    data["measured"]["os"]["yield_alone"] = Inline(median=0.0, lo=0.0, hi=0.0, n=1, unit="ns")
    path = tmp_path / "host.toml"
    with pytest.raises(ProfileError, match="yield_alone.median: must be positive") as caught:
        prof.write_profile(path, data)
    assert not path.exists()
    assert (tmp_path / "host.invalid.toml").is_file()
    assert "host.invalid.toml" in caught.value.message


def test_scalar_and_series_summaries():
    assert prof.scalar([3.0, 1.0, 2.0], "ns") == {"median": 2.0, "lo": 1.0, "hi": 3.0, "n": 3,
                                                  "unit": "ns"}
    assert prof.scalar([], "ns") == {"skipped": "no successful run"}
    s = prof.series([1, 2], "B", [[1.0, 10.0], [3.0, 30.0]], "ns")
    assert s["median"] == [2.0, 20.0] and s["lo"] == [1.0, 10.0] and s["n"] == 2


# ---------------------------------------------------------------- probes' parsers


def test_turns_merge_a_process_runs_and_measure_the_hand_overs():
    runs = [(0, 0, 100), (1, 110, 300), (0, 305, 350), (0, 360, 500),  # an interrupt at 350
            (1, 520, 700), (0, 690, 900)]  # overlapping on two CPUs
    lengths, gaps = probes.turns(runs)
    assert lengths == [190, 195, 180]  # first and last turns are cut: not counted
    assert gaps == [10, 5, 20, -10]


def test_transport_seen_reads_ucx_and_open_mpi_verbose_output():
    ucx = ("[1] ucp_worker.c:1763 UCX INFO ep_cfg[0]: tag(self/memory0 tcp/lo) rma(self/memory0)\n"
           "[2] ucp_worker.c:1763 UCX INFO ep_cfg[1]: tag(tcp/lo) rma_am(tcp/lo) am(tcp/lo)\n")
    assert probes.transport_seen("mpich", ucx) == "tcp/lo"
    shm = "ep_cfg[1]: tag(sysv/memory cma/memory) rma(sysv/memory posix/memory)"
    assert probes.transport_seen("mpich", shm) == "cma/memory sysv/memory"
    ompi = ("[vm:1] mca: bml: Using self btl for send to [[9577,1],0] on node vm\n"
            "[vm:1] mca: bml: Using tcp btl for send to [[9577,1],1] on node vm\n")
    assert probes.transport_seen("openmpi", ompi) == "tcp"
    assert probes.transport_seen("openmpi", "nothing") == ""


def test_hz_from_kernel_config():
    assert probes.hz_from_config("CONFIG_HZ_250=y\nCONFIG_HZ=250\n") == 250
    assert probes.hz_from_config("# CONFIG_HZ is not set\n") is None


def test_default_profile_path_is_under_profiles_named_for_the_cpu(monkeypatch):
    monkeypatch.setattr(calibrate.provenance, "cpu_model",
                        lambda: "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz")
    monkeypatch.setattr(calibrate.placement, "allowed_cpus", lambda: [0, 1, 2, 3])
    assert calibrate.default_out() == paths.REPO / "profiles" / "intel-xeon-platinum-8375c-4cpu.toml"


def test_a_family_name_without_model_number_keeps_its_clock(monkeypatch):
    monkeypatch.setattr(calibrate.placement, "allowed_cpus", lambda: [0, 1])
    for model, slug in (("Intel(R) Xeon(R) Processor @ 2.50GHz", "intel-xeon-2-50ghz-2cpu"),
                        ("Intel(R) Xeon(R) Processor", "intel-xeon-2cpu"),
                        ("AMD EPYC", "amd-epyc-2cpu")):
        monkeypatch.setattr(calibrate.provenance, "cpu_model", lambda m=model: m)
        assert calibrate.host_slug() == slug


def test_kernel_figures_kept_are_times_rates_and_counts():
    kept = [u for u in ("s", "Mop/s", "MB/s", "count", "us", "1", "bool")
            if calibrate.is_work_figure(u)]
    assert kept == ["s", "Mop/s", "MB/s", "count", "us"]


# ---------------------------------------------------------------- the C probes


@pytest.fixture(scope="module")
def built() -> Path:
    calibrate.build_bench()
    return paths.build_dir() / "bench"


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_pipe_pingpong_times_single_hops_on_chosen_cpus(built):
    proc = run([str(built / "pipe_pingpong"), "-q", "-c", "0,0", "-n", "500"])
    assert proc.returncode == 0, proc.stderr
    header, row = proc.stdout.splitlines()
    assert header == "test,size,iters,usec,MBps,hops,p50_usec,p99_usec,max_usec"
    fields = row.split(",")
    assert fields[:3] == ["pipe", "1", "500"] and fields[5] == "1000"
    p50, p99, top = map(float, fields[6:])
    assert 0 < p50 <= p99 <= top


@pytest.mark.parametrize("args", [["-c", "0"], ["-c", "0,x"], ["-g", "only-one"], ["-g", ",x"]])
def test_pipe_pingpong_rejects_bad_pairs(built, args):
    proc = run([str(built / "pipe_pingpong"), *args, "-n", "10"])
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_os_probe_modes(built):
    probe = str(built / "os_probe")
    out = run([probe, "yield", "-c", "0", "-t", "0.01"])
    assert out.returncode == 0 and out.stdout.startswith("test,iters,nsec\nyield,")
    out = run([probe, "sleep", "-n", "3", "-s", "1000", "10", "100"])
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0] == "requested_us,slack_ns,count,median_ns,p99_ns,min_ns,max_ns"
    assert [r.split(",")[:3] for r in rows[1:]] == [["10", "1000", "3"], ["100", "1000", "3"]]
    out = run([probe, "spin", "-c", "0,0", "-t", "0.05"])
    assert out.returncode == 0 and out.stdout.startswith("proc,start_ns,end_ns\n")
    assert {line.split(",")[0] for line in out.stdout.splitlines()[1:]} <= {"0", "1"}


@pytest.mark.parametrize("args", [[], ["nap"], ["sleep"], ["yield", "-n", "3"],
                                  ["sleep", "-t", "1", "10"], ["spin", "-c", "0,1,2"],
                                  ["spin", "-g", "a"], ["yield", "extra"], ["sleep", "0"]])
def test_os_probe_rejects_bad_usage(built, args):
    proc = run([str(built / "os_probe"), *args])
    assert proc.returncode == 2, (args, proc.stdout, proc.stderr)


# ---------------------------------------------------------------- the command line


# ---------------------------------------------------------------- local sends


LOCAL_CSV = """call,size,reps,local
send,1,3,3
send,256,3,3
send,512,3,1
send,384,3,0
send,320,3,2
send,257,3,0
isend,1,3,2
isend,2,3,3
isend,4,3,1
"""


def test_local_limits_keep_the_prefix_of_sizes_most_tries_completed_locally():
    # send: 320 B was local but 257 B and 384 B were not: the prefix ends at 256 B
    assert probes.local_limits(LOCAL_CSV) == {"send": 256.0, "isend": 2.0}
    none_local = "call,size,reps,local\nsend,1,3,1\nisend,1,3,0\n"
    assert probes.local_limits(none_local) == {"send": 0.0, "isend": 0.0}
    with pytest.raises(probes.ProbeFailed, match="no `isend` rows"):
        probes.local_limits("call,size,reps,local\nsend,1,3,3\n")
    with pytest.raises(probes.ProbeFailed, match="unreadable"):
        probes.local_limits("call,size,reps,local\nsend,x,3,3\nisend,1,3,3\n")


def test_a_local_send_figure_may_be_zero_but_not_negative(tmp_path):
    data = minimal()
    zero = Inline(median=0.0, lo=0.0, hi=0.0, n=1, unit="B")
    data["measured"]["mpi"]["mpich"]["local_send_max"] = zero
    load_profile(write(tmp_path, data))
    data["measured"]["mpi"]["mpich"]["local_send_max"] = Inline(median=-1.0, lo=-1.0, hi=-1.0,
                                                                 n=1, unit="B")
    with pytest.raises(ProfileError, match="local_send_max.median: must not be negative"):
        load_profile(write(tmp_path, data))


@pytest.mark.parametrize("impl", [m for m in mpi.MPIS.values() if m.available()],
                         ids=lambda m: m.name)
def test_send_local_finds_where_sends_stop_completing_alone(built, impl):
    # three tries a size, the majority decides (as calibrate does): with one, a try
    # disturbed by the machine once made MPICH's 1 B send look not local (0 B)
    found = probes.send_local(impl, placement.spread(2), ["-r", "3", "-M", "65536"])
    if impl.name == "openmpi":
        # ob1 sends up to 256 B inline; a larger vader fragment must come back
        assert found == {"send": 256.0, "isend": 256.0}
    else:
        # MPICH over UCX: eager up to UCX's rendezvous threshold (8 KiB and a header here)
        assert 256 < found["send"] < 65536 and found["isend"] == found["send"]


def test_quick_profile_records_each_mpis_local_sends(quick):
    _, data = quick
    for name, section in data["measured"]["mpi"].items():
        if "skipped" in section:
            continue
        for key in ("local_send_max", "local_isend_max"):
            assert section[key]["unit"] == "B" and section[key]["median"] >= 0, (name, key)


def add_part(tmp_path: Path, before: dict, part: str) -> tuple[dict, dict]:
    """`before` written as a profile, then `vhpc calibrate --only part --quick` on it:
    the profile after, without the addition's provenance entry, and that entry."""
    old = tmp_path / "old.toml"
    prof.write_profile(old, calibrate.restore_inline(before))
    result = invoke("--only", part, "--quick", "--force", "--out", str(old))
    assert result.exit_code == 0, result.output
    after = load_profile(old)
    entry = after["provenance"].pop("additions")[-1]
    assert f"--only {part}" in entry["command"] and entry["reps"] == 1
    return after, entry


def test_only_local_send_adds_its_figures_to_an_existing_profile(quick, tmp_path):
    out, data = quick
    before = copy.deepcopy(data)
    for section in before["measured"]["mpi"].values():
        section.pop("local_send_max", None)
        section.pop("local_isend_max", None)
    after, entry = add_part(tmp_path, before, "local-send")
    assert entry["cpu_model"] == provenance.cpu_model()
    measured = [n for n, s in before["measured"]["mpi"].items() if "skipped" not in s]
    assert entry["keys"] == [f"measured.mpi.{n}.{k}" for n in measured
                             for k in ("local_send_max", "local_isend_max")]
    for name in measured:
        section = after["measured"]["mpi"][name]
        assert section.pop("local_send_max")["median"] >= 0
        assert section.pop("local_isend_max")["median"] >= 0
    assert after == before  # nothing else moved, the original provenance included


def test_only_slicer_measures_the_slicer_again_with_its_idle_switch(quick, tmp_path):
    ok, why = placement.freezer_available()
    if not ok:
        pytest.skip(f"no freezer here: {why}")
    out, data = quick
    before = copy.deepcopy(data)
    for layout in calibrate.SLICER_LAYOUTS:
        before["measured"]["slicer"].get(layout, {}).pop("idle_switch", None)
    for section in before["measured"]["mpi"].values():
        section.pop("threads_per_rank", None)
    after, entry = add_part(tmp_path, before, "slicer")
    assert "measured.slicer.two_cpus.idle_switch" in entry["keys"]
    two = after["measured"]["slicer"]["two_cpus"]
    # the freezer's part of a blocked hop: positive, and less than the whole hop
    assert 0 < two["idle_switch"]["median"] < two["blocked_switch"]["hi"]
    assert two[f"blocked_switch_{prof.SLICER_TASKS}_tasks"]["median"] > 0
    after["measured"].pop("slicer"), before["measured"].pop("slicer")
    for name, section in after["measured"]["mpi"].items():
        if "skipped" not in section:  # the tasks its watchers read per rank
            assert f"measured.mpi.{name}.threads_per_rank" in entry["keys"]
            assert section.pop("threads_per_rank")["median"] >= 1
    assert after == before  # nothing else moved


def test_only_needs_an_existing_profile(tmp_path):
    result = invoke("--only", "local-send", "--force", "--out", str(tmp_path / "none.toml"))
    assert result.exit_code == 2
    assert "adds to an existing profile" in result.output and "none.toml" in result.output


def test_a_profile_round_trips_through_restore_inline():
    for path in sorted((paths.REPO / "profiles").glob("*.toml")):
        data = load_profile(path)
        if data["profile"].get("kind") == "published":
            continue
        assert prof.dumps(calibrate.restore_inline(data)) == path.read_text(), path


def test_help_lists_the_options():
    result = invoke("--help")
    assert result.exit_code == 0
    for option in ("--mpi", "--out", "--reps", "--quick", "--force", "--only"):
        assert option in result.output


@pytest.mark.parametrize("args", [["--reps", "0"], ["--mpi", "lam"], ["--bogus"]])
def test_bad_options_are_usage_errors(args):
    assert invoke(*args).exit_code == 2


def test_a_busy_machine_is_refused_without_force(monkeypatch, tmp_path):
    monkeypatch.setattr(calibrate.os, "getloadavg", lambda: (7.5, 3.0, 1.0))
    out = tmp_path / "p.toml"
    result = invoke("--quick", "--out", str(out))
    assert result.exit_code == 2
    assert "load average is 7.50" in result.output and "--force" in result.output
    assert not out.exists()


def test_an_mpi_not_installed_is_an_error(monkeypatch, tmp_path):
    def missing(name):
        raise mpi.MpiNotFound(f"MPI '{name}' is not installed (mpicc.{name} not found)")

    monkeypatch.setattr(calibrate.mpi, "find", missing)
    result = invoke("--quick", "--force", "--mpi", "openmpi", "--out", str(tmp_path / "p.toml"))
    assert result.exit_code == 2
    assert "'openmpi' is not installed" in result.output


def test_a_run_that_hangs_after_its_last_row_is_cut_short_and_kept():
    cmd = ["sh", "-c", "echo test,size; echo lat,8,2,1.5,5; sleep 30"]
    started = time.monotonic()
    out, hung = probes.run_until_done(cmd, dict(os.environ), 20, lambda t: "lat,8," in t,
                                      grace=0.2)
    assert hung and "lat,8,2" in out
    assert time.monotonic() - started < 10


def test_reading_a_running_program_output_does_not_disturb_its_writes():
    # The output is polled while the program writes: every line must stay in place.
    script = "; ".join(f"echo line{i}; sleep 0.03" for i in range(10))
    out, hung = probes.run_until_done(["sh", "-c", script], dict(os.environ), 20,
                                      lambda t: "line9" in t)
    assert not hung and out.splitlines() == [f"line{i}" for i in range(10)]


def test_a_run_that_fails_or_never_finishes_raises():
    with pytest.raises(probes.ProbeFailed, match="exit 3: broken"):
        probes.run_until_done(["sh", "-c", "echo broken >&2; exit 3"], dict(os.environ), 20,
                              lambda t: False)
    with pytest.raises(probes.ProbeFailed, match="timeout"):
        probes.run_until_done(["sleep", "30"], dict(os.environ), 0.3, lambda t: False)


# ---------------------------------------------------------------- host states


def test_quick_profile_records_the_host_hop_beside_its_probes(quick):
    _, profile = quick
    found = profile["measured"]["os"]["hop"]
    if "skipped" in found:
        pytest.skip(f"no hop here: {found['skipped']}")
    # one hop per probe run (all of them but those a missing capability ruled out)
    assert found["n"] >= 10 and 0 < found["lo"] <= found["median"] <= found["hi"]


def test_probes_in_two_host_states_give_each_state_its_own_figures():
    impl = mpi.MPIS["mpich"]
    res = calibrate.Results()
    chans = {"mpich": calibrate.channels(impl, res, None)}
    sizes = calibrate.lat_sizes()

    def lat(ns: float, hop_ns: float, after: float | None = None) -> dict:
        return {**{f"lat_{n}": ns for n in sizes}, calibrate.HOP: hop_ns,
                **({calibrate.HOP_AFTER: after} if after else {})}

    # the last probe began near and ended far: it is neither state's
    res.samples[("mpi", "mpich", "shm", "lat")] = [lat(180, 30, 31), lat(650, 160), lat(182, 29),
                                                   lat(640, 170, 165), lat(185, 31),
                                                   lat(400, 30, 160)]
    assert calibrate.hop_figures_of(res)["hop"]["n"] == 6
    assert 31 < calibrate.hop_figures_of(res)["hop_threshold_ns"] < 160
    states = calibrate.states_section([impl], chans, {}, res)
    near, far = states["near"], states["far"]
    assert (near["hop"]["n"], far["hop"]["n"]) == (3, 2)
    assert near["mpi"]["mpich"]["shm"]["lat"]["median"][0] == 182
    assert near["mpi"]["mpich"]["shm"]["lat"]["n"] == 3
    assert far["mpi"]["mpich"]["shm"]["lat"]["median"][0] == 645
    # only figures: no placement text, no gaps for what was not measured
    assert set(far["mpi"]["mpich"]) == {"shm"} and set(far["mpi"]["mpich"]["shm"]) == {"lat"}
    # the profile in one state reads that state's figures
    base = {"measured": {"mpi": {"mpich": {"shm": {"placement": "2 ranks", "lat": {}}}},
                         "states": states}}
    seen = sim.profile.in_state(base, "far")["measured"]["mpi"]["mpich"]["shm"]
    assert seen["placement"] == "2 ranks" and seen["lat"]["median"][0] == 645


def test_kernel_pairs_get_each_states_own_times():
    res = calibrate.Results()
    # IS W as two copies at once: 62 ms with the CPUs near, 80 ms far
    res.samples[(calibrate.PAIR, "npb_is", "W")] = [
        {"time": t, calibrate.HOP: h} for t, h in ((0.062, 30), (0.080, 160), (0.063, 31),
                                                   (0.081, 170), (0.061, 29))]
    states = calibrate.states_section([], {}, {}, res)
    assert states["near"]["kernels"]["npb_is"]["W"]["pair_time"]["median"] == 0.062
    assert states["far"]["kernels"]["npb_is"]["W"]["pair_time"]["median"] == pytest.approx(0.0805)
    # and a prediction in the far state reads the far pair
    profile = {"measured": {"kernels": {"npb_is": {"W": {
        "time": {"median": 0.062}, "pair_time": {"median": 0.07}}}}, "states": states}}
    far = sim.profile.in_state(profile, "far")["measured"]["kernels"]["npb_is"]["W"]
    assert far["pair_time"]["median"] == pytest.approx(0.0805) and far["time"]["median"] == 0.062


def test_probes_in_one_state_give_no_states():
    res = calibrate.Results()
    res.samples[("os", "yield")] = [{"ns": 1.0, calibrate.HOP: h} for h in (30, 31, 29, 32)]
    assert calibrate.states_section([], {}, {}, res) is None
    assert "hop_threshold_ns" not in calibrate.hop_figures_of(res)


def test_the_run_says_which_figures_one_state_lacks():
    lat = {"median": [180.0], "lo": [180.0], "hi": [180.0], "n": 1, "unit": "ns",
           "x": [8], "x_unit": "B"}
    bw = {"median": 11000.0, "lo": 11000.0, "hi": 11000.0, "n": 1, "unit": "MB/s"}
    profile = {"measured": {
        "mpi": {"mpich": {"shm": {"lat": lat, "bw": bw}}, "openmpi": {"skipped": "not here"}},
        "states": {"near": {"hop": {"median": 27.0, "n": 8}, "mpi": {"mpich": {"shm": {
            "lat": lat, "bw": bw}}}},
                   "far": {"hop": {"median": 160.0, "n": 2}, "mpi": {"mpich": {"shm": {
                       "lat": lat}}}}}}}
    said = calibrate.states_summary(profile)
    assert said[0] == "the host was in two states: near 27 ns (8 probe runs), far 160 ns (2 probe runs)"
    assert said[1].endswith("mpich far: shm.bw")
    del profile["measured"]["states"]
    assert calibrate.states_summary(profile) == []
