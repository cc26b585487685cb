"""Domains as network namespaces on a bridge (host/netns.py, config `channel`): the
namespaces, bridge and veths made and always removed (also after an exception, and
by cleanup after a dead run); a two-rank ping-pong across namespaces crosses the
bridge over `net` and not over `shm`, with each MPI; a bad `channel` is named with
its field; the channel probe's figures become a valid profile section and the
simulator's channel costs by the rule of sim/profile.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vhpc import mpi, sim
from vhpc.host import leftovers, netns, placement
from vhpc.host import profile as prof
from vhpc.lab import LabError, calibrate, experiment, predict, runner
from vhpc.lab.experiment import Config, Workload
from vhpc.runtime import bench as runtime_bench

needs_netns = pytest.mark.skipif(not netns.available()[0],
                                 reason=f"no network namespaces here: {netns.available()[1]}")


def ours() -> list[str]:
    return [ns for ns in netns.existing() if ns.startswith(f"vhpc-{os.getpid()}-")]


def records() -> list[Path]:
    return [p for p in leftovers.state_dir().glob(f"vhpc-{os.getpid()}-net*.json")]


@needs_netns
def test_each_domain_gets_a_namespace_on_the_bridge_and_all_goes_afterwards():
    with netns.bridged(["a", "b"]) as net:
        assert set(ours()) == {net.bridge_ns, *net.namespace.values()}
        assert len(records()) == 1  # written down before anything was made
        for k, d in enumerate(("a", "b")):
            addr = netns.ip("-n", net.namespace[d], "-j", "addr", "show", "dev", netns.DEVICE)
            assert json.loads(addr)[0]["addr_info"][0]["local"] == f"10.231.0.{k + 1}"
            link = json.loads(netns.ip("-n", net.bridge_ns, "-j", "link", "show",
                                       "dev", net.port[d]))
            assert link[0]["master"] == netns.BRIDGE
        # the host's own network is untouched: no vhpc interface in it
        assert netns.DEVICE not in netns.ip("link", "show") and "vhpc" not in netns.ip("link")
        assert net.bytes() == 0  # nothing crosses the bridge on its own (no IPv6, no snooping)
    assert ours() == [] and records() == []


@needs_netns
def test_namespaces_go_after_an_exception_too():
    with pytest.raises(RuntimeError, match="boom"):
        with netns.bridged(["a"]):
            assert len(ours()) == 2
            raise RuntimeError("boom")
    assert ours() == [] and records() == []


@needs_netns
def test_cleanup_removes_the_namespaces_a_dead_run_left():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    name = f"vhpc-{dead.pid}-net0-br"
    netns.ip("netns", "add", name)
    try:
        report = leftovers.cleanup(owner=dead.pid)
        assert not (netns.NETNS_DIR / name).exists()
        assert any(f"removed network namespace {name}" in line for line in report.cleaned)
    finally:
        if (netns.NETNS_DIR / name).exists():
            netns.delete(name)


def channel_cell(mpi_name: str, channel: str) -> experiment.Cell:
    config = Config(name=channel, kind="domains", channel=channel, domain=[
        {"name": "a", "cpus": [0], "ranks": [0]}, {"name": "b", "cpus": [1], "ranks": [1]}])
    workload = Workload(name="pp", program="pingpong",
                        args=["-s", "65536", "-T", "lat", "-t", "0.05"])
    return experiment.Cell(mpi_name, config, workload, "default")


@needs_netns
@pytest.mark.parametrize("mpi_name", list(mpi.MPIS))
def test_pingpong_across_namespaces_crosses_the_bridge_over_net_only(mpi_name):
    if not mpi.MPIS[mpi_name].available():
        pytest.skip(f"{mpi_name} not installed")
    if len(placement.allowed_cpus()) < 2:
        pytest.skip("two CPUs needed")
    runtime_bench.build_bench()
    got = {}
    for channel in ("net", "shm"):
        cell = channel_cell(mpi_name, channel)
        why = runner.unavailable(cell)
        if why is not None:
            pytest.skip(why)
        result = runner.run_once(cell, timeout_s=60)
        assert result.status == "ok", result.message
        got[channel] = result.metrics[runner.BRIDGE_METRIC][0]
    # every 64 KiB message of the ping-pong crossed the bridge over TCP ...
    assert got["net"] > 1 << 20, got
    # ... and not one byte through shared memory
    assert got["shm"] == 0, got
    assert ours() == []


def test_a_bad_channel_is_named_with_its_field(tmp_path):
    path = tmp_path / "x.toml"
    body = textwrap.dedent("""
        [experiment]
        name = "x"
        [[workload]]
        name = "pp"
        program = "pingpong"
        [[config]]
        name = "c"
        kind = "domains"
        channel = "tcp"
        [[config.domain]]
        name = "a"
        cpus = [0]
        """)
    path.write_text(body)
    with pytest.raises(LabError, match=r"x\.toml: config\.0\.channel: Input should be 'net' or 'shm'"):
        experiment.load(path)
    path.write_text(body.replace('kind = "domains"', 'kind = "native"')
                    .replace('channel = "tcp"', 'channel = "net"')
                    .split("[[config.domain]]")[0])
    with pytest.raises(LabError, match=r"config\.0: .*`channel` is only for kind `domains`"):
        experiment.load(path)


def test_a_channel_config_is_stored_with_its_channel_and_old_cells_unchanged():
    assert channel_cell("mpich", "net").as_dict()["config"]["channel"] == "net"
    plain = Config(name="d", kind="domains", domain=[{"name": "a", "cpus": [0]}])
    assert "channel" not in plain.dump()


def ns_series(small_ns: float, per_kib_ns: float) -> list[float]:
    return [small_ns + per_kib_ns * x / 1024 for x in calibrate.lat_sizes()]


def test_the_channel_probe_figures_become_a_profile_section_and_channel_costs(tmp_path):
    impl = mpi.MPIS["mpich"]
    res = calibrate.Results()
    for section, (small, per_kib, crossed) in {"bridge": (30_000, 600, 5e6),
                                               "netns_shm": (900, 90, 0)}.items():
        lat = ns_series(small, per_kib)
        res.samples[("mpi", "mpich", section, "lat")] = [
            {**{f"lat_{n}": v for n, v in zip(calibrate.lat_sizes(), lat)},
             "bridge_bytes": crossed}]
        res.samples[("mpi", "mpich", section, "bw")] = [
            {f"bw_{calibrate.BW_SIZE}": 500.0, f"bibw_{calibrate.BW_SIZE}": 450.0,
             f"fresh_{calibrate.BW_SIZE}": 2500e3}]
    res.samples[("mpi", "mpich", "bridge", calibrate.LOCAL_SEND)] = [
        {"send": 19521.0, "isend": 20000.0}]
    found = calibrate.channel_figures(impl, res)
    assert found["bridge"]["channel"] == "net" and found["netns_shm"]["channel"] == "shm"
    assert found["bridge"]["bridge_bytes"]["median"] == 5e6
    assert found["netns_shm"]["bridge_bytes"]["median"] == 0
    assert found["bridge"]["env"]["UCX_TLS"] == "tcp,self"
    # written and read back as a profile: the section passes the profile's own check
    profile = json.loads(json.dumps(predict_profile()))
    profile["measured"]["mpi"]["mpich"].update(found)
    path = tmp_path / "p.toml"
    path.write_text(prof.dumps(calibrate.restore_inline(profile)))
    back = prof.load_profile(path)
    domain, fields = sim.profile.lab_channel(back, "mpich", "net")
    assert domain == {"nic": "bridge"} and fields["transports"] == ["sm", "net"]
    assert fields["local_send_limit"] == 19521  # the channel's own, the smaller call
    # the [mpi.shm] rule: a small message's cost split in three, the 1-16 KiB slope halved
    cost = fields["bridge"]
    assert cost["latency_ns"] == cost["send_ns"] == cost["recv_ns"] == pytest.approx(10_000, abs=2)
    assert cost["send_ns_per_kib"] == cost["recv_ns_per_kib"] == 300
    domain, fields = sim.profile.lab_channel(back, "mpich", "shm")
    assert domain == {"ivshmem": "lab"} and fields["transports"] == ["sm", "ivshmem", "net"]
    assert "local_send_limit" not in fields  # not measured over it: the simulator's default
    assert fields["ivshmem"]["send_ns"] == 300 and fields["ivshmem"]["send_ns_per_kib"] == 45
    # any scenario on this profile gets them: nic = "bridge" and ivshmem groups cost as here
    o = sim.overlay(back, "mpich")["mpi"]
    assert o["bridge"] == cost and o["ivshmem"] == fields["ivshmem"]
    for section in ("bridge", "netns_shm"):
        del back["measured"]["mpi"]["mpich"][section]
    assert {"bridge", "ivshmem"}.isdisjoint(sim.overlay(back, "mpich")["mpi"])  # not measured


def predict_profile() -> dict:
    """A valid measured profile to add the channel sections to: the repository's."""
    found = sorted((Path(__file__).parents[1] / "profiles").glob("amd-epyc-2cpu.toml"))
    if not found:
        pytest.skip("no measured profile in profiles/")
    return prof.load_profile(found[0])


def test_a_channel_cell_becomes_bridged_or_ivshmem_domains_in_its_scenario():
    profile = json.loads(json.dumps(predict_profile()))  # its own channel figures replaced
    body = {"placement": "p", "policy": "default", "channel": "net", "env": {},
            "lat": {"x": [1, 1024, 16384], "x_unit": "B", "median": [3000.0, 4000.0, 19000.0],
                    "lo": [0, 0, 0], "hi": [0, 0, 0], "n": 1, "unit": "ns"}}
    profile["measured"]["mpi"]["mpich"]["bridge"] = body
    profile["measured"]["mpi"]["mpich"]["netns_shm"] = body
    for channel, table, field in (("net", "bridge", ("nic", "bridge")),
                                  ("shm", "ivshmem", ("ivshmem", "lab"))):
        scs, _ = predict.scenarios(channel_cell("mpich", channel), "t", 1, profile)
        sc = scs[0]
        assert all(d[field[0]] == field[1] for d in sc["domains"])
        assert sc["mpi"][table] == {"latency_ns": 1000, "send_ns": 1000, "recv_ns": 1000,
                                    "send_ns_per_kib": 500, "recv_ns_per_kib": 500}
    del profile["measured"]["mpi"]["mpich"]["bridge"]
    with pytest.raises(sim.ProfileMismatch, match="measured.mpi.mpich.bridge"):
        predict.scenarios(channel_cell("mpich", "net"), "t", 1, profile)
