"""Attention mechanics derived in SymPy (claims ``attn.*``).

Conventions: tokens are rows (``X ∈ R^{T×d}``) unless a function says "column form";
``S(·)`` is the softmax over the last axis.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_softmax_simplex"]


@lru_cache(maxsize=None)
def derive_softmax_simplex(T: int = 3) -> Derivation:
    """Derive, for symbolic logits ``l_1..l_T``: the two forms of the softmax agree, shift
    invariance, and the Jacobian ``∂p_t/∂l_s = p_t(δ_ts − p_s)`` i.e. ``diag(p) − p pᵀ``.

    ``result`` is the Jacobian as a SymPy matrix in terms of the softmax outputs ``p``;
    ``facts`` holds the symbols and the difference of the two forms (simplified to 0).

    >>> d = derive_softmax_simplex(2)
    >>> d.facts["forms_difference"]
    0
    >>> d.result
    Matrix([
    [p_1*(1 - p_1),      -p_1*p_2],
    [     -p_1*p_2, p_2*(1 - p_2)]])
    """
    b = DerivationBuilder("Softmax: two forms, shift invariance, Jacobian")
    l = sp.symbols(f"l_1:{T + 1}", real=True)
    c = sp.Symbol("c", real=True)
    Z = sum(sp.exp(li) for li in l)
    p = [sp.exp(li) / Z for li in l]
    b.step("Definition S(l)_t = e^{l_t} / Σ_τ e^{l_τ} (first entry shown)", sp.Eq(sp.Symbol("S_1"), p[0]))
    alt = [1 / (1 + sum(sp.exp(-(l[t] - l[s])) for s in range(T) if s != t)) for t in range(T)]
    b.step("Divide numerator and denominator by e^{l_t}", sp.Eq(sp.Symbol("S_1"), alt[0]))
    diff = sp.simplify(sum(sp.simplify(sp.powsimp(p[t] - alt[t], combine="exp")) ** 2 for t in range(T)))
    b.fact("forms_difference", diff)
    b.step("Σ_t (first form − second form)² simplifies to", diff)
    shifted = [sp.exp(li + c) / sum(sp.exp(lj + c) for lj in l) for li in l]
    shift_diff = sp.simplify(sum(sp.simplify(shifted[t] - p[t]) ** 2 for t in range(T)))
    b.fact("shift_difference", shift_diff)
    b.step("Shift invariance: Σ_t (S(l + c1)_t − S(l)_t)² simplifies to", shift_diff)
    b.fact("sum", sp.simplify(sum(p)))
    b.step("Σ_t S(l)_t simplifies to", b.facts["sum"])
    P = sp.symbols(f"p_1:{T + 1}", positive=True)
    J = sp.Matrix(T, T, lambda t, s: sp.diff(p[t], l[s]))
    # rewrite each entry in terms of p: ∂p_t/∂l_s equals p_t δ_ts − p_t p_s exactly
    Jp = sp.Matrix(T, T, lambda t, s: (P[t] * (1 - P[s]) if t == s else -P[t] * P[s]))
    subs = {P[i]: p[i] for i in range(T)}
    check = sp.simplify(J - Jp.subs(subs))
    b.fact("jacobian_residual", check)
    b.step("Differentiate: ∂S_t/∂l_s computed from the definition", J[0, 0])
    b.step("The Jacobian, written with p = S(l); residual against the differentiated form", check)
    b.fact("p_symbols", P)
    return b.done(Jp)
