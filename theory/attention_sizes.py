"""Attention mechanics for symbolic sizes (issue 34): the derivations of :mod:`theory.attention_derive` for every
T (and every width), each with the fixed-size derivation inherited and the general result specialised to its sizes
as a cross-check. Part of :mod:`theory.attention`."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory import sizes as _sz
from theory.derivation import Derivation, DerivationBuilder
from theory.attention_derive import (_expand_exponents, _mat, _softmax_rows, derive_causal_mask,
                                     derive_convex_combination, derive_mhsa_sum_concat, derive_softmax_simplex)


# --------------------------------------------------------------------------------------------
# symbolic sizes (issue 34): the derivations above for every T (and every width), each with the
# fixed-size derivation inherited and the general result specialised to its sizes as a cross-check


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
