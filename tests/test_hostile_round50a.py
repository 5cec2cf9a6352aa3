"""Hostile pass 45 (tester a): the own-model checks, processes, the Python API and the pytest fixture.
One reproducer per finding; each failed on 2d3b35e and passes since its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import one_line_error, tv_here

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TV = [sys.executable, "-m", "proofs_checks.cli"]


def _tv_process(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    """``tverify ARGV...`` as its own process (what a user's terminal shows, Python's warnings included)."""
    env = dict(os.environ, TVERIFY_STORE=str(folder / "store"), HOME=str(folder / "home"),
               XDG_CACHE_HOME=str(folder / "cache"))
    return subprocess.run([*TV, *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=120)


def test_lyapunov_does_not_leak_the_solvers_warning(tmp_path):
    """``tverify check lyapunov --f "-x + 1e-9*x**3" --V "x**2"`` (an inconclusive, honest verdict) also prints
    ``…/numerics/lyapunov.py:369: UserWarning: Solution may be inaccurate. Try another solver, adjusting the solver
    settings, or solve with verbose=True for more information.`` and the source line ``prob.solve(solver=name,
    **opts)``: advice for cvxpy's caller that the user cannot follow, and a line of tverify's code.
    ``check att-svm`` silences the same warning ("the certificate below decides"); here the exact re-check decides
    too."""
    r = _tv_process(tmp_path, "check", "lyapunov", "--f", "-x + 1e-9*x**3", "--V", "x**2")
    assert r.returncode == 3, (r.returncode, r.stdout[-800:], r.stderr[-800:])
    assert "UserWarning" not in r.stderr and "verbose=True" not in r.stderr, r.stderr
    assert "prob.solve" not in r.stderr, r.stderr


def test_att_svm_weights_on_huge_tokens_is_not_ok_with_an_infinite_correlation(tmp_path):
    """examples/data.npz with X scaled by 1e200 and examples/W.pt: the report says ``‖W^mm‖_F = 0``,
    ``corr_with_W_mm_fro  ok  -inf  0.01  corr = inf`` (with numpy's "divide by zero" RuntimeWarning) and
    ``verdict: ok: your W is aligned with W^mm``. A correlation is at most 1; a zero Att-SVM solution has no
    direction. The data too small for float64 is refused in one line (``X and z are too small for float64``); the
    data too large must be refused too (or solved at a rescaled size), never judged ok on inf."""
    d = dict(np.load(EXAMPLES / "data.npz"))
    d["X"] = d["X"] * 1e200
    np.savez(tmp_path / "huge.npz", **d)
    r = tv_here(tmp_path, "check", "att-svm", "--data", "huge.npz", "--weights", str(EXAMPLES / "W.pt"))
    assert "corr = inf" not in r.stdout, r.stdout
    assert r.returncode != 0, r.stdout


def test_att_svm_training_refusal_names_a_finite_norm(tmp_path):
    """``tverify check att-svm --data huge.npz`` (X of examples/data.npz × 1e200) is refused with
    ``the data's max‖x‖·max‖z‖ overflows float64 (inf·1): the logits xᵀWz of any W cannot be computed``: numpy's
    ``norm`` squares the entries and overflows, but ‖x‖ ≈ 2e200 and the product ‖x‖·‖z‖ is finite; a W of norm 1
    gives finite logits. The message states a false value and a false cause."""
    d = dict(np.load(EXAMPLES / "data.npz"))
    d["X"] = d["X"] * 1e200
    np.savez(tmp_path / "huge.npz", **d)
    r = tv_here(tmp_path, "check", "att-svm", "--data", "huge.npz")
    line = one_line_error(r.returncode, r.stderr)
    assert "(inf·" not in line and "inf·1" not in line, line


def test_lyapunov_refuses_a_coefficient_below_float64s_range(tmp_path):
    """docs/cli.md: "A number too large for a float64 (1e400), or a non-zero one below its range (1e-400, which
    would read as 0), is one line saying so, exit 2"; ``--f "-x*1e400"`` and ``--eps 1e-400`` are refused, but
    ``--f "-x + 1e-400*x**3" --V "x**2"`` runs (Python's parser reads the literal as 0.0, so ``_fits_float64``
    passes) and ends inconclusive after "exact re-check failed"; ``--V "x**2 + 1e-400*x**4"`` is certified with a
    Gram eigenvalue reported as 8.27e-17 for the exact 1e-400."""
    r = tv_here(tmp_path, "check", "lyapunov", "--f", "-x + 1e-400*x**3", "--V", "x**2")
    line = one_line_error(r.returncode, r.stderr)
    assert "1e-400" in line, line


UPHILL_BF16 = '''import torch
def uphill_bf16(xi, patterns, beta):
    x, X = xi.bfloat16(), patterns.bfloat16()
    return 2 * x - torch.softmax(beta * x @ X.T, -1) @ X
'''


def test_hopfield_theorem5_property_can_still_fail_at_bfloat16(tmp_path):
    """``check hopfield --patterns examples/P.npy --beta 0.5 --module upd.py:uphill_bf16 --compute-dtype bfloat16``
    (``2ξ − X softmax(βXᵀξ)`` in bfloat16): at float64 the same update fails ``one_step_within_theorem5_bound`` with
    "worst: pattern 4 (noisy start), error 0.874 > bound 0.462" (0.103 × M); declared bfloat16 the property passes
    with error 0.103 against tolerance 1.75, i.e. 1.75·M = 7 of a largest possible one-step move of 2M = 8: a check
    that cannot reject (bfloat16's own rounding of a one-step error of order 1 is ≈ 0.004). ``update_matches_modern``
    at bfloat16 uses the measured 0.0114; ``energy_non_increasing`` is as loose (5.17 × M²)."""
    import json

    (tmp_path / "upd.py").write_text(UPHILL_BF16)
    r = tv_here(tmp_path, "check", "hopfield", "--patterns", str(EXAMPLES / "P.npy"), "--beta", "0.5",
                "--module", "upd.py:uphill_bf16", "--compute-dtype", "bfloat16", "--json", "out.json")
    assert r.returncode == 1, (r.returncode, r.stderr[-500:])
    props = {p["name"]: p for p in json.loads((tmp_path / "out.json").read_text())["properties"]}
    assert props["one_step_within_theorem5_bound"]["status"] == "fail", props["one_step_within_theorem5_bound"]


def test_hopfield_capacity_is_not_reported_as_inf(tmp_path):
    """``tverify check hopfield --patterns examples/P.npy --beta 1e4``: "capacity (Theorem 5 …): up to inf patterns at
    Δ = Δ_min"; the JSON's ``capacity.N_max`` is null, which ``capacity_estimate`` documents as "``None`` entries where
    ``Δ ≤ 0``" (no guarantee) — the opposite of the truth. The bound solved by SymPy is finite (e^{βΔ}-sized, past
    float64): it should be printed as such (e.g. 10^N) or said to exceed float64, not as infinitely many patterns or
    as no guarantee."""
    import json

    r = tv_here(tmp_path, "check", "hopfield", "--patterns", str(EXAMPLES / "P.npy"), "--beta", "1e4",
                "--json", "out.json")
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])
    cap = json.loads((tmp_path / "out.json").read_text())["capacity"]
    text = r.stdout + r.stderr
    assert "up to inf patterns" not in text and cap["N_max"] is not None, (cap, text[-600:])


STALE_LSA = '''import torch
G = torch.diag(torch.tensor([1.4, 2.5], dtype=torch.float64))  # Γ_N = (1 + 1/N)Λ + tr(Λ)/N·I, Λ = diag(1, 2), N = 10


class StaleFirst(torch.nn.Module):
    """ZFB's global minimum in W_PV / W_KQ, which it computes with; Wpv / Wkq: buffers kept from its initialisation."""

    def __init__(self):
        super().__init__()
        a = torch.zeros(3, 3, dtype=torch.float64); a[2, 2] = 1.0
        b = torch.zeros(3, 3, dtype=torch.float64); b[:2, :2] = torch.linalg.inv(G)
        self.W_PV, self.W_KQ = torch.nn.Parameter(a), torch.nn.Parameter(b)
        self.register_buffer("Wpv", 0.01 * torch.eye(3, dtype=torch.float64))
        self.register_buffer("Wkq", 0.01 * torch.eye(3, dtype=torch.float64))

    def forward(self, xs, ys, xq):
        top = torch.cat([xs.transpose(-1, -2), xq.unsqueeze(-1)], -1)
        bottom = torch.cat([ys, torch.zeros_like(ys[:, :1])], -1).unsqueeze(-2)
        E = torch.cat([top, bottom], -2)
        return (E + self.W_PV @ E @ (E.transpose(-1, -2) @ self.W_KQ @ E) / xs.shape[1])[:, -1, -1]
'''


def test_icl_model_with_two_sets_of_lsa_names_is_not_refuted_silently(tmp_path):
    """A model holding both name sets the docs list (``Wpv``/``W_PV``, ``Wkq``/``W_KQ``), computing with
    ``W_PV``/``W_KQ`` = ZFB's global minimum (its predictions: gamma_n_preconditioned_gd to 1e-32), is reported
    ``verdict: mismatch: the LSA weights StaleFirst exposes are not ZFB's Γ_N^(−1) predictor`` (exit 1): the check
    read the other pair, and no line says which attributes it read. ``check att-svm`` refuses the same ambiguity
    ("holds W under 2 keys …; keep one (which one you meant cannot be guessed)"); here a correct model is refuted."""
    (tmp_path / "lsa.py").write_text(STALE_LSA)
    r = tv_here(tmp_path, "check", "icl", "--model", "lsa.py:StaleFirst", "--lambda", "1,2", "--N", "10",
                "--M", "10", "--quick")
    assert "Traceback" not in r.stderr, r.stderr[-800:]
    assert r.returncode != 1, (r.stdout[-900:], r.stderr[-300:])


def test_att_svm_one_iteration_claims_no_trend(tmp_path):
    """``tverify check att-svm --data examples/data.npz --iters 1``: "up +0.00e+00 over the last half, still turning
    0.00e+00 rad" and "to decide: at least 20 iterations (--iters 20) to judge a stall; more iterations (--iters 4) or
    a different --lr: the correlation is not rising". With K = 1 there is no last half: nothing was measured, and the
    same data at ``--iters 3`` gains +0.156 ("still turning 0.368 rad"), at ``--iters 5000`` reaches 0.9997. The
    message reports a measured stall that was never measured and points the user at the learning rate."""
    r = tv_here(tmp_path, "check", "att-svm", "--data", str(EXAMPLES / "data.npz"), "--iters", "1")
    assert r.returncode == 3, (r.returncode, r.stderr[-500:])
    assert "not rising" not in r.stdout, r.stdout[-900:]


def test_icl_lambda_below_float64s_range_is_named_not_read_as_zero(tmp_path):
    """docs/cli.md: a non-zero number below float64's range "(1e-400, which would read as 0), is one line saying so,
    exit 2"; ``--beta 1e-400``, ``--lr 1e-400``, ``--region 1e-400`` say "the number is below a float64's range and
    would be read as 0"; ``check icl --model … --lambda 1e-400,1`` says "--lambda is not positive definite (smallest
    eigenvalue 0)": the exit code is right, the cause and the value are not (pass 20's "got 0.0" note, for a list
    option)."""
    (tmp_path / "icl.py").write_text("def ls(xs, ys, xq):\n    return xq[:, 0]\n")
    r = tv_here(tmp_path, "check", "icl", "--model", "icl.py:ls", "--lambda", "1e-400,1", "--N", "10")
    line = one_line_error(r.returncode, r.stderr)
    assert "eigenvalue 0" not in line and "1e-400" in line, line


def test_icl_lambda_matrix_entry_below_float64s_range_is_refused(tmp_path):
    """The full-matrix form of ``--lambda`` with off-diagonal ``1e-400``: no line, the run goes on with Λ = diag(1, 2)
    ("Λ (d = 2, cond 2)") to its verdict (least squares: ok, exit 0) — the documented "one line saying so, exit 2" does not happen."""
    (tmp_path / "icl.py").write_text("def ls(xs, ys, xq):\n    return xq[:, 0]\n")
    r = tv_here(tmp_path, "check", "icl", "--model", "icl.py:ls", "--lambda", "1,1e-400;1e-400,2", "--N", "10",
                "--quick")
    line = one_line_error(r.returncode, r.stderr)
    assert "1e-400" in line, line


def test_icl_async_model_is_one_line(tmp_path):
    """``async def coro(xs, ys, xq)`` (a user's model written async by mistake): exit 2 with the right line
    ("predictions must be a torch tensor or NumPy array …, got coroutine"), but stderr also holds
    ``…/proofs_checks/sanity/_isolate.py:388: RuntimeWarning: coroutine 'coro' was never awaited``,
    ``return {"error": " ".join(exc.format_message().split())}`` and ``RuntimeWarning: Enable tracemalloc to get the
    object allocation traceback``: tverify's source, and advice about tracemalloc. A usage error is one line."""
    (tmp_path / "fac.py").write_text("async def coro(xs, ys, xq):\n    return xq[:, 0]\n")
    r = _tv_process(tmp_path, "check", "icl", "--model", "fac.py:coro", "--lambda", "1,2", "--N", "10", "--quick")
    one_line_error(r.returncode, r.stderr)


def test_icl_factory_returning_none_is_not_called_uncallable(tmp_path):
    """``def factory_none(): return None`` (a zero-argument factory, as docs/own-model.md allows, that forgot its
    ``return model``): ``--model: factory_none is not callable (give a function, an nn.Module, a class or a factory),
    got NoneType``. factory_none is a callable function, and it was called; the message blames the wrong object and
    does not say that the factory returned None."""
    (tmp_path / "fac.py").write_text("def factory_none():\n    return None\n")
    r = tv_here(tmp_path, "check", "icl", "--model", "fac.py:factory_none", "--lambda", "1,2", "--N", "10", "--quick")
    line = one_line_error(r.returncode, r.stderr)
    assert "factory_none is not callable" not in line, line


def test_lyapunov_reports_the_gram_matrixs_own_eigenvalue(tmp_path):
    """``tverify check lyapunov --f "-x" --V "1e30*x**2"``: certified (right), with "smallest Gram eigenvalue 1e+20"
    for both programs and the same in the criterion line; the JSON holds ``gram_exact`` [["999…999/1000"]]
    (= 1e30 − 1/1000, a 1×1 matrix: its eigenvalue is that entry) next to ``min_eig`` 1.0000000000000002e+20. At
    ``--V "1e150*x**2" --f "-1e150*x"`` the eigenvalues are 1e150 and 2e300, printed 1e+20 again."""
    import json
    from fractions import Fraction

    r = tv_here(tmp_path, "check", "lyapunov", "--f", "-x", "--V", "1e30*x**2", "--json", "out.json")
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])
    prog = json.loads((tmp_path / "out.json").read_text())["programs"]["V"]
    exact = float(Fraction(prog["gram_exact"][0][0]))
    assert abs(prog["min_eig"] - exact) <= 1e-6 * exact, (prog["min_eig"], exact)
