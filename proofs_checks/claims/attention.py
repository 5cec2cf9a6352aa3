"""Group A: attention mechanics (lecture notes 000, 001, 003, 004). Binds theory/attention.py and
numerics/attention.py to checks, tolerances and mutants."""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import sympy as sp
import torch

from numerics import attention as na
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, CheckResult, Claim, Mutant, compare, register, worst
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest
from theory import attention as ta



def _quiet(f, *args):
    with np.errstate(all="ignore"):
        return f(*args)

# --------------------------------------------------------------------------------------------
# attn.softmax_simplex
# form: {"softmax": logits(..., T) -> probs, "jacobian": probs(..., T) -> (..., T, T)}


def _softmax_symbolic(form, ctx) -> CheckResult:
    """The form's Jacobian agrees with the Jacobian SymPy differentiated from the definition."""
    T = 4
    d = ta.derive_softmax_simplex(T)
    jac = sp.lambdify([d.facts["p_symbols"]], d.result, "numpy")
    rng = ctx.rng()
    P = rng.dirichlet(np.ones(T), size=32)
    err = largest(np.max(np.abs(np.asarray(jac(p), dtype=float) - form["jacobian"](p))) for p in P)
    return compare(err, 8 * T * EPS, "float64 rounding: entries are products of two numbers in [0,1], a few ulps each",
                   seeds=[ctx.seed_for()], sizes={"T": T, "points": len(P)},
                   details={"forms_difference": str(d.facts["forms_difference"])})


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
    errs = {
        "vs_torch_softmax": float(np.max(np.abs(p - p_ref))),
        "sum_minus_one": float(np.max(np.abs(p.sum(-1) - 1))),
        "shift_invariance": float(np.max(np.abs(_quiet(form["softmax"], L + rng.normal(size=(B, 1)) * 50) - p))),
        "negative_mass": float(largest(0.0, -np.min(p))),
    }
    Lt = torch.from_numpy(L[2:6].copy())
    J_auto = torch.stack([torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), row) for row in Lt]).numpy()
    J = form["jacobian"](p_ref[2:6])
    errs["jacobian_vs_autograd"] = float(np.max(np.abs(J - J_auto)))
    errs["jacobian_null_vector"] = float(np.max(np.abs(J @ np.ones(T))))
    eig = np.linalg.eigvalsh((J + np.swapaxes(J, -1, -2)) / 2)
    errs["jacobian_min_eig_negative"] = float(largest(0.0, -eig.min()))
    tol = 64 * T * EPS
    return compare(worst(errs), tol, f"float64 rounding of exp/normalise over T={T} terms (64·T·eps)",
                   seeds=[ctx.seed_for()], sizes={"batch": B, "T": T}, details=errs)


register(Claim(
    id="attn.softmax_simplex",
    title="Softmax maps logits to the simplex; Jacobian diag(p) − ppᵀ",
    statement=r"S(l)_t=\frac{e^{l_t}}{\sum_\tau e^{l_\tau}}=\frac{1}{1+\sum_{\tau\ne t}e^{-(l_t-l_\tau)}}\in(0,1),\ \sum_t S_t=1,\ S(l+c\mathbf 1)=S(l),\ \partial S/\partial l=\operatorname{diag}(p)-pp^\top\succeq0,\ (\operatorname{diag}(p)-pp^\top)\mathbf 1=0",
    source="lecture notes 000, 001, 003; Vaswani et al. (2017)",
    kind="identity",
    form={"softmax": na.softmax, "jacobian": na.softmax_jacobian},
    derivation=lambda: ta.derive_softmax_simplex(3),
    checks=(
        Check("jacobian_vs_sympy", "symbolic", _softmax_symbolic, "form's Jacobian vs SymPy's derivative of the definition"),
        Check("simplex_and_jacobian", "numeric", _softmax_numeric, "vs torch.softmax and autograd, logits up to ±700"),
    ),
    mutants=(
        Mutant("jacobian_diag_only", "dropped term", "Jacobian diag(p) (the −ppᵀ term dropped)",
               {"softmax": na.softmax, "jacobian": lambda p: np.einsum("...i,ij->...ij", p, np.eye(p.shape[-1]))}),
        Mutant("normalise_wrong_axis", "wrong axis", "softmax normalised over the batch axis instead of the token axis",
               {"softmax": lambda L: na.softmax(L, axis=0), "jacobian": na.softmax_jacobian}),
        Mutant("naive_exp", "wrong formula", "exp(l)/Σexp(l) without max-subtraction: overflows at 700",
               {"softmax": lambda L: np.exp(L) / np.exp(L).sum(-1, keepdims=True), "jacobian": na.softmax_jacobian}),
    ),
))


# --------------------------------------------------------------------------------------------
# shared helpers


@contextlib.contextmanager
def _torch_seed(seed: int):
    """Seed torch's global generator (module initialisers use it) without disturbing the caller."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


def _T(a, device="cpu") -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _maxabs(a) -> float:
    a = np.asarray(a, dtype=np.float64)
    return float(np.max(np.abs(a))) if a.size and np.all(np.isfinite(a)) else (0.0 if a.size == 0 else math.inf)


# --------------------------------------------------------------------------------------------
# attn.convex_combination
# form: attention(Q, K, V, *, scale=None) -> (..., N_q, D_v) rows


def _convex_symbolic(form, ctx) -> CheckResult:
    """The form's output row equals the derived y = Σ_t S(l)_t v_t (weights positive, summing to 1)."""
    T, Dv, d = 3, 2, 4
    der = ta.derive_convex_combination(T, Dv)
    y_ref = sp.lambdify([der.facts["logits"], list(der.facts["values"])], der.result, "numpy")
    rng = ctx.rng()
    B = 16
    q, K, V = rng.normal(size=(B, 1, d)), rng.normal(size=(B, T, d)), rng.normal(size=(B, T, Dv))
    L = (q @ _swap(K))[:, 0, :] / math.sqrt(d)  # the sdpa convention 1/√d_k
    with np.errstate(all="ignore"):
        Y = form(q, K, V)
    ref = np.stack([np.asarray(y_ref(L[b], list(V[b].ravel())), dtype=float).reshape(1, Dv) for b in range(B)])
    err = _maxabs(Y - ref)
    return compare(err, 16 * T * EPS * largest(1.0, _maxabs(V)), "float64 rounding of a T-term weighted sum (16·T·eps·max|V|)",
                   seeds=[ctx.seed_for()], sizes={"T": T, "D_v": Dv, "d_k": d, "batch": B},
                   details={"weights_sum": str(der.facts["weights_sum"]), "weights_positive": der.facts["weights_positive"]})


def _attention_inputs(ctx, B, T, d, Dv, logit_scale=1.0):
    rng = ctx.rng(T, Dv, logit_scale)
    return rng.normal(size=(B, T, d)) * logit_scale, rng.normal(size=(B, T, d)), rng.normal(size=(B, T, Dv))


def _convex_lp(form, ctx) -> CheckResult:
    """Every output row lies in the convex hull of the value rows: LP distance (HiGHS) ≈ 0.

    Two regimes: T ≤ D_v (the hull is a simplex in a proper affine subspace, so any weights not
    summing to one leave it) and T > D_v (full-dimensional hull), plus near-one-hot weights
    (logits scaled by 30)."""
    B = ctx.size(3, 8, 32)
    cases = [(5, 6, 4, 1.0), (8, 3, 4, 1.0), (4, 5, 3, 30.0)]
    dists, resid, feas_tol = [], [], 1e-10
    for T, Dv, d, ls in cases:
        Q, K, V = _attention_inputs(ctx, B, T, d, Dv, ls)
        with np.errstate(all="ignore"):
            Y = form(Q, K, V)
        if not np.all(np.isfinite(Y)):
            return compare(math.inf, 0.0, "non-finite output", seeds=[ctx.seed_for(T, Dv, ls)])
        hull = na.convex_hull_distance(Y, V, feas_tol=feas_tol)
        dists.append(float(hull.distance.max()) / largest(1.0, _maxabs(V)))
        resid.append(float(hull.residual.max()))
    Dmax = largest(c[1] for c in cases)
    errs = {f"T{c[0]}_Dv{c[1]}_x{c[3]:g}": e for c, e in zip(cases, dists)}
    return compare(worst(errs), 10 * Dmax * feas_tol,
                   f"LP solver feasibility tolerance {feas_tol:g} per equality row, ×D_v rows ×10 (distance relative to max|V|)",
                   seeds=[ctx.seed_for(c[0], c[1], c[3]) for c in cases], sizes={"batch": B, "cases (T, D_v, d_k, logit scale)": cases},
                   details={"hull_distance": errs, "lp_weights_residual": largest(resid)})


def _convex_vs_sdpa(form, ctx) -> CheckResult:
    """The form is attention itself: it matches torch's scaled_dot_product_attention."""
    B, T, d, Dv = ctx.size(4, 16, 64), 6, 4, 5
    Q, K, V = _attention_inputs(ctx, B, T, d, Dv, 3.0)
    with np.errstate(all="ignore"):
        Y = form(Q, K, V)
    err = _maxabs(Y - na.sdpa(Q, K, V, device=ctx.device))
    return compare(err, 64 * T * EPS * largest(1.0, _maxabs(V)), "float64 rounding of softmax and a T-term sum (64·T·eps·max|V|)",
                   seeds=[ctx.seed_for(T, Dv, 3.0)], sizes={"batch": B, "T": T, "d_k": d, "D_v": Dv}, device=ctx.device)


def _scaled_logits(Q, K):
    return Q @ _swap(K) / math.sqrt(Q.shape[-1])


register(Claim(
    id="attn.convex_combination",
    title="Each attention output row is a convex combination of the value rows",
    statement=r"y_t=\sum_s a_{ts}v_s,\ a_{ts}=S(q_tK^\top/\sqrt{d_k})_s\ge0,\ \sum_s a_{ts}=1\ \Rightarrow\ y_t\in\operatorname{conv}\{v_1,\dots,v_T\}",
    source="lecture notes 000 (stage 1, 'convex combo of tokens'); lecture notes 003 eq. (2); Vaswani et al. (2017)",
    kind="theorem",
    form=na.attention,
    derivation=lambda: ta.derive_convex_combination(3, 2),
    checks=(
        Check("output_vs_sympy", "symbolic", _convex_symbolic, "form vs the derived Σ_t S(l)_t v_t"),
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
))


# --------------------------------------------------------------------------------------------
# attn.causal_mask
# form: causal_attention(Q, K, V, *, scale=None) -> (Y (..., T, D_v), A (..., T, T))


def _causal_symbolic(form, ctx) -> CheckResult:
    """The form's A equals the derived S(L + M) (lower-triangular, rows sum to 1)."""
    T, d = 4, 3
    der = ta.derive_causal_mask(T)
    L_sym = der.facts["logits"]
    A_ref = sp.lambdify([list(L_sym)], der.result, "numpy")
    rng = ctx.rng()
    B = 12
    Q, K, V = rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d)), rng.normal(size=(B, T, 2))
    L = _scaled_logits(Q, K)
    with np.errstate(all="ignore"):
        _, A = form(Q, K, V)
    ref = np.stack([np.asarray(A_ref(list(L[b].ravel())), dtype=float) for b in range(B)])
    return compare(_maxabs(A - ref), 8 * T * EPS, "float64 rounding of a T-term softmax (8·T·eps)",
                   seeds=[ctx.seed_for()], sizes={"T": T, "d_k": d, "batch": B},
                   details={"derived_future_derivatives": "all 0", "derived_row_sums": "all 1"})


def _causal_structure(form, ctx) -> CheckResult:
    """A is lower-triangular with rows summing to 1, its support is torch's causal mask, and output
    t is unchanged when tokens > t are replaced (perturbations of scale 100: extreme logits)."""
    rng = ctx.rng()
    B, T, d, Dv = ctx.size(4, 16, 64), 7, 4, 3
    Q, K, V = rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d)), rng.normal(size=(B, T, Dv))
    with np.errstate(all="ignore"):
        Y, A = form(Q, K, V)
    allowed = _np(torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)) == 0
    errs = {
        "mass_above_diagonal": float(np.abs(np.where(allowed, 0.0, A)).max()),
        "row_sum_minus_one": _maxabs(A.sum(-1) - 1),
        "zero_where_torch_allows": float(np.sum((A == 0) & allowed)),
    }
    fut = 0.0
    for t in range(T - 1):  # replace every token after t; batch over the B sequences
        Qp, Kp, Vp = Q.copy(), K.copy(), V.copy()
        for a in (Qp, Kp, Vp):
            a[:, t + 1:] = rng.normal(scale=100.0, size=a[:, t + 1:].shape)
        with np.errstate(all="ignore"):
            Yp, _ = form(Qp, Kp, Vp)
        fut = largest(fut, _maxabs(Yp[:, : t + 1] - Y[:, : t + 1]))
    errs["future_change"] = fut
    tol = 16 * T * EPS * largest(1.0, _maxabs(V))
    return compare(worst(errs), tol, "float64 rounding of a T-term softmax and sum (16·T·eps·max|V|); masked entries exactly 0",
                   seeds=[ctx.seed_for()], sizes={"batch": B, "T": T, "d_k": d, "D_v": Dv}, details=errs)


def _causal_vs_sdpa(form, ctx) -> CheckResult:
    """Y matches scaled_dot_product_attention(is_causal=True) and MultiheadAttention with torch's mask."""
    rng = ctx.rng()
    B, T, d = ctx.size(4, 16, 64), 6, 4
    Q, K, V = rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d)), rng.normal(size=(B, T, d))
    with np.errstate(all="ignore"):
        Y, _ = form(Q, K, V)
    errs = {"vs_sdpa_is_causal": _maxabs(Y - na.sdpa(Q, K, V, causal=True, device=ctx.device))}
    with _torch_seed(ctx.seed_for("mha")):
        mha = torch.nn.MultiheadAttention(d, 1, bias=False, batch_first=True, dtype=torch.float64).to(ctx.device)
    with torch.no_grad():  # identity projections turn MHA into plain attention on (Q, K, V)
        mha.in_proj_weight.copy_(torch.eye(d, dtype=torch.float64).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(d, dtype=torch.float64))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64, device=ctx.device)
        ref = mha(_T(Q, ctx.device), _T(K, ctx.device), _T(V, ctx.device), attn_mask=mask, need_weights=False)[0]
    errs["vs_multihead_attention_mask"] = _maxabs(Y - _np(ref))
    return compare(worst(errs), 64 * T * EPS * largest(1.0, _maxabs(V)), "float64 rounding (64·T·eps·max|V|)",
                   seeds=[ctx.seed_for(), ctx.seed_for("mha")], sizes={"batch": B, "T": T, "d_k": d}, device=ctx.device, details=errs)


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


register(Claim(
    id="attn.causal_mask",
    title="Causal mask: lower-triangular row-stochastic A; output t ignores tokens after t",
    statement=r"A=S(QK^\top/\sqrt{d_k}+M),\ M_{ts}=\begin{cases}0&s\le t\\-\infty&s>t\end{cases}\Rightarrow A_{ts}=0\ (s>t),\ \sum_sA_{ts}=1,\ \partial y_t/\partial x_s=0\ (s>t)",
    source="lecture notes 001 (masked self-attention table); lecture notes 004 ('masked self-attention layer'); Vaswani et al. (2017)",
    kind="theorem",
    form=na.causal_attention,
    derivation=lambda: ta.derive_causal_mask(3),
    checks=(
        Check("weights_vs_sympy", "symbolic", _causal_symbolic, "form's A vs the derived S(L + M)"),
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
))


# --------------------------------------------------------------------------------------------
# attn.scaling_variance
# form: {"variance": d ↦ Var(q·k), "scale": d ↦ c with Var(c q·k) = 1}


def _variance_symbolic(form, ctx) -> CheckResult:
    """The form's Var(q·k) and scale against the moments SymPy derived (for d_k = 1..256)."""
    der = ta.derive_score_variance()
    d = der.facts["d"]
    var = sp.lambdify(d, der.result["variance"], "numpy")
    scale = sp.lambdify(d, der.result["scale"], "numpy")
    dims = np.arange(1, 257)
    fv = np.array([float(form["variance"](int(k))) for k in dims])
    fs = np.array([float(form["scale"](int(k))) for k in dims])
    errs = {
        "variance_rel": _maxabs(fv / var(dims.astype(float)) - 1),
        "scale_rel": _maxabs(fs / scale(dims.astype(float)) - 1),
        "scaled_variance_minus_1": _maxabs(fs**2 * var(dims.astype(float)) - 1),
    }
    return compare(worst(errs), 8 * EPS, "relative float64 rounding of a square root and a product (8·eps)",
                   sizes={"d_k": "1..256"}, details=dict(errs, derived=str(der.result)))


_DISTS = {"normal": 3.0, "rademacher": 1.0, "uniform": 9.0 / 5.0}  # fourth moment E x⁴ of each entry law


def _variance_mc(form, ctx) -> CheckResult:
    """Monte Carlo: Var(q·k) and Var(c·q·k) for iid zero-mean unit-variance entries (three laws),
    within 5 standard errors; the standard error comes from the sample fourth moment."""
    dims = (1, 4, 16, 64)
    n = ctx.size(20_000, 100_000, 400_000)
    der = ta.derive_score_variance()
    m4sym = sp.lambdify([der.facts["d"], der.facts["mu_4"]], der.result["fourth_moment"], "numpy")
    z, rows, fourth_rel = {}, {}, {}
    for dist, mu4 in _DISTS.items():
        mom = na.dot_product_moments(dims, n, ctx.rng(dist), dist=dist)
        claimed = np.array([float(form["variance"](d)) for d in dims])
        c = np.array([float(form["scale"](d)) for d in dims])
        # a degenerate law (Rademacher at d_k = 1: s² ≡ 1) has SE 0; floor it at float64 rounding
        se = np.maximum(mom.se, 16 * EPS * np.maximum(mom.var, 1.0))
        z[f"{dist}_unscaled"] = _maxabs((mom.var - claimed) / se)
        z[f"{dist}_scaled"] = _maxabs((c**2 * mom.var - 1.0) / (c**2 * se))
        rows[dist] = {"var": mom.var.tolist(), "se": mom.se.tolist()}
        fourth_rel[dist] = (mom.fourth / m4sym(np.asarray(dims, float), mu4) - 1).tolist()
    if ctx.want_figures:
        plt = pyplot()

        fig, ax = plt.subplots(figsize=(5, 3.5))
        for dist in _DISTS:
            ax.errorbar(dims, rows[dist]["var"], yerr=5 * np.asarray(rows[dist]["se"]), fmt="o", capsize=3, label=f"MC {dist} (±5 SE)")
        ax.plot(dims, [float(form["variance"](d)) for d in dims], "k-", label="claimed Var(q·k)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_ylabel("Var(q·k)")
        ax.legend(fontsize=7)
        ctx.save_figure(fig, "variance_vs_dk")
    k = len(z)
    return compare(worst(z), 5.0,
                   f"5 standard errors of the sample variance (SE from the sample 4th moment, floored at 16·eps·var for a "
                   f"degenerate law); {k} comparisons, "
                   f"family-wise false alarm ≈ {k}·5.7e-7 under the normal approximation",
                   seeds=[ctx.seed_for(d) for d in _DISTS], sizes={"samples": n, "d_k": list(dims), "laws": list(_DISTS)},
                   details={"max_abs_z": z, "estimates": rows, "fourth_moment_rel_vs_derived": fourth_rel})


def _variance_sdpa_scale(form, ctx) -> CheckResult:
    """torch's scaled_dot_product_attention uses c = 1/√d_k by default: read c back from its
    weights (log-ratio of two weights over the logit difference) and compare with the form."""
    rng = ctx.rng()
    errs = {}
    for d in (1, 4, 16, 64):
        q, K = rng.normal(size=(1, d)), rng.normal(size=(2, d))
        dl = float(q[0] @ (K[0] - K[1]))
        if abs(dl) < 0.5:  # keep the logit difference away from 0 so the log-ratio is well conditioned
            K[1] = K[0] - np.sign(dl or 1.0) * q[0] / np.linalg.norm(q[0])
            dl = float(q[0] @ (K[0] - K[1]))
        a = na.sdpa(q, K, np.eye(2), device=ctx.device)[0]
        c_torch = math.log(a[0] / a[1]) / dl
        errs[f"d{d}"] = abs(float(form["scale"](d)) / c_torch - 1)
    return compare(worst(errs), 1e-12, "relative rounding of exp/log of O(1) logits, amplified by 1/|logit gap| ≤ 2 (1e-12)",
                   seeds=[ctx.seed_for()], sizes={"d_k": [1, 4, 16, 64]}, device=ctx.device, details=errs)


register(Claim(
    id="attn.scaling_variance",
    title="Var(q·k) = d_k for unit-variance entries; scaling by 1/√d_k gives variance 1",
    statement=r"q,k\in\mathbb R^{d_k},\ \text{entries iid},\ \mathbb E=0,\ \operatorname{Var}=1:\ \operatorname{Var}(q\cdot k)=d_k,\ \operatorname{Var}(q\cdot k/\sqrt{d_k})=1",
    source="Vaswani et al. (2017) §3.2.1 (footnote 4); lecture notes 001, 004 (scaled dot product)",
    kind="theorem",
    form={"variance": lambda d: float(d), "scale": lambda d: 1.0 / math.sqrt(d)},
    derivation=ta.derive_score_variance,
    checks=(
        Check("moments_vs_sympy", "symbolic", _variance_symbolic, "form vs the variance derived from the MGF"),
        Check("monte_carlo", "numeric", _variance_mc, "sample variance within 5 SE, three entry laws"),
        Check("sdpa_default_scale", "numeric", _variance_sdpa_scale, "scale read back from torch's sdpa", uses_device=False),
    ),
    mutants=(
        Mutant("variance_sqrt_dk", "wrong formula", "Var(q·k) = √d_k", {"variance": lambda d: math.sqrt(d), "scale": lambda d: 1.0 / math.sqrt(d)}),
        Mutant("variance_one", "wrong constant", "Var(q·k) = 1 (no growth with d_k)", {"variance": lambda d: 1.0, "scale": lambda d: 1.0 / math.sqrt(d)}),
        Mutant("scale_one_over_dk", "wrong norm", "scale 1/d_k instead of 1/√d_k", {"variance": lambda d: float(d), "scale": lambda d: 1.0 / d}),
        Mutant("variance_dk_minus_1", "wrong constant", "Var(q·k) = d_k − 1 (a sample-variance correction that does not apply)",
               {"variance": lambda d: d - 1.0, "scale": lambda d: 1.0 / math.sqrt(d)}),
    ),
))


# --------------------------------------------------------------------------------------------
# attn.forms_agree (erratum: lecture notes 000's normaliser)
# form: dict of the seed implementations, lecture notes 000's three weight variants, and the renaming


def _plain_corrected(Xc):
    Xc = np.asarray(Xc, dtype=np.float64)
    return na.softmax(_swap(Xc) @ Xc, axis=-2)


_FORMS = {
    "seed002": na.seed002_attention,
    "seed003": na.seed003_attention,
    "seed004": na.seed004_attention,
    "seed000_weights": na.seed000_weights,
    "seed000_weights_shared_u": lambda Xc, U: na.seed000_weights(Xc, U, U),
    "seed000_weights_plain": _plain_corrected,
    "rename": na.rename_row_params,
}
_FORMS_STATED = dict(_FORMS, seed000_weights=na.seed000_weights_as_stated,
                     seed000_weights_shared_u=na.seed000_weights_shared_u_as_stated,
                     seed000_weights_plain=na.seed000_weights_plain_as_stated)


def _forms_outputs(form, X, WQ, WK, WV, d_s):
    """Every seed form's output, mapped to rows (N×D_v), from row-form parameters."""
    r = form["rename"](WQ, WK, WV, d_s)
    Xc = _swap(X)
    with np.errstate(all="ignore"):
        return {
            "seed002": form["seed002"](X, *r["seed002"]),
            "seed003": form["seed003"](X, *r["seed003"]),
            "seed004": _swap(form["seed004"](Xc, *r["seed004"])),
            "seed000": _swap(na.seed000_attention(Xc, *r["seed000"], weights=form["seed000_weights"])),
        }


def _forms_colsums(form, X, WQ, WK):
    Xc = _swap(X)
    with np.errstate(all="ignore"):
        A = {"U_q,U_k": form["seed000_weights"](Xc, WQ.T, WK.T),
             "shared U": form["seed000_weights_shared_u"](Xc, WK.T),
             "plain": form["seed000_weights_plain"](Xc)}
    return {f"colsum_{k}": _maxabs(a.sum(-2) - 1) for k, a in A.items()}


def _forms_symbolic(form, ctx) -> CheckResult:
    """Each form (renamed) vs the map SymPy proved common to all four; lecture notes 000's column sums vs
    the derived 1."""
    N, D, K, Dv = 2, 2, 2, 2
    der = ta.derive_forms_agree(N, D, K, Dv)
    sy = der.facts["symbols"]
    args = [list(sy["X"]), list(sy["W_Q"]), list(sy["W_K"]), list(sy["W_V"])]
    f = sp.lambdify(args, der.result, "numpy")
    rng = ctx.rng()
    d_s, errs = 4.0, {}
    for trial in range(8):
        X, WQ, WK, WV = rng.normal(size=(N, D)), rng.normal(size=(D, K)), rng.normal(size=(D, K)), rng.normal(size=(D, Dv))
        ref = np.asarray(f(list(X.ravel()), list(WQ.ravel()), list(WK.ravel()), list(WV.ravel())), dtype=float)
        for name, out in _forms_outputs(form, X, WQ, WK, WV, d_s).items():
            errs[name] = largest(errs.get(name, 0.0), _maxabs(out - ref))
        for name, e in _forms_colsums(form, X, WQ, WK).items():
            errs[name] = largest(errs.get(name, 0.0), e)
    details = dict(errs, derived_colsum_stated_qk_at_point=der.facts["colsum_stated_qk_at_point"],
                   derived_colsum_stated_shared_u=str(der.facts["colsum_stated_shared_u"]),
                   derived_colsum_stated_plain_at_point=der.facts["colsum_stated_plain_at_point"])
    return compare(worst(errs), 256 * EPS, "float64 rounding of O(1)-sized softmax-weighted sums at N = 2 (256·eps)",
                   seeds=[ctx.seed_for()], sizes={"N": N, "D": D, "K": K, "D_v": Dv, "d_s": d_s, "trials": 8}, details=details)


def _forms_vs_sdpa(form, ctx) -> CheckResult:
    """Each form (renamed) vs torch's scaled_dot_product_attention (scale=1) at larger sizes;
    lecture notes 000's weight matrices column-stochastic."""
    rng = ctx.rng()
    B, N, D, K, Dv, d_s = ctx.size(4, 16, 64), 6, 5, 3, 4, 4.0
    X = rng.normal(size=(B, N, D)) / math.sqrt(D)
    WQ, WK, WV = rng.normal(size=(D, K)), rng.normal(size=(D, K)), rng.normal(size=(D, Dv))
    ref = na.sdpa(X @ WQ, X @ WK, X @ WV, scale=1.0, device=ctx.device)
    errs = {name: _maxabs(out - ref) for name, out in _forms_outputs(form, X, WQ, WK, WV, d_s).items()}
    errs.update(_forms_colsums(form, X, WQ, WK))
    scale = largest(1.0, _maxabs(X @ WV))
    return compare(worst(errs), 64 * N * EPS * scale, "float64 rounding of an N-term softmax-weighted sum (64·N·eps·max|V|)",
                   seeds=[ctx.seed_for()], sizes={"batch": B, "N": N, "D": D, "K": K, "D_v": Dv, "d_s": d_s},
                   device=ctx.device, details=errs)


def _swapped_seed002(X, W_Q, W_K, W_V):
    X = np.asarray(X, dtype=np.float64)
    return na.softmax(X @ W_K @ W_Q.T @ _swap(X), axis=-1) @ X @ W_V


def _rowwise_seed004(Xc, W_h, W_b, W_c, d_s):
    Xc = np.asarray(Xc, dtype=np.float64)
    return W_h @ Xc @ na.softmax(_swap(Xc) @ W_b.T @ W_c @ Xc / math.sqrt(d_s), axis=-1)


def _rename_no_sqrt(W_Q, W_K, W_V, d_s):
    r = na.rename_row_params(W_Q, W_K, W_V, d_s)
    r["seed004"] = (W_V.T, W_K.T, W_Q.T, d_s)
    return r


register(Claim(
    id="attn.forms_agree",
    title="The seeds' four attention formulas are one map (lecture notes 000's normaliser corrected)",
    statement=r"S(XW_QW_K^\top X^\top)XW_V=\operatorname{Softmax}(QK^\top)V=\big(W_hX_c\Psi(X_c^\top W_b^\top W_cX_c/\sqrt{d_s})\big)^\top=(U_vX_cA)^\top,\ A_{n,n'}=\frac{e^{\langle U_kx_n,U_qx_{n'}\rangle}}{\sum_\ell e^{\langle U_kx_\ell,U_qx_{n'}\rangle}}",
    source="lecture notes 000, 002, 003, 004; agrees with torch.nn.functional.scaled_dot_product_attention",
    kind="erratum",
    form=_FORMS,
    stated=_FORMS_STATED,
    stated_statement=r"A_{n,n'}=\frac{e^{\langle U_kx_n,U_qx_{n'}\rangle}}{\sum_\ell e^{\langle U_kx_{n'},U_qx_\ell\rangle}}\ \text{(and } \frac{e^{\langle x_n,x_{n'}\rangle}}{\sum_\ell e^{\langle x_n,x_\ell\rangle}},\ \frac{e^{\langle Ux_n,Ux_{n'}\rangle}}{\sum_\ell e^{\langle Ux_{n'},Ux_\ell\rangle}}\text{)},\ \sum_{n'}A_{n',n}=1",
    notes=("Lecture notes 000 states three normalisers. Derived: the U_q,U_k variant's columns do not sum to 1 (the bug); "
           "the plain variant is row- not column-stochastic (also wrong for Y = XA); the shared-U variant is in fact "
           "column-stochastic because <Ux,Ux'> is symmetric, so its stated form is harmless."),
    derivation=lambda: ta.derive_forms_agree(2, 2, 2, 2),
    checks=(
        Check("forms_vs_sympy", "symbolic", _forms_symbolic, "every form vs the map SymPy proved common; lecture notes 000 column sums"),
        Check("forms_vs_sdpa", "numeric", _forms_vs_sdpa, "every form vs torch sdpa (scale=1); column sums", uses_device=False),
    ),
    mutants=(
        Mutant("seed004_rowwise_softmax", "wrong axis", "lecture notes 004's Ψ applied row-wise", dict(_FORMS, seed004=_rowwise_seed004)),
        Mutant("rename_without_sqrt_ds", "wrong constant", "renaming W_c = W_Qᵀ (the √d_s is not absorbed)", dict(_FORMS, rename=_rename_no_sqrt)),
        Mutant("seed002_swapped_qk", "swapped index", "S(X W_K W_Qᵀ Xᵀ): query and key swapped", dict(_FORMS, seed002=_swapped_seed002)),
        Mutant("seed000_row_stochastic", "wrong axis", "lecture notes 000's A normalised over n' (rows) instead of n (columns)",
               dict(_FORMS, seed000_weights=lambda Xc, U_q, U_k: na.softmax(_swap(U_k @ Xc) @ (U_q @ Xc), axis=-1))),
    ),
))


# --------------------------------------------------------------------------------------------
# attn.mhsa_sum_equals_concat
# form: {"concat", "sum", "concat_to_sum", "from_torch", "concat_width"}


def _mhsa_symbolic(form, ctx) -> CheckResult:
    """Concat and sum forms vs the map SymPy proved equal (N=2, D=2, K=1, M=2); width vs M·D_v."""
    N, D, K, M = 2, 2, 1, 2
    der = ta.derive_mhsa_sum_concat(N, D, K, M)
    sy = der.facts["symbols"]
    args = [list(sy["X"])] + [list(w) for w in sy["W_Q"] + sy["W_K"] + sy["W_V"]] + [list(sy["W_O"])]
    f = sp.lambdify(args, der.result, "numpy")
    rng = ctx.rng()
    errs = {"concat": 0.0, "sum": 0.0}
    for _ in range(8):
        X = rng.normal(size=(N, D))
        Wq, Wk, Wv = rng.normal(size=(M, D, K)), rng.normal(size=(M, D, K)), rng.normal(size=(M, D, K))
        Wo = rng.normal(size=(M * K, D))
        ref = np.asarray(f(list(X.ravel()), *[list(w.ravel()) for w in (*Wq, *Wk, *Wv)], list(Wo.ravel())), dtype=float)
        with np.errstate(all="ignore"):
            errs["concat"] = largest(errs["concat"], _maxabs(form["concat"](X, Wq, Wk, Wv, Wo, scale=1.0) - ref))
            errs["sum"] = largest(errs["sum"], _maxabs(_swap(form["sum"](X.T, *form["concat_to_sum"](Wq, Wk, Wv, Wo))) - ref))
    width = der.facts["width"]
    wsyms = {s.name: s for s in width.free_symbols}
    errs["width"] = largest(abs(int(form["concat_width"](m, dv)) - int(width.subs({wsyms["M"]: m, wsyms["D_v"]: dv})))
                        for m in (1, 2, 3, 8) for dv in (1, 4, 7))
    return compare(worst(errs), 256 * EPS, "float64 rounding of O(1) sums at N = 2 (256·eps); the width is an exact integer",
                   seeds=[ctx.seed_for()], sizes={"N": N, "D": D, "K": K, "M": M, "trials": 8}, details=errs)


def _mhsa_vs_torch(form, ctx) -> CheckResult:
    """torch.nn.MultiheadAttention (float64, with and without biases) vs the form's concat and
    sum forms on the mapped weights; the concat width vs out_proj.in_features."""
    configs = [(8, 2), (12, 3), (6, 6), (5, 1)] + ctx.size([], [(16, 4), (24, 8)])
    B, N = ctx.size(2, 8, 32), 5
    errs, rng = {}, ctx.rng()
    for E, H in configs:
        for bias in (False, True):
            with _torch_seed(ctx.seed_for(E, H, bias)):  # initialise on the CPU generator, then move
                mha = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True, dtype=torch.float64).to(ctx.device)
            X = rng.normal(size=(B, N, E))
            Xt = _T(X, ctx.device)
            with torch.no_grad():
                ref = _np(mha(Xt, Xt, Xt, need_weights=False)[0])
            p = form["from_torch"](mha)
            with np.errstate(all="ignore"):
                errs[f"concat_E{E}_H{H}_bias{int(bias)}"] = _maxabs(form["concat"](X, **p) - ref)
                if not bias:
                    U = form["concat_to_sum"](p["W_q"], p["W_k"], p["W_v"], p["W_o"])
                    errs[f"sum_E{E}_H{H}"] = _maxabs(_swap(form["sum"](_swap(X), *U)) - ref)
            errs[f"width_E{E}_H{H}"] = float(abs(int(form["concat_width"](H, E // H)) - mha.out_proj.in_features))
    Emax = largest(c[0] for c in configs)
    return compare(worst(errs), 64 * (N + Emax) * EPS * math.sqrt(Emax),
                   "float64 rounding of E- and N-term sums with O(√E) outputs (64·(N+E)·eps·√E); widths exact",
                   seeds=[ctx.seed_for(), *(ctx.seed_for(E, H, b) for E, H in configs for b in (False, True))],
                   sizes={"batch": B, "N": N, "(E, heads)": configs}, device=ctx.device, details=errs)


def _from_torch_qk_swapped(mha):
    p = na.mha_to_concat(mha)
    s = 1.0 / math.sqrt(mha.head_dim)
    p["W_q"], p["W_k"] = p["W_k"] * s, p["W_q"] / s
    if "b_q" in p:
        p["b_q"], p["b_k"] = p["b_k"] * s, p["b_q"] / s
    return p


def _concat_to_sum_reversed(W_q, W_k, W_v, W_o):
    Uq, Uk, Uv, Up = na.concat_to_sum(W_q, W_k, W_v, W_o)
    return Uq, Uk, Uv, Up[::-1]


def _sum_row_softmax(Xc, U_q, U_k, U_v, U_p):
    Xc = np.asarray(Xc, dtype=np.float64)[..., None, :, :]
    A = na.softmax(_swap(np.asarray(U_k) @ Xc) @ (np.asarray(U_q) @ Xc), axis=-1)
    return (np.asarray(U_p) @ np.asarray(U_v) @ Xc @ A).sum(-3)


_MHSA_FORM = {"concat": na.mhsa_concat, "sum": na.mhsa_sum_columns, "concat_to_sum": na.concat_to_sum,
              "from_torch": na.mha_to_concat, "concat_width": lambda M, Dv: M * Dv}

register(Claim(
    id="attn.mhsa_sum_equals_concat",
    title="Lecture notes 000's sum over heads = lecture notes 003's Concat·W_O = torch MultiheadAttention",
    statement=r"\Big(\sum_{h=1}^M U_{p,h}U_{v,h}X_cA_h\Big)^\top=\operatorname{Concat}(H_1,\dots,H_M)W^{(o)},\ W^{(o)}=\begin{bmatrix}U_{p,1}^\top\\\vdots\\U_{p,M}^\top\end{bmatrix},\ \operatorname{Concat}\in\mathbb R^{N\times MD_v}",
    source="lecture notes 000 (MHSA), lecture notes 003 §2.2, lecture notes 001 (width n·d_h); torch.nn.MultiheadAttention",
    kind="identity",
    form=_MHSA_FORM,
    derivation=lambda: ta.derive_mhsa_sum_concat(2, 2, 1, 2),
    checks=(
        Check("forms_vs_sympy", "symbolic", _mhsa_symbolic, "both forms vs the SymPy-proved map; width vs Σ_h D_v"),
        Check("vs_torch_mha", "numeric", _mhsa_vs_torch, "vs torch.nn.MultiheadAttention through the weight mapping", uses_device=False),
    ),
    mutants=(
        Mutant("from_torch_qk_swapped", "swapped index", "mapping reads the key block of in_proj_weight as the query block",
               dict(_MHSA_FORM, from_torch=_from_torch_qk_swapped)),
        Mutant("from_torch_no_scale", "dropped term", "mapping forgets torch's 1/√d_h score scale",
               dict(_MHSA_FORM, from_torch=lambda m: dict(na.mha_to_concat(m, absorb_scale=False), scale=1.0))),
        Mutant("heads_reversed_in_wo", "swapped index", "U_{p,h} taken from the blocks of W_O in reverse head order",
               dict(_MHSA_FORM, concat_to_sum=_concat_to_sum_reversed)),
        Mutant("width_without_heads", "wrong formula", "concatenation width D_v instead of M·D_v",
               dict(_MHSA_FORM, concat_width=lambda M, Dv: Dv)),
        Mutant("sum_row_softmax", "wrong axis", "sum form with row-stochastic A_h (softmax over n')", dict(_MHSA_FORM, sum=_sum_row_softmax)),
    ),
))


# --------------------------------------------------------------------------------------------
# attn.permutation_equivariance
# form: {"block": block(X, params, *, causal) -> X', "relation": "equivariant" | "invariant",
#        "broken_by": set of {"positional_encoding", "causal_mask"}}

_SETTINGS = ("plain", "positional_encoding", "causal_mask")


def _relation_residual(relation, fX, fPX, perm):
    """‖f(PX) − P f(X)‖ (equivariant) or ‖f(PX) − f(X)‖ (invariant), per batch element."""
    target = np.take_along_axis(fX, perm[..., None], axis=-2) if relation == "equivariant" else fX
    return np.abs(fPX - target).reshape(len(fX), -1).max(-1)


def _equivariance_verdicts(form, apply, X, perm, pe):
    """Residuals of the claimed relation in the three settings; ``apply(X, causal)`` runs the block."""
    PX = np.take_along_axis(X, perm[..., None], axis=-2)
    PE = np.broadcast_to(pe, X.shape)
    out = {}
    with np.errstate(all="ignore"):
        out["plain"] = _relation_residual(form["relation"], apply(X, False), apply(PX, False), perm)
        out["positional_encoding"] = _relation_residual(form["relation"], apply(X + PE, False), apply(PX + PE, False), perm)
        out["causal_mask"] = _relation_residual(form["relation"], apply(X, True), apply(PX, True), perm)
    return out


def _equivariance_score(form, residuals, scale, N, D):
    """Each setting in units of its threshold: a setting claimed to keep the relation needs a
    residual within rounding (tol_eq); one claimed to break it needs a residual ≥ thr_break
    (a counterexample). Score ≤ 1 means the claim holds in that setting."""
    tol_eq = 64 * N * D * EPS * scale
    thr_break = 1e-6 * scale
    score, shown = {}, {}
    for s in _SETTINGS:
        r = residuals[s]
        claimed_kept = s == "plain" or s not in form["broken_by"]
        if claimed_kept:
            score[s] = float(np.max(r)) / tol_eq if np.all(np.isfinite(r)) else math.inf
        else:
            score[s] = thr_break / largest(float(np.max(r)), 1e-300)
        shown[s] = {"max_residual": float(np.max(r)), "claimed": "kept" if claimed_kept else "broken"}
    return score, shown, tol_eq, thr_break


def _perm_batch(rng, B, N):
    perm = np.stack([rng.permutation(N) for _ in range(B)])
    perm[0] = np.r_[1, 0, np.arange(2, N)]  # the simplest counterexample: swap the first two tokens
    return perm


def _perm_symbolic(form, ctx) -> CheckResult:
    """The form's claims vs the derivation: equivariance for every permutation (N = 3), broken by a
    causal mask and by an added positional encoding (exact counterexamples)."""
    der = ta.derive_permutation_equivariance(3)
    derived_broken = {s for s, key in (("causal_mask", "breaks_with_causal_mask"),
                                       ("positional_encoding", "breaks_with_positional_encoding")) if der.result[key]}
    wrong = []
    if der.result["equivariant"] and form["relation"] != "equivariant":
        wrong.append(f"relation {form['relation']!r} but SymPy derives equivariance")
    for s in sorted(derived_broken ^ set(form["broken_by"])):
        wrong.append(f"{s}: claimed {'broken' if s in form['broken_by'] else 'kept'}, derived {'broken' if s in derived_broken else 'kept'}")
    return compare(len(wrong), 0, "exact: the claimed truth table must equal the derived one",
                   sizes={"N": 3}, details={"disagreements": wrong, "causal_counterexample": der.facts["causal_counterexample"],
                                            "pe_counterexample": der.facts["pe_counterexample"]})


def _perm_numeric(form, ctx) -> CheckResult:
    """Our block (attention + LayerNorm + MLP) on random inputs and permutations: the claimed
    relation holds to rounding without PE/mask; each claimed breaker yields a counterexample."""
    rng = ctx.rng()
    B, N, D, M, F = ctx.size(6, 16, 64), 6, 8, 2, 16
    p = na.random_block_params(rng, D, M, F)
    X = rng.normal(size=(B, N, D))
    perm = _perm_batch(rng, B, N)
    pe = na.sinusoidal_pe(np.arange(N), D)
    res = _equivariance_verdicts(form, lambda Z, causal: form["block"](Z, p, causal=causal), X, perm, pe)
    with np.errstate(all="ignore"):
        scale = largest(1.0, _maxabs(form["block"](X, p)))
    score, shown, tol_eq, thr = _equivariance_score(form, res, scale if math.isfinite(scale) else 1.0, N, D)
    return compare(worst(score), 1.0, f"residual / threshold: kept ⇒ ≤ 64·N·D·eps·scale = {tol_eq:.2g}; broken ⇒ ≥ {thr:.2g} (1e-6·scale)",
                   seeds=[ctx.seed_for()], sizes={"batch": B, "N": N, "D": D, "heads": M, "mlp width": F},
                   details={"settings": shown, "score": score, "swap_counterexample_residual": {s: float(r[0]) for s, r in res.items()}})


def _perm_torch(form, ctx) -> CheckResult:
    """The claims on torch.nn.TransformerEncoderLayer (pre- and post-LN, dropout 0, float64):
    causal via src_mask + is_causal, PE = sinusoidal encoding added to the input; and the form's
    block, given the pre-LN layer's weights, reproduces that layer's outputs to rounding."""
    rng = ctx.rng()
    B, N, D, M, F = ctx.size(4, 16, 64), 6, 8, 2, 16
    X = rng.normal(size=(B, N, D))
    perm = _perm_batch(rng, B, N)
    pe = na.sinusoidal_pe(np.arange(N), D)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(N, dtype=torch.float64, device=ctx.device)
    score, shown = {}, {}
    for norm_first in (True, False):
        with _torch_seed(ctx.seed_for(norm_first)):
            layer = torch.nn.TransformerEncoderLayer(D, M, dim_feedforward=F, dropout=0.0, batch_first=True,
                                                     norm_first=norm_first, dtype=torch.float64).to(ctx.device).eval()

        def apply(Z, causal, layer=layer):
            with torch.no_grad():
                kw = {"src_mask": mask, "is_causal": True} if causal else {}
                return _np(layer(_T(Z, ctx.device), **kw))

        res = _equivariance_verdicts(form, apply, X, perm, pe)
        ref = apply(X, False)
        sc, sh, tol_eq, thr = _equivariance_score(form, res, largest(1.0, _maxabs(ref)), N, D)
        tag = "pre_ln" if norm_first else "post_ln"
        score.update({f"{tag}_{k}": v for k, v in sc.items()})
        shown[tag] = sh
        if norm_first:  # the form's block is the pre-LN layer: same weights, same outputs
            with np.errstate(all="ignore"):
                mine = form["block"](X, na.encoder_layer_to_block(layer))
            score["block_vs_torch_pre_ln"] = _maxabs(mine - ref) / tol_eq if np.all(np.isfinite(mine)) else math.inf
    return compare(worst(score), 1.0, "residual / threshold as in the numeric check (rounding-level vs 1e-6·scale)",
                   seeds=[ctx.seed_for(), ctx.seed_for(True), ctx.seed_for(False)], sizes={"batch": B, "N": N, "D": D, "heads": M},
                   device=ctx.device, details={"settings": shown, "score": score})


def _block_with_position(X, p, *, causal=False):
    Y = na.block_pre_ln(X, p, causal=causal)
    return Y + 0.5 * na.sinusoidal_pe(np.arange(Y.shape[-2]), Y.shape[-1])


def _block_token_mixing(X, p, *, causal=False):
    Y = na.block_pre_ln(X, p, causal=causal)
    return Y + np.cumsum(Y, axis=-2) / np.arange(1, Y.shape[-2] + 1)[:, None]


_PERM_FORM = {"block": na.block_pre_ln, "relation": "equivariant", "broken_by": frozenset({"positional_encoding", "causal_mask"})}

register(Claim(
    id="attn.permutation_equivariance",
    title="A block without PE or mask is permutation-equivariant; PE or a causal mask breaks it",
    statement=r"f(PX)=Pf(X)\ \forall P\ \text{(attention + LayerNorm + MLP, no PE, no mask)};\ \exists X,P:\ f(PX+E)\ne Pf(X+E),\ f_{\text{causal}}(PX)\ne Pf_{\text{causal}}(X)",
    source="lecture notes 003 §3; lecture notes 004 (poll: order is ignored); lecture notes 001 ('position-invariant')",
    kind="theorem",
    form=_PERM_FORM,
    derivation=lambda: ta.derive_permutation_equivariance(3),
    checks=(
        Check("truth_table_vs_sympy", "symbolic", _perm_symbolic, "claimed relation and breakers vs the derivation"),
        Check("block_permutations", "numeric", _perm_numeric, "our block: relation to rounding; counterexamples with PE and mask"),
        Check("torch_encoder_layer", "numeric", _perm_torch, "the same on torch.nn.TransformerEncoderLayer", uses_device=False),
    ),
    mutants=(
        Mutant("claims_pe_keeps_equivariance", "wrong formula", "claims positional encodings keep equivariance",
               dict(_PERM_FORM, broken_by=frozenset({"causal_mask"}))),
        Mutant("claims_mask_keeps_equivariance", "wrong formula", "claims a causal mask keeps equivariance",
               dict(_PERM_FORM, broken_by=frozenset({"positional_encoding"}))),
        Mutant("claims_invariance", "wrong formula", "claims invariance f(PX) = f(X) instead of equivariance", dict(_PERM_FORM, relation="invariant")),
        Mutant("block_hidden_position", "extra term", "a block that adds a positional term internally", dict(_PERM_FORM, block=_block_with_position)),
        Mutant("block_token_mixing", "wrong axis", "a running mean over tokens instead of a token-wise map", dict(_PERM_FORM, block=_block_token_mixing)),
    ),
))


# --------------------------------------------------------------------------------------------
# attn.layernorm
# form: layernorm(X, eps=0.0, gamma=None, beta=None), over the last axis


def _ln_inputs(ctx, B, N, D):
    rng = ctx.rng(B, N, D)
    mu = rng.uniform(-10, 10, size=(B, N, 1))
    sd = np.exp(rng.uniform(np.log(0.1), np.log(10.0), size=(B, N, 1)))
    return mu + sd * rng.normal(size=(B, N, D)), float(np.max(np.abs(mu) / sd))


def _ln_symbolic(form, ctx) -> CheckResult:
    """The form's per-token mean and population variance vs the derived 0 and v/(v+ε)."""
    der = ta.derive_layernorm(3)
    var_ref = sp.lambdify([der.facts["v"], der.facts["eps"]], der.result["variance"], "numpy")
    B, N, D = 4, 5, 16
    X, cond = _ln_inputs(ctx, B, N, D)
    v = X.var(axis=-1)  # population variance (ddof 0), NumPy's own
    errs = {}
    for eps in (0.0, 1e-3, 0.1, 1.0):
        with np.errstate(all="ignore"):
            Z = form(X, eps)
        errs[f"mean_eps{eps:g}"] = _maxabs(Z.mean(-1))
        errs[f"var_eps{eps:g}"] = _maxabs(Z.var(-1) - var_ref(v, eps))
    return compare(worst(errs), 32 * D * EPS * (1 + cond), "float64 rounding, amplified by cancellation |μ|/σ (32·D·eps·(1 + max|μ|/σ))",
                   seeds=[ctx.seed_for(B, N, D)], sizes={"batch": B, "tokens": N, "D": D, "max |mean|/sd": cond}, details=errs)


def _ln_vs_torch(form, ctx) -> CheckResult:
    """vs torch.nn.LayerNorm (random weight and bias, several ε) and F.layer_norm with ε = 0."""
    B, N, D = ctx.size(4, 16, 64), 5, 12
    X, cond = _ln_inputs(ctx, B, N, D)
    rng = ctx.rng("affine")
    errs = {}
    Xt = _T(X, ctx.device)
    for eps in (1e-5, 0.1, 1.0):
        ln = torch.nn.LayerNorm(D, eps=eps, dtype=torch.float64, device=ctx.device)
        g, b = 1 + 0.5 * rng.normal(size=D), 0.5 * rng.normal(size=D)
        with torch.no_grad():
            ln.weight.copy_(_T(g)), ln.bias.copy_(_T(b))
            ref = _np(ln(Xt))
        with np.errstate(all="ignore"):
            errs[f"LayerNorm_eps{eps:g}"] = _maxabs(form(X, eps, g, b) - ref)
    with torch.no_grad():
        ref0 = _np(torch.nn.functional.layer_norm(Xt, (D,), eps=0.0))
    with np.errstate(all="ignore"):
        errs["layer_norm_eps0"] = _maxabs(form(X) - ref0)
    return compare(worst(errs), 32 * D * EPS * (1 + cond) * 3, "float64 rounding × cancellation |μ|/σ × max|γ| (32·D·eps·(1+max|μ|/σ)·3)",
                   seeds=[ctx.seed_for(B, N, D), ctx.seed_for("affine")], sizes={"batch": B, "tokens": N, "D": D},
                   device=ctx.device, details=errs)


def _ln_mutant(axis=-1, ddof=0, eps_outside=False, center=True, affine_inside=False):
    def f(X, eps=0.0, gamma=None, beta=None):
        X = np.asarray(X, dtype=np.float64)
        mu = X.mean(axis=axis, keepdims=True) if center else 0.0
        sd2 = X.var(axis=axis, keepdims=True, ddof=ddof)
        Z = (X - mu) / (np.sqrt(sd2) + eps if eps_outside else np.sqrt(sd2 + eps))
        g = 1.0 if gamma is None else gamma
        b = 0.0 if beta is None else beta
        return g * (Z + b) if affine_inside else g * Z + b
    return f


register(Claim(
    id="attn.layernorm",
    title="LayerNorm gives each token mean 0 and variance 1; with ε and affine it is torch.nn.LayerNorm",
    statement=r"\operatorname{LN}(x)_l=\frac{x_l-\mu}{\sqrt{v+\varepsilon}},\ \mu=\tfrac1D\sum_lx_l,\ v=\tfrac1D\sum_l(x_l-\mu)^2:\ \operatorname{mean}=0,\ \operatorname{var}=\tfrac{v}{v+\varepsilon}\ (=1\text{ at }\varepsilon=0);\ \gamma\odot\operatorname{LN}(x)+\beta=\texttt{torch.nn.LayerNorm}",
    source="lecture notes 000 (token normalisation); lecture notes 001, 004; Ba, Kiros, Hinton (2016)",
    kind="theorem",
    form=na.layernorm,
    derivation=lambda: ta.derive_layernorm(3),
    checks=(
        Check("moments_vs_sympy", "symbolic", _ln_symbolic, "output mean and variance vs the derived 0 and v/(v+ε)"),
        Check("vs_torch_layernorm", "numeric", _ln_vs_torch, "vs torch.nn.LayerNorm and F.layer_norm", uses_device=False),
    ),
    mutants=(
        Mutant("sample_variance", "wrong constant", "variance with 1/(D−1) (ddof=1) instead of 1/D", _ln_mutant(ddof=1)),
        Mutant("token_axis", "wrong axis", "normalised over the token axis instead of the feature axis", _ln_mutant(axis=-2)),
        Mutant("eps_outside_sqrt", "wrong formula", "(x − μ)/(σ + ε) instead of (x − μ)/√(σ² + ε)", _ln_mutant(eps_outside=True)),
        Mutant("no_centering", "dropped term", "the mean is not subtracted", _ln_mutant(center=False)),
        Mutant("affine_inside", "wrong formula", "γ(x̂ + β) instead of γx̂ + β", _ln_mutant(affine_inside=True)),
    ),
))


# --------------------------------------------------------------------------------------------
# attn.block_recipe (erratum: lecture notes 000's last line)
# form: {"pre_ln": block(X, p, *, causal), "post_ln": block(X, p, *, causal)}


def _torch_ln(ln):
    g, b, e = ln
    return lambda Z: _np(torch.nn.functional.layer_norm(_T(Z), (Z.shape[-1],), _T(g), _T(b), e))


def _block_symbolic(form, ctx) -> CheckResult:
    """With both branches switched off (W_O = 0, last MLP layer = 0) the derivation says pre-LN is
    the identity and post-LN is LN_2(LN_1(x)); evaluated with torch's layer_norm as LN."""
    der = ta.derive_block_recipe()
    x, fns = der.facts["x"], der.facts["functions"]
    rng = ctx.rng()
    B, N, D, M, F = 3, 5, 8, 2, 16
    p = na.random_block_params(rng, D, M, F).zero_branches()
    X = rng.normal(size=(B, N, D)) * 2 + 1
    mods = [{"LN_1": _torch_ln(p.ln1), "LN_2": _torch_ln(p.ln2)}, "numpy"]
    errs = {}
    for name in ("pre_ln", "post_ln"):
        ref = sp.lambdify(x, der.result[name], modules=mods)(X)
        ref = np.broadcast_to(ref, X.shape)
        with np.errstate(all="ignore"):
            errs[name] = _maxabs(form[name](X, p) - ref)
    return compare(worst(errs), 64 * D * EPS * largest(1.0, _maxabs(X)), "float64 rounding of two LayerNorms (64·D·eps·max|x|)",
                   seeds=[ctx.seed_for()], sizes={"batch": B, "N": N, "D": D}, details=dict(errs, derived={k: str(v) for k, v in der.result.items()}))


def _block_vs_torch(form, ctx) -> CheckResult:
    """pre_ln vs TransformerEncoderLayer(norm_first=True), post_ln vs norm_first=False (ReLU,
    dropout 0, float64, LayerNorm weights perturbed so the mapping is exercised), with and without
    the causal mask."""
    rng = ctx.rng()
    B, N, D, M, F = ctx.size(3, 8, 32), 6, 8, 2, 16
    X = rng.normal(size=(B, N, D))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(N, dtype=torch.float64, device=ctx.device)
    errs = {}
    for norm_first, name in ((True, "pre_ln"), (False, "post_ln")):
        with _torch_seed(ctx.seed_for(norm_first)):
            layer = torch.nn.TransformerEncoderLayer(D, M, dim_feedforward=F, dropout=0.0, batch_first=True,
                                                     norm_first=norm_first, dtype=torch.float64).eval()
            with torch.no_grad():
                for n in (layer.norm1, layer.norm2):
                    n.weight.add_(0.3 * torch.randn(D, dtype=torch.float64))
                    n.bias.add_(0.3 * torch.randn(D, dtype=torch.float64))
            layer = layer.to(ctx.device)
        p = na.encoder_layer_to_block(layer)
        for causal in (False, True):
            with torch.no_grad():
                kw = {"src_mask": mask, "is_causal": True} if causal else {}
                ref = _np(layer(_T(X, ctx.device), **kw))
            with np.errstate(all="ignore"):
                errs[f"{name}{'_causal' if causal else ''}"] = _maxabs(form[name](X, p, causal=causal) - ref)
    return compare(worst(errs), 64 * (D + F + N) * EPS * 10, "float64 rounding through attention, two LayerNorms and the MLP "
                   "(64·(D+F+N)·eps·10, outputs O(10))", seeds=[ctx.seed_for(), ctx.seed_for(True), ctx.seed_for(False)],
                   sizes={"batch": B, "N": N, "D": D, "heads": M, "mlp width": F}, device=ctx.device, details=errs)


def _pre_ln_no_second_residual(X, p, *, causal=False):
    y = np.asarray(X) + na.mhsa_concat(na.layernorm(X, p.ln1[2], *p.ln1[:2]), causal=causal, **p.attn)
    return na.mlp(na.layernorm(y, p.ln2[2], *p.ln2[:2]), *p.mlp)


def _pre_ln_normalised_stream(X, p, *, causal=False):
    xn = na.layernorm(X, p.ln1[2], *p.ln1[:2])
    y = xn + na.mhsa_concat(xn, causal=causal, **p.attn)
    return y + na.mlp(na.layernorm(y, p.ln2[2], *p.ln2[:2]), *p.mlp)


def _post_ln_no_final_norm(X, p, *, causal=False):
    X = np.asarray(X)
    y = na.layernorm(X + na.mhsa_concat(X, causal=causal, **p.attn), p.ln1[2], *p.ln1[:2])
    return y + na.mlp(y, *p.mlp)


def _swap_norms(block):
    return lambda X, p, *, causal=False: block(X, replace(p, ln1=p.ln2, ln2=p.ln1), causal=causal)


_BLOCK_FORM = {"pre_ln": na.block_pre_ln, "post_ln": na.block_post_ln}

register(Claim(
    id="attn.block_recipe",
    title="Transformer block: pre-LN residual x' = y + MLP(LN y) (lecture notes 000 corrected) and post-LN",
    statement=r"\text{pre-LN: }y=x+\operatorname{MHSA}(\operatorname{LN}_1x),\ x'=y+\operatorname{MLP}(\operatorname{LN}_2y);\quad\text{post-LN: }y=\operatorname{LN}_1(x+\operatorname{MHSA}x),\ x'=\operatorname{LN}_2(y+\operatorname{MLP}y)",
    source="lecture notes 000 (final recipe); lecture notes 001, 003 (LayerNorm after the sub-layer); Vaswani et al. (2017); Xiong et al. (2020)",
    kind="erratum",
    form=_BLOCK_FORM,
    stated={"pre_ln": na.block_pre_ln_as_stated, "post_ln": na.block_post_ln},
    stated_statement=r"y=x+\operatorname{MHSA}(\bar x),\ \bar y=\operatorname{LayerNorm}(y),\ x^{(m)}=\bar y+\operatorname{MLP}(y)",
    notes=("Lecture notes 000's last line adds the normalised ȳ and feeds the un-normalised y to the MLP; as stated, switching the "
           "MLP off gives LN(y), not y, so it is not a residual update. Lecture notes 001's recipe is post-LN (LayerNorm after "
           "each sub-layer, its step 2 without a residual); lecture notes 003's layer MLP(Y(X) + X) has no LayerNorm. Both torch "
           "variants (norm_first True/False) are checked."),
    derivation=ta.derive_block_recipe,
    checks=(
        Check("zero_branches_vs_sympy", "symbolic", _block_symbolic, "branches off: pre-LN is the identity, post-LN is LN₂∘LN₁"),
        Check("vs_torch_encoder_layer", "numeric", _block_vs_torch, "vs torch.nn.TransformerEncoderLayer (norm_first True/False)", uses_device=False),
    ),
    mutants=(
        Mutant("pre_ln_no_second_residual", "dropped term", "x' = MLP(LN₂ y): the second residual is dropped", dict(_BLOCK_FORM, pre_ln=_pre_ln_no_second_residual)),
        Mutant("pre_ln_normalised_stream", "wrong formula", "the residual stream carries LN₁(x) instead of x", dict(_BLOCK_FORM, pre_ln=_pre_ln_normalised_stream)),
        Mutant("post_ln_no_final_norm", "dropped term", "post-LN without the second LayerNorm", dict(_BLOCK_FORM, post_ln=_post_ln_no_final_norm)),
        Mutant("norms_swapped", "swapped index", "LN₁'s parameters used for LN₂ and vice versa", dict(_BLOCK_FORM, pre_ln=_swap_norms(na.block_pre_ln))),
        Mutant("post_ln_is_pre_ln", "wrong formula", "the post-LN variant computed as pre-LN", dict(_BLOCK_FORM, post_ln=na.block_pre_ln)),
    ),
))


# --------------------------------------------------------------------------------------------
# attn.complexity
# form: {"score_cost": (N, K, D) -> MACs, "head_cost": (N, K, D) -> MACs}; FLOPs = 2·MACs


def _cost_symbolic(form, ctx) -> CheckResult:
    """The form's cost polynomials vs the sums SymPy evaluated from the definition, on a grid."""
    der = ta.derive_complexity()
    Ns, Ks, Ds = der.facts["N"], der.facts["K"], der.facts["D"]
    ref = {k: sp.lambdify([Ns, Ks, Ds], der.result[k]) for k in ("score_cost", "head_cost")}
    errs = {k: 0 for k in ref}
    for N in range(1, 13):
        for K in range(1, 7):
            for D in range(1, 9):
                for k in ref:
                    errs[k] = largest(errs[k], abs(int(form[k](N, K, D)) - int(ref[k](N, K, D))))
    return compare(worst(errs), 0, "exact integer counts", sizes={"N": "1..12", "K": "1..6", "D": "1..8"},
                   details=dict(errs, derived={k: str(v) for k, v in der.result.items()},
                                k_threshold=str(der.facts["k_threshold"]), gap_at_half_d=str(der.facts["gap_at_half_d"])))


def _cost_flop_counter(form, ctx) -> CheckResult:
    """FlopCounterMode (FLOPs = 2 × multiply-adds for matrix products) on the actual modules:
    lecture notes 000's shared-U score module vs score_cost, MultiheadAttention (E = D, H heads, K = D/H,
    no bias) vs H·head_cost; and the N² share of the FLOPs at N ≫ D vs N/(N + D)."""
    grid = [(N, K, D) for N in (1, 3, 8, 17) for K in (1, 2, 5) for D in (1, 4, 7)]
    errs, measured = {"score_cost": 0, "mha_head_cost": 0}, []
    for N, K, D in grid:
        m = na.SharedProjectionScores(D, K, device=ctx.device)
        fl = na.count_flops(m, torch.zeros(1, N, D, dtype=torch.float64, device=ctx.device))
        assert fl["total"] % 2 == 0
        errs["score_cost"] = largest(errs["score_cost"], abs(fl["total"] // 2 - int(form["score_cost"](N, K, D))))
    mha_grid = [(N, D, H) for N in (2, 9) for D, H in ((4, 1), (6, 2), (8, 4), (12, 3))] + ctx.size([], [(33, 16, 2)])
    for N, D, H in mha_grid:
        mha = torch.nn.MultiheadAttention(D, H, bias=False, batch_first=True, dtype=torch.float64, device=ctx.device)
        x = torch.zeros(1, N, D, dtype=torch.float64, device=ctx.device)
        fl = na.count_flops(mha, x, x, x, need_weights=False)
        pred = H * int(form["head_cost"](N, D // H, D))
        errs["mha_head_cost"] = largest(errs["mha_head_cost"], abs(fl["total"] // 2 - pred))
        measured.append({"N": N, "D": D, "H": H, "flops": fl["total"], "predicted_macs": pred})
    der = ta.derive_complexity()
    frac = lambda N, D: der.facts["score_fraction"].subs({der.facts["N"]: N, der.facts["D"]: D})  # noqa: E731 (exact)
    shares = {}
    for N, K, D in [(256, 4, 4), (512, 2, 8)]:  # N ≫ D: the N² term dominates
        fl = na.count_flops(na.SharedProjectionScores(D, K, device=ctx.device), torch.zeros(1, N, D, dtype=torch.float64, device=ctx.device))
        share = Fraction(fl["total"] - fl["SharedProjectionScores.proj"], fl["total"])  # exact rational
        shares[f"N{N}_K{K}_D{D}"] = float(share)
        derived = sp.Rational(frac(N, D))
        errs[f"n2_share_vs_derived_N{N}_D{D}"] = 0 if share == Fraction(int(derived.p), int(derived.q)) else 1
        errs[f"n2_share_not_above_0.95_N{N}"] = 0 if share > Fraction(95, 100) else 1
    if ctx.want_figures:
        plt = pyplot()

        Nn = np.array([1, 2, 4, 8, 16, 32, 64, 128])
        K, D = 4, 8
        fl = [na.count_flops(na.SharedProjectionScores(D, K), torch.zeros(1, int(n), D, dtype=torch.float64))["total"] for n in Nn]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.loglog(Nn, np.array(fl) / 2, "o", label="FlopCounterMode / 2")
        ax.loglog(Nn, [form["score_cost"](int(n), K, D) for n in Nn], "-", label="claimed N·K·D + N²·K")
        ax.loglog(Nn, Nn**2 * K, ":", label="N²·K")
        ax.set_xlabel("N (tokens)")
        ax.set_ylabel("multiply-adds")
        ax.set_title(f"shared-U scores, K={K}, D={D}")
        ax.legend(fontsize=7)
        ctx.save_figure(fig, "cost_vs_n")
    return compare(worst(errs), 0, "exact: FlopCounterMode counts 2 FLOPs per multiply-add of a matrix product",
                   sizes={"score grid (N,K,D)": len(grid), "MHA grid (N,D,H)": mha_grid}, device=ctx.device,
                   details={"max_abs_diff": errs, "n2_share": shares, "mha": measured})


_COST_FORM = {"score_cost": lambda N, K, D: N * K * D + N * N * K, "head_cost": lambda N, K, D: 4 * N * K * D + 2 * N * N * K}

register(Claim(
    id="attn.complexity",
    title="Cost of attention: N·K·D (projections) + N²·K (scores) multiply-adds",
    statement=r"C_{\text{scores}}=NKD+N^2K,\quad C_{\text{head}}=4NKD+2N^2K\ \text{multiply-adds (FLOPs}=2\times\text{)},\quad \frac{N^2K}{C_{\text{scores}}}=\frac{N}{N+D}\xrightarrow{N\to\infty}1",
    source="lecture notes 000 ('NKD + N²K time'); torch.utils.flop_counter.FlopCounterMode",
    kind="identity",
    form=_COST_FORM,
    derivation=ta.derive_complexity,
    notes=("Lecture notes 000 adds 'N²D if K < D/2': NKD + N²K < N²D holds iff K < ND/(N+D); at K = D/2 it needs N > D. "
           "torch 2.13's FlopCounterMode counts 0 for the fused CPU attention kernel, so counts run under the math backend."),
    checks=(
        Check("polynomial_vs_sympy", "symbolic", _cost_symbolic, "form vs the multiply-add sums SymPy evaluated"),
        Check("flop_counter", "numeric", _cost_flop_counter, "vs FlopCounterMode on the score module and MultiheadAttention", uses_device=False),
    ),
    mutants=(
        Mutant("scores_over_d", "wrong formula", "N·K·D + N²·D (the parameter-free variant's score cost)",
               dict(_COST_FORM, score_cost=lambda N, K, D: N * K * D + N * N * D)),
        Mutant("projection_dropped", "dropped term", "N²·K only", dict(_COST_FORM, score_cost=lambda N, K, D: N * N * K)),
        Mutant("flops_not_macs", "wrong constant", "2(NKD + N²K): FLOPs reported as multiply-adds",
               dict(_COST_FORM, score_cost=lambda N, K, D: 2 * (N * K * D + N * N * K))),
        Mutant("head_without_weighting", "dropped term", "head cost without the A-weighted sum of values (4NKD + N²K)",
               dict(_COST_FORM, head_cost=lambda N, K, D: 4 * N * K * D + N * N * K)),
        Mutant("head_without_output_projection", "dropped term", "head cost without U_p (3NKD + 2N²K)",
               dict(_COST_FORM, head_cost=lambda N, K, D: 3 * N * K * D + 2 * N * N * K)),
    ),
))


# --------------------------------------------------------------------------------------------
# attn.sinusoidal_pe
# form: {"pe": (positions, D) -> (P, D), "shift": (k, D) -> M_k with PE(p + k) = PE(p) M_k}


def _pe_symbolic(form, ctx) -> CheckResult:
    """The form's encoding and shift matrix vs the derived definition and rotation R(kω_i)."""
    der = ta.derive_sinusoidal_pe()
    sy = der.facts["symbols"]
    R = sp.lambdify([sy["k"], sy["omega"]], der.result, "numpy")
    om = sp.lambdify([sy["i"], sy["D"], sy["base"]], der.facts["omega"], "numpy")
    errs = {"shift": 0.0, "pe": 0.0}
    pos = np.arange(0.0, 64.0)
    for D in (2, 4, 8, 16):
        w = np.array([om(i, D, 10000.0) for i in range(D // 2)])
        ref_pe = np.empty((len(pos), D))
        ref_pe[:, 0::2], ref_pe[:, 1::2] = np.sin(np.outer(pos, w)), np.cos(np.outer(pos, w))
        with np.errstate(all="ignore"):
            errs["pe"] = largest(errs["pe"], _maxabs(form["pe"](pos, D) - ref_pe))
        for k in (1, 3, 50):
            ref = np.zeros((D, D))
            for i in range(D // 2):
                ref[2 * i:2 * i + 2, 2 * i:2 * i + 2] = np.asarray(R(k, w[i]), dtype=float)
            with np.errstate(all="ignore"):
                errs["shift"] = largest(errs["shift"], _maxabs(form["shift"](k, D) - ref))
    return compare(worst(errs), 16 * 64 * EPS, "rounding of sin/cos at angles ≤ 64 (16·64·eps)",
                   sizes={"D": [2, 4, 8, 16], "k": [1, 3, 50], "positions": "0..63"},
                   details=dict(errs, derived_rotation=str(der.result)))


def _pe_numeric(form, ctx) -> CheckResult:
    """Range [-1, 1]; PE(p + k) = PE(p) M_k for p up to 10⁴ and several k; M_k orthogonal;
    M_j M_k = M_{j+k}; the encoding itself against an independent mpmath construction (30 digits)."""
    P = ctx.size(200, 2000, 20000)
    pos = np.r_[np.arange(P, dtype=float), 1e4 + np.arange(8.0)]
    ks = (1, 2, 17, 100)
    errs = {}
    for D in (4, 16, 64):
        with np.errstate(all="ignore"):
            pe = form["pe"](pos, D)
            errs[f"range_excess_D{D}"] = largest(0.0, _maxabs(pe) - 1.0) if np.all(np.isfinite(pe)) else math.inf
            for k in ks:
                Mk = form["shift"](k, D)
                errs[f"shift_D{D}_k{k}"] = _maxabs(form["pe"](pos + k, D) - pe @ Mk)
                errs[f"orthogonal_D{D}_k{k}"] = _maxabs(Mk @ Mk.T - np.eye(D))
            errs[f"compose_D{D}"] = _maxabs(form["shift"](2, D) @ form["shift"](17, D) - form["shift"](19, D))
    # an independent construction: mpmath at 30 digits, ω_i = 10000^{-2i/D} by mpmath.power, for a
    # few positions (not the SymPy derivation, not the form's arithmetic)
    import mpmath

    with mpmath.workdps(30):
        for D in (4, 16):
            probe = [0, 1, 7, 100, 9999]
            ref = np.array([[float(mpmath.sin(p * mpmath.power(10000, mpmath.mpf(-2 * (j // 2)) / D))) if j % 2 == 0 else
                             float(mpmath.cos(p * mpmath.power(10000, mpmath.mpf(-2 * (j // 2)) / D))) for j in range(D)]
                            for p in probe])
            with np.errstate(all="ignore"):
                errs[f"vs_mpmath_D{D}"] = _maxabs(form["pe"](np.asarray(probe, dtype=float), D) - ref)
    pmax = float(pos.max() + largest(ks))
    return compare(worst(errs), 16 * pmax * EPS, f"angle rounding grows with the position: 16·(max position {pmax:g})·eps",
                   sizes={"positions": len(pos), "max position": pmax, "D": [4, 16, 64], "k": list(ks)}, details=errs)


def _pe_sin_cos_swapped(positions, D, base=10000.0):
    pe = na.sinusoidal_pe(positions, D, base)
    out = pe.copy()
    out[..., 0::2], out[..., 1::2] = pe[..., 1::2], pe[..., 0::2]
    return out


def _pe_sum_amplitude(positions, D, base=10000.0):
    pe = na.sinusoidal_pe(positions, D, base)
    out = pe.copy()
    out[..., 0::2] = pe[..., 0::2] + pe[..., 1::2]
    return out


_PE_FORM = {"pe": na.sinusoidal_pe, "shift": na.pe_shift_matrix}

register(Claim(
    id="attn.sinusoidal_pe",
    title="Sinusoidal encodings lie in [−1, 1]^D and a shift by k is a fixed block rotation",
    statement=r"PE(p)_{2i}=\sin p\omega_i,\ PE(p)_{2i+1}=\cos p\omega_i,\ \omega_i=10000^{-2i/D}:\ PE(p)\in[-1,1]^D,\ PE(p+k)=PE(p)\,\operatorname{diag}_i\begin{bmatrix}\cos k\omega_i&-\sin k\omega_i\\\sin k\omega_i&\cos k\omega_i\end{bmatrix}",
    source="lecture notes 003 §3 (sinusoidal encoding, r_n ∈ (−1, 1)^D); Vaswani et al. (2017) §3.5",
    kind="theorem",
    form=_PE_FORM,
    derivation=ta.derive_sinusoidal_pe,
    notes="Lecture notes 003 writes the open cube (−1, 1)^D; sin 0 = 0 and cos 0 = 1 put PE(0) on the boundary, so the closed cube is right.",
    checks=(
        Check("rotation_vs_sympy", "symbolic", _pe_symbolic, "form vs the rotation derived by angle addition"),
        Check("shift_range_numeric", "numeric", _pe_numeric, "range, shift identity up to position 10⁴, orthogonality, composition"),
    ),
    mutants=(
        Mutant("shift_transposed", "sign flip", "rotation by −kω (the transposed blocks)", dict(_PE_FORM, shift=lambda k, D, base=10000.0: na.pe_shift_matrix(k, D, base).T)),
        Mutant("shift_wrong_frequencies", "wrong constant", "shift built with ω_i = 10000^{−i/D}",
               dict(_PE_FORM, shift=lambda k, D, base=10000.0: na.pe_shift_matrix(k, 2 * D, base)[:D, :D])),
        Mutant("pe_sin_cos_swapped", "swapped index", "cos in the even and sin in the odd slots (the shift matrix no longer matches)",
               dict(_PE_FORM, pe=_pe_sin_cos_swapped)),
        Mutant("pe_amplitude", "extra term", "sin + cos in the even slots (leaves [−1, 1])", dict(_PE_FORM, pe=_pe_sum_amplitude)),
    ),
))
