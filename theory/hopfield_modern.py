"""The modern continuous Hopfield network derived in SymPy (claims ``hop.*``): its energy and descent, the
Theorem-5 retrieval bound, and attention as its update. Part of :mod:`theory.hopfield` (conventions in its docstring)."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder
from theory.hopfield_classical import _canon, _sym_matrix


# --------------------------------------------------------------------------------------------
# modern continuous Hopfield network


def _lse(beta, z):
    return sp.log(sum(sp.exp(beta * zi) for zi in z)) / beta


def _sum_linear(S: sp.Sum, index: sp.Symbol):
    """Linearity of a finite sum: Σ_l (c·f_l + …) = c·Σ_l f_l + … (constants not depending on ``index`` pulled out)."""
    out = sp.Integer(0)
    for t in sp.Add.make_args(sp.expand(S.function)):
        c, rest = t.as_independent(index, as_Add=False)
        out += c * sp.Sum(rest, *S.limits)
    return out


def _modern_descent(b: DerivationBuilder, beta):
    """Steps of :func:`derive_modern_energy` showing, for every ``d`` and ``N`` (scalar and ``Sum``
    symbols, no instantiated size), that one update ``ν = X S(βXᵀξ)`` lowers the energy by exactly
    ``½‖ξ − ν‖² + β⁻¹ KL(p‖p')`` (``p = S(βXᵀξ)``, ``p' = S(βXᵀν)``), and that ``KL ≥ 0`` (Gibbs, from
    ``log x ≤ x − 1``): the CCCP descent of Ramsauer et al. (2021) Thm 1, as an identity. Returns the decrease."""
    Nn = sp.Symbol("N", integer=True, positive=True)
    l = sp.Symbol("l", integer=True, positive=True)
    pb, qb, zb, zpb = (sp.IndexedBase(k) for k in ("p", "q", "z", "zp"))
    a, bb, cc = sp.symbols("a b c", real=True)
    L, Lp, C = sp.symbols("L Lp C", real=True)
    b.define("One update ν = ξ^new = X p with p = S(βz), z = Xᵀξ; p' = S(βz'), z' = Xᵀν. Scalars: a = ξᵀξ, "
             "b = νᵀξ = pᵀz, c = νᵀν = pᵀz' (because ν = Xp), L = ln Σ_l e^(βz_l), Lp = ln Σ_l e^(βz'_l), "
             "so lse(β, z) = L/β, lse(β, z') = Lp/β, and ln p_l = βz_l − L, ln p'_l = βz'_l − Lp",
             sp.Eq(sp.Symbol("b"), sp.Sum(pb[l] * zb[l], (l, 1, Nn))))
    E_xi = -L / beta + a / 2 + C
    E_nu = -Lp / beta + cc / 2 + C
    b.define("E(ξ) and E(ν) in these scalars (C = β⁻¹ ln N + ½M², the same for both)", sp.Eq(sp.Symbol("E(xi)") - sp.Symbol("E(nu)"), E_xi - E_nu))
    KL = sp.Sum(pb[l] * ((beta * zb[l] - L) - (beta * zpb[l] - Lp)), (l, 1, Nn))
    KL_lin = b.step("KL(p‖p') = Σ_l p_l (ln p_l − ln p'_l), by linearity of the sum", _sum_linear(KL, l))
    subs = {sp.Sum(pb[l], (l, 1, Nn)): 1, sp.Sum(pb[l] * zb[l], (l, 1, Nn)): bb, sp.Sum(pb[l] * zpb[l], (l, 1, Nn)): cc}
    KL_s = b.step("With Σ_l p_l = 1, Σ_l p_l z_l = b, Σ_l p_l z'_l = c", sp.expand(KL_lin.subs(subs)))
    b.obligation("kl_sums_resolved", sp.Integer(int(KL_s.has(sp.Sum))), description="no sum over l is left")
    sq = sp.expand(a - 2 * bb + cc)
    b.step("‖ξ − ν‖² = ξᵀξ − 2νᵀξ + νᵀν", sq)
    decrease = sp.expand(E_xi - E_nu)
    resid = sp.expand(decrease - (sq / 2 + KL_s / beta))
    b.step("E(ξ) − E(ν) − (½‖ξ − ν‖² + β⁻¹ KL(p‖p'))", resid,
           compact=r"E(\xi)-E(\xi^{\rm new})=\tfrac12\|\xi-\xi^{\rm new}\|^2+\beta^{-1}\mathrm{KL}(p\|p')")
    b.obligation("descent_identity", resid, description="E(ξ) − E(ξ^new) = ½‖ξ − ξ^new‖² + β⁻¹ KL(p‖p') for every d, N")
    x = sp.Symbol("x", positive=True)
    f = x - 1 - sp.log(x)
    b.step("Gibbs: f(x) = x − 1 − ln x; its stationary points", sp.solve(sp.diff(f, x), x))
    b.obligation("log_bound_convex", sp.diff(f, x, 2), "positive", description="f''(x) = 1/x² > 0: x = 1 is the minimum")
    b.step("f(1) (the minimum value): ln x ≤ x − 1 for x > 0", f.subs(x, 1))
    b.obligation("log_bound_minimum_zero", f.subs(x, 1))
    gibbs = _sum_linear(sp.Sum(pb[l] * (qb[l] / pb[l] - 1), (l, 1, Nn)), l)
    b.step("−KL(p‖p') = Σ_l p_l ln(p'_l/p_l) ≤ Σ_l p_l (p'_l/p_l − 1) =", gibbs)
    gibbs0 = gibbs.subs({sp.Sum(pb[l], (l, 1, Nn)): 1, sp.Sum(qb[l], (l, 1, Nn)): 1})
    b.step("= 0 (p and p' = q both sum to 1): KL(p‖p') ≥ 0", gibbs0)
    b.obligation("gibbs_bound_is_zero", gibbs0)
    h, K = sp.Symbol("h", nonnegative=True), sp.Symbol("K", nonnegative=True)
    b.step("With ‖ξ − ν‖² = h ≥ 0, KL = K ≥ 0 and β > 0 the decrease is", h / 2 + K / beta)
    b.obligation("energy_never_increases", h / 2 + K / beta, "nonnegative",
                 description="E(ξ^new) ≤ E(ξ) for β > 0 (needs β > 0: the KL term is divided by β)")
    return decrease


@lru_cache(maxsize=None)
def derive_modern_energy(d: int = 2, N: int = 2) -> Derivation:
    """Modern Hopfield energy ``E(ξ) = −lse(β, Xᵀξ) + ½ξᵀξ + β^{-1} ln N + ½M²``: gradient
    ``ξ − X S(βXᵀξ)``, the concave–convex split, the CCCP step solved for ``ξ^new`` (giving
    ``X S(βXᵀξ)``), and the bounds ``E ≥ ½(‖ξ‖ − M)² ≥ 0`` and ``E ≤ 2M²`` for ``‖ξ‖ ≤ M``
    (in particular on the convex hull of the patterns).

    ``result`` is ``ξ^new`` (a column); facts: ``energy``, ``grad``, symbols ``xi``, ``X``,
    ``beta``, ``M``, residuals (all 0), ``lower_gap``/``upper_gap`` in ``t = ‖ξ‖``.

    >>> r = derive_modern_energy(2, 2)
    >>> r.facts["grad_residual"], r.facts["cccp_residual"], r.facts["hessian_residual"]
    (0, 0, 0)
    >>> sp.expand(r.facts["lower_gap"] - (r.facts["M"] - r.facts["t"]) ** 2 / 2)
    0
    """
    b = DerivationBuilder("Modern Hopfield energy: gradient, concave–convex split, CCCP step, bounds")
    b.symbols(xi_j="coordinate j of the state ξ", x_jm="coordinate j of stored pattern m (patterns are columns of X)",
              beta="inverse temperature", M="largest pattern norm max_m ‖x_m‖", t="the state norm ‖ξ‖",
              lnN="ln N (N stored patterns)", xinew_j="coordinate j of the next state", lse="lse(β, Xᵀξ)",
              k="a parameter for t = M/(1 + k), k ≥ 0")
    beta, M = sp.symbols("beta M", positive=True)
    xi = sp.Matrix(sp.symbols(f"xi_1:{d + 1}", real=True))
    X = _sym_matrix("x", d, N, real=True)
    z = list(X.T * xi)
    lse = _lse(beta, z)
    E = -lse + (xi.T * xi)[0, 0] / 2 + sp.log(N) / beta + M ** 2 / 2
    b.define("E(ξ) = −lse(β, Xᵀξ) + ½ξᵀξ + β⁻¹ ln N + ½M²", E)
    p = [sp.exp(beta * zi) / sum(sp.exp(beta * zj) for zj in z) for zi in z]
    S = sp.Matrix(p)
    grad = sp.Matrix([sp.diff(E, v) for v in xi])
    b.step("∇E by differentiating the energy", grad, compact=r"\nabla E=\xi-X\,S(\beta X^{\top}\xi)")
    b.obligation("gradient_form", grad - (xi - X * S), description="∇E = ξ − X S(βXᵀξ)")
    grad_res = _canon(grad - (xi - X * S))
    b.step("∇E − (ξ − X S(βXᵀξ))", grad_res)
    E1 = (xi.T * xi)[0, 0] / 2 + sp.log(N) / beta + M ** 2 / 2
    E2 = -lse
    b.define("Split E = E₁ + E₂ with E₁ = ½ξᵀξ + const and E₂ = −lse", sp.Eq(sp.Symbol("E_2"), E2))
    b.step("Hessian of E₁ (the identity: E₁ is convex)", sp.hessian(E1, list(xi)))
    H2 = sp.hessian(lse, list(xi))
    P = sp.diag(*p) - S * S.T
    b.obligation("lse_hessian_form", H2 - beta * X * P * X.T, description="∇²lse = β X (diag p − ppᵀ) Xᵀ")
    hess_res = _canon(H2 - beta * X * P * X.T)
    b.step("∇²lse − β X (diag p − ppᵀ) Xᵀ", hess_res)
    b.assume("diag(p) − ppᵀ is the covariance of a one-hot draw with probabilities p, hence ⪰ 0: E₂ = −lse is concave", key="softmax covariance ⪰ 0", clauses=("cccp_step",))
    b.step("diag(p) − ppᵀ annihilates 1 (entries of (diag p − ppᵀ)1)", _canon(P * sp.ones(N, 1)))
    b.obligation("covariance_annihilates_ones", P * sp.ones(N, 1))
    new = sp.Matrix(sp.symbols(f"xinew_1:{d + 1}", real=True))
    grad_E1_new = sp.Matrix([sp.diff(E1, v) for v in xi]).subs(dict(zip(xi, new)))
    grad_E2 = sp.Matrix([sp.diff(E2, v) for v in xi])
    b.define("CCCP: ∇E₁(ξ^new) = −∇E₂(ξ)", sp.Eq(grad_E1_new, -grad_E2))
    sol = sp.solve(list(grad_E1_new + grad_E2), list(new), dict=True)[0]
    upd = sp.Matrix([sol[v] for v in new])
    b.step("Solved for ξ^new", upd, compact=r"\xi^{\mathrm{new}}=X\,S(\beta X^{\top}\xi)")
    b.obligation("cccp_step_is_softmax_update", upd - X * S)
    cccp_res = _canon(upd - X * S)
    b.step("ξ^new − X S(βXᵀξ)", cccp_res)
    descent = _modern_descent(b, beta)
    t = sp.Symbol("t", nonnegative=True)
    lnN = sp.Symbol("lnN", positive=True)
    lse_s = sp.Symbol("lse", real=True)
    E_t = -lse_s + t ** 2 / 2 + lnN / beta + M ** 2 / 2
    b.step("E in terms of lse and t = ‖ξ‖", E_t)
    hi = b.assume("lse(β, z) ≤ max_i z_i + β⁻¹ ln N ≤ M t + β⁻¹ ln N (Cauchy–Schwarz, ‖x_i‖ ≤ M)",
                  M * t + lnN / beta, role="bound", key="lse upper bound", clauses=("nonnegative",))
    lower = sp.factor(E_t.subs(lse_s, hi))
    b.step("Lower bound E ≥", lower)
    b.obligation("lower_bound_is_half_square", lower - (M - t) ** 2 / 2, description="E ≥ ½(‖ξ‖ − M)² ≥ 0")
    lo = b.assume("lse(β, z) ≥ mean_i z_i + β⁻¹ ln N ≥ −M t + β⁻¹ ln N (Jensen)", -M * t + lnN / beta, role="bound", key="lse lower bound (Jensen)", clauses=("hull_bound",))
    upper = sp.expand(E_t.subs(lse_s, lo))
    b.step("Upper bound E ≤", upper)
    upper_gap = sp.factor(2 * M ** 2 - upper)
    b.step("2M² minus that bound", upper_gap)
    k = sp.Symbol("k", nonnegative=True)
    b.obligation("upper_bound_at_most_2M2", sp.factor(upper_gap.subs(t, M / (1 + k))), "nonnegative",
                 description="2M² − bound ≥ 0 for 0 < t ≤ M, written t = M/(1 + k), k ≥ 0 (true on the convex hull)")
    b.record(energy=E, grad=grad, grad_residual=sp.Integer(0) if grad_res == sp.zeros(d, 1) else grad_res,
             cccp_residual=sp.Integer(0) if cccp_res == sp.zeros(d, 1) else cccp_res,
             hessian_residual=sp.Integer(0) if hess_res == sp.zeros(d, d) else hess_res, lower_gap=lower,
             upper_gap=upper_gap, descent_decrease=descent, t=t, xi=tuple(xi), X=X, beta=beta, M=M)
    return b.done(upd)


@lru_cache(maxsize=None)
def derive_retrieval_bound(N: int = 3, d: int = 2) -> Derivation:
    """Ramsauer et al. (2021), Theorem 5: ``‖f(ξ) − x_i‖ ≤ 2(N−1) exp(−β(Δ_i − 2εM)) M`` with
    ``f(ξ) = X S(βXᵀξ)``, ``Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j``, ``ε ≥ ‖ξ − x_i‖``.

    Steps: ``f(ξ) − x_i = Σ_{j≠i} p_j (x_j − x_i)`` (because Σp = 1); ``p_j ≤ p_j/p_i =
    exp(β(x_j − x_i)ᵀξ)``; ``(x_j − x_i)ᵀξ = (x_j − x_i)ᵀx_i + (x_j − x_i)ᵀ(ξ − x_i) ≤ −Δ_i + 2Mε``;
    ``‖x_j − x_i‖ ≤ 2M``. ``result`` is the bound in symbols ``N, beta, Delta, eps, M``
    (``facts["args"]``).

    >>> r = derive_retrieval_bound()
    >>> r.facts["decomposition_residual"], r.facts["ratio_residual"]
    (0, 0)
    >>> r.result
    2*M*(N - 1)*exp(beta*(-Delta + 2*M*epsilon))
    >>> r.provenance
    {'result': 'derived'}
    """
    b = DerivationBuilder("Theorem 5 (Ramsauer et al. 2021): one-step retrieval bound")
    b.symbols(xi_j="coordinate j of the state ξ", x_jm="coordinate j of stored pattern m (columns of X)",
              beta="inverse temperature", N="number of stored patterns", M="largest pattern norm",
              Delta="separation Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j", epsilon="distance bound ‖ξ − x_i‖ ≤ ε",
              e="the exponent (x_j − x_i)ᵀξ", j="index of another pattern", p_j="softmax weight of pattern j")
    beta = sp.Symbol("beta", positive=True)
    xi = sp.Matrix(sp.symbols(f"xi_1:{d + 1}", real=True))
    X = _sym_matrix("x", d, N, real=True)
    z = list(X.T * xi)
    Z = sum(sp.exp(beta * zj) for zj in z)
    p = [sp.exp(beta * zj) / Z for zj in z]
    f = X * sp.Matrix(p)
    b.define("One update f(ξ) = X S(βXᵀξ) (softmax over the stored patterns)", f)
    dec = sum((p[j] * (X[:, j] - X[:, 0]) for j in range(1, N)), sp.zeros(d, 1))
    b.obligation("decomposition", f - X[:, 0] - dec, description="f(ξ) − x_1 = Σ(j≠1) p_j (x_j − x_1)")
    dec_res = _canon(f - X[:, 0] - dec)
    b.step("f(ξ) − x_1 − Σ(j≠1) p_j (x_j − x_1) (uses Σ_j p_j = 1) simplifies to", dec_res)
    b.obligation("softmax_ratio", p[1] / p[0] - sp.exp(beta * (X[:, 1] - X[:, 0]).dot(xi)),
                 description="p_j / p_1 = exp(β(x_j − x_1)ᵀξ)")
    ratio_res = sp.simplify(p[1] / p[0] - sp.exp(beta * (X[:, 1] - X[:, 0]).dot(xi)))
    b.step("p_j / p_1 − exp(β(x_j − x_1)ᵀξ) simplifies to", ratio_res)
    split = sp.expand((X[:, 1] - X[:, 0]).dot(xi) - (X[:, 1] - X[:, 0]).dot(X[:, 0])
                      - (X[:, 1] - X[:, 0]).dot(xi - X[:, 0]))
    b.step("(x_j − x_1)ᵀξ − (x_j − x_1)ᵀx_1 − (x_j − x_1)ᵀ(ξ − x_1)", split)
    b.obligation("exponent_split", split)
    Nn, Delta, eps, M = sp.symbols("N Delta epsilon M", positive=True)
    e, j = sp.Symbol("e", real=True), sp.Symbol("j", integer=True, positive=True)
    b.assume("Triangle inequality: ‖f(ξ) − x_1‖ ≤ Σ(j≠1) p_j ‖x_j − x_1‖, and p_j ≤ p_j/p_1 because p_1 ≤ 1", role="bound", key="triangle inequality, p_1 ≤ 1")
    tail = sp.exp(beta * e)
    b.step("Softmax tail: p_j ≤ p_j/p_1 = exp(β e) with e = (x_j − x_1)ᵀξ", tail)
    b.obligation("tail_increasing_in_exponent", sp.diff(tail, e), "positive", description="exp(βe) increases with e")
    e_max = b.assume("e = (x_j − x_1)ᵀx_1 + (x_j − x_1)ᵀ(ξ − x_1) ≤ −Δ_1 + 2Mε (definition of Δ; Cauchy–Schwarz "
                     "with ‖x_j − x_1‖ ≤ 2M and ‖ξ − x_1‖ ≤ ε)", -Delta + 2 * M * eps, role="bound", key="exponent bound −Δ + 2Mε")
    tail_max = tail.subs(e, e_max)
    b.step("Insert the largest exponent: p_j ≤", tail_max)
    dist = b.assume("‖x_j − x_1‖ ≤ 2M (‖x_j‖ ≤ M)", 2 * M, role="bound", key="‖x_j − x_1‖ ≤ 2M")
    bound = sp.summation(tail_max * dist, (j, 2, Nn))
    b.step("Sum the N − 1 terms p_j ‖x_j − x_1‖ ≤ 2M exp(β(−Δ + 2Mε)) over j ≠ 1: ‖f(ξ) − x_1‖ ≤", bound,
           compact=r"\|f(\xi)-x_i\|\le 2(N-1)\,M\,e^{-\beta(\Delta_i-2\epsilon M)}")
    # Theorem 5's second part and the separation condition of App. A Lemmas A5–A7 (retrieval with one update)
    near = b.step("Query and fixed point within 1/(2βM) of x_i: ε = 1/(2βM) in the bound",
                  sp.simplify(bound.subs(eps, 1 / (2 * beta * M))))
    b.obligation("bound_increases_in_eps", sp.diff(bound, eps) / bound, "positive",
                 description="the bound grows with ε, so ε ≤ 1/(2βM) gives at most this")
    b.obligation("near_bound_is_2e", sp.simplify(near - 2 * sp.E * (Nn - 1) * M * sp.exp(-beta * Delta)),
                 description="= 2e(N−1)M e^(−βΔ_i) (Theorem 5)")
    Dmin = b.assume("Well separated x_i (Ramsauer et al., ICLR 2021, App. A Lemmas A5–A7): Δ_i ≥ 2/(βN) + β⁻¹ ln(2(N−1)NβM²); "
                    "then the update is a contraction on the sphere ‖ξ − x_i‖ ≤ 1/(βNM) ⊂ {‖ξ − x_i‖ ≤ 1/(2βM)} "
                    "(N ≥ 2), whose fixed point is x_i*", 2 / (beta * Nn) + sp.log(2 * (Nn - 1) * Nn * beta * M ** 2) / beta,
                    role="premise", key="well-separated patterns", clauses=("retrieval",))
    b.obligation("near_bound_decreases_in_delta", -sp.diff(near, Delta) / near, "positive")
    at_min = b.step("2e(N−1)M e^(−βΔ_i) at Δ_i = Δ_min: the retrieval error is at most",
                    sp.simplify(sp.expand_log(near.subs(Delta, Dmin), force=True)))
    b.obligation("separated_error_small", sp.simplify(at_min - sp.exp(1 - 2 / Nn) / (beta * Nn * M)),
                 description="‖f(ξ) − x_i‖ ≤ e^(1−2/N)/(βNM) for a well-separated x_i")
    b.record(near_bound=near, delta_min=Dmin, separated_error=at_min,
             decomposition_residual=sp.Integer(0) if dec_res == sp.zeros(d, 1) else dec_res, ratio_residual=ratio_res,
             split_residual=split, args=(Nn, beta, Delta, eps, M))
    return b.done(bound)


# --------------------------------------------------------------------------------------------
# attention as a Hopfield update


@lru_cache(maxsize=None)
def derive_attention_identity(S: int = 2, T: int = 3, dk: int = 2, dv: int = 2) -> Derivation:
    """``S(QKᵀ/√d_k) V`` with ``K = YW_K``, ``Q = RW_Q``, ``V = YW_KW_V`` equals one Hopfield
    update of the state patterns ``Ξ = Qᵀ`` over stored ``X = Kᵀ`` at ``β = 1/√d_k``,
    transposed, then ``W_V``.

    The linear algebra is done with ``MatrixSymbol``s; the softmax step with explicit
    ``S×d_k`` / ``T×d_k`` symbol matrices (softmax over the stored-pattern index, which is the
    column index of ``QKᵀ`` and the row index of ``XᵀΞ``). ``result`` is the attention output
    (``S×d_v``) in the symbols ``facts["Q"], facts["K"], facts["W_V"]``; ``facts["residual"]`` is
    the zero matrix.

    >>> r = derive_attention_identity(1, 2, 1, 1)
    >>> r.facts["residual"]
    Matrix([[0]])
    >>> r.facts["matrix_residual"]
    0
    """
    b = DerivationBuilder("Attention is one Hopfield update (Ramsauer et al. 2021)")
    b.symbols(q_sk="entry (s, k) of Q = R W_Q (queries are rows)", k_tk="entry (t, k) of K = Y W_K",
              v_kj="entry (k, j) of W_V", d_m="model width", Y="stored (key) tokens, rows", R="state (query) tokens, rows")
    dm = sp.Symbol("d_m", integer=True, positive=True)
    Ym, Rm = sp.MatrixSymbol("Y", T, dm), sp.MatrixSymbol("R", S, dm)
    WQ, WK, WV = sp.MatrixSymbol("W_Q", dm, dk), sp.MatrixSymbol("W_K", dm, dk), sp.MatrixSymbol("W_V", dk, dv)
    Km, Qm = Ym * WK, Rm * WQ
    Xm, Xim = Km.T, Qm.T
    b.define("Stored patterns X = Kᵀ = (YW_K)ᵀ, state patterns Ξ = Qᵀ = (RW_Q)ᵀ", sp.Eq(sp.MatrixSymbol("X", dk, T), Xm))
    logits_h = (Xm.T * Xim)
    mres = sp.simplify((logits_h.T - Qm * Km.T).doit())
    b.step("Hopfield logits XᵀΞ = K Qᵀ, i.e. (XᵀΞ)ᵀ = Q Kᵀ; (XᵀΞ)ᵀ − QKᵀ =", mres)
    b.fact("matrix_residual", sp.Integer(0) if mres == sp.ZeroMatrix(S, T) or mres == 0 else mres)
    b.obligation("logits_agree", b.facts["matrix_residual"],
                 description="matrix-expression algebra (SymPy returns ZeroMatrix when it vanishes)")
    # every size: the softmaxes as normalised entrywise exponentials, in matrix symbols
    Ss, Ts, dks, dvs = sp.symbols("S T d_k d_v", integer=True, positive=True)
    Yg, Rg = sp.MatrixSymbol("Y", Ts, dm), sp.MatrixSymbol("R", Ss, dm)
    WKg, WVg = sp.MatrixSymbol("W_K", dm, dks), sp.MatrixSymbol("W_V", dks, dvs)
    Eg, Dinv = sp.MatrixSymbol("E", Ss, Ts), sp.MatrixSymbol("Dinv", Ss, Ss)
    b.define("Every size S, T, d_k, d_v, d_m: E = exp∘(QKᵀ/√d_k) entrywise (S×T) and Dinv = diag(E1)⁻¹ "
             "(symmetric, diagonal), so attention's row softmax is S(QKᵀ/√d_k) = Dinv E; at β = 1/√d_k the "
             "Hopfield logits βXᵀΞ = βKQᵀ are (QKᵀ/√d_k)ᵀ, whose entrywise exp is Eᵀ with column sums E1, so "
             "the column softmax over the stored patterns is S(βXᵀΞ) = Eᵀ Dinv", Eg.T * Dinv)
    Kg = Yg * WKg
    att_g = Dinv * Eg * (Kg * WVg)
    hop_g = b.step("Hopfield update X S(βXᵀΞ) with X = Kᵀ = (YW_K)ᵀ, transposed, times W_V",
                   ((Kg.T * (Eg.T * Dinv)).T * WVg).doit())
    res_g = (hop_g.subs(Dinv.T, Dinv) - att_g).doit()
    b.step("Minus attention Dinv E V with V = Y W_K W_V (Dinvᵀ = Dinv)", res_g)
    b.fact("general_residual", res_g)
    b.obligation("attention_equals_hopfield_update_every_size", res_g,
                 description="matrix symbols of symbolic sizes (SymPy returns ZeroMatrix when it vanishes)")
    Q = _sym_matrix("q", S, dk, real=True)
    K = _sym_matrix("k", T, dk, real=True)
    Wv = _sym_matrix("v", dk, dv, real=True)
    beta = 1 / sp.sqrt(dk)
    X, Xi = K.T, Q.T
    A = X.T * Xi  # T×S: stored index = rows
    col_soft = sp.Matrix(T, S, lambda t, s: sp.exp(beta * A[t, s]) / sum(sp.exp(beta * A[u, s]) for u in range(T)))
    hop = (X * col_soft).T * Wv
    b.define("Hopfield update Ξ^new = X S(β XᵀΞ) (softmax over stored patterns, per state), then (Ξ^new)ᵀ W_V, "
             "first entry", hop[0, 0])
    L = Q * K.T / sp.sqrt(dk)
    row_soft = sp.Matrix(S, T, lambda s, t: sp.exp(L[s, t]) / sum(sp.exp(L[s, u]) for u in range(T)))
    att = row_soft * (K * Wv)
    b.step("Attention S(QKᵀ/√d_k) V with V = K W_V = Y W_K W_V (softmax over keys, per query), computed", att,
           compact=r"\operatorname{softmax}\!\big(QK^{\top}/\sqrt{d_k}\big)\,K W_V")
    b.obligation("attention_equals_hopfield_update", att - hop)
    res = (att - hop).applyfunc(sp.expand)
    b.step("Attention minus Hopfield update, expanded", res)
    b.record(residual=res, Q=Q, K=K, W_V=Wv, beta=beta)
    return b.done(att)
