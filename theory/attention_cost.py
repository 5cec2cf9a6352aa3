"""The cost of attention counted in SymPy (claim ``attn.complexity``): multiply-accumulates of each product of a
head, from the matrices' shapes. Part of :mod:`theory.attention`."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder
from theory.attention_derive import _mat


# --------------------------------------------------------------------------------------------
# attn.complexity


def _mac_count(M: sp.Matrix) -> int:
    """Multiply-adds to compute the product ``M`` naively: the number of product terms over all
    its entries (the factors are matrices of distinct symbols, so no two terms merge)."""
    return sum(len(sp.Add.make_args(sp.expand(e))) for e in M)


def _head_counts(N: int, K: int, D: int) -> tuple[int, int]:
    """Build one attention head for explicit sizes with symbol matrices and count the
    multiply-adds of its matrix products: (scores with one shared U, full head)."""
    X = _mat("x", D, N)
    U = _mat("u", K, D)
    Y = _mat("y", K, N)  # Y = U X, fresh symbols so the next product counts only its own work
    proj = _mac_count(U * X)  # U x_n for every token n
    shared_scores = _mac_count(Y.T * Y)  # <U x_n, U x_m> for every pair
    Kc, Qc, Vc, A = _mat("k", K, N), _mat("q", K, N), _mat("v", K, N), _mat("a", N, N)
    Up, O = _mat("p", D, K), _mat("o", K, N)
    scores = _mac_count(Kc.T * Qc)
    weighted = _mac_count(Vc * A)  # column m: Σ_n A_nm U_v x_n
    out = _mac_count(Up * O)
    return proj + shared_scores, 3 * proj + scores + weighted + out


def count_attention_macs(N: int, K: int, D: int) -> dict[str, int]:
    """Multiply-adds counted on SymPy symbol matrices at explicit sizes (as in
    :func:`derive_complexity`): ``shared_scores`` (lecture notes 000's scores ⟨U x_n, U x_m⟩ with one
    projection U), ``separate_scores`` (⟨U_k x_n, U_q x_m⟩: two projections) and ``head`` (a full head).

    >>> count_attention_macs(2, 1, 3)
    {'shared_scores': 10, 'separate_scores': 16, 'head': 32}
    """
    shared, head = _head_counts(N, K, D)
    proj = _mac_count(_mat("u", K, D) * _mat("x", D, N))
    return {"shared_scores": shared, "separate_scores": 2 * proj + _mac_count(_mat("k", K, N).T * _mat("q", K, N)),
            "head": head}


@lru_cache(maxsize=None)
def derive_complexity() -> Derivation:
    """Count the multiply-adds of one attention head (lecture notes 000, tokens as columns) by building
    its matrix products with SymPy for explicit small sizes and counting product terms, then
    fitting the polynomial in ``N`` (tokens), ``K`` (head width), ``D`` (model width) exactly.

    Scores with a shared projection U: ``C = N·K·D + N²·K``. A full head with
    ``U_q, U_k, U_v ∈ R^{K×D}``, ``U_p ∈ R^{D×K}``: ``4·N·K·D + 2·N²·K``. Only matrix products are
    counted (the softmax's N² exponentials and divisions are not multiply-adds). The polynomial
    ansatz (degree ≤ 2 in N, ≤ 1 in K and in D) is an assumption; the fit is checked at held-out
    sizes by counting again.

    ``result``: dict ``score_cost``, ``head_cost`` (polynomials in the symbols ``facts["N"]``,
    ``facts["K"]``, ``facts["D"]``). ``facts``: ``score_fraction`` (``N²K/C``), its limit as
    ``N → ∞`` (1), ``k_threshold`` (``C < N²D ⟺ K < ND/(N+D)``), ``gap_at_half_d``
    (``C − N²D`` at ``K = D/2``, negative exactly when ``N > D``).

    >>> r = derive_complexity().result
    >>> r["score_cost"], r["head_cost"]
    (D*K*N + K*N**2, 4*D*K*N + 2*K*N**2)
    """
    import itertools

    b = DerivationBuilder("Multiply-add count of attention (lecture notes 000)")
    b.symbols(N="number of tokens", K="head width (rows of U)", D="model width (token dimension)",
              C="multiply-adds of the scores with one shared projection U")
    N, K, D = sp.symbols("N K D", positive=True, integer=True)
    b.define("One head, tokens as columns x_n: projections U x_n (U_q, U_k, U_v ∈ R^(K×D)), scores ⟨k_n, q_m⟩, "
             "weighting Σ_n A_nm U_v x_n, output projection U_p ∈ R^(D×K); lecture notes 000's scores share one U",
             r"U_p\,U_v X\,\operatorname{softmax}\big((U_k X)^{\top} U_q X\big)")
    b.define("Cost measure: one multiply-add per product term of an entry of a matrix product, counted on products of "
             "matrices of distinct symbols (no two terms merge)")
    grid = list(itertools.product((1, 2, 3), (1, 2), (1, 2)))
    counts = {g: _head_counts(*g) for g in grid}
    table = sp.Matrix([[n, k, dd, *counts[(n, k, dd)]] for n, k, dd in grid])
    b.step("Counted for N ∈ {1,2,3}, K ∈ {1,2}, D ∈ {1,2}: rows (N, K, D, shared-U scores, full head)", table)
    monos = [N**i * K**j * D**l for i in range(3) for j in range(2) for l in range(2)]
    b.assume("Ansatz: each count is a polynomial of degree ≤ 2 in N and ≤ 1 in K and in D "
             "(two nested loops over tokens at most, one over each width)", sp.Add(*monos), key="polynomial-count ansatz")
    fits = []
    for which in range(2):
        cs = sp.symbols(f"c0:{len(monos)}")
        ansatz = sum(c * mo for c, mo in zip(cs, monos))
        sol = sp.solve([ansatz.subs({N: n, K: k, D: dd}) - counts[(n, k, dd)][which] for n, k, dd in grid], cs, dict=True)
        fits.append(sp.expand(ansatz.subs(sol[0])) if len(sol) == 1 else sp.nan)
    C, head = fits
    b.step("The unique polynomial through the 12 shared-U score counts: C =", C)
    b.step("The unique polynomial through the 12 full-head counts", head)
    held_out = [(4, 3, 3), (5, 1, 4)]
    b.obligation("fit_predicts_held_out_counts",
                 [f.subs({N: n, K: k, D: dd}) - _head_counts(n, k, dd)[w] for n, k, dd in held_out for w, f in enumerate(fits)],
                 description="the fitted polynomials equal fresh counts at (N,K,D) = (4,3,3) and (5,1,4)")
    # the same counts for symbolic sizes: entry (i, j) of a naive (m×n)(n×p) product is a sum of n products
    i_, j_, m_, n_, p_ = sp.symbols("i j m n p", positive=True, integer=True)
    naive = sp.Lambda((m_, n_, p_), sp.summation(sp.summation(n_, (i_, 1, m_)), (j_, 1, p_)))
    b.assume("Naive matrix product: each of the m·p entries of an (m×n)(n×p) product is a sum of n products, one "
             "multiply-add each; summed over the entries", naive(m_, n_, p_), role="definition")
    general = {"score_cost": naive(K, D, N) + naive(N, K, N),
               "head_cost": 3 * naive(K, D, N) + naive(N, K, N) + naive(K, N, N) + naive(D, K, N)}
    b.step("For symbolic N, K, D: U X (K×D by D×N) plus the scores (U X)ᵀ(U X) (N×K by K×N)", general["score_cost"])
    b.step("Full head: three projections, scores, weighting U_v X·A (K×N by N×N), output U_p·O (D×K by K×N)",
           general["head_cost"])
    b.obligation("symbolic_count_equals_fit", [sp.expand(general["score_cost"] - C), sp.expand(general["head_cost"] - head)],
                 description="the counts for symbolic N, K, D equal the polynomials fitted to explicit counts")
    frac = sp.simplify(K * N**2 / C)
    b.fact("score_fraction", frac)
    b.fact("score_fraction_limit", sp.limit(frac, N, sp.oo))
    b.step("Share of the N² term and its limit as N → ∞", sp.Eq(sp.Limit(frac, N, sp.oo), b.facts["score_fraction_limit"]))
    b.obligation("score_share_tends_to_one", b.facts["score_fraction_limit"] - 1)
    thr = sp.solve(sp.Eq(C, N**2 * D), K)[0]
    b.fact("k_threshold", thr)
    b.step("C < N²D (the plain form's cost) exactly when K <", thr)
    gap = sp.factor(C.subs(K, D / 2) - N**2 * D)
    b.fact("gap_at_half_d", gap)
    b.step("C − N²D at K = D/2 (seed's 'N²D if K < D/2' needs N ≥ D)", gap)
    b.record(N=N, K=K, D=D)
    return b.done({"score_cost": C, "head_cost": head})
