"""The experiment file: TOML read with tomllib, validated with pydantic.

Every error names the file and the dotted path of the offending field, as the
user wrote it (`experiments/x.toml: config.0.cpus: ...`); unknown keys are errors.
"""

from __future__ import annotations

import itertools
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from vhpc.lab import LabError

BENCH_PROGRAMS = ("pingpong", "beff", "stream", "lu", "npb_is", "npb_ep", "npb_cg", "npb_ssor")
POLICIES = ("default", "mpi-yield", "spin", "yield", "sleep", "adaptive")
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"

Policy = Literal["default", "mpi-yield", "spin", "yield", "sleep", "adaptive"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Settings(Strict):
    name: str = Field(pattern=NAME)
    repetitions: int = Field(10, ge=1)
    warmup: int = Field(1, ge=0)
    timeout_s: float = Field(60.0, gt=0)
    seed: int = 1
    mpis: list[Literal["mpich", "openmpi"]] | None = Field(None, min_length=1)
    policies: list[Policy] = Field(["default"], min_length=1)


class Workload(Strict):
    name: str = Field(pattern=NAME)
    program: Literal[BENCH_PROGRAMS] | None = None  # type: ignore[valid-type]
    command: list[str] | None = Field(None, min_length=1)
    parser: Literal["pingpong", "kernel", "hpcc"] | None = None
    args: list[str] = []
    ranks: int = Field(2, ge=1)

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
    cpus: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)
    weight: int = Field(256, ge=1, le=65535)


class Domain(Strict):
    name: str = Field(pattern=NAME)
    cpus: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)
    weight: int = Field(256, ge=1, le=65535)  # Xen-like; 256 = cpu.shares 1024
    cap: float | None = Field(None, gt=0)  # CPUs' worth of CFS quota
    ranks: list[Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1)
    job: int = Field(0, ge=0)


DOMAIN_KEYS = ("domain", "mode", "jobs", "slice_ms", "work_conserving", "slices", "gang",
               "noise")


class Config(Strict):
    name: str = Field(pattern=NAME)
    kind: Literal["native", "native_up", "pinned", "capped", "timesliced", "domains"]
    cpus: list[int] | None = Field(None, min_length=1)
    # kind `domains` only (left out of the stored cell when unset: old run keys hold)
    domain: list[Domain] | None = Field(None, min_length=1)
    mode: Literal["linux", "timesliced"] | None = None
    jobs: int | None = Field(None, ge=1)
    slice_ms: float | None = Field(None, gt=0)
    work_conserving: bool | None = None
    slices: Literal["turn", "weight"] | None = None
    gang: Literal[True] | None = None  # the freezer thaws a domain on all its CPUs at once
    noise: Noise | None = None

    @model_validator(mode="after")
    def cpus_for_pinned(self) -> "Config":
        if self.kind == "pinned" and self.cpus is None:
            raise ValueError("kind `pinned` needs `cpus` (one CPU per rank, reused in turn)")
        if self.kind != "pinned" and self.cpus is not None:
            raise ValueError(f"`cpus` is only for kind `pinned`, not `{self.kind}`")
        if self.kind == "domains" and self.domain is None:
            raise ValueError("kind `domains` needs `[[config.domain]]` tables")
        extra = [k for k in DOMAIN_KEYS if self.kind != "domains" and getattr(self, k) is not None]
        if extra:
            raise ValueError(f"`{extra[0]}` is only for kind `domains`, not `{self.kind}`")
        if self.mode != "timesliced":
            bad = [k for k in ("slice_ms", "work_conserving", "slices", "gang")
                   if getattr(self, k) is not None]
            if bad:
                raise ValueError(f"`{bad[0]}` is only for mode = \"timesliced\"")
        return self

    def dump(self) -> dict:
        """As stored in a run's cell: the domain fields only when given."""
        return {k: v for k, v in self.model_dump().items()
                if not (k in DOMAIN_KEYS and v is None)}


class Experiment(Strict):
    experiment: Settings
    workload: list[Workload] = Field(min_length=1)
    config: list[Config] = Field(min_length=1)

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
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise LabError(f"{path}: cannot read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise LabError(f"{path}: not valid TOML: {exc}") from exc
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as exc:
        raise LabError("\n".join(f"{path}: {where(e['loc'])}: {message(e)}"
                                 for e in exc.errors())) from exc
    problems = domain_problems(exp)
    if problems:
        raise LabError("\n".join(f"{path}: {at}: {what}" for at, what in problems))
    return exp


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
        names = [d.name for d in config.domain]
        dup = sorted({n for n in names if names.count(n) > 1} | ({"noise"} & set(names)))
        if dup:
            problems.append((f"{at}.domain", f"duplicate or reserved domain names: {', '.join(dup)}"))
        for workload in exp.workload:
            problems += rank_problems(at, config, workload)
    return list(dict.fromkeys(problems))  # a rule broken for several workloads: once


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


def where(loc: tuple) -> str:
    # pydantic adds the tag of a Literal inside a union (e.g. `literal['mpich']`): drop it.
    parts = [str(p) for p in loc if not str(p).startswith(("literal[", "list["))]
    return ".".join(parts) or "(top level)"


def cells(exp: Experiment, mpis: list[str]) -> list[Cell]:
    """Every mpi × config × workload × policy, in file order."""
    return [Cell(m, c, w, p) for m, c, w, p in
            itertools.product(mpis, exp.config, exp.workload, exp.experiment.policies)]
