"""The package layout holds: one package per face, a shared host/, and docs that match.

Faces (runtime = fix, lab = measure, sim = predict) may use each other only through
the names a face's `__init__` re-exports, never a sibling face's own modules; what
every face needs (host/, mpi.py, paths.py, provenance.py) imports no face at all.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from vhpc import paths

PACKAGE = paths.REPO / "python" / "vhpc"
FACES = ("runtime", "lab", "sim")
SHARED = ("host", "mpi", "paths", "provenance", "durable", "_core")
ARCHITECTURE = paths.REPO / "docs" / "architecture.md"


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def dotted(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    """Whether the dotted name `vhpc.a.b` is a module or package file here."""
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def imported(path: Path) -> set[str]:
    """Every `vhpc...` name the module imports, as the module it resolves to."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.split(".")[0] == "vhpc"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "vhpc":
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if is_module(full) else node.module)
    return names


def area(name: str) -> str | None:
    """The top-level part of vhpc a dotted name belongs to (`vhpc.lab.store` -> `lab`)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def test_the_walk_sees_every_kind_of_import():
    runner = PACKAGE / "lab" / "runner.py"
    found = imported(runner)
    assert "vhpc.runtime" in found  # `from vhpc import runtime as rt`: the face's public names
    assert "vhpc.host.placement" in found  # `from vhpc.host import ..., placement`
    assert "vhpc.lab.experiment" in found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_reaches_into_a_sibling_face(path):
    own = area(dotted(path))
    for name in imported(path):
        other = area(name)
        if own in FACES and other in FACES and other != own:
            assert name == f"vhpc.{other}", (
                f"{path.relative_to(PACKAGE)} imports {name}, a module of the {other} face: "
                f"use what vhpc/{other}/__init__.py exports, or move the shared code to host/")


@pytest.mark.parametrize("path", [p for p in modules() if area(dotted(p)) in SHARED],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_shared_modules_import_no_face(path):
    faces = sorted(n for n in imported(path) if area(n) in FACES or area(n) == "cli")
    assert not faces, f"{path.relative_to(PACKAGE)} is shared but imports {faces}"


def test_every_face_is_a_package_opening_with_what_it_is_for():
    for pkg in (*FACES, "host", "sim/reproduce"):
        init = PACKAGE / pkg / "__init__.py"
        assert init.is_file(), f"vhpc/{pkg}/ is not a package"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 10, f"vhpc/{pkg}/__init__.py needs a docstring"


def test_face_packages_export_what_they_name():
    import importlib

    for face in ("runtime", "sim"):
        mod = importlib.import_module(f"vhpc.{face}")
        missing = [n for n in mod.__all__ if not hasattr(mod, n)]
        assert not missing, f"vhpc.{face} names {missing} in __all__ but has none"


def test_architecture_doc_matches_the_tree():
    text = ARCHITECTURE.read_text()
    listed = set(re.findall(r"python/vhpc/([\w/]+\.py)", text))
    on_disk = {str(p.relative_to(PACKAGE)) for p in modules()}
    assert on_disk - listed == set(), f"docs/architecture.md does not list {sorted(on_disk - listed)}"
    assert listed - on_disk == set(), f"docs/architecture.md lists missing {sorted(listed - on_disk)}"
