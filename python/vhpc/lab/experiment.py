"""The experiment file: TOML read with tomllib, validated with pydantic.

Every error names the file and the dotted path of the offending field, as the
user wrote it (`experiments/x.toml: config.0.cpus: ...`); unknown keys are errors.
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

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


class Config(Strict):
    name: str = Field(pattern=NAME)
    kind: Literal["native", "native_up", "pinned", "capped", "timesliced"]
    cpus: list[int] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def cpus_for_pinned(self) -> "Config":
        if self.kind == "pinned" and self.cpus is None:
            raise ValueError("kind `pinned` needs `cpus` (one CPU per rank, reused in turn)")
        if self.kind != "pinned" and self.cpus is not None:
            raise ValueError(f"`cpus` is only for kind `pinned`, not `{self.kind}`")
        return self


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
        return {"mpi": self.mpi, "config": self.config.model_dump(),
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
        return Experiment.model_validate(data)
    except ValidationError as exc:
        raise LabError("\n".join(f"{path}: {where(e['loc'])}: {message(e)}"
                                 for e in exc.errors())) from exc


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
