"""The hint page (runtime/hints.c): each rank publishes its state in its slot.

Two ranks of one domain watch each other's slot through their own mapping of the
file (tests/runtime/hints.c), so every check waits for a state the peer must
reach: WAIT while blocked in MPI_Recv, COLL while in MPI_Barrier, COMPUTE in
between; the pid is in the slot; DONE once the process has exited. Bad settings
stop the rank with a message naming the variable."""

from __future__ import annotations

import pytest

from vhpc.host import hints

N = 2


def slot_per_rank(mpi_impl, program, *args) -> list[str]:
    """The program under sh, which gives each rank its slot (= its world rank)."""
    rank_var = mpi_impl.rank_env_names()[0]
    return ["sh", "-c", f'VHPC_HINT_SLOT=${rank_var} exec "$0" "$@"', str(program), *args]


@pytest.fixture
def page(tmp_path):
    with hints.hint_file(1) as path:
        yield path


@pytest.mark.parametrize("policy", ["sleep", "adaptive"])
def test_ranks_publish_waits_collectives_and_exit(mpirun, mpi_impl, programs, page, policy):
    # `sleep` always waits in the library's loop: its waits must say PARKABLE.
    args = ["parkable"] if policy == "sleep" else []
    run = mpirun(N, slot_per_rank(mpi_impl, programs["hints"], *args), policy=policy,
                 env={"VHPC_HINTS": str(page), "VHPC_HINT_DOMAIN": "0", "VHPC_STATS": "1"},
                 cpus="0")
    run.assert_counted("hints", N, policy)
    saw = dict(line.split(" ok saw=") for line in run.stdout.splitlines() if " ok saw=" in line)
    assert saw["hints: rank 0"].startswith("coll:") and saw["hints: rank 1"].startswith("wait:"), \
        run.describe()
    for rank in range(N):
        state, member, pid = hints.read_slot(page, 0, rank)
        assert hints.describe_state(state) == "done", (rank, hints.describe_state(state))
        assert member == 0 and pid > 0  # no slicer assigned it: the rank only published
    assert hints.read_header(page)["bell"] == 0  # nobody listened: no doorbell rung


def test_without_the_variable_nothing_is_published(mpirun, programs, page):
    run = mpirun(N, [programs["hints"]], policy="adaptive", cpus="0")
    run.assert_ok("hints", N)
    assert "saw=none" in run.stdout, run.describe()
    assert all(hints.read_slot(page, 0, r) == (0, 0, 0) for r in range(N))


@pytest.mark.parametrize("env, message", [
    ({"VHPC_HINTS": "/nonexistent/vhpc-page", "VHPC_HINT_DOMAIN": "0", "VHPC_HINT_SLOT": "0"},
     "vhpc_wait: VHPC_HINTS='/nonexistent/vhpc-page': cannot be opened: No such file or directory"),
    ({"VHPC_HINT_DOMAIN": "0"}, "vhpc_wait: VHPC_HINTS is set but VHPC_HINT_SLOT is not"),
    ({"VHPC_HINT_DOMAIN": "1", "VHPC_HINT_SLOT": "0"},
     "vhpc_wait: VHPC_HINT_DOMAIN='1' is not a whole number from 0 to 0"),
    ({"VHPC_HINT_DOMAIN": "0", "VHPC_HINT_SLOT": "64"},
     "vhpc_wait: VHPC_HINT_SLOT='64' is not a whole number from 0 to 63"),
], ids=["missing-file", "no-slot", "domain-range", "slot-range"])
def test_bad_settings_stop_the_rank(mpirun, programs, page, env, message):
    env = {"VHPC_HINTS": str(page), **env}
    run = mpirun(N, [programs["hints"]], policy="adaptive", env=env, timeout=60)
    assert not run.timed_out and run.returncode != 0, run.describe()
    assert message in run.stderr.splitlines(), run.describe()


def test_a_file_that_is_not_a_hint_file_is_refused(mpirun, programs, tmp_path):
    bogus = tmp_path / "bogus"
    bogus.write_bytes(b"\0" * 2 * hints.PAGE)
    env = {"VHPC_HINTS": str(bogus), "VHPC_HINT_DOMAIN": "0", "VHPC_HINT_SLOT": "0"}
    run = mpirun(N, [programs["hints"]], policy="adaptive", env=env, timeout=60)
    assert run.returncode != 0, run.describe()
    assert (f"vhpc_wait: VHPC_HINTS='{bogus}': not a hint file: wrong magic or version"
            in run.stderr.splitlines()), run.describe()
