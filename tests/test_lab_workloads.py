"""Output parsers of the lab's workloads and their availability."""

from __future__ import annotations

import shutil

import pytest

from vhpc.lab import workloads
from vhpc.lab.experiment import Workload

KERNEL = "metric,value,unit\ntime,0.5,s\nmops,12.5,Mop/s\nverified,1,bool\n"

HPCC_OUT = """\
some preamble
Begin of Summary section.
VersionMajor=1
sizeof_char=1
CommWorldProcs=2
HPL_Tflops=0.0123
StarSTREAM_Triad=5.5
MPIRandomAccess_GUPs=0.002
PingPongLatency_usec=0.9
Success=1
Failure=0
HPCC_Version=1.5.0
End of Summary section.
trailer=99
"""


def test_pingpong_rows_become_named_metrics():
    text = "test,size,iters,usec,MBps\nlat,8,1000,0.3,25\nbw,1024,10,1.5,680\nbibw,8,10,1,9\n"
    assert workloads.parse_pingpong(text) == {
        "lat_8_us": (0.3, "us"), "bw_1024_MBps": (680.0, "MB/s"), "bibw_8_MBps": (9.0, "MB/s")}
    with pytest.raises(workloads.RunFailed, match="no pingpong rows"):
        workloads.parse_pingpong("test,size,iters,usec,MBps\n")


def test_kernel_rows_and_verification():
    assert workloads.parse_kernel(KERNEL)["mops"] == (12.5, "Mop/s")
    with pytest.raises(workloads.RunFailed, match="verification"):
        workloads.parse_kernel(KERNEL.replace("verified,1", "verified,0"))
    with pytest.raises(workloads.RunFailed, match="no `verified` row"):
        workloads.parse_kernel("metric,value,unit\ntime,0.5,s\n")


def test_hpcc_summary_keys_with_units():
    metrics = workloads.parse_hpcc(HPCC_OUT)
    assert metrics["HPL_Tflops"] == (0.0123, "Tflop/s")
    assert metrics["StarSTREAM_Triad"] == (5.5, "GB/s")
    assert metrics["MPIRandomAccess_GUPs"] == (0.002, "GUP/s")
    assert metrics["PingPongLatency_usec"] == (0.9, "us")
    assert "HPCC_Version" not in metrics and "trailer" not in metrics
    with pytest.raises(workloads.RunFailed, match="Failure"):
        workloads.parse_hpcc(HPCC_OUT.replace("Failure=0", "Failure=1"))


def test_hpcc_input_uses_one_row_of_ranks(tmp_path):
    w = Workload(name="h", command=["hpcc"], parser="hpcc", ranks=3)
    workloads.prepare(w, tmp_path)
    lines = (tmp_path / "hpccinf.txt").read_text().splitlines()
    assert lines[10].split()[0] == "1" and lines[11].split()[0] == "3"  # Ps, Qs


def test_hpcc_unavailable_says_how_to_install():
    w = Workload(name="h", command=["hpcc"], parser="hpcc")
    reason = workloads.unavailable(w, "openmpi")
    if shutil.which("hpcc") is None:
        assert reason == "`hpcc` not found: apt-get install hpcc"
    else:
        assert reason is None
        assert "Open MPI" in workloads.unavailable(w, "mpich")


def test_unbuilt_program_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("VHPC_BUILD_DIR", str(tmp_path))
    reason = workloads.unavailable(Workload(name="p", program="npb_is"), "mpich")
    assert reason == f"{tmp_path}/bench/mpich/npb_is not built (run `make -C bench`)"
