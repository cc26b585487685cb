"""Property: any experiment file, however wild, loads or is refused with errors
that name the file and the field; never a traceback, never a hang.

Files are drawn near the real schema (every key, with values of the right type
and range or anything else: huge and negative integers, NaN, infinity, NUL
characters, nested tables) and as raw bytes. Hypothesis runs derandomized, so
the examples are the same on every run.
"""

from __future__ import annotations

import string
import tomllib
from pathlib import Path

import pytest

hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is in the test extras: pip install -e '.[test]'")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402
import tomli_w  # noqa: E402

from vhpc.lab import LabError, experiment, runner, store  # noqa: E402

SECTIONS = ("experiment", "workload", "config")
FILE_LEVEL = ("not valid TOML", "not a text file", "over 1 MiB")

scalar = st.one_of(st.integers(), st.floats(), st.booleans(), st.text(max_size=12))
anything = st.recursive(scalar, lambda inner: st.lists(inner, max_size=3) |
                        st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


def near(good):
    """Mostly values of the right shape, sometimes anything at all."""
    return st.one_of(good, good, good, anything)


def table(required: dict, optional: dict):
    # An unknown key now and then, to be reported as such.
    return st.fixed_dictionaries({k: near(v) for k, v in required.items()},
                                 optional={**{k: near(v) for k, v in optional.items()},
                                           "extra": anything})


names = st.sampled_from(["a", "b", "x-1", "n.2", "", "-bad", "é", "a" * 150])
counts = st.integers(min_value=-3, max_value=20) | st.sampled_from([10**9, 2**63, 10**30])
floats = st.floats() | st.sampled_from([0.0, 1e-9, 0.05, 30.0, 1e18])
cpus = st.lists(st.integers(min_value=-1, max_value=3) | st.just(10**9), max_size=3)
texts = st.lists(st.text(string.printable + "\x00é", max_size=10), max_size=3)

settings_table = table({"name": names}, {
    "repetitions": counts, "warmup": counts, "timeout_s": floats, "seed": counts,
    "mpis": st.lists(st.sampled_from(["mpich", "openmpi", "lam"]), max_size=3),
    "policies": st.lists(st.sampled_from(["default", "spin", "adaptive", "nope"]), max_size=3)})
workload = table({"name": names}, {
    "program": st.sampled_from(["pingpong", "npb_is", "pingping"]), "command": texts,
    "parser": st.sampled_from(["kernel", "hpcc", "csv"]), "args": texts, "ranks": counts})
domain = table({"name": names, "cpus": cpus}, {
    "weight": counts, "cap": floats, "ranks": st.lists(counts, max_size=3), "job": counts})
config = table({"name": names, "kind": st.sampled_from(
    ["native", "native_up", "pinned", "capped", "timesliced", "domains", "vm"])}, {
    "cpus": cpus, "domain": st.lists(domain, max_size=3),
    "mode": st.sampled_from(["linux", "timesliced"]), "jobs": counts, "slice_ms": floats,
    "work_conserving": st.booleans(), "slices": st.sampled_from(["turn", "weight"]),
    "gang": st.booleans(), "noise": table({"cpus": cpus}, {"weight": counts})})
documents = st.fixed_dictionaries({}, optional={
    "experiment": near(settings_table), "workload": near(st.lists(workload, max_size=3)),
    "config": near(st.lists(config, max_size=3)), "extra": anything})


def top_keys(path: Path) -> set[str]:
    try:
        return set(tomllib.loads(path.read_text()))
    except (ValueError, RecursionError):  # not UTF-8, not TOML
        return set()


def check(path: Path) -> None:
    doc_keys = top_keys(path)
    try:
        exp = experiment.load(path)
    except LabError as exc:
        lines = exc.message.splitlines()
        assert lines, "an empty error"
        for line in lines:
            assert line.startswith(f"{path}: "), line
            rest = line[len(f"{path}: "):]
            if rest.startswith(FILE_LEVEL):
                continue
            where, sep, what = rest.partition(": ")
            assert sep and what.strip(), f"no field or no message: {line}"
            top = where.split(".")[0].strip('"')
            assert top in {*SECTIONS, "(top level)", *doc_keys}, f"names no field: {line}"
        return
    # Accepted: everything the runner derives from it works without a host.
    cells = experiment.cells(exp, ["mpich", "openmpi"])
    for cell in cells:
        store.run_key(exp.experiment.name, cell, 0)
        runner.placement_for(cell.config, cell.workload.ranks)
    runner.pending(exp.experiment.name, cells, min(exp.experiment.repetitions, 3),
                   exp.experiment.seed, set())


PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(doc=documents)
def test_any_experiment_file_loads_or_names_file_and_field(tmp_path_factory, doc):
    try:
        text = tomli_w.dumps(doc)
    except (TypeError, ValueError):
        hypothesis.reject()  # not expressible in TOML
    path = tmp_path_factory.mktemp("exp") / "exp.toml"
    path.write_text(text)
    check(path)


@PROPERTY
@given(data=st.binary(max_size=400) | st.text(max_size=400).map(str.encode))
def test_any_bytes_load_or_name_the_file(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("exp") / "exp.toml"
    path.write_bytes(data)
    check(path)
