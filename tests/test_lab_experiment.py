"""The experiment file: what it accepts, and errors that name the file and the field."""

from __future__ import annotations

import os
import re
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


def test_per_vcpu_slicing_is_checked_naming_the_field(tmp_path):
    vcpu = DOMAINS.replace('mode = "timesliced"', 'mode = "timesliced"\nslicing = "vcpu"')
    dom = experiment.load(write(tmp_path, vcpu)).config[1]
    assert dom.slicing == "vcpu" and dom.dump()["slicing"] == "vcpu"
    assert "slicing" not in experiment.load(write(tmp_path, DOMAINS)).config[1].dump()
    assert "exp.toml: config.1.slicing: Input should be 'gang' or 'vcpu'" in error_of(
        tmp_path, vcpu.replace('slicing = "vcpu"', 'slicing = "credit"'))
    assert 'exp.toml: config.1: `slicing` is only for mode = "timesliced"' in error_of(
        tmp_path, vcpu.replace('mode = "timesliced"', 'mode = "linux"'))
    assert "exp.toml: config.0: `slicing` is only for kind `domains`, not `native`" in error_of(
        tmp_path, GOOD.replace('kind = "native"', 'kind = "native"\nslicing = "vcpu"'))
    assert 'exp.toml: config.1.gang: gang = true contradicts slicing = "vcpu"' in error_of(
        tmp_path, vcpu.replace('slicing = "vcpu"', 'slicing = "vcpu"\ngang = true'))
    both = DOMAINS.replace('mode = "timesliced"', 'mode = "timesliced"\nslicing = "gang"\ngang = true')
    assert experiment.load(write(tmp_path, both)).config[1].gang is True


# The inputs, and the other ends of every range: each is an error naming
# the file and the field, at load time (no hang, no traceback later).
EDGES = [
    ("repetitions = 1000000000", "experiment.repetitions: Input should be less than or equal to 10000"),
    ("warmup = 1000", "experiment.warmup: Input should be less than or equal to 100"),
    ("timeout_s = inf", "experiment.timeout_s: Input should be a finite number"),
    ("timeout_s = nan", "experiment.timeout_s: Input should be a finite number"),
    ("timeout_s = 1e18", "experiment.timeout_s: Input should be less than or equal to 86400"),
    ("timeout_s = 0", "experiment.timeout_s: Input should be greater than 0"),
    ("seed = -1", "experiment.seed: Input should be greater than or equal to 0"),
    ("seed = 99999999999999999999", "experiment.seed: Input should be less than or equal to"),
    ('mpis = ["mpich", "mpich"]', "experiment.mpis: listed twice: mpich"),
]
WORKLOAD_EDGES = [
    ("ranks = 1000000000", "workload.0.ranks: Input should be less than or equal to 256"),
    ("ranks = 0", "workload.0.ranks: Input should be greater than or equal to 1"),
    ('args = ["-s", "8\\u0000"]', "workload.0.args.1: contains a NUL character"),
    (f'args = ["{"x" * 5000}"]', "workload.0.args.0: String should have at most 4096 characters"),
]
DOMAIN_EDGES = [
    ("cap = 1e-9", "config.1.domain.0.cap: Input should be greater than or equal to 0.01"),
    ("cap = inf", "config.1.domain.0.cap: Input should be a finite number"),
    ("cap = 1e9", "config.1.domain.0.cap: Input should be less than or equal to 1024"),
    ("weight = 0", "config.1.domain.0.weight: Input should be greater than or equal to 1"),
    ("job = 1000000", "config.1.domain.0.job: Input should be less than 64"),
]


@pytest.mark.parametrize("line, error", EDGES, ids=[e[0][:24] for e in EDGES])
def test_numeric_edges_of_the_experiment_table(tmp_path, line, error):
    text = GOOD.replace('mpis = ["mpich"]', line) if line.startswith("mpis") else \
        GOOD.replace('name = "t"', f'name = "t"\n{line}')
    assert error in error_of(tmp_path, text)


@pytest.mark.parametrize("line, error", WORKLOAD_EDGES, ids=[e[0][:24] for e in WORKLOAD_EDGES])
def test_numeric_edges_of_a_workload(tmp_path, line, error):
    text = GOOD.replace('args = ["-s", "8"]', line if line.startswith("args") else
                        f'args = ["-s", "8"]\n{line}')
    assert error in error_of(tmp_path, text)


@pytest.mark.parametrize("line, error", DOMAIN_EDGES, ids=[e[0][:24] for e in DOMAIN_EDGES])
def test_numeric_edges_of_a_domain(tmp_path, line, error):
    assert error in error_of(tmp_path, DOMAINS.replace("ranks = [0]", f"ranks = [0]\n{line}", 1))


def test_numeric_edges_of_a_config(tmp_path):
    assert "config.1.slice_ms: Input should be greater than or equal to 1" in error_of(
        tmp_path, DOMAINS.replace('mode = "timesliced"', 'mode = "timesliced"\nslice_ms = 1e-9'))
    assert "config.1.jobs: Input should be less than or equal to 64" in error_of(
        tmp_path, DOMAINS.replace('mode = "timesliced"', 'mode = "timesliced"\njobs = 100000'))
    assert "config.1.cpus.1: Input should be less than or equal to 4095" in error_of(
        tmp_path, GOOD.replace("cpus = [0, 1]", "cpus = [0, 1000000000]"))


def test_a_grid_too_large_to_run_is_refused_naming_repetitions(tmp_path):
    configs = "".join(f'\n[[config]]\nname = "c{i}"\nkind = "native"\n' for i in range(100))
    text = GOOD.split("[[config]]")[0].replace('name = "t"', 'name = "t"\nrepetitions = 10000')
    message = error_of(tmp_path, text + configs)
    assert "experiment.repetitions: 400 cells × (10000 repetitions + 1 warm-up) = 4000400 runs, " \
           "more than 1000000" in message


def test_files_that_are_not_experiment_files(tmp_path):
    binary = tmp_path / "exp.toml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(LabError, match="exp.toml: not a text file: byte 0x89 at offset 0 is not UTF-8"):
        experiment.load(binary)
    assert "exp.toml: over 1 MiB: not an experiment file" in error_of(tmp_path, "#" * (2 << 20))
    with pytest.raises(LabError, match="/dev/zero: over 1 MiB"):
        experiment.load(Path("/dev/zero"))  # would never end if read whole
    assert "exp.toml: not valid TOML" in error_of(tmp_path, "a = " + "[" * 100_000)
    assert "exp.toml: not valid TOML" in error_of(tmp_path, 'a = "\x00"')


def test_the_cli_shows_no_traceback_for_a_binary_file_or_wild_reps(tmp_path):
    from click.testing import CliRunner
    from vhpc import cli
    binary = tmp_path / "exp.toml"
    binary.write_bytes(bytes(range(256)))
    result = CliRunner().invoke(cli.main, ["lab", "run", str(binary)])
    assert result.exit_code == 2 and "not a text file" in result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, UnicodeError)
    result = CliRunner().invoke(cli.main, ["lab", "run", str(write(tmp_path, GOOD)),
                                           "--reps", "1000000000"])
    assert result.exit_code == 2 and "--reps" in result.output


def numeric_ranges() -> dict[str, str]:
    """`{dotted field: "lo ≤ x ≤ hi"}` for every number of the schema, list items included."""
    import typing

    import annotated_types as at

    def bound(metadata) -> str | None:
        lo = hi = None
        for m in metadata:
            if isinstance(m, (at.Ge, at.Gt)):
                lo = (m.ge if isinstance(m, at.Ge) else m.gt, "≤" if isinstance(m, at.Ge) else "<")
            if isinstance(m, (at.Le, at.Lt)):
                hi = (m.le if isinstance(m, at.Le) else m.lt, "≤" if isinstance(m, at.Le) else "<")
        if lo is None or hi is None:
            return None

        def num(v):
            return str(int(v)) if float(v).is_integer() else str(v)
        return f"{num(lo[0])} {lo[1]} x {hi[1]} {num(hi[0])}"

    def items(annotation):
        """The Annotated item type of a list field (maybe optional), if any."""
        if typing.get_origin(annotation) is list:
            return typing.get_args(annotation)[0]
        for arg in typing.get_args(annotation):
            if typing.get_origin(arg) is list:
                return typing.get_args(arg)[0]
            found = items(arg)
            if found is not None:
                return found
        return None

    out = {}
    models = {"experiment": experiment.Settings, "workload": experiment.Workload,
              "config": experiment.Config, "config.domain": experiment.Domain,
              "config.noise": experiment.Noise}
    for prefix, model in models.items():
        for name, info in model.model_fields.items():
            if (b := bound(info.metadata)) is not None:
                out[f"{prefix}.{name}"] = b
            item = items(info.annotation)
            if item is not None and (b := bound(typing.get_args(item)[1:] and
                                                 [m for a in typing.get_args(item)[1:]
                                                  for m in getattr(a, "metadata", [a])])):
                out[f"{prefix}.{name}[]"] = b
    return out


def test_every_numeric_field_has_its_range_in_the_docs():
    from vhpc import paths
    doc = (paths.REPO / "docs" / "lab.md").read_text().split("### Limits", 1)[1].split("\n## ")[0]
    documented = dict(re.findall(r"^\| `([\w.\[\]]+)` \| ([^|]+?) \|", doc, re.M))
    ranges = numeric_ranges()
    numeric = {f"{prefix}.{name}" for prefix, model in (
        ("experiment", experiment.Settings), ("workload", experiment.Workload),
        ("config", experiment.Config), ("config.domain", experiment.Domain),
        ("config.noise", experiment.Noise))
        for name, info in model.model_fields.items()
        if re.search(r"\b(int|float)\b", repr(info.annotation))}
    assert numeric == {k.removesuffix("[]") for k in ranges}, "a number without a range"
    assert {k: v for k, v in documented.items() if k in ranges} == ranges
