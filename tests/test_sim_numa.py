"""The NUMA memory model from Python: host presets, analytic oracles, invalid
topologies named by field, and `vhpc reproduce s3` (its record keys and the
directions issue 13 names, never exact values)."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest
import tomli_w
from click.testing import CliRunner

from vhpc import _core, sim
from vhpc.cli import main
from vhpc.sim.reproduce import s3


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def exchange(cores: list[int], *, distance: list[list[int]], mem_ppm: int,
             memory: dict | None) -> str:
    """`exchange` ranks (10 × 1 ms compute, no jitter) pinned one per core of a
    4-core, 2-node host whose nodes have 10000 MB/s each."""
    sc = {
        "name": "numa-oracle",
        "host": {"cores": 4, "numa_nodes": 2, "distance": distance,
                 "nodes": [{"bandwidth_mb_s": 10_000}, {"bandwidth_mb_s": 10_000}]},
        "hypervisor": {"scheduler": "round_robin"},
        "domains": [{"name": "vm", "vcpus": len(cores), "pin": [[c] for c in cores]}],
        "jobs": [{"name": "x", "workload": "exchange", "ranks": ["vm"] * len(cores),
                  "params": {"compute_us": 1000, "bytes": 0, "iterations": 10,
                             "jitter_ppm": 0, "mem_intensity_ppm": mem_ppm}}],
    }
    if memory is not None:
        sc["memory"] = memory
    return tomli_w.dumps(sc)


def job(text: str) -> dict:
    return sim.run_text(text, "numa.toml").report["jobs"][0]


# --- presets ---------------------------------------------------------------------


def test_hosts_lists_the_three_s3_machines_and_a_generic_one():
    result = invoke("sim", "hosts")
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.output.splitlines()]
    assert names == ["xeon-uma-4x4", "opteron-numa-4x4", "nehalem-numa-2x4", "generic"]
    assert [n for n, _ in _core.hosts()] == names


@pytest.mark.parametrize("preset", list(s3.PRESETS))
def test_reproduce_s3_knows_the_presets_core_counts(preset):
    cores = s3.PRESETS[preset][0]
    text = tomli_w.dumps({
        "host": {"preset": preset}, "domains": [{"name": "d", "native": True}],
        "jobs": [{"name": "j", "workload": "npb.omp.ep", "ranks": ["d"],
                  "params": {"class": "S"}}]})
    assert len(sim.run_text(text, "p.toml").report["cores"]) == cores


@pytest.mark.parametrize("preset", list(s3.PRESETS))
def test_reproduce_s3_queues_on_the_presets_that_give_a_latency(preset):
    # The NUMA presets give the idle latency queueing needs; the Xeon's does not,
    # and the simulator rejects queueing without one, so every scenario must run.
    setup = s3.Setup(preset, "mpi", "cg", "first_touch", "one_vm_spanning", warm=True)
    scenario = setup.scenario()
    assert scenario["memory"].get("queueing", False) == s3.PRESETS[preset][2]
    sim.run_text(tomli_w.dumps(scenario), "s3.toml")


# --- oracles ---------------------------------------------------------------------


def test_local_uncontended_memory_costs_nothing():
    args = dict(distance=[[10, 20], [20, 10]], mem_ppm=1_000_000)
    off = job(exchange([0, 1], memory=None, **args))
    on = job(exchange([0, 1], memory={"placement": "first_touch"}, **args))
    assert on["completion_ns"] == off["completion_ns"]
    assert (on["remote_share"], on["mem_slowdown"]) == (0.0, 0.0)
    assert "remote_share" not in off


@pytest.mark.parametrize("mem_ppm, factor", [(1_000_000, 3), (500_000, 2)])
def test_a_fully_remote_phase_slows_by_the_configured_ratio(mem_ppm, factor):
    # Ranks on node 1; Xen-like preallocation puts the guest on node 0 (no dom0).
    args = dict(distance=[[10, 30], [30, 10]], mem_ppm=mem_ppm)
    off = job(exchange([2, 3], memory=None, **args))
    on = job(exchange([2, 3], memory={"placement": "preallocate"}, **args))
    assert on["useful_ns"] == factor * off["useful_ns"]
    assert on["remote_share"] == 1.0


# --- validation --------------------------------------------------------------------


@pytest.mark.parametrize("host, domain, memory, field", [
    ({"preset": "sparc"}, {}, None, "host.preset"),
    ({"preset": "opteron-numa-4x4", "cores": 8}, {}, None, "host.cores"),
    ({"cores": 4, "numa_nodes": 2, "distance": [[10, 20]]}, {}, None, "host.distance"),
    ({"cores": 4, "numa_nodes": 2, "distance": [[10, 20], [20, 9]]}, {}, None,
     "host.distance[1][1]"),
    ({"cores": 4, "nodes": [{"cores": [0, 1]}, {"cores": [1, 2, 3]}]}, {}, None,
     "host.nodes[1].cores"),
    ({"cores": 4}, {"warm": True}, None, "domains[0].warm"),
    ({"cores": 4}, {}, {"placement": "spread"}, "memory.placement"),
])
def test_invalid_topologies_and_memory_settings_name_the_field(host, domain, memory, field):
    sc = {"host": host, "domains": [{"name": "vm", "vcpus": 2, **domain}],
          "jobs": [{"name": "j", "workload": "npb.cg", "ranks": ["vm", "vm"],
                    "params": {"class": "S"}}]}
    if memory is not None:
        sc["memory"] = memory
    with pytest.raises(sim.SimError, match=re.escape(f"bad.toml: field `{field}`")):
        sim.run_text(tomli_w.dumps(sc), "bad.toml")


# --- vhpc reproduce s3 ---------------------------------------------------------------


@pytest.fixture(scope="module")
def records() -> list[dict]:
    got, _ = s3.run(quick=True, only=list(s3.EXPERIMENTS))
    return got


def mean(records: list[dict], **match) -> float:
    rows = [r for r in records if r["benchmark"] == "avg"
            and all(r[k] == v for k, v in match.items())]
    assert len(rows) == 1, match
    return rows[0]["slowdown"]


def test_every_record_has_the_issues_keys(records):
    assert records
    for r in records:
        assert set(s3.RECORD_KEYS) <= set(r)
        assert r["run"] in (1, 2)
        assert isinstance(r["slowdown"], float)
    published = {r["published"] for r in records if r["published"] is not None}
    assert {0.10, 0.40, 2.33, 0.09} <= published


NUMA = [p for p, (_, _, numa) in s3.PRESETS.items() if numa]


@pytest.mark.parametrize("platform", NUMA)
def test_spanning_vms_are_slower_with_xen_like_than_kvm_like_placement(records, platform):
    span = dict(experiment="spanning", platform=platform, partitioning="one_vm_spanning")
    assert mean(records, placement="preallocate", **span) > \
        mean(records, placement="first_touch", **span) > 0


@pytest.mark.parametrize("platform", NUMA)
def test_a_warm_vm_is_worse_than_a_cold_one(records, platform):
    warm = dict(experiment="warm", platform=platform)
    assert mean(records, run=2, **warm) > mean(records, run=1, **warm)


@pytest.mark.parametrize("platform", NUMA)
def test_spanning_numa_costs_more_than_one_socket_and_vnuma_fixes_it(records, platform):
    xen = dict(experiment="spanning", platform=platform, placement="preallocate")
    assert mean(records, partitioning="one_vm_spanning", **xen) > \
        mean(records, partitioning="one_vm_one_socket", **xen)
    placed = dict(experiment="placement", platform=platform, partitioning="one_vm_spanning")
    for p in ("preallocate", "first_touch"):
        assert mean(records, placement=f"{p}+vnuma", **placed) < mean(records, placement=p, **placed)


def test_nested_paging_costs_vms_on_hosts_with_hap_only(records):
    one = dict(experiment="spanning", partitioning="one_vm_one_socket", placement="preallocate")
    assert mean(records, platform="xeon-uma-4x4", **one) == pytest.approx(0, abs=0.01)
    for platform in NUMA:
        assert mean(records, platform=platform, **one) > 0.02


@pytest.fixture(scope="module")
def extra() -> list[dict]:
    registry = s3.experiments()
    assert {"partitioning", "io"} <= set(registry), "s3_partition's EXPERIMENTS"
    got, _ = s3.run(quick=True, only=["partitioning", "io"])
    return got


def avg(records: list[dict], **match) -> float:
    rows = [r for r in records if r["benchmark"] == "avg"
            and all(r[k] == v for k, v in match.items())]
    assert len(rows) == 1, match
    return rows[0]["slowdown"]


@pytest.mark.parametrize("platform", ["opteron-numa-4x4", "xeon-uma-4x4"])
def test_partitioning_over_the_network_is_far_worse_than_over_shared_memory(extra, platform):
    part = dict(experiment="partitioning", platform=platform, partitioning="1/socket")
    ivshmem = avg(extra, channel="ivshmem", **part)
    assert avg(extra, channel="virtio", **part) > ivshmem + 0.1
    assert avg(extra, channel="emulated", **part) > 2 * (1 + ivshmem)


def test_the_emulated_nic_is_best_with_one_core_per_vm(extra):
    io = {r["partitioning"]: r["slowdown"] for r in extra
          if r["experiment"] == "io" and r["channel"] == "emulated" and r["benchmark"] == "avg"}
    assert min(io, key=io.get) == "1 core/VM"


def test_reproduce_s3_is_deterministic(records):
    again, _ = s3.run(quick=True, only=list(s3.EXPERIMENTS))
    assert again == records


def test_the_cli_prints_json_records_and_a_table():
    result = invoke("reproduce", "s3", "--json", "--only", "warm")
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert {r["experiment"] for r in got} == {"warm"}
    table = invoke("reproduce", "s3", "--only", "warm")
    assert table.exit_code == 0 and "brief" in table.output and "+40 %" in table.output
    bad = invoke("reproduce", "s3", "--only", "nope")
    assert bad.exit_code != 0 and "known: spanning" in bad.output


def test_extra_experiment_modules_join_the_registry(monkeypatch):
    def run(*, quick: bool) -> list[dict]:
        return [{"experiment": "extra", "slowdown": 0.0}]

    fake = types.ModuleType("vhpc_test_s3_extra")
    fake.EXPERIMENTS = {"extra": run}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vhpc_test_s3_extra", fake)
    monkeypatch.setattr(s3, "EXTRA_MODULES", ("vhpc_test_s3_missing", "vhpc_test_s3_extra"))
    found = s3.experiments()
    assert list(found)[:3] == ["spanning", "placement", "warm"] and found["extra"] is run
