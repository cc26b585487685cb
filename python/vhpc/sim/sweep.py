"""A sweep file: a base scenario, axes that vary its fields, and the points they make.

A sweep file (TOML, docs/sim.md "Sweeps") names a base scenario and axes. Each
axis sets one field of the scenario, addressed by a path (`host.cores`,
`hypervisor.scheduler`, `jobs[*].wait_policy`, `domains[name=vm].weight`,
`jobs[0].params.compute_us`), or several fields to the same value (a list of
paths: the host's cores and dom0's vCPUs), to a list of values or an integer
range. The axes
are crossed (`mode = "cartesian"`) or zipped (`mode = "zip"`); `seeds` repeat
every point with seeds 1..N (or the seeds listed). An optional generator builds
what a path cannot say: `replicate` copies a template domain and its jobs,
`count` times or `per_core` times the host's cores (VMs per core).

`load` reads and validates the file; `SweepError` names the file and the field
(``smoke.toml: axes.cores.range: ...``). `Sweep.points` expands the axes into
`Point`s (parameters, stable id, scenario TOML); `Sweep.validate` checks every
point's scenario in the native core before anything runs.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from vhpc.sim import memory
from vhpc.sim.run import SimError, read_scenario, with_profile

#: More points than this is a typo in a range, not a sweep.
MAX_POINTS = 1_000_000
#: Axis names become Parquet columns beside these parameter columns (and the
#: metrics and provenance of sweep_store, which refuses those names).
RESERVED = frozenset({"point", "seed", "sweep"})
AXIS_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
#: One path segment: `name`, `name[3]`, `name[*]` or `name[name=vm]`.
SEGMENT = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<sel>\*|\d+|name=[^\]]+)\])?$")
GENERATE = "generate"


class SweepError(SimError):
    """A sweep file that cannot run: its message names the file and the field."""


# --- the file's schema ------------------------------------------------------------

class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Range(Strict):
    """Integers from `from` to `to`, both included, `step` apart."""

    start: StrictInt = Field(alias="from")
    to: StrictInt
    step: Annotated[int, Field(gt=0, strict=True)] = 1

    @model_validator(mode="after")
    def ordered(self) -> "Range":
        if self.to < self.start:
            raise ValueError(f"`to` ({self.to}) is below `from` ({self.start})")
        return self

    def values(self) -> list[int]:
        return list(range(self.start, self.to + 1, self.step))


class Axis(Strict):
    #: One field, or several set to the same value.
    path: str | Annotated[list[str], Field(min_length=1)]
    values: list[Any] | None = None
    range: Range | None = None

    @model_validator(mode="after")
    def one_source(self) -> "Axis":
        if (self.values is None) == (self.range is None):
            raise ValueError("give exactly one of `values` and `range`")
        if self.values is not None and not self.values:
            raise ValueError("`values` is empty")
        return self

    def expand(self) -> list[Any]:
        return self.range.values() if self.range is not None else list(self.values or [])


class Head(Strict):
    name: str | None = None
    base: str
    mode: Literal["cartesian", "zip"] = "cartesian"
    seeds: Annotated[int, Field(ge=1, le=100_000, strict=True)] | list[StrictInt] | None = None

    def seed_list(self) -> list[int] | None:
        if self.seeds is None:
            return None
        return list(range(1, self.seeds + 1)) if isinstance(self.seeds, int) else list(self.seeds)


class Replicate(Strict):
    """Copies of the base's domain `domain` (named <domain>0, <domain>1, ...), each
    with copies of the jobs whose ranks are all in it."""

    kind: Literal["replicate"]
    domain: str
    count: Annotated[int, Field(ge=1, strict=True)] | None = None
    per_core: Annotated[float, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def one_size(self) -> "Replicate":
        if (self.count is None) == (self.per_core is None):
            raise ValueError("give exactly one of `count` and `per_core`")
        return self


class ReportDefaults(Strict):
    """What `vhpc report` and the summary table show unless told otherwise."""

    metric: str | None = None
    x: str | None = None
    hue: str | None = None


class SweepFile(Strict):
    sweep: Head
    #: Fields every point sets (path -> value), before the axes.
    set: dict[str, Any] = {}
    axes: dict[str, Axis]
    generate: Replicate | None = None
    report: ReportDefaults = ReportDefaults()


# --- paths into a scenario ----------------------------------------------------------

def parse_path(path: str) -> list[tuple[str, str | None]]:
    """`jobs[*].wait_policy` -> [("jobs", "*"), ("wait_policy", None)]; ValueError if malformed."""
    parts = []
    for seg in path.split("."):
        m = SEGMENT.match(seg)
        if not m:
            raise ValueError(f"`{seg}` is not a field name, `name[index]`, `name[*]` or "
                             f"`name[name=NAME]`")
        parts.append((m["key"], m["sel"]))
    return parts


def select(items: Any, key: str, sel: str) -> list[dict[str, Any]]:
    """The elements of list `items` (the field `key`) that `sel` picks; ValueError if none."""
    if not isinstance(items, list):
        raise ValueError(f"`{key}` is not a list in the base scenario")
    if sel == "*":
        picked = items
    elif sel.startswith("name="):
        picked = [x for x in items if isinstance(x, dict) and x.get("name") == sel[5:]]
    else:
        picked = items[int(sel):int(sel) + 1]
    if not picked or not all(isinstance(x, dict) for x in picked):
        raise ValueError(f"`{key}[{sel}]` picks no table of the base scenario's {len(items)} {key}")
    return picked


def assign(doc: dict[str, Any], path: list[tuple[str, str | None]], value: Any) -> None:
    """Set the field at `path` of `doc` to `value`, creating missing tables on the way."""
    targets = [doc]
    for i, (key, sel) in enumerate(path):
        last = i == len(path) - 1
        if last and sel is None:
            for t in targets:
                t[key] = copy.deepcopy(value)
            return
        nxt = []
        for t in targets:
            if sel is None:
                child = t.setdefault(key, {})
                if not isinstance(child, dict):
                    raise ValueError(f"`{key}` is a value, not a table, in the base scenario")
                nxt.append(child)
            else:
                nxt.extend(select(t.get(key), key, sel))
        targets = nxt
    raise ValueError("a path must end with a field, not a list element")


# --- the generator ------------------------------------------------------------------

def replicate(doc: dict[str, Any], gen: dict[str, Any]) -> None:
    """The `replicate` generator on scenario `doc` (its parameters in `gen`)."""
    name = gen["domain"]
    template = next((d for d in doc.get("domains", []) if d.get("name") == name), None)
    if template is None:
        raise ValueError(f"generate.domain: the base scenario has no domain `{name}`")
    count = gen.get("count")
    if count is None:
        cores = doc.get("host", {}).get("cores")
        copies = gen["per_core"] * cores if isinstance(cores, int) else None
        if copies is None or copies != int(copies) or copies < 1:
            raise ValueError(f"generate.per_core: {gen['per_core']} per core × {cores} cores "
                             "is not a whole number of domains")
        count = int(copies)
    own = [j for j in doc.get("jobs", []) if name in j.get("ranks", [])]
    for job in own:
        if set(job["ranks"]) != {name}:
            raise ValueError(f"generate.domain: job `{job.get('name')}` has ranks in `{name}` "
                             "and elsewhere: only a domain's own jobs can be copied")
    doc["domains"] = [d for d in doc["domains"] if d is not template] + [
        {**copy.deepcopy(template), "name": f"{name}{i}"} for i in range(count)]
    doc["jobs"] = [j for j in doc["jobs"] if j not in own] + [
        {**copy.deepcopy(j), "name": f"{j['name']}{i}", "ranks": [f"{name}{i}"] * len(j["ranks"])}
        for i in range(count) for j in own]


# --- points -------------------------------------------------------------------------

def point_id(params: dict[str, Any]) -> str:
    """16 hex digits of SHA-256 over the parameters as canonical JSON: the same
    on every machine and in every run (keys sorted, floats in shortest repr)."""
    text = json.dumps(params, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Point:
    """One simulation: its axis values (and seed), id, scenario text and its hash."""

    params: dict[str, Any]
    id: str
    scenario: str
    origin: str

    @cached_property
    def scenario_sha(self) -> str:
        return hashlib.sha256(self.scenario.encode()).hexdigest()[:16]


@dataclass
class Sweep:
    """A validated sweep file; `points()` expands it."""

    path: Path
    spec: SweepFile
    base: dict[str, Any]
    text: str

    @property
    def name(self) -> str:
        return self.spec.sweep.name or self.path.stem

    @property
    def axes(self) -> list[str]:
        """The parameter columns: the axes in file order, then `seed` if seeds are swept."""
        return [*self.spec.axes, *(["seed"] if self.spec.sweep.seeds is not None else [])]

    @cached_property
    def sha(self) -> str:
        """A hash of the sweep file and its base scenario (provenance)."""
        base = read_scenario(self.base_path)
        return hashlib.sha256((self.text + "\0" + base).encode()).hexdigest()[:16]

    @property
    def base_path(self) -> Path:
        return (self.path.parent / self.spec.sweep.base).resolve()

    def combinations(self) -> list[dict[str, Any]]:
        names = list(self.spec.axes)
        columns = [self.spec.axes[n].expand() for n in names]
        if self.spec.sweep.mode == "zip":
            rows = list(zip(*columns))
        else:
            rows = list(itertools.product(*columns))
        combos = [dict(zip(names, row)) for row in rows]
        seeds = self.spec.sweep.seed_list()
        if seeds is not None:  # replicates of every point, whatever the mode
            combos = [{**c, "seed": s} for c in combos for s in seeds]
        return combos

    def scenario(self, params: dict[str, Any], where: str) -> str:
        """The scenario TOML of one point; SweepError naming the file, the axis and `where`."""
        doc = copy.deepcopy(self.base)
        gen = self.spec.generate.model_dump(exclude_none=True) if self.spec.generate else None
        for path, value in self.spec.set.items():
            try:
                assign(doc, parse_path(path), value)
            except ValueError as exc:
                raise SweepError(f"{self.path}: set.{path}: {exc}") from None
        for name, axis in self.spec.axes.items():
            for field, text in axis_fields(name, axis):
                try:
                    self.set_field(doc, gen, parse_path(text), params[name])
                except ValueError as exc:
                    raise SweepError(f"{self.path}: {field}: {exc}") from None
        if "seed" in params:
            doc["seed"] = params["seed"]
        if gen is not None:
            try:
                replicate(doc, gen)
            except ValueError as exc:
                raise SweepError(f"{self.path}: {exc} ({where})") from None
        doc.setdefault("name", self.name)
        return tomli_w.dumps(doc)

    @staticmethod
    def set_field(doc: dict[str, Any], gen: dict[str, Any] | None,
                  path: list[tuple[str, str | None]], value: Any) -> None:
        """One axis path of a point: a field of the scenario `doc`, or the
        generator's size in `gen`."""
        if path[0][0] != GENERATE:
            assign(doc, path, value)
            return
        if gen is None or len(path) != 2 or path[1][0] not in ("count", "per_core"):
            raise ValueError("`generate.count` and `generate.per_core` are the generator "
                             "fields an axis can set, and need a [generate] table")
        for size in ("count", "per_core"):  # the axis replaces the file's size
            gen.pop(size, None)
        gen[path[1][0]] = value

    def points(self) -> list[Point]:
        """Every point in sweep order (axes in file order, the last varying fastest)."""
        out = []
        for params in self.combinations():
            pid = point_id(params)
            where = f"point {pid}: " + ", ".join(f"{k}={v!r}" for k, v in params.items())
            origin = f"{self.path} ({where})"
            out.append(Point(params, pid, self.scenario(params, where), origin))
        return out

    def validate(self, points: list[Point], max_memory: int | None = None) -> None:
        """Every point's scenario checked by the native core (and against the memory
        limit) before any runs; SimError naming the sweep file and the point."""
        for p in points:
            memory.check(with_profile(p.scenario, p.origin), p.origin, max_memory)


# --- reading the file -----------------------------------------------------------------

def field_of(loc: tuple[Any, ...]) -> str:
    """pydantic's error location as the file's dotted field (`axes.cores.range.from`)."""
    parts = [str(x) for x in loc if not str(x).startswith(("function-", "list[", "constrained-",
                                                            "int", "float"))]
    return ".".join(parts) or "(top level)"


def parse(path: Path, text: str) -> SweepFile:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path}: not valid TOML: {exc}") from None
    try:
        return SweepFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (a typo?)"
        raise SweepError(f"{path}: {field_of(err['loc'])}: {msg}") from None


def axis_fields(name: str, axis: Axis) -> list[tuple[str, str]]:
    """(the field as errors name it, the path) for each path of an axis:
    `axes.cores.path`, or `axes.cores.path[1]` in a list."""
    if isinstance(axis.path, str):
        return [(f"axes.{name}.path", axis.path)]
    return [(f"axes.{name}.path[{i}]", text) for i, text in enumerate(axis.path)]


def check_axes(path: Path, spec: SweepFile) -> None:
    """Names, paths, value types and (zip) lengths of the axes."""
    if not spec.axes:
        raise SweepError(f"{path}: axes: a sweep needs at least one axis")
    lengths = {}
    for name, axis in spec.axes.items():
        where = f"{path}: axes.{name}"
        if not AXIS_NAME.match(name) or name in RESERVED:
            raise SweepError(f"{where}: an axis name must be lower-case letters, digits and _ "
                             f"(a Parquet column), and none of {', '.join(sorted(RESERVED))}")
        for field, text in axis_fields(name, axis):
            try:
                parsed = parse_path(text)
            except ValueError as exc:
                raise SweepError(f"{path}: {field}: {exc}") from None
            if parsed[0][0] == "seed":
                raise SweepError(f"{path}: {field}: seeds are swept with `seeds` in [sweep], not an axis")
        lengths[name] = len(axis.expand())
        if axis.values is None:
            continue  # a range: integers, each once
        kinds = {type(v).__name__ for v in axis.values}
        if len(kinds) > 1:
            raise SweepError(f"{where}.values: mixes {' and '.join(sorted(kinds))}: one column "
                             "holds one type (write 1.0, not 1, among floats)")
        if len({json.dumps(v, sort_keys=True) for v in axis.values}) != len(axis.values):
            raise SweepError(f"{where}.values: a value is repeated: the points would be the same")
    if spec.sweep.mode == "zip" and len(set(lengths.values())) > 1:
        first = next(iter(lengths))
        odd = next(n for n, k in lengths.items() if k != lengths[first])
        raise SweepError(f"{path}: axes.{odd}: has {lengths[odd]} values, axes.{first} "
                         f"{lengths[first]}: zipped axes need as many values each")
    for key in ("x", "hue"):
        axis = getattr(spec.report, key)
        if axis is not None and axis not in [*spec.axes, "seed"]:
            raise SweepError(f"{path}: report.{key}: `{axis}` is not an axis")


def count(spec: SweepFile) -> int:
    sizes = [len(a.expand()) for a in spec.axes.values()]
    n = sizes[0] if spec.sweep.mode == "zip" else math.prod(sizes)
    return n * len(spec.sweep.seed_list() or [None])


def load(path: str | Path) -> Sweep:
    """Read and validate a sweep file and its base scenario (SweepError naming the field)."""
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"{path}: no such sweep file")
    text = read_scenario(path)
    spec = parse(path, text)
    check_axes(path, spec)
    if (n := count(spec)) > MAX_POINTS:
        raise SweepError(f"{path}: axes: {n:,} points, more than {MAX_POINTS:,}")
    base_path = (path.parent / spec.sweep.base)
    if not base_path.is_file():
        raise SweepError(f"{path}: sweep.base: no scenario file {base_path}")
    origin = str(base_path)
    try:
        base = tomllib.loads(with_profile(read_scenario(base_path), origin))
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path}: sweep.base: {base_path} is not valid TOML: {exc}") from None
    return Sweep(path, spec, base, text)
