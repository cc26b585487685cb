"""MPI_Finalize completes and libvhpc_wait neither leaks nor touches memory
it should not, checked with valgrind (memcheck).

MPI libraries themselves report leaks and uninitialised reads under valgrind
(hwloc, UCX, shared-memory transports), and every MPI call, MPI_Init's
allocations included, passes through a wrapper frame of the library.  So an
error counts as the library's when its innermost frame outside valgrind and
the C library (malloc, strdup, memcpy...) is in libvhpc_wait.

MPI handle leaks (communicators, requests) are not checked: Open MPI's
mpi_show_handle_leaks stays silent in this non-debug build even for a program
that leaks a communicator, a datatype and a request, and MPICH tracks handles
only in debug builds."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import pytest

LIB_SOURCES = {"intercept.c", "wait.c", "complete.c", "evidence.c", "mpi_yield.c", "fortran.c",
               "fortran08.c", "route.c"}


def _in_library(frame) -> bool:
    return "libvhpc_wait" in (frame.findtext("obj") or "") or (
        frame.findtext("file") or "") in LIB_SOURCES


def _innermost_own_frame(frames):
    """The first frame that is neither valgrind's allocator nor the C library."""
    for f in frames:
        obj = f.findtext("obj") or ""
        if "vgpreload" not in obj and "/libc.so" not in obj and "/libc-" not in obj:
            return f
    return None


def _library_errors(xml_file) -> list[str]:
    """valgrind errors raised by libvhpc_wait's own code, as text."""
    found = []
    for error in ET.parse(xml_file).getroot().iter("error"):
        frames = error.findall("./stack/frame")
        top = _innermost_own_frame(frames)
        if top is None or not _in_library(top):
            continue
        what = error.findtext("kind"), error.findtext("what") or error.findtext("xwhat/text")
        stack = "\n    ".join(
            f"{f.findtext('fn') or '?'} ({f.findtext('file') or f.findtext('obj') or '?'}"
            f":{f.findtext('line') or ''})" for f in frames)
        found.append(f"{what[0]}: {what[1]}\n    {stack}")
    return found


# threads: per-thread state of the library; progress: p2p and collectives, and
# adaptive's evidence gathering; semantics_f08: the `use mpi_f08` entry points.
@pytest.mark.parametrize(("prog", "args", "wait_policy"),
                         [("threads", [10], "sleep"), ("progress", [50], "adaptive"),
                          ("semantics_f08", [], "sleep")])
def test_no_leaks_or_bad_accesses(mpirun, programs, prog, args, wait_policy, tmp_path):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    if prog not in programs:
        pytest.skip(f"{prog} was not built (no Fortran compiler or no mpi_f08 module)")
    n = 2
    argv = ["valgrind", "--xml=yes", f"--xml-file={tmp_path}/vg.%p.xml", "--leak-check=full",
            "--show-leak-kinds=definite,indirect", "--num-callers=40", programs[prog], *args]
    run = mpirun(n, argv, policy=wait_policy, env={"VHPC_STATS": "1"}, timeout=300)
    if f"{prog}: SKIP" in run.stdout:
        pytest.skip(run.stdout.strip().splitlines()[0])
    run.assert_ok(prog, n)
    # The library really was loaded under valgrind: it printed its statistics.
    assert sorted(run.stats()) == list(range(n)), run.describe()
    reports = sorted(tmp_path.glob("vg.*.xml"))
    assert len(reports) == n, f"expected {n} valgrind reports, got {reports}"
    errors = [e for r in reports for e in _library_errors(r)]
    assert not errors, "valgrind found errors in libvhpc_wait:\n" + "\n".join(errors)
