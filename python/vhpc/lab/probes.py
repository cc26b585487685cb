"""The microbenchmarks behind `vhpc calibrate`: one run of one program, parsed.

Each probe runs a program of bench/ once and returns its figures (durations in
ns), or raises ProbeFailed with what went wrong. The pure helpers (`turns`,
`transport_seen`, `hz_from_config`) are separate so that tests can feed them text.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from vhpc import mpi, paths
from vhpc.host import domains, placement
from vhpc.host.process import kill_tree, run_command, run_commands
from vhpc.lab import workloads

TIMEOUT_S = 120.0
#: How long a program may take to exit once its output is complete (MPICH over UCX's
#: TCP transport sometimes hangs in MPI_Finalize: one rank waits in the PMI barrier,
#: the other flushes endpoints the first no longer progresses).
EXIT_GRACE_S = 5.0


class ProbeFailed(RuntimeError):
    """One run of a probe failed (exit status, timeout, unreadable output)."""


def bench_binary(name: str) -> Path:
    """A bench/ program built without MPI (pipe_pingpong, os_probe)."""
    return paths.build_dir() / "bench" / name


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = TIMEOUT_S) -> str:
    out, problem = run_command(cmd, dict(os.environ) if env is None else env, timeout)
    if out is None:
        raise ProbeFailed(problem)
    return out


def run_until_done(cmd: list[str], env: dict[str, str], timeout: float,
                   done: Callable[[str], bool], grace: float = EXIT_GRACE_S
                   ) -> tuple[str, bool]:
    """Run `cmd` like run_command, but once `done(stdout so far)` holds, allow it
    only `grace` seconds to exit before killing its process tree and keeping the
    output. Returns (stdout, whether it had to be killed after finishing)."""
    with tempfile.TemporaryDirectory(prefix="vhpc-probe-") as tmp:
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        # The program appends through its own file description; we read through
        # another, so our reads never move its write offset.
        with open(out_path, "ab") as out, open(err_path, "ab") as err:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err,
                                    start_new_session=True)
        started, finished_at = time.monotonic(), None
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if finished_at is None:
                    if done(_read(out_path)):
                        finished_at = now
                elif now - finished_at > grace:
                    break
                if now - started > timeout:
                    break
                time.sleep(0.02)
        finally:
            if proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()
        text = _read(out_path)
        if proc.returncode == 0:
            return text, False
        if finished_at is not None and done(text):
            return text, True
        if time.monotonic() - started > timeout:
            raise ProbeFailed("timeout")
        last = (_read(err_path).strip().splitlines() or ["no message"])[-1]
        raise ProbeFailed(f"exit {proc.returncode}: {last[:160]}")


def _read(path: Path) -> str:
    return path.read_bytes().decode(errors="replace")


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _one_row(text: str, what: str) -> dict[str, str]:
    found = rows(text)
    if len(found) != 1:
        raise ProbeFailed(f"{what}: expected one CSV row, got {text[-200:]!r}")
    return found[0]


# ---------------------------------------------------------------- the OS


def pipe_hops(cpus: tuple[int, int], *, use_yield: bool = False, seconds: float | None = None,
              count: int | None = None, tasks: tuple[Path, Path] | None = None,
              threads: int = 0, timeout: float = TIMEOUT_S) -> dict[str, float]:
    """bench/pipe_pingpong -q, parent on cpus[0], child on cpus[1] (each with `threads`
    more threads that only sleep): the half round trip (mean) and the median, p99 and
    maximum of single hops, in ns."""
    cmd = [str(bench_binary("pipe_pingpong")), "-q", "-c", f"{cpus[0]},{cpus[1]}"]
    if use_yield:
        cmd.append("-y")
    if threads:
        cmd += ["-T", str(threads)]
    if tasks is not None:
        cmd += ["-g", f"{tasks[0]},{tasks[1]}"]
    cmd += ["-t", str(seconds)] if seconds is not None else ["-n", str(count or 1000)]
    row = _one_row(run(cmd, timeout=timeout), "pipe_pingpong")
    try:
        return {"half_rtt": 1e3 * float(row["usec"]), "p50": 1e3 * float(row["p50_usec"]),
                "p99": 1e3 * float(row["p99_usec"]), "max": 1e3 * float(row["max_usec"])}
    except (KeyError, TypeError, ValueError) as exc:
        raise ProbeFailed(f"pipe_pingpong: bad row {row}") from exc


def yield_alone(cpu: int, seconds: float, timeout: float = TIMEOUT_S) -> float:
    """ns per sched_yield() on `cpu` with nothing else of ours to run."""
    row = _one_row(run([str(bench_binary("os_probe")), "yield", "-c", str(cpu), "-t",
                        str(seconds)], timeout=timeout), "os_probe yield")
    try:
        return float(row["nsec"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ProbeFailed(f"os_probe yield: bad row {row}") from exc


def sleeps(cpu: int, requested_us: tuple[int, ...], count: int, slack_ns: int | None = None,
           timeout: float = TIMEOUT_S) -> dict[str, dict[int, float] | int]:
    """Actual nanosleep durations for each requested µs: {"median": {us: ns},
    "p99": {us: ns}, "slack_ns": the timer slack in effect}."""
    cmd = [str(bench_binary("os_probe")), "sleep", "-c", str(cpu), "-n", str(count)]
    if slack_ns is not None:
        cmd += ["-s", str(slack_ns)]
    found = rows(run(cmd + [str(us) for us in requested_us], timeout=timeout))
    try:
        median = {int(r["requested_us"]): float(r["median_ns"]) for r in found}
        p99 = {int(r["requested_us"]): float(r["p99_ns"]) for r in found}
        slack = int(found[0]["slack_ns"])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ProbeFailed(f"os_probe sleep: bad output {found}") from exc
    if sorted(median) != sorted(requested_us):
        raise ProbeFailed(f"os_probe sleep: durations {sorted(median)}, asked {requested_us}")
    return {"median": median, "p99": p99, "slack_ns": slack}


def spin_runs(cpus: tuple[int, int], seconds: float, tasks: tuple[Path, Path] | None = None,
              timeout: float = TIMEOUT_S) -> list[tuple[int, int, int]]:
    """(process 0|1, start ns, end ns) of every run of two busy loops (os_probe spin)."""
    cmd = [str(bench_binary("os_probe")), "spin", "-c", f"{cpus[0]},{cpus[1]}",
           "-t", str(seconds)]
    if tasks is not None:
        cmd += ["-g", f"{tasks[0]},{tasks[1]}"]
    try:
        return [(int(r["proc"]), int(r["start_ns"]), int(r["end_ns"]))
                for r in rows(run(cmd, timeout=timeout))]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProbeFailed("os_probe spin: bad output") from exc


def turns(runs: list[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    """From the runs of two busy loops: the length of each *turn* (one process's
    consecutive runs merged while the other did not run in between: an interrupt
    or a third task is not a turn's end) and the hand-over gap from one turn's end
    to the next turn's start (negative when they overlapped on two CPUs). The
    first and last turns are cut by the start and the deadline: not counted."""
    merged: list[list[int]] = []
    for proc, start, end in sorted(runs, key=lambda r: (r[1], r[2])):
        if merged and merged[-1][0] == proc:
            merged[-1][2] = max(merged[-1][2], end)
        else:
            merged.append([proc, start, end])
    lengths = [end - start for _, start, end in merged[1:-1]]
    gaps = [b[1] - a[2] for a, b in zip(merged, merged[1:])]
    return lengths, gaps


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by the nearest rank below, as the C probes compute it."""
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def turn_figures(runs: list[tuple[int, int, int]], what: str) -> dict[str, float]:
    """Median turn length and median and p99 hand-over gap, in ns."""
    lengths, gaps = turns(runs)
    if len(lengths) < 2 or not gaps:
        raise ProbeFailed(f"{what}: only {len(lengths) + 2} turns: the two loops hardly "
                          "alternated (is something else running on that CPU?)")
    return {"turn": statistics.median(lengths), "gap": statistics.median(gaps),
            "gap_p99": percentile(gaps, 0.99)}


# ---------------------------------------------------------------- kernel facts


def hz_from_config(text: str) -> int | None:
    m = re.search(r"^CONFIG_HZ=(\d+)$", text, re.M)
    return int(m.group(1)) if m else None


def config_hz() -> tuple[int | None, str]:
    """CONFIG_HZ of the running kernel and where it was read."""
    release = os.uname().release
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{release}")):
        try:
            raw = path.read_bytes()
            text = gzip.decompress(raw).decode() if path.suffix == ".gz" else raw.decode()
        except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile):
            continue
        if (hz := hz_from_config(text)) is not None:
            return hz, f"CONFIG_HZ in {path}"
    return None, ""


def jiffies() -> int | None:
    """The kernel's tick counter (/proc/timer_list, root only), or None."""
    try:
        with open("/proc/timer_list") as f:
            for line in f:
                if line.startswith("jiffies:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


# ---------------------------------------------------------------- MPI


def pingpong_binary(impl: mpi.MpiImpl) -> Path:
    return workloads.bench_binary("pingpong", impl.name)


def pingpong(impl: mpi.MpiImpl, place: placement.Placement, args: list[str],
             last: tuple[str, int], *, env: dict[str, str] | None = None,
             launcher: dict[str, str] | None = None, preload: Path | None = None,
             timeout: float = TIMEOUT_S) -> dict[str, float]:
    """bench/pingpong once: {"lat_<size>": ns, "bw_<size>": MB/s, "bibw_<size>": MB/s}.
    `last` is the (test, size) row it prints last: once that is out, a hang in
    MPI_Finalize costs EXIT_GRACE_S and the run counts, with {"_hung": 1}.
    `env` reaches the ranks, `launcher` the launcher's environment (and through it
    the ranks: both launchers forward it)."""
    argv = [str(pingpong_binary(impl)), *args]
    base = {**os.environ, **(launcher or {})}
    final = re.compile(rf"^{last[0]},{last[1]},", re.M)
    with place.command(impl, argv, env=env, preload=preload) as cmd:
        out, hung = run_until_done(cmd, impl.launcher_env(base), timeout,
                                   lambda text: final.search(text) is not None)
    return pingpong_figures(out, hung)


def pingpong_figures(out: str, hung: bool) -> dict[str, float]:
    """bench/pingpong's output as {"lat_<size>": ns, "fresh_<size>": ns, "exch_<size>":
    ns, "<test>_<size>": MB/s} (+ "_hung")."""
    try:
        metrics = workloads.parse_pingpong(out)
    except workloads.RunFailed as exc:
        raise ProbeFailed(str(exc)) from exc
    found = {"_hung": 1.0} if hung else {}
    for name, (value, unit) in metrics.items():
        test, size = name.split("_")[:2]
        found[f"{test}_{size}"] = value * 1e3 if unit == "us" else value
    return found


def two_domains(channel: str, cpus: tuple[int, int]) -> domains.Domains:
    """Two domains of one rank each, rank r alone on cpus[r], each its own network
    namespace on a bridge, talking over `channel` (net | shm): the lab's
    `channel` configs (host/domains.py, host/netns.py)."""
    return domains.Domains((domains.Domain("a", (cpus[0],), ranks=(0,)),
                            domains.Domain("b", (cpus[1],), ranks=(1,))), 2, channel=channel)


def channel_pingpong(impl: mpi.MpiImpl, channel: str, cpus: tuple[int, int], args: list[str],
                     last: tuple[str, int], timeout: float = TIMEOUT_S) -> dict[str, float]:
    """bench/pingpong once between two domains over `channel`: as `pingpong`, plus
    "bridge_bytes", what crossed the bridge during the run (evidence of the channel:
    megabytes over `net`, nothing over `shm`)."""
    place = two_domains(channel, cpus)
    argv = [str(pingpong_binary(impl)), *args]
    final = re.compile(rf"^{last[0]},{last[1]},", re.M)
    network: list = []
    with place.commands(impl, argv, network=network) as cmds:
        before = network[0].bytes()
        out, hung = run_until_done(cmds[0], place.launcher_env(impl), timeout,
                                   lambda text: final.search(text) is not None)
        crossed = network[0].bytes() - before
    return pingpong_figures(out, hung) | {"bridge_bytes": float(crossed)}


#: The calls bench/send_local probes, in its CSV's `call` column.
LOCAL_CALLS = ("send", "isend")


def local_limits(text: str) -> dict[str, float]:
    """bench/send_local's CSV: per call, the largest message size (bytes) up to which
    every probed size completed locally in most of its tries (0 when 1 B did not;
    the largest size probed when every one did: a lower bound)."""
    local: dict[str, dict[int, bool]] = {call: {} for call in LOCAL_CALLS}
    try:
        for row in rows(text):
            local[row["call"]][int(row["size"])] = 2 * int(row["local"]) > int(row["reps"])
    except (KeyError, ValueError, TypeError) as exc:
        raise ProbeFailed(f"send_local: unreadable output ({exc}): {text[-200:]!r}") from exc
    found = {}
    for call, sizes in local.items():
        if not sizes:
            raise ProbeFailed(f"send_local: no `{call}` rows in {text[-200:]!r}")
        limit = 0
        for size in sorted(sizes):
            if not sizes[size]:
                break
            limit = size
        found[call] = float(limit)
    return found


def send_local(impl: mpi.MpiImpl, place: placement.Placement, args: list[str] | None = None,
               timeout: float = TIMEOUT_S) -> dict[str, float]:
    """bench/send_local once between two ranks placed by `place`: {"send": bytes,
    "isend": bytes}, the largest standard-mode MPI_Send and MPI_Isend that complete
    while the receiver stays outside MPI (`local_limits`)."""
    argv = [str(workloads.bench_binary("send_local", impl.name)), *(args or [])]
    with place.command(impl, argv) as cmd:
        out = run(cmd, impl.launcher_env(), timeout)
    return local_limits(out)


def channel_send_local(impl: mpi.MpiImpl, channel: str, cpus: tuple[int, int],
                       args: list[str] | None = None, timeout: float = TIMEOUT_S
                       ) -> dict[str, float]:
    """`send_local` between two network-namespace domains over `channel`: an eager
    send's completion is the transport's protocol (Open MPI's ob1 hands a vader
    fragment back above 256 B; over TCP it is done once written)."""
    place = two_domains(channel, cpus)
    argv = [str(workloads.bench_binary("send_local", impl.name)), *(args or [])]
    with place.commands(impl, argv) as cmds:
        out = run(cmds[0], place.launcher_env(impl), timeout)
    return local_limits(out)


def merged_output(cmd: list[str]) -> list[str]:
    """The command with its stderr sent to stdout (where run_command keeps it)."""
    return ["sh", "-c", 'exec "$@" 2>&1', "sh", *cmd]


def transport_run(impl: mpi.MpiImpl, launcher: dict[str, str], verbose: dict[str, str],
                  timeout: float = TIMEOUT_S) -> str:
    """A short 8-byte pingpong between two ranks on their own cores with the MPI
    saying which transport it picked: its whole output, stderr included."""
    argv = [str(pingpong_binary(impl)), "-s", "8", "-T", "lat", "-t", "0.01"]
    base = {**os.environ, **launcher, **verbose}
    final = re.compile(r"^lat,8,", re.M)
    with placement.spread(2).command(impl, argv) as cmd:
        out, _ = run_until_done(merged_output(cmd), impl.launcher_env(base), timeout,
                                lambda text: final.search(text) is not None)
    return out


def transport_seen(mpi_name: str, output: str) -> str:
    """The transports between the two ranks as the MPI reported them in a verbose
    run, space-separated and sorted ("" when it said nothing readable).

    MPICH over UCX (UCX_LOG_LEVEL=info) prints each endpoint's lanes,
    `ep_cfg[1]: tag(tcp/lo) ...`; the loop-back lanes to itself are `self/...`.
    Open MPI (btl_base_verbose) prints `Using tcp btl for send to [[...]]`."""
    if mpi_name == "mpich":
        lanes = {lane for group in re.findall(r"ep_cfg\[\d+\]: tag\(([^)]*)\)", output)
                 for lane in group.split()}
        return " ".join(sorted(lane for lane in lanes if not lane.startswith("self/")))
    used = set(re.findall(r"Using (\S+) btl for send to", output))
    return " ".join(sorted(used - {"self"}))


def kernel_pair(impl: mpi.MpiImpl, program: str, args: list[str], cpus: tuple[int, int],
                timeout: float = TIMEOUT_S) -> list[dict[str, tuple[float, str]]]:
    """Two one-rank copies of a bench kernel at once, one pinned to each CPU, each
    rerun while the other's first run goes on (so neither ends alone): every
    figure each first run printed, as `kernel` gives them."""
    argv = [str(workloads.bench_binary(program, impl.name)), *args]
    cmds = [["taskset", "-c", str(cpu), *impl.launch(1, argv)] for cpu in cpus]
    env = impl.launcher_env()
    with tempfile.TemporaryDirectory(prefix="vhpc-pair-") as tmp:
        dirs = [Path(tmp) / f"refill{i}" for i in range(len(cmds))]
        for d in dirs:
            d.mkdir()
        outcomes = run_commands(cmds, env, timeout, refill_cwds=dirs)
    found = []
    for cpu, out in zip(cpus, outcomes):
        if out.problem() or out.filler_problem:
            raise ProbeFailed(f"{program} on CPU {cpu}: {out.problem() or out.filler_problem}")
        try:
            metrics = workloads.parse_kernel(out.stdout.text())
        except workloads.RunFailed as exc:
            raise ProbeFailed(str(exc)) from exc
        metrics.pop("verified")
        found.append(metrics)
    return found


def kernel(impl: mpi.MpiImpl, program: str, args: list[str], ranks: int = 1,
           timeout: float = TIMEOUT_S) -> dict[str, tuple[float, str]]:
    """A bench kernel once: every figure it printed {metric: (value, unit)} but
    `verified` (a run that fails its own check raises ProbeFailed)."""
    argv = [str(workloads.bench_binary(program, impl.name)), *args]
    with placement.spread(ranks).command(impl, argv) as cmd:
        out = run(cmd, impl.launcher_env(), timeout)
    try:
        metrics = workloads.parse_kernel(out)
    except workloads.RunFailed as exc:
        raise ProbeFailed(str(exc)) from exc
    metrics.pop("verified")
    return metrics
