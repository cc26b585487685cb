"""The MPI standard's blocking calls, and libvhpc_wait's C wrappers for them.

The calls come from the MPI Forum's machine-readable API (`pympistandard`): a
blocking call is one with a nonblocking twin of the same name with an ``i`` before
one of its words (``MPI_Comm_dup``/``MPI_Comm_idup``, ``MPI_File_read_all``/
``MPI_File_iread_all``) taking the same arguments plus a request (and no status),
or one completed by polling its ``MPI_Test``/``MPI_Iprobe``-style twin, which may add
a ``flag`` (``MPI_Wait``/``MPI_Test``, ``MPI_Waitsome``/``MPI_Testsome``,
``MPI_Probe``/``MPI_Iprobe``).

At build time (runtime/Makefile) this writes one wrapper per request twin that the
MPI's ``mpi.h`` declares and that no hand-written file (intercept.c) wraps already:
the blocking call becomes its twin plus libvhpc_wait's wait; and one per collective
constructor of ARRIVE_FIRST, which waits for every rank first. A twin the process's
MPI turns out not to export at run time (a library built with another MPI's
headers) falls back to the blocking call (looked up once with dlsym: taking the
address of a weak PMPI symbol would bind it when the library loads, before a
dlopen'ed MPI is there).

    python -m vhpc.runtime.wrappers --cc mpicc.mpich --hand intercept.c > wrappers.c
"""

from __future__ import annotations

import argparse
import functools
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: Individual file I/O waits for the disk, not for other ranks.
LOCAL_PREFIXES = ("MPI_File_",)
PEER_PARAMS = {"dest", "source", "message"}


#: Collective constructors over a whole communicator, with that communicator's
#: parameter: all of its ranks must enter them, so the wrapper waits (adaptively) in
#: an MPI_Ibarrier on the library's communicator of it first (runtime/shadow.c), and
#: the MPI's own busy-polling inside meets peers that are already there. A new
#: communicator gets its library communicator at once, while its ranks are together
#: (Open MPI's communicator creation runs nonblocking collectives that would match
#: the program's own if made later); a window keeps one for its fences and its free
#: (runtime/rma.c). MPI_Comm_dup too, though it has a twin: MPI_Comm_idup would
#: start a nonblocking collective on the program's communicator. Not
#: MPI_Comm_create_group (only the group enters it) nor the dynamic-process calls
#: (they wait for others).
ARRIVE_FIRST = {
    "MPI_Comm_dup": "comm", "MPI_Comm_dup_with_info": "comm",
    "MPI_Comm_split": "comm", "MPI_Comm_split_type": "comm", "MPI_Comm_create": "comm",
    "MPI_Intercomm_create": "local_comm", "MPI_Intercomm_merge": "intercomm",
    "MPI_Cart_create": "comm_old", "MPI_Cart_sub": "comm", "MPI_Graph_create": "comm_old",
    "MPI_Dist_graph_create": "comm_old", "MPI_Dist_graph_create_adjacent": "comm_old",
    "MPI_Win_create": "comm", "MPI_Win_allocate": "comm", "MPI_Win_allocate_shared": "comm",
    "MPI_Win_create_dynamic": "comm",
}


@dataclass(frozen=True)
class Twin:
    """A blocking call and the call that starts it (``kind`` request) or polls it (flag)."""

    blocking: str
    start: str
    kind: str  #: "request" or "flag"


@functools.cache
def _procedures() -> dict[str, object]:
    import pympistandard as std

    std.use_api_version(1)
    out = {}
    for key, proc in std.PROCEDURES.items():
        c = proc.express.iso_c  # None: no C binding (Fortran-only procedures)
        if c is not None:
            out[key] = c
        # MPI 4's large-count twin (MPI_Send_c): mpi4py calls these where the MPI has them.
        big = proc.express.embiggen.iso_c if proc.has_embiggenment() else None
        if big is not None:
            out[big.name.lower()] = big
    return out


def _names(c) -> list[str]:
    return [p.name for p in c.parameters]


def _candidates(key: str) -> list[str]:
    """`mpi_comm_dup` -> mpi_icomm_dup, mpi_comm_idup; `mpi_wait*` -> mpi_test*."""
    words = key[4:].split("_")
    out = ["mpi_" + "_".join(words[:i] + ["i" + words[i]] + words[i + 1:])
           for i in range(len(words))]
    if key.startswith("mpi_wait"):
        out.append("mpi_test" + key[len("mpi_wait"):])
    return out


@functools.cache
def twins() -> tuple[Twin, ...]:
    """Every blocking call of the standard with its twin, by the rule above."""
    procs = _procedures()
    found = []
    for key, c in procs.items():
        if not key.startswith("mpi_"):
            continue
        mine = _names(c)
        for cand in _candidates(key):
            other = procs.get(cand)
            if other is None:
                continue
            theirs = _names(other)
            if theirs == [n for n in mine if n != "status"] + ["request"]:
                found.append(Twin(c.name, other.name, "request"))
            elif sorted(theirs) in (sorted(mine + ["flag"]), sorted(mine)):
                found.append(Twin(c.name, other.name, "flag"))
    return tuple(sorted(found, key=lambda t: t.blocking))


def blocking_calls() -> list[str]:
    """Names of the standard's blocking calls (C bindings, large-count ones too)."""
    return sorted({t.blocking for t in twins()})


def declared(cc: str) -> set[str]:
    """Names (without the P) of every PMPI_ function the MPI's mpi.h declares."""
    proc = subprocess.run(shlex.split(cc) + ["-E", "-x", "c", "-"], input="#include <mpi.h>\n",
                          capture_output=True, text=True, check=True)
    return set(re.findall(r"\bP(MPI_\w+)\s*\(", proc.stdout))


def hand_written(sources: list[Path]) -> set[str]:
    names: set[str] = set()
    for src in sources:
        names |= set(re.findall(r"VW_C_ENTRY\((MPI_\w+)\)", src.read_text()))
    return names


def _is_collective(c) -> bool:
    return not PEER_PARAMS & set(_names(c))


def _wrapper(t: Twin) -> str:
    procs = _procedures()
    c, s = procs[t.blocking.lower()], procs[t.start.lower()]
    params = ", ".join(str(p) for p in c.parameters) or "void"
    args = ", ".join(_names(c))
    status = "status" if "status" in _names(c) else "MPI_STATUS_IGNORE"
    block = f"P{c.name}({args})"
    # A collective on a communicator runs its twin on the library's own (shadow.c),
    # but for a neighbourhood collective, which needs the program's topology.
    on_comm = _is_collective(c) and "comm" in _names(c) and "neighbor" not in c.name.lower()
    start_args = ", ".join(["shadow_" if on_comm and n == "comm" else n
                            for n in _names(c) if n != "status"] + ["&req_"])
    start = f"P{s.name}({start_args})"
    if on_comm:
        body = f"    VW_COLLECTIVE_ON(comm, {block},\n                     {start}, {status});"
    elif _is_collective(c):
        inter = "vw_is_inter(comm)" if "comm" in _names(c) else "0"
        body = f"    VW_COLLECTIVE({block},\n                  {start}, {status}, {inter});"
    else:
        # With no peer (MPI_PROC_NULL) there is nothing to wait for: the MPI's own call,
        # with its own checks (a ULFM-revoked communicator fails it; Open MPI 5's
        # nonblocking twin does not look).
        peers = [n for n in ("dest", "source") if n in _names(c)]
        none = " && ".join(f"{n} == MPI_PROC_NULL" for n in peers)
        body = (f"    if ({none}) VW_NO_PEER({block});\n" if peers else "") + \
            f"    VW_NATIVE_OR_WAIT({block});\n    START_AND_WAIT({start}, {status});"
    return (f"static int has_P{s.name} = -1;\n"
            f"VW_C_ENTRY({c.name})({params}) {{\n"
            f"    if (!VW_RESOLVES(P{s.name})) return {block};\n"
            f"{body}\n}}\n")


def _wrappable(t: Twin) -> bool:
    local = t.blocking.startswith(LOCAL_PREFIXES) and not t.blocking.endswith("_all")
    return t.kind == "request" and not local


def _arrive_first(name: str) -> str:
    c = _procedures()[name.lower()]
    comm = ARRIVE_FIRST[name.removesuffix("_c")]
    if comm not in _names(c):  # the standard renamed it: fail the build, loudly
        raise KeyError(f"{name} has no parameter {comm!r} in the MPI standard's API")
    params = ", ".join(str(p) for p in c.parameters)
    call = f"P{name}({', '.join(_names(c))})"
    made = _names(c)[-1]  # the new communicator or window, last in every one of them
    # A new window keeps a communicator for its fences and its free (rma.c).
    keep = (f"vw_win_remember(*{made}, {comm})" if made == "win" else f"vw_made(*{made})")
    return (f"VW_C_ENTRY({name})({params}) {{\n"
            f"    VW_ARRIVE_FIRST({comm});\n"
            f"    int rc = {call};\n"
            f"    if (rc == MPI_SUCCESS) {keep};\n"
            f"    return rc;\n}}\n")


def wanted(hand: set[str], have: set[str]) -> list[Twin]:
    """The request twins to wrap for an MPI that declares `have`: both declared, not
    hand-written, not local."""
    return [t for t in twins()
            if _wrappable(t) and t.blocking not in hand and t.blocking.removesuffix("_c") not in hand
            and t.blocking not in ARRIVE_FIRST and {t.blocking, t.start} <= have]


def generate(cc: str, hand: set[str]) -> str:
    head = ("/* Generated by python -m vhpc.runtime.wrappers from the MPI standard's API\n"
            " * (pympistandard): every blocking call with a nonblocking twin. Do not edit. */\n"
            '#include "vhpc_wait.h"\n\n')
    have = declared(cc)
    big = [f"{n}_c" for n in ARRIVE_FIRST if f"{n}_c".lower() in _procedures()]
    arrive = [n for n in sorted([*ARRIVE_FIRST, *big]) if n in have and n not in hand]
    return head + "\n".join([_wrapper(t) for t in wanted(hand, have)]
                             + [_arrive_first(n) for n in arrive])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", required=True, help="the MPI's C compiler command")
    ap.add_argument("--hand", nargs="*", type=Path, default=[],
                    help="hand-written sources whose VW_C_ENTRY calls are left alone")
    a = ap.parse_args(argv)
    sys.stdout.write(generate(a.cc, hand_written(a.hand)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
