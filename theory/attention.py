"""Attention mechanics derived in SymPy (claims ``attn.*``).

Conventions: tokens are rows (``X ∈ R^{T×d}``) unless a function says "column form";
``S(·)`` is the softmax over the last axis.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory import sizes as _sz
from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_softmax_simplex"]


@lru_cache(maxsize=None)
def derive_softmax_simplex(T: int = 3) -> Derivation:
    """Derive, for symbolic logits ``l_1..l_T``: the two forms of the softmax agree, shift
    invariance, the outputs sum to one, and the Jacobian ``∂p_t/∂l_s = p_t(δ_ts − p_s)``, i.e.
    ``diag(p) − p pᵀ``, obtained by differentiating the definition and rewriting every
    ``e^{l_t}`` as ``p_t Z`` (``Z = Σ_τ e^{l_τ}``), which cancels ``Z``.

    ``result`` is the Jacobian as a T×T SymPy matrix in the softmax outputs ``p``
    (``facts["p_symbols"]``); ``facts`` hold the simplified residuals ``forms_difference``,
    ``shift_difference``, ``jacobian_residual`` (all 0) and ``sum`` (1). The obligations state
    the same facts on the unsimplified residuals, and, on the simplex (``p_T = 1 − Σ_{t<T} p_t``),
    that ``1`` is a null vector of the Jacobian and that ``xᵀJx = Σ_t p_t (x_t − Σ_s p_s x_s)² ≥ 0``
    (PSD).

    >>> d = derive_softmax_simplex(2)
    >>> d.facts["forms_difference"], d.provenance
    (0, {'result': 'derived'})
    >>> d.result
    Matrix([
    [-p_1**2 + p_1,      -p_1*p_2],
    [     -p_1*p_2, -p_2**2 + p_2]])
    >>> all(r.passed for r in d.check_obligations())
    True
    """
    b = DerivationBuilder("Softmax: two forms, shift invariance, Jacobian")
    b.symbols(l_t="logit of token t (real), t = 1..T", p_t="softmax output S(l)_t", Z="normaliser Σ_τ exp(l_τ)",
              c="a shift added to every logit", S_t="entry t of the softmax S(l)")
    l = sp.symbols(f"l_1:{T + 1}", real=True)
    c = sp.Symbol("c", real=True)
    Z = sum(sp.exp(li) for li in l)
    p = [sp.exp(li) / Z for li in l]
    b.define("Definition of the softmax (first entry shown)", sp.Eq(sp.Symbol("S_1"), p[0]))
    alt = [1 / sp.powsimp(sp.expand(Z * sp.exp(-l[t])), combine="exp") for t in range(T)]
    b.step("Divide numerator and denominator by exp(l_t) (first entry shown)", sp.Eq(sp.Symbol("S_1"), alt[0]))
    b.obligation("forms_agree", [p[t] - alt[t] for t in range(T)], description="the two forms of S(l)_t are equal")
    diff = b.fact("forms_difference", sp.simplify(sum(sp.simplify(sp.powsimp(p[t] - alt[t], combine="exp")) ** 2 for t in range(T))))
    b.step("Σ_t (first form − second form)² simplifies to", diff)
    shifted = [sp.exp(li + c) / sum(sp.exp(lj + c) for lj in l) for li in l]
    b.obligation("shift_invariance", [shifted[t] - p[t] for t in range(T)], description="S(l + c·1) = S(l)")
    shift_diff = b.fact("shift_difference", sp.simplify(sum(sp.simplify(shifted[t] - p[t]) ** 2 for t in range(T))))
    b.step("Shift invariance: Σ_t (S(l + c·1)_t − S(l)_t)² simplifies to", shift_diff)
    total = b.fact("sum", sp.simplify(sum(p)))
    b.step("Σ_t S(l)_t simplifies to", total)
    b.obligation("sums_to_one", sum(p) - 1, description="the outputs lie on the simplex")
    P = sp.symbols(f"p_1:{T + 1}", positive=True)
    J = sp.Matrix(T, T, lambda t, s: sp.diff(p[t], l[s]))
    b.step("Differentiate the definition: ∂S_1/∂l_1 (the other entries alike)", J[0, 0])
    Zs = sp.Symbol("Z", positive=True)
    in_p = {sp.exp(l[i]): P[i] * Zs for i in range(T)}
    Jp = J.applyfunc(lambda e: sp.expand(sp.cancel(e.subs(Z, Zs).subs(in_p))))
    b.step("Write Σ_τ exp(l_τ) = Z and exp(l_t) = p_t·Z in every entry; Z cancels: the Jacobian in p", Jp,
           compact=r"\frac{\partial p}{\partial l}=\operatorname{diag}(p)-p\,p^{\top}")
    to_l = {P[i]: p[i] for i in range(T)}
    b.obligation("jacobian_residual", J - Jp.subs(to_l), description="the p-form equals the differentiated definition")
    b.obligation("jacobian_is_diag_minus_outer", Jp - (sp.diag(*P) - sp.Matrix(P) * sp.Matrix(P).T),
                 description="entry (t, s) is p_t δ_ts − p_t p_s")
    b.fact("jacobian_residual", sp.simplify(J - Jp.subs(to_l)))
    # on the simplex (p_T = 1 − Σ_{t<T} p_t): the null vector 1, and xᵀJx = Σ_t p_t (x_t − Σ_s p_s x_s)² ≥ 0
    on_simplex = {P[-1]: 1 - sum(P[:-1])}
    null = (Jp * sp.ones(T, 1)).subs(on_simplex).applyfunc(sp.expand)
    b.step("On the simplex (p_T = 1 − Σ_{t<T} p_t): (diag(p) − ppᵀ)·1 =", null)
    b.obligation("jacobian_null_vector", null, description="(diag(p) − ppᵀ)·1 = p − p·Σ_s p_s = 0 on the simplex")
    xs = sp.symbols(f"x_1:{T + 1}", real=True)
    xv = sp.Matrix(xs)
    mean_x = sum(P[t] * xs[t] for t in range(T))
    var_form = sum(P[t] * (xs[t] - mean_x) ** 2 for t in range(T))
    quad = (xv.T * Jp * xv)[0, 0]
    b.step("On the simplex, xᵀ(diag(p) − ppᵀ)x − Σ_t p_t (x_t − Σ_s p_s x_s)² =",
           sp.expand((quad - var_form).subs(on_simplex)))
    b.obligation("jacobian_quadratic_form_is_a_variance", (quad - var_form).subs(on_simplex),
                 description="xᵀJx is the variance of x under the weights p (on the simplex)")
    b.obligation("jacobian_psd", var_form, "nonnegative",
                 description="Σ_t p_t (x_t − Σ_s p_s x_s)² ≥ 0 for p_t > 0: the Jacobian is PSD")
    b.fact("p_symbols", P)
    return b.done(Jp)


# --------------------------------------------------------------------------------------------
# helpers (SymPy matrices; tokens as rows unless a name says "columns")


def _softmax_rows(M: sp.Matrix) -> sp.Matrix:
    """Row-wise softmax of a SymPy matrix (each row sums to 1); ``-oo`` entries give weight 0."""
    rows = []
    for i in range(M.rows):
        e = [sp.exp(M[i, j]) for j in range(M.cols)]
        Z = sum(e)
        rows.append([ej / Z for ej in e])
    return sp.Matrix(rows)


def _softmax_cols(M: sp.Matrix) -> sp.Matrix:
    """Column-wise softmax Ψ of lecture notes 004 (each column sums to 1)."""
    return _softmax_rows(M.T).T


def _expand_exponents(M: sp.Matrix) -> sp.Matrix:
    """Expand the argument of every ``exp`` so that equal exponents become the same SymPy object."""
    return M.applyfunc(lambda e: e.replace(sp.exp, lambda a: sp.exp(sp.expand(a))))


def _residual(M) -> sp.Expr:
    """Σ of squared entries of a difference matrix, 0 when every entry expands to 0 (expansion is
    enough once exponents are canonical; ``simplify`` runs only on what does not vanish)."""
    items = list(M) if isinstance(M, (sp.MatrixBase, list, tuple)) else [M]
    entries = [sp.expand(e) for e in items]
    if all(e == 0 for e in entries):
        return sp.Integer(0)
    return sp.simplify(sum(e**2 for e in entries))


def _expand_angles(e):
    """Expand the arguments of sin/cos, then apply the angle-addition formulas."""
    e = e.replace(sp.sin, lambda a: sp.sin(sp.expand(a))).replace(sp.cos, lambda a: sp.cos(sp.expand(a)))
    return sp.expand_trig(e)


def _mat(name: str, r: int, c: int, **assumptions) -> sp.Matrix:
    """An r×c matrix of scalar symbols ``name_{i,j}`` (1-based)."""
    return sp.Matrix(r, c, lambda i, j: sp.Symbol(f"{name}_{i + 1}{j + 1}", **assumptions))


__all__ += [
    "derive_convex_combination",
    "derive_causal_mask",
    "derive_score_variance",
    "derive_forms_agree",
    "derive_mhsa_sum_concat",
    "derive_permutation_equivariance",
    "derive_layernorm",
    "derive_block_recipe",
    "derive_complexity",
    "count_attention_macs",
    "derive_sinusoidal_pe",
]


# --------------------------------------------------------------------------------------------
# attn.convex_combination


@lru_cache(maxsize=None)
def derive_convex_combination(T: int = 3, Dv: int = 2) -> Derivation:
    """Derive that one attention output row ``y = Σ_t S(l)_t v_t`` has weights that are
    positive and sum to one, i.e. ``y`` is a convex combination of the value rows ``v_t``.

    ``result`` is ``y`` (a 1×Dv SymPy matrix in the logit symbols ``l`` and value symbols ``v``);
    ``facts``: ``weights`` (the T weights), ``weights_sum`` (simplifies to 1), ``weights_positive``
    (SymPy's verdict on each weight's sign), ``logits``, ``values``.

    >>> d = derive_convex_combination(2, 1)
    >>> d.facts["weights_sum"], d.facts["weights_positive"]
    (1, True)
    >>> [r.passed for r in d.check_obligations()]
    [True, True]
    """
    b = DerivationBuilder("Attention output row is a convex combination of the value rows")
    b.symbols(l_t="logit of token t for one query (real)", v_tj="entry j of value row t (real)",
              a_t="attention weight of token t", y="the output row")
    l = sp.symbols(f"l_1:{T + 1}", real=True)
    V = _mat("v", T, Dv, real=True)
    a = list(_softmax_rows(sp.Matrix([l]))[0, :])
    b.define("Attention weights of one query: a_t = exp(l_t) / Σ_τ exp(l_τ) (first shown)", a[0])
    b.define("Value rows v_1..v_T (the rows of V)", V)
    y = sp.Matrix([a]) * V
    b.step("Output row y = Σ_t a_t v_t, computed as the product (a_1..a_T)·V", y, compact=r"y=\sum_t a_t v_t")
    s = b.fact("weights_sum", sp.simplify(sum(a)))
    b.step("Σ_t a_t simplifies to", s)
    b.obligation("weights_sum_to_one", sum(a) - 1)
    pos = all(bool(ai.is_positive) for ai in a)
    b.fact("weights_positive", pos)
    b.step("Each a_t is a ratio of exponentials of reals: SymPy decides its sign (first weight)", sp.StrictGreaterThan(a[0], 0))
    b.obligation("weights_positive", list(a), "positive")
    b.define("A point Σ_t a_t v_t with a_t ≥ 0 and Σ_t a_t = 1 lies in conv{v_1..v_T} (definition of the convex hull)")
    b.record(weights=tuple(a), logits=l, values=V)
    return b.done(y)


# --------------------------------------------------------------------------------------------
# attn.causal_mask


@lru_cache(maxsize=None)
def derive_causal_mask(T: int = 3) -> Derivation:
    """Derive, for symbolic logits ``l_ts`` and scalar values ``v_s``, the causally masked
    attention ``A = S(L + M)`` with ``M_ts = 0`` for ``s ≤ t`` and ``-∞`` otherwise.

    ``result`` is ``A`` (T×T, in the symbols ``facts["logits"]``). ``facts``: ``upper_entries``
    (the entries above the diagonal, all 0), ``row_sums`` (all 1), ``future_derivatives``
    (``∂y_t/∂l_{us}`` and ``∂y_t/∂v_s`` for ``s > t``, all 0: output t ignores later tokens).

    >>> d = derive_causal_mask(2)
    >>> d.result[0, 1], d.facts["row_sums"]
    (0, (1, 1))
    """
    b = DerivationBuilder("Causal mask: lower-triangular, row-stochastic, blind to the future")
    b.symbols(l_ts="logit of query t for key s (real)", v_s="scalar value of token s", M_ts="mask entry",
              y_t="output of token t")
    L = _mat("l", T, T, real=True)
    v = sp.symbols(f"v_1:{T + 1}", real=True)
    M = sp.Matrix(T, T, lambda t, s: 0 if s <= t else -sp.oo)
    b.define("Mask M_ts = 0 for s ≤ t, −∞ for s > t", M)
    A = _softmax_rows(L + M)
    b.step("A = S(L + M) row-wise; exp(−∞) = 0", A)
    upper = tuple(A[t, s] for t in range(T) for s in range(T) if s > t)
    b.fact("upper_entries", upper)
    b.step("Entries above the diagonal", sp.Matrix([upper]) if upper else sp.Integer(0))
    b.obligation("upper_entries_zero", list(upper), description="A is lower-triangular")
    sums = tuple(sp.simplify(sum(A[t, :])) for t in range(T))
    b.fact("row_sums", sums)
    b.step("Row sums simplify to", sp.Matrix([sums]))
    b.obligation("rows_sum_to_one", [sum(A[t, :]) - 1 for t in range(T)])
    y = A * sp.Matrix(v)
    b.define("Outputs y = A v", sp.Eq(sp.Symbol("y"), sp.MatMul(sp.MatrixSymbol("A", T, T), sp.MatrixSymbol("v", T, 1))))
    fut = []
    for t in range(T):
        for s in range(t + 1, T):
            fut.append(sp.simplify(sp.diff(y[t], v[s])))
            fut.extend(sp.simplify(sp.diff(y[t], L[u, s])) for u in range(T))
    b.fact("future_derivatives", tuple(fut))
    b.step("∂y_t/∂v_s and ∂y_t/∂l_(us) for every s > t", sp.Matrix([fut]) if fut else sp.Integer(0))
    b.obligation("blind_to_the_future", fut, description="no output depends on a later token's value or logits")
    b.fact("logits", L)
    b.fact("values", v)
    return b.done(A)


# --------------------------------------------------------------------------------------------
# attn.scaling_variance


@lru_cache(maxsize=None)
def derive_score_variance() -> Derivation:
    """Derive ``Var(q·k) = d_k`` and the scale ``c = 1/√d_k`` with ``Var(c q·k) = 1`` from moments.

    Mean and variance: the entries of ``q, k`` are independent with mean 0 and variance 1 (not
    necessarily identically distributed); ``z_i = q_i k_i`` has ``E z_i = 0``, ``E z_i² = 1``, and
    the cumulants of ``s = Σ_i z_i`` are sums over ``i`` (symbolic ``d_k``). The fourth moment (for
    the checks' Monte Carlo standard error) takes i.i.d. entries with third moment ``μ_3`` and fourth
    moment ``μ_4``: ``M_s = M_z(t)^{d_k}``.

    ``result``: dict ``variance`` (``d_k``), ``scale`` (``d_k^{-1/2}``), ``scaled_variance`` (1),
    ``fourth_moment`` (``E s⁴``, used for the Monte Carlo standard error). ``facts``: the symbols
    ``d`` and ``mu_4``.

    >>> d = derive_score_variance()
    >>> r = d.result
    >>> r["variance"], r["scale"], r["scaled_variance"]
    (d_k, 1/sqrt(d_k), 1)
    >>> r["fourth_moment"].subs(d.facts["mu_4"], 3)  # Gaussian entries
    d_k*(3*d_k + 6)
    """
    b = DerivationBuilder("Variance of the dot-product score and the 1/√d_k scale")
    b.symbols(d_k="dimension of q and k", mu_3="third moment of one entry of q or k", mu_4="fourth moment of one entry",
              z_i="q_i·k_i", s="the score q·k = Σ_i z_i", c="scale applied to the score", t="argument of the MGF")
    t = sp.Symbol("t", real=True)
    d = sp.Symbol("d_k", positive=True, integer=True)
    mu3, mu4 = sp.symbols("mu_3 mu_4", real=True)
    c = sp.Symbol("c", positive=True)
    # mean and variance: independent, not necessarily identically distributed entries (cumulants add)
    i = sp.Symbol("i", positive=True, integer=True)
    a3, a4 = sp.IndexedBase("m_3"), sp.IndexedBase("m_4")
    Mi = b.assume("MGF of z_i = q_i k_i to order 4: E z_i = E q_i E k_i = 0, E z_i² = E q_i² E k_i² = 1 (q ⊥ k, mean 0, "
                  "variance 1); higher moments m₃,ᵢ, m₄,ᵢ free (entries need not be identically distributed)",
                  1 + t**2 / 2 + a3[i] * t**3 / 6 + a4[i] * t**4 / 24, key="moments of z_i = q_i k_i",
                  clauses=("score_variance", "scaled_unit_variance"))
    Ki = b.step("Cumulant generating function log M_{z_i}(t) to order 2", sp.series(sp.log(Mi), t, 0, 3).removeO())
    b.assume("z_1, …, z_{d_k} independent (q_i's independent, k_i's independent, q ⊥ k): log M_s = Σ_i log M_{z_i}",
             key="independent z_i (cumulants add)", clauses=("score_variance", "scaled_unit_variance"))
    mean = b.step("E s = Σ_{i=1}^{d_k} [t¹] log M_{z_i}", sp.summation(Ki.coeff(t, 1), (i, 1, d)))
    b.obligation("mean_zero", mean, description="E[q·k] = 0")
    var = b.step("Var s = 2!·Σ_{i=1}^{d_k} [t²] log M_{z_i}", sp.summation(2 * Ki.coeff(t, 2), (i, 1, d)))
    # the fourth moment (Monte Carlo standard error of the checks only): i.i.d. entries
    Mz = 1 + t**2 / 2 + mu3**2 * t**3 / 6 + mu4**2 * t**4 / 24
    b.assume("For the fourth moment only (the checks' Monte Carlo standard error, no clause): i.i.d. entries, so "
             "E z³ = μ₃², E z⁴ = μ₄² and M_s(t) = M_z(t)^(d_k)", Mz, key="i.i.d. entries (fourth moment)",
             clauses=("monte_carlo_standard_error",))
    Ms = sp.expand(sp.series(Mz**d, t, 0, 5).removeO())
    b.step("M_s(t) = M_z(t)^(d_k), expanded to order 4", Ms)
    b.obligation("iid_variance_agrees", sp.factor(2 * Ms.coeff(t, 2) - Ms.coeff(t, 1) ** 2) - var,
                 description="the i.i.d. MGF gives the same variance")
    m4 = sp.factor(24 * Ms.coeff(t, 4))
    b.step("E s⁴ = 4!·[t⁴]M_s (Gaussian entries: μ₄ = 3)", m4)
    scaled = sp.simplify(c**2 * var)
    b.step("Var(c s) = c² Var s", scaled)
    sol = sp.solve(sp.Eq(scaled, 1), c)
    b.step("Solve Var(c s) = 1 for c > 0: c =", sol[0])
    b.obligation("unique_positive_scale", sp.Integer(len(sol) - 1), description="exactly one positive solution")
    unit = sp.simplify(sol[0] ** 2 * var)
    b.step("Var(c s) at that c", unit)
    b.obligation("scaled_variance_is_one", unit - 1)
    b.record(d=d, mu_4=mu4, mean=mean)
    return b.done({"variance": var, "scale": sol[0], "scaled_variance": unit, "fourth_moment": m4})


# --------------------------------------------------------------------------------------------
# attn.forms_agree


@lru_cache(maxsize=None)
def derive_forms_agree(N: int = 2, D: int = 2, K: int = 2, Dv: int = 2) -> Derivation:
    """Prove at small sizes that the seeds' four ways of writing one attention layer are one map.

    Row-form parameters ``W_Q, W_K ∈ R^{D×K}``, ``W_V ∈ R^{D×Dv}``, tokens ``X ∈ R^{N×D}``:

    * lecture notes 002: ``S(X W_Q W_Kᵀ Xᵀ) X W_V`` (rows, row softmax)
    * lecture notes 003: ``Softmax(Q Kᵀ) V`` with ``Q = X W_Q`` etc. (rows)
    * lecture notes 004: ``W_h X_c Ψ(X_cᵀ W_bᵀ W_c X_c / √d_s)`` (columns ``X_c = Xᵀ``, column softmax Ψ),
      renamed ``W_h = W_Vᵀ, W_b = W_Kᵀ, W_c = √d_s W_Qᵀ``
    * lecture notes 000 (corrected): ``U_v X_c A`` with ``A_{n,n'} = e^{⟨k_n,q_{n'}⟩}/Σ_ℓ e^{⟨k_ℓ,q_{n'}⟩}``,
      ``U_q = W_Qᵀ, U_k = W_Kᵀ, U_v = W_Vᵀ`` (column-stochastic A)

    ``result`` is the common map (N×Dv, rows). ``facts``: ``differences`` (each form minus lecture notes 003,
    all 0), ``psi_transpose`` (``Ψ(Z) − S(Zᵀ)ᵀ`` for a generic Z, 0), and lecture notes 000's normalisers:
    ``colsum_corrected`` (all 1), ``colsum_stated_qk`` (the stated ``U_q,U_k`` variant, not 1),
    ``colsum_stated_shared_u`` (the stated ``U`` variant: 1, because ⟨Ux,Ux'⟩ is symmetric),
    ``rowsum_stated_plain``/``colsum_stated_plain`` (the plain variant is row-, not column-stochastic),
    with ``*_at_point`` numeric values at a rational point; ``symbols``.

    >>> d = derive_forms_agree(2, 1, 1, 1)
    >>> set(d.facts["differences"].values())
    {0}
    >>> d.facts["colsum_corrected"], d.facts["colsum_stated_shared_u"]
    ((1, 1), (1, 1))
    """
    b = DerivationBuilder("Four lecture-note forms of one attention layer agree (and lecture notes 000's normaliser)")
    b.symbols(x_nd="entry d of token n (tokens are the rows of X)", q_dk="entry of W_Q", k_dk="entry of W_K",
              w_dj="entry of W_V", d_s="the scale of lecture notes 004", z_ij="entry of a generic score matrix Z")
    X = _mat("x", N, D, real=True)
    WQ, WK, WV = _mat("q", D, K, real=True), _mat("k", D, K, real=True), _mat("w", D, Dv, real=True)
    ds = sp.Symbol("d_s", positive=True)
    Xc = X.T
    b.define("Tokens as rows X (N×D); column form X_c = Xᵀ", X)
    f002 = _softmax_rows(X * WQ * WK.T * X.T) * X * WV
    b.define("lecture notes 002: S(X W_Q W_Kᵀ Xᵀ) X W_V (row softmax), first entry", f002[0, 0])
    Q, Kk, V = X * WQ, X * WK, X * WV
    f003 = _softmax_rows(Q * Kk.T) * V
    b.step("lecture notes 003: Softmax(Q Kᵀ) V with Q = X W_Q, K = X W_K, V = X W_V, computed for symbolic X and weights", f003,
           compact=r"\operatorname{Softmax}(QK^{\top})V,\quad Q=XW_Q,\ K=XW_K,\ V=XW_V")
    Wh, Wb, Wc = WV.T, WK.T, sp.sqrt(ds) * WQ.T
    f004 = (Wh * Xc * _softmax_cols(Xc.T * Wb.T * Wc * Xc / sp.sqrt(ds))).T
    b.define("lecture notes 004 with W_h = W_Vᵀ, W_b = W_Kᵀ, W_c = √d_s W_Qᵀ, transposed to rows, first entry", f004[0, 0])
    Uq, Uk, Uv = WQ.T, WK.T, WV.T
    q = Uq * Xc  # K×N, column n' is q_{n'}
    k = Uk * Xc
    S = k.T * q  # S[n, n'] = <k_n, q_n'>
    A0 = sp.Matrix(N, N, lambda n, m: sp.exp(S[n, m]) / sum(sp.exp(S[l, m]) for l in range(N)))
    f000 = (Uv * Xc * A0).T
    b.define("lecture notes 000 (corrected normaliser Σ_ℓ exp⟨k_ℓ, q_n'⟩) transposed to rows, first entry", f000[0, 0])
    ref = _expand_exponents(f003)
    diffs = {}
    for name, f in (("seed002", f002), ("seed004", f004), ("seed000", f000)):
        resid = _expand_exponents(f) - ref
        b.obligation(f"{name}_equals_seed003", resid,
                     description=f"{name} minus lecture notes 003, entry by entry (exponents expanded)")
        diffs[name] = _residual(resid)
        b.step(f"Σ (entries of {name} − lecture notes 003)² simplifies to", diffs[name])
    b.fact("differences", diffs)
    Z = _mat("z", 3, 3, real=True)
    pt_m = _softmax_cols(Z) - _softmax_rows(Z.T).T
    b.obligation("psi_is_transposed_row_softmax", pt_m)
    pt = _residual(pt_m)
    b.fact("psi_transpose", pt)
    b.step("Column softmax is row softmax of the transpose: Σ(Ψ(Z) − S(Zᵀ)ᵀ)² =", pt)
    # lecture notes 000's normalisers
    point = {s: sp.Rational((7 * i) % 5 - 2, 3) for i, s in enumerate(sorted(X.free_symbols | WQ.free_symbols | WK.free_symbols, key=str))}
    b.fact("colsum_corrected", tuple(sp.simplify(sum(A0[:, m])) for m in range(N)))
    b.step("Corrected A: column sums", sp.Matrix([b.facts["colsum_corrected"]]))
    b.obligation("corrected_A_column_stochastic", [sum(A0[:, m]) - 1 for m in range(N)])
    A_qk = sp.Matrix(N, N, lambda n, m: sp.exp(S[n, m]) / sum(sp.exp(S[m, l]) for l in range(N)))
    b.define("Stated U_q, U_k variant: A_nn' = exp⟨k_n, q_n'⟩ / Σ_ℓ exp⟨k_n', q_ℓ⟩", A_qk[0, 0])

    def not_column_stochastic(A: sp.Matrix, name: str, text: str) -> None:
        """A's column sums, their values at the rational point, and the obligation that they are not all 1."""
        cs = b.fact(f"colsum_stated_{name}", tuple(sum(A[:, m]) for m in range(N)))
        b.fact(f"colsum_stated_{name}_at_point", tuple(float(sp.N(c.subs(point))) for c in cs))
        b.step(text, sp.Matrix([b.facts[f"colsum_stated_{name}_at_point"]]))
        b.obligation(f"stated_{name}_not_column_stochastic", sum((c.subs(point) - 1) ** 2 for c in cs), "positive",
                     description="Σ_n' (column sum − 1)² at a rational point is > 0")

    not_column_stochastic(A_qk, "qk", "Its column sums (not identically 1; value at a rational point)")
    G = (Uk * Xc).T * (Uk * Xc)  # shared U (take U = U_k): symmetric Gram matrix
    A_u = sp.Matrix(N, N, lambda n, m: sp.exp(G[n, m]) / sum(sp.exp(G[m, l]) for l in range(N)))
    b.define("Stated U variant: A_nn' = exp⟨Ux_n, Ux_n'⟩ / Σ_ℓ exp⟨Ux_n', Ux_ℓ⟩", A_u[0, 0])
    b.fact("colsum_stated_shared_u", tuple(sp.simplify(_expand_exponents(sp.Matrix([sum(A_u[:, m])]))[0]) for m in range(N)))
    b.step("⟨·,·⟩ is symmetric, so its columns sum to", sp.Matrix([b.facts["colsum_stated_shared_u"]]))
    b.obligation("stated_shared_u_column_stochastic", [_expand_exponents(sp.Matrix([sum(A_u[:, m]) - 1]))[0] for m in range(N)])
    Gp = Xc.T * Xc
    A_p = sp.Matrix(N, N, lambda n, m: sp.exp(Gp[n, m]) / sum(sp.exp(Gp[n, l]) for l in range(N)))
    b.define("Stated plain variant: A_nn' = exp⟨x_n, x_n'⟩ / Σ_ℓ exp⟨x_n, x_ℓ⟩", A_p[0, 0])
    b.fact("rowsum_stated_plain", tuple(sp.simplify(sum(A_p[n, :])) for n in range(N)))
    b.obligation("stated_plain_row_stochastic", [sum(A_p[n, :]) - 1 for n in range(N)])
    not_column_stochastic(A_p, "plain", "Its rows sum to 1; its column sums at a rational point")
    b.fact("symbols", {"X": X, "W_Q": WQ, "W_K": WK, "W_V": WV, "d_s": ds})
    return b.done(f003)


# --------------------------------------------------------------------------------------------
# attn.mhsa_sum_equals_concat


@lru_cache(maxsize=None)
def derive_mhsa_sum_concat(N: int = 2, D: int = 2, K: int = 1, M: int = 2) -> Derivation:
    """Prove lecture notes 000's ``Σ_h U_{p,h} U_{v,h} X_c A_h`` equals lecture notes 003's
    ``Concat(H_1..H_M) W^{(o)}`` (rows) with ``W^{(o)} = [U_{p,1}ᵀ; …; U_{p,M}ᵀ]``.

    First as a block-matrix identity for symbolic sizes (``block_collapse``), which also gives the
    concatenation width ``M·D_v``; then for explicit symbols at size ``N, D, K=D_v, M``.

    ``result`` is the concat-form output (N×D, rows) in the symbols ``facts["symbols"]``
    (per head ``W_Q[h], W_K[h], W_V[h]`` of shape D×K, and ``W_O`` of shape M·K×D).
    ``facts``: ``block_identity`` (difference, 0), ``width`` (``M·D_v`` for symbolic M),
    ``difference`` (sum form transposed minus concat form, 0).

    >>> d = derive_mhsa_sum_concat(2, 1, 1, 2)
    >>> d.facts["difference"], d.facts["block_identity"], d.facts["width"]
    (0, 0, D_v*M)
    """
    b = DerivationBuilder("Multi-head attention: sum of projected heads = concatenation times W_O")
    b.symbols(H_h="output of head h (N×D_v)", P_h="block h of the output projection (D_v×D)", M="number of heads",
              x_nd="entry d of token n", qh_dk="entry of W_Q of head h", kh_dk="entry of W_K of head h",
              vh_dk="entry of W_V of head h", o_ij="entry of W_O")
    n, dv, dd = sp.symbols("N D_v D", positive=True, integer=True)
    Hs = [sp.MatrixSymbol(f"H_{h + 1}", n, dv) for h in range(3)]
    Ws = [sp.MatrixSymbol(f"P_{h + 1}", dv, dd) for h in range(3)]
    lhs = sp.BlockMatrix([Hs]) * sp.BlockMatrix([[w] for w in Ws])
    collapsed = sp.block_collapse(lhs)
    b.step("Concat(H_1,H_2,H_3)·[P_1;P_2;P_3] by block multiplication", collapsed)
    gap = sp.simplify(collapsed - sp.MatAdd(*[H * W for H, W in zip(Hs, Ws)]))
    b.fact("block_identity", sp.Integer(0) if gap.is_ZeroMatrix else gap)
    b.step("Concat·[P_h] − Σ_h H_h P_h", b.facts["block_identity"])
    b.obligation("block_identity", b.facts["block_identity"], description="block product equals the sum of head products")
    Mh, h = sp.symbols("M h", positive=True, integer=True)
    width = sp.summation(dv, (h, 1, Mh))
    b.fact("width", width)
    b.step("Concat of M heads, each N×D_v: width Σ_h D_v", width)
    X = _mat("x", N, D, real=True)
    WQ = [_mat(f"q{h + 1}", D, K, real=True) for h in range(M)]
    WK = [_mat(f"k{h + 1}", D, K, real=True) for h in range(M)]
    WV = [_mat(f"v{h + 1}", D, K, real=True) for h in range(M)]
    WO = _mat("o", M * K, D, real=True)
    heads = [_softmax_rows(X * WQ[h] * (X * WK[h]).T) * X * WV[h] for h in range(M)]
    b.define("Head h of lecture notes 003: H_h = S(X W_Q,h (X W_K,h)ᵀ) X W_V,h (head 1, first entry)", heads[0][0, 0])
    concat = sp.Matrix.hstack(*heads) * WO
    b.step("lecture notes 003: Concat(H_1..H_M) W_O, computed for symbolic X and weights", concat,
           compact=r"\operatorname{Concat}(H_1,\dots,H_M)\,W_O")
    Xc = X.T
    total = sp.zeros(D, N)
    for hh in range(M):
        Uq, Uk, Uv = WQ[hh].T, WK[hh].T, WV[hh].T
        Up = WO[hh * K:(hh + 1) * K, :].T
        S = (Uk * Xc).T * (Uq * Xc)
        A = sp.Matrix(N, N, lambda a, m: sp.exp(S[a, m]) / sum(sp.exp(S[l, m]) for l in range(N)))
        total += Up * Uv * Xc * A
    b.define("lecture notes 000: Σ_h U_p,h U_v,h X_c A_h with U_p,h = (rows of head h in W_O)ᵀ, first entry", total[0, 0])
    resid = _expand_exponents(total.T) - _expand_exponents(concat)
    b.obligation("sum_form_equals_concat", resid, description="lecture notes 000's sum (transposed) minus lecture notes 003's concat form")
    diff = _residual(resid)
    b.fact("difference", diff)
    b.step("Σ (sum formᵀ − concat form)² simplifies to", diff)
    b.fact("symbols", {"X": X, "W_Q": tuple(WQ), "W_K": tuple(WK), "W_V": tuple(WV), "W_O": WO})
    return b.done(concat)


# --------------------------------------------------------------------------------------------
# attn.permutation_equivariance


@lru_cache(maxsize=None)
def derive_permutation_equivariance(N: int = 3) -> Derivation:
    """Derive that softmax attention commutes with token permutations, and that a causal mask or
    an added positional encoding breaks it.

    For a generic score matrix ``S`` (N×N symbols) and every permutation matrix ``P``:
    ``S(P S Pᵀ) = P S(S) Pᵀ`` entrywise; with one-dimensional tokens ``x`` and weights
    ``w_q, w_k, w_v`` the layer ``f(X) = S(X w_q w_k Xᵀ) X w_v`` satisfies ``f(PX) = P f(X)``.
    Row-wise maps (LayerNorm, MLP) commute with P by definition. With the causal mask ``M`` or an
    added encoding ``E`` the residual ``f(PX) − P f(X)`` is evaluated exactly at a rational point
    (swap of the first two tokens) and its squared norm is positive.

    ``result``: dict ``equivariant``, ``breaks_with_causal_mask``, ``breaks_with_positional_encoding``
    (SymPy booleans, each computed: ``true`` here). ``facts``: ``residuals`` (one per permutation,
    0), ``causal_counterexample`` and ``pe_counterexample`` (float residual norms).

    >>> d = derive_permutation_equivariance(2)
    >>> d.result["equivariant"], set(d.facts["residuals"])
    (True, {0})
    """
    from itertools import permutations

    b = DerivationBuilder("Permutation equivariance of attention; broken by a mask or a positional encoding")
    b.symbols(s_ij="entry of a generic score matrix S", x_i="one-dimensional token i", w_q="query weight",
              w_k="key weight", w_v="value weight", P="a permutation matrix", E="an added positional encoding")
    S = _mat("s", N, N, real=True)
    x = sp.Matrix(sp.symbols(f"x_1:{N + 1}", real=True))
    wq, wk, wv = sp.symbols("w_q w_k w_v", real=True)

    def f(X, mask=None):
        Z = X * wq * wk * X.T
        if mask is not None:
            Z = Z + mask
        return _softmax_rows(Z) * X * wv

    b.define("One attention layer on one-dimensional tokens: f(X) = S(X w_q w_k Xᵀ) X w_v", f(x)[0])
    res, raw = [], []
    for perm in permutations(range(N)):
        P = sp.Matrix(N, N, lambda i, j: 1 if perm[i] == j else 0)
        r1 = _softmax_rows(P * S * P.T) - P * _softmax_rows(S) * P.T
        r2 = _expand_exponents(f(P * x)) - _expand_exponents(P * f(x))
        raw.extend(list(r1) + list(r2))
        res.append(_residual(list(r1) + list(r2)))
    b.fact("residuals", tuple(res))
    b.step("Σ over entries of (S(PSPᵀ) − P S(S) Pᵀ)² + (f(PX) − P f(X))², one per permutation", sp.Matrix([res]))
    b.obligation("equivariance_residuals", raw, description="every entry, every permutation")
    equivariant = sp.And(*[sp.Eq(r, 0) for r in res])
    b.step("All of them vanish", equivariant)
    b.assume("Row-wise maps g (LayerNorm, MLP): (P g(X))_i = g(x_π(i)) = g(PX)_i by definition", key="row-wise maps commute with P")
    swap = list(range(N))
    swap[0], swap[1] = 1, 0
    P = sp.Matrix(N, N, lambda i, j: 1 if swap[i] == j else 0)
    point = {x[i]: sp.Rational(i + 1, 2) for i in range(N)} | {wq: 1, wk: 1, wv: 1}
    M = sp.Matrix(N, N, lambda t, s: 0 if s <= t else -sp.oo)
    b.define("Causal mask M_ts = 0 for s ≤ t, −∞ otherwise", M)

    def breaks(residual: sp.Matrix, fact: str, text: str, obligation: str):
        """‖residual‖² at the rational point, recorded, and shown positive (an obligation)."""
        sq = sum(e**2 for e in residual.subs(point))
        b.fact(fact, float(sp.N(sp.sqrt(sq))))
        b.step(text, sq)
        b.obligation(obligation, sq, "positive")
        positive = sp.StrictGreaterThan(sq, 0)
        b.step("It is positive", positive)
        return positive

    breaks_mask = breaks(f(P * x, M) - P * f(x, M), "causal_counterexample",
                         "Causal mask, swap of tokens 1 and 2 at x_i = i/2: ‖f(PX) − P f(X)‖² (exact)",
                         "causal_mask_breaks_equivariance")
    E = sp.Matrix([sp.Rational((-1) ** i * (i + 1), 3) for i in range(N)])
    b.define("Positional encoding E_i = (−1)^(i−1)·i/3 added to the tokens", E)
    breaks_pe = breaks(f(P * x + E) - P * f(x + E), "pe_counterexample",
                       "Positional encoding E added, same swap: ‖f(PX + E) − P f(X + E)‖² (exact)",
                       "positional_encoding_breaks_equivariance")
    return b.done({"equivariant": equivariant, "breaks_with_causal_mask": breaks_mask,
                   "breaks_with_positional_encoding": breaks_pe})


# --------------------------------------------------------------------------------------------
# attn.layernorm


@lru_cache(maxsize=None)
def derive_layernorm(D: int = 3) -> Derivation:
    """Derive for ``z_l = (x_l − μ)/√(v + ε)`` (μ the mean, v the population variance of one token
    ``x ∈ R^D``): ``mean(z) = 0`` and ``var(z) = v/(v + ε)``, which is 1 at ε = 0 (lecture notes 000's form).

    ``result``: dict ``mean`` (0) and ``variance`` (``v/(v+ε)`` in the symbols ``facts["v"]``,
    ``facts["eps"]``).

    >>> d = derive_layernorm(2)
    >>> d.result["mean"], d.result["variance"], d.facts["variance_at_eps0"]
    (0, v/(epsilon + v), 1)
    """
    b = DerivationBuilder("LayerNorm: mean 0, population variance v/(v+ε) (1 without ε)")
    b.symbols(x_l="entry l of one token x ∈ R^D", mu="mean of the entries", v="population variance of the entries",
              epsilon="the ε added to the variance", z_l="normalised entry l")
    x = sp.symbols(f"x_1:{D + 1}", real=True)
    eps = sp.Symbol("epsilon", nonnegative=True)
    v = sp.Symbol("v", positive=True)
    mu = sum(x) / D
    var_x = sum((xi - mu) ** 2 for xi in x) / D
    b.define("μ = (1/D) Σ_l x_l", mu)
    b.define("v = (1/D) Σ_l (x_l − μ)² (population variance, lecture notes 000)", var_x)
    z = [(xi - mu) / sp.sqrt(v + eps) for xi in x]
    b.define("z_l = (x_l − μ)/√(v + ε), first entry", z[0])
    mz = sp.simplify(sum(z) / D)
    b.step("mean(z) simplifies to", mz)
    b.obligation("mean_zero", sum(z) / D)
    vz_raw = sum((zi - mz) ** 2 for zi in z) / D
    # replace (1/D)Σ(x−μ)² by v: var(z)(v+ε) − var_x is identically 0
    vz = sp.simplify(vz_raw * (v + eps) / var_x) * v / (v + eps)
    b.fact("identity_residual", sp.simplify(vz_raw * (v + eps) - var_x))
    b.step("(v + ε)·var(z) − (1/D)Σ(x_l − μ)² simplifies to", b.facts["identity_residual"])
    b.obligation("variance_identity", vz_raw * (v + eps) - var_x, description="(v + ε)·var(z) = (1/D)Σ(x_l − μ)²")
    vz = sp.simplify(vz)
    b.step("hence, with (1/D)Σ(x_l − μ)² = v, var(z) =", vz)
    b.fact("variance_at_eps0", sp.simplify(vz.subs(eps, 0)))
    b.step("at ε = 0", b.facts["variance_at_eps0"])
    b.obligation("unit_variance_at_eps0", vz.subs(eps, 0) - 1)
    b.fact("v", v)
    b.fact("eps", eps)
    return b.done({"mean": mz, "variance": vz})


# --------------------------------------------------------------------------------------------
# attn.block_recipe


@lru_cache(maxsize=None)
def derive_block_recipe() -> Derivation:
    """Derive what each block recipe does when its branches are switched off.

    With undefined functions ``LN_1, LN_2, MHSA, MLP`` of the stream ``x``:

    * pre-LN (corrected lecture notes 000, ``norm_first``): ``y = x + MHSA(LN_1 x)``, ``x' = y + MLP(LN_2 y)``
    * lecture notes 000 as stated: ``x' = LN_2(y) + MLP(y)``
    * post-LN (Vaswani et al.; lecture notes 001's LayerNorm after each sub-layer):
      ``y = LN_1(x + MHSA x)``, ``x' = LN_2(y + MLP y)``

    Setting ``MLP ≡ 0`` the residual update ``x' − y`` is 0 for pre-LN but ``LN_2(y) − y`` as
    stated; with ``MHSA ≡ MLP ≡ 0`` pre-LN is the identity while the stated recipe gives ``LN_2(x)``
    (e.g. ``LN((1, 2)) = (−1, 1)``).

    ``result``: dict of the three recipes at ``MHSA ≡ MLP ≡ 0`` (``pre_ln``: ``x``; ``stated``:
    ``LN_2(x)``; ``post_ln``: ``LN_2(LN_1(x))``). ``facts``: ``update_mlp0`` per recipe, ``x`` and the
    function symbols, ``ln_example`` (LN of (1, 2)).

    >>> r = derive_block_recipe().result
    >>> r["pre_ln"], r["stated"]
    (x, LN_2(x))
    """
    b = DerivationBuilder("Transformer block recipes: pre-LN residual, lecture notes 000 as stated, post-LN")
    b.symbols(x="the residual stream (one token)", y="the stream after the attention sub-layer",
              LN_1="first LayerNorm", LN_2="second LayerNorm", MHSA="multi-head self-attention", MLP="the MLP")
    x = sp.Symbol("x")
    LN1, LN2, MHSA, MLP = (sp.Function(n) for n in ("LN_1", "LN_2", "MHSA", "MLP"))
    u = sp.Symbol("u")
    zero = sp.Lambda(u, 0)
    y = x + MHSA(LN1(x))
    recipes = {
        "pre_ln": y + MLP(LN2(y)),
        "stated": LN2(y) + MLP(y),
        "post_ln": LN2(LN1(x + MHSA(x)) + MLP(LN1(x + MHSA(x)))),
    }
    ystream = {"pre_ln": y, "stated": y, "post_ln": LN1(x + MHSA(x))}
    for k, e in recipes.items():
        b.define(f"{k}: x' =", e)
    upd = {k: sp.simplify((recipes[k] - ystream[k]).subs(MLP, zero)) for k in recipes}
    b.fact("update_mlp0", upd)
    for k, e in upd.items():
        b.step(f"{k}: residual update x' − y with MLP ≡ 0", e)
    b.obligation("pre_ln_update_vanishes_without_mlp", upd["pre_ln"], description="pre-LN: the MLP branch off adds nothing")
    both = {k: sp.simplify(e.subs(MLP, zero).subs(MHSA, zero)) for k, e in recipes.items()}
    for k, e in both.items():
        b.step(f"{k}: with MHSA ≡ MLP ≡ 0, x' =", e)
    a1, a2 = sp.Integer(1), sp.Integer(2)
    m = (a1 + a2) / 2
    s = sp.sqrt(((a1 - m) ** 2 + (a2 - m) ** 2) / 2)
    ex = sp.Matrix([[(a1 - m) / s, (a2 - m) / s]])
    b.fact("ln_example", ex)
    b.step("LayerNorm is not the identity: LN((1, 2)) =", ex)
    b.obligation("layernorm_is_not_identity", (ex[0] - a1) ** 2 + (ex[1] - a2) ** 2, "positive",
                 description="‖LN((1, 2)) − (1, 2)‖² > 0, so the stated recipe's LN_2(x) is not x")
    b.fact("x", x)
    b.fact("functions", {"LN_1": LN1, "LN_2": LN2, "MHSA": MHSA, "MLP": MLP})
    return b.done(both)


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


# --------------------------------------------------------------------------------------------
# attn.sinusoidal_pe


@lru_cache(maxsize=None)
def derive_sinusoidal_pe() -> Derivation:
    """Derive with the angle-addition identities that the sinusoidal encoding shifted by k is a
    fixed rotation of the unshifted one, pair by pair.

    Pair i of ``PE(p)`` is ``(sin pω_i, cos pω_i)`` with ``ω_i = base^{−2i/D}`` (Vaswani et al.,
    lecture notes 003 §3). ``result`` is the 2×2 matrix ``R(kω)`` with
    ``[sin (p+k)ω, cos (p+k)ω] = [sin pω, cos pω] · R(kω)`` (row vectors); it does not contain p.
    ``facts``: ``omega`` (ω_i in symbols i, D, base), ``orthogonality`` (RᵀR − I, zero),
    ``composition`` (R(jω)R(kω) − R((j+k)ω), zero), ``symbols``.

    >>> d = derive_sinusoidal_pe()
    >>> d.result
    Matrix([
    [cos(k*omega), -sin(k*omega)],
    [sin(k*omega),  cos(k*omega)]])
    >>> d.facts["depends_on_p"]
    False
    """
    b = DerivationBuilder("Sinusoidal positional encoding: shift by k is a block rotation")
    b.symbols(p="position", k="shift", j="a second shift", omega="frequency ω_i of pair i", i="pair index",
              D="model width", base="the base (10000 in Vaswani et al.)", s="sin(pω)", c="cos(pω)")
    p, k, j = sp.symbols("p k j", real=True)
    w = sp.Symbol("omega", positive=True)
    i, D, base = sp.symbols("i D base", positive=True)
    omega = base ** (-2 * i / D)
    b.define("Frequencies ω_i = base^(−2i/D); PE(p)_2i = sin(pω_i), PE(p)_2i+1 = cos(pω_i)", omega)
    circle = sp.sin(p * w) ** 2 + sp.cos(p * w) ** 2
    b.step("Each pair lies on the unit circle, sin²(pω) + cos²(pω) =", sp.trigsimp(circle))
    b.obligation("pair_on_unit_circle", circle - 1,
                 description="sin² + cos² = 1, so every entry of PE(p) lies in [−1, 1] (the closed cube; PE(0) has entries 0 and 1)")
    s_sh = _expand_angles(sp.sin((p + k) * w))
    c_sh = _expand_angles(sp.cos((p + k) * w))
    b.step("sin((p+k)ω) by angle addition", s_sh)
    b.step("cos((p+k)ω) by angle addition", c_sh)
    s, c = sp.symbols("s c", real=True)
    lin = [e.subs({sp.sin(p * w): s, sp.cos(p * w): c}) for e in (s_sh, c_sh)]
    R = sp.Matrix([[sp.diff(lin[col], var) for col in range(2)] for var in (s, c)])
    b.step("Both are linear in (s, c) = (sin pω, cos pω); coefficient matrix R with [s', c'] = [s, c] R", R)
    b.obligation("linearity_residual", sp.Matrix([[s, c]]) * R - sp.Matrix([lin]),
                 description="[s, c]·R reproduces both shifted entries")
    resid = sp.simplify(sp.Matrix([[s, c]]) * R - sp.Matrix([lin]))
    b.fact("linearity_residual", resid)
    b.fact("depends_on_p", p in R.free_symbols)
    b.step("∂R/∂p (R does not depend on the position)", R.diff(p))
    b.obligation("independent_of_position", R.diff(p))
    b.obligation("orthogonality", R.T * R - sp.eye(2), description="RᵀR = I")
    b.fact("orthogonality", sp.simplify(R.T * R - sp.eye(2)))
    b.step("RᵀR − I", b.facts["orthogonality"])
    Rj = R.subs(k, j)
    Rjk = R.subs(k, j + k)
    b.obligation("composition", Rj * R - Rjk.applyfunc(_expand_angles), description="R(jω) R(kω) = R((j+k)ω)")
    b.fact("composition", sp.simplify(Rj * R - Rjk.applyfunc(_expand_angles)))
    b.step("R(jω) R(kω) − R((j+k)ω)", b.facts["composition"])
    b.fact("omega", omega)
    b.fact("symbols", {"k": k, "omega": w, "i": i, "D": D, "base": base, "p": p})
    return b.done(R)


# --------------------------------------------------------------------------------------------
# symbolic sizes (issue 34): the derivations above for every T (and every width), each with the
# fixed-size derivation inherited and the general result specialised to its sizes as a cross-check

__all__ += [
    "derive_softmax_simplex_general",
    "softmax_simplex_at",
    "derive_convex_combination_general",
    "convex_combination_at",
    "derive_causal_mask_general",
    "causal_mask_at",
    "derive_mhsa_sum_concat_general",
    "mhsa_sum_concat_at",
]


def _to_l(expr, S, l, Z):
    """Write every ``S_x`` back as ``e^{l_x}/Z`` (the definition), pull constants out of sums and
    rename bound indices: what is left of an identity between softmax weights."""
    e = expr.replace(lambda a: isinstance(a, sp.Indexed) and a.base == S, lambda a: sp.exp(l[a.indices[0]]) / Z)
    return sp.expand(_sz.canonical_dummies(_sz.pull_constants(sp.expand(e))))


@lru_cache(maxsize=None)
def derive_softmax_simplex_general() -> Derivation:
    """:func:`derive_softmax_simplex` for every number of tokens ``T`` (a SymPy symbol), with
    ``S_t = e^{l_t}/Σ_{τ=1}^{T} e^{l_τ}`` and ``t, s ∈ [1, T]``:

    * ``S_t > 0`` (SymPy's assumptions: ``l`` real) and ``Σ_t S_t = 1`` (inherited,
      :func:`theory.sizes.derive_softmax_sum`);
    * ``S_t < 1`` for ``T ≥ 2``: the sum split at ``t`` (``simplify`` joins the pieces back) gives
      ``1 − S_t = Σ_{ρ<t} S_ρ + Σ_{ρ>t} S_ρ``, positive in each of the cases ``t = 1``, ``t = T``
      and ``2 ≤ t ≤ T − 1`` (written with nonnegative integers ``k, a, c``: ``T = 2 + k`` …); at
      ``T = 1`` it is ``0`` (``facts["at_T1"]``: the hypothesis is needed);
    * ``S(l + c·1) = S(l)`` (``e^{c}`` pulled out of the sum cancels);
    * the Jacobian ``S_t(δ_ts − S_s)`` (inherited, :func:`theory.sizes.derive_softmax_jacobian`),
      its null vector ``1`` (``Σ_s`` evaluated) and ``xᵀJx = Σ_t S_t(x_t − Σ_s S_s x_s)² ≥ 0``.

    Cross-check: :func:`derive_softmax_simplex` at ``T = 3`` is inherited (``at_T3.*``), and the
    general Jacobian at ``T = 3`` (:func:`softmax_simplex_at`) equals its result entry by entry.
    ``result``: the Jacobian entry; facts ``S``, ``l``, ``t``, ``s``, ``T``, ``softmax``
    (``S_t`` in ``l``), ``at_T1``.

    >>> D = derive_softmax_simplex_general()
    >>> D.result
    (KroneckerDelta(s, t) - S[s])*S[t]
    >>> D.facts["at_T1"]
    0
    """
    T, t, s, tau, l, S, Z, Zs = _sz._softmax_symbols()
    rho = sp.Symbol("rho", integer=True)
    k, a, c = sp.symbols("k a c", integer=True, nonnegative=True)
    b = DerivationBuilder("Softmax on the simplex and its Jacobian, every T (symbolic)")
    b.symbols(T="number of tokens (symbolic)", l_t="logit of token t (real)", S_t="softmax output t",
              Z="normaliser Σ_τ e^{l_τ}", k="T − 2 ≥ 0", a="t − 2 ≥ 0 (interior t)", c="T − t − 1 ≥ 0 (interior t)",
              x_t="entry t of a test vector x", c_shift="a shift added to every logit")
    b.inherit(_sz.derive_softmax_sum(), "softmax_sum")
    J_sub = _sz.derive_softmax_jacobian()
    b.inherit(J_sub, "jacobian")
    St = b.define("S_t = e^{l_t} / Σ_{τ=1}^{T} e^{l_τ}", sp.exp(l[t]) / Z)
    b.obligation("positive", b.step("S_t (l real: SymPy decides the sign)", St), "positive", description="S_t > 0")
    whole = sp.Sum(S[rho], (rho, 1, T))
    split = sp.Sum(S[rho], (rho, 1, t - 1)) + sp.Sum(S[rho], (rho, t, t)) + sp.Sum(S[rho], (rho, t + 1, T))
    b.step("Split Σ_{ρ=1}^{T} S_ρ at t", split)
    b.obligation("split_at_t", split - whole, description="the three pieces join back into Σ_{ρ=1}^{T} S_ρ (simplify)")
    rest = b.step("1 − S_t = Σ_ρ S_ρ − S_t (Σ_ρ S_ρ = 1, softmax_sum) = Σ_{ρ<t} S_ρ + Σ_{ρ>t} S_ρ",
                  split - sp.Sum(S[rho], (rho, t, t)))
    cases = (("t_is_1", {t: 1, T: 2 + k}), ("t_is_T", {t: 2 + k, T: 2 + k}), ("t_interior", {t: 2 + a, T: 3 + a + c}))
    for name, sub in cases:
        e = b.step(f"Case {name.replace('_', ' ')}: {', '.join(f'{kk} = {vv}' for kk, vv in sub.items())}", rest.xreplace(sub))
        b.obligation(f"below_one_{name}", e, "positive", description="1 − S_t > 0: S_t < 1 (T ≥ 2)")
    at1 = b.step("At T = 1 (t = 1) the other weights are an empty sum: 1 − S_1 =", rest.xreplace({t: 1, T: 1}).doit())
    b.fact("at_T1", at1)
    cs = sp.Symbol("c", real=True)
    shifted = sp.exp(l[t] + cs) / sp.Sum(sp.exp(l[tau] + cs), (tau, 1, T))
    sh = b.step("S(l + c·1)_t: e^{c} pulled out of the sum", _sz.pull_constants(sp.expand(shifted)))
    b.obligation("shift_invariance", _sz.canonical_dummies(sh - St), description="S(l + c·1) = S(l)")
    J = J_sub.result
    row = b.step("Σ_s ∂S_t/∂l_s: the delta sum evaluated for t ∈ [1, T]",
                 _sz.eval_index_sums(sp.Sum(sp.expand(J), (s, 1, T)), {t: (1, T)}))
    null = b.step("S_x = e^{l_x}/Z put back; Z cancels: (diag(S) − SSᵀ)·1 =", _to_l(row, S, l, Z))
    b.obligation("jacobian_null_vector", null, description="(diag(S) − SSᵀ)1 = 0 for every T")
    x = sp.IndexedBase("x", real=True)
    quad = b.step("xᵀJx = Σ_t Σ_s x_t S_t(δ_ts − S_s) x_s, delta sum evaluated",
                  _sz.eval_index_sums(sp.Sum(sp.expand(x[t] * J * x[s]), (t, 1, T), (s, 1, T))))
    mean = sp.Sum(S[s] * x[s], (s, 1, T))
    var = b.step("Σ_t S_t (x_t − Σ_s S_s x_s)²", sp.Sum(S[t] * (x[t] - mean) ** 2, (t, 1, T)))
    gap = b.step("xᵀJx − Σ_t S_t(x_t − m)², S_x = e^{l_x}/Z put back", _to_l(_sz.pull_constants(quad) - _sz.pull_constants(var), S, l, Z))
    b.obligation("jacobian_quadratic_form_is_a_variance", gap, description="xᵀJx is the variance of x under the weights S")
    b.obligation("jacobian_psd", var, "nonnegative", description="a sum of S_t (…)² ≥ 0: the Jacobian is PSD")
    fixed = derive_softmax_simplex(3)
    b.inherit(fixed, "at_T3")
    _, P, _, Jg = softmax_simplex_at(3)
    b.obligation("general_at_T3_equals_fixed", Jg.subs(dict(zip(P, fixed.facts["p_symbols"]))) - fixed.result,
                 description="the general Jacobian specialised to T = 3 is derive_softmax_simplex(3)'s, entry by entry")
    for key, val in (("S", S), ("l", l), ("t", t), ("s", s), ("T", T), ("softmax", St)):
        b.fact(key, val)
    return b.done(b.step("The Jacobian entry (derived for symbolic T, inherited)", J))


@lru_cache(maxsize=None)
def softmax_simplex_at(T: int):
    """The closed forms of :func:`derive_softmax_simplex_general` specialised to ``T`` tokens:
    ``(l, p, softmax, jacobian)`` with ``l = (l_1..l_T)`` real symbols, ``p = (p_1..p_T)`` positive
    symbols standing for the outputs, ``softmax`` the list of ``S_t`` in ``l`` and ``jacobian`` the
    T×T matrix ``S_t(δ_ts − S_s)`` in ``p``.

    >>> softmax_simplex_at(2)[3]
    Matrix([
    [-p_1**2 + p_1,      -p_1*p_2],
    [     -p_1*p_2, -p_2**2 + p_2]])
    """
    D = _sz.derive_softmax_jacobian()
    S, t, s, Ts = (D.facts[key] for key in ("S", "t", "s", "T"))
    _, _, _, tau, lb, _, Zg, _ = _sz._softmax_symbols()
    l = sp.symbols(f"l_1:{T + 1}", real=True)
    p = sp.symbols(f"p_1:{T + 1}", positive=True)
    ls = {lb[i + 1]: l[i] for i in range(T)}
    soft = [_sz.instantiate((sp.exp(lb[t]) / Zg).xreplace({t: i + 1}), {Ts: T}).xreplace(ls) for i in range(T)]
    ps = {S[i + 1]: p[i] for i in range(T)}
    J = sp.Matrix(T, T, lambda i, j: sp.expand(D.result.xreplace({t: i + 1, s: j + 1}).doit().xreplace(ps)))
    return l, p, soft, J


@lru_cache(maxsize=None)
def derive_convex_combination_general() -> Derivation:
    """:func:`derive_convex_combination` for every number of tokens ``T`` and value width ``D_v``
    (SymPy symbols): the output row ``y_j = Σ_{t=1}^{T} S_t V_tj`` (``j ∈ [1, D_v]``) has weights
    ``S_t > 0`` with ``Σ_t S_t = 1`` (inherited, :func:`theory.sizes.derive_convex_combination`,
    which also gives the shift equivariance and ``∂o/∂l_s``), so ``y`` lies in ``conv{v_1..v_T}``
    (definition of the convex hull). Derived besides, per coordinate: if every ``V_tj ≥ m`` then
    ``y_j − m = Σ_t S_t (V_tj − m) ≥ 0`` (and likewise ``≤`` a common upper bound): the box of the
    value rows contains ``y``.

    Cross-check: :func:`derive_convex_combination` at ``T = 3, D_v = 2`` is inherited (``at_T3_Dv2.*``)
    and the general row specialised to those sizes (:func:`convex_combination_at`) equals its
    result. ``result``: ``y_j`` in the logits ``l`` and values ``V``; facts ``l``, ``V``, ``t``,
    ``j``, ``T``, ``D_v``.

    >>> derive_convex_combination_general().result
    Sum(exp(l[t])*V[t, j], (t, 1, T))/Sum(exp(l[tau]), (tau, 1, T))
    """
    T, t, s, tau, l, S, Z, Zs = _sz._softmax_symbols()
    Dv = sp.Symbol("D_v", integer=True, positive=True)
    j = sp.Symbol("j", integer=True)
    V = sp.IndexedBase("V", real=True)
    u = sp.IndexedBase("u", nonnegative=True)
    m = sp.Symbol("m", real=True)
    b = DerivationBuilder("Attention output row is a convex combination of the value rows, every T and D_v (symbolic)")
    b.symbols(T="number of tokens (symbolic)", D_v="value width (symbolic)", l_t="logit of token t for one query (real)",
              S_t="attention weight of token t", V_tj="entry j of value row t (real)", y_j="entry j of the output row",
              m="a common lower bound of the column V_·j", u_t="V_tj − m ≥ 0")
    sub = _sz.derive_convex_combination()
    b.inherit(sub, "symbolic_T")
    St = b.define("S_t = e^{l_t} / Σ_{τ=1}^{T} e^{l_τ}", sp.exp(l[t]) / Z)
    b.obligation("weights_positive", b.step("The weight S_t (l real: SymPy decides the sign)", St), "positive",
                 description="S_t > 0 for every t (with Σ_t S_t = 1, inherited: the weights lie in the simplex)")
    y = b.define("y_j = Σ_{t=1}^{T} S_t V_tj, j ∈ [1, D_v]", sp.Sum(St * V[t, j], (t, 1, T)))
    yj = b.step("The normaliser does not depend on t: pull it out", _sz.pull_constants(y))
    b.define("A point Σ_t a_t v_t with a_t ≥ 0 and Σ_t a_t = 1 lies in conv{v_1..v_T} (definition of the convex hull)")
    low = b.step("Column j bounded below by m (V_tj = m + u_t, u_t ≥ 0): y_j − m, the weights' sum cancelling m",
                 sp.expand(_sz.canonical_dummies(_sz.pull_constants(sp.expand(y.xreplace({V[t, j]: m + u[t]}))) - m)))
    b.obligation("above_column_minimum", low, "nonnegative", description="y_j ≥ m when every V_tj ≥ m")
    high = b.step("Bounded above by m (V_tj = m − u_t): m − y_j",
                  sp.expand(m - _sz.canonical_dummies(_sz.pull_constants(sp.expand(y.xreplace({V[t, j]: m - u[t]}))))))
    b.obligation("below_column_maximum", high, "nonnegative", description="y_j ≤ m when every V_tj ≤ m")
    facts = {"l": l, "V": V, "t": t, "j": j, "T": T, "D_v": Dv}
    fixed = derive_convex_combination(3, 2)
    b.inherit(fixed, "at_T3_Dv2")
    lg, Vg, yg = _convex_row_at(yj, facts, 3, 2)
    rename = {**dict(zip(lg, fixed.facts["logits"])), **dict(zip(list(Vg), list(fixed.facts["values"])))}
    b.obligation("general_at_T3_Dv2_equals_fixed", (yg.xreplace(rename) - fixed.result).applyfunc(sp.simplify),
                 description="the general row specialised to T = 3, D_v = 2 is derive_convex_combination(3, 2)'s")
    for key, val in facts.items():
        b.fact(key, val)
    return b.done(yj)


def _convex_row_at(y, facts, T: int, Dv: int):
    """The general row ``y_j`` (in ``facts``' symbols) at ``T`` tokens and width ``Dv``: ``(l, V, row)``."""
    l = sp.symbols(f"l_1:{T + 1}", real=True)
    V = _mat("v", T, Dv, real=True)
    lb, Vb, j, Ts = facts["l"], facts["V"], facts["j"], facts["T"]
    rename = {**{lb[i + 1]: l[i] for i in range(T)}, **{Vb[i + 1, c + 1]: V[i, c] for i in range(T) for c in range(Dv)}}
    row = [_sz.instantiate(y.xreplace({j: c + 1}), {Ts: T}).xreplace(rename) for c in range(Dv)]
    return l, V, sp.Matrix([row])


@lru_cache(maxsize=None)
def convex_combination_at(T: int, Dv: int):
    """:func:`derive_convex_combination_general`'s row specialised to ``T`` tokens and width ``Dv``:
    ``(l, V, y)`` with logits ``l_1..l_T``, values ``V`` (a T×Dv matrix of symbols ``v_tj``) and the
    1×Dv row ``y``.

    >>> convex_combination_at(2, 1)[2]
    Matrix([[v_11*exp(l_1)/(exp(l_1) + exp(l_2)) + v_21*exp(l_2)/(exp(l_1) + exp(l_2))]])
    """
    D = derive_convex_combination_general()
    return _convex_row_at(D.result, D.facts, T, Dv)


def _causal_symbols():
    T = sp.Symbol("T", integer=True, positive=True)
    t, s, sg, u, r = sp.symbols("t s sigma u r", integer=True)
    return T, t, s, sg, u, r, sp.IndexedBase("l", real=True), sp.IndexedBase("v", real=True)


@lru_cache(maxsize=None)
def derive_causal_mask_general() -> Derivation:
    """:func:`derive_causal_mask` for every number of tokens ``T`` (a SymPy symbol), row ``t`` and
    column ``s`` in ``[1, T]``: ``A = S(L + M)`` with ``M_ts = 0`` for ``s ≤ t`` and ``−∞`` for
    ``s > t`` (a ``Piecewise``).

    Steps: sums over ``[1, T]`` split at ``t`` (for an undefined ``f``, ``simplify`` joins the
    pieces back); in the row normaliser ``Σ_{σ=1}^{T} e^{l_tσ + M_tσ}``, on ``σ ∈ [1, t]`` the mask is ``0`` and on ``[t + 1, T]`` it is ``−∞``
    (:func:`theory.sizes.resolve_ranges` decides the ``Piecewise`` from the ranges), and
    ``e^{l − ∞} = 0``: the normaliser is ``Z_t = Σ_{σ=1}^{t} e^{l_tσ}``. Hence ``A_ts = 0`` for
    ``s > t``, ``Σ_s A_ts = 1`` (``Z_t`` pulled out, bound indices renamed), ``A_11 = 1``; the output
    ``y_t = Σ_s A_ts v_s`` (scalar values) has ``∂y_t/∂v_u = 0``, ``∂y_t/∂l_ru = 0`` (column ``u``) and
    ``∂y_t/∂l_us = 0`` (row ``u``) for every ``u ∈ [t + 1, T]`` and every ``r, s`` (delta sums evaluated
    under the ranges).

    Cross-check: :func:`derive_causal_mask` at ``T = 3`` is inherited (``at_T3.*``) and the general
    ``A`` specialised to ``T = 3`` (:func:`causal_mask_at`) equals its result. ``result``: ``A_ts``
    as a ``Piecewise`` in ``s ≤ t``; facts ``l``, ``v``, ``t``, ``s``, ``T``, ``Z_t``, ``A_11``.

    >>> derive_causal_mask_general().result
    Piecewise((exp(l[t, s])/Sum(exp(l[t, sigma]), (sigma, 1, t)), s <= t), (0, True))
    """
    T, t, s, sg, u, r, l, v = _causal_symbols()
    b = DerivationBuilder("Causal mask: lower-triangular, row-stochastic, blind to the future, every T (symbolic)")
    b.symbols(T="number of tokens (symbolic)", l_ts="logit of query t for key s (real)", M_ts="mask entry",
              v_s="scalar value of token s", y_t="output of token t", Z_t="masked normaliser of row t",
              u="a later token (u > t)", r="any query row")

    def mask(x):
        return sp.Piecewise((0, x <= t), (-sp.oo, True))

    b.define("Mask M_ts = 0 for s ≤ t, −∞ for s > t", mask(s))
    f = sp.Function("f")
    b.obligation("split_at_t", sp.Sum(f(sg), (sg, 1, t)) + sp.Sum(f(sg), (sg, t + 1, T)) - sp.Sum(f(sg), (sg, 1, T)),
                 description="Σ_{σ=1}^{T} f_σ = Σ_{σ=1}^{t} f_σ + Σ_{σ=t+1}^{T} f_σ for any f (simplify joins the pieces)")
    lo, hi = sp.Sum(sp.exp(l[t, sg] + mask(sg)), (sg, 1, t)), sp.Sum(sp.exp(l[t, sg] + mask(sg)), (sg, t + 1, T))
    b.step("The row normaliser Σ_{σ=1}^{T} e^{l_tσ + M_tσ}, split at t", lo + hi)
    early, late = {sg: (1, t)}, {sg: (t + 1, T)}  # t itself stays free: any row
    lo_r = b.step("σ ∈ [1, t]: the mask is 0", sp.Sum(sp.exp(l[t, sg] + _sz.resolve_ranges(mask(sg), early)), (sg, 1, t)))
    hi_r = b.step("σ ∈ [t + 1, T]: the mask is −∞, e^{l − ∞} = 0", sp.Sum(sp.exp(l[t, sg] + _sz.resolve_ranges(mask(sg), late)),
                                                                      (sg, t + 1, T)).doit())
    Zt = b.step("Z_t = Σ_{σ=1}^{T} e^{l_tσ + M_tσ}", lo_r + hi_r)
    A_low = b.step("A_ts for s ∈ [1, t]", sp.exp(l[t, s] + _sz.resolve_ranges(mask(s), {s: (1, t)})) / Zt)
    A_up = b.step("A_ts for s ∈ [t + 1, T]", sp.exp(l[t, s] + _sz.resolve_ranges(mask(s), {s: (t + 1, T)})) / Zt)
    b.obligation("upper_entries_zero", A_up, description="A_ts = 0 for every s > t: A is lower-triangular")
    rows = b.step("Σ_{s=1}^{T} A_ts, split at t (split_at_t)", sp.Sum(A_low, (s, 1, t)) + sp.Sum(A_up, (s, t + 1, T)).doit())
    one = b.step("Z_t pulled out; bound indices renamed", _sz.canonical_dummies(_sz.pull_constants(rows)))
    b.obligation("rows_sum_to_one", one - 1, description="Σ_s A_ts = 1 for every row t ∈ [1, T]")
    a11 = b.step("Row t = 1: A_11", A_low.xreplace({t: 1, s: 1}).doit())
    b.obligation("first_row_is_one_hot", a11 - 1, description="A_11 = 1, so y_1 = v_1")
    b.define("y_t = Σ_{s=1}^{T} A_ts v_s")
    y = b.step("Split at t (split_at_t); A_ts on each piece", sp.Sum(A_low * v[s], (s, 1, t)) + sp.Sum(A_up * v[s], (s, t + 1, T)))
    fut = {u: (t + 1, T)}
    dv = b.step("∂y_t/∂v_u for u ∈ [t + 1, T] (delta sums evaluated)", _sz.eval_index_sums(sp.diff(y, v[u]), fut))
    dl = b.step("∂y_t/∂l_ru for u ∈ [t + 1, T], any r (column u: the key of token u)", _sz.eval_index_sums(sp.diff(y, l[r, u]), fut))
    kk = sp.Symbol("k", integer=True, nonnegative=True)
    dq = b.step("∂y_t/∂l_us for a later row u = t + 1 + k (k ≥ 0), any s (row u: the query of token u)",
                _sz.eval_index_sums(sp.diff(y, l[t + 1 + kk, r])))
    b.obligation("blind_to_the_future", [dv, dl, dq],
                 description="no output depends on a later token's value, key column or query row")
    A = b.step("A_ts for every (t, s)", sp.Piecewise((A_low, s <= t), (A_up, True)))
    facts = {"l": l, "v": v, "t": t, "s": s, "T": T, "Z_t": Zt, "A_11": a11}
    fixed = derive_causal_mask(3)
    b.inherit(fixed, "at_T3")
    Lg, Ag = _causal_at(A, facts, 3)
    b.obligation("general_at_T3_equals_fixed", Ag.xreplace(dict(zip(list(Lg), list(fixed.facts["logits"])))) - fixed.result,
                 description="the general A specialised to T = 3 is derive_causal_mask(3)'s, entry by entry")
    for key, val in facts.items():
        b.fact(key, val)
    return b.done(A)


def _causal_at(A, facts, T: int):
    L = _mat("l", T, T, real=True)
    lb, t, s, Ts = facts["l"], facts["t"], facts["s"], facts["T"]
    rename = {lb[i + 1, j + 1]: L[i, j] for i in range(T) for j in range(T)}
    return L, sp.Matrix(T, T, lambda i, j: _sz.instantiate(A.xreplace({t: i + 1, s: j + 1}), {Ts: T}).xreplace(rename))


@lru_cache(maxsize=None)
def causal_mask_at(T: int):
    """:func:`derive_causal_mask_general`'s ``A`` specialised to ``T`` tokens: ``(L, A)`` with ``L``
    the T×T logit symbols ``l_ts``.

    >>> causal_mask_at(2)[1]
    Matrix([
    [                                1,                                 0],
    [exp(l_21)/(exp(l_21) + exp(l_22)), exp(l_22)/(exp(l_21) + exp(l_22))]])
    """
    D = derive_causal_mask_general()
    return _causal_at(D.result, D.facts, T)


def _mhsa_symbols():
    N, D, K, w = sp.symbols("N D D_v w", integer=True, positive=True)
    X = sp.MatrixSymbol("X", N, D)
    return N, D, K, w, X


def _mhsa_head(h: int, N, D, K):
    WQ, WK, WV = (sp.MatrixSymbol(f"W_{kind}{h}", D, K) for kind in ("Q", "K", "V"))
    return WQ, WK, WV, sp.MatrixSymbol(f"P_{h}", K, D), sp.MatrixSymbol(f"S_{h}", N, N)


@lru_cache(maxsize=None)
def derive_mhsa_sum_concat_general() -> Derivation:
    """:func:`derive_mhsa_sum_concat` for symbolic ``N`` (tokens), ``D`` (width) and ``D_v`` (head
    width), and every number of heads ``M ≥ 1`` by induction on ``M``. Matrix symbols: ``X`` (N×D),
    per head ``W_{Q,h}, W_{K,h}, W_{V,h}`` (D×D_v), ``P_h`` (D_v×D, block h of ``W_O``'s rows: ``U_{p,h} = P_hᵀ``).

    Per head (generic ``h``): the scores ``(U_k X_c)ᵀ(U_q X_c) = (Q_h K_hᵀ)ᵀ`` (``U = Wᵀ``,
    ``X_c = Xᵀ``); entrywise for symbolic ``N`` the column softmax ``A_h`` of lecture notes 000 is
    the transposed row softmax ``S_h = S(Q_h K_hᵀ)`` (index identity, bound indices renamed); so
    ``(U_{p,h} U_{v,h} X_c A_h)ᵀ = S_h X W_{V,h} P_h = H_h P_h``. Concatenation: ``M = 1`` is one
    block; the step ``M → M + 1`` is ``block_collapse([C, H][W; P]) = C W + H P`` with ``C`` of
    symbolic width ``w = M·D_v`` (the induction hypothesis ``C W = Σ_{h≤M} H_h P_h``; induction is
    the typed premise). Explicitly also for ``M = 2, 3`` (a ``BlockMatrix`` has a Python-integer
    number of blocks), and the width ``Σ_{h=1}^{M} D_v = M D_v`` for symbolic ``M``.

    Cross-check: :func:`derive_mhsa_sum_concat` at ``N = 2, D = 2, D_v = 1, M = 2`` is inherited
    (``at_N2_D2_K1_M2.*``) and the general form specialised to those sizes (:func:`mhsa_sum_concat_at`)
    equals its result. ``result``: the per-head term ``S_h X W_{V,h} P_h``; facts ``sizes``,
    ``head`` (the head-1 matrix symbols), ``scores`` (``X W_Q (X W_K)ᵀ``), ``width``.

    >>> derive_mhsa_sum_concat_general().result
    S_1*X*W_V1*P_1
    """
    N, D, K, w, X = _mhsa_symbols()
    b = DerivationBuilder("Multi-head attention: sum of projected heads = Concat·W_O, symbolic N, D, D_v, every M")
    b.symbols(N="tokens (symbolic)", D="model width (symbolic)", D_v="head width (symbolic)", M="number of heads",
              X="tokens as rows (N×D); X_c = Xᵀ", W_Qh="query weights of head h (D×D_v), U_q,h = W_Q,hᵀ",
              W_Kh="key weights of head h", W_Vh="value weights of head h", P_h="block h of W_O's rows (D_v×D), U_p,h = P_hᵀ",
              S_h="row softmax of Q_h K_hᵀ (N×N)", A_h="lecture notes 000's column-stochastic weights of head h",
              w="width M·D_v of the first M heads (induction)")
    WQ, WK, WV, P, Sh = _mhsa_head(1, N, D, K)
    Xc = X.T
    G = b.define("Scores of lecture notes 000: ⟨k_n, q_n'⟩ = ((U_k X_c)ᵀ(U_q X_c))_{nn'}", (WK.T * Xc).T * (WQ.T * Xc))
    QK = b.define("Scores of lecture notes 003: Q Kᵀ with Q = X W_Q, K = X W_K", (X * WQ) * (X * WK).T)
    b.obligation("scores_transposed", _sz._canon(G - QK.T), description="(U_k X_c)ᵀ(U_q X_c) = (Q Kᵀ)ᵀ")
    C = sp.MatrixSymbol("C", N, N)  # Q_h K_hᵀ, named
    n, n2, ell = sp.symbols("n n' ell", integer=True)
    A_entry = b.define("A_{nn'} = e^{⟨k_n, q_n'⟩} / Σ_ℓ e^{⟨k_ℓ, q_n'⟩} with ⟨k_n, q_n'⟩ = (Cᵀ)_{nn'}, C = Q Kᵀ (scores_transposed)",
                       sp.exp(C.T[n, n2]) / sp.Sum(sp.exp(C.T[ell, n2]), (ell, 0, N - 1)))
    R_entry = b.define("Row softmax S(C)_{n'n} = e^{C_{n'n}} / Σ_ℓ e^{C_{n'ℓ}}", sp.exp(C[n2, n]) / sp.Sum(sp.exp(C[n2, ell]), (ell, 0, N - 1)))
    b.obligation("column_softmax_is_transposed_row_softmax", _sz.canonical_dummies(A_entry - R_entry),
                 description="A_h = S(Q_h K_hᵀ)ᵀ entrywise, every N")
    term = b.define("Head h of lecture notes 000: U_p,h U_v,h X_c A_h with A_h = S_hᵀ", P.T * WV.T * Xc * Sh.T)
    head = b.step("Transposed (rows): (U_p,h U_v,h X_c A_h)ᵀ", sp.transpose(term).doit())
    Hh = b.define("Head h of lecture notes 003: H_h = S_h X W_V,h (N×D_v)", Sh * X * WV)
    b.obligation("head_term", _sz._canon(head - Hh * P), description="(U_p,h U_v,h X_c A_h)ᵀ = H_h P_h for every N, D, D_v")
    H1 = sp.MatrixSymbol("H_1", N, K)
    P1 = sp.MatrixSymbol("P_1", K, D)
    base = b.step("M = 1: Concat(H_1)·W_O with one block", sp.block_collapse(sp.BlockMatrix([[H1]]) * sp.BlockMatrix([[P1]])))
    b.obligation("induction_base", _sz._canon(base - H1 * P1), description="M = 1: Concat(H_1) W_O = H_1 P_1")
    Cm, Wm, Hn, Pn = (sp.MatrixSymbol("C_M", N, w), sp.MatrixSymbol("W_M", w, D), sp.MatrixSymbol("H_next", N, K),
                      sp.MatrixSymbol("P_next", K, D))
    b.assume("Induction on M: C_M = Concat(H_1..H_M) (N×w, w = M·D_v) and W_M (its rows of W_O) satisfy "
             "C_M W_M = Σ_{h≤M} H_h P_h; head M + 1 adds the blocks H_next, P_next", key="induction on M")
    step = b.step("M → M + 1: block_collapse([C_M, H_next][W_M; P_next])",
                  sp.block_collapse(sp.BlockMatrix([[Cm, Hn]]) * sp.BlockMatrix([[Wm], [Pn]])))
    b.obligation("induction_step", _sz._canon(step - (Cm * Wm + Hn * Pn)),
                 description="Concat(H_1..H_{M+1}) W_O = C_M W_M + H_{M+1} P_{M+1} = Σ_{h≤M+1} H_h P_h")
    for M in (2, 3):
        Hs = [sp.MatrixSymbol(f"H_{h}", N, K) for h in range(1, M + 1)]
        Ps = [sp.MatrixSymbol(f"P_{h}", K, D) for h in range(1, M + 1)]
        blk = b.step(f"M = {M} explicitly: block_collapse(Concat(H_1..H_{M})·[P_1; …; P_{M}])",
                     sp.block_collapse(sp.BlockMatrix([Hs]) * sp.BlockMatrix([[p] for p in Ps])))
        b.obligation(f"blocks_M{M}", _sz._canon(blk - sp.MatAdd(*[h * p for h, p in zip(Hs, Ps)])),
                     description=f"Concat(H_1..H_{M}) W_O = Σ_h H_h P_h")
    Mh, hh = sp.symbols("M h", integer=True, positive=True)
    width = b.step("Width of Concat(H_1..H_M): Σ_{h=1}^{M} D_v", sp.summation(K, (hh, 1, Mh)))
    b.obligation("width", width - Mh * K, description="Concat is N × M·D_v")
    facts = {"sizes": (N, D, K), "head": (WQ, WK, WV, P, Sh), "scores": QK, "width": width}
    fixed = derive_mhsa_sum_concat(2, 2, 1, 2)
    b.inherit(fixed, "at_N2_D2_K1_M2")
    sy, out = _mhsa_at(Hh * P, facts, 2, 2, 1, 2)
    rename = {}
    for mine, theirs in ((sy["X"], fixed.facts["symbols"]["X"]),) + tuple(
            (m, t) for key in ("W_Q", "W_K", "W_V") for m, t in zip(sy[key], fixed.facts["symbols"][key])) + (
            (sy["W_O"], fixed.facts["symbols"]["W_O"]),):
        rename.update(dict(zip(list(mine), list(theirs))))
    b.obligation("general_at_N2_D2_K1_M2_equals_fixed", _expand_exponents(out.xreplace(rename)) - _expand_exponents(fixed.result),
                 description="Σ_h H_h P_h specialised to N = 2, D = 2, D_v = 1, M = 2 is derive_mhsa_sum_concat(2, 2, 1, 2)'s")
    for key, val in facts.items():
        b.fact(key, val)
    return b.done(b.step("Per head: the transposed term of lecture notes 000 is H_h P_h", Hh * P))


def _explicit(expr, sizes, values):
    """A matrix expression at explicit sizes with explicit matrices for its symbols (by name),
    multiplied out as matrices (no expansion of the entries)."""
    e = expr.xreplace(sizes)
    e = e.xreplace({m: sp.ImmutableMatrix(values[m.name]) for m in e.atoms(sp.MatrixSymbol)})
    return sp.Matrix(e.doit())


def _mhsa_at(term, facts, N: int, D: int, K: int, M: int):
    """``Σ_h`` of the general per-head term at sizes ``N, D, D_v = K`` and ``M`` heads, every matrix
    symbol replaced by an explicit matrix of scalar symbols (``S_h`` by the row softmax of the
    explicit scores): ``(symbols, output)`` with ``symbols`` as in :func:`derive_mhsa_sum_concat`."""
    Ns, Ds, Ks = facts["sizes"]
    WQ, WK, WV, P, Sh = facts["head"]
    sizes = {Ns: N, Ds: D, Ks: K}
    X = _mat("x", N, D, real=True)
    sy = {"X": X, "W_Q": [], "W_K": [], "W_V": [], "W_O": _mat("o", M * K, D, real=True)}
    out = sp.zeros(N, D)
    for h in range(M):
        wq, wk, wv = (_mat(f"{c}{h + 1}", D, K, real=True) for c in ("q", "k", "v"))
        for key, val in (("W_Q", wq), ("W_K", wk), ("W_V", wv)):
            sy[key].append(val)
        vals = {"X": X, WQ.name: wq, WK.name: wk, WV.name: wv, P.name: sy["W_O"][h * K:(h + 1) * K, :]}
        vals[Sh.name] = _softmax_rows(_explicit(facts["scores"], sizes, vals))
        out += _explicit(term, sizes, vals)
    sy = {k: (tuple(v) if isinstance(v, list) else v) for k, v in sy.items()}
    return sy, out


@lru_cache(maxsize=None)
def mhsa_sum_concat_at(N: int, D: int, K: int, M: int):
    """:func:`derive_mhsa_sum_concat_general`'s ``Σ_h H_h P_h`` specialised to ``N`` tokens, width
    ``D``, head width ``K`` and ``M`` heads: ``(symbols, output)``, ``symbols`` keyed ``X``, ``W_Q``,
    ``W_K``, ``W_V`` (tuples over heads) and ``W_O`` as in :func:`derive_mhsa_sum_concat`.

    >>> sy, out = mhsa_sum_concat_at(2, 1, 1, 1); out.shape, sy["W_O"]
    ((2, 1), Matrix([[o_11]]))
    """
    D_ = derive_mhsa_sum_concat_general()
    return _mhsa_at(D_.result, D_.facts, N, D, K, M)
