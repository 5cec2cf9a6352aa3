"""Issue 36, the wrong reasons: each hostile input gets one line naming what is really wrong with it
(exit 2), not another fault's message."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cli_helpers import invoke, one_line_error


def test_empty_npz_is_named_empty(tmp_path):
    p = tmp_path / "empty.npz"
    np.savez(p)
    code, out, err = invoke("check", "icl", "--lambda", "1,2", "--N", "10", "--weights", str(p), "--quick")
    line = one_line_error(code, err)
    assert "empty .npz archive" in line and "no zip header" not in line


def test_structured_npy_is_named_structured(tmp_path):
    p = tmp_path / "struct.npy"
    np.save(p, np.zeros(3, dtype=[("a", "f8"), ("b", "i4")]))
    code, out, err = invoke("check", "hopfield", "--patterns", str(p), "--beta", "2")
    line = one_line_error(code, err)
    assert "structured array (fields a, b)" in line and "text or raw bytes" not in line


@pytest.mark.parametrize("expr, says", [("x**(10**10) + y**2", "not the expression '10 ** 10'"),
                                        ("x**0.5 + y**2", "whole numbers, got 0.5"),
                                        ("x**y + y**2", "not the expression 'y'")])
def test_exponent_reasons(expr, says):
    code, out, err = invoke("check", "lyapunov", "--f", "-x, -y", "--V", expr)
    assert says in one_line_error(code, err)
