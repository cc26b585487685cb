"""Workload output the lab cannot trust: non-UTF-8 bytes, garbage, endless output,
figures that are not finite or negative, a metric printed twice. Each costs one
run (stored failed, timeout or invalid, with the reason), never the experiment,
and vhpc's memory stays bounded. docs/reliability.md's table names these tests."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from vhpc import cli, mpi, paths
from vhpc.host import process
from vhpc.lab import store, workloads

needs_mpich = pytest.mark.skipif(not mpi.MPIS["mpich"].available(), reason="MPICH not installed")

HEAD = """
[experiment]
name = "output"
repetitions = 1
warmup = 0
timeout_s = {timeout}
mpis = ["mpich"]
[[config]]
name = "native"
kind = "native"
"""
GARBAGE = ("import random, sys; r = random.Random(7); "
           "sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(200000)))")
KERNEL = "metric,value,unit\\n"
#: workload name -> (argv, parser, stored status, what the stored message says)
CASES = {
    "non-utf8-unit": (["printf", f"{KERNEL}time,1,s\\377\\nverified,1,bool\\n"], "kernel",
                      "ok", ""),
    "non-utf8-stderr": (["sh", "-c", "printf 'boom \\377\\376\\n' >&2; exit 3"], "kernel",
                        "failed", "exit 3: boom \ufffd\ufffd"),
    "garbage": ([sys.executable, "-c", GARBAGE], "kernel", "failed", "kernel output is not CSV"),
    "nan": (["printf", f"{KERNEL}time,nan,s\\nverified,1,bool\\n"], "kernel",
            "invalid", "time = nan is not finite"),
    "inf": (["printf", f"{KERNEL}mops,-inf,Mop/s\\nverified,1,bool\\n"], "kernel",
            "invalid", "mops = -inf is not finite"),
    "huge": (["printf", f"{KERNEL}time,1e999,s\\nverified,1,bool\\n"], "kernel",
             "invalid", "time = inf is not finite"),
    "negative": (["printf", f"{KERNEL}time,-0.5,s\\nverified,1,bool\\n"], "kernel",
                 "invalid", "time = -0.5 s is negative"),
    "negative-latency": (["printf", "test,size,iters,usec,MBps\\nlat,8,10,-3,1\\n"], "pingpong",
                         "invalid", "lat_8_us = -3 us is negative"),
    "signed-ok": (["printf", f"{KERNEL}sx,-0.5,1\\nverified,1,bool\\n"], "kernel", "ok", ""),
    "twice": (["printf", f"{KERNEL}time,1,s\\ntime,2,s\\nverified,1,bool\\n"], "kernel",
              "invalid", "metric time printed twice (1, then 2)"),
    "twice-pingpong": (["printf", "test,size,iters,usec,MBps\\nlat,8,10,1,8\\nlat,8,10,2,8\\n"],
                       "pingpong", "invalid", "metric lat_8_us printed twice (1, then 2)"),
}


def workload(name: str, argv: list[str], parser: str) -> str:
    return (f'[[workload]]\nname = "{name}"\ncommand = {json.dumps(argv)}\n'
            f'parser = "{parser}"\nranks = 1\n')


@needs_mpich
def test_untrustworthy_output_costs_one_run_never_the_experiment(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text(HEAD.format(timeout=60) + "".join(
        workload(name, argv, parser) for name, (argv, parser, _, _) in CASES.items()))
    result = CliRunner().invoke(cli.main, ["lab", "run", str(path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    runs = store.read(tmp_path / "r").groupby("workload")
    assert set(runs.groups) == set(CASES)
    for name, (_, _, status, message) in CASES.items():
        run = runs.get_group(name)
        assert set(run.status) == {status}, (name, run.message.iloc[0])
        assert message in run.message.iloc[0], (name, run.message.iloc[0])
    unit = runs.get_group("non-utf8-unit")
    assert dict(zip(unit.metric, unit.unit))["time"] == "s\ufffd"  # decoded leniently, kept
    assert set(runs.get_group("nan").metric) == {"time", "verified"}  # the figures, for the record


@needs_mpich
def test_endless_output_is_bounded_and_said_so(tmp_path):
    # `yes` on stdout and stderr until the timeout: vhpc keeps the first and last
    # MiB of each and counts the rest (the issue: 2.6 GB of memory in 10 s).
    path = tmp_path / "e.toml"
    path.write_text(HEAD.format(timeout=3) + workload("yes", ["sh", "-c", "yes >&2 & exec yes"],
                                                      "kernel"))
    env = {**os.environ, "PYTHONPATH": str(paths.REPO / "python") + os.pathsep +
           os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-m", "vhpc.cli", "lab", "run", str(path),
                              "--out", str(tmp_path / "r")], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # vhpc's own peak (VmHWM, monotonic), sampled while it runs: wait4's ru_maxrss
    # would also count its descendants, such as mpiexec buffering the flood.
    peaks: list[int] = []

    def sample() -> None:
        status = Path(f"/proc/{child.pid}/status")
        while child.poll() is None:
            try:
                hwm = next(line for line in status.read_text().splitlines()
                           if line.startswith("VmHWM:"))
                peaks.append(int(hwm.split()[1]))
            except (OSError, StopIteration):
                pass
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    err = child.stderr.read()
    child.wait()
    sampler.join()
    assert child.returncode == 0, err
    (message,) = set(store.read(tmp_path / "r").message)
    assert message.startswith("timeout; output of ") and "kept the first 1.0 MiB" in message
    written = float(message.split("output of ")[1].split(" MiB")[0])
    peak_mib = max(peaks) / 1024
    print(f"yes wrote {written:.0f} MiB to stdout; vhpc's peak RSS {peak_mib:.0f} MiB")
    assert written > 64  # far more than is kept ...
    assert peak_mib < 400  # ... and vhpc's memory is what Python, pandas and pyarrow need


def test_captures_keep_head_and_tail_and_count_the_rest():
    capture = process.Capture(head=4, tail=6)
    for chunk in (b"ab", b"cdefgh", b"ijklmnopq", b"rst\xff"):
        capture.feed(chunk)
    assert (bytes(capture.head), capture.tail, capture.total, capture.dropped) == \
        (b"abcd", b"pqrst\xff", 21, 11)
    assert capture.text() == "abcd\n[... 11 bytes dropped ...]\npqrst\ufffd"


def test_parsers_take_garbage_without_a_traceback():
    rng = random.Random(16)
    alphabet = "metric,value,unit\ntest,size,iters,usec,MBps\nlat,bw,8,1e999,nan,-1,\"=\x00\ufffd"
    for _ in range(2000):
        if rng.random() < 0.5:
            text = bytes(rng.randrange(256) for _ in range(rng.randrange(300))).decode(
                "utf-8", errors="replace")
        else:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(300)))
        for parse in (workloads.parse_pingpong, workloads.parse_kernel, workloads.parse_hpcc):
            try:
                metrics = parse(text)
            except (workloads.RunFailed, workloads.Invalid):
                continue
            workloads.problems(metrics)  # never raises either
