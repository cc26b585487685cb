"""Domains (vhpc/domains.py, config kind `domains`): one cgroup per domain with
its shares, quota, CPUs and freezer; weighted time slices; per-vCPU slicing (a
freezer group per vCPU, ranks pinned to their vCPU's CPU, a slicer per CPU); a
noise domain; every group and process gone afterwards, also after an exception."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vhpc import mpi
from vhpc.host import domains, placement, timeslice
from vhpc.runtime import bench as runtime_bench
from vhpc.lab import experiment, runner
from vhpc.lab.experiment import Config, Workload

needs_mpich = pytest.mark.skipif(not mpi.MPIS["mpich"].available(), reason="MPICH not installed")
MPICH = mpi.MPIS["mpich"]


@pytest.fixture(autouse=True)
def cgroups_or_skip():
    for ok, reason in (placement.cgroup_cpu_available(), placement.freezer_available()):
        if not ok:
            pytest.skip(f"cgroups not writable here: {reason}")


def ours() -> list[Path]:
    return [g for g in placement.leftover_groups() if g.name.startswith(f"vhpc-{os.getpid()}-")]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def two_domains(**kw) -> domains.Domains:
    a = domains.Domain("a", (0,), weight=512, cap=0.5, ranks=(0,))
    b = domains.Domain("b", (0, 1), ranks=(1,))
    return domains.Domains((a, b), nranks=2, **kw)


def test_each_domain_gets_its_groups_and_everything_goes_afterwards():
    noise = domains.Domain("noise", (1,))
    place = two_domains(mode="timesliced", noise=noise)
    with place.commands(MPICH, ["true"]) as cmds:
        cpu = {g.name: g for g in ours() if g.parent == placement.CGROUP_CPU}
        (parent,) = cpu.values()
        assert (parent / "dom-a" / "cpu.shares").read_text().strip() == "2048"  # weight 512
        assert (parent / "dom-b" / "cpu.shares").read_text().strip() == "1024"  # weight 256
        assert (parent / "dom-a" / "cpu.cfs_quota_us").read_text().strip() == "50000"
        assert (parent / "dom-b" / "cpu.cfs_quota_us").read_text().strip() == "-1"
        freezer = placement.CGROUP_FREEZER / parent.name
        assert {p.name for p in freezer.iterdir() if p.is_dir()} == {"dom-a", "dom-b", "dom-noise"}
        time.sleep(0.2)  # the noise process joins its groups as it starts
        (noise_pid,) = placement.group_tasks(parent / "dom-noise")
        assert placement.group_tasks(freezer / "dom-noise") == {noise_pid}
        assert os.sched_getaffinity(noise_pid) == {1}
    assert len(cmds) == 1 and '"cpus": [0, 1]' in " ".join(cmds[0])  # rank 1's CPUs
    assert ours() == [] and not alive(noise_pid)


def test_groups_and_noise_go_after_an_exception_too():
    place = two_domains(mode="linux", noise=domains.Domain("noise", (0,)))
    with pytest.raises(RuntimeError, match="boom"):
        with place.commands(MPICH, ["true"]):
            time.sleep(0.2)
            (noise_pid,) = {t for g in ours() for t in placement.group_tasks(g)}
            raise RuntimeError("boom")
    assert ours() == [] and not alive(noise_pid)
    assert not any(g.parent == placement.CGROUP_FREEZER for g in ours())  # linux: no freezer


def test_noise_domain_spins():
    noise = domains.Domain("noise", (0,))
    with domains.noise_running(noise, [[]]) as (proc,):
        time.sleep(0.5)
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        assert int(fields[11]) > 10  # over 0.1 s of user time in 0.5 s: it loops
    assert proc.poll() is not None


def test_domains_on_shared_cpus_are_sliced_together():
    a, b, c, d = (domains.Domain(n, cpus) for n, cpus in
                  (("a", (0,)), ("b", (1,)), ("c", (2,)), ("d", (0, 2))))
    assert domains.components((a, b, c, d)) == [[b], [a, c, d]]


def busy_in(group: Path) -> subprocess.Popen:
    script = f"import os; open({str(group / 'tasks')!r}, 'w').write(str(os.getpid()))\n"
    return subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c",
                             script + "while True: pass"])


@pytest.mark.parametrize("weights, ratio", [([512, 256], 2.0), (None, 1.0)])
def test_slices_follow_weights(weights, ratio):
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups:
        procs = [busy_in(g) for g in groups]
        slicer = timeslice.Slicer(groups, 0.01, work_conserving=False, weights=weights)
        try:
            time.sleep(0.2)  # both loops running before slicing starts
            slicer.start()
            time.sleep(1.0)
        finally:
            slicer.stop()
            for p in procs:
                p.kill()
                p.wait()
    assert sum(slicer.slices) > 20, slicer.slices
    assert slicer.slices[0] / slicer.slices[1] == pytest.approx(ratio, rel=0.25), slicer.slices


@needs_mpich
def test_pingpong_in_two_single_rank_domains_end_to_end():
    runtime_bench.build_bench()
    config = Config(name="dom", kind="domains", mode="timesliced", domain=[
        {"name": "a", "cpus": [0], "ranks": [0]}, {"name": "b", "cpus": [0], "ranks": [1]}])
    workload = Workload(name="pp", program="pingpong", args=["-s", "8", "-T", "lat", "-t", "0.1"])
    cell = experiment.Cell("mpich", config, workload, "default")
    assert runner.unavailable(cell) is None
    result = runner.run_once(cell, timeout_s=60)
    assert result.status == "ok", result.message
    # Busy-polling ranks on one CPU, one domain at a time: a slice (30 ms) per message.
    assert result.metrics["lat_8_us"][0] > 1000
    assert ours() == []


@needs_mpich
def test_concurrent_jobs_each_recorded():
    runtime_bench.build_bench()
    config = Config(name="two", kind="domains", jobs=2, domain=[
        {"name": "a", "cpus": [0, 1]}, {"name": "b", "cpus": [0, 1], "job": 1}])
    workload = Workload(name="pp", program="pingpong", args=["-s", "8", "-T", "lat", "-t", "0.1"])
    result = runner.run_once(experiment.Cell("mpich", config, workload, "default"), 60)
    assert result.status == "ok", result.message
    assert {"lat_8_us", "lat_8_us.job0", "lat_8_us.job1", "lat_8_us.sd_jobs"} <= set(result.metrics)
    jobs = [result.metrics[f"lat_8_us.job{j}"][0] for j in (0, 1)]
    assert result.metrics["lat_8_us"][0] == pytest.approx(sum(jobs) / 2)
    assert ours() == []


def test_a_run_is_as_bad_as_its_worst_job():
    ok = runner.RunResult("ok", {"time": (1.0, "s")})
    assert runner.combine([ok, runner.RunResult("failed", message="x")]).status == "failed"
    both = runner.combine([ok, runner.RunResult("timeout", message="timeout"), ok])
    assert both.status == "timeout" and both.message == "job 1: timeout"
    assert "time" not in both.metrics and both.metrics["time.job2"] == (1.0, "s")


def test_concurrent_jobs_past_the_deadline_are_killed(tmp_path):
    from vhpc.host import process
    cmds = [["sh", "-c", "echo fast"], ["sh", "-c", "sleep 30 & sleep 30"]]
    t0 = time.monotonic()
    fast, slow = process.run_commands(cmds, dict(os.environ), 1.0, [tmp_path, tmp_path])
    assert (fast.returncode, fast.stdout.text(), slow.timed_out) == (0, "fast\n", True)
    assert time.monotonic() - t0 < 10
    left = subprocess.run(["pgrep", "-f", "sleep 30 & sleep 30"], capture_output=True, text=True)
    assert left.stdout == ""


# --- per-vCPU slicing ----------------------------------------------------------------

def vcpu_domains(**kw) -> domains.Domains:
    a = domains.Domain("a", (0, 1))
    b = domains.Domain("b", (0, 1), weight=512, job=1)
    return domains.Domains((a, b), nranks=2, jobs=2, mode="timesliced", slicing="vcpu",
                           by_weight=True, noise=domains.Domain("noise", (0,)), **kw)


# Each rank says where it landed: its freezer group and the CPUs it may run on.
WHERE = ("import os; g = [l.split(':')[2].strip() for l in open('/proc/self/cgroup') "
         "if ':freezer:' in l][0]; os.write(1, f\"{os.environ['PMI_RANK']} {g} "
         "{sorted(os.sched_getaffinity(0))}\\n\".encode())")


@needs_mpich
def test_per_vcpu_groups_pin_each_rank_to_its_vcpu_and_go_afterwards():
    from vhpc.host import process
    place = vcpu_domains()
    with place.commands(MPICH, [sys.executable, "-c", WHERE]) as cmds:
        (parent,) = [g for g in ours() if g.parent == placement.CGROUP_FREEZER]
        tree = {str(p.relative_to(parent)) for p in parent.rglob("*") if p.is_dir()}
        assert tree == {"dom-a", "dom-a/vcpu0", "dom-a/vcpu1", "dom-b", "dom-b/vcpu0",
                        "dom-b/vcpu1", "dom-noise", "dom-noise/vcpu0"}
        time.sleep(0.2)  # the noise vCPU joins its groups as it starts
        (noise_pid,) = placement.group_tasks(parent / "dom-noise" / "vcpu0")
        assert os.sched_getaffinity(noise_pid) == {0}
        outcomes = process.run_commands(cmds, MPICH.launcher_env(), 60)
    assert ours() == [] and not alive(noise_pid)
    for job, out in zip("ab", outcomes):
        assert out.returncode == 0, out.problem()
        landed = sorted(line.split(" ", 2) for line in out.stdout.text().splitlines())
        # rank k of the domain on vCPU k, pinned to that vCPU's CPU: never the same group
        assert landed == [["0", f"/{parent.name}/dom-{job}/vcpu0", "[0]"],
                          ["1", f"/{parent.name}/dom-{job}/vcpu1", "[1]"]]


def test_one_slicer_per_cpu_over_the_vcpus_on_it_with_their_domains_weight():
    place = vcpu_domains()
    groups = {d.name: domains.Groups(Path(d.name), Path(d.name), (Path(f"{d.name}/0"),
                                                                  Path(f"{d.name}/1")))
              for d in place.all_domains}
    assert place.sliced_on(groups) == [
        [(Path("a/0"), 256), (Path("b/0"), 512), (Path("noise/0"), 256)],  # CPU 0
        [(Path("a/1"), 256), (Path("b/1"), 512)]]                           # CPU 1
    gang = domains.Domains(place.domains, 2, 2, "timesliced", noise=place.noise)
    assert gang.sliced_on(groups) == [[(Path("a"), 256), (Path("b"), 512), (Path("noise"), 256)]]


def test_vcpus_follow_the_cpu_list_and_the_ranks_of_the_domain():
    one_core = domains.Domain("pin", (0, 0))  # two vCPUs pinned to one core (S0's intra_vm_pin)
    lone = domains.Domain("lone", (1, 0), ranks=(1,), job=1)  # one rank: one vCPU, on CPU 1
    both = domains.Domain("both", (0,), ranks=(2, 0), job=1)
    place = domains.Domains((one_core, lone, both), nranks=3, jobs=2, mode="timesliced",
                            slicing="vcpu")
    assert [place.vcpus_of(d) for d in place.domains] == [2, 1, 1]
    assert [place.vcpu_of(one_core, r) for r in range(3)] == [0, 1, 0]  # k mod len(cpus)
    assert place.vcpu_of(lone, 1) == 0
    with domains.domain_groups(place) as groups:
        spec = place.confinement(0, groups)
        assert [(g[-1].name, cpus) for g, cpus in spec.values()] == [
            ("vcpu0", [0]), ("vcpu1", [0]), ("vcpu0", [0])]
        assert [p.name for p in groups["lone"].vcpus] == ["vcpu0"]
        assert place.confinement(1, groups)[1] == (groups["lone"].joined_by(0), [1])
    assert ours() == []


def test_gang_slicing_is_unchanged_by_the_vcpu_option():
    place = two_domains(mode="timesliced")
    with domains.domain_groups(place) as groups:
        assert groups["a"].vcpus == () and groups["a"].freezer.name == "dom-a"
        assert place.confinement(0, groups)[1] == (
            [groups["b"].cpu, groups["b"].freezer], [0, 1])


def test_per_cpu_slicers_are_staggered_by_a_share_of_the_slice(monkeypatch):
    """Per vCPU, the k-th of n CPUs' slicer starts k / n of a slice early; gang
    slicers start together."""
    made = []

    class Recorder:
        def __init__(self, groups, slice_s, work_conserving, weights, *, phase_s=0.0):
            made.append((groups, phase_s))

        def start(self):
            pass

        def stop(self):
            pass

    monkeypatch.setattr(domains.timeslice, "Slicer", Recorder)
    place = vcpu_domains()
    groups = {d.name: domains.Groups(Path(d.name), Path(d.name), (Path(f"{d.name}/0"),
                                                                  Path(f"{d.name}/1")))
              for d in place.all_domains}
    with domains.slicing(place, groups):
        pass
    assert [phase for _, phase in made] == [0.0, place.slice_s / 2]
    made.clear()
    gang = domains.Domains(place.domains, 2, 2, "timesliced", noise=place.noise)
    with domains.slicing(gang, groups):
        pass
    assert [phase for _, phase in made] == [0.0]
