"""The two tiers keep their meaning (issue 46): a test outside ``make test`` says why, and a test moved out of it
for its time names the faster tests of ``make test`` that pin what it re-verifies — and those exist and stay in
``make test``. Read from the test files' syntax (no collection: cheap)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _integration_call(node: ast.expr) -> ast.Call | None:
    """``pytest.mark.integration(...)`` as a call, or None; ``moved(reason, *pins)`` (tests/tiers.py) as the same
    call with its keywords."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "integration":
        return node
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "moved" and node.args:
        return ast.Call(node.func, [], [ast.keyword("reason", node.args[0]),
                                        ast.keyword("pinned_by", ast.Tuple(list(node.args[1:]), ast.Load()))])
    return None


def _is_integration(node: ast.expr) -> bool:
    return _integration_call(node) is not None or (isinstance(node, ast.Attribute) and node.attr == "integration")


def test_moved_is_the_integration_mark_with_its_reason_and_pins():
    from tests.tiers import moved

    m = moved("a fresh process end to end", "tests/test_a.py::test_b").mark
    assert m.name == "integration" and m.kwargs == {"reason": "a fresh process end to end",
                                                    "pinned_by": ("tests/test_a.py::test_b",)}


def _module_marked(tree: ast.Module) -> bool:
    for st in tree.body:
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in st.targets):
            vals = st.value.elts if isinstance(st.value, (ast.List, ast.Tuple)) else [st.value]
            if any(_is_integration(v) for v in vals):
                return True
    return False


def _tests(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")}


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    """The module's top-level ``NAME = <literal>`` assignments (a reason or pins shared by several tests)."""
    return {t.id: st.value for st in tree.body if isinstance(st, ast.Assign)
            for t in st.targets if isinstance(t, ast.Name)}


def _moved() -> list[tuple[str, dict[str, ast.expr]]]:
    """Every test marked ``integration(..., pinned_by=...)``: (node id, the mark's keywords, a module constant
    named there read as its value)."""
    out = []
    for path in sorted(TESTS.glob("test_*.py")):
        consts = _constants(ast.parse(path.read_text(encoding="utf-8")))
        for name, fn in _tests(path).items():  # (a whole test's mark, or one case's: pytest.param(..., marks=moved(...)))
            for dec in (n for d in fn.decorator_list for n in ast.walk(d) if isinstance(n, ast.expr)):
                call = _integration_call(dec)
                if call is not None and any(k.arg == "pinned_by" for k in call.keywords):
                    kw = {k.arg: consts.get(k.value.id, k.value) if isinstance(k.value, ast.Name) else k.value
                          for k in call.keywords}
                    out.append((f"tests/{path.name}::{name}", kw))
    return out


def _in_make_test(node_id: str) -> str | None:
    """Why ``node_id`` ("tests/FILE.py::NAME") is not a test of ``make test``, or None when it is one."""
    file, _, name = node_id.partition("::")
    path = ROOT / file
    if not path.is_file():
        return f"{file} does not exist"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fn = _tests(path).get(name)
    if fn is None:
        return f"{file} has no test {name}"
    if _module_marked(tree) or any(_is_integration(d) for d in fn.decorator_list):
        return f"{node_id} is itself in the integration tier"
    return None


def test_every_moved_test_names_faster_tests_of_make_test_that_pin_it():
    moved = _moved()
    assert moved, "no test names what pins it (pinned_by=)"
    problems = []
    for node_id, kw in moved:
        reason = kw.get("reason")
        if not (isinstance(reason, ast.Constant) and isinstance(reason.value, str) and len(reason.value) > 20):
            problems.append(f"{node_id}: no reason stated")
        pins = kw["pinned_by"]
        if not (isinstance(pins, (ast.Tuple, ast.List)) and pins.elts
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in pins.elts)):
            problems.append(f"{node_id}: pinned_by is not a non-empty tuple of node ids")
            continue
        for e in pins.elts:
            why = _in_make_test(e.value)
            if why:
                problems.append(f"{node_id}: pinned by {e.value}, but {why}")
    assert not problems, "\n".join(problems)


def test_an_integration_mark_without_a_reason_is_refused():
    from conftest import _check_tier

    class Item:
        nodeid = "tests/test_x.py::test_y"

        def __init__(self, mark):
            self._mark = mark

        def get_closest_marker(self, name):
            return self._mark if name == "integration" else None

    _check_tier(Item(None))
    _check_tier(Item(pytest.mark.integration(reason="a Dask cluster").mark))
    for bad in (pytest.mark.integration.mark, pytest.mark.integration(reason=" ").mark):
        with pytest.raises(pytest.UsageError, match="says why"):
            _check_tier(Item(bad))
