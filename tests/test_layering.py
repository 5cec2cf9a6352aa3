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


@pytest.mark.parametrize("name", ["cli.py", "cli_batch.py", "cli_select.py"])
def test_cli_holds_no_maths(name):
    bad = _imports(ROOT / "proofs_checks" / name) & {"numpy", "sympy", "scipy", "torch", "cvxpy"}
    assert not bad, f"{name} imports {sorted(bad)}"


def _lint_imports():
    import shutil

    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(exe).exists():
        pytest.skip("import-linter not installed (pip install -e '.[dev]')")
    return exe


def test_import_linter_contracts():
    """The contracts in pyproject.toml ([tool.importlinter]): the three floors, theory's imports,
    and the layers inside proofs_checks."""
    import subprocess

    r = subprocess.run([_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "broken" in r.stdout and " 0 broken" in r.stdout


def test_no_import_circle():
    """No two modules of the project import each other, directly or through others (grimp's graph,
    lazy imports inside functions included)."""
    grimp = pytest.importorskip("grimp")
    g = grimp.build_graph("theory", "numerics", "proofs_checks", cache_dir=None)
    mods = sorted(m for m in g.modules if m.split(".")[0] in ("theory", "numerics", "proofs_checks"))
    circles = []
    for m in mods:
        for b in g.find_modules_directly_imported_by(m):
            if b in mods and b != m and not b.startswith(m + ".") and not m.startswith(b + ".") \
                    and g.chain_exists(importer=b, imported=m):
                circles.append((m, b))
    assert not circles, f"import circles: {circles[:10]}"


def test_no_circle_between_role_packages():
    """Taking each role package of proofs_checks (claims/, sanity/, output/, distributed/, reproduce/,
    survey/) and each core module as one unit, the imports between units form no circle either: a
    package never stands both above and below another unit."""
    grimp = pytest.importorskip("grimp")
    g = grimp.build_graph("proofs_checks", cache_dir=None)

    def unit(m: str) -> str:
        return ".".join(m.split(".")[:2])

    edges: dict[str, set[str]] = {}
    for m in g.modules:
        for b in g.find_modules_directly_imported_by(m):
            if b.startswith("proofs_checks.") and unit(b) != unit(m) and unit(m) != "proofs_checks":
                edges.setdefault(unit(m), set()).add(unit(b))

    def reaches(a: str, target: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            x = todo.pop()
            for y in edges.get(x, ()):
                if y == target:
                    return True
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        return False

    circles = sorted((a, b) for a, bs in edges.items() for b in bs if reaches(b, a))
    assert not circles, f"circles between role packages: {circles[:10]}"
