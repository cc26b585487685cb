"""S3 partitioning and I/O experiments (vhpc.sim.reproduce.s3_partition) and the
channel fields seen from Python: record format, determinism, the directions the
issue asks for (compared between simulated cells, never with fixed numbers),
and invalid channel fields named in the error.
"""

from __future__ import annotations

import re

import pytest
import tomli_w

from vhpc.sim import run as sim
from vhpc.sim.reproduce import s3_partition as s3

KEYS = {"experiment", "platform", "placement", "partitioning", "channel", "benchmark", "run",
        "slowdown", "published", "note"}


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return s3.run(quick=True)


def cell(records, experiment, partitioning, channel, kernel="is"):
    [r] = [r for r in records if (r["experiment"], r["partitioning"], r["channel"]) ==
           (experiment, partitioning, channel) and r["benchmark"].startswith(kernel + ".")]
    return r


def test_records_have_the_issue_keys(records):
    assert records
    for r in records:
        assert KEYS <= set(r), r
        assert r["run"] == 1 and r["placement"] == "off"
        assert r["slowdown"] == pytest.approx(r["time_s"] / r["native_s"] - 1)
        assert r["published"] is None or isinstance(r["published"], float)
    assert {r["experiment"] for r in records} == {"partitioning", "io"}
    assert {r["channel"] for r in records} == {"sm", "virtio", "emulated", "ivshmem"}


def test_runs_are_deterministic(records):
    again = s3.run(quick=True)
    assert [r["slowdown"] for r in again] == [r["slowdown"] for r in records]


def test_shared_memory_beats_the_virtual_network(records):
    for part in ("1/socket", "2/socket"):
        ivs = cell(records, "partitioning", part, "ivshmem")["slowdown"]
        virtio = cell(records, "partitioning", part, "virtio")["slowdown"]
        emulated = cell(records, "partitioning", part, "emulated")["slowdown"]
        assert ivs < virtio < emulated
        assert abs(ivs) < 0.05, "one VM per socket over ivshmem within a few % of native"


def test_emulated_nic_prefers_small_vms_on_all_to_all(records):
    # One device thread per VM: 32 one-core VMs have 32, two 16-core VMs two.
    small = cell(records, "io", "1 core/VM", "emulated")["slowdown"]
    big = cell(records, "io", "16 core/VM", "emulated")["slowdown"]
    assert small < big


def test_scenarios_name_the_host_and_device_threads():
    lay = s3.Layout("1/socket", 1, s3.SOCKETS)
    sc = s3.vm_scenario(lay, "virtio", "npb.is", "S")
    host = sc["domains"][0]
    assert host["dom0"] and host["vcpus"] == s3.SOCKETS
    assert host["pin"][1] == lay.cores(1), "vhost thread on its VM's cores"
    assert all(d.get("nic") == "virtio" for d in sc["domains"][1:])
    ivs = s3.vm_scenario(lay, "ivshmem", "npb.is", "S")
    assert not any(d.get("dom0") for d in ivs["domains"])
    assert ivs["mpi"]["transports"] == ["sm", "ivshmem", "net"]
    with pytest.raises(ValueError, match="NUMA memory model"):
        s3.memory_fields(sc, "first_touch")


@pytest.mark.parametrize("field,value,named", [
    ("nic", "e1000", "domains[1].nic"),
    ("ivshmem", "", "domains[1].ivshmem"),
])
def test_invalid_channel_fields_are_named(field, value, named):
    sc = s3.vm_scenario(s3.Layout("1/socket", 1, s3.SOCKETS), "virtio", "npb.is", "S")
    sc["domains"][1][field] = value
    with pytest.raises(sim.SimError, match=re.escape(f"field `{named}`")):
        sim.run_text(tomli_w.dumps(sc), "bad.toml")


def test_unknown_transport_is_named():
    sc = s3.vm_scenario(s3.Layout("1/socket", 1, s3.SOCKETS), "ivshmem", "npb.is", "S")
    sc["mpi"]["transports"] = ["sm", "shmem"]
    with pytest.raises(sim.SimError, match=r"field `mpi.transports\[1\]`"):
        sim.run_text(tomli_w.dumps(sc), "bad.toml")


def test_standalone_prints_a_table(capsys):
    assert s3.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "partitioning" in out and "ivshmem" in out and "records in" in out
