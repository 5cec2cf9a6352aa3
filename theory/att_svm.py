"""Implicit bias of attention derived in SymPy (claims ``svm.*``).

Model ``f(X) = vᵀXᵀS(XWz)``; tokens are rows of ``X ∈ R^{T×d}``; ``S`` is the softmax over the
token axis; logits ``l_t = x_tᵀWz``; scores ``γ_t = y vᵀx_t``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_softmax_saturation", "ray_limit", "derive_optimal_selection", "derive_att_svm_kkt"]


@lru_cache(maxsize=None)
def derive_softmax_saturation(T: int = 3) -> Derivation:
    """Derive the limit of the softmax along a ray ``S(r·l)`` as ``r → ∞``, for logits with a unique
    maximum (``l_1 = c``, ``l_t = c − p_t``, ``p_t > 0``) and with a tie (``p_2 = 0``), and the
    lower bound ``1 − max_t S_t ≥ (T−1)e^{−2R}/(1 + (T−1)e^{−2R})`` when ``‖W‖_2 ≤ R`` and
    ``‖x_t‖ = ‖z‖ = 1`` (so saturation needs ``‖W‖ → ∞``).

    For any logits (not only rays) ``S_1 = 1/(1 + Σ_τ e^{−Δ_τ})`` with the gaps ``Δ_τ = l_1 − l_τ``,
    so ``S_1 → 1`` iff every gap → ∞; ``‖l‖ → ∞`` with ``l_1`` largest is not enough: along
    ``l = (r, r − 1/10)`` the derived ``S_1 = 1/(1 + e^{−1/10})`` for every ``r`` (fact ``slide_S1``).

    ``result`` is a dict: ``limit`` (list: the limit for the unique maximum), ``tie_limit`` (with
    ``l_1 = l_2``), ``gap_bound`` (the bound as an expression in ``R``; facts hold ``R``),
    ``rate_bound`` (``2(T − 1)e^{−r·gap}``, the bound on the ℓ1 deviation from the limit).

    >>> d = derive_softmax_saturation(3)
    >>> d.result["limit"], d.result["tie_limit"]
    ([1, 0, 0], [1/2, 1/2, 0])
    >>> d.result["gap_bound"]
    2/(exp(2*R) + 2)
    >>> d.facts["slide_S1"]
    1/(exp(-1/10) + 1)
    """
    b = DerivationBuilder("Softmax saturation along a ray and the norm it needs")
    b.symbols(r="distance along the ray", R="bound on the spectral norm of W", c="the top logit l_1",
              p_t="gap l_1 − l_t > 0 of token t", E_t="exp(−r p_t)", u="Σ_t exp(−Δ_t)",
              Delta_t="logit gap (x_1 − x_t)ᵀWz at finite W")
    r, R = sp.symbols("r R", positive=True)
    c = sp.Symbol("c", real=True)
    p = sp.symbols(f"p_2:{T + 1}", positive=True)
    l = [c] + [c - pt for pt in p]
    Z = sum(sp.exp(r * li) for li in l)
    S = [sp.exp(r * li) / Z for li in l]
    b.define("Logits l_1 = c > l_t = c − p_t; softmax along the ray r·l, first entry", S[0])
    # divide numerator and denominator by e^{rc}
    num = [sp.powsimp(sp.expand(sp.exp(r * li) * sp.exp(-r * c)), combine="exp") for li in l]
    den = sp.powsimp(sp.expand(Z * sp.exp(-r * c)), combine="exp")
    S1 = num[0] / den
    b.step("Divide numerator and denominator by exp(rc): S_1 =", S1)
    b.obligation("S1_form", S[0] - S1)
    b.fact("S1_difference", sp.simplify(S[0] - S1))
    E = sp.symbols(f"E_2:{T + 1}", positive=True)  # E_t = e^{−r p_t}
    to_E = {sp.exp(-r * pt): Et for Et, pt in zip(E, p)}
    SE = [(nt / den).subs(to_E) for nt in num]
    b.step("Write E_t = exp(−r p_t): S_1 = 1/(1 + ΣE), S_t = E_t/(1 + ΣE)", sp.Matrix(SE))
    from_E = {Et: sp.exp(-r * pt) for Et, pt in zip(E, p)}
    b.obligation("E_form", [SE[t].subs(from_E) - S[t] for t in range(T)])
    b.fact("E_form_difference", sp.simplify(sum((SE[t].subs(from_E) - S[t]) ** 2 for t in range(T))))
    Elim = {Et: sp.limit(sp.exp(-r * pt), r, sp.oo) for Et, pt in zip(E, p)}
    b.step("Each E_t → 0 as r → ∞ because p_t > 0", sp.Matrix(list(Elim.values())))
    b.assume("S is continuous in (E_2, …, E_T) at E = 0 (a rational function with denominator ≥ 1)", key="continuity of S at E = 0", clauses=("ray_limit",))
    lim = [sp.simplify(x.subs(Elim)) for x in SE]
    b.step("The limit", lim)
    tie_sub = dict(Elim)
    tie_sub[E[0]] = sp.limit(sp.exp(-r * 0), r, sp.oo)  # p_2 = 0: a tie with the top logit
    tie = [sp.simplify(x.subs(tie_sub)) for x in SE]
    b.step("With a tie l_1 = l_2 (p_2 = 0, E_2 = 1) the mass splits: limit", tie)
    b.obligation("limits_are_distributions", [sum(lim) - 1, sum(tie) - 1])
    # the rate, in the ℓ1 norm: ‖S − lim‖₁ = Σ_t |S_t − lim_t| (E_t > 0 decides every sign)
    dev1 = sp.simplify(sum(sp.Abs(sp.simplify(x - y)) for x, y in zip(SE, lim)))
    b.step("ℓ1 deviation ‖S(r l) − lim‖₁ = Σ_t |S_t − lim_t| (unique maximum)", dev1)
    sumE = sum(E)
    b.obligation("l1_deviation_is_twice_the_missing_mass", dev1 - 2 * sumE / (1 + sumE))
    b.obligation("l1_deviation_at_most_twice_sum_E", sp.simplify(2 * sumE - dev1), "nonnegative",
                 "2ΣE/(1 + ΣE) ≤ 2ΣE for E_t > 0")
    tie_sub_E = {E[0]: sp.Integer(1)}
    dev1_tie = sp.simplify(sum(sp.Abs(sp.simplify(x.subs(tie_sub_E) - y)) for x, y in zip(SE, tie)))
    b.step("ℓ1 deviation from the split limit with a tie (E_2 = 1)", dev1_tie)
    rest = sum(E[1:])
    b.obligation("tie_l1_deviation_at_most_sum_E", sp.simplify(2 * rest - dev1_tie), "nonnegative",
                 "with k = 2 tied maxima the ℓ1 deviation is 2ΣE/(2 + ΣE) ≤ 2ΣE over the non-tied tokens")
    gap = sp.Symbol("gap", positive=True)
    b.assume("exp is increasing: with gap = min_t p_t (the smallest positive gap) and r > 0, "
             "e^{r(p_t − gap)} = 1 + v_t with v_t ≥ 0, i.e. E_t = e^{−r·gap}/(1 + v_t)",
             key="E_t ≤ e^{−r·gap}", clauses=("ray_limit",))
    v = sp.symbols(f"v_2:{T + 1}", nonnegative=True)
    E_gap = {Et: sp.exp(-r * gap) / (1 + vt) for Et, vt in zip(E, v)}
    b.obligation("twice_sum_E_at_most_the_rate", sp.simplify(2 * (T - 1) * sp.exp(-r * gap) - (2 * sumE).subs(E_gap)),
                 "nonnegative", "2ΣE ≤ 2(T − 1)e^{−r·gap} when each E_t = e^{−r·gap}/(1 + v_t), v_t ≥ 0")
    rate = b.step("Rate: ‖S(r l) − lim‖₁ ≤ 2ΣE ≤ 2(T − 1)e^{−r·gap}",
                  sp.simplify((2 * sumE).subs({Et: sp.exp(-r * gap) for Et in E})))
    b.fact("rate_bound", rate)
    b.fact("gap", gap)
    gap_finite = sp.simplify(1 - S1)
    b.fact("gap_at_finite_r", gap_finite)
    b.step("At finite r the optimal token misses 1 − S_1 = Σexp(−rp)/(1 + Σexp(−rp))", gap_finite)
    b.obligation("gap_positive_at_finite_r", gap_finite, "positive")
    u = sp.Symbol("u", positive=True)
    g = u / (1 + u)
    b.define("1 − S_1 = g(Σ_t exp(−Δ_t)) with g(u) = u/(1 + u)", g)
    b.fact("g_derivative", sp.simplify(sp.diff(g, u)))
    b.step("g'(u)", b.facts["g_derivative"])
    b.obligation("g_increasing", sp.diff(g, u), "positive")
    b.assume("|Δ_t| = |(x_1 − x_t)ᵀWz| ≤ ‖x_1 − x_t‖·‖W‖₂·‖z‖ ≤ 2R for unit x_t, z, so Σ_t exp(−Δ_t) ≥ (T − 1)exp(−2R)",
             (T - 1) * sp.exp(-2 * R), role="bound", key="|Δ_t| ≤ 2R", clauses=("finite_norm_bound",))
    bound = sp.simplify(g.subs(u, (T - 1) * sp.exp(-2 * R)))
    b.step("g increasing: 1 − max S ≥", bound)
    b.fact("R", R)
    # any logits, not a ray: S_1 in terms of the gaps Δ_τ = l_1 − l_τ (the "iff" of saturation)
    L = sp.symbols(f"l_1:{T + 1}", real=True)
    D = sp.symbols(f"Delta_2:{T + 1}", real=True)
    S1_any = sp.exp(L[0]) / sum(sp.exp(li) for li in L)
    S1_gap = 1 / (1 + sum(sp.exp(-dt) for dt in D))
    b.step("Any logits l: S_1 = 1/(1 + Σ_τ exp(−Δ_τ)) with Δ_τ = l_1 − l_τ", S1_gap)
    b.obligation("S1_gap_form", S1_any - S1_gap.subs({dt: L[0] - lt for dt, lt in zip(D, L[1:])}))
    u_gap = sum(sp.exp(-dt) for dt in D)
    b.obligation("one_minus_S1_is_g", 1 - S1_gap - g.subs(u, u_gap),
                 description="1 − S_1 = g(u), u = Σ exp(−Δ_τ): S_1 → 1 iff u → 0 iff every Δ_τ → ∞")
    rr = sp.Symbol("r", real=True)
    pair = sp.exp(rr) / (sp.exp(rr) + sp.exp(rr - sp.Rational(1, 10)))
    slide = 1 / sp.powsimp(sp.expand((sp.exp(rr) + sp.exp(rr - sp.Rational(1, 10))) * sp.exp(-rr)), combine="exp")
    b.step("l = (r, r − 1/10): ‖l‖ → ∞ with l_1 strictly largest, yet S_1 (divided through by e^r) does not depend on r",
           slide)
    b.obligation("slide_form", pair - slide, description="S_1(r, r − 1/10) equals the r-free value")
    b.fact("slide_S1", slide)
    return b.done({"limit": lim, "tie_limit": tie, "gap_bound": bound, "rate_bound": rate})


def ray_limit(l: Sequence) -> list:
    """The exact limit of ``S(r·l)`` as ``r → ∞`` for a vector ``l`` of rationals, by SymPy's
    ``limit`` (an independent reference for a claimed saturation formula).

    >>> ray_limit([1, 0, 1])
    [1/2, 0, 1/2]
    """
    r = sp.Symbol("r", positive=True)
    ls = [sp.nsimplify(x) for x in l]
    m = max(ls)
    Z = sum(sp.exp(r * (li - m)) for li in ls)
    return [sp.limit(sp.exp(r * (li - m)) / Z, r, sp.oo) for li in ls]


@lru_cache(maxsize=None)
def derive_optimal_selection(T: int = 3, attainment: bool = True) -> Derivation:
    """Derive ``γ_1 − Σ_t s_t γ_t = Σ_{t≥2} s_t (γ_1 − γ_t)`` on the simplex (``s_1 = 1 − Σ s_t``):
    with ``γ_1`` the unique largest score the model output ``yf = Σ s_t γ_t`` is at most ``γ_1``,
    with equality only at ``s = e_1``; for a strictly decreasing loss ``inf L ≥ ℓ(γ_opt)``.
    With ``attainment`` (the other half, keyed to the Att-SVM being feasible): along ``r·W_f``, ``W_f``
    feasible, token 1's logit exceeds token t's by ``r·c_t`` with ``c_t ≥ 1``; SymPy's limit
    ``r → ∞`` of the softmax-weighted output is ``γ_1`` (softmax saturation), so ``inf L = ℓ(γ_opt)``
    for a continuous, strictly decreasing ``ℓ``.

    ``result`` is the right-hand side; ``facts["residual"]`` the simplified difference (0).

    >>> d = derive_optimal_selection(2)
    >>> d.facts["residual"]
    0
    >>> d.result
    s_2*(gamma_1 - gamma_2)
    """
    b = DerivationBuilder("Optimal token selection: the output is maximised only at the top-score token")
    b.symbols(gamma_t="score y vᵀx_t of token t", s_t="softmax weight of token t (s_1 = 1 − Σ_{t≥2} s_t)",
              delta_t="γ_1 − γ_t > 0 when γ_1 is the unique largest score")
    gam = sp.symbols(f"gamma_1:{T + 1}", real=True)
    s = sp.symbols(f"s_2:{T + 1}", nonnegative=True)
    s1 = 1 - sum(s)
    out = s1 * gam[0] + sum(st * g for st, g in zip(s, gam[1:]))
    b.define("y f = Σ_t s_t γ_t with s_1 = 1 − Σ(t≥2) s_t (weights on the simplex)", out)
    lhs = sp.expand(gam[0] - out)
    b.step("γ_1 − y f expands to", lhs)
    rhs = sp.collect(lhs, s)
    b.step("Collected in s_2, …, s_T", rhs, compact=r"\gamma_1-yf=\sum_{t\ge2}s_t(\gamma_1-\gamma_t)")
    stated = sum(st * (gam[0] - g) for st, g in zip(s, gam[1:]))
    b.obligation("residual", rhs - stated, description="γ_1 − y f = Σ(t≥2) s_t (γ_1 − γ_t)")
    b.fact("residual", sp.simplify(lhs - sp.expand(stated)))
    delta = sp.symbols(f"delta_2:{T + 1}", positive=True)
    b.assume("γ_1 is the unique largest score: γ_t = γ_1 − δ_t with δ_t > 0", sp.Matrix([gam[0] - dt for dt in delta]), key="unique top score")
    gap = rhs.subs({g: gam[0] - dt for g, dt in zip(gam[1:], delta)})
    b.step("Then γ_1 − y f =", gap)
    b.obligation("output_at_most_top_score", gap, "nonnegative", description="y f ≤ γ_1, equality only at s_t = 0 (t ≥ 2)")
    b.fact("gamma", gam)
    b.fact("s", s)
    if attainment:
        _attain_top_score(b, gam, out, s)
    return b.done(rhs)


def _attain_top_score(b: DerivationBuilder, gam, out, s) -> None:
    """The attainment half of ``inf L = ℓ(γ_opt)``: along ``r·W_f`` (``W_f`` Att-SVM feasible) the
    output tends to ``γ_1`` (a SymPy limit), so the lower bound is the infimum."""
    r = sp.Symbol("r", positive=True)
    c = sp.symbols(f"c_2:{len(gam) + 1}", positive=True)
    b.assume("Att-SVM feasible: some W_f has (x_opt − x_t)ᵀW_f z ≥ 1 for every t ≠ opt, so along W = r·W_f token 1's "
             "logit exceeds token t's by r·c_t, c_t ≥ 1 > 0", sp.Matrix(c), key="Att-SVM feasible", clauses=("infimum", "only_opt"))
    den = 1 + sum(sp.exp(-r * ct) for ct in c)
    along = out.xreplace({st: sp.exp(-r * ct) / den for st, ct in zip(s, c)})
    b.step("y f along r·W_f: softmax weights s_t = e^{−r c_t}/(1 + Σ_u e^{−r c_u})", along)
    lim = b.step("lim_{r→∞} y f(r·W_f) (softmax saturation)", sp.limit(along, r, sp.oo))
    b.obligation("output_tends_to_top_score", lim - gam[0], description="y f(r·W_f) → γ_1 as r → ∞")
    b.assume("ℓ is continuous and strictly decreasing (logistic ℓ(u) = log(1 + e^{−u})): ℓ(y f(r·W_f)) → ℓ(γ_1), and "
             "with y f ≤ γ_1 the infimum of the mean loss over W is (1/n)Σ_i ℓ(γ_i,opt), approached along r·W_f",
             key="ℓ continuous, decreasing", clauses=("infimum", "only_opt"))


@lru_cache(maxsize=None)
def derive_att_svm_kkt(K: int = 2, d: int = 2) -> Derivation:
    """KKT conditions of the Frobenius Att-SVM ``min ½‖W‖_F² s.t. A_k : W ≥ 1`` with symbolic
    ``A_k ∈ R^{d×d}`` (``A_k = (x_{i,opt} − x_{i,t}) z_iᵀ``) and multipliers ``α_k ≥ 0``.

    Stationarity of the Lagrangian ``½‖W‖² − Σ α_k (A_k:W − 1)`` in each entry of ``W`` is solved
    for ``W``: the representer form ``W = Σ α_k A_k``; substituting it gives the dual function
    ``Σα − ½‖Σ α_k A_k‖_F²``. ``result``: {"W": Matrix, "dual": expr}; facts ``alpha``, ``A``.

    >>> d = derive_att_svm_kkt(1, 1)
    >>> d.result["W"], d.result["dual"]
    (Matrix([[a_1_11*alpha_1]]), -a_1_11**2*alpha_1**2/2 + alpha_1)
    """
    b = DerivationBuilder("Att-SVM KKT conditions: representer form and dual function")
    b.symbols(w_ij="entry (i, j) of W", alpha_k="multiplier of constraint k (≥ 0)",
              a_k_ij="entry (i, j) of A_k = (x_i,opt − x_i,t) z_iᵀ")
    W = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"w_{i + 1}{j + 1}", real=True))
    alpha = sp.symbols(f"alpha_1:{K + 1}", nonnegative=True)
    A = [sp.Matrix(d, d, lambda i, j, k=k: sp.Symbol(f"a_{k + 1}_{i + 1}{j + 1}", real=True)) for k in range(K)]
    frob = lambda M, N: sum(M[i, j] * N[i, j] for i in range(d) for j in range(d))
    Lag = sp.Rational(1, 2) * frob(W, W) - sum(a * (frob(Ak, W) - 1) for a, Ak in zip(alpha, A))
    b.define("Lagrangian of min ½ (Frobenius norm of W)² s.t. A_k : W ≥ 1: ½ Σ_ij w_ij² − Σ_k α_k (A_k : W − 1)", Lag)
    b.assume("KKT (convex objective, affine constraints): the minimiser W^mm has multipliers α_k ≥ 0 with the "
             "Lagrangian stationary in W", key="KKT multipliers α ≥ 0")
    eqs = [sp.diff(Lag, W[i, j]) for i in range(d) for j in range(d)]
    b.step("Stationarity ∂/∂w_ij = 0, every entry", sp.Matrix(eqs), compact=r"W-\sum_k\alpha_kA_k=0")
    sol = sp.solve(eqs, list(W), dict=True)[0]
    Wstar = W.subs(sol)
    b.step("Solved for W: the representer form W = Σ_k α_k A_k", Wstar)
    b.obligation("stationary_at_representer", [e.subs(sol) for e in eqs])
    b.obligation("representer_form", Wstar - sum((a * Ak for a, Ak in zip(alpha, A)), sp.zeros(d, d)))
    dual = sp.expand(Lag.subs(sol))
    b.step("Dual function: the Lagrangian at the stationary W", dual,
           compact=r"\sum_k\alpha_k-\tfrac12\big\|\sum_k\alpha_kA_k\big\|_F^2")
    b.obligation("dual_function_form", dual - (sum(alpha) - frob(Wstar, Wstar) / 2))
    b.assume("Complementary slackness α_k (A_k : W − 1) = 0: only tight (support) constraints carry α_k > 0", key="complementary slackness")
    b.fact("alpha", alpha)
    b.fact("A", A)
    return b.done({"W": Wstar, "dual": dual})


def _leading_minors_positive(M: list) -> bool:
    """Exact test that a symmetric integer matrix is positive definite: every leading principal minor
    is > 0 (Sylvester), the minors being the pivots of fraction-free (Bareiss) elimination."""
    A = [row[:] for row in M]
    n, prev = len(A), 1
    for k in range(n):
        if A[k][k] <= 0:
            return False
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                A[i][j] = (A[i][j] * A[k][k] - A[i][k] * A[k][j]) // prev
        prev = A[k][k]
    return True


def _dyadic(x: float) -> tuple[int, int]:
    """``x = m / 2**e`` exactly (a float is a dyadic rational)."""
    num, den = float(x).as_integer_ratio()
    return num, den.bit_length() - 1


def nuclear_certificate(A, W, duals, bits: int = 40) -> dict | None:
    """An exact rational bracket ``lower ≤ v* ≤ upper`` of the nuclear-norm Att-SVM optimum
    ``v* = min ‖W‖_* s.t. ⟨A_k, W⟩ ≥ 1`` (``A (K, d, d)``, floats taken at their exact binary values),
    built from an approximate primal point ``W`` and multipliers ``duals`` (any solver's) and checked
    in exact integer arithmetic (every quantity a dyadic rational):

    * upper: ``W ≈ P Qᵀ`` from its SVD (``P = U√S``, ``Q = V√S``, entries rounded to multiples of
      ``2^-bits``), scaled by ``c = max(1, 1/min_k ⟨A_k, PQᵀ⟩)`` so that every constraint holds exactly;
      then ``‖cPQᵀ‖_* ≤ c·(‖P‖_F² + ‖Q‖_F²)/2`` (Hölder and AM–GM);
    * lower (weak duality): ``α = max(0, duals)`` rounded likewise, ``M = Σ α_k A_k``, an ``s`` with
      ``s² I − MᵀM`` positive definite (exact leading minors), so ``‖M/s‖₂ ≤ 1`` and
      ``Σα/s ≤ ⟨M/s, W'⟩ ≤ ‖W'‖_*`` for every feasible ``W'``.

    Returns ``{"lower", "upper"}`` as Fractions plus floats and the relative gap, or ``None`` when the
    point is not strictly feasible after rounding (no certificate).

    >>> import numpy as np
    >>> A = np.array([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 1.0]]])  # W11 ≥ 1, W22 ≥ 1: v* = 2
    >>> c = nuclear_certificate(A, np.eye(2), [0.5, 0.5])
    >>> c["lower"] <= 2 <= c["upper"], float(c["upper"] - c["lower"]) < 1e-9
    (True, True)
    """
    from fractions import Fraction
    from math import isqrt

    import numpy as np

    A = np.asarray(A, dtype=np.float64)
    K, d, _ = A.shape
    W = np.asarray(W, dtype=np.float64)
    pairs = [_dyadic(x) for x in A.ravel()]
    EA = max(e for _, e in pairs)
    Ai = np.array([m << (EA - e) for m, e in pairs], dtype=object).reshape(K, d, d)  # A = Ai / 2**EA
    U, S, Vt = np.linalg.svd(W)
    one = 1 << bits
    P = [[int(round(x * one)) for x in row] for row in U * np.sqrt(S)]  # P = P_int / 2**bits
    Q = [[int(round(x * one)) for x in row] for row in Vt.T * np.sqrt(S)]
    Wr = [[sum(P[a][r] * Q[b][r] for r in range(d)) for b in range(d)] for a in range(d)]  # / 2**(2 bits)
    Wr_o = np.array(Wr, dtype=object)
    margins = [int((Ai[k] * Wr_o).sum()) for k in range(K)]  # / 2**(EA + 2 bits)
    mmin = Fraction(min(margins), 1 << (EA + 2 * bits))
    if mmin <= 0:
        return None
    c = max(Fraction(1), 1 / mmin)
    upper = c * Fraction(sum(x * x for row in P for x in row) + sum(x * x for row in Q for x in row), 2 * one * one)
    alpha = [max(0, int(round(float(a) * one))) for a in np.asarray(duals, dtype=float)]  # / 2**bits
    M = np.tensordot(np.array(alpha, dtype=object), Ai, axes=1)  # / 2**(bits + EA)
    MtM = [[int(sum(M[r][a] * M[r][b] for r in range(d))) for b in range(d)] for a in range(d)]  # / 2**(2(bits+EA))
    scale2 = 1 << (2 * (bits + EA))
    Mf = np.array([[float(Fraction(int(x), 1 << (bits + EA))) for x in row] for row in M])
    s2 = int(Fraction(float(np.linalg.norm(Mf, 2)) ** 2 * (1 + 1e-12)) * scale2) + 1  # / scale2
    for _ in range(60):
        if _leading_minors_positive([[(s2 if a == b else 0) - MtM[a][b] for b in range(d)] for a in range(d)]):
            break
        s2 += s2 // 1_000_000 + 1
    else:
        return None
    s = isqrt(s2) + 1  # s² > s2: s / 2**(bits + EA) bounds ‖M‖₂
    lower = Fraction(sum(alpha) << EA, s)
    return {"lower": lower, "upper": upper, "lower_float": float(lower), "upper_float": float(upper),
            "relative_gap": float((upper - lower) / lower) if lower > 0 else float("inf"),
            "primal_scale": float(c), "rows": K}
