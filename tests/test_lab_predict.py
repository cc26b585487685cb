"""`vhpc lab predict` and vhpc.sim.overlay: lab cells as simulator scenarios on a
host profile, beside measurements. The profile here is synthetic (round figures
in the format `vhpc calibrate` writes), so the expected predictions follow from
the model's rules, not from this machine."""

from __future__ import annotations

import json
import statistics
from datetime import datetime, timezone
from pathlib import Path

import pytest
import tomli_w
from click.testing import CliRunner

from vhpc import paths, sim
from vhpc.cli import main
from vhpc.lab import experiment, predict, store
from vhpc.host import profile as prof

EXPERIMENTS = paths.REPO / "experiments"


def scalar(ns: float) -> dict:
    return {"median": ns, "lo": ns, "hi": ns, "n": 1, "unit": "ns"}


def series(x: list[int], ns: list[float]) -> dict:
    return {"x": x, "x_unit": "B", "median": ns, "lo": ns, "hi": ns, "n": 1, "unit": "ns"}


SIZES = [1, 8, 64, 1024, 4096, 16384]


def synthetic_profile() -> dict:
    channel = {"placement": "2 ranks, own cores", "policy": "default", "env": {},
               # 300 ns per small message, 100 ns more per KiB
               "lat": series(SIZES, [300 + 100 * s / 1024 for s in SIZES])}
    layout = {"cpus": [0, 1], "blocked_switch": scalar(402_000),
              "blocked_switch_p99": scalar(900_000), "forced_switch": scalar(100_000),
              "forced_switch_p99": scalar(300_000), "slice": scalar(30_000_000)}
    return {
        "profile": {"name": "synthetic", "description": "round figures for tests", "format": 1},
        "provenance": {"cpus_allowed": [0, 1]},
        "measured": {
            "os": {"yield_handover": scalar(1_020), "wakeup_same_cpu": scalar(2_000),
                   "sleep_slack_1us": {**series([1, 10], [50_000, 60_000]), "x_unit": "us"},
                   "sched_slice": scalar(4_000_000), "hz": 250},
            "slicer": {"slice_ms": 30.0, "poll_us": 200.0, "two_cpus": layout,
                       "one_cpu": {**layout, "cpus": [0, 0]}},
            "mpi": {"mpich": {"version": "MPICH 4.0.2", "shm": channel},
                    "openmpi": {"version": "Open MPI 4.1.4", "shm": channel}},
        },
    }


def test_overlay_derives_each_parameter_from_its_figure():
    o = sim.overlay(synthetic_profile(), "mpich")
    assert o["mpi"]["shm"]["latency_ns"] + 2 * o["mpi"]["shm"]["send_ns"] == 300
    assert o["mpi"]["shm"]["send_ns_per_kib"] + o["mpi"]["shm"]["recv_ns_per_kib"] == 100
    assert o["hypervisor"]["vcpu_switch_ns"] == 1_000  # a yield hop less one 20 ns poll
    assert o["hypervisor"]["linux"] == {"tick_us": 4000, "slice_us": 3000}
    # noticing an idle domain took 402 - 100 (switch) - 2 (wake-up) = 300 µs: twice the mean
    assert o["hypervisor"]["slicer"] == {"switch_us": 100, "poll_us": 600}
    # a 1 µs sleep took 50 µs: every sleep lasts its request and 49 µs more
    assert o["mpi"]["adaptive_sleep_min_us"] == 1
    assert o["mpi"]["adaptive_sleep_extra_ns"] == 49_000
    assert o["mpi"]["adaptive_spin_min_us"] == 2
    assert o["mpi"]["between_domains"] == "shm"


def test_with_the_slicers_log_its_watchers_are_simulated():
    p = synthetic_profile()
    p["measured"]["slicer"]["two_cpus"]["idle_switch"] = scalar(20_000)
    # a blocked hop of 402 µs is a look, a 20 µs idle switch and a 2 µs wake-up
    assert sim.overlay(p, "mpich")["hypervisor"]["slicer"] == {
        "switch_us": 100, "watchers": True, "idle_switch_us": 20, "look_us": 380,
        "poll_us": 200}
    # three tasks a domain made the hop 40 µs longer: 20 µs a task; a rank of three
    # threads, two ranks a domain: five tasks more to read
    p["measured"]["slicer"]["two_cpus"]["blocked_switch_3_tasks"] = scalar(442_000)
    p["measured"]["mpi"]["mpich"]["threads_per_rank"] = {**scalar(3), "unit": "count"}
    slicer = sim.overlay(p, "mpich", ranks_per_domain=2)["hypervisor"]["slicer"]
    assert slicer["look_us"] == 380 + 5 * 20
    assert sim.overlay(p, "openmpi")["hypervisor"]["slicer"]["look_us"] == 380  # not measured


def bent_profile() -> dict:
    """Open MPI's shared memory with a protocol switch above 4 KiB: eager 300 ns +
    100 ns/KiB, then a rendezvous 2000 ns + 50 ns/KiB; 1 MiB streams at 20 GB/s one
    way and 32 GB/s both ways."""
    sizes = [1, 2, 4, 1024, 2048, 4096, 8192, 16384, 65536, 262144, 1 << 20]
    p = synthetic_profile()
    p["measured"]["mpi"]["openmpi"]["shm"] = {
        "placement": "p", "policy": "default", "env": {},
        "lat": series(sizes, [300 + 100 * s / 1024 if s <= 4096 else 2000 + 50 * s / 1024
                              for s in sizes]),
        "bw": {**scalar(20_000.0), "unit": "MB/s"}, "bibw": {**scalar(32_000.0), "unit": "MB/s"}}
    return p


def test_a_bend_in_the_curve_is_the_eager_limit_and_the_rendezvous_costs():
    o = sim.overlay(bent_profile(), "openmpi")["mpi"]
    assert o["eager_limit"] == 4096
    shm = o["shm"]
    assert shm["send_ns_per_kib"] == shm["recv_ns_per_kib"] == 50  # the lower line, halved
    # the upper line's intercept less the handshake, two small messages (300.2 ns)
    assert shm["rndv_ns"] == round(2000 - 2 * (300 + 100 * 2 / 1024))
    # 20 GB/s: 51.2 ns/KiB at the receiver's pace, less its 100 ns per 32 KiB chunk;
    # 32 GB/s both ways: 64 ns/KiB on each CPU, 12.8 of them the sender's, less 200/32
    assert shm["rndv_recv_ns_per_kib"] == round(51.2 - 100 / 32)
    assert shm["rndv_send_ns_per_kib"] == round(12.8 - 200 / 32)
    assert (shm["chunk_bytes"], shm["window"]) == (32768, 4)
    # a straight line has no switch: the simulator's eager limit, the 1-16 KiB slope
    plain = sim.overlay(synthetic_profile(), "openmpi")["mpi"]
    assert plain["eager_limit"] == sim.profile.EAGER_LIMIT
    assert "rndv_ns" not in plain["shm"] and plain["shm"]["send_ns_per_kib"] == 50


def test_an_exchange_slower_than_one_way_is_post_send_work():
    p = json.loads(json.dumps(synthetic_profile()))  # the MPIs' tables not shared
    # ~300 ns one way: a third each for send, latency, receive
    small = statistics.median(300 + 100 * s / 1024 for s in SIZES if s <= 64)  # 300.8
    shm = p["measured"]["mpi"]["mpich"]["shm"]
    shm["exch"] = scalar(450.0)  # send + post-send + receive
    assert sim.overlay(p, "mpich")["mpi"]["shm"]["post_send_ns"] == round(450 - 2 * small / 3)
    shm["exch"] = scalar(290.0)  # no slower than one way: nothing to add
    assert "post_send_ns" not in sim.overlay(p, "mpich")["mpi"]["shm"]
    # the best runs of both probes: a median in a host's slow mode is not the channel's
    shm["exch"] = {**scalar(700.0), "lo": 450.0}
    assert sim.overlay(p, "mpich")["mpi"]["shm"]["post_send_ns"] == round(450 - 2 * small / 3)
    assert "post_send_ns" not in sim.overlay(p, "openmpi")["mpi"]["shm"]  # not measured


def test_a_local_send_limit_above_the_bend_is_left_out():
    p = with_local_sends(bent_profile(), "openmpi", 8192, 8192)
    assert "local_send_limit" not in sim.overlay(p, "openmpi")["mpi"]


def with_local_sends(profile: dict, mpi: str, send: float, isend: float) -> dict:
    fig = {"n": 1, "unit": "B"}
    profile["measured"]["mpi"][mpi]["local_send_max"] = {**fig, "median": send, "lo": send,
                                                         "hi": send}
    profile["measured"]["mpi"][mpi]["local_isend_max"] = {**fig, "median": isend, "lo": isend,
                                                          "hi": isend}
    return profile


def test_local_send_limit_is_the_smaller_local_send_below_the_eager_limit():
    p = with_local_sends(synthetic_profile(), "openmpi", 256, 300)
    assert sim.overlay(p, "openmpi")["mpi"]["local_send_limit"] == 256
    p = with_local_sends(synthetic_profile(), "openmpi", 4096, 0)  # every isend waits
    assert sim.overlay(p, "openmpi")["mpi"]["local_send_limit"] == 0
    # at or above the simulator's 64 KiB eager limit it changes nothing: left out
    p = with_local_sends(synthetic_profile(), "mpich", 1 << 20, sim.profile.EAGER_LIMIT)
    assert "local_send_limit" not in sim.overlay(p, "mpich")["mpi"]
    # one figure is enough; the other MPI's figures are not used
    p = with_local_sends(synthetic_profile(), "openmpi", 256, 256)
    p["measured"]["mpi"]["openmpi"]["local_isend_max"] = {"skipped": "every run failed: x"}
    assert sim.overlay(p, "openmpi")["mpi"]["local_send_limit"] == 256
    assert "local_send_limit" not in sim.overlay(p, "mpich")["mpi"]


def test_a_profile_without_local_send_figures_keeps_the_simulators_default():
    # calibrated before the figures existed (or the probe failed): every eager send
    # is local, as before (docs/calibrate.md)
    p = synthetic_profile()
    assert "local_send_limit" not in sim.overlay(p, "openmpi")["mpi"]
    p["measured"]["mpi"]["openmpi"]["local_send_max"] = {"skipped": "every run failed: x"}
    assert "local_send_limit" not in sim.overlay(p, "openmpi")["mpi"]


def test_beff_above_the_local_send_limit_takes_two_slices_per_exchange():
    # Open MPI's protocol on one spinning core: sizes above 256 B need the receiver's
    # fin, which it sends in its own tick slice: two slices per exchange from 512 B
    profile = with_local_sends(synthetic_profile(), "openmpi", 256, 256)
    got = {(p.cell.config.name, p.cell.policy, p.metric): p.predicted
           for p in predict.predict(EXPERIMENTS / "s0-beff.toml", profile, mpis=["openmpi"])}
    sizes = [1 << k for k in range(13)]
    slices = [1 if s <= 256 else 2 for s in sizes]
    assert got["native_up", "default", "lat_us"] == pytest.approx(4000, rel=0.01)
    assert got["native_up", "default", "beff_MBps"] == pytest.approx(
        sum(2 * s / (4000 * k) for s, k in zip(sizes, slices)) / len(sizes), rel=0.02)
    plain = {(p.cell.config.name, p.cell.policy, p.metric): p.predicted
             for p in predict.predict(EXPERIMENTS / "s0-beff.toml", synthetic_profile(),
                                      mpis=["openmpi"])}
    assert got["native_up", "adaptive", "beff_MBps"] < 0.7 * plain[
        "native_up", "adaptive", "beff_MBps"]
    assert got["native_up", "adaptive", "lat_us"] == plain["native_up", "adaptive", "lat_us"]


def test_a_missing_or_skipped_figure_is_named():
    p = synthetic_profile()
    del p["measured"]["os"]["hz"]
    with pytest.raises(sim.ProfileMismatch, match="measured.os.hz"):
        sim.overlay(p, "mpich")
    p = synthetic_profile()
    p["measured"]["slicer"]["two_cpus"]["forced_switch"] = {"skipped": "no freezer here"}
    with pytest.raises(sim.ProfileMismatch, match="forced_switch was not measured: no freezer"):
        sim.overlay(p, "mpich")


def by_cell(predictions) -> dict[tuple[str, str, str], predict.Prediction]:
    return {(p.cell.mpi, p.cell.config.name, p.cell.policy): p for p in predictions}


def test_s0_quick_predictions_follow_the_models_rules():
    got = by_cell(predict.predict(EXPERIMENTS / "s0-quick.toml", synthetic_profile()))
    assert len(got) == 12 and all(p.unsupported is None for p in got.values())
    for m in ("mpich", "openmpi"):
        own = got[m, "native", "default"].predicted
        # own cores: the profile's small-message latency (plus at most a poll)
        assert 0.300 <= own <= 0.330
        # one core, the MPI default spins: every message waits for a 4 ms tick slice
        assert got[m, "native_up", "default"].predicted == pytest.approx(4000, rel=0.01)
        # one core, adaptive yields at once: a switch plus the message's costs
        assert 1.0 < got[m, "native_up", "adaptive"].predicted < 1.5
        # time-sliced, spinning: a turn per message: the 0.1 ms switch and the 30 ms
        # slice, seen expired at the next 0.6 ms poll
        assert got[m, "timesliced", "default"].predicted == pytest.approx(30_600, rel=0.01)
        # time-sliced, adaptive: a spin, a poll to notice, a switch; far below a slice
        assert 150 < got[m, "timesliced", "adaptive"].predicted < 1_500
    scenario = got["mpich", "timesliced", "adaptive"].scenario
    assert scenario["hypervisor"]["scheduler"] == "slicer"
    assert [d["pin"] for d in scenario["domains"]] == [[[0]], [[1]]]


def test_beff_predictions_follow_the_models_rules():
    got = {(p.cell.config.name, p.cell.policy, p.metric): p.predicted
           for p in predict.predict(EXPERIMENTS / "s0-beff.toml", synthetic_profile(),
                                    mpis=["mpich"])}
    assert len(got) == 16 and None not in got.values()
    sizes = [1 << k for k in range(13)]  # -M 4096
    for config in ("native_up", "one-domain", "two-domains-linux"):
        # spinning on one core: every exchange waits for a 4 ms tick slice, so each size
        # moves 2 s bytes per 4 ms; b_eff is their mean (in MB/s = bytes per µs)
        assert got[config, "default", "lat_us"] == pytest.approx(4000, rel=0.01)
        assert got[config, "default", "beff_MBps"] == pytest.approx(
            sum(2 * s / 4000 for s in sizes) / len(sizes), rel=0.02)
        assert got[config, "adaptive", "beff_MBps"] > 100 * got[config, "default", "beff_MBps"]
    assert got["two-domains-ts", "default", "lat_us"] == pytest.approx(30_600, rel=0.01)
    assert got["two-domains-ts", "adaptive", "lat_us"] < 1_500


def test_a_kernel_needs_its_one_rank_rate_in_the_profile():
    got = predict.predict(EXPERIMENTS / "s0-pressure.toml", synthetic_profile())
    assert got and all(p.predicted is None for p in got)
    assert {p.unsupported for p in got} == {
        "the profile cannot say: the profile has no measured.kernels.npb_is.W.time",
        "the profile cannot say: the profile has no measured.kernels.npb_ssor.W.time"}


def test_pressure_predictions_scale_with_the_domains():
    profile = synthetic_profile()
    # one rank sorts IS W (2^20 keys, 10 times) in 40 ms; SSOR W in 80 ms
    profile["measured"]["kernels"] = {
        "npb_is": {"W": {"args": ["-c", "W"], "time": {**scalar(0.040), "unit": "s"}}},
        "npb_ssor": {"W": {"args": ["-c", "W"], "time": {**scalar(0.080), "unit": "s"}}}}
    got = {(p.cell.config.name, p.cell.workload.name, p.cell.policy): p.predicted
           for p in predict.predict(EXPERIMENTS / "s0-pressure.toml", profile)}
    assert None not in got.values() and len(got) == 32
    for w, one_rank in (("is-W", 0.040), ("ssor-W", 0.080)):
        # one domain, two ranks on two cores: at least half the one-rank compute
        assert got["d1", w, "adaptive"] >= one_rank / 2
        for policy in ("default", "adaptive"):
            # gang-sliced domains share both cores: more domains, longer jobs
            times = [got[f"d{n}", w, policy] for n in (1, 2, 3, 4)]
            assert times == sorted(times), (w, policy, times)
            assert got["d4-noise", w, policy] > got["d4", w, policy] * 0.99


def test_the_labs_ssor_is_simulated_as_its_own_kernel_at_the_profiles_rate():
    # bench/npb_ssor.c, not NPB LU: rows of N-2 doubles, no face exchange; one
    # rank's W run (2 x 31^3 updates, 300 times) over its updates gives the rate
    plan = predict.npb_plan("npb_ssor", ["-c", "W"], 3, pressure_profile())
    (workload, params), = plan.runs
    assert workload == "npb.ssor" and params["class"] == "W"
    assert params["ps_per_unit"] == round(0.080e12 / (2 * 31**3 * 300))
    # with no communication to add, one simulated rank takes the one-rank time
    sc = {"name": "one", "seed": 1, "host": {"cores": 1},
          "domains": [{"name": "d", "vcpus": 1}],
          "jobs": [{"name": "j", "workload": workload, "ranks": ["d"], "wait_policy": "spin",
                    "params": {**params, "jitter_ppm": 0}}]}
    report = sim.run_texts([(tomli_w.dumps(sc), "test", None)])[0]
    assert report["jobs"][0]["completion_ns"] / 1e9 == pytest.approx(0.080, rel=0.01)


def pressure_profile() -> dict:
    profile = synthetic_profile()
    # one rank sorts IS W in 40 ms; SSOR W in 80 ms
    profile["measured"]["kernels"] = {
        "npb_is": {"W": {"args": ["-c", "W"], "time": {**scalar(0.040), "unit": "s"}}},
        "npb_ssor": {"W": {"args": ["-c", "W"], "time": {**scalar(0.080), "unit": "s"}}}}
    profile["measured"]["slicer"]["one_cpu"] = profile["measured"]["slicer"]["two_cpus"]
    return profile


def test_co_running_jobs_refill_as_the_lab_overlaps_them():
    for p in predict.predict(EXPERIMENTS / "s0-pressure.toml", pressure_profile()):
        jobs = [j for j in p.scenario["jobs"] if j["workload"] != "noise"]
        assert {j["refill"] for j in jobs} == {len(jobs) > 1}, p.cell.label


def test_sliced_cells_average_timed_parts_spread_over_the_first_slice():
    profile = pressure_profile()
    exp = experiment.load(EXPERIMENTS / "s0-pressure.toml")
    cells = {(c.config.name, c.workload.name, c.policy): c
             for c in experiment.cells(exp, ["mpich"])}
    # each run's jobs do set-up work (untimed) worth a share of a 30 ms slice first
    scs, plan = predict.scenarios(cells["d3-noise", "is-W", "default"], "x", 1, profile)
    assert len(scs) == predict.SLICER_PHASES * len(plan.runs)
    for sc, k in zip(scs, range(predict.SLICER_PHASES)):
        jobs = [j for j in sc["jobs"] if j["workload"] != "noise"]
        assert {(j["timed_from"], j["untimed_us"]) for j in jobs} == \
            {("all_ranks_ran", 30_000 * k // predict.SLICER_PHASES)}
        assert all("untimed_us" not in j for j in sc["jobs"] if j["workload"] == "noise")
    # no slicer: no set-up, the clock from when every rank has run
    s3 = experiment.load(EXPERIMENTS / "s3-channels.toml")
    native = next(c for c in experiment.cells(s3, ["mpich"])
                  if (c.config.name, c.workload.name) == ("native", "is-W"))
    scs, plan = predict.scenarios(native, "x", 1, profile)
    assert len(scs) == len(plan.runs) and scs[0]["jobs"][0]["untimed_us"] == 0
    # the exchange loops stand for the lab's steady state: timed from launch
    scs, _ = predict.scenarios(
        next(c for c in experiment.cells(experiment.load(EXPERIMENTS / "s0-quick.toml"),
                                         ["mpich"]) if c.config.name == "native_up"),
        "x", 1, profile)
    assert "timed_from" not in scs[0]["jobs"][0]


def test_ranks_on_two_cpus_compute_at_the_paired_rate_and_on_one_cpu_alone():
    profile = pressure_profile()
    # two copies of IS W at once, one on each CPU, took 52 ms: the slower's time
    profile["measured"]["kernels"]["npb_is"]["W"]["pair_time"] = {**scalar(0.052), "unit": "s"}
    units = (1 << 20) * 10
    s3 = experiment.load(EXPERIMENTS / "s3-channels.toml")
    native = next(c for c in experiment.cells(s3, ["mpich"])
                  if (c.config.name, c.workload.name) == ("native", "is-W"))
    assert predict.plan_of(native, profile).runs[0][1]["ps_per_unit"] == round(0.052e12 / units)
    # ranks that share one CPU never compute side by side: the one-rank time
    assert predict.npb_plan("npb_is", ["-c", "W"], 2, profile).runs[0][1]["ps_per_unit"] == \
        round(0.040e12 / units)
    # a profile from before the pairs: the one-rank time
    del profile["measured"]["kernels"]["npb_is"]["W"]["pair_time"]
    assert predict.plan_of(native, profile).runs[0][1]["ps_per_unit"] == round(0.040e12 / units)


def test_a_gang_sliced_job_is_timed_from_its_first_slice_not_from_its_launch():
    # two domains' IS under gang slicing: the second domain's job waits a slice
    # before it first runs; the lab's timer (after MPI_Init and a barrier) never
    # sees that wait, so both jobs take one wait for the other's slice
    profile = pressure_profile()
    exp = experiment.load(EXPERIMENTS / "s0-pressure.toml")
    cell = next(c for c in experiment.cells(exp, ["mpich"])
                if (c.config.name, c.workload.name, c.policy) == ("d2", "is-W", "default"))
    sc = predict.scenarios(cell, "x", 1, profile)[0][0]
    got = sim.run_texts([(tomli_w.dumps(sc), "x", None)])[0]
    first, second = sorted(j["completion_ns"] for j in got["jobs"])
    assert second == pytest.approx(first, rel=0.02)
    sc["jobs"] = [{k: v for k, v in j.items() if k not in ("timed_from", "untimed_us")}
                  for j in sc["jobs"]]
    got = sim.run_texts([(tomli_w.dumps(sc), "x", None)])[0]
    first, second = sorted(j["completion_ns"] for j in got["jobs"])
    assert second - first == pytest.approx(30e6, rel=0.05)  # timed from launch


def test_per_vcpu_slicing_pins_each_vcpu_as_the_lab_does():
    every = predict.predict(EXPERIMENTS / "s0-pressure-vcpu.toml", pressure_profile())
    assert len(every) == 32 and all(p.predicted for p in every)
    got = by_cell(p for p in every if p.cell.workload.name == "is-W")
    sc = got["mpich", "d4-noise", "default"].scenario
    assert sc["hypervisor"]["slicer"]["slicing"] == "vcpu"
    vms = [d for d in sc["domains"] if d["name"] != "noise"]
    assert [d["pin"] for d in vms] == [[[0], [1]]] * 4 and {d["vcpus"] for d in vms} == {2}
    noise = next(d for d in sc["domains"] if d["name"] == "noise")
    assert noise["pin"] == [[0]]
    # the k-th rank of a domain in its `ranks` order on cpus[k]: ranks [1, 0] over
    # CPUs [0, 1] put rank 0 (the simulator's vCPU 0) on CPU 1
    assert predict.vcpu_pins([0, 1], [1, 0], {0: 0, 1: 1}) == [[1], [0]]
    assert predict.vcpu_pins([0, 1], [0, 1, 2], {0: 0, 1: 1}) == [[0], [1]]
    with pytest.raises(predict.Unsupported):
        predict.vcpu_pins([0, 1], [2, 1, 0], {0: 0, 1: 1})


def test_measurements_are_joined_by_cell(tmp_path):
    exp = experiment.load(EXPERIMENTS / "s0-quick.toml")
    cell = next(c for c in experiment.cells(exp, ["mpich"])
                if c.config.name == "native_up" and c.policy == "default")
    for rep, value in enumerate([3990.0, 4000.0, 4010.0]):
        store.append(tmp_path, experiment="s0-quick", cell=cell, repetition=rep, status="ok",
                     metrics={"lat_8_us": (value, "us")}, message="", wall_s=0.1,
                     started_at=datetime.now(timezone.utc))
    got = by_cell(predict.predict(EXPERIMENTS / "s0-quick.toml", synthetic_profile(),
                                  mpis=["mpich"], results=tmp_path))
    p = got["mpich", "native_up", "default"]
    assert (p.measured, p.runs) == (4000.0, 3)
    assert p.ratio == pytest.approx(p.predicted / 4000.0)
    assert predict.within(p) is True
    assert got["mpich", "native", "default"].measured is None


def two_state_profile() -> dict:
    """The synthetic profile seen in two host states: near as it is, far with
    every message 400 ns dearer (a cache line crossing the host's fabric)."""
    profile = synthetic_profile()
    far = {"lat": series(SIZES, [700 + 100 * s / 1024 for s in SIZES])}
    profile["measured"]["os"]["hop_threshold_ns"] = 70.0
    profile["measured"]["states"] = {
        "near": {"hop": scalar(30), "mpi": {"mpich": {"shm": {"lat": profile["measured"]["mpi"][
            "mpich"]["shm"]["lat"]}}}},
        "far": {"hop": scalar(160), "mpi": {"mpich": {"shm": far}}}}
    return profile


def store_runs(out: Path, cell, runs: list[tuple]) -> None:
    """Runs of a cell: (8-byte latency µs, the host hop before it or None[, the hop
    after it])."""
    for rep, (value, hop_ns, *after) in enumerate(runs):
        metrics = {"lat_8_us": (value, "us")}
        if hop_ns is not None:
            metrics["host_hop_ns"] = (hop_ns, "ns")
        if after:
            metrics["host_hop_after_ns"] = (after[0], "ns")
        store.append(out, experiment="s0-quick", cell=cell, repetition=rep, status="ok",
                     metrics=metrics, message="", wall_s=0.1,
                     started_at=datetime.now(timezone.utc))


def native_mpich(exp) -> experiment.Cell:
    return next(c for c in experiment.cells(exp, ["mpich"])
                if c.config.name == "native" and c.policy == "default")


def test_each_run_is_compared_with_the_prediction_for_its_host_state(tmp_path):
    exp = experiment.load(EXPERIMENTS / "s0-quick.toml")
    profile = two_state_profile()
    # alone: each state predicts from its own figures, the far one dearer by its 400 ns
    alone = [p for p in predict.predict(EXPERIMENTS / "s0-quick.toml", profile, mpis=["mpich"])
             if p.cell.config.name == "native" and p.cell.policy == "default"]
    near, far = sorted(alone, key=lambda p: p.predicted)
    assert (near.state, far.state) == ("near", "far")
    assert far.predicted - near.predicted == pytest.approx(0.400, abs=0.02)
    # two runs near, three far, one that went from near to far: each state's median
    # from its own runs, the moved one in neither
    store_runs(tmp_path, native_mpich(exp), [(0.31, 29), (0.33, 31, 30), (0.70, 150),
                                             (0.72, 165), (0.71, 158, 170), (0.50, 31, 160)])
    got = {p.state: p for p in predict.predict(EXPERIMENTS / "s0-quick.toml", profile,
                                               mpis=["mpich"], results=tmp_path)
           if p.cell.config.name == "native" and p.cell.policy == "default"}
    assert (got["near"].runs, got["near"].measured) == (2, pytest.approx(0.32))
    assert (got["far"].runs, got["far"].measured) == (3, 0.71)
    assert predict.within(got["near"]) and predict.within(got["far"])
    assert got["far"].record()["state"] == "far" and "host far" in got["far"].note()
    assert got["far"].record()["changed_state_runs"] == 1
    # the summary counts a cell once, within the band only if every state's row is
    assert predict.summary(list(got.values())) == \
        "Within ±20 %: 1 of 1 cells in every host state of their runs; 2 of 2 (cell, state) rows."
    got["far"].measured = 1.0
    assert predict.summary(list(got.values()), 0.1).startswith(
        "Within ±10 %: 0 of 1 cells in every host state of their runs; 1 of 2")
    assert predict.summary([]) is None


def test_a_figure_no_probe_measured_in_a_state_is_borrowed_and_said():
    profile = two_state_profile()
    profile["measured"]["mpi"]["mpich"]["shm"]["exch"] = scalar(350)
    profile["measured"]["states"]["near"]["mpi"]["mpich"]["shm"]["exch"] = scalar(340)
    # far measured lat but no exchange: it reads every run's exchange
    assert sim.profile.borrowed(profile, "far", "mpich") == ["shm.exch"]
    assert sim.profile.borrowed(profile, "near", "mpich") == []
    far = sim.profile.in_state(profile, "far")["measured"]["mpi"]["mpich"]["shm"]
    assert far["exch"]["median"] == 350 and far["lat"]["median"][0] == pytest.approx(700, abs=1)
    got = [p for p in predict.predict(EXPERIMENTS / "s0-quick.toml", profile, mpis=["mpich"])
           if p.cell.config.name == "native" and p.cell.policy == "default"]
    far_p = next(p for p in got if p.state == "far")
    assert "shm.exch not measured in this state" in far_p.note()
    assert far_p.record()["borrowed"] == ["shm.exch"]


def test_a_state_without_runs_is_left_out_and_unprobed_runs_go_to_every_state(tmp_path):
    exp = experiment.load(EXPERIMENTS / "s0-quick.toml")
    profile = two_state_profile()
    store_runs(tmp_path / "near", native_mpich(exp), [(0.31, 29), (0.33, 31)])
    got = [p for p in predict.predict(EXPERIMENTS / "s0-quick.toml", profile, mpis=["mpich"],
                                      results=tmp_path / "near")
           if p.cell.config.name == "native" and p.cell.policy == "default"]
    assert [p.state for p in got] == ["near"]
    store_runs(tmp_path / "old", native_mpich(exp), [(0.31, None), (0.71, None)])
    got = [p for p in predict.predict(EXPERIMENTS / "s0-quick.toml", profile, mpis=["mpich"],
                                      results=tmp_path / "old")
           if p.cell.config.name == "native" and p.cell.policy == "default"]
    assert [(p.state, p.runs, p.state_unknown) for p in got] == [("near", 2, True),
                                                                 ("far", 2, True)]


def test_a_profile_in_one_state_predicts_once(tmp_path):
    exp = experiment.load(EXPERIMENTS / "s0-quick.toml")
    store_runs(tmp_path, native_mpich(exp), [(0.31, 29), (0.71, 160)])
    got = [p for p in predict.predict(EXPERIMENTS / "s0-quick.toml", synthetic_profile(),
                                      mpis=["mpich"], results=tmp_path)
           if p.cell.config.name == "native" and p.cell.policy == "default"]
    assert [(p.state, p.runs) for p in got] == [(None, 2)]
    # a profile that knows its one state's hop leaves out runs made in another
    profile = synthetic_profile()
    profile["measured"]["os"]["hop"] = scalar(30)
    got = [p for p in predict.predict(EXPERIMENTS / "s0-quick.toml", profile,
                                      mpis=["mpich"], results=tmp_path)
           if p.cell.config.name == "native" and p.cell.policy == "default"]
    assert [(p.state, p.runs, p.measured, p.other_state) for p in got] == [(None, 1, 0.31, 1)]
    assert "1 run in a host state the profile did not see" in got[0].note()
    # a run that began in the profile's state and ended in another is neither
    store_runs(tmp_path / "moved", native_mpich(exp), [(0.31, 29, 31), (0.50, 30, 160)])
    got = [p for p in predict.predict(EXPERIMENTS / "s0-quick.toml", profile,
                                      mpis=["mpich"], results=tmp_path / "moved")
           if p.cell.config.name == "native" and p.cell.policy == "default"]
    assert [(p.runs, p.measured, p.other_state, p.changed_state) for p in got] == \
        [(1, 0.31, 0, 1)]
    assert "1 run whose host state changed while it ran, left out" in got[0].note()
    with pytest.raises(sim.ProfileMismatch, match="no host state 'far'"):
        sim.profile.in_state(synthetic_profile(), "far")


def complete(profile: dict) -> dict:
    """The synthetic profile with every other key `load_profile` requires filled in
    (figures the predictions do not read)."""
    fill = {str: "synthetic", int: 1, float: 1.0, bool: False, list: [0, 1], dict: {},
            "entry": scalar(1000.0), "series": series([1], [1000.0])}
    profile["measured"]["kernels"] = {}
    for pattern, keys in prof.REQUIRED.items():
        nodes = [profile]
        for part in pattern.split("."):
            nodes = [n.setdefault(part, {}) if part != "*" else v
                     for n in nodes for v in ([n] if part != "*" else
                                              [v for v in n.values() if isinstance(v, dict)])]
        for node in nodes:
            for key, kind in keys.items():
                node.setdefault(key, fill[kind])
    return profile


def test_cli_prints_a_table_and_json_records(tmp_path):
    profile = tmp_path / "synthetic.toml"
    profile.write_text(tomli_w.dumps(complete(synthetic_profile())))
    runner = CliRunner()
    table = runner.invoke(main, ["lab", "predict", str(EXPERIMENTS / "s0-quick.toml"),
                                 "--profile", str(profile), "--mpi", "openmpi"])
    assert table.exit_code == 0, table.output
    assert "timesliced" in table.output and "predicted" in table.output
    as_json = runner.invoke(main, ["lab", "predict", str(EXPERIMENTS / "s0-quick.toml"),
                                   "--profile", str(profile), "--mpi", "openmpi", "--json"])
    assert as_json.exit_code == 0, as_json.output
    records = [json.loads(line) for line in as_json.output.splitlines()]
    assert len(records) == 6
    assert {"config", "policy", "mpi", "workload", "metric", "predicted", "measured",
            "ratio"} <= set(records[0])


def test_compare_and_report_show_the_same_prediction_as_predict(tmp_path):
    """`lab compare --profile` and `report --profile` rebuild the cells from the
    stored runs and show what `lab predict --results` shows for them."""
    results = tmp_path / "results"
    exp = experiment.load(EXPERIMENTS / "s0-quick.toml")
    cells = [c for c in experiment.cells(exp, ["mpich"]) if c.config.name == "native_up"]
    for cell in cells:
        for rep, value in enumerate([2.0, 4000.0][cell.policy == "default"] * k
                                    for k in (0.9, 1.0, 1.1)):
            store.append(results, experiment="s0-quick", cell=cell, repetition=rep,
                         status="ok", metrics={"lat_8_us": (value, "us")}, message="",
                         wall_s=0.1, started_at=datetime.now(timezone.utc))
    profile = tmp_path / "synthetic.toml"
    profile.write_text(tomli_w.dumps(complete(synthetic_profile())))
    expected = predict.predict(EXPERIMENTS / "s0-quick.toml", synthetic_profile(),
                               mpis=["mpich"], results=results)
    expected = {p.cell.policy: p for p in expected if p.cell.config.name == "native_up"}
    runner = CliRunner()
    table = tmp_path / "compare.md"
    out = runner.invoke(main, ["lab", "compare", str(results), "--profile", str(profile),
                               "--markdown", str(table)])
    assert out.exit_code == 0, out.output
    rows = [line for line in table.read_text().splitlines() if "native_up" in line]
    assert len(rows) == 2
    for row in rows:
        p = expected["default" if "| default |" in row else "adaptive"]
        assert row.split(" | ")[-2:] == [predict.fmt(p.predicted),
                                         predict.fmt(p.ratio).rstrip() + " |"]
    out = runner.invoke(main, ["report", str(results), "--profile", str(profile),
                               "--out", str(tmp_path / "report")])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Predicted on the host profile" in text
    hits = sum(bool(predict.within(p)) for p in expected.values())
    assert f"{hits} of 2 predicted cells within ±20 % of the median" in text


def test_cli_names_a_bad_profile(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[profile]\nname = 1\n")
    result = CliRunner().invoke(main, ["lab", "predict", str(EXPERIMENTS / "s0-quick.toml"),
                                       "--profile", str(bad)])
    assert result.exit_code != 0
    assert str(bad) in result.output


CAPPED_AND_SPLIT = """
[experiment]
name = "edges"
mpis = ["mpich"]
policies = ["default"]
[[workload]]
name = "pp"
program = "pingpong"
args = ["-s", "8", "-T", "lat"]
[[config]]
name = "capped"
kind = "capped"
[[config]]
name = "split"
kind = "domains"
mode = "timesliced"
[[config.domain]]
name = "a"
cpus = [0]
ranks = [0]
[[config.domain]]
name = "b"
cpus = [1]
ranks = [1]
"""


def test_caps_are_quotas_and_disjoint_slicers_are_refused(tmp_path):
    path = tmp_path / "edges.toml"
    path.write_text(CAPPED_AND_SPLIT)
    capped, split = predict.predict(path, synthetic_profile())
    assert capped.scenario["hypervisor"]["linux"]["period_us"] == 100_000
    assert {d["cap"] for d in capped.scenario["domains"]} == {50}
    # each rank alone on its core under a quota: it spins through its 50 ms, so the
    # ping-pong keeps going, far below a throttled period per message
    assert capped.predicted < 1_000
    assert split.predicted is None and "disjoint CPUs" in split.unsupported


# --- host.profile in a scenario ----------------------------------------------------

SCENARIO = """
name = "with-profile"
[host]
cores = 1
profile = "{profile}"
mpi = "openmpi"
[hypervisor]
scheduler = "linux"
{extra}
[[domains]]
name = "r0"
[[domains]]
name = "r1"
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["r0", "r1"]
wait_policy = "adaptive"
params = {{ iterations = 100, bytes = 8 }}
"""


def test_a_scenario_names_a_profile_and_its_own_values_win(tmp_path):
    (tmp_path / "host.toml").write_text(tomli_w.dumps(complete(synthetic_profile())))
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(profile="host.toml", extra=""))
    run = sim.run_file(path)
    # two ranks on one core, adaptive: per hop a 1000 ns switch (the profile's yield hop),
    # the message's 2 x 100 ns copies (its 100 ns flight overlaps the switch) and at
    # most the shared path's ten-poll spin (200 ns), a few ns of rounding
    per_hop = run.report["jobs"][0]["completion_ns"] / 200
    assert 1_200 <= per_hop <= 1_450
    path.write_text(SCENARIO.format(profile="host.toml", extra="vcpu_switch_ns = 5000"))
    per_hop = sim.run_file(path).report["jobs"][0]["completion_ns"] / 200
    assert 5_200 <= per_hop <= 5_450


def test_a_bad_profile_reference_names_the_scenario_and_field(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(profile="missing.toml", extra=""))
    with pytest.raises(sim.SimError, match=r"s\.toml: field `host\.profile`: .*missing\.toml"):
        sim.run_file(path)
    (tmp_path / "thin.toml").write_text('[profile]\nformat = 1\nname = "x"\n')
    path.write_text(SCENARIO.format(profile="thin.toml", extra=""))
    with pytest.raises(sim.SimError, match=r"field `host\.profile`: .*thin\.toml"):
        sim.run_file(path)


def test_the_native_core_alone_refuses_an_unresolved_profile():
    from vhpc import _core

    text = SCENARIO.format(profile="host.toml", extra="")
    with pytest.raises(ValueError, match="host.profile.*vhpc resolves"):
        _core.run(text, "raw.toml", None, False)


def test_a_bump_where_a_larger_message_went_faster_does_not_hide_the_protocol_switch():
    # MPICH over UCX's TCP on the bridge (profiles/amd-epyc-2cpu.toml, µs): eager to
    # 16 KiB, then a rendezvous line with its handshake; 4 KiB took longer than 8 KiB
    us = {1024: 6.8, 2048: 6.8, 4096: 11.9, 8192: 9.5, 16384: 14.3, 32768: 44.6,
          65536: 50.7, 131072: 62.0, 262144: 83.9}
    lat = {x: v * 1000 for x, v in us.items()}
    assert sim.profile.lower_envelope(lat)[4096] == 9500 and sim.profile.lower_envelope(lat)[
        8192] == 9500
    eager, slope, rndv = sim.profile.protocol_switch(lat)
    assert eager == 16384 and 400 < slope < 600 and 35_000 < rndv < 45_000
    # a straight curve has no switch, bump or not
    flat = {x: 6800 + 480 * x / 1024 for x in us}
    flat[4096] *= 1.5
    assert sim.profile.protocol_switch(flat) is None


def test_a_single_copy_channel_is_pulled_by_its_receiver_and_tcp_is_pushed():
    # 1 MiB one way in 100 µs; 1 MiB each way at once in 105 µs (shared memory:
    # each CPU copies what it receives, the sender adds ~5 %) or in 175 µs (TCP:
    # each CPU also copies what it sends)
    def channel(bibw_us: float) -> dict:
        lat = {"x": [8, 1024, 2048], "median": [500.0, 600.0, 700.0], "lo": [500.0] * 3,
               "hi": [500.0] * 3, "n": 5, "unit": "ns"}
        mib = 1 << 20
        figures = {"lat": lat, "bw": scalar(mib / 100.0),  # MB/s: bytes per µs
                   "bibw": scalar(2 * mib / bibw_us)}
        profile = {"measured": {"mpi": {"mpich": {"shm": figures}}}}
        return sim.profile.shm_channel(profile, "mpich")
    assert channel(105).get("rndv_pull") is True
    assert "rndv_pull" not in channel(175)


def test_freshly_written_data_add_the_fresh_probes_extra_to_the_receivers_rendezvous_rate():
    # 1 MiB: the ping-pong's buffer in 100 µs, data written before each send in
    # 300 µs: 200 µs more per MiB, about 195 ns per KiB, on the receiver's copy
    mib = 1 << 20
    lat = {"x": [8, 1024, mib], "median": [500.0, 600.0, 100_000.0], "lo": [500.0] * 3,
           "hi": [500.0] * 3, "n": 5, "unit": "ns"}
    figures = {"lat": lat, "bw": scalar(mib / 100.0), "bibw": scalar(2 * mib / 105.0),
               "fresh": scalar(300_000.0)}
    profile = {"measured": {"mpi": {"mpich": {"shm": figures}}}}
    plain = sim.profile.shm_channel(profile, "mpich")
    fresh = sim.profile.shm_channel(profile, "mpich", fresh=True)
    assert fresh["rndv_recv_ns_per_kib"] - plain["rndv_recv_ns_per_kib"] == 195
    assert {k: v for k, v in fresh.items() if k != "rndv_recv_ns_per_kib"} == {
        k: v for k, v in plain.items() if k != "rndv_recv_ns_per_kib"}
    # a profile measured before the probe existed: nothing to add
    del figures["fresh"]
    assert sim.profile.shm_channel(profile, "mpich", fresh=True) == plain


def test_kernels_send_fresh_data_and_the_exchange_benchmarks_do_not():
    # the NPB-like kernels compute their messages every iteration: their shared
    # memory's rendezvous rate carries the fresh probe's extra; a ping-pong's not
    profile = pressure_profile()
    mib = 1 << 20  # 1 MiB in 100 µs one way and each way at once; 100 ns a KiB more fresh
    sizes = [*SIZES, mib]
    profile["measured"]["mpi"]["mpich"]["shm"] = {
        "lat": series(sizes, [300 + 100 * s / 1024 for s in sizes]),
        "bw": scalar(mib / 100.0), "bibw": scalar(2 * mib / 100.0),
        "fresh": scalar(300 + 100 * mib / 1024 + 1024 * 100)}
    cells = {(c.config.name, c.workload.name, c.policy): c for c in experiment.cells(
        experiment.load(EXPERIMENTS / "s0-pressure.toml"), ["mpich"])}
    kernel = predict.scenarios(cells["d1", "is-W", "default"], "x", 1, profile)[0][0]
    plain = sim.profile.shm_channel(profile, "mpich")
    assert kernel["mpi"]["shm"]["rndv_recv_ns_per_kib"] == plain["rndv_recv_ns_per_kib"] + 100
    quick = next(c for c in experiment.cells(experiment.load(EXPERIMENTS / "s0-quick.toml"),
                                             ["mpich"]) if c.config.name == "native_up")
    assert predict.scenarios(quick, "x", 1, profile)[0][0]["mpi"]["shm"] == plain
