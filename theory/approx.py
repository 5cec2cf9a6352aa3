"""Group F (approximation), derived in SymPy: the separation margin of a one-layer, single-head,
rank-1 softmax attention that is a contextual mapping on a grid (claim ``approx.contextual_mapping``)
and the per-layer connection counts of the sparse patterns (claim ``approx.sparse_connections``).

Contextual mapping: the construction
------------------------------------
The construction follows Kajitsuka & Sato (ICLR 2024, "Are Transformers with One Layer
Self-Attention Using Low-Rank Weight Matrices Universal Approximators?"): ONE softmax attention
layer, ONE head, rank-1 query/key/value weights that project every token onto one direction, so
that the attention of token k is the Boltzmann operator of the projected context. The constants
below (λ, γ, the margin) are derived HERE for this grid; they are not the constants of K&S's
theorem (which we do not reproduce), and Yun et al.'s (ICLR 2020) Lemma 6 (many hardmax layers) is
not used. Conventions (tokens are rows, ``X ∈ R^{n×d}``):

* grid ``G_δ = {δ, 2δ, …, 1}^d`` with ``δ = 1/b`` (``b ≥ 2`` an integer): ``K = b^d`` tokens.
  Yun et al.'s grid ``{0, δ, …, 1 − δ}^d`` is shifted by δ: a token at the origin has query 0, hence
  a UNIFORM attention row (mean pooling, which is not injective on sets). K&S exclude it by their
  ``r_min > 0``; this hidden condition is recorded in the claim's notes;
* input sequences: ``n`` DISTINCT grid tokens (``2 ≤ n ≤ K``);
* ``u = (1, b, …, b^{d−1})``: ``a(x) = uᵀx = δ(c₀ + z(x))`` with ``c₀ = Σ_i b^{i−1}`` and
  ``z(x) ∈ {0, …, K−1}`` a bijection (base-b digits), so ids are spaced by δ;
* ``W_Q = W_K = √λ uᵀ`` (1×d), ``W_V = uᵀ`` (1×d), ``W_O = γ e₁`` (d×1); the layer is
  ``y_k = x_k + W_O Σ_l softmax_l(λ a_k a_l) a_l`` (scores not divided by √d_k: d_k = 1);
* ``λ = ln(1/ρ)/(δ² c₀)`` so that ``x_a := e^{−λδa}`` (the softmax weight ratio of ids one step
  apart for query id a) is at most ``ρ`` (attained at the smallest token), ``γ = 1/(2(K−1))``.

The margin: two outputs of DIFFERENT tokens are at least ``δ − γ(a_max − a_min) = δ/2`` apart; two
outputs of the SAME token (id a) in contexts that are different sets are at least
``B(x_a) = δ/(2(K−1)) · min(1 − x/(1−x)², (K−2) x^{K−2} (1−x)² φ(x))`` apart, ``x = x_a``, with
``φ(x) = 1 − x/(1−x) − x/(1−x)³ − x²/(1−x)² − 2x⁴/((1−x²)(1−x)²)`` (valid for ``x ≤ ρ`` with
``φ(ρ) > 0`` and ``ρ ≤ 1/2``). The proof is the dominance argument for the Boltzmann operator
(below, step by step); the smallest bound is at the LARGEST token where ``x = ρ^b``, so the margin
decays like ``ρ^{b(K−2)} = ρ^{(δ^{−d}−2)/δ}``: exponentially in the number of grid tokens.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_contextual_margin", "derive_sparse_counts", "RHO"]

#: the construction's weight ratio of neighbouring ids at the smallest query (φ(1/8) = 2005/3087 > 0)
RHO = sp.Rational(1, 8)


def _geometric(expr, j, lo=1):
    """``Σ_{j≥lo} expr`` by SymPy summation, the branch valid for 0 < x < 1."""
    return _branch(sp.summation(expr, (j, lo, sp.oo)))


def _last_branch(s):
    """The generic branch (b ≠ 1) of a finite geometric summation."""
    return sp.simplify(s.args[-1][0]) if isinstance(s, sp.Piecewise) else sp.simplify(s)


def _branch(s):
    """The convergent branch (0 < x < 1) of a summation SymPy returned with Piecewise conditions:
    every Piecewise is replaced by its first branch."""
    while s.has(sp.Piecewise):
        s = s.replace(lambda e: isinstance(e, sp.Piecewise), lambda e: e.args[0][0])
    return sp.simplify(s)


@lru_cache(maxsize=None)
def derive_contextual_margin() -> Derivation:
    """The separation margin of the one-layer rank-1 construction (see the module docstring).

    ``result``: ``{"pair_bound": m x^m (1−x)² φ(x)`` (lower bound on |F(Z) − F(Z')| for two id sets
    with the same maximum whose gap sets first differ at gap m), ``"same_token": B(x)`` (with
    ``K, δ`` symbols; evaluate at ``x = x_a``), ``"distinct_tokens": δ/2``, ``"tightness": τ(x)``
    (on the pair of sets {top, …, 1} vs {top, …, 0} the true separation is at most τ·B), ``"lambda"``,
    ``"x_top"`` (= ρ^b)}.

    >>> d = derive_contextual_margin()
    >>> S = d.facts["symbols"]
    >>> f"{float(d.result['same_token'].subs({S['x']: sp.Rational(1, 64), S['K']: 4, S['delta']: sp.Rational(1, 2)})):.3g}"
    '3.81e-05'
    """
    B = DerivationBuilder("Separation margin of a one-layer rank-1 softmax attention on the grid {δ,…,1}^d")
    x = sp.Symbol("x", positive=True)
    m = sp.Symbol("m", positive=True, integer=True)
    j, i = sp.symbols("j i", positive=True, integer=True)
    K = sp.Symbol("K", positive=True, integer=True)
    delta, rho, lam, b, dd = sp.symbols("delta rho lambda b d", positive=True)
    B.symbols(x="softmax weight ratio of two ids one step apart, x = e^{−λδa} for query id a",
              m="smallest gap (distance to the maximum id) in which two id sets differ",
              K="number of grid tokens b^d", delta="grid spacing δ = 1/b", rho="x at the smallest query token",
              b="grid points per axis", d="token dimension", lambda_="score scale λ (W_Q = W_K = √λ uᵀ)",
              gamma="output scale γ (W_O = γ e₁)", N_C="Σ_{g∈C} g x^g", P_C="1 + Σ_{g∈C} x^g")
    # --- ids ---------------------------------------------------------------------------------
    k_ = sp.Symbol("k", integer=True, nonnegative=True)
    c0 = B.step("c₀ = Σ_{i=1}^{d} b^{i−1} (id offset: a(x) = uᵀx = δ(c₀ + z), z ∈ {0..K−1}); b ≥ 2",
                _last_branch(sp.summation(b**k_, (k_, 0, dd - 1))))
    a_min, a_max = delta * c0, delta * (c0 + b**dd - 1)
    ratio = B.step("a_max / a_min (the query factor varies by this ratio over the grid)", sp.simplify(a_max / a_min))
    B.obligation("query_ratio_is_b", ratio - b, description="a_max/a_min = b: the largest query sharpens the softmax b-fold")
    lam_val = B.step("λ solving e^{−λ δ a_min} = ρ", sp.solve(sp.Eq(sp.exp(-lam * delta * a_min), rho), lam)[0])
    x_top = B.step("x at the largest query: e^{−λ δ a_max} = ρ^b", sp.simplify(sp.exp(-lam_val * delta * a_max)))
    B.obligation("x_top_is_rho_power_b", sp.simplify(sp.expand_log(sp.log(x_top) - b * sp.log(rho), force=True)),
                 description="the top token's weight ratio is ρ^b = ρ^{1/δ}")
    # --- distinct tokens ---------------------------------------------------------------------
    gamma = B.assume("γ = 1/(2(K−1)) (premise of the construction: the context shift stays below δ/2)",
                     1 / (2 * (K - 1)), role="premise", key="γ = 1/(2(K−1))")
    B.argue("distinct tokens: ‖y − y′‖ ≥ ‖x − x′‖ − γ|f − f′| (triangle inequality) and |f − f′| ≤ δ(K − 1) (both context "
            "terms lie in the id range)", key="triangle inequality", clauses=("distinct_tokens",))
    dist = B.step("δ − γ·δ(K − 1), the lower bound the triangle inequality gives", sp.simplify(delta - gamma * delta * (K - 1)))
    B.obligation("distinct_tokens_half_delta", dist - delta / 2)
    # --- the Boltzmann-operator dominance argument ------------------------------------------
    NC, PC, NH, PH, NH2, PH2, X = sp.symbols("N_C P_C N_H P_H N_H' P_H' X")
    B.assume("the layer's context term for token k is γδ(c₀ + F(Z)) e₁ with F(Z) = max Z − D(G), D(G) = N(G)/P(G), "
             "N = Σ_{g∈G} g x^g, P = 1 + Σ_{g∈G} x^g over the nonzero gaps G = {max Z − z} (softmax weights ∝ x^g, "
             "x = e^{−λδa_k}): the reduction of the construction to F, written down, not derived",
             sp.Symbol("N") / sp.Symbol("P"), key="layer reduces to F(Z)", clauses=("same_token",))
    num = B.step("G = C ∪ {m} ∪ H, G′ = C ∪ H′ (C below m shared, H, H′ above m): N(G)P(G′) − N(G′)P(G), X = x^m",
                 sp.expand((NC + m * X + NH) * (PC + PH2) - (NC + NH2) * (PC + X + PH)))
    E = sp.Symbol("E")
    regrouped = (X * (m * PC - NC) - X * (NH2 - m * PH2) + (NH * PC - NC * PH) - (NH2 * PC - NC * PH2) + (NH * PH2 - NH2 * PH))
    B.obligation("numerator_regrouping", sp.expand(num - regrouped),
                 description="X(mP_C − N_C) − X Σ_{H′}(h−m)x^h + Σ_H x^h(hP_C − N_C) − Σ_{H′} x^h(hP_C − N_C) + Σ_{H×H′}(h−h′)x^{h+h′}")
    S1 = B.step("S₁ = Σ_{j≥1} x^j", _geometric(x**j, j))
    S2 = B.step("S₂ = Σ_{j≥1} j x^j", _geometric(j * x**j, j))
    S3 = B.step("S₃ = Σ_{i,j≥1}|i−j| x^{i+j} = 2 Σ_{j≥1} x^{2j} S₂", sp.simplify(2 * _geometric(x**(2 * j), j) * S2))
    B.obligation("cross_sum_by_summation", sp.simplify(S3 - 2 * _branch(sp.summation(
        _branch(sp.summation(i * x**(i + 2 * j), (i, 1, sp.oo))), (j, 1, sp.oo)))),
        description="the closed form of the cross sum equals the direct double summation over i > j")
    B.argue("the series S₁, S₂, S₃ bound the sub-sums: Σ_{H′} x^h ≤ x^m S₁, P_C ≤ 1 + S₁ (so P(G)P(G′) ≤ (1 + S₁)²), "
            "Σ_{H′}(h−m)x^h ≤ x^m S₂, D(G) ≤ S₂, the H×H′ cross term ≤ x^{2m} S₃", key="series bounds",
            clauses=("same_token",))
    B.assume("E = mP_C − N_C = m + Σ_{c∈C}(m − c)x^c ≥ m; hP_C − N_C = (h−m)P_C + E for h > m; x^m ≤ x (m ≥ 1); "
             "the Σ_H terms are ≥ 0 and dropped", E - m, role="bound", key="E ≥ m", clauses=("same_token",))
    B.argue("Numerator ≥ E x^m(1 − S₁) − P_C x^m S₂ − x^{2m} S₂ − x^{2m} S₃ ≥ m x^m φ(x) (the regrouped numerator, "
            "each term bounded as above); this needs H′ ≠ ∅, which holds when both sets have the same size n",
            key="numerator bound", clauses=("same_token",))
    phi = B.step("φ = 1 − S₁ − (1+S₁)S₂ − xS₂ − xS₃", sp.simplify(1 - S1 - (1 + S1) * S2 - x * S2 - x * S3))
    den = B.step("(1 + S₁)², the bound on the denominators P(G)P(G′)", sp.simplify((1 + S1) ** 2))
    pair = B.step("m x^m φ(x) / (1 + S₁)², the bound on |F(Z) − F(Z′)| (same maximum)", sp.simplify(m * x**m * phi / den))
    B.obligation("pair_bound_form", sp.simplify(pair - m * x**m * (1 - x) ** 2 * phi))
    B.argue("different maxima: F(Z) − F(Z′) ≥ 1 − D(G) ≥ 1 − S₂", key="different maxima", clauses=("same_token",))
    caseA = B.step("1 − S₂, the bound for different maxima", sp.simplify(1 - S2))
    B.obligation("m_x_pow_m_decreasing", 1 - 2 * RHO, "positive",
                 "(m+1)x^{m+1} ≤ m x^m for x ≤ 1/2: the worst pair has the largest m, m ≤ K − 2")
    B.argue("worst m: m ≤ K − 2, because the other gap set (same size n) has an element above m, ≤ K − 1; m x^m "
            "decreases in m for x ≤ 1/2 (obligation m_x_pow_m_decreasing)", key="worst gap m ≤ K − 2",
            clauses=("same_token",))
    worst_pair = B.step("the pair bound at m = K − 2", pair.subs(m, K - 2))
    same = B.step("same token: B(x) = γ δ · min(case A, worst pair), the bound on ‖y − y′‖ = γ δ |F − F′|",
                  sp.Min(gamma * delta * caseA, gamma * delta * worst_pair))
    # --- validity of the bound for every query token ------------------------------------------
    yy = sp.Symbol("y", positive=True)
    dphi = B.step("−dφ/dx at x = y/(1+y) (y > 0 ⇔ 0 < x < 1; positive: obligation phi_decreasing)",
                  sp.factor(sp.together(-sp.diff(phi, x).subs(x, yy / (1 + yy)))))
    B.obligation("phi_decreasing", dphi, "positive")
    B.obligation("phi_positive_at_rho", phi.subs(x, RHO), "positive", "φ(1/8) = 2005/3087 > 0: the bound is valid for every x ≤ ρ = 1/8")
    B.obligation("caseA_positive_at_rho", caseA.subs(x, RHO), "positive")
    # --- tightness on one pair of sets ---------------------------------------------------------
    num_spec = B.step("tight pair G = C ∪ {m}, G′ = C ∪ {m+1}: N(G)P(G′) − N(G′)P(G)",
                      sp.expand((NC + m * X) * (PC + x * X) - (NC + (m + 1) * x * X) * (PC + X)))
    B.obligation("tight_pair_numerator", sp.expand(num_spec - (X * (m * PC - NC) - x * X * ((m + 1) * PC - NC) - (m + 1 - m) * x * X**2)),
                 description="= x^m E − x^{m+1}((m+1)P_C − N_C) − x^{2m+1} ≤ x^m E ≤ m x^m P_C (both subtracted terms ≥ 0)")
    B.argue("the tight pair's separation is at most m x^m (1 + S₁) (numerator ≤ m x^m P_C ≤ m x^m (1 + S₁), "
            "denominators ≥ 1)", key="tight pair upper bound", clauses=("nearly_attained",))
    upper = B.step("m x^m (1 + S₁), the upper bound on the tight pair", sp.simplify(m * x**m * (1 + S1)))
    tau = B.step("tightness factor τ(x) = upper / pair bound = 1/((1−x)³ φ(x))", sp.simplify(upper / pair))
    B.fact("symbols", {"x": x, "m": m, "K": K, "delta": delta, "rho": rho, "b": b, "d": dd})
    B.fact("phi", phi)
    return B.done({"pair_bound": pair, "same_token": same, "distinct_tokens": dist, "tightness": tau,
                   "lambda": lam_val, "x_top": x_top})


# ------------------------------------------------------------------------------------------------
# sparse connection counts


def _band_rows(n, w, i, j):
    """Σ over an n×n band |i−j| ≤ w (n ≥ 2w), split where the clipping at 0 and n−1 changes."""
    left = sp.summation(sp.summation(1, (j, 0, i + w)), (i, 0, w - 1))
    mid = sp.summation(sp.summation(1, (j, i - w, i + w)), (i, w, n - 1 - w))
    right = sp.summation(sp.summation(1, (j, i - w, n - 1)), (i, n - w, n - 1))
    return sp.expand(left + mid + right)


@lru_cache(maxsize=None)
def derive_sparse_counts() -> Derivation:
    """Connection counts (True entries of each pattern's mask, per layer) of the patterns built by
    ``numerics.sparse``, summed over the mask definitions with SymPy.

    ``T`` tokens; strided and fixed use stride/block ``s = √T`` (``T = s²``), fixed has ``c`` summary
    positions per block; Longformer/BigBird have a window of half-width ``w`` and global tokens
    ``0..g−1``. ``result`` maps pattern names to polynomials in ``T`` (``√T`` appears for strided
    and fixed), ``w``, ``g``, ``c``.

    >>> d = derive_sparse_counts()
    >>> T = d.facts["symbols"]["T"]
    >>> d.result["strided_stride"]
    T**(3/2)
    """
    B = DerivationBuilder("Per-layer connection counts of strided, fixed, star, Longformer and BigBird patterns")
    T, s, w, g, c, q = sp.symbols("T s w g c q", positive=True, integer=True)
    i, j, r, p, t, blk = sp.symbols("i j r p t blk", integer=True)
    B.symbols(T="sequence length", s="stride / block length √T", w="window half-width", g="number of global tokens",
              c="summary positions per block (fixed)", q="number of tokens of the band in the band step")
    sq = {s: sp.sqrt(T)}
    B.define("mask[i, j] True when query i attends key j; count = Σ_i Σ_j mask[i, j]; T = s² for strided and fixed", T - s**2)
    # strided, local: |i − j| < s  (band of half-width s − 1)
    band = B.step("band |i−j| ≤ w on n ≥ 2w tokens: Σ_i Σ_{j=max(0,i−w)}^{min(n−1,i+w)} 1", _band_rows(q, w, i, j))
    local = B.step("strided, local pattern |i−j| < s = band with w = s − 1, n = T = s²",
                   sp.expand(band.subs({w: s - 1}).subs(q, s**2).subs(sq)))
    stride = B.step("strided, stride pattern (i−j) mod s = 0: Σ_{residue r} Σ_{i ≡ r} Σ_{j ≡ r} 1 with s rows per residue",
                    sp.expand(sp.summation(sp.summation(sp.summation(1, (t, 0, s - 1)), (p, 0, s - 1)), (r, 0, s - 1)).subs(sq)))
    fblock = B.step("fixed, block pattern ⌊i/s⌋ = ⌊j/s⌋: Σ_blocks Σ_{i in block} Σ_{j in block} 1",
                    sp.expand(sp.summation(sp.summation(sp.summation(1, (t, 0, s - 1)), (r, 0, s - 1)), (blk, 0, s - 1)).subs(sq)))
    fsum = B.step("fixed, summary pattern (j mod s ≥ s − c) ∨ (i = j): Σ_i [c per block · s blocks] + Σ_i [i mod s < s − c]",
                  sp.expand((sp.summation(sp.summation(s * sp.summation(1, (t, s - c, s - 1)), (r, 0, s - 1)), (blk, 0, s - 1))
                             + sp.summation(sp.summation(1, (r, 0, s - c - 1)), (blk, 0, s - 1))).subs(sq)))
    star = B.step("star: relay row (T) + relay column (T − 1) + ring |i−j| ≤ 1 on the T − 1 satellites",
                  sp.expand(sp.summation(1, (j, 0, T - 1)) + sp.summation(1, (i, 1, T - 1)) + band.subs({w: 1, q: T - 1})))
    lf = B.step("Longformer/BigBird (no random keys): global rows (g·T) + global columns of the other rows "
                "(g(T − g)) + the band on the T − g other tokens",
                sp.expand(sp.summation(sp.summation(1, (j, 0, T - 1)), (i, 0, g - 1))
                          + sp.summation(sp.summation(1, (j, 0, g - 1)), (i, g, T - 1)) + band.subs(q, T - g)))
    B.obligation("band_closed_form", sp.expand(band - (q * (2 * w + 1) - w * (w + 1))))
    # outside T − g ≥ w the band is full (every pair within w); with g ≥ T every token is global
    lf_short = B.step("Longformer/BigBird with T − g ≤ w: global part + the full (T − g)² block (every pair within w)",
                      sp.expand(sp.summation(sp.summation(1, (j, 0, T - 1)), (i, 0, g - 1))
                                + sp.summation(sp.summation(1, (j, 0, g - 1)), (i, g, T - 1))
                                + sp.summation(sp.summation(1, (j, g, T - 1)), (i, g, T - 1))))
    lf_global = B.step("Longformer/BigBird with g ≥ T: every token global, all T² pairs",
                       sp.summation(sp.summation(1, (j, 0, T - 1)), (i, 0, T - 1)))
    B.obligation("longformer_branches_meet_at_T_minus_g_eq_w", sp.expand(lf.subs(T, g + w) - lf_short.subs(T, g + w)))
    lead = {}
    for name, expr, power in (("strided_local", local, sp.Rational(3, 2)), ("strided_stride", stride, sp.Rational(3, 2)),
                              ("fixed_block", fblock, sp.Rational(3, 2)), ("fixed_summary", fsum, sp.Rational(3, 2)),
                              ("star", star, 1), ("longformer", lf, 1)):
        lim = B.step(f"{name}: lim count / T^{power} (T → ∞)", sp.limit(expr / T**power, T, sp.oo))
        B.obligation(f"{name}_theta_T^{power}", lim, "positive", f"{name} has Θ(T^{power}) connections")
        lead[name] = lim
    B.fact("symbols", {"T": T, "w": w, "g": g, "c": c})
    B.fact("leading", lead)
    return B.done({"strided_local": local, "strided_stride": stride, "fixed_block": fblock, "fixed_summary": fsum,
                   "star": star, "longformer": lf, "longformer_short": lf_short, "longformer_all_global": lf_global})
