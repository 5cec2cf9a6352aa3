"""Group D, continued: the modern Hopfield update is attention (lecture notes 002, memorisation part). Binds
theory/hopfield.py and numerics/hopfield.py to checks, tolerances and mutants."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
import torch

from numerics import attention as na, hopfield as nh
from numerics.torch_utils import resolve_device
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, REL_UNITS
from theory import hopfield as th
from proofs_checks.claims._hopfield_common import abs_resolution


# --------------------------------------------------------------------------------------------
# hop.attention_identity
# form: (R, Y, W_Q, W_K, W_V) -> (..., S, d_v)


def _attention_symbolic(form, ctx) -> CheckResult:
    """The form against SymPy's attention output (proved equal to the Hopfield update) evaluated on
    random matrices."""
    S, T, dk, dv = 2, 3, 2, 2
    der = th.derive_attention_identity(S, T, dk, dv)
    Qs, Ks, Vs = der.facts["Q"], der.facts["K"], der.facts["W_V"]
    fn = sp.lambdify(list(Qs) + list(Ks) + list(Vs), der.result, "numpy")
    rng = ctx.rng()
    err, pairs = 0.0, []
    for _ in range(8):
        dm = 3
        R, Y = rng.normal(size=(S, dm)), rng.normal(size=(T, dm))
        WQ, WK, WV = rng.normal(size=(dm, dk)), rng.normal(size=(dm, dk)), rng.normal(size=(dk, dv))
        ref = np.asarray(fn(*(list((R @ WQ).ravel()) + list((Y @ WK).ravel()) + list(WV.ravel()))), dtype=float)
        got = form(*(torch.from_numpy(a) for a in (R, Y, WQ, WK, WV))).numpy()
        err = largest(err, float(np.max(np.abs(got - ref))) if got.shape == ref.shape else math.inf)
        pairs.append((got, ref))
    eps, conf = abs_resolution(pairs, 1e3 * EPS)
    return compare(err, 1e3 * EPS, "float64 rounding of a 3-term softmax and products of O(1) matrices",
                   seeds=[ctx.seed_for()], sizes={"S": S, "T": T, "d_k": dk, "d_v": dv},
                   details={"max_abs_error": err, "resolution_confirmed": conf}, resolution=eps,
                   resolution_units=REL_UNITS + " (SymPy's attention output: (tol + error)/max|output|, best instance)")


def _attention_sdpa(form, ctx) -> CheckResult:
    """The form against torch.nn.functional.scaled_dot_product_attention(Q, K, V) with Q = RW_Q,
    K = YW_K, V = YW_KW_V (default scale 1/√d_k), batched, float64, on ctx.device."""
    dev = resolve_device(ctx.device)
    g = torch.Generator(device=dev).manual_seed(ctx.seed_for())
    errs, pairs = {}, []
    for (B, S, T, dm, dk, dv) in [(ctx.size(8, 32, 128), 5, 7, 6, 4, 3), (4, 1, 9, 8, 8, 5), (4, 6, 2, 3, 16, 2)]:
        kw = dict(generator=g, device=dev, dtype=torch.float64)
        R, Y = torch.randn(B, S, dm, **kw), torch.randn(B, T, dm, **kw) * 2
        WQ, WK, WV = torch.randn(dm, dk, **kw), torch.randn(dm, dk, **kw), torch.randn(dk, dv, **kw)
        Q, K = R @ WQ, Y @ WK
        ref = torch.nn.functional.scaled_dot_product_attention(Q, K, K @ WV)
        got = form(R, Y, WQ, WK, WV)
        errs[f"B{B}_S{S}_T{T}_dk{dk}"] = float((got - ref).abs().max() / (1 + ref.abs().max())) if got.shape == ref.shape else math.inf
        pairs.append((got.detach().cpu().numpy(), ref.detach().cpu().numpy(), 1 + float(ref.abs().max())))
    eps, conf = abs_resolution(pairs, 1e3 * EPS)
    return compare(worst(errs), 1e3 * EPS, "float64 rounding (relative to the output scale) of products of O(10) numbers",
                   seeds=[ctx.seed_for()], device=str(dev), sizes={"configs": list(errs)},
                   details={**errs, "resolution_confirmed": conf}, resolution=eps,
                   resolution_units=REL_UNITS + " (torch SDPA's output: (tol·(1 + max|out|) + error)/max|out|, best config)")


def _att_variant(axis=-2, beta_pow=0.5, sign=1.0):
    def f(R, Y, W_Q, W_K, W_V):
        K, Q = Y @ W_K, R @ W_Q
        X, Xi = K.transpose(-1, -2), Q.transpose(-1, -2)
        beta = W_K.shape[-1] ** (-beta_pow)
        new = X @ torch.softmax(sign * beta * (X.transpose(-1, -2) @ Xi), dim=axis)
        return new.transpose(-1, -2) @ W_V
    return f


def _att_inputs(ctx, S=5, T=5, dm=6, dk=4, dv=3):
    rng = np.random.default_rng(ctx.seed_for("attention_cx", S, T, dm, dk, dv))
    return (rng.normal(size=(S, dm)), rng.normal(size=(T, dm)), rng.normal(size=(dm, dk)), rng.normal(size=(dm, dk)),
            rng.normal(size=(dk, dv)))


def _att_gap(got, ref, what, clause, instance, justification) -> Counterexample:
    gap = float(np.max(np.abs(got - ref)))
    tol = 1e3 * EPS * (1 + float(np.max(np.abs(ref))))
    return exceeds(instance, clause, f"{what}: max |difference| = {gap:.3g} (float64 rounding ≈ {tol:.1g})",
                   error=gap, tolerance=tol, justification=justification)


def _cx_att_beta(ctx) -> Counterexample:
    """Without β = 1/√d_k: the Hopfield update at β = 1 (d_k = 4) is S(QKᵀ)K W_V, not attention's S(QKᵀ/2)V."""
    R, Y, WQ, WK, WV = _att_inputs(ctx)
    Q, K = R @ WQ, Y @ WK
    hop = nh.modern_update(torch.from_numpy(Q), torch.from_numpy(K), 1.0).numpy() @ WV
    return _att_gap(hop, na.attention(Q, K, K @ WV), "Hopfield update at β = 1 vs S(QKᵀ/√d_k)V", "identity",
                    {"S": 5, "T": 5, "d_k": 4, "beta": 1.0},
                    "the identity is exact, so any difference beyond float64 rounding (1e3·eps·scale) refutes it")


def _cx_att_values(ctx) -> Counterexample:
    """Without V = YW_KW_V: values V = YW'_V with a generic W'_V (d_m = 6 > d_k = 2). The Hopfield update
    returns combinations of the keys, X S(·) = Kᵀ S(·), so no W_V reproduces attention: the least-squares
    residual of S·V on S·K is positive."""
    R, Y, WQ, WK, WV = _att_inputs(ctx, S=6, T=6, dm=6, dk=2, dv=3)
    Q, K = R @ WQ, Y @ WK
    A = na.attention_weights(Q, K)
    V = Y @ np.random.default_rng(ctx.seed_for("W_V_prime")).normal(size=(6, 3))
    best, *_ = np.linalg.lstsq(A @ K, A @ V, rcond=None)
    hop = nh.modern_update(torch.from_numpy(Q), torch.from_numpy(K), 1 / math.sqrt(2)).numpy() @ best
    return _att_gap(hop, A @ V, "best W_V (least squares) for V = YW'_V", "identity",
                    {"S": 6, "T": 6, "d_m": 6, "d_k": 2, "V": "Y W'_V (generic W'_V)"},
                    "the residual of the best W_V (least squares) is the smallest difference any W_V achieves")


def _cx_att_roles(ctx) -> Counterexample:
    """Without 'Y stores, R queries': the Hopfield update with stored patterns from R and states from Y
    (S = T = 5, so the shapes agree) is not the attention of queries RW_Q over keys YW_K."""
    R, Y, WQ, WK, WV = _att_inputs(ctx)
    swapped = nh.hopfield_attention(*(torch.from_numpy(a) for a in (Y, R, WQ, WK, WV))).numpy()
    Q, K = R @ WQ, Y @ WK
    return _att_gap(swapped, na.attention(Q, K, K @ WV), "Y and R swapped on the Hopfield side", "identity",
                    {"S": 5, "T": 5, "d_k": 4, "stored": "(R W_K)ᵀ", "states": "(Y W_Q)ᵀ"},
                    "the identity is exact, so any difference beyond float64 rounding refutes it")


declare(
    id="hop.attention_identity",
    title="Attention S(QKᵀ/√d_k)V is one Hopfield update of Ξ = Qᵀ over X = Kᵀ at β = 1/√d_k, then W_V (V = YW_KW_V)",
    hypotheses=(
        setting("layout", r"R\in\mathbb R^{S\times d_m},\ Y\in\mathbb R^{T\times d_m}\ (\text{tokens as rows}),\ W_Q,W_K\in\mathbb R^{d_m\times d_k},\ W_V\in\mathbb R^{d_k\times d_v};\ S(QK^\top)\text{ row-wise},\ S(\beta X^\top\Xi)\text{ column-wise}",
                "which index each softmax normalises (keys = stored patterns); "
                "over the other index the two sides differ (the planted mutant softmax_over_states)"),
        Hypothesis("roles", r"K=YW_K,\ X=K^\top\ (\text{stored from }Y);\ Q=RW_Q,\ \Xi=Q^\top\ (\text{states from }R)",
                   "Y supplies the stored (key) patterns, R the state (query) patterns", counterexample=_cx_att_roles),
        Hypothesis("values_through_keys", r"V=YW_KW_V", "the values are the keys times W_V", counterexample=_cx_att_values),
        Hypothesis("beta", r"\beta=\tfrac1{\sqrt{d_k}}", counterexample=_cx_att_beta),
    ),
    clauses=(
        Clause("identity", r"S\!\big(\tfrac{QK^\top}{\sqrt{d_k}}\big)V=\big(X\,S(\beta X^\top\Xi)\big)^\top W_V",
               "derived", "every S, T, d_k, d_v, d_m (matrix symbols; the softmaxes written D⁻¹E and EᵀD⁻¹ with E the "
               "entrywise exponential and D = diag(E1), a definition listed as such)",
               ("derivation", "vs_sympy", "vs_scaled_dot_product_attention"),
               also=(("derived_at", "S = 2, T = 3, d_k = d_v = 2 entry by entry (explicit softmax)"),
                     ("checked", "against torch SDPA (float64) at (S, T, d_k) = (5, 7, 4) with 8/32 batches, (1, 9, 8), "
                      "(6, 2, 16)"))),
    ),
    source="lecture notes 002; Ramsauer et al. (ICLR 2021), Section 2 (the new update rule is attention)",
    kind="identity",
    form=nh.hopfield_attention,
    derivation=lambda: th.derive_attention_identity(2, 3, 2, 2),
    checks=(
        Check("vs_sympy", "symbolic", _attention_symbolic, "vs SymPy's proved identity on random matrices"),
        Check("vs_scaled_dot_product_attention", "numeric", _attention_sdpa, "vs torch SDPA", uses_device=False),
    ),
    mutants=(
        Mutant("softmax_over_states", "wrong axis", "softmax of βXᵀΞ over the state axis instead of the stored axis",
               _att_variant(axis=-1)),
        Mutant("beta_one_over_dk", "wrong constant", "β = 1/d_k instead of 1/√d_k", _att_variant(beta_pow=1.0)),
        Mutant("logit_sign_flipped", "sign flip", "S(−βXᵀΞ)", _att_variant(sign=-1.0)),
    ),
)
