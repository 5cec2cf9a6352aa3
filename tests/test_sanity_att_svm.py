"""``tverify check att-svm``: three-outcome verdicts (not converged is inconclusive, exit 3),
budget sentinels never shown as numbers, --seed, --json PATH|-, strict data loading (one line,
exit 2), memory guard. In-process through ``proofs_checks.cli.main``; small sizes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from numerics import att_svm as ns
from tests.cli_helpers import invoke, one_line_error
from proofs_checks.sanity import att_svm as satt


def run(*args: str) -> tuple[int, str, str]:
    return invoke("check", "att-svm", *args)


@pytest.fixture(scope="module")
def inst():
    return ns.make_instance(3, 4, 6, seed=5, setting="global")


@pytest.fixture()
def good(tmp_path, inst):
    p = tmp_path / "d.npz"
    np.savez(p, X=inst.X, z=inst.z, y=inst.y, v=inst.v)
    return str(p)


def test_converged_run_is_ok(good):
    code, out, _ = run("--data", good, "--quick", "--no-progress")
    assert code == 0 and "verdict: ok: converges to W^mm" in out
    assert "iterations to 0.99 with W^mm: " in out and "not reached" not in out


def test_not_converged_is_inconclusive_exit_3(good):
    """--iters 20: the direction is far from W^mm; it used to exit 0. Now inconclusive, exit 3, the
    sentinel shown as words (and null in JSON), with a number of iterations to try."""
    code, out, _ = run("--data", good, "--iters", "20", "--seeds", "2", "--no-progress")
    assert code == 3 and "verdict: inconclusive" in out and "not converged within 20 iterations" in out
    assert "not reached within 20 iterations" in out and "2001" not in out and ": 21" not in out
    code, out, _ = run("--data", good, "--iters", "20", "--seeds", "2", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["outcome"] == "inconclusive" and doc["ok"] is False
    assert doc["training"]["iterations_to_level"] == [None, None] and doc["training"]["iterations_to_level_max"] is None
    assert "--iters" in doc["decision"]["suggestion"] and doc["decision"]["numbers"]["iterations_needed_estimate"] > 20


def test_stationary_direction_off_the_svm_is_a_mismatch(inst):
    """A direction that has stopped turning (W_half ∥ W_K, selection unchanged) while its
    correlation with W^mm stays below the level contradicts the theory: mismatch."""
    fro = ns.solve_att_svm(inst.X, inst.z, inst.opt)
    rng = np.random.default_rng(0)
    W = fro.W + 0.8 * np.linalg.norm(fro.W) * rng.normal(size=fro.W.shape) / fro.W.shape[0]
    sel = np.broadcast_to(inst.opt, (1, len(inst.opt))).copy()
    tr = {"W": W[None] * 100, "W_half": W[None] * 50, "selected": sel, "selected_half": sel}
    v, per_seed = satt._verdict(ns, inst, fro, tr, level=0.99, iters=1000)
    assert per_seed[0]["corr"] < 0.99 and per_seed[0]["stationary"]
    assert v.outcome == "mismatch" and v.exit_code == 1 and "turned by" in v.criterion
    # the same end point still turning: inconclusive
    tr["W_half"] = (W + 0.3 * fro.W)[None] * 50
    v, _ = satt._verdict(ns, inst, fro, tr, level=0.99, iters=1000)
    assert v.outcome == "inconclusive"


def test_uncertified_svm_is_inconclusive(inst):
    fro = ns.solve_att_svm(inst.X, inst.z, inst.opt)
    fake = SimpleNamespace(W=fro.W, max_residual=lambda: 1e-3)
    sel = np.broadcast_to(inst.opt, (1, len(inst.opt))).copy()
    tr = {"W": fro.W[None], "W_half": fro.W[None], "selected": sel, "selected_half": sel}
    v, _ = satt._verdict(ns, inst, fake, tr, level=0.99, iters=10)
    assert v.outcome == "inconclusive" and "not certified" in v.reasons[0]


def test_segmented_training_is_one_run(inst):
    fro = ns.solve_att_svm(inst.X, inst.z, inst.opt)
    seen = []
    tr = satt._train_segmented(ns, inst, fro.W, lr=0.1, iters=60, seeds=3, seed=7, device="cpu", prog=seen.append,
                               n_segments=7)
    one = ns.train(inst, method="ngd", lr=0.1, iters=60, B=3, init=0.01, seed=7, opt=inst.opt,
                   targets={"fro": fro.W})
    assert np.allclose(tr["corr"], one.corr["fro"], rtol=0, atol=1e-10) and np.allclose(tr["W"], one.W, atol=1e-10)
    half = ns.train(inst, method="ngd", lr=0.1, iters=30, B=3, init=0.01, seed=7, opt=inst.opt, targets={"fro": fro.W})
    assert np.allclose(tr["W_half"], half.W, atol=1e-10)
    assert seen[-1] == 1.0 and len(seen) == 8  # 7 segments, one split at the half-way point


def test_seed_option_changes_the_initialisation(good):
    docs = []
    for s in ("1", "2"):
        code, out, _ = run("--data", good, "--iters", "5", "--seeds", "2", "--seed", s, "--json", "-")
        docs.append(json.loads(out))
    assert docs[0]["training"]["corr_curve"] != docs[1]["training"]["corr_curve"]
    assert docs[0]["inputs"]["seed"] == 1


def test_iterations_to_has_no_sentinel():
    assert satt.iterations_to(np.array([[0.1, 0.995], [0.2, 0.999]]), 0.99) == [None, 1]


@pytest.mark.parametrize("kind", ["object", "complex", "nan", "tied", "labels", "shape", "text", "missing", "dir"])
def test_bad_data_one_line_exit_2(tmp_path, inst, kind):
    X, z, y, v = inst.X, inst.z, inst.y, inst.v
    p = tmp_path / "bad.npz"
    if kind == "object":
        np.savez(p, X=X.astype(object), z=z, y=y, v=v)
    elif kind == "complex":
        np.savez(p, X=X.astype(complex), z=z, y=y, v=v)
    elif kind == "nan":
        X = X.copy()
        X[0, 0, 0] = np.nan
        np.savez(p, X=X, z=z, y=y, v=v)
    elif kind == "tied":
        X = X.copy()
        X[0, (inst.opt[0] + 1) % 4] = X[0, inst.opt[0]]
        np.savez(p, X=X, z=z, y=y, v=v)
    elif kind == "labels":
        np.savez(p, X=X, z=z, y=2 * y, v=v)
    elif kind == "shape":
        np.savez(p, X=X, z=z[:2], y=y, v=v)
    elif kind == "text":
        p.write_text("not an archive")
    elif kind == "dir":
        p = tmp_path
    frag = {"object": "holds Python objects", "complex": "is complex", "nan": "non-finite", "tied": "share the top score",
            "labels": "±1", "shape": "z must have shape", "text": "not a .npz archive", "missing": "file not found",
            "dir": "is a directory"}[kind]
    line = one_line_error(*run("--data", str(p), "--quick")[::2])
    assert line.startswith("tverify: error: --data") and frag in line, line


def test_memory_guard_and_options(good, tmp_path):
    line = one_line_error(*run("--data", good, "--iters", "10000000", "--seeds", "4096")[::2])
    assert "need about" in line and "training curves" in line and "--max-memory" in line
    assert "mutually exclusive" in one_line_error(*run("--data", good, "--quick", "--full")[::2])
    assert "--device" in one_line_error(*run("--data", good, "--device", "tpu")[::2])
    assert "folder" in one_line_error(*run("--data", good, "--json", str(tmp_path))[::2])
    target = tmp_path / "out.json"
    code, out, _ = run("--data", good, "--iters", "20", "--seeds", "2", "--json", str(target), "--no-progress")
    doc = json.loads(target.read_text())
    assert code == doc["decision"]["exit_code"] == 3 and "verdict: inconclusive" in out
    assert doc["inputs"]["iters"] == 20 and doc["resources"]["memory_bytes"] > 0


@pytest.mark.parametrize("opt, value", [("--lr", "nan"), ("--lr", "inf"), ("--level", "nan"), ("--level", "1"),
                                        ("--iters", "0"), ("--seeds", "abc"), ("--seed", "-1")])
def test_bad_option_values_one_line(good, opt, value):
    assert opt in one_line_error(*run("--data", good, opt, value)[::2])


# ------------------------------------------------------------------------------------------------
# --weights: your trained attention against the Att-SVM


@pytest.fixture(scope="module")
def fro(inst):
    return ns.solve_att_svm(inst.X, inst.z, inst.opt)


def test_weights_aligned_with_w_mm_is_ok(good, tmp_path, fro):
    p = tmp_path / "own_W.npz"
    np.savez(p, W=40 * fro.W)
    code, out, _ = run("--data", good, "--weights", str(p), "--json", "-")
    doc = json.loads(out)
    assert code == 0 and doc["weights"]["selected_is_optimal"] and doc["weights"]["corr_with_W_mm_fro"] > 0.999999
    rows = {r["name"]: r for r in doc["properties"]}
    assert rows["corr_with_W_mm_fro"]["status"] == "pass" and rows["corr_with_W_mm_nuc"]["status"] == "info"


def test_weights_kq_compared_with_nuclear_and_local(good, tmp_path, inst):
    nuc = ns.solve_att_svm(inst.X, inst.z, inst.opt, "nuc")
    U, s, Vt = np.linalg.svd(nuc.W)
    p = tmp_path / "own_KQ.npz"
    np.savez(p, K=50 * U * s, Q=Vt.T)  # K Qᵀ = 50 W^mm_*
    code, out, _ = run("--data", good, "--weights", str(p))
    assert code == 0 and "W = K Qᵀ" in out and "aligned with W^mm_*" in out
    rng = np.random.default_rng(1)
    p2 = tmp_path / "own_far.npz"
    np.savez(p2, W=rng.normal(size=(6, 6)))
    code, out, _ = run("--data", good, "--weights", str(p2), "--report", str(tmp_path / "rep"))
    assert code == 3 and "inconclusive" in out and (tmp_path / "rep" / "report.md").exists()
    # no iterations to draw for given weights: the report still has its figure (correlations, saturation)
    assert (tmp_path / "rep" / "figures" / "weights_saturation.png").is_file()


@pytest.mark.parametrize("arrays, frag", [({"W": np.ones((5, 5))}, "W must be (6, 6)"),
                                          ({"K": np.ones((6, 2)), "Q": np.ones((6, 3))}, "K and Q must be (d, m)"),
                                          ({"A": np.ones((6, 6))}, "no W and no K, Q")])
def test_weights_shapes_disagreeing_with_data_one_line(good, tmp_path, arrays, frag):
    p = tmp_path / "own_bad_w.npz"
    np.savez(p, **arrays)
    line = one_line_error(*run("--data", good, "--weights", str(p))[::2])
    assert line.startswith("tverify: error: --weights") and frag in line, line


def test_weights_at_the_edges_of_float64(good, tmp_path, inst, fro):
    """A random W of subnormal entries had ‖W‖ = 0 and correlation inf: "aligned with W^mm" (exit 0).
    The direction is now taken on W / max|W|; a W whose logits overflow is one line, exit 2."""
    p = tmp_path / "w.npz"
    np.savez(p, W=1e-318 * np.random.default_rng(3).normal(size=fro.W.shape))
    code, out, _ = run("--data", good, "--weights", str(p), "--json", "-")
    doc = json.loads(out)
    assert code == 3 and not doc["ok"] and abs(doc["weights"]["corr_with_W_mm_fro"]) < 0.9
    a, b = inst.X[0, 0] * 4 / np.linalg.norm(inst.X[0, 0]), inst.z[0] / np.linalg.norm(inst.z[0])
    big = np.outer(a / np.abs(a).max(), b / np.abs(b).max()) * 1e308  # finite; x_0ᵀ W z_0 ≥ 4e308
    np.savez(p, W=big)
    line = one_line_error(*run("--data", good, "--weights", str(p))[::2])
    assert "logits x_tᵀ W z overflow float64" in line


# issue 24: saturated weights get the saturation named and the advice that fits, not "train longer"


def _perturbed(fro, scale, seed=1):
    """scale·(2 W^mm + ‖W^mm‖ R), R a unit direction orthogonal to W^mm: correlation 2/√5 ≈ 0.894."""
    W = fro.W
    R = np.random.default_rng(seed).normal(size=W.shape)
    R -= (R * W).sum() / (W * W).sum() * W
    R /= np.linalg.norm(R)
    return scale * (2 * W + np.linalg.norm(W) * R)


@pytest.mark.parametrize("scale, saturated", [(200.0, True), (0.5, False)])
def test_saturated_weights_name_the_saturation(good, tmp_path, inst, fro, scale, saturated):
    W = _perturbed(fro, scale)
    logits = np.einsum("ntd,de,ne->nt", inst.X, W, inst.z)
    assert np.all(logits.argmax(1) == inst.opt)  # the optimal tokens selected: only the direction is off
    p = tmp_path / "w.npz"
    np.savez(p, W=W)
    code, out, _ = run("--data", good, "--weights", str(p), "--json", "-")
    doc = json.loads(out)
    assert code == 3 and doc["outcome"] == "inconclusive"
    assert doc["weights"]["corr_with_W_mm_fro"] == pytest.approx(2 / 5**0.5, abs=1e-9)
    sug = doc["decision"]["suggestion"]
    assert doc["weights"]["saturation"]["saturated_float64"] is saturated
    if saturated:
        assert "saturated" in doc["verdict"] and "train longer" not in sug
        assert "stable direction" in sug and "float64" in sug and "logit scale" in sug
    else:
        assert "train longer" in sug


def test_saturation_helper_matches_float64_softmax():
    logits = np.array([[0.0, 30.0], [0.0, 40.0], [0.0, 800.0]])
    s = satt.saturation(logits, np.array([1, 1, 1]))
    import torch

    one_hot = torch.softmax(torch.as_tensor(logits), -1)[:, 1] == 1.0
    assert s["sequences_saturated_float64"] == int(one_hot.sum()) == 2 and not s["gradient_underflows"]
    assert satt.saturation(logits[2:], np.array([1]))["gradient_underflows"]  # e^-800 < 2.2e-308 in every sequence


def test_command_and_api_refuse_cuda_with_the_same_line(good, inst):
    """Validation once at the edge (issue 42): --device and device= go through options.require_device;
    the API says the command's line in its keyword's words."""
    from numerics.torch_utils import cuda_available

    import proofs_checks
    from proofs_checks.api_args import _keyword_words
    from theory.validation import InputError

    if cuda_available():
        pytest.skip("this machine has CUDA: --device cuda is not refused")
    cli = one_line_error(*run("--data", good, "--device", "cuda")[::2]).removeprefix("tverify: error: ")
    with pytest.raises(InputError) as exc:
        proofs_checks.check_att_svm((inst.X, inst.z, inst.y, inst.v), device="cuda")
    assert str(exc.value) == _keyword_words(cli, proofs_checks.check_att_svm), (cli, str(exc.value))


@pytest.mark.parametrize("args, kwargs", [
    (("--iters", "0"), {"iters": 0}),
    (("--seeds", "5000"), {"seeds": 5000}),
    (("--lr", "-1"), {"lr": -1.0}),
    (("--lr", "inf"), {"lr": float("inf")}),
    (("--level", "1"), {"level": 1.0}),
])
def test_command_and_api_refuse_ranges_with_the_same_line(good, inst, args, kwargs):
    """--iters/--seeds/--lr/--level and their keywords go through sanity.att_svm's rules (issue 42)."""
    import proofs_checks
    from proofs_checks.api_args import _keyword_words
    from theory.validation import InputError

    cli = one_line_error(*run("--data", good, *args)[::2]).removeprefix("tverify: error: ")
    with pytest.raises(InputError) as exc:
        proofs_checks.check_att_svm((inst.X, inst.z, inst.y, inst.v), **kwargs)
    assert str(exc.value) == _keyword_words(cli, proofs_checks.check_att_svm), (cli, str(exc.value))
