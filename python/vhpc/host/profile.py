"""Host profiles: the TOML file `vhpc calibrate` writes and simulator scenarios name.

A profile holds `[profile]` (name, description, format version), `[provenance]`
(how and where it was measured) and `[measured.*]` sections of figures. A
*published* profile (`kind = "published"`: a testbed that cannot be measured
again, such as brief S0's) holds `[parameters.*]` instead: simulator scenario
fields derived from its published figures, checked by the simulator when used. Every
figure is an inline table of one of three shapes:

    { median = 3571.0, lo = 3420.0, hi = 3890.0, n = 5, unit = "ns" }         a scalar
    { x = [1, 4], x_unit = "B", median = [...], lo = [...], hi = [...],
      n = 5, unit = "ns" }                                                      a series
    { skipped = "why it was not measured" }                                     a gap

median, lo and hi are the median, minimum and maximum over the n repetitions
(a series: per point, every point from the same n runs). A whole section may
instead hold only `skipped = "why"`. docs/calibrate.md lists every key.

`load_profile` reads one back and checks the format version and the keys below,
raising ProfileError naming the file and the dotted key.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


FORMAT = 1
#: Tasks per domain of the slicer's second blocked-switch probe
#: (`measured.slicer.<layout>.blocked_switch_<SLICER_TASKS>_tasks`; the first has one).
SLICER_TASKS = 3

#: Figures every non-skipped section must hold: {section pattern: {key: kind}}.
#: kind: "entry" (a scalar or skipped figure), "series" (a series or skipped), or a
#: Python type for plain values. `*` in a pattern matches one key of the file.
REQUIRED: dict[str, dict[str, Any]] = {
    "profile": {"name": str, "description": str, "format": int},
    "provenance": {"command": str, "date": str, "host": str, "cpu_model": str,
                   "cpus_allowed": list, "kernel": str, "mpi": dict, "git_revision": str,
                   "git_dirty": bool, "load_before": float, "steal_percent": float,
                   "duration_s": float, "reps": int, "quick": bool, "seed": int},
    "measured.os": {"cpus": list, **{f"{hop}{suffix}": "entry"
                                     for hop in ("wakeup_same_cpu", "wakeup_cross_cpu",
                                                 "yield_handover")
                                     for suffix in ("", "_p99", "_mean")},
                    "yield_alone": "entry", "sleep": "series", "sleep_p99": "series",
                    "sleep_slack_1us": "series", "sleep_slack_1us_p99": "series",
                    "timer_slack_default_ns": int, "sched_slice": "entry",
                    "sched_switch": "entry", "hz": int, "hz_source": str},
    "measured.slicer": {"slice_ms": float, "poll_us": float, "method": str},
    "measured.slicer.*": {"cpus": list, "blocked_switch": "entry",
                          "blocked_switch_p99": "entry", "forced_switch": "entry",
                          "forced_switch_p99": "entry", "slice": "entry"},
    "measured.mpi.*": {"version": str},
    "measured.mpi.*.*": {"placement": str, "policy": str, "env": dict, "lat": "series"},
    "measured.kernels": {"mpi": str, "ranks": int},
    "measured.kernels.*.*": {"args": list, "time": "entry"},
}
#: Figures that are differences of two clocks' readings and may be zero or negative
#: (two domains on two CPUs can overlap for a moment): their medians need only be finite.
SIGNED = ("forced_switch", "forced_switch_p99", "sched_switch")
#: Sizes in bytes that may be zero (no size at all: an MPI whose every send waits for
#: the receiver; nothing across the bridge over shared memory): their medians need
#: only be finite and not negative.
NON_NEGATIVE = ("local_send_max", "local_isend_max", "bridge_bytes")
#: Sections that must be present (skipped or not).
SECTIONS = ("profile", "provenance", "measured.os", "measured.slicer", "measured.mpi",
            "measured.kernels")
#: A published profile (`kind = "published"`): a testbed that cannot be measured
#: again, as the simulator parameters derived from its published figures.
PUBLISHED: dict[str, dict[str, Any]] = {
    "profile": {"name": str, "description": str, "format": int},
    "provenance": {"source": str, "cpu_model": str, "derivation": str},
    "parameters": {"mpi": dict},
}


class ProfileError(Exception):
    """A profile file that cannot be read or is not valid (the message names file and key)."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Inline(dict):
    """A table written inline (`{ a = 1 }`): figures and small mappings such as env."""


# ---------------------------------------------------------------- figures


def scalar(samples: Sequence[float], unit: str) -> Inline:
    """Median, minimum and maximum of repeated samples (a gap when there are none)."""
    if not samples:
        return skipped("no successful run")
    return Inline(median=_num(statistics.median(samples)), lo=_num(min(samples)),
                  hi=_num(max(samples)), n=len(samples), unit=unit)


def series(x: Sequence[int | float], x_unit: str, samples: Sequence[Sequence[float]],
           unit: str) -> Inline:
    """Per point of `x`, median, min and max over runs; `samples` holds one list
    per run, each with a value for every point."""
    if not samples:
        return skipped("no successful run")
    columns = list(zip(*samples))
    return Inline(x=list(x), x_unit=x_unit,
                  median=[_num(statistics.median(c)) for c in columns],
                  lo=[_num(min(c)) for c in columns], hi=[_num(max(c)) for c in columns],
                  n=len(samples), unit=unit)


def skipped(reason: str) -> Inline:
    return Inline(skipped=reason)


def is_skipped(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"skipped"}


def _num(v: float) -> float:
    return float(f"{v:.6g}")


# ---------------------------------------------------------------- writing


HEADER = ("# vhpc host profile, written by `vhpc calibrate`; every key is described in "
          "docs/calibrate.md.\n")


def dumps(profile: Mapping[str, Any]) -> str:
    """TOML text: nested plain mappings become [tables], Inline ones inline tables."""
    lines = [HEADER.rstrip("\n")]

    def table(path: str, body: Mapping[str, Any]) -> None:
        plain = [(k, v) for k, v in body.items() if not _is_table(v)]
        nested = [(k, v) for k, v in body.items() if _is_table(v)]
        if path and (plain or not nested):
            lines.extend(["", f"[{path}]"])
        lines.extend(f"{_key(k)} = {_literal(v)}" for k, v in plain)
        for k, v in nested:
            table(f"{path}.{_key(k)}" if path else _key(k), v)

    table("", profile)
    return "\n".join(lines) + "\n"


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) and not isinstance(value, Inline)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_key(k)} = {_literal(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} to TOML")


def write_profile(path: Path, profile: Mapping[str, Any]) -> None:
    """Write atomically (a temporary name, then rename) after checking it reads back;
    a profile that does not pass is kept as <stem>.invalid.toml and ProfileError raised."""
    text = dumps(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        load_profile(tmp, shown_as=path)
    except ProfileError as exc:  # keep the measurements for a look, under another name
        kept = path.with_name(f"{path.stem}.invalid{path.suffix}")
        os.replace(tmp, kept)
        raise ProfileError(f"{exc.message}\n(the figures are kept in {kept})") from exc
    os.replace(tmp, path)


# ---------------------------------------------------------------- reading


def load_profile(path: Path | str, *, shown_as: Path | str | None = None) -> dict[str, Any]:
    """The profile at `path`, checked: format version, every required key and the
    shape of every figure. Raises ProfileError naming the file and the dotted key."""
    name = str(shown_as or path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{name}: not valid TOML: {exc}") from exc
    problems = check(data)
    if problems:
        raise ProfileError(f"{name}: " + f"\n{name}: ".join(problems))
    return data


def check(data: Mapping[str, Any]) -> list[str]:
    """What is wrong with a profile's data, one `dotted.key: problem` per line."""
    fmt = data.get("profile", {}).get("format") if isinstance(data.get("profile"), dict) else None
    if fmt is None:
        return ["profile.format: missing (is this a vhpc host profile?)"]
    if fmt != FORMAT:
        return [f"profile.format: {fmt!r} is not {FORMAT}, the format this vhpc reads"]
    kind = data["profile"].get("kind", "measured")
    if kind == "published":
        return _check_published(data)
    if kind != "measured":
        return [f"profile.kind: {kind!r} is neither \"measured\" nor \"published\""]
    problems: list[str] = []
    checked: set[str] = set()
    for section in SECTIONS:
        if _get(data, section) is None:
            problems.append(f"{section}: missing")
    for pattern, keys in REQUIRED.items():
        for path, body in _sections(data, pattern):
            if not isinstance(body, dict):
                problems.append(f"{path}: must be a table")
                continue
            if is_skipped(body):
                if path in ("profile", "provenance"):
                    problems.append(f"{path}: cannot be skipped")
                continue
            for key, kind in keys.items():
                problems += _check_key(f"{path}.{key}", body.get(key), kind)
                checked.add(f"{path}.{key}")
    for path, value in _figures(data.get("measured", {}), "measured"):
        if path not in checked:
            problems += _check_figure(path, value)
    return problems


def _check_published(data: Mapping[str, Any]) -> list[str]:
    problems = []
    for section, keys in PUBLISHED.items():
        body = _get(data, section)
        if not isinstance(body, dict):
            problems.append(f"{section}: missing")
            continue
        for key, kind in keys.items():
            problems += _check_key(f"{section}.{key}", body.get(key), kind)
    return problems


def _get(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _sections(data: Mapping[str, Any], pattern: str) -> Iterable[tuple[str, Any]]:
    """(dotted path, table) of every table matching the pattern (`*`: any key whose
    value is a table that is not a figure)."""
    found: list[tuple[str, Any]] = [("", data)]
    for part in pattern.split("."):
        nxt = []
        for path, node in found:
            if not isinstance(node, dict) or is_skipped(node):
                continue
            names = [k for k, v in node.items() if isinstance(v, dict) and not _is_figure(v)] \
                if part == "*" else [part] if part in node else []
            nxt += [(f"{path}.{k}" if path else k, node[k]) for k in names]
        found = nxt
    return found


def _is_figure(value: Mapping[str, Any]) -> bool:
    """A measured figure (scalar or series), as opposed to a section or a skipped section."""
    return "median" in value or "unit" in value


def _figures(node: Any, path: str) -> Iterable[tuple[str, Any]]:
    """Every measured figure below `node`, with its dotted path."""
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if isinstance(value, dict):
            if _is_figure(value):
                yield f"{path}.{key}", value
            else:
                yield from _figures(value, f"{path}.{key}")


def _check_key(path: str, value: Any, kind: Any) -> list[str]:
    """A required key: present, and of its kind or a `{ skipped = "why" }` gap."""
    if value is None:
        return [f"{path}: missing"]
    if is_skipped(value):
        return [] if isinstance(value["skipped"], str) else [f"{path}.skipped: must be a string"]
    if kind in ("entry", "series"):
        if not isinstance(value, dict):
            return [f"{path}: must be an inline table {{ median = ..., ... }}"]
        if kind == "series" and "x" not in value:
            return [f"{path}.x: missing (a series needs the points it was measured at)"]
        if kind == "entry" and "x" in value:
            return [f"{path}.x: a single figure, not a series"]
        return _check_figure(path, value)
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        return [f"{path}: must be {_kind_name(kind)}, not {type(value).__name__}"]
    return []


def _kind_name(kind: Any) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            list: "an array", dict: "a table"}[kind]


def _check_figure(path: str, fig: Mapping[str, Any]) -> list[str]:
    """A scalar or series figure: keys present, n a positive count, medians finite
    and positive, lo <= median <= hi."""
    problems = []
    for key in ("median", "lo", "hi", "n", "unit"):
        if key not in fig:
            problems.append(f"{path}.{key}: missing")
    if problems:
        return problems
    if not isinstance(fig["unit"], str):
        problems.append(f"{path}.unit: must be a string")
    if not (isinstance(fig["n"], int) and not isinstance(fig["n"], bool) and fig["n"] >= 1):
        problems.append(f"{path}.n: must be a positive integer")
    if "x" in fig:
        x = fig["x"]
        if not isinstance(x, list) or not x:
            return problems + [f"{path}.x: must be a non-empty array"]
        if not isinstance(fig.get("x_unit"), str):
            problems.append(f"{path}.x_unit: missing")
        columns = {k: fig[k] for k in ("median", "lo", "hi")}
        for key, col in columns.items():
            if not isinstance(col, list) or len(col) != len(x):
                problems.append(f"{path}.{key}: must be an array of {len(x)} numbers, one per x")
        if problems:
            return problems
        points = list(zip(columns["median"], columns["lo"], columns["hi"]))
    else:
        points = [(fig["median"], fig["lo"], fig["hi"])]
    for i, (med, lo, hi) in enumerate(points):
        where = f"{path}.median" + (f"[{i}]" if "x" in fig else "")
        if not all(_is_number(v) for v in (med, lo, hi)):
            problems.append(f"{where}: median, lo and hi must be numbers")
        elif not math.isfinite(med):
            problems.append(f"{where}: must be finite, not {med}")
        elif med < 0 and path.rsplit(".", 1)[-1] in NON_NEGATIVE:
            problems.append(f"{where}: must not be negative, not {med}")
        elif med <= 0 and path.rsplit(".", 1)[-1] not in SIGNED + NON_NEGATIVE:
            problems.append(f"{where}: must be positive, not {med}")
        elif not lo <= med <= hi:
            problems.append(f"{where}: must lie within lo..hi ({lo}..{hi})")
    return problems


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
