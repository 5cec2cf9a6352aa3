"""Symbolic sizes: index sums with range conditions and matrix identities at symbolic shapes.

Derivations elsewhere instantiate sizes (T = 3 tokens, d = 2, N = 2). This module states the same
facts for *symbolic* sizes: sums ``Σ_{t=1}^{T}`` with ``T`` a SymPy symbol (``IndexedBase``,
``Sum``, ``KroneckerDelta``) and ``MatrixSymbol`` shapes such as ``n × k_h``.

Helpers
    :func:`resolve_ranges` decides the ``Piecewise`` conditions ``1 ≤ s ≤ T`` that SymPy leaves
    after summing a ``KroneckerDelta``, from the declared range of each index;
    :func:`eval_index_sums` evaluates (delta) sums under those ranges; :func:`pull_constants` and
    :func:`canonical_dummies` move factors free of a summation index out of a sum and rename bound
    indices, so that ``Σ_t e^{l_t} / Σ_τ e^{l_τ}`` cancels; :func:`rank_bound` reads a rank bound
    off the shapes of a matrix expression; :func:`instantiate` puts numbers in for sizes (and,
    optionally, explicit matrices in for matrix symbols).

Derivations (each returns a :class:`theory.derivation.Derivation`; typed-in steps are marked
``assumed`` and named in the docstring)
    :func:`derive_softmax_sum`, :func:`derive_softmax_jacobian`, :func:`derive_convex_combination`,
    :func:`derive_multihead_concat`, :func:`derive_lora_rank_bound`, :func:`derive_gd_step`.

Index conventions: token indices run over ``1..T``; matrix indices (``MatrixSymbol`` entries) over
``0..n−1``, SymPy's convention.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Any, Mapping

import sympy as sp
from sympy.core.relational import Relational
from sympy.matrices.expressions.matexpr import MatrixElement

from theory.derivation import Derivation, DerivationBuilder

__all__ = [
    "resolve_ranges",
    "eval_index_sums",
    "pull_constants",
    "canonical_dummies",
    "instantiate",
    "rank_bound",
    "derive_softmax_sum",
    "derive_softmax_jacobian",
    "derive_convex_combination",
    "derive_multihead_concat",
    "derive_lora_rank_bound",
    "derive_gd_step",
]

Range = tuple[Any, Any]


# ------------------------------------------------------------------------------------------------
# index-sum helpers


def _decide(rel: Relational, ranges: Mapping[sp.Symbol, Range]):
    """``True``/``False`` when every value of the ranged indices in ``rel`` makes it so, else ``rel``.

    ``rel`` (``≤ <  ≥ >``) is read as ``g ≥ 0`` (``g ≥ 1`` when strict: indices are integers) with
    ``g`` the greater side minus the lesser. Each ranged index ``x ∈ [lo, hi]`` is written either
    ``lo + u`` or ``hi − v`` with ``u, v`` nonnegative integers; if one such choice makes SymPy's
    assumptions decide the sign of ``g``, that decides ``rel`` for every ``x`` in the range."""
    if not isinstance(rel, (sp.Ge, sp.Gt, sp.Le, sp.Lt)):
        return rel
    g = rel.gts - rel.lts - (1 if isinstance(rel, (sp.Gt, sp.Lt)) else 0)
    idx = [x for x in g.free_symbols if x in ranges]
    if not idx:
        return rel
    for choice in itertools.product((0, 1), repeat=len(idx)):
        sub = {}
        for x, c in zip(idx, choice):
            lo, hi = ranges[x]
            k = sp.Dummy(f"k_{x}", integer=True, nonnegative=True)
            sub[x] = lo + k if c == 0 else hi - k
        h = sp.expand(g.xreplace(sub))
        if h.is_nonnegative:
            return sp.true
        if h.is_negative:
            return sp.false
    return rel


def resolve_ranges(expr: Any, ranges: Mapping[sp.Symbol, Range]) -> Any:
    """Decide the ``Piecewise`` conditions in ``expr`` that the index ranges settle.

    ``ranges`` maps an integer index symbol to ``(lo, hi)`` (inclusive, symbolic allowed). A branch
    whose condition is always true under the ranges becomes the value; a false one is dropped.

    >>> T = sp.Symbol("T", integer=True, positive=True)
    >>> s, tau = sp.symbols("s tau", integer=True)
    >>> e = sp.Sum(sp.KroneckerDelta(s, tau) * sp.Symbol("f"), (tau, 1, T)).doit()
    >>> e
    Piecewise((f, (T >= s) & (s >= 1)), (0, True))
    >>> resolve_ranges(e, {s: (1, T)})
    f
    """
    def fix(pw):
        pieces = []
        for val, cond in pw.args:
            rels = cond.atoms(Relational) if cond not in (sp.true, sp.false) else set()
            pieces.append((val, cond.xreplace({r: _decide(r, ranges) for r in rels})))
        return sp.Piecewise(*pieces)

    return expr.replace(lambda e: isinstance(e, sp.Piecewise), fix)


def _delta_powers(expr):
    """``δ_ij^k → δ_ij`` (k ≥ 1): a Kronecker delta is 0 or 1."""
    return expr.replace(lambda e: isinstance(e, sp.Pow) and isinstance(e.base, sp.KroneckerDelta)
                        and e.exp.is_integer and e.exp.is_positive, lambda e: e.base)


def eval_index_sums(expr: Any, ranges: Mapping[sp.Symbol, Range] | None = None) -> Any:
    """Evaluate the sums in ``expr`` one limit at a time (innermost first), resolving after each
    the ``Piecewise`` range conditions (:func:`resolve_ranges`) from ``ranges`` (the free indices)
    and the limits of the sums still around it. ``δ^k`` is first rewritten ``δ``. Sums SymPy cannot
    evaluate (``Σ_τ e^{l_τ}``) stay.

    >>> N = sp.Symbol("N", integer=True, positive=True)
    >>> i, j = sp.symbols("i j", integer=True)
    >>> eval_index_sums(sp.Sum(sp.KroneckerDelta(i, j), (i, 1, N), (j, 1, N)))
    N
    >>> sp.factor(eval_index_sums(sp.Sum(1 - sp.KroneckerDelta(i, j), (i, 1, N), (j, 1, N))))
    N*(N - 1)
    """
    rng = dict(ranges or {})

    def ev(e, rng):
        if isinstance(e, sp.Sum):
            lims = list(e.limits)
            inner = dict(rng)
            inner.update({x: (a, b) for x, a, b in lims})
            f = _delta_powers(ev(e.function, inner))
            for pos, (x, a, b) in enumerate(lims):
                outer = dict(rng)
                outer.update({y: (a2, b2) for y, a2, b2 in lims[pos + 1:]})
                f = resolve_ranges(sp.Sum(f, (x, a, b)).doit(deep=False), outer)
                f = resolve_ranges(f, outer)
            return f
        if isinstance(e, sp.Basic) and e.args and not isinstance(e, (sp.Indexed, sp.MatrixSymbol)):
            return e.func(*[ev(a, rng) for a in e.args])
        return e

    return ev(sp.sympify(expr), rng)


def pull_constants(expr: Any) -> Any:
    """Move the factors of a summand that do not depend on the summation index out of the sum
    (``Σ_t c·f_t = c·Σ_t f_t``, sums with several limits nested first), bottom-up.

    >>> T = sp.Symbol("T", integer=True, positive=True); t = sp.Symbol("t", integer=True)
    >>> c, v = sp.Symbol("c"), sp.IndexedBase("v")
    >>> pull_constants(sp.Sum(c * v[t] / 2, (t, 1, T)))
    c*Sum(v[t], (t, 1, T))/2
    """
    def pull(s):
        f = s.function
        for x, a, b in s.limits:
            f = _pull_one(f, x, a, b)
        return f

    return sp.sympify(expr).replace(lambda e: isinstance(e, sp.Sum), pull)


def _pull_one(f, x, a, b):
    f = sp.expand(f)
    if f.is_Add:
        return sp.Add(*[_pull_one(t, x, a, b) for t in f.args])
    outside, inside = [], []
    for factor in sp.Mul.make_args(f):
        (inside if factor.has(x) else outside).append(factor)
    body = sp.Mul(*inside)
    if body == 1:
        return sp.Mul(*outside) * (b - a + 1)
    return sp.Mul(*outside) * sp.Sum(body, (x, a, b))


def canonical_dummies(expr: Any) -> Any:
    """Rename every sum's bound index to ``iota_<depth>`` (α-renaming), so that equal sums written
    with different index names compare equal: ``Σ_t e^{l_t} / Σ_τ e^{l_τ}`` becomes 1.

    >>> T = sp.Symbol("T", integer=True, positive=True); t, tau = sp.symbols("t tau", integer=True)
    >>> l = sp.IndexedBase("l")
    >>> canonical_dummies(sp.Sum(sp.exp(l[t]), (t, 1, T)) / sp.Sum(sp.exp(l[tau]), (tau, 1, T)))
    1
    """
    def walk(e, depth):
        if isinstance(e, sp.Sum):
            f, lims = e.function, []
            for x, a, b in e.limits:
                depth += 1
                k = sp.Symbol(f"iota_{depth}", integer=True)
                f = f.xreplace({x: k})
                lims.append((k, a, b))
            return sp.Sum(walk(f, depth), *lims)
        if isinstance(e, sp.Basic) and e.args and not isinstance(e, (sp.Indexed, sp.MatrixSymbol)):
            return e.func(*[walk(a, depth) for a in e.args])
        return e

    return walk(sp.sympify(expr), 0)


def instantiate(expr: Any, sizes: Mapping[sp.Symbol, int], values: Mapping[str, Any] | None = None) -> Any:
    """Put numbers in for the size symbols of ``expr``; then, by name, explicit matrices in for
    matrix symbols (``values``: ``{"Lambda": matrix}``), and evaluate. A matrix expression comes
    back explicit (``ImmutableMatrix``; entries ``Lambda[0, 1]`` for symbols without a value).

    >>> d = sp.Symbol("d", integer=True, positive=True)
    >>> L = sp.MatrixSymbol("Lambda", d, d)
    >>> instantiate(sp.Trace(L) * sp.Identity(d), {d: 2})
    Matrix([
    [Lambda[0, 0] + Lambda[1, 1],                           0],
    [                          0, Lambda[0, 0] + Lambda[1, 1]]])
    >>> instantiate(sp.Trace(L), {d: 2}, {"Lambda": sp.Matrix([[1, 2], [2, 5]])})
    6
    """
    e = sp.sympify(expr).xreplace({sp.sympify(k): sp.Integer(v) for k, v in sizes.items()})
    if values:
        rep = {}
        for m in e.atoms(sp.MatrixSymbol):
            if m.name in values:
                v = sp.ImmutableMatrix(values[m.name])
                if v.shape != m.shape:
                    raise ValueError(f"{m.name}: value of shape {v.shape}, symbol of shape {m.shape}")
                rep[m] = v
        e = e.xreplace(rep)
    e = e.replace(lambda t: isinstance(t, sp.Trace) and sp.sympify(t.arg.shape[0]).is_Integer,
                  lambda t: _explicit(t.arg).trace())
    if isinstance(e, sp.MatrixExpr):
        return _explicit(e).applyfunc(sp.expand)
    e = e.doit()
    if isinstance(e, sp.MatrixBase):
        return e.applyfunc(sp.expand)
    return sp.expand(e)


def _explicit(m):
    """An explicit-shape matrix expression as an ``ImmutableMatrix`` (products of explicit matrices
    multiplied as matrices, not entry by entry through index sums)."""
    v = m.doit()
    if isinstance(v, sp.MatrixBase):
        return sp.ImmutableMatrix(v)
    if isinstance(v, (sp.MatMul, sp.MatAdd)):
        coeff, parts = (v.as_coeff_mmul() if isinstance(v, sp.MatMul) else (1, None))
        if isinstance(v, sp.MatAdd):
            out = _explicit(v.args[0])
            for a in v.args[1:]:
                out = out + _explicit(a)
            return sp.ImmutableMatrix(out)
        factors = parts.args if isinstance(parts, sp.MatMul) else (parts,)
        out = _explicit(factors[0])
        for f in factors[1:]:
            out = out * _explicit(f)
        return sp.ImmutableMatrix(coeff * out)
    if isinstance(v, sp.MatPow) and sp.sympify(v.exp).is_Integer and v.exp >= 0:
        base = _explicit(v.base)
        return sp.ImmutableMatrix(base ** int(v.exp))
    return sp.ImmutableMatrix(v.as_explicit())


def rank_bound(expr: Any) -> Any:
    """An upper bound on the rank of a matrix expression read off its shapes: ``min(rows, cols)``
    of a symbol, the smallest dimension along a product ``P₁P₂⋯`` (every factor's column count:
    the product factors through each), the sum of the bounds of a sum (subadditivity, capped by
    the shape); scalars and transposes do not change it. Premises (typed in): ``rank(PQ) ≤
    min(rank P, rank Q)``, ``rank(P + Q) ≤ rank P + rank Q``, ``rank P ≤ min(rows, cols)``.

    >>> m, n, r = sp.symbols("m n r", integer=True, positive=True)
    >>> B, A = sp.MatrixSymbol("B", m, r), sp.MatrixSymbol("A", r, n)
    >>> rank_bound(B * A)
    Min(m, n, r)
    """
    if isinstance(expr, sp.MatMul):
        coeff, mats = expr.as_coeff_matrices()
        if not mats:
            return sp.Integer(0)
        if len(mats) == 1:
            return rank_bound(mats[0])
        return sp.Min(mats[0].rows, *[m.cols for m in mats])
    if isinstance(expr, sp.MatAdd):
        return sp.Min(expr.rows, expr.cols, sp.Add(*[rank_bound(a) for a in expr.args]))
    if isinstance(expr, (sp.Transpose, sp.Adjoint)):
        return rank_bound(expr.arg)
    if isinstance(expr, sp.ZeroMatrix):
        return sp.Integer(0)
    return sp.Min(expr.rows, expr.cols)


# ------------------------------------------------------------------------------------------------
# softmax for symbolic T

def _softmax_symbols():
    T = sp.Symbol("T", integer=True, positive=True)
    t, s, tau = sp.symbols("t s tau", integer=True)
    l = sp.IndexedBase("l", real=True)
    S = sp.IndexedBase("S", positive=True)
    Zs = sp.Symbol("Z", positive=True)
    Z = sp.Sum(sp.exp(l[tau]), (tau, 1, T))
    return T, t, s, tau, l, S, Z, Zs


def _to_softmax(expr, l, S, Z, Zs):
    """Write ``Σ_τ e^{l_τ}`` as ``Z`` and every ``e^{l_x}`` as ``S_x·Z`` (the definition read backwards)."""
    e = canonical_dummies(expr).xreplace({canonical_dummies(Z): Zs})
    e = e.replace(lambda a: isinstance(a, sp.exp) and isinstance(a.args[0], sp.Indexed) and a.args[0].base == l,
                  lambda a: S[a.args[0].indices[0]] * Zs)
    return e


@lru_cache(maxsize=None)
def derive_softmax_sum() -> Derivation:
    """``Σ_{t=1}^{T} S_t = 1`` for symbolic ``T``, with ``S_t = e^{l_t} / Σ_{τ=1}^{T} e^{l_τ}``.

    Steps: the definition (typed in); pull the ``t``-free normaliser out of the sum
    (:func:`pull_constants`); rename bound indices (:func:`canonical_dummies`): numerator and
    denominator are the same sum and cancel. ``result`` is that ``1``; ``facts``: ``T``, ``sum``
    (the unevaluated ``Σ_t S_t``).

    >>> D = derive_softmax_sum()
    >>> D.result, D.provenance
    (1, {'result': 'derived'})
    """
    T, t, s, tau, l, S, Z, Zs = _softmax_symbols()
    b = DerivationBuilder("Softmax outputs sum to one, symbolic T")
    b.symbols(T="number of tokens (symbolic)", l_t="logit of token t", S_t="softmax output t")
    St = b.define("S_t = e^{l_t} / Σ_{τ=1}^{T} e^{l_τ}", sp.exp(l[t]) / Z)
    total = sp.Sum(St, (t, 1, T))
    b.step("Σ_{t=1}^{T} S_t", total)
    pulled = b.step("The normaliser does not depend on t: pull it out", pull_constants(total))
    one = b.step("Rename bound indices: numerator and denominator are the same sum", canonical_dummies(pulled))
    b.obligation("sums_to_one", one - 1, description="Σ_t S_t = 1 for every T")
    b.fact("T", T)
    b.fact("sum", total)
    return b.done(one)


@lru_cache(maxsize=None)
def derive_softmax_jacobian() -> Derivation:
    """``∂S_t/∂l_s = S_t (δ_ts − S_s)`` for symbolic ``T`` and indices ``t, s ∈ [1, T]``.

    Steps: the definition (typed in); ``sp.diff`` of ``e^{l_t} / Σ_τ e^{l_τ}`` by ``l_s`` (SymPy
    differentiates the ``Indexed`` inside the ``Sum`` into ``Σ_τ δ_sτ e^{l_τ}``); evaluate the
    delta sum with ``s ∈ [1, T]`` (:func:`eval_index_sums`, which decides the ``1 ≤ s ≤ T``
    condition); write ``e^{l_x} = S_x Z`` and ``Σ_τ e^{l_τ} = Z`` (the definition read
    backwards): ``Z`` cancels. ``result``: the Jacobian entry in ``S``; facts ``S`` (the
    ``IndexedBase``), ``t``, ``s``, ``T``, ``raw`` (SymPy's derivative).

    >>> D = derive_softmax_jacobian()
    >>> D.result
    (KroneckerDelta(s, t) - S[s])*S[t]
    >>> all(r.passed for r in D.check_obligations())
    True
    """
    T, t, s, tau, l, S, Z, Zs = _softmax_symbols()
    b = DerivationBuilder("Softmax Jacobian, symbolic T")
    b.symbols(T="number of tokens (symbolic)", l_t="logit of token t", S_t="softmax output t",
              Z="normaliser Σ_τ e^{l_τ}")
    St = b.define("S_t = e^{l_t} / Σ_{τ=1}^{T} e^{l_τ}", sp.exp(l[t]) / Z)
    raw = b.step("Differentiate by l_s (SymPy: the derivative of l_τ by l_s is δ_sτ)", sp.diff(St, l[s]))
    ranges = {t: (1, T), s: (1, T)}
    ev = b.step("Evaluate Σ_τ δ_sτ e^{l_τ} = e^{l_s} for s ∈ [1, T]", eval_index_sums(raw, ranges))
    inS = b.step("Write Σ_τ e^{l_τ} = Z and e^{l_x} = S_x Z", _to_softmax(ev, l, S, Z, Zs))
    J = b.step("Z cancels; factor", sp.factor(sp.expand(inS)))
    b.obligation("jacobian_is_S_t(delta-S_s)", sp.expand(J - S[t] * (sp.KroneckerDelta(t, s) - S[s])),
                 description="∂S_t/∂l_s = S_t(δ_ts − S_s)")
    back = {S[t]: sp.exp(l[t]) / Z, S[s]: sp.exp(l[s]) / Z}
    b.obligation("agrees_with_derivative", sp.simplify(canonical_dummies(J.xreplace(back) - ev)),
                 description="the S-form with S_x = e^{l_x}/Z put back equals the evaluated derivative")
    for k, v in (("S", S), ("t", t), ("s", s), ("T", T), ("raw", raw)):
        b.fact(k, v)
    return b.done(J)


@lru_cache(maxsize=None)
def derive_convex_combination() -> Derivation:
    """The attention output ``o = Σ_{t=1}^{T} S_t v_t`` is a convex combination, symbolic ``T``:
    weights positive, summing to one (inherited from :func:`derive_softmax_sum`), shifting every
    value by ``c`` shifts ``o`` by ``c``, and ``∂o/∂l_s = S_s (v_s − o)``.

    Typed in: the definitions of ``S_t`` and ``o``. Derived: positivity (SymPy's assumptions: ``l``
    real, so ``e^{l}`` and the sum of them are positive); the shift by :func:`pull_constants` and
    the sum identity; the derivative by ``sp.diff``, :func:`eval_index_sums` (``s ∈ [1, T]``),
    :func:`pull_constants` and rewriting in ``S``. ``result``: ``∂o/∂l_s``; facts ``o`` (in
    ``S``), ``shift`` (``o(v + c) − o(v) − c``, 0), ``weight``.

    >>> D = derive_convex_combination()
    >>> D.result
    S[s]*v[s] - S[s]*Sum(S[iota_1]*v[iota_1], (iota_1, 1, T))
    >>> D.facts["shift"]
    0
    """
    T, t, s, tau, l, S, Z, Zs = _softmax_symbols()
    v = sp.IndexedBase("v", real=True)
    c = sp.Symbol("c", real=True)
    b = DerivationBuilder("Attention output is a convex combination, symbolic T")
    b.symbols(T="number of tokens (symbolic)", l_t="logit of token t", S_t="softmax weight of token t",
              v_t="value of token t (a scalar coordinate)", o="attention output Σ_t S_t v_t", c="a shift")
    b.inherit(derive_softmax_sum(), "softmax_sum")
    St = b.define("S_t = e^{l_t} / Σ_{τ=1}^{T} e^{l_τ}", sp.exp(l[t]) / Z)
    o = b.define("o = Σ_{t=1}^{T} S_t v_t", sp.Sum(St * v[t], (t, 1, T)))
    weight = b.step("The weight S_t (positive by SymPy's assumptions)", St)
    b.obligation("weights_positive", weight, "positive", description="S_t > 0")
    shifted = sp.Sum(St * (v[t] + c), (t, 1, T))
    split = b.step("o(v + c·1): split the sum and pull out the constants", pull_constants(shifted))
    shift = b.step("Rename bound indices (the weights' sum Σ_t S_t = 1 cancels): o(v + c·1) − o(v) − c =",
                   sp.expand(canonical_dummies(split - pull_constants(o) - c)))
    b.obligation("shift_equivariance", shift, description="o(v + c·1) = o(v) + c")
    raw = b.step("Differentiate o by l_s", sp.diff(o, l[s]))
    ev = b.step("Evaluate the delta sums for s ∈ [1, T]; pull out constants", pull_constants(eval_index_sums(raw, {s: (1, T)})))
    dO = b.step("Write e^{l_x} = S_x Z; pull Z out of the sum: Z cancels",
                sp.expand(pull_constants(_to_softmax(ev, l, S, Z, Zs))))
    oS = canonical_dummies(sp.Sum(S[t] * v[t], (t, 1, T)))
    b.obligation("derivative_is_S_s(v_s-o)", sp.expand(dO - S[s] * (v[s] - oS)), description="∂o/∂l_s = S_s(v_s − o)")
    b.record(o=oS, shift=shift, weight=weight)
    return b.done(dO)


# ------------------------------------------------------------------------------------------------
# matrix identities at symbolic shapes


def _canon(expr):
    """Expand a matrix expression and let SymPy collect it (``ZeroMatrix`` when it vanishes)."""
    return sp.expand(expr.doit()).doit()


@lru_cache(maxsize=None)
def derive_multihead_concat(heads: int = 3) -> Derivation:
    """Multi-head concatenation: ``[A₁ … A_H] W_O = Σ_h A_h W_O^{(h)}`` where ``W_O`` is split into
    row blocks ``W_O^{(h)}``, for ``heads`` heads of symbolic widths ``k_h`` (``A_h`` is ``n × k_h``,
    ``W_O^{(h)}`` is ``k_h × m``, ``n, m, k_h`` symbols).

    Typed in: the block definitions. Derived: ``block_collapse`` of the block product. The number
    of heads is a Python integer (a ``BlockMatrix`` has a fixed number of blocks); the widths are
    symbolic. ``result``: the collapsed product; facts ``A``, ``W`` (tuples of the blocks),
    ``sizes`` (``n, m, k_1..k_H``), ``concat``, ``W_O``.

    >>> D = derive_multihead_concat(2)
    >>> D.result
    A_1*W_1 + A_2*W_2
    >>> D.facts["concat"].shape
    (n, k_1 + k_2)
    """
    n, m = sp.symbols("n m", integer=True, positive=True)
    ks = sp.symbols(f"k_1:{heads + 1}", integer=True, positive=True)
    A = tuple(sp.MatrixSymbol(f"A_{h + 1}", n, ks[h]) for h in range(heads))
    W = tuple(sp.MatrixSymbol(f"W_{h + 1}", ks[h], m) for h in range(heads))
    b = DerivationBuilder(f"Multi-head concatenation times W_O, {heads} heads of symbolic widths")
    b.symbols(n="rows (tokens)", m="output width", k_h="width of head h", A_h="output of head h (n × k_h)",
              W_h="row block h of W_O (k_h × m)")
    cat = b.define("[A_1 … A_H] (widths k_1 + … + k_H)", sp.BlockMatrix([list(A)]))
    WO = b.define("W_O split into row blocks W_O^{(h)}", sp.BlockMatrix([[w] for w in W]))
    prod = b.step("block_collapse([A_1 … A_H] · W_O)", sp.block_collapse(cat * WO))
    target = sp.MatAdd(*[a * w for a, w in zip(A, W)])
    b.obligation("concat_equals_sum_of_heads", _canon(prod - target), description="[A_1 … A_H] W_O = Σ_h A_h W_O^{(h)}")
    b.obligation("shapes", sp.Matrix([prod.rows - n, prod.cols - m]), description="the product is n × m")
    for k, val in (("A", A), ("W", W), ("sizes", (n, m) + tuple(ks)), ("concat", cat), ("W_O", WO)):
        b.fact(k, val)
    return b.done(prod)


@lru_cache(maxsize=None)
def derive_lora_rank_bound() -> Derivation:
    """LoRA: the update ``ΔW = B A`` with ``B`` ``m × r`` and ``A`` ``r × n`` has rank at most
    ``r``, read off the shapes (:func:`rank_bound`); the adapted ``W₀ + BA`` has rank at most
    ``rank W₀ + r``.

    Typed in: the rank premises of :func:`rank_bound` and ``Min(a, b, c) − r = Min(a − r, b − r,
    c − r)``. Derived: the bound ``Min(m, n, r)``, that it is at most ``r`` (``Min(…, 0) ≤ 0``),
    and the index form ``(BA)_ij = Σ_{k<r} B_ik A_kj`` (a sum of ``r`` rank-one outer products).
    ``result``: the bound; facts ``B``, ``A``, ``sizes``, ``entry``, ``adapted_bound``.

    >>> D = derive_lora_rank_bound()
    >>> D.result
    Min(m, n, r)
    >>> e = D.facts["entry"]; type(e).__name__, e.limits[0][1:]
    ('Sum', (0, r - 1))
    """
    m, n, r = sp.symbols("m n r", integer=True, positive=True)
    B, A = sp.MatrixSymbol("B", m, r), sp.MatrixSymbol("A", r, n)
    W0 = sp.MatrixSymbol("W_0", m, n)
    i, j = sp.symbols("i j", integer=True)
    b = DerivationBuilder("LoRA update rank ≤ r, from the shapes")
    b.symbols(m="output dimension", n="input dimension", r="LoRA rank", B="m × r factor", A="r × n factor",
              W_0="frozen weight (m × n)")
    b.assume("rank(PQ) ≤ min(rank P, rank Q); rank(P + Q) ≤ rank P + rank Q; rank P ≤ min(rows, cols)", key="rank inequalities", clauses=("rank_le_r",))
    entry = b.step("(BA)_ij = Σ_{k=0}^{r−1} B_ik A_kj: a sum of r outer products B_{:,k} A_{k,:}", (B * A)[i, j])
    bound = b.step("Rank bound of BA from its shapes", rank_bound(B * A))
    gap = b.step("Min(m, n, r) − r = Min(m − r, n − r, 0)", sp.Min(*[a - r for a in bound.args]))
    b.obligation("bound_at_most_r", -gap, "nonnegative", description="rank(BA) ≤ r")
    adapted = b.step("Rank bound of W_0 + BA", rank_bound(W0 + B * A))
    for k, val in (("B", B), ("A", A), ("sizes", (m, n, r)), ("entry", entry), ("adapted_bound", adapted)):
        b.fact(k, val)
    return b.done(bound)


@lru_cache(maxsize=None)
def derive_gd_step() -> Derivation:
    """One gradient-descent step on in-context least squares (von Oswald et al. 2023): for
    ``L(w) = (1/2N) Σ_{i} (w x_i − y_i)²`` with ``w`` ``1 × d``, ``X = [x_1 … x_N]`` ``d × N``,
    ``y`` ``1 × N``, the step is ``Δw = −η ∇L = −(η/N) Σ_i (w x_i − y_i) x_iᵀ = −(η/N)(wX − y)Xᵀ``.

    Typed in: the loss in index form and ``Δw = −η ∇L``. Derived, twice: (1) ``sp.diff`` of the
    index form by ``w_{0j}`` (delta sums evaluated, :func:`eval_index_sums`), turned into a matrix
    by ``MatrixExpr.from_index_summation``; (2) matrix calculus ``sp.diff`` of
    ``(wX − y)(wX − y)ᵀ/(2N)`` by ``w``. ``result``: ``Δw`` from route (1); facts ``w``, ``X``,
    ``y``, ``eta``, ``sizes``, ``matrix_route``, ``target``.

    >>> D = derive_gd_step()
    >>> D.facts["target"]
    (-eta/N)*(w*X - y)*X.T
    >>> all(r.passed for r in D.check_obligations())
    True
    """
    d, N = sp.symbols("d N", integer=True, positive=True)
    eta = sp.Symbol("eta", positive=True)
    w, X, y = sp.MatrixSymbol("w", 1, d), sp.MatrixSymbol("X", d, N), sp.MatrixSymbol("y", 1, N)
    i, j, k = sp.symbols("i j k", integer=True)
    b = DerivationBuilder("GD step on in-context least squares as a matrix expression")
    b.symbols(d="input dimension", N="number of in-context examples", w="weights (1 × d)", X="inputs as columns (d × N)",
              y="targets (1 × N)", eta="learning rate")
    loss = b.define("L(w) = (1/2N) Σ_i (Σ_k w_k X_ki − y_i)²",
                    sp.Sum((sp.Sum(w[0, k] * X[k, i], (k, 0, d - 1)) - y[0, i]) ** 2, (i, 0, N - 1)) / (2 * N))
    g = b.step("∂L/∂w_j (SymPy: ∂w_k/∂w_j = δ_jk)", sp.diff(loss, w[0, j]))
    g = b.step("Evaluate the delta sum for j ∈ [0, d − 1]", eval_index_sums(g, {j: (0, d - 1)}))
    b.assume("Δw = −η ∇L (the gradient-descent step, a definition)", role="definition")
    dw_j = -eta * g
    body = sp.expand(pull_constants(sp.expand(N * dw_j / eta)))  # the index sums without the factor η/N
    col = b.step("from_index_summation of N·Δw_j/η (a column indexed by j)",
                 sp.MatrixExpr.from_index_summation(body, first_index=j))
    mat = col.args[0] if isinstance(col, MatrixElement) else col
    dw = b.step("Δw = (η/N)·(that column)ᵀ", (eta / N * mat.T).doit())
    target = (-eta / N) * (w * X - y) * X.T
    b.obligation("index_route_equals_target", _canon(dw - target), description="Δw = −(η/N)(wX − y)Xᵀ")
    mloss = (w * X - y) * (w * X - y).T / (2 * N)
    grad = b.step("Matrix calculus: ∂/∂w of (wX − y)(wX − y)ᵀ/(2N)", sp.diff(mloss, w))
    mroute = b.step("Δw = −η·(gradient)ᵀ (SymPy returns the gradient as a column)", (-eta * grad.T).doit())
    b.obligation("matrix_route_equals_target", _canon(mroute - target), description="both routes give −(η/N)(wX − y)Xᵀ")
    for kk, val in (("w", w), ("X", X), ("y", y), ("eta", eta), ("sizes", (d, N)), ("matrix_route", mroute),
                    ("target", target), ("loss", loss)):
        b.fact(kk, val)
    return b.done(dw)
