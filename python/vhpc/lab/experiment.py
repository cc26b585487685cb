"""The experiment file: TOML read with tomllib, validated with pydantic.

Every error names the file and the dotted path of the offending field, as the
user wrote it (`experiments/x.toml: config.0.cpus: ...`); unknown keys are errors.
Every number has a range (docs/lab.md lists them), floats must be finite, and
the whole grid is bounded, so that no file is accepted and then hangs or fails
later.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationError,
                      model_validator)

from vhpc.lab import LabError

BENCH_PROGRAMS = ("pingpong", "beff", "stream", "lu", "npb_is", "npb_ep", "npb_cg", "npb_ssor")
POLICIES = ("default", "mpi-yield", "spin", "yield", "sleep", "adaptive")
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"

# The ranges of docs/lab.md ("Limits"): what one host can run, and no more.
FILE_LIMIT = 1 << 20          # bytes of an experiment file
MAX_NAME = 100                # characters of a name (it names a directory)
MAX_REPETITIONS = 10_000
MAX_WARMUP = 100
MAX_TIMEOUT_S = 86_400.0      # one day per run
MAX_SEED = 2**63 - 1          # TOML's integers
MAX_RANKS = 256
MAX_CPU = 4095
MAX_JOBS = 64
MIN_SLICE_MS, MAX_SLICE_MS = 1.0, 10_000.0
MIN_CAP, MAX_CAP = 0.01, 1024.0  # CFS quota of 1 ms per 100 ms period at least (the kernel's floor)
MAX_ITEMS = 1000              # workloads, configs, domains, arguments, CPUs listed
MAX_ARG = 4096                # characters of one argument
MAX_RUNS = 1_000_000          # cells × (repetitions + warmup)

Policy = Literal["default", "mpi-yield", "spin", "yield", "sleep", "adaptive"]


def no_nul(text: str) -> str:
    if "\0" in text:
        raise ValueError("contains a NUL character, which no program argument can hold")
    return text


def unique(items: list | None) -> list | None:
    if items is not None:
        dup = sorted({str(i) for i in items if items.count(i) > 1})
        if dup:
            raise ValueError(f"listed twice: {', '.join(dup)}")
    return items


Name = Annotated[str, Field(pattern=NAME, max_length=MAX_NAME)]
Arg = Annotated[str, Field(max_length=MAX_ARG), AfterValidator(no_nul)]
Cpu = Annotated[int, Field(ge=0, le=MAX_CPU)]
Cpus = Annotated[list[Cpu], Field(min_length=1, max_length=MAX_ITEMS)]


class Strict(BaseModel):
    # No NaN or infinity in any float field: `timeout_s = inf` is an error here, not a hang.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Settings(Strict):
    name: Name
    repetitions: int = Field(10, ge=1, le=MAX_REPETITIONS)
    warmup: int = Field(1, ge=0, le=MAX_WARMUP)
    timeout_s: float = Field(60.0, gt=0, le=MAX_TIMEOUT_S)
    seed: int = Field(1, ge=0, le=MAX_SEED)
    mpis: Annotated[list[Literal["mpich", "openmpi"]] | None, AfterValidator(unique)] = \
        Field(None, min_length=1)
    policies: Annotated[list[Policy], AfterValidator(unique)] = Field(["default"], min_length=1)


class Workload(Strict):
    name: Name
    program: Literal[BENCH_PROGRAMS] | None = None  # type: ignore[valid-type]
    command: list[Arg] | None = Field(None, min_length=1, max_length=MAX_ITEMS)
    parser: Literal["pingpong", "kernel", "hpcc"] | None = None
    args: list[Arg] = Field([], max_length=MAX_ITEMS)
    ranks: int = Field(2, ge=1, le=MAX_RANKS)

    @model_validator(mode="after")
    def one_source(self) -> "Workload":
        if (self.program is None) == (self.command is None):
            raise ValueError("give exactly one of `program` (a bench program) or `command`")
        if self.command is not None and self.parser is None:
            raise ValueError("a `command` workload needs `parser` (pingpong, kernel or hpcc)")
        return self

    @property
    def output_parser(self) -> str:
        if self.parser is not None:
            return self.parser
        return "pingpong" if self.program == "pingpong" else "kernel"


class Noise(Strict):
    cpus: Cpus
    weight: int = Field(256, ge=1, le=65535)


class Domain(Strict):
    name: Name
    cpus: Cpus
    weight: int = Field(256, ge=1, le=65535)  # Xen-like; 256 = cpu.shares 1024
    cap: float | None = Field(None, ge=MIN_CAP, le=MAX_CAP)  # CPUs' worth of CFS quota
    ranks: list[Annotated[int, Field(ge=0, lt=MAX_RANKS)]] | None = \
        Field(None, min_length=1, max_length=MAX_RANKS)
    job: int = Field(0, ge=0, lt=MAX_JOBS)


DOMAIN_KEYS = ("domain", "mode", "jobs", "slice_ms", "work_conserving", "slices", "gang",
               "slicing", "noise", "channel", "hints", "cosched")
TIMESLICED_KEYS = ("slice_ms", "work_conserving", "slices", "gang", "slicing", "hints",
                   "cosched")
# The hint file's bounds (vhpc.host.hints): ranks per domain page, slicers, groups sliced.
HINT_SLOTS, HINT_QUEUES, HINT_MEMBERS = 64, 15, 96


class Config(Strict):
    name: Name
    kind: Literal["native", "native_up", "pinned", "capped", "timesliced", "domains"]
    cpus: Cpus | None = None
    # kind `domains` only (left out of the stored cell when unset: old run keys hold)
    domain: list[Domain] | None = Field(None, min_length=1, max_length=MAX_ITEMS)
    mode: Literal["linux", "timesliced"] | None = None
    jobs: int | None = Field(None, ge=1, le=MAX_JOBS)
    slice_ms: float | None = Field(None, ge=MIN_SLICE_MS, le=MAX_SLICE_MS)
    work_conserving: bool | None = None
    slices: Literal["turn", "weight"] | None = None
    gang: Literal[True] | None = None  # the freezer thaws a domain on all its CPUs at once
    # gang (default): a domain is thawed on all its CPUs at once; vcpu: each vCPU
    # (one per CPU listed) is sliced on its own CPU, as Xen's Credit does
    slicing: Literal["gang", "vcpu"] | None = None
    noise: Noise | None = None
    # each domain a network namespace on a bridge; the MPI talks TCP over it (net)
    # or through shared memory only (shm, an ivshmem-like channel); host/netns.py
    channel: Literal["net", "shm"] | None = None
    # the hint channel (docs/lab.md): switch as soon as every rank of the running
    # domain waits, as libvhpc_wait publishes; cosched (per vCPU): bring a domain's
    # vCPUs together while its ranks wait in a collective
    hints: StrictBool | None = None
    cosched: StrictBool | None = None

    @model_validator(mode="after")
    def cpus_for_pinned(self) -> "Config":
        if self.kind == "pinned" and self.cpus is None:
            raise ValueError("kind `pinned` needs `cpus` (one CPU per rank, reused in turn)")
        if self.kind != "pinned" and self.cpus is not None:
            raise ValueError(f"`cpus` is only for kind `pinned`, not `{self.kind}`")
        if self.kind == "domains" and self.domain is None:
            raise ValueError("kind `domains` needs `[[config.domain]]` tables")
        extra = [k for k in DOMAIN_KEYS if self.kind != "domains" and getattr(self, k) is not None
                 and not (k == "hints" and self.kind == "timesliced")]
        if extra:
            raise ValueError(f"`{extra[0]}` is only for kind `domains`, not `{self.kind}`")
        if self.mode != "timesliced" and self.kind == "domains":
            bad = [k for k in TIMESLICED_KEYS if getattr(self, k) is not None]
            if bad:
                raise ValueError(f"`{bad[0]}` is only for mode = \"timesliced\"")
        return self

    def dump(self) -> dict:
        """As stored in a run's cell: the domain fields only when given."""
        return {k: v for k, v in self.model_dump().items()
                if not (k in DOMAIN_KEYS and v is None)}


class Experiment(Strict):
    experiment: Settings
    workload: list[Workload] = Field(min_length=1, max_length=MAX_ITEMS)
    config: list[Config] = Field(min_length=1, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def unique_names(self) -> "Experiment":
        for section in ("workload", "config"):
            names = [item.name for item in getattr(self, section)]
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise ValueError(f"duplicate {section} names: {', '.join(sorted(dup))}")
        return self


@dataclass(frozen=True)
class Cell:
    """One point of the grid: run `repetitions` times."""

    mpi: str
    config: Config
    workload: Workload
    policy: str

    @property
    def label(self) -> str:
        return f"{self.mpi} · {self.config.name} · {self.workload.name} · {self.policy}"

    def as_dict(self) -> dict:
        return {"mpi": self.mpi, "config": self.config.dump(),
                "workload": self.workload.model_dump(), "policy": self.policy}


def load(path: Path) -> Experiment:
    """The validated experiment in `path`, or LabError naming the file and the field."""
    data = parse_toml(path, read_text(path))
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as exc:
        raise LabError("\n".join(f"{path}: {where(e['loc'])}: {message(e)}"
                                 for e in exc.errors())) from None
    problems = domain_problems(exp)
    runs = len(exp.config) * len(exp.workload) * len(exp.experiment.policies) * \
        len(exp.experiment.mpis or ("mpich", "openmpi"))
    problems += size_problems(runs, exp.experiment.repetitions, exp.experiment.warmup)
    if problems:
        raise LabError("\n".join(f"{path}: {at}: {what}" for at, what in problems))
    return exp


def read_text(path: Path) -> str:
    """The file as text: at most FILE_LIMIT bytes of UTF-8 (a FIFO or /dev/zero ends too)."""
    try:
        with open(path, "rb") as f:
            data = f.read(FILE_LIMIT + 1)
    except OSError as exc:
        raise LabError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > FILE_LIMIT:
        raise LabError(f"{path}: over {FILE_LIMIT >> 20} MiB: not an experiment file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LabError(f"{path}: not a text file: byte 0x{data[exc.start]:02x} at offset "
                       f"{exc.start} is not UTF-8") from None


def parse_toml(path: Path, text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LabError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise LabError(f"{path}: not valid TOML: nested too deeply") from None


def size_problems(cells: int, repetitions: int, warmup: int) -> list[tuple[str, str]]:
    runs = cells * (repetitions + warmup)
    if runs > MAX_RUNS:
        return [("experiment.repetitions", f"{cells} cells × ({repetitions} repetitions + "
                 f"{warmup} warm-up) = {runs} runs, more than {MAX_RUNS}")]
    return []


def check_size(path: Path, cells: int, repetitions: int, warmup: int) -> None:
    """The grid to run (after --reps) is within MAX_RUNS, or LabError."""
    problems = size_problems(cells, repetitions, warmup)
    if problems:
        raise LabError("\n".join(f"{path}: {at} (or --reps): {what}" for at, what in problems))


def domain_problems(exp: Experiment) -> list[tuple[str, str]]:
    """(dotted path, problem) for rules across domains and workloads."""
    allowed = sorted(os.sched_getaffinity(0))
    problems = []
    for i, config in enumerate(exp.config):
        if config.kind != "domains":
            continue
        at = f"config.{i}"
        jobs = config.jobs or 1
        for j, dom in enumerate(config.domain):
            outside = sorted(set(dom.cpus) - set(allowed))
            if outside:
                problems.append((f"{at}.domain.{j}.cpus",
                                 f"CPUs {outside} are not allowed here ({allowed})"))
            if dom.job >= jobs:
                problems.append((f"{at}.domain.{j}.job", f"job {dom.job} but jobs = {jobs}"))
        if config.noise is not None:
            outside = sorted(set(config.noise.cpus) - set(allowed))
            if outside:
                problems.append((f"{at}.noise.cpus",
                                 f"CPUs {outside} are not allowed here ({allowed})"))
        problems += hint_problems(at, config, exp)
        if config.gang and config.slicing == "vcpu":
            problems.append((f"{at}.gang", 'gang = true contradicts slicing = "vcpu" '
                             "(each vCPU sliced on its own CPU); leave `gang` out"))
        names = [d.name for d in config.domain]
        dup = sorted({n for n in names if names.count(n) > 1} | ({"noise"} & set(names)))
        if dup:
            problems.append((f"{at}.domain", f"duplicate or reserved domain names: {', '.join(dup)}"))
        for workload in exp.workload:
            problems += rank_problems(at, config, workload)
    return list(dict.fromkeys(problems))  # a rule broken for several workloads: once


def hint_problems(at: str, config: Config, exp: Experiment) -> list[tuple[str, str]]:
    """The hint channel's rules: cosched needs hints and per-vCPU slicing; the file's
    bounds (ranks per domain, slicers, groups sliced)."""
    problems = []
    if config.cosched and not config.hints:
        problems.append((f"{at}.cosched", "cosched = true needs hints = true (it acts on "
                         "the ranks' states in the hint channel)"))
    if config.cosched and config.slicing != "vcpu":
        problems.append((f"{at}.cosched", 'cosched = true needs slicing = "vcpu" (gang '
                         "slicing runs a domain's CPUs together already)"))
    if not config.hints:
        return problems
    for j, dom in enumerate(config.domain):
        for workload in exp.workload:
            n = len(dom.ranks) if dom.ranks is not None else workload.ranks
            if n > HINT_SLOTS:
                problems.append((f"{at}.domain.{j}.ranks", f"{n} ranks of workload "
                                 f"{workload.name} in one domain; the hint channel's page "
                                 f"holds {HINT_SLOTS}"))
    groups = sum(len(d.cpus) if config.slicing == "vcpu" else 1 for d in config.domain) + \
        (len(config.noise.cpus) if config.noise else 0)
    cpus = {c for d in config.domain for c in d.cpus} | set(config.noise.cpus if config.noise else ())
    if config.slicing == "vcpu" and len(cpus) > HINT_QUEUES:
        problems.append((f"{at}.hints", f"{len(cpus)} CPUs sliced, one slicer each; the hint "
                         f"channel's file holds {HINT_QUEUES}"))
    if groups > HINT_MEMBERS:
        problems.append((f"{at}.hints", f"{groups} groups sliced; the hint channel's file "
                         f"holds {HINT_MEMBERS}"))
    return problems


def rank_problems(at: str, config: Config, workload: Workload) -> list[tuple[str, str]]:
    """Each rank of each job of `workload` in exactly one domain of `config`."""
    owner: dict[tuple[int, int], int] = {}
    problems = []
    for j, dom in enumerate(config.domain):
        ranks = dom.ranks if dom.ranks is not None else range(workload.ranks)
        for rank in ranks:
            if rank >= workload.ranks:
                problems.append((f"{at}.domain.{j}.ranks", f"rank {rank} but workload "
                                 f"{workload.name} has {workload.ranks} ranks"))
            elif (dom.job, rank) in owner:
                problems.append((f"{at}.domain.{j}.ranks", f"rank {rank} of job {dom.job} is "
                                 f"also in domain.{owner[dom.job, rank]}"))
            else:
                owner[dom.job, rank] = j
    for job in range(config.jobs or 1):
        lost = [r for r in range(workload.ranks) if (job, r) not in owner]
        if lost:
            problems.append((f"{at}.domain", f"ranks {lost} of job {job} of workload "
                             f"{workload.name} are in no domain"))
    return problems


def message(error: dict) -> str:
    # Our own validators' messages need no "Value error, " prefix.
    return error["msg"].removeprefix("Value error, ")


PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def where(loc: tuple) -> str:
    # pydantic adds the tag of a Literal inside a union (e.g. `literal['mpich']`): drop it.
    parts = [str(p) for p in loc if not str(p).startswith(("literal[", "list["))]
    # A key as TOML quotes it when it is not bare ("" or one with a newline): one line per error.
    return ".".join(p if PLAIN_KEY.match(p) else json.dumps(p) for p in parts) or "(top level)"


def cells(exp: Experiment, mpis: list[str]) -> list[Cell]:
    """Every mpi × config × workload × policy, in file order."""
    return [Cell(m, c, w, p) for m, c, w, p in
            itertools.product(mpis, exp.config, exp.workload, exp.experiment.policies)]


def pick_cell(exp: Experiment, *, mpi: str | None = None, config: str | None = None,
              workload: str | None = None, policy: str | None = None) -> Cell:
    """The one cell of `exp` these names choose; a name may be left out where the
    experiment has one choice. LabError names what is missing or unknown."""
    axes = {"mpi": (mpi, list(exp.experiment.mpis or ("mpich", "openmpi"))),
            "config": (config, [c.name for c in exp.config]),
            "workload": (workload, [w.name for w in exp.workload]),
            "policy": (policy, list(exp.experiment.policies))}
    chosen = {}
    for axis, (name, names) in axes.items():
        if name is None and len(names) > 1:
            raise LabError(f"the experiment has several of {axis}: choose one with "
                           f"--{axis} ({', '.join(names)})")
        if name is not None and name not in names:
            raise LabError(f"no {axis} {name!r} in the experiment; it has {', '.join(names)}")
        chosen[axis] = name if name is not None else names[0]
    return Cell(chosen["mpi"], next(c for c in exp.config if c.name == chosen["config"]),
                next(w for w in exp.workload if w.name == chosen["workload"]), chosen["policy"])
