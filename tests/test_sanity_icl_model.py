"""``tverify check icl --model``: which in-context algorithm a user's model computes (the probe of
:mod:`numerics.icl_probe`). Acceptance: a trained ZFB LSA → ``gamma_n_preconditioned_gd``; a model
computing least squares in context → ``least_squares``; bad input → one line, exit 2; NaN → exit 1;
inseparable algorithms → inconclusive, exit 3, with what would decide. In-process, small sizes."""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest
import torch

from numerics import icl as ni
from numerics.icl_probe import ALGORITHMS, EXTENDED_ALGORITHMS, algorithm_predictions, optimal_gd_step, probe_algorithms
from proofs_checks.options import UsageError
from proofs_checks.sanity.icl import ICLModelResult, check_icl_model
from tests.cli_helpers import invoke, one_line_error
from theory import icl as ti

ACCEPT = ("--lambda", "1,2", "--N", "10", "--M", "10")

MODELS = '''
import numpy as np
import torch
from pathlib import Path


def _weights():
    """The trained W^PV, W^KQ as parameters."""
    w = np.load(Path(__file__).with_name("lsa.npz"))
    return torch.nn.Parameter(torch.tensor(w["Wpv"])), torch.nn.Parameter(torch.tensor(w["Wkq"]))


class TrainedLSA(torch.nn.Module):
    """A user's trained ZFB linear self-attention, called as obj(xs, ys, xq)."""

    def __init__(self):
        super().__init__()
        self.Wpv, self.Wkq = _weights()

    def forward(self, xs, ys, xq):
        top = torch.cat([xs.transpose(-1, -2), xq.unsqueeze(-1)], -1)
        bottom = torch.cat([ys, torch.zeros_like(ys[:, :1])], -1).unsqueeze(-2)
        E = torch.cat([top, bottom], -2)
        out = E + self.Wpv @ E @ (E.transpose(-1, -2) @ self.Wkq @ E) / xs.shape[1]
        return out[:, -1, -1]


class LSAOnE(torch.nn.Module):
    """The same weights, called on ZFB's E (layout zfb), no attribute names the tool knows."""

    def __init__(self):
        super().__init__()
        self.a, self.b = _weights()

    def forward(self, E):
        out = E + self.a @ E @ (E.transpose(-1, -2) @ self.b @ E) / (E.shape[-1] - 1)
        return out[..., -1, -1]


def least_squares(xs, ys, xq):
    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
    return (xq.unsqueeze(-2) @ w).reshape(-1)


def ridge_quarter(xs, ys, xq):
    """ridge at λ = 0.25: the Bayes-optimal predictor for label noise σ = 0.5"""
    A = xs.transpose(-1, -2) @ xs + 0.25 * torch.eye(xs.shape[-1], dtype=xs.dtype)
    w = torch.linalg.solve(A, (xs.transpose(-1, -2) @ ys.unsqueeze(-1)))
    return (xq.unsqueeze(-2) @ w).reshape(-1)


def make_least_squares():
    return least_squares


def garg_least_squares(tokens):
    d = tokens.shape[-1] - 1
    xs, ys, xq = tokens[:, 0:-1:2, :d], tokens[:, 1::2, d], tokens[:, -1, :d]
    return least_squares(xs, ys, xq)


def wrong_shape(xs, ys, xq):
    return ys


def integer_output(xs, ys, xq):
    return torch.zeros(xs.shape[0], dtype=torch.long)


def python_scalar(xs, ys, xq):
    return 0.5


def raises(xs, ys, xq):
    raise ValueError("my model cannot do this")


def nan_model(xs, ys, xq):
    out = least_squares(xs, ys, xq)
    out[0] = float("nan")
    return out


class BrokenInit(torch.nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("missing checkpoint")


def averaging(xs, ys, xq):
    return (xq * torch.einsum("bm,bmd->bd", ys, xs)).sum(-1) / xs.shape[1]


NOT_CALLABLE = 3


class WeightsPropertyRaises:
    @property
    def W_PV(self):
        raise RuntimeError("weights not loaded")

    def __call__(self, xs, ys, xq):
        return ys.mean(1)


class WeightsOfAnotherSize:
    Wpv = torch.zeros(4, 4)
    Wkq = torch.zeros(4, 4)

    def __call__(self, xs, ys, xq):
        return ys.mean(1)
'''


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A folder with a trained ZFB LSA (numerics.icl.train_lsa, Λ = diag(1, 2), N = 10) saved as
    lsa.npz and the user's model file that loads it."""
    folder = tmp_path_factory.mktemp("user_models")
    res = ni.train_lsa(np.diag([1.0, 2.0]), 10, n_seeds=1, n_prompts=8192, steps=200, seed=0)
    np.savez(folder / "lsa.npz", Wpv=res.Wpv[0].numpy(), Wkq=res.Wkq[0].numpy())
    (folder / "models.py").write_text(textwrap.dedent(MODELS))
    return folder / "models.py"


def as_json(*args):
    code, out, err = invoke("check", "icl", *args, "--json", "-", "--no-progress")
    assert "Traceback" not in err, err
    return code, json.loads(out), err


# ------------------------------------------------------------------------------------------------
# acceptance


def test_trained_lsa_is_gamma_n_preconditioned_gd(model_file):
    code, doc, _ = as_json("--model", f"{model_file}:TrainedLSA", *ACCEPT)
    assert code == 0 and doc["outcome"] == "ok", doc["decision"]
    assert doc["closest_algorithm"] == doc["identified"] == "gamma_n_preconditioned_gd"
    # the model exposes Wpv/Wkq: ZFB's theorem on its weights (trained weights within 5 %)
    assert doc["zfb_theorem"]["outcome"] == "ok" and max(doc["zfb_theorem"]["rel_err_B"]) < 0.05
    pr = doc["probe"]
    assert pr["M_values"] == [1, 2, 3, 4, 5, 10, 20] and set(pr["distance"]) == set(EXTENDED_ALGORITHMS)
    assert [r["M"] for r in doc["per_M"]] == pr["M_values"]
    assert all(len(v) == len(pr["M_values"]) for v in pr["distance_se"].values())


def test_zfb_layout_without_known_weight_names(model_file):
    code, doc, _ = as_json("--model", f"{model_file}:LSAOnE", "--layout", "zfb", *ACCEPT, "--quick")
    assert code == 0 and doc["closest_algorithm"] == "gamma_n_preconditioned_gd"
    assert "skipped" in doc["zfb_theorem"]


def test_least_squares_model(model_file):
    code, doc, _ = as_json("--model", f"{model_file}:least_squares", *ACCEPT)
    assert code == 0 and doc["closest_algorithm"] == "least_squares"
    # ridge at the Bayes-optimal λ = σ² = 0 is least squares: reported as equivalent, not as a rival
    assert doc["equivalent_algorithms"] == ["least_squares", "ridge"]


@pytest.mark.parametrize("name, layout", [("make_least_squares", "default"), ("garg_least_squares", "garg")])
def test_factory_and_garg_layout(model_file, name, layout):
    code, doc, _ = as_json("--model", f"{model_file}:{name}", "--layout", layout, *ACCEPT, "--quick")
    assert code == 0 and doc["closest_algorithm"] == "least_squares"


def test_noise_makes_ridge_a_distinct_algorithm(model_file):
    code, doc, _ = as_json("--model", f"{model_file}:ridge_quarter", *ACCEPT, "--noise", "0.5", "--quick")
    assert code == 0 and doc["closest_algorithm"] == "ridge" and doc["equivalent_algorithms"] == ["ridge"]
    assert doc["probe"]["ridge_lambda"] == pytest.approx(0.25)


def test_tiny_gpt_in_garg_layout():
    """The project's own GPT-2-like model (numerics.icl_classes), briefly trained, read at the query token."""
    from numerics import icl_classes as nc

    tm = nc.train_icl_model(nc.TaskSpec("linear", 2), 6, steps=40, batch=16, seed=0, width=8, heads=2)
    res = check_icl_model(tm.model.query, lambdas=[1.0, 1.0], N=6, M=6, layout="garg", prompts=100,
                          M_values=[1, 3, 6])
    assert res.verdict.outcome in ("ok", "mismatch", "inconclusive")
    assert set(res.probe["distance"]) == set(EXTENDED_ALGORITHMS)


def test_text_output_names_the_winner(model_file):
    code, out, err = invoke("check", "icl", "--model", f"{model_file}:averaging", *ACCEPT, "--quick", "--no-progress")
    assert code == 0 and "closest algorithm: averaging; identified: averaging" in out and "verdict: ok" in out
    assert not err


# ------------------------------------------------------------------------------------------------
# bad input: one line, exit 2; NaN: a finding, exit 1


@pytest.mark.parametrize("name, expect", [
    ("wrong_shape", "must have shape (1000,)"),
    ("integer_output", "real floating point"),
    ("python_scalar", "must have shape (1000,) (one per prompt), got ()"),  # was reported as (1,)
    ("raises", "raised ValueError: my model cannot do this on the probe input at every prompt length"),
    ("BrokenInit", "instantiating BrokenInit raised RuntimeError: missing checkpoint"),
    ("NOT_CALLABLE", "is not callable"),
    # reading the exposed LSA weights runs the user's code too (was a traceback)
    ("WeightsPropertyRaises", "reading WeightsPropertyRaises's LSA weights (attributes / state_dict) raised "
                              "RuntimeError: weights not loaded"),
    ("no_such_name", "has no name 'no_such_name'"),
])
def test_bad_models_are_one_line_usage_errors(model_file, name, expect):
    code, out, err = invoke("check", "icl", "--model", f"{model_file}:{name}", *ACCEPT, "--quick")
    line = one_line_error(code, err)
    assert expect in line, line


def test_lsa_weights_of_another_size_are_named_in_the_skip_reason(model_file):
    code, out, err = invoke("check", "icl", "--model", f"{model_file}:WeightsOfAnotherSize", *ACCEPT, "--quick",
                            "--no-progress")
    assert code == 0 and "skipped (the model exposes LSA weights of shapes W_PV (4, 4), W_KQ (4, 4), not (3, 3)" in out


@pytest.mark.parametrize("extra, expect", [
    (("--weights", "w.npz"), "--weights"),
    (("--steps", "10"), "--steps"),
])
def test_training_options_do_not_go_with_model(model_file, extra, expect):
    code, _, err = invoke("check", "icl", "--model", f"{model_file}:least_squares", *ACCEPT, *extra)
    assert expect in one_line_error(code, err)


def test_layout_without_model_is_a_usage_error():
    code, _, err = invoke("check", "icl", *ACCEPT, "--layout", "zfb")
    assert "go with --model" in one_line_error(code, err)


def test_nan_output_is_a_finding(model_file):
    code, doc, _ = as_json("--model", f"{model_file}:nan_model", *ACCEPT, "--quick")
    assert code == 1 and doc["outcome"] == "mismatch" and doc["closest_algorithm"] is None
    assert "NaN" in doc["verdict"] and sum(doc["probe"]["nonfinite"]) == len(doc["probe"]["M_values"])


# ------------------------------------------------------------------------------------------------
# statistics: inseparable → inconclusive with what would decide; equivalences


def test_borderline_model_is_inconclusive_with_prompts_needed():
    """Λ = I, N = 10: plain GD (η*, = the Γ_N step) and averaging (η = 1) are the nearest references of
    each other; a model c·x_qᵀh with c at RMS ratio exactly 1/4 of the way from averaging to η* sits on
    averaging's tolerance at every M: with few prompts, inconclusive (exit 3) with what would decide."""
    eta = optimal_gd_step([1.0, 1.0], 10)
    c = 1 - 0.25 * (1 - eta)

    def between(X, y, xq):
        return c * (xq * torch.einsum("pm,pmd->pd", y, X)).sum(-1) / X.shape[1]

    res = check_icl_model(between, lambdas="1,1", N=10, M=10, prompts=200, M_values=[5, 10])
    assert isinstance(res, ICLModelResult)
    assert res.verdict.outcome == "inconclusive" and res.exit_code == 3 and res.identified is None
    assert res.closest_algorithm == "averaging" and "averaging" in res.probe["identification"]["undecided"]
    assert "undecided because" in str(res) and "prompts per length" in res.verdict.suggestion
    assert "<table>" in res._repr_html_() and res.to_json()["outcome"] == "inconclusive"


def test_halfway_model_is_none_of_the_references():
    """c halfway between η* and 1: RMS ratio 1/2 > 1/4 to both: none identified (mismatch, exit 1), the
    closest still named and the per-M table showing the failed comparisons."""
    eta = optimal_gd_step([1.0, 1.0], 10)
    c = 0.5 * (1 + eta)

    def between(X, y, xq):
        return c * (xq * torch.einsum("pm,pmd->pd", y, X)).sum(-1) / X.shape[1]

    res = check_icl_model(between, lambdas="1,1", N=10, M=10, prompts=200, M_values=[5, 10])
    assert res.exit_code == 1 and res.identified is None and "none of the reference" in res.verdict.summary
    assert res.closest_algorithm in ("averaging", "gamma_n_preconditioned_gd")


def test_constant_zero_model_at_small_lambda_is_no_reference():
    """Λ = diag(0.02, 0.01): averaging's predictions x_qᵀh are ~1e-2 of the labels, far from every
    other reference, so without the zero prediction as a rival a model returning 0 passed averaging's
    tolerance at every length (identified as averaging). Now: none of the references; a model that
    does compute averaging there is still identified."""
    def zero(X, y, xq):
        return torch.zeros(X.shape[0], dtype=torch.float64)

    def averaging(X, y, xq):
        return (xq * torch.einsum("pm,pmd->pd", y, X)).sum(-1) / X.shape[1]

    res = check_icl_model(zero, lambdas="0.02,0.01", N=10, M=10, prompts=1000, M_values=[3, 10])
    assert res.exit_code == 1 and res.identified is None
    row = res.probe["identification"]["table"]["averaging"][0]
    assert row["status"] == "fail" and row["nearest_reference"] == "zero prediction"
    ok = check_icl_model(averaging, lambdas="0.02,0.01", N=10, M=10, prompts=200, M_values=[3, 10])
    assert ok.exit_code == 0 and ok.identified == "averaging"


def test_default_grid_reaches_beyond_the_largest_knn_k_in_one_dimension():
    """d = 1, M = 2: the grid was [1, 2, 4], where label_mean and knn_5 coincide and least squares up to
    M = 5 cannot be told from a model switching to the label mean after it. Now it reaches M = 10."""
    def label_mean(X, y, xq):
        return y.mean(1)

    def ls_then_mean(X, y, xq):
        w = (torch.linalg.pinv(X) @ y.unsqueeze(-1)).squeeze(-1)
        return (xq * w).sum(-1) if X.shape[1] <= 5 else y.mean(1)

    res = check_icl_model(label_mean, lambdas="1", N=2, M=2, prompts=300)
    assert res.probe["M_values"][-1] == 10
    assert res.identified == res.closest_algorithm == "label_mean" and res.doc["closest_algorithm"] == "label_mean"
    res = check_icl_model(ls_then_mean, lambdas="1", N=2, M=2, prompts=300)
    assert res.identified is None and res.exit_code == 1


def test_heavy_tailed_error_cannot_hide_behind_its_standard_error():
    """Least squares plus Cauchy noise at M = 3: the mean squared distance is dominated by a few huge
    prompts, so its SE was as large as the mean and every reference was "undecided" (inconclusive,
    exit 3). The lower bound from distances truncated at 4 × tol (truncation only lowers the mean)
    shows it is beyond every tolerance: none of the references (exit 1)."""
    gen = torch.Generator().manual_seed(0)

    def ls_cauchy(X, y, xq):
        w = (torch.linalg.pinv(X) @ y.unsqueeze(-1)).squeeze(-1)
        u = torch.rand(X.shape[0], generator=gen, dtype=torch.float64)
        return (xq * w).sum(-1) + (torch.tan(math.pi * (u - 0.5)) if X.shape[1] == 3 else 0.0)

    res = check_icl_model(ls_cauchy, lambdas="1,2", N=10, M=10, prompts=300, M_values=[3, 10])
    row = next(r for r in res.probe["identification"]["table"]["least_squares"] if r["M"] == 3)
    assert row["distance"] - 3 * row["se"] <= row["tolerance"] < row["truncated_lower_bound"]
    assert row["status"] == "fail" and res.exit_code == 1 and res.identified is None


def test_isotropic_lambda_makes_preconditioned_and_plain_gd_equivalent():
    """Λ ∝ I: Γ_N = c I, so the Γ_N-preconditioned step is plain GD with η* = 1/c (reported together)."""
    Lam = np.array([1.0, 1.0])
    Gi = torch.tensor(np.linalg.inv(ti.gamma_n(Lam, 5)))

    def lsa(X, y, xq):
        return torch.einsum("pd,de,pe->p", xq, Gi, torch.einsum("pm,pmd->pd", y, X) / X.shape[1])

    res = check_icl_model(lsa, lambdas="1,1", N=5, M=5, prompts=200)
    assert res.verdict.ok and res.closest_algorithm == res.identified == "gamma_n_preconditioned_gd"
    assert res.doc["equivalent_algorithms"] == ["gamma_n_preconditioned_gd", "gd_one_step"]


def test_algorithm_predictions_against_sklearn_and_closed_forms():
    """The probe's algorithms against independent implementations: sklearn Ridge / KNeighborsRegressor,
    NumPy lstsq (min-norm), the closed-form LSA predictor of theory.icl."""
    from sklearn.linear_model import Ridge
    from sklearn.neighbors import KNeighborsRegressor

    Lam, N, sigma = np.array([1.0, 2.0, 0.5]), 7, 0.4
    P = ni.sample_prompts(Lam, 5, (6,), seed=3, noise=sigma)
    out = algorithm_predictions(P.X, P.y, P.x_q, Lambda=Lam, N=N, noise=sigma)
    X, y, xq = P.X.numpy(), P.y.numpy(), P.x_q.numpy()
    for p in range(6):
        r = Ridge(alpha=sigma**2, fit_intercept=False).fit(X[p], y[p]).predict(xq[p:p + 1])[0]
        k = KNeighborsRegressor(3).fit(X[p], y[p]).predict(xq[p:p + 1])[0]
        ls = xq[p] @ np.linalg.lstsq(X[p, :2], y[p, :2], rcond=None)[0]  # M = 2 < d = 3: min-norm
        assert out["ridge"][p].item() == pytest.approx(r, rel=1e-9, abs=1e-12)
        assert out["knn"][p].item() == pytest.approx(k, rel=1e-12)
        ls_probe = algorithm_predictions(P.X[:, :2], P.y[:, :2], P.x_q, Lambda=Lam, N=N)["least_squares"][p].item()
        assert ls_probe == pytest.approx(ls, rel=1e-9, abs=1e-12)
    zfb = ti.lsa_predictor(Lam, N)(X, y, xq)
    np.testing.assert_allclose(out["gamma_n_preconditioned_gd"].numpy(), zfb, rtol=1e-12)


def test_probe_direct_call_shapes():
    res = probe_algorithms(lambda X, y, xq: xq[:, 0].numpy(), lam=[1.0, 2.0], N=4, M_values=[2, 3], prompts=50)
    assert res["M_values"] == [2, 3] and len(res["distance"]["knn"]) == 2 and res["closest"] in ALGORITHMS
    assert "identification" not in res and set(res["distance"]) == set(ALGORITHMS)  # the claim's probe is unchanged
    with pytest.raises(UsageError):
        check_icl_model(lambda X, y, xq: y, lambdas=[1.0], N=3, layout="weird")


def test_zfb_weights_tolerance_is_computed(model_file):
    """The ZFB verdict on the weights a --model exposes uses a computed tolerance: 1/4 of the distance
    from Γ_N^{-1} to the nearest alternative preconditioner (here Λ = diag(1, 2), N = 10), written
    next to it; --tol overrides it and says so."""
    from proofs_checks.sanity.icl import model_weights_tol

    tol, why = model_weights_tol(np.diag([1.0, 2.0]), 10)
    code, doc, _ = as_json("--model", f"{model_file}:TrainedLSA", *ACCEPT, "--quick")
    z = doc["zfb_theorem"]
    assert z["tol"] == pytest.approx(tol) and z["tol_reason"] == why and "nearest alternative" in why
    assert z["outcome"] == "ok" and max(z["rel_err_B"]) < tol
    code, doc, _ = as_json("--model", f"{model_file}:TrainedLSA", *ACCEPT, "--quick", "--tol", "1e-9")
    z = doc["zfb_theorem"]
    assert z["outcome"] == "mismatch" and z["tol_reason"] == "given (--tol)"


@pytest.mark.parametrize("args, kwargs", [
    (("--N", "0"), {"N": 0}),
    (("--N", "10", "--M", "0"), {"N": 10, "M": 0}),
    (("--N", "10", "--noise", "-1"), {"N": 10, "noise": -1.0}),
    (("--N", "10", "--noise", "nan"), {"N": 10, "noise": float("nan")}),
    (("--N", "10", "--tol", "-0.5"), {"N": 10, "tol": -0.5}),
    (("--N", "10", "--prompts", "8"), {"N": 10, "prompts": 8}),
    (("--N", "10", "--layout", "rows"), {"N": 10, "layout": "rows"}),
])
def test_command_and_api_refuse_with_the_same_line(args, kwargs):
    """One rule per input (issue 42): the --model flags and check_icl_model's keywords are checked by the
    same functions (sanity.icl length_value, noise_value, tol_value, prompts_value, layout_value) and say
    the same line, in the API's words."""
    import proofs_checks
    from proofs_checks.api_args import _keyword_words
    from theory.validation import InputError

    cli = one_line_error(*invoke("check", "icl", "--lambda", "1,2", *args, "--model",
                                 "tests/data/never_loaded.py:model")[::2]).removeprefix("tverify: error: ")

    def model(xs, ys, xq):
        return ys.mean(-1)

    with pytest.raises(InputError) as exc:
        proofs_checks.check_icl_model(model, lambdas="1,2", isolate=False, **kwargs)
    assert str(exc.value) == _keyword_words(cli, proofs_checks.check_icl_model), (cli, str(exc.value))
