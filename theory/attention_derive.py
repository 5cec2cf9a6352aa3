"""Attention mechanics derived in SymPy at fixed sizes (claims ``attn.*``): the softmax simplex, the convex
combination, the causal mask, the score variance, the forms of attention, multi-head sum and concatenation, permutation
equivariance, layer norm and the block recipe. Part of :mod:`theory.attention` (the conventions are in its docstring)."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder


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
