"""The experiment file: what it accepts, and errors that name the file and the field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vhpc.lab import LabError, experiment

GOOD = """
[experiment]
name = "t"
mpis = ["mpich"]
policies = ["default", "adaptive"]

[[workload]]
name = "pp"
program = "pingpong"
args = ["-s", "8"]

[[workload]]
name = "hpcc"
command = ["hpcc"]
parser = "hpcc"
ranks = 2

[[config]]
name = "native"
kind = "native"

[[config]]
name = "pin"
kind = "pinned"
cpus = [0, 1]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(LabError) as info:
        experiment.load(path)
    assert all(line.startswith(f"{path}: ") for line in info.value.message.splitlines())
    return info.value.message


def test_a_good_file_loads_with_defaults(tmp_path):
    exp = experiment.load(write(tmp_path, GOOD))
    assert exp.experiment.repetitions == 10 and exp.experiment.warmup == 1
    assert exp.workload[0].output_parser == "pingpong"
    assert exp.workload[1].output_parser == "hpcc"
    assert exp.config[1].cpus == [0, 1]
    cells = experiment.cells(exp, ["mpich", "openmpi"])
    assert len(cells) == 2 * 2 * 2 * 2
    assert cells[0].label == "mpich · native · pp · default"


def test_unknown_key_names_its_path(tmp_path):
    text = GOOD.replace('args = ["-s", "8"]', 'args = ["-s", "8"]\nrank = 2')
    assert "exp.toml: workload.0.rank: Extra inputs are not permitted" in error_of(tmp_path, text)


def test_a_bad_value_names_its_path(tmp_path):
    message = error_of(tmp_path, GOOD.replace("cpus = [0, 1]", 'cpus = [0, "x"]'))
    assert "exp.toml: config.1.cpus.1: " in message
    message = error_of(tmp_path, GOOD.replace('mpis = ["mpich"]', 'mpis = ["lam"]'))
    assert "exp.toml: experiment.mpis.0: Input should be 'mpich' or 'openmpi'" in message
    message = error_of(tmp_path, GOOD.replace('name = "t"', 'name = "t"\nrepetitions = 0'))
    assert "experiment.repetitions: Input should be greater than or equal to 1" in message


def test_every_error_is_reported_at_once(tmp_path):
    text = GOOD.replace('kind = "native"', 'kind = "vm"').replace('name = "t"', 'name = "t"\nx = 1')
    lines = error_of(tmp_path, text).splitlines()
    assert any("experiment.x:" in line for line in lines)
    assert any("config.0.kind:" in line for line in lines)


def test_rules_across_fields(tmp_path):
    assert "config.1: kind `pinned` needs `cpus`" in error_of(tmp_path, GOOD.replace("cpus = [0, 1]", ""))
    text = GOOD.replace('kind = "native"', 'kind = "native"\ncpus = [0]')
    assert "config.0: `cpus` is only for kind `pinned`" in error_of(tmp_path, text)
    text = GOOD.replace('program = "pingpong"', 'program = "pingpong"\ncommand = ["x"]\nparser = "kernel"')
    assert "workload.0: give exactly one of `program`" in error_of(tmp_path, text)
    assert "workload.1: a `command` workload needs `parser`" in error_of(
        tmp_path, GOOD.replace('parser = "hpcc"', ""))
    assert "(top level): duplicate config names: native" in error_of(
        tmp_path, GOOD.replace('name = "pin"', 'name = "native"'))


def test_missing_sections_and_unknown_programs(tmp_path):
    message = error_of(tmp_path, '[experiment]\nname = "t"\n')
    assert "exp.toml: workload: Field required" in message
    assert "exp.toml: config: Field required" in message
    assert "workload.0.program: " in error_of(tmp_path, GOOD.replace('"pingpong"', '"pingping"'))


def test_not_toml_and_missing_file(tmp_path):
    assert "not valid TOML" in error_of(tmp_path, "[experiment\n")
    with pytest.raises(LabError, match="nope.toml: cannot read"):
        experiment.load(tmp_path / "nope.toml")


DOMAINS = GOOD.replace('''[[config]]
name = "pin"''', '''[[config]]
name = "dom"
kind = "domains"
mode = "timesliced"
[[config.domain]]
name = "a"
cpus = [0]
ranks = [0]
[[config.domain]]
name = "b"
cpus = [0]
ranks = [1]

[[config]]
name = "pin"''')


def test_domains_are_accepted_and_stored_only_when_given(tmp_path):
    exp = experiment.load(write(tmp_path, DOMAINS))
    dom = exp.config[1]
    assert [d.name for d in dom.domain] == ["a", "b"] and dom.domain[0].weight == 256
    assert "domain" in dom.dump() and "domain" not in exp.config[0].dump()
    assert exp.config[0].dump() == {"name": "native", "kind": "native", "cpus": None}


def test_domain_errors_name_the_field(tmp_path):
    assert "exp.toml: config.1.domain.1.ranks: rank 0 of job 0 is also in domain.0" in error_of(
        tmp_path, DOMAINS.replace("ranks = [1]", "ranks = [0]"))
    message = error_of(tmp_path, DOMAINS.replace("ranks = [1]", "ranks = []"))
    assert "exp.toml: config.1.domain.1.ranks: List should have at least 1 item" in message
    bad = max(os.sched_getaffinity(0)) + 1
    assert f"exp.toml: config.1.domain.0.cpus: CPUs [{bad}] are not allowed here" in error_of(
        tmp_path, DOMAINS.replace("cpus = [0]\nranks = [0]", f"cpus = [{bad}]\nranks = [0]"))
    assert "config.1.domain.0.cap: Input should be greater than or equal to 0.01" in error_of(
        tmp_path, DOMAINS.replace("ranks = [0]", "ranks = [0]\ncap = 0"))
    assert "config.1.domain: ranks [1] of job 0 of workload pp are in no domain" in error_of(
        tmp_path, DOMAINS.replace("ranks = [1]", "ranks = [0]\njob = 1").replace(
            'mode = "timesliced"', 'mode = "timesliced"\njobs = 2'))
    assert "config.1.domain.1.job: job 3 but jobs = 1" in error_of(
        tmp_path, DOMAINS.replace("ranks = [1]", "ranks = [1]\njob = 3"))
    assert "config.0: `mode` is only for kind `domains`" in error_of(
        tmp_path, GOOD.replace('kind = "native"', 'kind = "native"\nmode = "linux"'))
    assert "config.1: `slice_ms` is only for mode = \"timesliced\"" in error_of(
        tmp_path, DOMAINS.replace('mode = "timesliced"', 'mode = "linux"\nslice_ms = 10'))
