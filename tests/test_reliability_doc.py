"""docs/reliability.md's table of faults matches the tests: every fault names
tests that exist, and every test of the fault suite is named by a fault."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from vhpc import paths

DOC = paths.REPO / "docs" / "reliability.md"
TESTS = Path(__file__).parent
SUITE = ("test_lab_faults.py", "test_lab_output.py", "test_lab_experiment_property.py",
         "test_sim_faults.py")


def fault_rows() -> list[tuple[str, str, list[str]]]:
    """(fault, outcome, [file::test, ...]) for each row of the `## Faults tried` table."""
    section = DOC.read_text().split("## Faults tried", 1)[1]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[0] not in ("fault", "---|---|---"):
            rows.append((cells[0], cells[1], re.findall(r"`([\w.]+::\w+)`", cells[2])))
    return rows


def functions_of(file: str) -> set[str]:
    tree = ast.parse((TESTS / file).read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name.startswith("test_")}


def test_every_fault_has_an_outcome_and_tests_that_exist():
    rows = fault_rows()
    assert len(rows) >= 20
    for fault, outcome, tests in rows:
        assert outcome and tests, f"{fault}: no outcome or no test"
        for test in tests:
            file, name = test.split("::")
            assert name in functions_of(file), f"{fault}: {test} does not exist"


def test_every_test_of_the_fault_suite_is_in_the_table():
    named = {t for _, _, tests in fault_rows() for t in tests}
    missing = [f"{file}::{name}" for file in SUITE for name in sorted(functions_of(file))
               if f"{file}::{name}" not in named]
    assert missing == [], f"docs/reliability.md does not say what these show: {missing}"
