"""Type stub of the native module ``vhpc._core`` (built from crates/vhpc-py).

The simulator entry points take scenario TOML text and return JSON text;
``vhpc.sim`` wraps them (files, parsed dicts, DataFrames). They release the
GIL while simulating, on a worker thread, and look for signals every 20 ms:
Ctrl-C raises KeyboardInterrupt (or what the SIGINT handler raises) within a
fraction of a second, while parsing, building or running. An invalid scenario
raises ``ValueError`` whose message names the origin and, where it can, the
field: ``"file: field `x.y`: message"``.
"""

__version__: str

def version() -> str:
    """The version of the native core (the crate version)."""

def run(
    scenario_toml: str,
    origin: str,
    seed: int | None = None,
    trace: bool = False,
    trace_file: str | None = None,
) -> tuple[str, str | None]:
    """Parse, validate and run one scenario.

    ``origin`` (usually the file path) is named in errors; ``seed`` overrides
    the scenario's. Returns ``(report_json, trace_json)``: the report
    (vhpc_sim::metrics::Report) as JSON, and the Chrome/Perfetto trace as JSON
    when ``trace`` is true, else None. With ``trace_file`` the trace is
    streamed to that file as the run goes (and None returned for it). Raises
    ValueError for an invalid scenario (OverflowError for a negative seed),
    OSError when the trace cannot be written.
    """

def run_many(items: list[tuple[str, str, int | None]]) -> list[str]:
    """Run many ``(scenario_toml, origin, seed or None)`` in parallel.

    Every scenario is validated before any runs; the first invalid one (in
    input order) raises ValueError naming its origin. Returns the reports as
    JSON, in input order; each equals ``run(toml, origin, seed)[0]``.
    """

def estimate_memory(scenario_toml: str, origin: str, trace: str = "off") -> list[tuple[str, int]]:
    """The memory simulating the scenario is estimated to need, in bytes, by
    contributor (largest first; vhpc_sim::footprint). ``trace`` is ``"off"``,
    ``"file"`` (streamed) or ``"memory"``. Nothing is built; raises ValueError
    for an invalid scenario.
    """

def resolve_scenario(scenario_toml: str, origin: str) -> str:
    """What the simulator makes of a scenario's host and jobs, as JSON: ``host``
    (``cores``, ``sockets``, ``nodes`` with ``cores``, ``mem_mib``,
    ``bandwidth_mb_s``, and ``distance``, presets and defaults applied) and
    ``jobs`` (``name``, ``footprint_kib`` per rank or None) and ``mpi`` (the
    ``[mpi]`` section, defaults applied: the channel tables). Raises ValueError
    for an invalid scenario.
    """

def schedulers() -> list[tuple[str, str]]:
    """The hypervisor schedulers: ``(name, one-line description)``."""

def workloads() -> list[tuple[str, str]]:
    """The workloads a job can run: ``(name, one-line description)``."""

def hosts() -> list[tuple[str, str]]:
    """The named hosts a scenario's ``host.preset`` can take: ``(name, one-line description)``."""

def wait_policies() -> list[str]:
    """The MPI wait policies a job can use."""

def hint_policies() -> list[tuple[str, str]]:
    """The hint-driven control policies a domain's ``hints`` can name: ``(name, one-line description)``."""

SLICER_POLL_S: float
"""How often a work-conserving Slicer looks at its running domain by default (seconds)."""

class Slicer:
    """The lab's native time slicer (crates/vhpc-slicer); ``vhpc.host.timeslice.Slicer`` wraps it.

    Thaws one cgroup v1 freezer group of ``domains`` at a time for ``slice_s``,
    in turn or by ``weights`` (stride scheduling, ties to the earlier domain);
    ``work_conserving`` switches early when no task of the running group is in
    state R. One shared native thread (SCHED_FIFO when permitted) serves every
    running Slicer, without the GIL.
    """

    def __init__(
        self,
        domains: list[str],
        slice_s: float,
        work_conserving: bool = True,
        weights: list[int] | None = None,
        poll_s: float | None = None,
        log: bool = False,
        phase_s: float = 0.0,
    ) -> None: ...
    def start(self) -> None:
        """Thaw the first domain, freeze the others, start slicing (OSError naming a bad group)."""
    def stop(self) -> None:
        """Stop and thaw every domain; RuntimeError if the slicer had failed (all thawed then)."""
    def switch_log(self) -> list[tuple[int, int]]:
        """With ``log=True``: each switch as ``(decided_ns, thawed_ns)``, CLOCK_MONOTONIC."""
    @property
    def running(self) -> bool: ...
    @property
    def error(self) -> str | None:
        """Why the running slicer stopped slicing on its own, or None."""
    @property
    def slices(self) -> list[int]: ...
    @property
    def switches(self) -> int: ...
    @property
    def early_switches(self) -> int: ...
    @property
    def watched_switches(self) -> int:
        """Early switches a per-CPU watcher found (the rest, the driver's fallback poll)."""

def slicer_thread() -> tuple[int | None, str]:
    """The shared slicer thread's id while one runs, and how it is (or was last) scheduled."""
