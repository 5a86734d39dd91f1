"""The house rules: modules stay small, and imports only point down the pipeline."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rblock"

# Pipeline order: a module may import from its own layer or an earlier one, never a later one.
LAYERS = {
    "errors": 0,
    "ir": 0,
    "trace": 1,
    "analysis": 2,
    "plan": 3,
    "codegen": 4,
    "settings": 4,
    "runtime": 5,
    "compiler": 6,
    "program": 6,
    "ops": 7,
    "explain": 8,
    "cli": 9,
    "bench": 9,
    "__init__": 10,
    "__main__": 10,
}


def _layer(module: str) -> int:
    parts = module.split(".")
    assert parts[0] == "rblock", module
    return LAYERS[parts[1]] if len(parts) > 1 else LAYERS["__init__"]


MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_module_is_at_most_400_lines(path: Path):
    assert len(path.read_text().splitlines()) <= 400


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down_the_pipeline(path: Path):
    rel = path.relative_to(SRC).with_suffix("")
    own = _layer(".".join(("rblock", *rel.parts)))
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rblock"):
            names = [node.module]
            if node.module == "rblock":  # `from rblock import x`: x is a submodule or a name of the package
                names = [f"rblock.{a.name}" if f"{a.name}" in LAYERS else "rblock" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("rblock")]
        for name in names:
            if name == "rblock" and own < LAYERS["__init__"]:
                continue  # the version string, defined before anything is imported
            assert _layer(name) <= own, f"{rel} (layer {own}) imports {name} (layer {_layer(name)})"
