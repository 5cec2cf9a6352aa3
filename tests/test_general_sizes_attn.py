"""Derivations for every size (issue 34) of attn.softmax_simplex, attn.convex_combination,
attn.causal_mask, attn.mhsa_sum_equals_concat, lora.low_rank and rnn.bptt: each claim's derivation is
the general one; its obligations hold, it inherits its fixed-size derivation and checks that the
general result specialised to those sizes equals it; the clauses say ``derived`` (keeping the fixed
sizes as ``derived_at``); the general closed forms agree with independent fixed-size routes at sizes
the fixed derivations never saw; and a symbolic check rejects a form that is wrong only at a size
other than the fixed one."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from numerics import attention as na
from proofs_checks.context import RunContext
from proofs_checks.registry import get_claim
from theory import attention as ta
from theory import lora as tl
from theory import rnn as tr

#: claim -> (the general derivation, the fixed derivation's prefix, the cross-check obligation,
#: the clauses now derived for symbolic sizes)
GENERAL = {
    "attn.softmax_simplex": (ta.derive_softmax_simplex_general, "at_T3", "general_at_T3_equals_fixed",
                             {"open_interval", "sums_to_one", "jacobian"}),
    "attn.convex_combination": (ta.derive_convex_combination_general, "at_T3_Dv2", "general_at_T3_Dv2_equals_fixed",
                                {"weights_simplex", "in_hull"}),
    "attn.causal_mask": (ta.derive_causal_mask_general, "at_T3", "general_at_T3_equals_fixed",
                         {"lower_triangular", "row_stochastic", "blind_to_future"}),
    "attn.mhsa_sum_equals_concat": (ta.derive_mhsa_sum_concat_general, "at_N2_D2_K1_M2",
                                    "general_at_N2_D2_K1_M2_equals_fixed", {"sum_equals_concat", "concat_width"}),
    "lora.low_rank": (tl.derive_lora_general, "at_n2_d2_k2_r1", "general_at_n2_d2_k2_r1_equals_fixed",
                      {"init_equals_base", "gradients", "rank_le_r", "rank_generic", "merge", "trainable_count"}),
    "rnn.bptt": (tr.derive_bptt_general, "at_T2", "general_at_T2_equals_fixed", {"bptt_recursion", "projection_is_average"}),
}


@pytest.mark.parametrize("cid", sorted(GENERAL))
def test_general_derivation_obligations_hold(cid):
    fn, prefix, cross, _ = GENERAL[cid]
    D = get_claim(cid).derivation()
    assert D is fn()  # the claim's derivation is the general one
    names = [o.name for o in D.obligations]
    assert cross in names, names
    assert any(n.startswith(prefix + ".") for n in names), f"{cid}: the fixed-size derivation is not inherited"
    for r in D.check_obligations():
        assert r.passed, (cid, r.name, r.method, r.residual)
    assert D.result_derived


@pytest.mark.parametrize("cid", sorted(GENERAL))
def test_clause_evidence_is_derived(cid):
    derived = GENERAL[cid][3]
    clauses = {c.name: c for c in get_claim(cid).clauses}
    for name in derived:
        c = clauses[name]
        assert c.evidence == "derived", (cid, name, c.evidence)
        assert "derivation" in c.checks or name == "projection_is_average"
    # the fixed sizes stay visible where a fixed-size derivation existed
    kept = [c for c in clauses.values() if c.name in derived and "derived_at" in dict(c.also)]
    assert kept or cid == "rnn.bptt"


def test_bptt_tied_is_sum_stays_at_scalar_widths():
    c = {c.name: c for c in get_claim("rnn.bptt").clauses}["tied_is_sum"]
    assert c.evidence == "derived_at" and "d_x = d_h = d_y = 1" in c.scope and "every T" in c.scope


def test_cross_check_rejects_a_wrong_specialisation():
    """The cross-check is real: a Jacobian off in one entry at T = 3 fails against the fixed one."""
    from theory.derivation import Obligation

    fixed = ta.derive_softmax_simplex(3)
    _, P, _, J = ta.softmax_simplex_at(3)
    wrong = J.copy()
    wrong[0, 1] = -wrong[0, 1]
    res = Obligation("x", wrong.subs(dict(zip(P, fixed.facts["p_symbols"]))) - fixed.result).evaluate()
    assert res.status == "fails"


@pytest.mark.parametrize("T", [1, 2, 5])
def test_softmax_and_causal_general_at_new_sizes(T):
    l, p, soft, J = ta.softmax_simplex_at(T)
    brute = [sp.exp(li) / sum(sp.exp(lj) for lj in l) for li in l]
    assert all(sp.simplify(a - b) == 0 for a, b in zip(soft, brute))
    for t in range(T):
        for s in range(T):
            assert sp.simplify(J[t, s].subs(dict(zip(p, brute))) - sp.diff(brute[t], l[s])) == 0
    L, A = ta.causal_mask_at(T)
    Ln = np.random.default_rng(T).normal(size=(T, T))
    An = np.array(sp.lambdify([list(L)], A, "numpy")(list(Ln.ravel())), dtype=float)
    ref = na.softmax(np.where(na.causal_mask(T), Ln, -np.inf))
    assert np.abs(An - ref).max() < 1e-14


def test_open_interval_needs_two_tokens():
    D = ta.derive_softmax_simplex_general()
    assert D.facts["at_T1"] == 0  # 1 − S_1 = 0 at T = 1: the hypothesis T ≥ 2 is used


def test_mhsa_lora_bptt_general_at_new_sizes():
    rng = np.random.default_rng(0)
    N, D, K, M = 3, 2, 2, 3
    sy, out = ta.mhsa_sum_concat_at(N, D, K, M)
    X = rng.normal(size=(N, D))
    Wq, Wk, Wv = (rng.normal(size=(M, D, K)) for _ in range(3))
    Wo = rng.normal(size=(M * K, D))
    f = sp.lambdify([list(sy["X"])] + [list(w) for w in sy["W_Q"] + sy["W_K"] + sy["W_V"]] + [list(sy["W_O"])], out, "numpy")
    got = np.asarray(f(list(X.ravel()), *[list(w.ravel()) for w in (*Wq, *Wk, *Wv)], list(Wo.ravel())), dtype=float)
    assert np.abs(got - na.mhsa_concat(X, Wq, Wk, Wv, Wo, scale=1.0)).max() < 1e-12
    syms, grads = tl.lora_gradients_at(3, 4, 2, 2)
    fixed = tl.derive_lora_gradients(3, 4, 2, 2)
    assert (grads["grad_A"] - fixed.result["grad_A"]).applyfunc(sp.expand) == sp.zeros(2, 2)
    assert (grads["grad_B"] - fixed.result["grad_B"]).applyfunc(sp.expand) == sp.zeros(4, 2)
    g4, f4 = tr.bptt_general_at(4), tr.derive_bptt_scalar(4)
    syms = sorted(f4.result["tied"].free_symbols, key=str)
    diff = sp.lambdify(syms, [g4["tied"] - f4.result["tied"]] + [a - b for a, b in zip(g4["untied"], f4.result["untied"])])
    assert np.abs(diff(*rng.normal(size=len(syms)))).max() < 1e-12  # the unrolled loss differentiated at T = 4


def _check(cid, name):
    return next(c for c in get_claim(cid).checks if c.name == name)


def test_symbolic_checks_reject_forms_wrong_only_at_other_sizes():
    ctx = RunContext(mode="quick")
    jac_big = {"softmax": na.softmax, "jacobian": lambda p: na.softmax_jacobian(p) if np.shape(p)[-1] < 5
               else np.einsum("...i,ij->...ij", p, np.eye(np.shape(p)[-1]))}
    assert _check("attn.softmax_simplex", "jacobian_vs_sympy").fn(jac_big, ctx).passed is False
    assert _check("attn.softmax_simplex", "jacobian_vs_sympy").fn(get_claim("attn.softmax_simplex").form, ctx).passed

    def causal_big(Q, K, V, **kw):
        Y, A = na.causal_attention(Q, K, V, **kw)
        if A.shape[-1] >= 9:  # the diagonal masked too, only for long sequences
            A = na.softmax(np.where(np.tril(np.ones(A.shape[-2:], bool), -1), Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]),
                                    -1e300), axis=-1)
        return Y, A

    assert _check("attn.causal_mask", "weights_vs_sympy").fn(causal_big, ctx).passed is False
    form = dict(get_claim("rnn.bptt").form)
    form["combine"] = lambda G: np.asarray(G).sum(0) if np.shape(G)[0] < 5 else np.asarray(G)[1:].sum(0)
    assert _check("rnn.bptt", "scalar_rnn_vs_sympy").fn(form, ctx).passed is False
