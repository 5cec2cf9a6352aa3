"""``tverify check icl``: three-outcome verdicts (ok / mismatch / inconclusive), strict --lambda
parsing, resource guards, consistent options, never a traceback. In-process through
``proofs_checks.cli.main``; small sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cli_helpers import invoke, one_line_error
from proofs_checks.sanity import icl as sicl
from proofs_checks.sanity._verdict import compare_seed_mean
from theory import icl as ti

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> tuple[int, str, str]:
    return invoke("check", "icl", *args)


def as_json(*args: str) -> tuple[int, dict]:
    code, out, err = run(*args, "--json", "-", "--no-progress")
    assert "Traceback" not in err, err
    return code, json.loads(out)


# ------------------------------------------------------------------------------------------------
# acceptance: no false verdicts


def test_ill_conditioned_default_run_is_not_ok():
    """Λ = diag(0.01, 100), N = 10, defaults: the mean w22·W11 has the wrong sign in entry (1,1)
    (the loss is flat there); it used to say ok. Now: inconclusive, exit 3, the optimiser gap named."""
    code, doc = as_json("--lambda", "0.01,100", "--N", "10")
    assert code == 3 and doc["outcome"] == "inconclusive" and not doc["ok"]
    d = doc["decision"]
    assert any(r.startswith("training not converged") for r in d["reasons"])
    assert d["numbers"]["optimiser_gap_max"] > d["numbers"]["optimiser_gap_tol"]
    assert d["numbers"]["value"] > 0.5  # the relative error the old verdict called ok
    assert "--steps" in d["suggestion"]
    assert doc["conditioning"]["cond_loss_hessian_B"] > 1e8


@pytest.mark.parametrize("lam, N", [("0.01,100", "10"), ("1,2,3", "20")])
def test_two_seeds_is_inconclusive_with_the_seeds_needed(lam, N):
    """--seeds 2 used to give 'mismatch' (z = 10.7 at 0.9 % relative error on 1,2,3): two seeds
    cannot estimate the spread. Now inconclusive, exit 3, with a number of seeds."""
    code, out, _ = run("--lambda", lam, "--N", N, "--seeds", "2", "--no-progress")
    assert code == 3 and "verdict: inconclusive" in out and "mismatch" not in out
    assert "too few seeds: 2 < 4" in out
    code, doc = as_json("--lambda", lam, "--N", N, "--seeds", "2")
    need = doc["decision"]["numbers"]["seeds_needed"]
    assert code == 3 and need >= 4 and f"--seeds {need}" in doc["decision"]["suggestion"]


def test_few_prompts_is_not_a_mismatch():
    """--prompts 1024 on the ill-conditioned Λ: under-training, not a failure of the theory."""
    code, doc = as_json("--lambda", "0.01,100", "--N", "10", "--prompts", "1024")
    assert code == 3 and doc["outcome"] == "inconclusive"
    assert doc["decision"]["numbers"]["samples_per_seed_for_seed_agreement"] > 1024


def test_well_conditioned_run_is_ok_with_its_criterion():
    code, doc = as_json("--lambda", "1,2,3", "--N", "20")  # defaults: e + k·SE ≈ 0.023–0.029 over seeds 0–4
    n = doc["decision"]["numbers"]
    assert code == 0 and doc["outcome"] == "ok", doc["decision"]
    assert n["upper"] == pytest.approx(n["value"] + n["k"] * n["standard_error"]) and n["upper"] <= n["tolerance"]
    assert n["optimiser_gap_max"] <= n["optimiser_gap_tol"]
    assert "ok because e + k·SE" in doc["decision"]["criterion"]


def test_wrong_closed_form_is_a_mismatch(monkeypatch):
    """A planted wrong Γ_N (×1.25) with converged training and agreeing seeds: mismatch, exit 1."""
    true_gamma = ti.gamma_n
    monkeypatch.setattr(sicl.ti, "gamma_n", lambda L, N: 1.25 * true_gamma(L, N))
    code, doc = as_json("--lambda", "1,2", "--N", "10", "--prompts", "32768")  # σ ≈ 0.012–0.020 over seeds 0–4
    n = doc["decision"]["numbers"]
    assert code == 1 and doc["outcome"] == "mismatch", doc["decision"]
    assert n["lower"] > n["tolerance"] and n["spread"] <= n["tolerance"]


def test_compare_seed_mean_rule():
    ref = np.diag([1.0, 2.0])
    rng = np.random.default_rng(1)
    # seeds disagree (σ ≫ tol) with the mean far away: inconclusive, never mismatch
    v = compare_seed_mean(ref * 1.5 + 0.5 * rng.normal(size=(64, 2, 2)), ref, tol=0.05, quantity="B", per_seed=1000)
    assert v.outcome == "inconclusive" and v.reasons[0].startswith("seeds disagree")
    assert v.numbers["samples_per_seed_for_seed_agreement"] > 1000
    # an interval straddling the bound: inconclusive, and more seeds are asked for
    v = compare_seed_mean(ref * 1.05 + 0.05 * rng.normal(size=(8, 2, 2)), ref, tol=0.05, quantity="B", per_seed=1000)
    assert v.outcome == "inconclusive" and v.numbers["seeds_needed"] > 8
    # blocked: not converged wins over good numbers
    v = compare_seed_mean(ref + 1e-6 * rng.normal(size=(8, 2, 2)), ref, tol=0.05, quantity="B",
                          blockers=["training not converged: x"], block_suggestion="--steps 1000")
    assert v.outcome == "inconclusive" and v.exit_code == 3 and v.suggestion.startswith("--steps 1000")
    assert set(v.to_json()) >= {"outcome", "summary", "criterion", "numbers", "reasons", "suggestion", "exit_code"}


# ------------------------------------------------------------------------------------------------
# acceptance: strict parsing, one line, exit 2


@pytest.mark.parametrize("lam, fragment", [
    ("1 2 3", "--lambda: numbers must be separated by commas"),
    ("1,,2", '--lambda: empty field at position 2 in "1,,2"'),
    ("", "--lambda: empty value"),
    ("1e300,1", "--lambda: entry 1e+300 is too large"),
    ("1e-300,1", "--lambda: condition number 1e+300 exceeds 1e+12"),
    ("1e300", "--lambda: entry 1e+300 is too large"),
    ("nan,1", "non-finite value 'nan'"),
    ("1,2;3", "row 2 has 1 numbers but row 1 has 2"),
])
def test_bad_lambda_one_line_naming_the_problem(lam, fragment):
    line = one_line_error(*run("--lambda", lam, "--N", "5")[::2])
    assert fragment in line and "weights" not in line, line


def test_text_file_named_npy(tmp_path):
    f = tmp_path / "cov.npy"
    f.write_text("1 0\n0 2\n")
    line = one_line_error(*run("--lambda", str(f), "--N", "5")[::2])
    assert "not a NumPy .npy file" in line and "pickle" not in line


def test_full_matrix_literal_and_file_agree(tmp_path):
    f = tmp_path / "L.csv"
    f.write_text("2,0.5\n0.5,1\n")
    _, a = as_json("--lambda", "2,0.5;0.5,1", "--N", "5", "--weights", _gamma_weights(tmp_path, [[2, 0.5], [0.5, 1]], 5))
    _, b = as_json("--lambda", str(f), "--N", "5", "--weights", _gamma_weights(tmp_path, [[2, 0.5], [0.5, 1]], 5))
    assert a["closed_forms"]["Gamma_N"] == b["closed_forms"]["Gamma_N"] and a["outcome"] == b["outcome"] == "ok"


def _gamma_weights(tmp_path, L, N) -> str:
    Gi = np.linalg.inv(ti.gamma_n(np.asarray(L, dtype=float), N))
    d = Gi.shape[0]
    pv, kq = np.zeros((d + 1, d + 1)), np.zeros((d + 1, d + 1))
    pv[d, d], kq[:d, :d] = 1.0, Gi
    p = tmp_path / "w.npz"
    np.savez(p, W_PV=pv, W_KQ=kq)
    return str(p)


def test_weights_with_object_arrays_or_wrong_shape(tmp_path):
    bad = tmp_path / "obj.npz"
    np.savez(bad, W_PV=np.array([None], dtype=object), W_KQ=np.eye(3))
    assert "holds Python objects" in one_line_error(*run("--lambda", "1,2", "--N", "5", "--weights", str(bad))[::2])
    w = tmp_path / "w4.npz"
    np.savez(w, W_PV=np.eye(4), W_KQ=np.eye(4))
    assert "must be (3, 3)" in one_line_error(*run("--lambda", "1,2", "--N", "5", "--weights", str(w))[::2])


# ------------------------------------------------------------------------------------------------
# acceptance: resources


def test_huge_M_is_refused_with_a_memory_estimate():
    line = one_line_error(*run("--lambda", "1,2", "--N", "10", "--M", "1000000000")[::2])
    assert "need about" in line and "GB of memory" in line and "test prompts" in line and "--max-memory" in line


def test_max_memory_option_and_large_seed_counts():
    line = one_line_error(*run("--lambda", "1,2,3", "--N", "10", "--max-memory", "0.001")[::2])
    assert "over the limit of" in line and "--max-memory 0.001" in line
    line = one_line_error(*run("--lambda", "1,2,3", "--N", "10", "--seeds", "100000", "--prompts", "100000",
                               "--max-memory", "1")[::2])
    assert "feature moments 100000 seeds" in line


def test_estimate_grows_with_the_sizes():
    small, _ = sicl.estimate_resources(3, 20, 20, 8, 32768, 300)
    big, _ = sicl.estimate_resources(3, 10, 10, 100000, 100000, 300)
    assert small.seconds < 30 and big.seconds > 3600 and big.bytes > 1e9


def test_huge_M_in_a_subprocess_has_no_traceback():
    p = subprocess.run([sys.executable, "-m", "proofs_checks", "check", "icl", "--lambda", "1,2", "--N", "10", "--M",
                        "1000000000"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


# ------------------------------------------------------------------------------------------------
# options


def test_json_path_file_and_stdout(tmp_path):
    target = tmp_path / "sub" / "out.json"
    code, out, _ = run("--lambda", "1,2", "--N", "10", "--quick", "--seeds", "4", "--prompts", "1024", "--json",
                       str(target), "--no-progress")
    doc = json.loads(target.read_text())
    assert code == doc["decision"]["exit_code"] and "verdict:" in out
    assert doc["inputs"]["seeds"] == 4 and doc["inputs"]["prompts"] == 1024 and doc["inputs"]["mode"] == "quick"
    code2, out2, err2 = run("--lambda", "1,2", "--N", "10", "--quick", "--seeds", "4", "--prompts", "1024", "--json")
    assert json.loads(out2)["decision"] == doc["decision"] and "verdict:" in err2  # same seed, same numbers
    line = one_line_error(*run("--lambda", "1,2", "--N", "10", "--json", str(tmp_path))[::2])
    assert "--json" in line and "folder" in line


def test_seed_changes_the_draw_and_quick_full_exclusive():
    _, a = as_json("--lambda", "1,2", "--N", "10", "--quick", "--seeds", "4", "--prompts", "1024", "--seed", "1")
    _, b = as_json("--lambda", "1,2", "--N", "10", "--quick", "--seeds", "4", "--prompts", "1024", "--seed", "2")
    assert a["trained"]["mean_B"] != b["trained"]["mean_B"]
    assert "mutually exclusive" in one_line_error(*run("--lambda", "1,2", "--N", "10", "--quick", "--full")[::2])
    assert "--device" in one_line_error(*run("--lambda", "1,2", "--N", "10", "--device", "tpu")[::2])


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="machine has CUDA")
def test_cuda_without_cuda_is_a_usage_error():
    line = one_line_error(*run("--lambda", "1,2", "--N", "10", "--device", "cuda")[::2])
    assert "no CUDA device" in line and "--allow-skip" not in line


def test_monitored_training_is_train_lsa():
    """train_lsa_monitored runs train_lsa's algorithm (same prompts, init, optimisers), adds the
    exact conditional minimiser B*, and reports progress up to 1."""
    from numerics import icl as ni, icl_check

    L = np.diag([1.0, 2.0])
    kw = dict(n_seeds=3, n_prompts=512, steps=50, seed=4)
    seen = []
    a = ni.train_lsa(L, 6, **kw)
    b = icl_check.train_lsa_monitored(L, 6, progress=seen.append, **kw)
    assert np.allclose(a.B, b.B, rtol=1e-10, atol=1e-12) and np.allclose(a.final_loss, b.final_loss)
    assert seen[-1] == 1.0 and all(x <= y + 1e-12 for x, y in zip(seen, seen[1:]))
    assert np.all(b.loss_gap >= -1e-12)
    # B* is the minimiser: perturbing W11 away from it only raises the loss gap's base
    assert np.linalg.norm(b.B - b.B_star) / np.linalg.norm(b.B_star) < 1e-3


@pytest.mark.parametrize("opt, value", [("--tol", "nan"), ("--tol", "inf"), ("--max-memory", "nan"), ("--tol", "0")])
def test_non_finite_or_zero_options_refused(opt, value):
    assert opt in one_line_error(*run("--lambda", "1,2", "--N", "5", opt, value)[::2])


def test_training_is_scale_equivariant_and_extreme_scales_do_not_crash():
    """Training runs in units where λ_max(Λ) ≈ 1 (an exact change of units), so Λ and 4^k·Λ give the
    same relative numbers; Λ ~ 1e30…1e35 used to end in a LAPACK traceback."""
    _, a = as_json("--lambda", "1,2", "--N", "5", "--quick", "--seeds", "4", "--prompts", "1024")
    _, b = as_json("--lambda", "4e60,8e60", "--N", "5", "--quick", "--seeds", "4", "--prompts", "1024")
    assert b["inputs"]["training_units_scale"] == pytest.approx(4.0**101)
    assert b["decision"]["numbers"]["value"] == pytest.approx(a["decision"]["numbers"]["value"], rel=1e-6)
    code, out, err = run("--lambda", "1e30,1e35", "--N", "5", "--quick", "--no-progress")
    assert code in (0, 1, 3) and "Traceback" not in err and "verdict:" in out
