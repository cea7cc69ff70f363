"""Import rules: streamlit only in app.py and explorer/ui/, plotly only in explorer/charts/, and
nothing outside explorer/ui/ imports explorer.ui."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "explorer"


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports by absolute name, at its top or inside a function."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def imported_roots(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(path)}


def core_files() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_the_core_has_files_to_check():
    assert len(core_files()) > 5


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_streamlit_and_plotly_stay_in_the_ui(path):
    relative = path.relative_to(CORE).parts
    roots = imported_roots(path)
    if relative[0] != "ui":
        assert "streamlit" not in roots, f"{path} imports streamlit outside explorer/ui/"
    if relative[0] != "charts":
        assert "plotly" not in roots, f"{path} imports plotly outside explorer/charts/"


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_outside_the_ui_imports_it(path):
    if path.relative_to(CORE).parts[0] == "ui":
        return
    ui = [m for m in imported_modules(path) if m == "explorer.ui" or m.startswith("explorer.ui.")]
    assert not ui, (
        f"{path} imports {ui}; the core, the charts and the CLI never import explorer/ui/"
    )


PROBE_TORCH_MODULES = ("kernels.py", "collectives.py", "run.py")
"""The probe's measuring modules: they import torch inside functions (tests/test_probe.py
checks that the core, reading a probe file, never loads it)."""


def torch_free_files() -> list[Path]:
    probe = CORE / "probe"
    return [p for p in core_files() if not (p.parent == probe and p.name in PROBE_TORCH_MODULES)]


@pytest.mark.parametrize("path", torch_free_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_never_imports_torch(path):
    assert "torch" not in imported_roots(path), f"{path} imports torch; keep it in validation/"
