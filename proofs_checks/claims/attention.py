"""Group A: attention mechanics (seeds 000, 001, 003, 004). Binds theory/attention.py and
numerics/attention.py to checks, tolerances and mutants."""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch

from numerics import attention as na
from proofs_checks.registry import Check, CheckResult, Claim, Mutant, compare, register, worst
from theory import attention as ta

EPS = np.finfo(np.float64).eps


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
    assert d.facts["forms_difference"] == 0 and d.facts["shift_difference"] == 0
    jac = sp.lambdify([d.facts["p_symbols"]], d.result, "numpy")
    rng = ctx.rng()
    P = rng.dirichlet(np.ones(T), size=32)
    err = max(np.max(np.abs(np.asarray(jac(p), dtype=float) - form["jacobian"](p))) for p in P)
    return compare(err, 8 * T * EPS, "float64 rounding: entries are products of two numbers in [0,1], a few ulps each",
                   seeds=[ctx.seed_for()], sizes={"T": T, "points": len(P)},
                   details={"forms_difference": str(d.facts["forms_difference"])})


def _softmax_numeric(form, ctx) -> CheckResult:
    """Against torch.softmax (the real thing) on batches incl. ±700 logits; simplex, shift
    invariance; Jacobian against autograd; Jacobian PSD with null vector 1."""
    rng = ctx.rng()
    B, T = ctx.size(16, 64, 256), 7
    L = rng.normal(scale=5.0, size=(B, T))
    L[0] = [700, -700, 0, 699, -1, 3, 700]  # overflow territory for a naive exp
    L[1] = -L[0]
    with np.errstate(all="ignore"):  # a mutant may overflow; the NaN it makes must fail, not warn
        p = form["softmax"](L)
    p_ref = torch.softmax(torch.from_numpy(L), dim=-1).numpy()
    errs = {
        "vs_torch_softmax": float(np.max(np.abs(p - p_ref))),
        "sum_minus_one": float(np.max(np.abs(p.sum(-1) - 1))),
        "shift_invariance": float(np.max(np.abs(_quiet(form["softmax"], L + rng.normal(size=(B, 1)) * 50) - p))),
        "negative_mass": float(max(0.0, -np.min(p))),
    }
    Lt = torch.from_numpy(L[2:6].copy())
    J_auto = torch.stack([torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), row) for row in Lt]).numpy()
    J = form["jacobian"](p_ref[2:6])
    errs["jacobian_vs_autograd"] = float(np.max(np.abs(J - J_auto)))
    errs["jacobian_null_vector"] = float(np.max(np.abs(J @ np.ones(T))))
    eig = np.linalg.eigvalsh((J + np.swapaxes(J, -1, -2)) / 2)
    errs["jacobian_min_eig_negative"] = float(max(0.0, -eig.min()))
    tol = 64 * T * EPS
    return compare(worst(errs), tol, f"float64 rounding of exp/normalise over T={T} terms (64·T·eps)",
                   seeds=[ctx.seed_for()], sizes={"batch": B, "T": T}, details=errs)


register(Claim(
    id="attn.softmax_simplex",
    title="Softmax maps logits to the simplex; Jacobian diag(p) − ppᵀ",
    statement=r"S(l)_t=\frac{e^{l_t}}{\sum_\tau e^{l_\tau}}=\frac{1}{1+\sum_{\tau\ne t}e^{-(l_t-l_\tau)}}\in(0,1),\ \sum_t S_t=1,\ S(l+c\mathbf 1)=S(l),\ \partial S/\partial l=\operatorname{diag}(p)-pp^\top\succeq0,\ (\operatorname{diag}(p)-pp^\top)\mathbf 1=0",
    source="seeds 000, 001, 003; Vaswani et al. (2017)",
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
