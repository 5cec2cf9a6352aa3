"""Masked attention as neighbourhood softmax, derived in SymPy (claim ``gnn.attention_is_gnn``).

A node ``i`` with in-neighbours ``N(i)`` and scores ``l_j`` (one per node): masking adds ``−M``
to the scores of non-neighbours; the limit ``M → ∞`` of the softmax is the softmax over ``N(i)``
alone, which is the GAT attention coefficient ``α_ij``.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_masked_softmax_limit"]


@lru_cache(maxsize=None)
def derive_masked_softmax_limit(n: int = 4, neighbours: tuple[int, ...] = (0, 2)) -> Derivation:
    """``lim_{M→∞} softmax(l − M·1[j ∉ N])_j = 1[j ∈ N] e^{l_j} / Σ_{k∈N} e^{l_k}``.

    ``result`` is the tuple of limiting weights (SymPy expressions in ``facts["logits"]``);
    ``facts["residual"]`` is the sum of squared differences from the neighbourhood softmax (0).

    >>> d = derive_masked_softmax_limit(2, (0,))
    >>> d.result
    (1, 0)
    """
    b = DerivationBuilder(f"Masked softmax → neighbourhood softmax (n={n}, N={list(neighbours)})")
    b.symbols(l_j="score of node j for the query node (real)", M="the mask: added as −M to non-neighbours",
              alpha_j="GAT attention coefficient of node j")
    l = sp.symbols(f"l_0:{n}", real=True)
    M = sp.Symbol("M", positive=True)
    z = [l[j] if j in neighbours else l[j] - M for j in range(n)]
    Z = sum(sp.exp(zj) for zj in z)
    p = [sp.exp(zj) / Z for zj in z]
    b.define("Softmax of the masked scores (non-neighbours shifted by −M), first weight", p[0])
    lim = tuple(sp.simplify(sp.limit(pj, M, sp.oo)) for pj in p)
    b.step("Limit M → ∞ of every weight", lim)
    ZN = sum(sp.exp(l[k]) for k in neighbours)
    target = [sp.exp(l[j]) / ZN if j in neighbours else sp.Integer(0) for j in range(n)]
    b.define("GAT coefficients: α_j = exp(l_j)/Σ(k∈N) exp(l_k) for j ∈ N, 0 otherwise", sp.Matrix(target))
    b.obligation("limit_is_neighbourhood_softmax", [a - t for a, t in zip(lim, target)])
    res = sp.simplify(sum((a - t) ** 2 for a, t in zip(lim, target)))
    b.fact("residual", res)
    b.step("Σ_j (limit − neighbourhood softmax)² simplifies to", res)
    b.fact("logits", l)
    return b.done(lim)
