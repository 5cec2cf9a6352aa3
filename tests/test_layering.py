"""The layering rules, checked on the source: which layer may import which.

theory/        SymPy and NumPy only (and the standard library, and theory itself)
numerics/      never proofs_checks
proofs_checks/ may import everything
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mods: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods.add(node.module.split(".")[0])
    return mods


def _files(pkg: str) -> list[Path]:
    return sorted((ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _files("theory"), ids=lambda p: str(p.relative_to(ROOT)))
def test_theory_imports_sympy_and_numpy_only(path):
    bad = _imports(path) - STDLIB - {"sympy", "numpy", "theory", "__future__"}
    assert not bad, f"{path.name} imports {sorted(bad)}; theory/ may import SymPy and NumPy only"


@pytest.mark.parametrize("path", _files("numerics"), ids=lambda p: str(p.relative_to(ROOT)))
def test_numerics_never_imports_proofs_checks(path):
    assert "proofs_checks" not in _imports(path), f"{path.name} imports proofs_checks"


def test_cli_holds_no_maths():
    bad = _imports(ROOT / "proofs_checks" / "cli.py") & {"numpy", "sympy", "scipy", "torch", "cvxpy"}
    assert not bad, f"cli.py imports {sorted(bad)}"
