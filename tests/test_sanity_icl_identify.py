"""Issue 24, ``check icl --model``: identification means "within tolerance of the algorithm at every
prompt length probed". The subjects a new user tried: a label-mean model (never k-NN), a model that
returns zeros (nothing), least squares for M ≤ 5 and the label mean beyond (not least squares),
scikit-learn's KNeighborsRegressor(3) (raises for M < 3: those lengths skipped and listed), float32
and NumPy outputs (working precision from the output dtype). Small sizes (--quick: 1000 prompts)."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.cli_helpers import invoke

ACCEPT = ("--lambda", "1,2", "--N", "10", "--M", "10", "--quick", "--no-progress")

SUBJECTS = '''
import numpy as np
import torch


def label_mean(xs, ys, xq):
    return ys.mean(1)


def zeros(xs, ys, xq):
    return torch.zeros(xs.shape[0], dtype=torch.float64)


def zeros_numpy32(xs, ys, xq):
    return np.zeros(xs.shape[0], dtype=np.float32)


def least_squares(xs, ys, xq):
    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)
    return (xq.unsqueeze(-2) @ w).reshape(-1)


def least_squares_float32(xs, ys, xq):
    return least_squares(xs.float(), ys.float(), xq.float())


def piecewise(xs, ys, xq):
    return least_squares(xs, ys, xq) if xs.shape[1] <= 5 else ys.mean(1)


def sklearn_knn3(xs, ys, xq):
    from sklearn.neighbors import KNeighborsRegressor

    return np.array([KNeighborsRegressor(3).fit(X, y).predict(q[None])[0]
                     for X, y, q in zip(xs.numpy(), ys.numpy(), xq.numpy())])


def nan_at_20(xs, ys, xq):
    out = ys.mean(1)
    if xs.shape[1] == 20:
        out[0] = float("nan")
    return out
'''


@pytest.fixture(scope="module")
def subjects(tmp_path_factory):
    p = tmp_path_factory.mktemp("icl_subjects") / "subjects.py"
    p.write_text(textwrap.dedent(SUBJECTS))
    return p


def run(subjects, name, *extra):
    code, out, err = invoke("check", "icl", "--model", f"{subjects}:{name}", *ACCEPT, "--json", "-", *extra)
    assert "Traceback" not in err, err
    return code, json.loads(out)


@pytest.fixture(scope="module")
def subjects_in_process():
    """:data:`SUBJECTS` imported into this process."""
    import types

    mod = types.ModuleType("tverify_tests_icl_subjects")
    exec(compile(textwrap.dedent(SUBJECTS), "subjects.py", "exec"), mod.__dict__)
    return mod


def judged(subjects_in_process, name, **kw):
    """What :func:`run` gives (the same options: the exit code and the JSON document, identical), through the API
    in this process (``isolate=False``): these tests are of the identification, not of the check's own process
    (a child per run, ~0.9 CPU s); the CLI's: :func:`run`, in the tests that call it."""
    import proofs_checks

    r = proofs_checks.check_icl_model(getattr(subjects_in_process, name), lambdas=[1.0, 2.0], N=10, M=10, mode="quick",
                                      isolate=False, **kw)
    return r.exit_code, r.to_json()


def dist(doc, alg, M):
    row = next(r for r in doc["per_M"] if r["M"] == M)
    return row["algorithms"][alg]


def test_label_mean_is_identified_as_label_mean_never_knn(subjects_in_process):
    code, doc = judged(subjects_in_process, "label_mean")
    assert code == 0 and doc["identified"] == "label_mean" and doc["closest_algorithm"] == "label_mean"
    # k-NN (k = 3) coincides for M ≤ 3 but is far at M = 10: beyond its tolerance there
    assert dist(doc, "knn", 3)["distance"] < 1e-20
    assert dist(doc, "knn", 10)["distance"] > 0.3 and dist(doc, "knn", 10)["status"] == "fail"


@pytest.mark.parametrize("name", ["zeros", "zeros_numpy32"])
def test_zeros_model_is_identified_as_nothing(subjects_in_process, name):
    code, doc = judged(subjects_in_process, name)
    assert code == 1 and doc["outcome"] == "mismatch" and doc["identified"] is None
    assert "none of the reference algorithms" in doc["verdict"] and doc["closest_algorithm"] is not None
    if name == "zeros_numpy32":
        assert doc["output_dtype"] == ["float32"] and doc["work_dtype"] == "float32"


def test_piecewise_model_is_not_least_squares(subjects_in_process):
    code, doc = judged(subjects_in_process, "piecewise")
    assert code == 1 and doc["identified"] is None
    for M in (10, 20):
        assert dist(doc, "least_squares", M)["status"] == "fail"
        assert dist(doc, "least_squares", M)["distance"] > dist(doc, "knn", M)["distance"]


def test_sklearn_knn3_runs_with_small_lengths_skipped(subjects):
    code, doc = run(subjects, "sklearn_knn3", "--prompts", "64")  # a Python loop over scikit-learn fits per prompt
    assert code == 0 and doc["identified"] == "knn"
    assert [s["M"] for s in doc["skipped_lengths"]] == [1, 2]
    assert "n_neighbors" in doc["skipped_lengths"][0]["error"]
    assert doc["probe"]["M_values"] == [3, 4, 5, 10, 20]


def test_float32_least_squares_is_identified_as_declared(subjects_in_process):
    code, doc = judged(subjects_in_process, "least_squares_float32", compute_dtype="float32")
    assert code == 0 and doc["identified"] == "least_squares" and doc["work_dtype"] == "float32"
    prec = doc["precision_as_declared"]
    assert prec["status"] == "pass" and "computes in float32 as declared" in prec["detail"], prec


def test_float32_least_squares_undeclared_fails_precision_as_declared(subjects):
    """Issue 42: undeclared, the model is judged at the inputs' float64; float32 predictions fail
    precision_as_declared (named in the verdict line with float32); the identification is still made,
    at float32, and said."""
    code, doc = run(subjects, "least_squares_float32")
    assert code == 1 and doc["outcome"] == "mismatch", doc["verdict"]
    assert "violates: precision_as_declared (it computes in float32, not float64)" in doc["verdict"]
    assert "at float32: ok" in doc["verdict"] and "least_squares" in doc["verdict"]
    assert "--compute-dtype float32" in doc["decision"]["suggestion"]
    assert doc["precision_as_declared"]["status"] == "fail" and doc["work_dtype"] == "float32"


def test_float64_least_squares_passes_precision_as_declared(subjects_in_process):
    code, doc = judged(subjects_in_process, "least_squares")
    assert code == 0 and doc["precision_as_declared"]["status"] == "pass", doc["precision_as_declared"]
    assert doc["work_dtype"] == "float64"


def test_nan_at_one_length_is_a_finding(subjects_in_process):
    code, doc = judged(subjects_in_process, "nan_at_20")
    assert code == 1 and "NaN" in doc["verdict"] and doc["identified"] is None


def test_report_has_per_M_curves(subjects, tmp_path):
    code, out, err = invoke("check", "icl", "--model", f"{subjects}:least_squares", *ACCEPT,
                            "--report", str(tmp_path / "rep"))
    assert code == 0, err
    assert (tmp_path / "rep" / "figures" / "distance_per_M.png").is_file()
    assert (tmp_path / "rep" / "report.json").is_file()


def test_float32_cast_back_is_found_as_float32(subjects, tmp_path):
    """A float64 model computing in float32 and casting back: undeclared, precision_as_declared fails
    naming float32 (exit 1); declared float32, ok (exit 0)."""
    p = tmp_path / "cast.py"
    p.write_text(textwrap.dedent(SUBJECTS) + "\n\ndef ls_cast_back(xs, ys, xq):\n"
                 "    return least_squares_float32(xs, ys, xq).double()\n")
    code, out, err = invoke("check", "icl", "--model", f"{p}:ls_cast_back", *ACCEPT, "--json", "-")
    doc = json.loads(out)
    assert code == 1 and "precision_as_declared (it computes in float32, not float64)" in doc["verdict"], doc["verdict"]
    assert doc["work_dtype"] == "float32" and doc["output_dtype"] == ["float32"]
    code, out, err = invoke("check", "icl", "--model", f"{p}:ls_cast_back", *ACCEPT, "--compute-dtype", "float32")
    assert code == 0 and "verdict: ok" in out and "precision_as_declared: pass" in out, out


def test_compute_dtype_goes_with_model_and_is_one_line():
    code, out, err = invoke("check", "icl", "--lambda", "1,2", "--N", "10", "--compute-dtype", "float32")
    assert code == 2 and "--compute-dtype goes with --model" in err, err
    code, out, err = invoke("check", "icl", "--model", "x.py:f", "--lambda", "1,2", "--N", "10",
                            "--compute-dtype", "float8")
    assert code == 2 and "--compute-dtype: must be one of" in err and "Traceback" not in err, err


def test_api_compute_dtype_is_the_flag():
    """The API's ``compute_dtype=`` is ``--compute-dtype``: a float32 model undeclared is a mismatch naming
    precision_as_declared, declared it is ok; a bad value is the flag's line in the keyword's words."""
    import torch

    import proofs_checks
    from theory.validation import InputError

    def ls32(xs, ys, xq):
        w = torch.linalg.pinv(xs.float()) @ ys.float().unsqueeze(-1)
        return (xq.float().unsqueeze(-2) @ w).reshape(-1)

    kw = dict(lambdas="1,2", N=10, mode="quick", isolate=False, M_values=[2, 10])
    r = proofs_checks.check_icl_model(ls32, **kw)
    assert r.outcome == "mismatch" and "precision_as_declared (it computes in float32" in r.verdict.summary
    r = proofs_checks.check_icl_model(ls32, compute_dtype="float32", **kw)
    assert r.outcome == "ok" and r.to_json()["precision_as_declared"]["status"] == "pass", str(r)
    with pytest.raises(InputError, match="compute_dtype"):
        proofs_checks.check_icl_model(ls32, compute_dtype="float8", **kw)
