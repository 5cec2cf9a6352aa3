"""Issue 43: the last statements found false as written, each reproduced against its old wording, and
the corrected statements (and counterexamples measuring the clause's own criterion) pinned."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
import torch

from numerics import att_svm as ns
from numerics import attention as na
from numerics import hopfield as nh
from numerics.att_svm import AttSVMInstance
from proofs_checks.context import RunContext
from proofs_checks.registry import get_claim
from proofs_checks.runner import run_counterexample

from proofs_checks.claims import load_all  # noqa: E402

load_all()  # the built-in claims registered as built-in first: a claim module imported by a test alone was refused as a plugin's


def _clause(cid, name):
    return next(c for c in get_claim(cid).clauses if c.name == name)


# --------------------------------------------------------------------------------------------
# svm.reg_path, KQ_path: the nuclear Att-SVM can have a segment of minimisers


def _segment_instance():
    """n = T = d = 2, v = (1, 1)/√2, y = (1, 1), z_k = e_k, x_{1,·} = (±½, 0), x_{2,·} = (0, ±½): the
    constraints are W₁₁ ≥ 1, W₂₂ ≥ 1."""
    X = np.array([[[0.5, 0.0], [-0.5, 0.0]], [[0.0, 0.5], [0.0, -0.5]]])
    z, y, v = np.eye(2), np.ones(2), np.ones(2) / math.sqrt(2)
    gamma = y[:, None] * np.einsum("ntd,d->nt", X, v)
    return AttSVMInstance(X, z, y, v, np.argmax(gamma, 1), gamma)


def test_reg_path_nuclear_minimisers_form_a_segment_old_wording_false():
    inst = _segment_instance()
    nu = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc")
    assert abs(nu.value - 2.0) < 1e-8
    minimisers = [np.array([[1.0, b], [b, 1.0]]) for b in (-1.0, 0.0, 1.0)]
    for W in minimisers:  # feasible (margins ≥ 1) and optimal (nuclear norm 2)
        assert np.einsum("kij,ij->k", nu.A, W).min() >= 1 - 1e-12
        assert abs(np.linalg.norm(W, "nuc") - nu.value) < 1e-8
    corr = ns.correlation(minimisers[0], minimisers[2])
    assert corr < 0.5  # two optimal directions far apart: "W^mm_⋆ = argmin ‖W‖_⋆" names no single limit
    kq = _clause("svm.reg_path", "KQ_path")
    assert r"\mathcal W^{mm}_\star" in kq.latex and "set" in kq.latex  # the corrected clause: the set of minimisers


def test_reg_path_check_measures_the_set_criterion():
    """The check scores the path's end by its margin-normalised nuclear norm against the optimum, so any
    minimiser on the segment passes, and the Frobenius solution (a wrong norm) does not."""
    from proofs_checks.claims.att_svm_dynamics import nuclear_excess

    inst = _segment_instance()
    nu = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc")
    for b in (-0.7, 0.0, 0.9):
        assert nuclear_excess(np.array([[3.0, 3 * b], [3 * b, 3.0]]), nu) < 1e-9
    assert nuclear_excess(-np.eye(2), nu) == math.inf  # a direction violating the constraints


# --------------------------------------------------------------------------------------------
# svm.gd_direction, local: "for each μ > 0" is false for large μ


def test_gd_direction_local_for_each_mu_is_false():
    from proofs_checks.claims._att_svm_common import _cos, _inst

    inst = _inst(4, 5, 8, 0, "local", 0.5)
    Wl = ns.solve_att_svm(inst.X, inst.z, inst.local).W
    Wo = ns.solve_att_svm(inst.X, inst.z, inst.opt).W
    c = float(_cos(Wo, Wl))
    assert c < -0.5  # μ = 1 − c ≈ 1.51: the cone {corr(W, W^mm_local) ≥ 1 − μ} contains the ray of W^mm_opt
    W0 = 40 * np.linalg.norm(Wl) * Wo / np.linalg.norm(Wo)  # ‖W₀‖ as large as any R_μ we care to name
    r = ns.train(inst, method="gd", lr=1.0, iters=300, B=1, init=W0, seed=0)
    assert float(_cos(r.W[0], Wo)) > 0.999 and float(_cos(r.W[0], Wl)) < 0  # GD ends at opt, not at local
    local = _clause("svm.gd_direction", "local")
    assert "for each μ > 0 there is" not in local.scope and "there are some μ > 0" in local.scope


# --------------------------------------------------------------------------------------------
# svm.fast_rates: "GD needs ≥ 5× their iterations" depends on GD's step size


def test_fast_rates_gd_step_size_decides_the_ratio():
    from proofs_checks.claims._att_svm_common import _orth_inst

    inst = _orth_inst(0)
    Wmm = ns.solve_att_svm(inst.X, inst.z, inst.opt).W
    k = {}
    for method, lr in (("ngd", 0.1), ("gd", 1.0), ("gd", 100.0)):
        r = ns.train(inst, method=method, lr=lr, iters=400, B=2, seed=0, init=0.01, targets={"mm": Wmm})
        k[(method, lr)] = int(np.max(r.iterations_to(0.99, "mm")))
    assert k[("gd", 1.0)] >= 5 * k[("ngd", 0.1)]  # the regime the corrected clause names
    assert k[("gd", 100.0)] < k[("ngd", 0.1)]  # the old wording (no step size) is false
    reach = _clause("svm.fast_rates", "reach")
    assert r"\eta=1" in reach.latex


# --------------------------------------------------------------------------------------------
# attn.mhsa_sum_equals_concat: torch's biases (input biases per head, the output bias once)


def test_mhsa_torch_clause_with_random_biases():
    torch.manual_seed(0)
    E, H, N = 8, 2, 5
    mha = torch.nn.MultiheadAttention(E, H, bias=True, batch_first=True, dtype=torch.float64)
    assert float(mha.in_proj_bias.abs().max()) == 0.0  # torch's init: the old check compared zero biases
    with torch.no_grad():
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    X = np.random.default_rng(0).normal(size=(2, N, E))
    with torch.no_grad():
        ref = mha(torch.tensor(X), torch.tensor(X), torch.tensor(X), need_weights=False)[0].numpy()
    p = na.mha_to_concat(mha)
    old = na.mhsa_concat(X, **{k: v for k, v in p.items() if k not in ("b_q", "b_k", "b_v")})
    assert np.abs(old - ref).max() > 0.1  # Concat·W_O + b, as the clause read: misses torch
    assert np.abs(na.mhsa_concat(X, **p) - ref).max() < 1e-13  # input biases per head, output bias once
    torch_clause = _clause("attn.mhsa_sum_equals_concat", "torch_equality")
    assert "b_{Q,h}" in torch_clause.latex and "random" in torch_clause.scope
    assert any(m.name == "from_torch_input_biases_dropped" for m in get_claim("attn.mhsa_sum_equals_concat").mutants)


# --------------------------------------------------------------------------------------------
# approx.contextual_mapping: the same-token bound holds between contexts of the same size


def test_contextual_mapping_bound_needs_sets_of_the_same_size():
    from theory.approx import derive_contextual_margin

    d = derive_contextual_margin()
    S = d.facts["symbols"]
    x, K = sp.Rational(1, 8), 5
    bound = d.result["pair_bound"].subs({S["x"]: x, S["m"]: K - 2})  # worst pair, B(x)/(γδ) at x = ρ

    def D(gaps):
        return sum(g * x**g for g in gaps) / (1 + sum(x**g for g in gaps))

    sep = abs(D({1}) - D({1, 4}))  # ids {4, 3} against {4, 3, 0}: gap sets {1} and {1, 4}
    assert float(sep) == pytest.approx(8.44e-4, rel=1e-2) and float(bound) == pytest.approx(2.92e-3, rel=1e-2)
    assert sep < bound  # "different sets" (of different sizes) is false
    assert "same size" in _clause("approx.contextual_mapping", "same_token").latex


# --------------------------------------------------------------------------------------------
# hop.modern_capacity: the beta_radius counterexample measures the stated criterion 0.1·√d


def test_modern_capacity_counterexample_measures_the_stated_criterion():
    g = torch.Generator().manual_seed(0)
    P = torch.randn(256, 2, 16, generator=g, dtype=torch.float64)
    P = P / P.norm(dim=-1, keepdim=True)  # the old instance: radius 1, β = 1
    f = nh.modern_update(P, P, 1.0)
    assert float(((f - P).norm(dim=-1) <= 0.1 * math.sqrt(16)).double().mean()) == 1.0  # all "retrieved" at 0.1√d
    o = run_counterexample(get_claim("hop.modern_capacity"), "beta_radius", RunContext(mode="quick"))
    cx = o.result.details["counterexample"]
    assert o.status == "failed" and "0.1·√d" in cx["shows"], cx
