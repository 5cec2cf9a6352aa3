"""Notes of hostile passes 12 and 13 fixed by the lead in session 7: the Python API takes torch tensors by their
values (a tensor requiring grad raised torch's RuntimeError from tverify's code)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def test_att_svm_data_and_weights_requiring_grad_are_their_values():
    """12b N6: check_att_svm of data or weights that require grad raised torch's "Can't call numpy() on Tensor that
    requires grad"; they are taken by their values, as numpy arrays of the same numbers are."""
    import proofs_checks as P
    from numerics.att_svm import make_instance, solve_att_svm

    inst = make_instance(3, 4, 6, seed=5, setting="global")
    W = 50 * solve_att_svm(inst.X, inst.z, inst.opt).W
    plain = P.check_att_svm((inst.X, inst.z, inst.y, inst.v), weights=W).to_json()
    grad = P.check_att_svm((torch.tensor(inst.X, requires_grad=True), inst.z, inst.y, inst.v),
                           weights=torch.tensor(W, requires_grad=True)).to_json()
    assert grad["weights"] == plain["weights"]


def test_api_array_takes_tensors_by_their_values():
    from proofs_checks.api import _array

    t = torch.tensor([[1.5, -2.0]], dtype=torch.bfloat16, requires_grad=True)
    a = _array(t, np.float64)
    assert a.dtype == np.float64 and a.tolist() == [[1.5, -2.0]]
    assert _array(torch.ones(2, requires_grad=True)).tolist() == [1.0, 1.0]


def _deep_tree(top, depth=24, width=206):
    """Folders nested below ``top`` to a path longer than PATH_MAX (made through directory descriptors), with a file
    at the bottom."""
    import os

    fd = os.open(top, os.O_RDONLY)
    try:
        for i in range(depth):
            name = f"deep{i:02d}" + "d" * (width - 6)
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        w = os.open("thesis.tex", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(w, b"years of work")
        os.close(w)
    finally:
        os.close(fd)


def test_a_report_folder_holding_a_path_beyond_path_max_is_the_users(tmp_path, monkeypatch):
    """14b F3: a previous report folder into which the user put folders nested beyond PATH_MAX gave a 40-line
    OSError traceback (ENAMETOOLONG from ``is_symlink``); the folder is the user's: one line, exit 2, nothing lost."""
    from cli_helpers import invoke_in, one_line_error

    args = ("check", "lyapunov", "--f", "-x, -y", "--V", "x**2 + y**2", "--report", "rep", "--no-progress")
    r = invoke_in(tmp_path, monkeypatch, *args)
    assert r.returncode == 0, r.stderr
    _deep_tree(tmp_path / "rep")
    r = invoke_in(tmp_path, monkeypatch, *args)
    line = one_line_error(r.returncode, r.stderr)
    assert "not a tverify report" in line and "nothing was written" in line
    assert any(n.name.startswith("deep00") for n in (tmp_path / "rep").iterdir())
