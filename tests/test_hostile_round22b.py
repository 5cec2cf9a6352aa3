"""Hostile pass 16, tester b: findings F1–F5 pinned as strict xfails during the pass; fixed after it, plain tests."""

from __future__ import annotations

import array
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from proofs_checks.comparisons import close, exact, relative
from proofs_checks.registry import compare


def test_compare_refuses_sympy_rational():
    import sympy

    with pytest.raises(TypeError, match="not exactly a float64"):
        compare(sympy.Rational(1, 10**400), 0.0, "x")


def test_close_refuses_sympy_big_integer():
    import sympy

    with pytest.raises(TypeError, match="not exactly a float64"):
        close([sympy.Integer(2**60 + 1)], [2**60], 0.5, "x")


def test_compare_refuses_mpmath():
    import mpmath

    with pytest.raises(TypeError, match="not exactly a float64"):
        compare(mpmath.mpf("1e-400"), 0.0, "x")


def test_exact_sympy_number_is_refused_in_its_words():
    import sympy

    with pytest.raises(TypeError, match="exact"):
        exact(sympy.Rational(1, 10**400), "x")


def test_close_torch_uint32_exact_values():
    torch = pytest.importorskip("torch")
    assert close(torch.tensor([2**32 - 1], dtype=torch.uint32), [2.0**32 - 1], 0.0, "x").passed


class _LongDoubleLike:
    def __array__(self, dtype=None, copy=None):
        a = np.array([np.longdouble(1) + np.longdouble(2) ** -60])
        return a if dtype is None else a.astype(dtype)


@pytest.mark.skipif(np.finfo(np.longdouble).nmant <= 52, reason="long double is float64 here")
def test_close_refuses_long_double_array_like():
    with pytest.raises(TypeError, match="not exactly a float64"):
        close(_LongDoubleLike(), [1.0], 2.0**-70, "x")


def test_close_refuses_array_array_big_ints():
    with pytest.raises(TypeError, match="not exactly a float64"):
        close(array.array("q", [2**60 + 1]), [2**60], 0.5, "x")


def test_relative_refuses_big_timedelta():
    with pytest.raises(TypeError):
        relative(np.array([2**60 + 1], dtype="m8[ns]"), np.array([2**60], dtype="m8[ns]"), 1e-19, "x")


def hopfield_beside(tmp_path, files: dict[str, str], head: str = "", factor: str = "", args: tuple = ()):
    """``tverify check hopfield`` (the script, a process of its own) of a modern-Hopfield ``update`` in ``m/hmod.py``
    beside ``files`` (relative path -> text), its module starting with ``head`` and its output times ``factor``."""
    mod = tmp_path / "m"
    for rel, text in files.items():
        (mod / rel).parent.mkdir(parents=True, exist_ok=True)
        (mod / rel).write_text(text)
    (mod / "hmod.py").write_text(
        head + "def update(xi, patterns, beta):\n"
        "    import torch\n"
        "    p = torch.as_tensor(patterns); xi = torch.as_tensor(xi)\n"
        f"    return torch.softmax(beta * xi @ p.T, -1) @ p{factor}\n")
    P = tmp_path / "P.npy"
    np.save(P, np.sign(np.random.default_rng(0).normal(size=(6, 16))))
    work = tmp_path / "w"
    work.mkdir()
    tverify = Path(sys.executable).with_name("tverify")
    return subprocess.run([str(tverify), "check", "hopfield", "--patterns", str(P), "--beta", "0.5", "--module",
                           f"{mod / 'hmod.py'}:update", "--no-progress", *args], cwd=work,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.integration(reason="a tverify process of its own (≈ 10 s); the tester's reproducer",
                         pinned_by=("tests/test_hostile_round22.py::test_a_namespace_package_named_file_beside_the_"
                                    "module_is_not_run_by_report_figures",))
def test_report_figures_do_not_import_mpl_toolkits_beside_module(tmp_path):
    marker = tmp_path / "MARKER"
    r = hopfield_beside(tmp_path, {"mpl_toolkits.py": f"open({str(marker)!r}, 'w').write('x')\n"}, args=("--report", "rep"))
    assert r.returncode == 0, r.stderr
    assert not marker.exists()


@pytest.mark.integration(reason="a whole check_icl_model run (≈ 5 s); the tester's reproducer",
                         pinned_by=("tests/test_hostile_round22.py::test_a_bfloat16_tensor_is_read_by_its_values_where_a_"
                                    "matrix_is_expected",))
def test_check_icl_model_takes_bfloat16_lambdas_or_refuses_in_one_line():
    torch = pytest.importorskip("torch")
    from theory.validation import InputError

    import proofs_checks as pc

    def ls(xs, ys, xq):
        w = torch.linalg.lstsq(xs, ys[..., None]).solution[..., 0]
        return (w * xq).sum(-1)

    try:
        pc.check_icl_model(ls, lambdas=torch.tensor([1.0, 2.0], dtype=torch.bfloat16), N=8, mode="quick",
                           progress=False, isolate=False)
    except InputError:
        pass
