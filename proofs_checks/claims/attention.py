"""Group A: attention mechanics — softmax, attention as a convex combination, the causal mask (lecture
notes 000, 001, 003, 004). Binds theory/attention.py and numerics/attention.py to checks, tolerances and
mutants."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
import torch

from numerics import attention as na
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest
from theory import attention as ta
from proofs_checks.claims._attention_common import Resolved, _T, _maxabs, _np, _quiet, _swap, _torch_seed


# --------------------------------------------------------------------------------------------
# attn.softmax_simplex
# form: {"softmax": logits(..., T) -> probs, "jacobian": probs(..., T) -> (..., T, T)}


#: sizes at which the symbolic checks compare the form with the general (symbolic-T) closed forms
_T_GENERAL = (2, 4, 5, 9)


def _softmax_symbolic(form, ctx) -> CheckResult:
    """The form's softmax and Jacobian agree with the closed forms SymPy derived for symbolic T
    (ta.derive_softmax_simplex_general), specialised to T ∈ {2, 4, 5, 9}: S_t = e^{l_t}/Σ_τ e^{l_τ}
    at logits of scale 3, S_t(δ_ts − S_s) at points of the simplex."""
    rng = ctx.rng()
    R = Resolved()
    forms_difference = {}
    for T in _T_GENERAL:
        l, p, soft, jac = ta.softmax_simplex_at(T)
        f_soft, f_jac = sp.lambdify([l], soft, "numpy"), sp.lambdify([p], jac, "numpy")
        L = rng.normal(scale=3.0, size=(16, T))
        with np.errstate(all="ignore"):
            got = form["softmax"](L)
        R.pair(f"softmax_vs_sympy_T{T}", got, np.array([np.asarray(f_soft(row), dtype=float) for row in L]))
        for P in rng.dirichlet(np.ones(T), size=8):
            R.pair(f"jacobian_vs_sympy_T{T}", form["jacobian"](P), np.asarray(f_jac(P), dtype=float))
        forms_difference[T] = "0 (specialised from the symbolic-T Jacobian)"
    Tmax = sorted(_T_GENERAL)[-1]
    return R.result(16 * Tmax * EPS, f"float64 rounding: a softmax entry divides exp(l_t) by a sum of T terms and a "
                    f"Jacobian entry is a product of numbers in [0, 1] (a few ulps each); 16·T·eps at T = {Tmax}",
                    seeds=[ctx.seed_for()], sizes={"T": list(_T_GENERAL), "logit draws per T": 16, "simplex points per T": 8},
                    details={"closed_forms": "ta.derive_softmax_simplex_general, specialised by ta.softmax_simplex_at"})


def _softmax_numeric(form, ctx) -> CheckResult:
    """Against torch.softmax (the real thing) on batches incl. ±750 logits (beyond exp's float64
    range); simplex, shift invariance; Jacobian against autograd; Jacobian PSD with null vector 1."""
    rng = ctx.rng()
    B, T = ctx.size(16, 64, 256), 7
    L = rng.normal(scale=5.0, size=(B, T))
    L[0] = [750, -750, 0, 749, -1, 3, 750]  # exp(750) overflows float64 (max ≈ e^709.8): a naive exp gives inf/inf
    L[1] = -L[0]
    with np.errstate(all="ignore"):  # a mutant may overflow; the NaN it makes must fail, not warn
        p = form["softmax"](L)
    p_ref = torch.softmax(torch.from_numpy(L), dim=-1).numpy()
    R = Resolved()
    R.pair("vs_torch_softmax", p, p_ref)
    R.pair("sum_minus_one", p.sum(-1), np.ones(B))
    R.pair("shift_invariance", _quiet(form["softmax"], L + rng.normal(size=(B, 1)) * 50), p)
    R.prop("negative_mass", float(largest(0.0, -np.min(p))), "absolute negative probability")
    Lt = torch.from_numpy(L[2:6].copy())
    J_auto = torch.stack([torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), row) for row in Lt]).numpy()
    J = form["jacobian"](p_ref[2:6])
    R.pair("jacobian_vs_autograd", J, J_auto)
    R.prop("jacobian_null_vector", float(np.max(np.abs(J @ np.ones(T)))), "absolute row sum of the Jacobian (J·1 = 0)")
    eig = np.linalg.eigvalsh((J + np.swapaxes(J, -1, -2)) / 2)
    R.prop("jacobian_min_eig_negative", float(largest(0.0, -eig.min())), "absolute negative eigenvalue of (J + Jᵀ)/2")
    tol = 64 * T * EPS
    return R.result(tol, f"float64 rounding of exp/normalise over T={T} terms (64·T·eps); resolution relative to torch's "
                    "probabilities, the row sums 1 and autograd's Jacobian",
                    seeds=[ctx.seed_for()], sizes={"batch": B, "T": T})


def _softmax_T1(ctx) -> Counterexample:
    """Without T ≥ 2: one token, S = 1 exactly, so the open-interval clause fails."""
    p = na.softmax(np.array([[0.3]]))
    s1 = float(p[0, 0])
    return Counterexample({"T": 1, "l": "(0.3)"}, "open_interval", f"S_1 = {s1:g}: not in (0, 1)",
                          violated=not (0.0 < s1 < 1.0),
                          justification="S_1 = 1 is the upper end of the interval: exactly, not up to rounding")


declare(
    id="attn.softmax_simplex",
    title="Softmax maps logits to the simplex; Jacobian diag(p) − ppᵀ",
    hypotheses=(
        setting("finite_logits", r"l \in \mathbb{R}^T \text{ (finite logits)}",
                "S(l) is not defined for an infinite logit"),
        Hypothesis("T_ge_2", r"T \ge 2", "at least two tokens (for the open interval)", counterexample=_softmax_T1),
    ),
    clauses=(
        Clause("open_interval", r"S(l)_t=\frac{e^{l_t}}{\sum_\tau e^{l_\tau}}\in(0,1)", "derived",
               "every T ≥ 2 (symbolic T; S_t < 1 in the cases t = 1, t = T and 1 < t < T)", ("derivation",),
               also=(("derived_at", "T = 3"),)),
        Clause("sums_to_one", r"\sum_t S_t=1,\ S(l+c\mathbf 1)=S(l)", "derived", "every T ≥ 1 (symbolic T)",
               ("derivation", "jacobian_vs_sympy", "simplex_and_jacobian"),
               also=(("derived_at", "T = 3"), ("checked", "T = 7, logits up to ±750; the form against the general closed "
                                                         "form at T ∈ {2, 4, 5, 9}"))),
        Clause("jacobian", r"\partial S/\partial l=\operatorname{diag}(p)-pp^\top\succeq0,\ (\operatorname{diag}(p)-pp^\top)\mathbf 1=0",
               "derived", "every T ≥ 1 (symbolic T: entry S_t(δ_ts − S_s), null vector 1, xᵀJx a variance ≥ 0)",
               ("derivation", "jacobian_vs_sympy", "simplex_and_jacobian"),
               also=(("derived_at", "T = 3"), ("checked", "T = 7 against autograd; the form against the general closed form "
                                                         "at T ∈ {2, 4, 5, 9}"))),
    ),
    source="lecture notes 000, 001, 003; Vaswani et al. (2017)",
    kind="identity",
    form={"softmax": na.softmax, "jacobian": na.softmax_jacobian},
    derivation=ta.derive_softmax_simplex_general,
    checks=(
        Check("jacobian_vs_sympy", "symbolic", _softmax_symbolic,
              "form's softmax and Jacobian vs the closed forms derived for symbolic T, at T ∈ {2, 4, 5, 9}"),
        Check("simplex_and_jacobian", "numeric", _softmax_numeric, "vs torch.softmax and autograd, logits up to ±750"),
    ),
    mutants=(
        Mutant("jacobian_diag_only", "dropped term", "Jacobian diag(p) (the −ppᵀ term dropped)",
               {"softmax": na.softmax, "jacobian": lambda p: np.einsum("...i,ij->...ij", p, np.eye(p.shape[-1]))}),
        Mutant("normalise_wrong_axis", "wrong axis", "softmax normalised over the batch axis instead of the token axis",
               {"softmax": lambda L: na.softmax(L, axis=0), "jacobian": na.softmax_jacobian}),
        Mutant("naive_exp", "wrong formula", "exp(l)/Σexp(l) without max-subtraction: overflows at 700",
               {"softmax": lambda L: np.exp(L) / np.exp(L).sum(-1, keepdims=True), "jacobian": na.softmax_jacobian}),
    ),
    notes="The open interval is a statement about real numbers, derived only: float64 rounds it to the closed interval "
          "[0, 1] (the logits (750, −750, …) give exact zeros, and l = (40, 0) gives S_1 = 1.0), so the numeric check "
          "tests only S_t ≥ 0 and Σ_t S_t = 1.",
)


# --------------------------------------------------------------------------------------------
# attn.convex_combination
# form: attention(Q, K, V, *, scale=None) -> (..., N_q, D_v) rows


#: (T, D_v) at which the symbolic check compares the form with the general closed form
_TD_GENERAL = ((3, 2), (2, 1), (5, 3), (9, 4))


def _convex_symbolic(form, ctx) -> CheckResult:
    """The form's output row equals y_j = Σ_t S(l)_t V_tj, derived for symbolic T and D_v
    (ta.derive_convex_combination_general), specialised to (T, D_v) ∈ {(3, 2), (2, 1), (5, 3), (9, 4)}."""
    d, B = 4, 16
    rng = ctx.rng()
    R = Resolved()
    vmax = 1.0
    for T, Dv in _TD_GENERAL:
        l, Vs, y = ta.convex_combination_at(T, Dv)
        y_ref = sp.lambdify([l, list(Vs)], y, "numpy")
        q, K, V = rng.normal(size=(B, 1, d)), rng.normal(size=(B, T, d)), rng.normal(size=(B, T, Dv))
        L = (q @ _swap(K))[:, 0, :] / math.sqrt(d)  # the sdpa convention 1/√d_k
        with np.errstate(all="ignore"):
            Y = form(q, K, V)
        ref = np.stack([np.asarray(y_ref(L[b], list(V[b].ravel())), dtype=float).reshape(1, Dv) for b in range(B)])
        R.pair(f"output_vs_sympy_T{T}_Dv{Dv}", Y, ref)
        vmax = largest(vmax, _maxabs(V))
    Tmax = largest(T for T, _ in _TD_GENERAL)
    return R.result(16 * Tmax * EPS * vmax, f"float64 rounding of a T-term weighted sum (16·T·eps·max(1, max|V|), T = {Tmax})",
                    seeds=[ctx.seed_for()], sizes={"(T, D_v)": list(_TD_GENERAL), "d_k": d, "batch": B},
                    details={"closed_form": "ta.derive_convex_combination_general, specialised by ta.convex_combination_at"})


def _attention_inputs(ctx, B, T, d, Dv, logit_scale=1.0):
    rng = ctx.rng(T, Dv, logit_scale)
    return rng.normal(size=(B, T, d)) * logit_scale, rng.normal(size=(B, T, d)), rng.normal(size=(B, T, Dv))


def _convex_lp(form, ctx) -> CheckResult:
    """Every output row lies in the convex hull of the value rows: LP distance (HiGHS) ≈ 0, and a
    certified bound: the LP's weights polished on their support, made an exact convex combination
    (clipped at 0, renormalised), reproduce the row to float64 rounding.

    Two regimes: T ≤ D_v (the hull is a simplex in a proper affine subspace, so any weights not
    summing to one leave it; T = 1, one key, is its boundary: y = v_1) and T > D_v
    (full-dimensional hull), plus near-one-hot weights (logits scaled by 30)."""
    B = ctx.size(3, 8, 32)
    cases = [(1, 3, 2, 1.0), (5, 6, 4, 1.0), (8, 3, 4, 1.0), (4, 5, 3, 30.0)]  # T = 1: the hull is one point
    lp, cert, resid, feas_tol = {}, {}, [], 1e-10
    for T, Dv, d, ls in cases:
        Q, K, V = _attention_inputs(ctx, B, T, d, Dv, ls)
        with np.errstate(all="ignore"):
            Y = form(Q, K, V)
        if not np.all(np.isfinite(Y)):
            return compare(math.inf, 0.0, "non-finite output", seeds=[ctx.seed_for(T, Dv, ls)])
        hull = na.convex_hull_distance(Y, V, feas_tol=feas_tol)
        label = f"T{T}_Dv{Dv}_x{ls:g}"
        lp[label] = float(hull.distance.max()) / largest(1.0, _maxabs(V))
        cert[label] = float(np.max(na.hull_certificate(Y, V, hull.weights))) / largest(1.0, _maxabs(V))
        resid.append(float(hull.residual.max()))
    Tmax, Dmax = largest(c[0] for c in cases), largest(c[1] for c in cases)
    tol = 64 * Tmax * Dmax * EPS
    units = "L1 distance of an output row from conv(value rows), relative to max(1, max|V|)"
    return compare(cert, tol,
                   f"certified distance: an exact convex combination of the value rows (the LP's weights polished, "
                   f"clipped, renormalised) reproduces each output row up to the float64 rounding of a T-term sum in "
                   f"D_v coordinates, L1 (64·T·D_v·eps = {tol:.2g}, T ≤ {Tmax}, D_v ≤ {Dmax}); resolution: a row "
                   f"farther than tol + error from the hull is rejected (the LP's own distance, feasibility tolerance "
                   f"{feas_tol:g}, is in the details)",
                   seeds=[ctx.seed_for(c[0], c[1], c[3]) for c in cases], sizes={"batch": B, "cases (T, D_v, d_k, logit scale)": cases},
                   details={"lp_hull_distance": lp, "lp_weights_residual": largest(resid)},
                   resolution=tol + abs(worst(cert)), resolution_units=units)


def _convex_vs_sdpa(form, ctx) -> CheckResult:
    """The form is attention itself: it matches torch's scaled_dot_product_attention."""
    B, T, d, Dv = ctx.size(4, 16, 64), 6, 4, 5
    Q, K, V = _attention_inputs(ctx, B, T, d, Dv, 3.0)
    with np.errstate(all="ignore"):
        Y = form(Q, K, V)
    R = Resolved()
    R.pair("vs_sdpa", Y, na.sdpa(Q, K, V, device=ctx.device))
    return R.result(64 * T * EPS * largest(1.0, _maxabs(V)), "float64 rounding of softmax and a T-term sum (64·T·eps·max|V|)",
                    seeds=[ctx.seed_for(T, Dv, 3.0)], sizes={"batch": B, "T": T, "d_k": d, "D_v": Dv}, device=ctx.device)


def _scaled_logits(Q, K):
    return Q @ _swap(K) / math.sqrt(Q.shape[-1])


declare(
    id="attn.convex_combination",
    title="Each attention output row is a convex combination of the value rows",
    hypotheses=(
        setting("finite_inputs", r"q_t,k_s\in\mathbb R^{d_k},\ v_s\in\mathbb R^{D_v}\ \text{finite},\ T\ge1",
                "the softmax weights are not defined for an infinite logit "
                "(∞/∞) or for no key at all; for every finite input the weights are positive and sum to 1",
                text="finite queries, keys and values, at least one key"),
    ),
    clauses=(
        Clause("weights_simplex", r"a_{ts}=S(q_tK^\top/\sqrt{d_k})_s>0,\ \sum_s a_{ts}=1", "derived",
               "every T ≥ 1 (symbolic T)", ("derivation", "output_vs_sympy"),
               also=(("derived_at", "T = 3, D_v = 2"),
                     ("checked", "(T, D_v) ∈ {(3, 2), (2, 1), (5, 3), (9, 4)}, d_k = 4 against the general derived row"))),
        Clause("in_hull", r"y_t=\sum_s a_{ts}v_s\in\operatorname{conv}\{v_1,\dots,v_T\}", "derived",
               "every T ≥ 1 and D_v ≥ 1 (symbolic T, D_v: y_j = Σ_t a_t V_tj with simplex weights; each coordinate "
               "between the column's bounds)", ("derivation", "in_hull_lp", "matches_sdpa"),
               also=(("derived_at", "T = 3, D_v = 2"),
                     ("checked", "LP distance with a certified convex combination for (T, D_v) = (1, 3), (5, 6), "
                      "(8, 3), (4, 5) incl. logits ×30 (near one-hot), every row of 3/8/32 batches; "
                      "the form equals torch sdpa at T = 6, D_v = 5"))),
    ),
    source="lecture notes 000 (stage 1, 'convex combo of tokens'); lecture notes 003 eq. (2); Vaswani et al. (2017)",
    kind="theorem",
    form=na.attention,
    derivation=ta.derive_convex_combination_general,
    checks=(
        Check("output_vs_sympy", "symbolic", _convex_symbolic,
              "form vs Σ_t S(l)_t V_tj derived for symbolic T, D_v, at (T, D_v) ∈ {(3, 2), (2, 1), (5, 3), (9, 4)}"),
        Check("in_hull_lp", "numeric", _convex_lp, "LP (SciPy HiGHS) distance of every output row to conv(value rows)"),
        Check("matches_sdpa", "numeric", _convex_vs_sdpa, "vs torch.nn.functional.scaled_dot_product_attention", uses_device=False),
    ),
    mutants=(
        Mutant("unnormalised_weights", "dropped term", "weights exp(l − max l) without dividing by their sum (outside the hull)",
               lambda Q, K, V, **kw: np.exp(_scaled_logits(Q, K) - _scaled_logits(Q, K).max(-1, keepdims=True)) @ V),
        Mutant("linear_attention", "wrong formula", "no softmax: (Q Kᵀ/√d) V / T (signed weights)",
               lambda Q, K, V, **kw: _scaled_logits(Q, K) @ V / K.shape[-2]),
        Mutant("softmax_over_queries", "wrong axis", "softmax over the query axis: columns sum to 1, rows do not",
               lambda Q, K, V, **kw: na.softmax(_scaled_logits(Q, K), axis=-2) @ V),
        Mutant("residual_added", "extra term", "attention output plus the value rows (a residual inside the map)",
               lambda Q, K, V, **kw: na.attention(Q, K, V) + V),
        Mutant("hard_attention", "wrong formula", "one-hot on the largest logit: inside the hull, but not attention",
               lambda Q, K, V, **kw: np.take_along_axis(V, np.argmax(_scaled_logits(Q, K), -1)[..., None], axis=-2)),
    ),
)


# --------------------------------------------------------------------------------------------
# attn.causal_mask
# form: causal_attention(Q, K, V, *, scale=None) -> (Y (..., T, D_v), A (..., T, T))


def _causal_symbolic(form, ctx) -> CheckResult:
    """The form's A equals S(L + M) derived for symbolic T (ta.derive_causal_mask_general:
    A_ts = e^{l_ts}/Σ_{σ≤t} e^{l_tσ} for s ≤ t, 0 above), specialised to T ∈ {2, 4, 5, 9}."""
    d, B = 3, 12
    rng = ctx.rng()
    R = Resolved()
    for T in _T_GENERAL:
        L_sym, A_sym = ta.causal_mask_at(T)
        A_ref = sp.lambdify([list(L_sym)], A_sym, "numpy")
        Q, K, V = rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d)), rng.normal(size=(B, T, 2))
        L = _scaled_logits(Q, K)
        with np.errstate(all="ignore"):
            _, A = form(Q, K, V)
        R.pair(f"weights_vs_sympy_T{T}", A, np.stack([np.asarray(A_ref(list(L[b].ravel())), dtype=float) for b in range(B)]))
    Tmax = sorted(_T_GENERAL)[-1]
    return R.result(8 * Tmax * EPS, f"float64 rounding of a T-term softmax (8·T·eps, T = {Tmax})",
                    seeds=[ctx.seed_for()], sizes={"T": list(_T_GENERAL), "d_k": d, "batch": B},
                    details={"closed_form": "ta.derive_causal_mask_general (symbolic T), specialised by ta.causal_mask_at",
                             "derived_future_derivatives": "0 for every u > t", "derived_row_sums": "1 for every t"})


def _causal_structure(form, ctx) -> CheckResult:
    """A is lower-triangular with rows summing to 1, its support is torch's causal mask, and output
    t is unchanged when tokens > t are replaced (perturbations of scale 100: extreme logits)."""
    rng = ctx.rng()
    B, T, d, Dv = ctx.size(4, 16, 64), 7, 4, 3
    Q, K, V = rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d)), rng.normal(size=(B, T, Dv))
    with np.errstate(all="ignore"):
        Y, A = form(Q, K, V)
    allowed = _np(torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)) == 0
    R = Resolved()
    R.prop("mass_above_diagonal", float(np.abs(np.where(allowed, 0.0, A)).max()),
           "absolute leak of attention weight onto a future token")
    R.pair("row_sum_minus_one", A.sum(-1), np.ones(A.shape[:-1]))
    R.prop("zero_where_torch_allows", float(np.sum((A == 0) & allowed)), "count of allowed (s ≤ t) weights that are exactly 0")
    for t in range(T - 1):  # replace every token after t; batch over the B sequences
        Qp, Kp, Vp = Q.copy(), K.copy(), V.copy()
        for a in (Qp, Kp, Vp):
            a[:, t + 1:] = rng.normal(scale=100.0, size=a[:, t + 1:].shape)
        with np.errstate(all="ignore"):
            Yp, _ = form(Qp, Kp, Vp)
        R.pair("future_change", Yp[:, : t + 1], Y[:, : t + 1])
    tol = 16 * T * EPS * largest(1.0, _maxabs(V))
    return R.result(tol, "float64 rounding of a T-term softmax and sum (16·T·eps·max|V|); masked entries exactly 0; resolution "
                    "relative to the row sums 1 and the unperturbed outputs y_{≤t}; the leak onto future tokens is in "
                    "property_resolutions", seeds=[ctx.seed_for()], sizes={"batch": B, "T": T, "d_k": d, "D_v": Dv})


def _causal_vs_sdpa(form, ctx) -> CheckResult:
    """Y matches scaled_dot_product_attention(is_causal=True) and MultiheadAttention with torch's mask."""
    rng = ctx.rng()
    B, T, d = ctx.size(4, 16, 64), 6, 4
    Q, K, V = rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d))
    with np.errstate(all="ignore"):
        Y, _ = form(Q, K, V)
    R = Resolved()
    R.pair("vs_sdpa_is_causal", Y, na.sdpa(Q, K, V, causal=True, device=ctx.device))
    with _torch_seed(ctx.seed_for("mha")):
        mha = torch.nn.MultiheadAttention(d, 1, bias=False, batch_first=True, dtype=torch.float64).to(ctx.device)
    with torch.no_grad():  # identity projections turn MHA into plain attention on (Q, K, V)
        mha.in_proj_weight.copy_(torch.eye(d, dtype=torch.float64).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(d, dtype=torch.float64))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64, device=ctx.device)
        ref = mha(_T(Q, ctx.device), _T(K, ctx.device), _T(V, ctx.device), attn_mask=mask, need_weights=False)[0]
    R.pair("vs_multihead_attention_mask", Y, _np(ref))
    return R.result(64 * T * EPS * largest(1.0, _maxabs(V)), "float64 rounding (64·T·eps·max|V|)",
                    seeds=[ctx.seed_for(), ctx.seed_for("mha")], sizes={"batch": B, "T": T, "d_k": d}, device=ctx.device)


def _mask_mutant(keep):
    def f(Q, K, V, **kw):
        L = _scaled_logits(Q, K)
        T = L.shape[-1]
        A = na.softmax(np.where(keep(T), L, -np.inf), axis=-1)
        return A @ V, A
    return f


def _tril_after_softmax(Q, K, V, **kw):
    A = np.tril(na.softmax(_scaled_logits(Q, K), axis=-1))
    return A @ V, A


def _zero_logit_mask(Q, K, V, **kw):
    L = _scaled_logits(Q, K)
    A = na.softmax(np.where(na.causal_mask(L.shape[-1]), L, 0.0), axis=-1)
    return A @ V, A


def _causal_cx_inputs(ctx, T=3, d=2):
    rng = ctx.rng()
    X = rng.normal(size=(T, d))
    return X, _scaled_logits(X, rng.normal(size=(T, d)))


def _causal_finite_mask(ctx) -> Counterexample:
    """Without M_ts = −∞: a finite mask value (−10) leaves weight on the future tokens."""
    _, L = _causal_cx_inputs(ctx)
    c = 10.0
    A = na.softmax(np.where(na.causal_mask(3), L, L - c))
    leak = float(A[np.triu_indices(3, 1)].max())
    tol = 16 * 3 * EPS
    return exceeds({"T": 3, "d_k": 2, "mask value for s > t": -c}, "lower_triangular",
                   f"A_12 = {A[0, 1]:.3g}, largest weight above the diagonal {leak:.3g} > 0",
                   error=leak, tolerance=tol,
                   justification="exp(l − c) > 0 for every finite mask value −c; the leak exceeds the check's rounding "
                                 "tolerance (16·T·eps). (A mask like −10⁹ leaks e^(−10⁹) > 0 too, below float64's range)")


def _causal_strict_mask(ctx) -> Counterexample:
    """Without M_tt = 0: the strict mask (s < t allowed) leaves query 1 with no key: 0/0."""
    _, L = _causal_cx_inputs(ctx)
    with np.errstate(all="ignore"):
        A = na.softmax(np.where(np.tril(np.ones((3, 3), bool), -1), L, -np.inf))
        gap = abs(float(A[0].sum()) - 1.0)
    return Counterexample({"T": 3, "d_k": 2, "mask": "strict (s < t)"}, "row_stochastic",
                          f"row 1 is all −∞: A_1· = {np.array2string(A[0], precision=3)} (0/0), Σ_s A_1s ≠ 1",
                          violated=not gap <= 16 * EPS, error=gap, tolerance=16 * EPS,
                          justification="a row sum of a defined softmax is 1 to rounding (16·eps); NaN is not")


def _causal_mixed_values(ctx) -> Counterexample:
    """Without token-wise q, k, v: values v_s = x_s + x_{s+1} mix in the next token, so y_1 moves with x_2."""
    X, _ = _causal_cx_inputs(ctx)

    def y(Z):
        Vmix = Z + np.vstack([Z[1:], np.zeros((1, Z.shape[1]))])
        return na.causal_attention(Z, Z, Vmix)[0]

    Xp = X.copy()
    Xp[1] += 1.0
    change = float(np.abs(y(Xp)[0] - y(X)[0]).max())
    tol = 16 * 3 * EPS * largest(1.0, _maxabs(X))
    return exceeds({"T": 3, "d": 2, "values": "v_s = x_s + x_{s+1}", "x_2 changed by": 1.0}, "blind_to_future",
                   f"y_1 changes by {change:.3g} when x_2 changes (y_1 = v_1 = x_1 + x_2)",
                   error=change, tolerance=tol,
                   justification="the check's rounding tolerance of a T-term softmax and sum (16·T·eps·max|x|)")


declare(
    id="attn.causal_mask",
    title="Causal mask (−∞ above the diagonal): lower-triangular row-stochastic A; output t ignores tokens after t",
    hypotheses=(
        setting("finite_logits", r"QK^\top\in\mathbb R^{T\times T}\ \text{finite}",
                "the softmax is not defined for an infinite logit"),
        Hypothesis("mask_minus_infinity", r"M_{ts}=-\infty\ (s>t)", "masked logits are −∞ exactly",
                   counterexample=_causal_finite_mask),
        Hypothesis("diagonal_unmasked", r"M_{ts}=0\ (s\le t)", "query t sees keys s ≤ t, itself included (row 1 has a key)",
                   counterexample=_causal_strict_mask),
        Hypothesis("tokenwise_qkv", r"q_s,k_s,v_s\ \text{depend on }x_s\text{ only}", "token-wise projections",
                   counterexample=_causal_mixed_values),
    ),
    clauses=(
        Clause("lower_triangular", r"A=S(QK^\top/\sqrt{d_k}+M):\ A_{ts}=0\ (s>t)", "derived",
               "every T ≥ 1 (symbolic T, t, s ∈ [1, T]: the mask resolved from the index ranges)",
               ("derivation", "weights_vs_sympy", "structure_and_future"),
               also=(("derived_at", "T = 3"),
                     ("checked", "T ∈ {2, 4, 5, 9} (vs the general derivation), T = 7 and T = 6 (vs torch's mask, sdpa is_causal)"))),
        Clause("row_stochastic", r"\sum_sA_{ts}=1\ \text{for every }t\text{ (so }A_{11}=1,\ y_1=v_1)", "derived",
               "every T ≥ 1, every row t (symbolic T, t)", ("derivation", "weights_vs_sympy", "structure_and_future"),
               also=(("derived_at", "T = 3"), ("checked", "T ∈ {2, 4, 5, 6, 7, 9}, every row"))),
        Clause("blind_to_future", r"\partial y_t/\partial x_s=0\ (s>t)", "derived",
               "every T ≥ 1, t and u > t (symbolic; scalar values: ∂y_t/∂v_u, ∂y_t/∂l_ru (column u) and ∂y_t/∂l_us "
               "(row u) vanish; with token-wise q, k, v, x_u enters y_t only through them)", ("derivation", "structure_and_future"),
               also=(("derived_at", "T = 3"),
                     ("checked", "T = 7, d_k = 4, D_v = 3: every t, every later token's q, k, v replaced by draws of "
                      "scale 100"))),
    ),
    source="lecture notes 001 (masked self-attention table); lecture notes 004 ('masked self-attention layer'); Vaswani et al. (2017)",
    kind="theorem",
    form=na.causal_attention,
    derivation=ta.derive_causal_mask_general,
    checks=(
        Check("weights_vs_sympy", "symbolic", _causal_symbolic, "form's A vs S(L + M) derived for symbolic T, at T ∈ {2, 4, 5, 9}"),
        Check("structure_and_future", "numeric", _causal_structure, "triangular, row sums, torch's mask support, future tokens replaced"),
        Check("matches_torch", "numeric", _causal_vs_sdpa, "vs sdpa(is_causal=True) and MultiheadAttention(attn_mask)", uses_device=False),
    ),
    mutants=(
        Mutant("no_mask", "dropped term", "the mask is dropped (full attention)", _mask_mutant(lambda T: np.ones((T, T), bool))),
        Mutant("mask_after_softmax", "wrong formula", "softmax first, then zero the upper triangle (rows no longer sum to 1)", _tril_after_softmax),
        Mutant("strict_mask", "wrong constant", "the diagonal is masked too (s < t): token 1 attends to nothing",
               _mask_mutant(lambda T: np.tril(np.ones((T, T), bool), -1))),
        Mutant("anti_causal", "swapped index", "upper-triangular mask (attend to the future)", _mask_mutant(lambda T: np.triu(np.ones((T, T), bool)))),
        Mutant("zero_logit_mask", "wrong constant", "masked logits set to 0 instead of −∞", _zero_logit_mask),
    ),
)
