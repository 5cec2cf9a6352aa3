"""Gaussian moments at symbolic dimension by Isserlis' (Wick's) theorem, and the ZFB loss.

For ``x ~ N(0, Λ)`` in ``R^d`` with ``d`` a SymPy symbol and ``Λ`` a ``MatrixSymbol`` (symmetric:
a premise, applied as ``Λᵀ = Λ``), a moment is computed in index form and then read as a matrix:

1. write the quantity as an index sum, e.g. ``(x xᵀ A x xᵀ)_ab = Σ_{p,q} A_pq x_a x_p x_q x_b``;
2. Isserlis: ``E[x_a x_p x_q x_b]`` is the sum over the 3 pairings of products of covariances
   (:func:`pairings`, :func:`isserlis`);
3. each pairing term, summed over the contracted indices, is turned into a matrix expression by
   ``MatrixExpr.from_index_summation`` (traces appear where an index loop closes);
4. :func:`tidy` applies ``Λᵀ = Λ``, expands, rotates traces to one representative and collects.

Nothing is typed in beyond the definitions, Isserlis' theorem and the premises each docstring
names. The ZFB functions (Zhang, Frei, Bartlett, JMLR 2024) build the population loss of the
linear self-attention predictor from these moments (see :func:`derive_zfb_loss`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder
from theory.sizes import eval_index_sums

__all__ = [
    "pairings",
    "isserlis",
    "index_expectation",
    "tidy",
    "second_moment",
    "fourth_moment_sandwich",
    "quadratic_forms_moment",
    "wishart_sandwich",
    "derive_wishart_sandwich",
    "zfb_gamma",
    "zfb_moments",
    "zfb_population_loss",
    "zfb_loss_gradient",
    "derive_zfb_loss",
    "wishart_steps",
    "zfb_loss_steps",
    "commuting_trace_image",
]


# ------------------------------------------------------------------------------------------------
# Isserlis in index form


def pairings(items: Sequence[Any]) -> list[tuple[tuple[Any, Any], ...]]:
    """All perfect pairings of ``items`` (``(k − 1)!!`` of them for ``k`` items; none for odd ``k``).

    >>> pairings("abcd")
    [(('a', 'b'), ('c', 'd')), (('a', 'c'), ('b', 'd')), (('a', 'd'), ('b', 'c'))]
    >>> len(pairings(range(6))), pairings("abc")
    (15, [])
    """
    items = tuple(items)
    if len(items) % 2:
        return []
    if not items:
        return [()]
    first, rest = items[0], items[1:]
    return [((first, other),) + p for k, other in enumerate(rest) for p in pairings(rest[:k] + rest[k + 1:])]


def isserlis(variables: Sequence[Any], cov: Callable[[Any, Any], Any]) -> list[Any]:
    """The Isserlis terms of ``E[z_{v₁} ⋯ z_{v_k}]`` for a centred Gaussian: one product
    ``Π cov(u, v)`` per pairing (their sum is the moment). ``variables`` are labels (index symbols,
    or tuples such as ``(sample, index)``) and ``cov(u, v)`` their covariance.

    >>> d = sp.Symbol("d", integer=True, positive=True); L = sp.MatrixSymbol("Lambda", d, d)
    >>> a, b, p, q = sp.symbols("a b p q", integer=True)
    >>> isserlis((a, p, q, b), lambda u, v: L[u, v])
    [Lambda[a, p]*Lambda[q, b], Lambda[a, q]*Lambda[p, b], Lambda[a, b]*Lambda[p, q]]
    """
    return [sp.Mul(*[cov(u, v) for u, v in P]) for P in pairings(variables)]


def index_expectation(coefficient: Any, variables: Sequence[Any], cov: Callable[[Any, Any], Any],
                      limits: Iterable[tuple] = (), first_index: Any = None, last_index: Any = None,
                      symmetric: Iterable[sp.MatrixSymbol] = ()) -> Any:
    """Matrix form of ``Σ_{limits} coefficient · E[Π_v z_v]``: the Isserlis expansion, each pairing
    term summed over ``limits`` and converted by ``MatrixExpr.from_index_summation``
    (``first_index``/``last_index``: the free row/column index, none for a scalar), then
    :func:`tidy` with the ``symmetric`` matrices.

    >>> d = sp.Symbol("d", integer=True, positive=True); L = sp.MatrixSymbol("Lambda", d, d)
    >>> a, b = sp.symbols("a b", integer=True)
    >>> index_expectation(1, (a, b), lambda u, v: L[u, v], first_index=a, last_index=b)
    Lambda
    """
    limits = tuple(limits)
    out = []
    for term in isserlis(variables, cov):
        summand = coefficient * term
        e = sp.Sum(summand, *limits) if limits else summand
        out.append(sp.MatrixExpr.from_index_summation(e, first_index=first_index, last_index=last_index))
    mats = [o for o in out if isinstance(o, sp.MatrixExpr)]
    total = sp.MatAdd(*out) if mats else sp.Add(*out)
    return tidy(total, symmetric)


def _canon_trace(tr: sp.Trace, symmetric) -> Any:
    """``Trace`` of an expanded argument, as a sum of traces of products, each rotated (cyclicity)
    or transposed-and-reversed (``tr Mᵀ = tr M``) to the representative with the smallest string."""
    arg = _sym(sp.expand(tr.arg.doit()), symmetric)
    if isinstance(arg, sp.MatAdd):
        return sp.Add(*[_canon_trace(sp.Trace(t), symmetric) for t in arg.args])
    if isinstance(arg, sp.ZeroMatrix):
        return sp.Integer(0)
    coeff, mats = arg.as_coeff_mmul()
    factors = list(mats.args) if isinstance(mats, sp.MatMul) else [mats]
    if len(factors) == 1 and isinstance(factors[0], sp.Identity):
        return coeff * factors[0].rows
    back = [_sym(sp.Transpose(f).doit(), symmetric) for f in reversed(factors)]
    cands = [seq[k:] + seq[:k] for seq in (factors, back) for k in range(len(seq))]
    best = min((sp.MatMul(*c).doit() for c in cands), key=str)
    return coeff * sp.Trace(best)


def _sym(e, symmetric):
    return e.xreplace({S.T: S for S in symmetric}) if symmetric else e


def tidy(expr: Any, symmetric: Iterable[sp.MatrixSymbol] = ()) -> Any:
    """A canonical form of a matrix or scalar expression with traces: transposes pushed to the
    symbols (``.doit()``), ``Sᵀ → S`` for each ``symmetric`` ``S``, expanded, each ``Trace``
    split over sums and rotated to one representative, like terms collected with their scalar
    coefficients cancelled. A vanishing matrix expression becomes ``ZeroMatrix``.

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> L, A = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("A", d, d)
    >>> tidy(sp.Trace(A * L.T) - sp.Trace(L * A), [L])
    0
    >>> tidy((L * (A + A.T) * L).T - L * A * L - L * A.T * L, [L])
    0
    """
    symmetric = tuple(symmetric)
    e = sp.sympify(expr).doit()
    e = _sym(e, symmetric)
    e = sp.expand(e)
    e = e.replace(lambda t: isinstance(t, sp.Trace), lambda t: _canon_trace(t, symmetric))
    e = sp.expand(_sym(e.doit(), symmetric))
    if not isinstance(e, sp.MatrixExpr):
        return sp.expand(sp.cancel(e)) if not e.has(sp.Trace) else _collect_scalar(e)
    terms = e.args if isinstance(e, sp.MatAdd) else (e,)
    groups: dict[Any, Any] = {}
    for t in terms:
        c, m = t.as_coeff_mmul()
        m = _sym(m.doit(), symmetric)
        groups[m] = groups.get(m, 0) + c
    parts = []
    for m, c in groups.items():
        c = sp.expand(sp.cancel(c))
        if c != 0 and not isinstance(m, sp.ZeroMatrix):
            parts.append(c * m)
    if not parts:
        return sp.ZeroMatrix(*expr.shape)
    return sp.MatAdd(*parts).doit() if len(parts) > 1 else parts[0]


def _collect_scalar(e):
    """Collect a scalar sum over its monomials in the traces, cancelling the coefficients."""
    traces = sorted(e.atoms(sp.Trace), key=str)
    syms = [sp.Dummy(f"tr{k}") for k in range(len(traces))]
    poly = sp.expand(sp.cancel(e.xreplace(dict(zip(traces, syms)))))
    return poly.xreplace(dict(zip(syms, traces)))


# ------------------------------------------------------------------------------------------------
# moments of x ~ N(0, Λ)


def _idx(*names: str):
    return sp.symbols(" ".join(names), integer=True)


def _d(Lam):
    return Lam.shape[0]


def _placeholders(*mats):
    """Stand-in ``MatrixSymbol``s for arguments that are not symbols (``Identity(d)``, a product):
    the index form is built with the stand-ins and the arguments are put back afterwards."""
    subs, out = {}, []
    for k, m in enumerate(mats):
        if isinstance(m, sp.MatrixSymbol):
            out.append(m)
        else:
            ph = sp.MatrixSymbol(f"_M{k}", *m.shape)
            subs[ph] = m
            out.append(ph)
    return out, subs


def _put_back(e, subs, symmetric):
    return tidy(e.xreplace(subs), symmetric) if subs else e


@lru_cache(maxsize=256)
def second_moment(Lam: sp.MatrixSymbol) -> Any:
    """``E[x xᵀ] = Λ`` for ``x ~ N(0, Λ)``: the single Isserlis pairing of ``E[x_a x_b]``, read
    as a matrix.

    >>> d = sp.Symbol("d", integer=True, positive=True)
    >>> second_moment(sp.MatrixSymbol("Lambda", d, d))
    Lambda
    """
    (C,), subs = _placeholders(Lam)
    a, b = _idx("a", "b")
    return _put_back(index_expectation(1, (a, b), lambda u, v: C[u, v], (), a, b, [C]), subs, [Lam])


@lru_cache(maxsize=256)
def fourth_moment_sandwich(Lam: sp.MatrixSymbol, A: Any) -> Any:
    """``E[x xᵀ A x xᵀ] = ΛAΛ + ΛAᵀΛ + tr(AΛ)Λ`` (i.e. ``Λ(A + Aᵀ)Λ + tr(AΛ)Λ``) for
    ``x ~ N(0, Λ)``, ``A`` any ``d × d`` matrix expression.

    Derived: entry ``(a, b)`` is ``Σ_{p,q} A_pq E[x_a x_p x_q x_b]``; Isserlis gives three
    pairings, each read as a matrix by ``from_index_summation``. Premise: ``Λᵀ = Λ``.

    >>> d = sp.Symbol("d", integer=True, positive=True)
    >>> L, A = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("A", d, d)
    >>> fourth_moment_sandwich(L, A)
    Trace(A*Lambda)*Lambda + Lambda*A*Lambda + Lambda*A.T*Lambda
    """
    d = _d(Lam)
    (C, M), subs = _placeholders(Lam, A)
    a, b, p, q = _idx("a", "b", "p", "q")
    e = index_expectation(M[p, q], (a, p, q, b), lambda u, v: C[u, v], ((p, 0, d - 1), (q, 0, d - 1)), a, b, [C])
    return _put_back(e, subs, [Lam])


@lru_cache(maxsize=256)
def quadratic_forms_moment(Lam: sp.MatrixSymbol, A: Any, B: Any) -> Any:
    """``E[(xᵀAx)(xᵀBx)] = tr(AΛ)tr(BΛ) + tr(AΛBΛ) + tr(AΛBᵀΛ)`` for ``x ~ N(0, Λ)`` (traces
    shown in the representative :func:`tidy` picks).

    Derived: ``Σ_{a,b,c,e} A_ab B_ce E[x_a x_b x_c x_e]``, three Isserlis pairings, each a full
    contraction that ``from_index_summation`` reads as a trace or a product of traces. Premise:
    ``Λᵀ = Λ``.

    >>> d = sp.Symbol("d", integer=True, positive=True)
    >>> L, A, B = (sp.MatrixSymbol(n, d, d) for n in ("Lambda", "A", "B"))
    >>> quadratic_forms_moment(L, A, B)
    Trace(A*Lambda)*Trace(B*Lambda) + Trace(A*Lambda*B*Lambda) + Trace(A*Lambda*B.T*Lambda)
    """
    d = _d(Lam)
    (C, M, K), subs = _placeholders(Lam, A, B)
    a, b, c, e = _idx("a", "b", "c", "e")
    lims = tuple((k, 0, d - 1) for k in (a, b, c, e))
    out = index_expectation(M[a, b] * K[c, e], (a, b, c, e), lambda u, v: C[u, v], lims, None, None, [C])
    return _put_back(out, subs, [Lam])


def _wishart(Lam, A, N, b: DerivationBuilder | None = None):
    step = b.step if b else (lambda text, e, **k: e)
    assume = b.assume if b else (lambda text, e=None, **k: e)
    d = _d(Lam)
    a, c, p, q = _idx("a", "c", "p", "q")
    i, j = _idx("i", "j")
    assume("Λ̂ = (1/N) Σ_{i=1}^{N} x_i x_iᵀ, x_i ~ N(0, Λ) i.i.d.: (Λ̂AΛ̂)_ac = (1/N²) Σ_{i,j} Σ_{p,q} A_pq "
           "x_ia x_ip x_jq x_jc, and Cov(x_iu, x_jv) = δ_ij Λ_uv", key="Wishart index sums")
    cov = lambda u, v: sp.KroneckerDelta(u[0], v[0]) * Lam[u[1], v[1]]  # noqa: E731
    terms = step("Isserlis for E[x_ia x_ip x_jq x_jc] (δ_ii = 1 already applied by SymPy)",
                 sp.Add(*isserlis(((i, a), (i, p), (j, q), (j, c)), cov)))
    dlt = sp.KroneckerDelta(i, j)
    assume("Split each (i, j) into i = j and i ≠ j: E_ij = δ_ij E_ij|_{δ=1} + (1 − δ_ij) E_ij|_{δ=0} (δ_ij ∈ {0, 1})", key="split i = j / i ≠ j")
    same_terms, cross_terms = terms.subs(dlt, 1), terms.subs(dlt, 0)
    lims = ((p, 0, d - 1), (q, 0, d - 1))
    same = step("i = j: the single-sample moment E[x xᵀ A x xᵀ], read as a matrix",
                tidy(sp.MatAdd(*[sp.MatrixExpr.from_index_summation(sp.Sum(A[p, q] * t, *lims), first_index=a, last_index=c)
                                 for t in sp.Add.make_args(sp.expand(same_terms))]), [Lam]))
    cross = step("i ≠ j: only the within-sample pairing survives, E[x_i x_iᵀ] A E[x_j x_jᵀ]",
                 tidy(sp.MatAdd(*[sp.MatrixExpr.from_index_summation(sp.Sum(A[p, q] * t, *lims), first_index=a, last_index=c)
                                  for t in sp.Add.make_args(sp.expand(cross_terms))]), [Lam]))
    n_same = step("Number of pairs with i = j: Σ_{i,j=1}^{N} δ_ij", eval_index_sums(sp.Sum(dlt, (i, 1, N), (j, 1, N))))
    n_cross = step("Number of pairs with i ≠ j: Σ_{i,j=1}^{N} (1 − δ_ij)",
                   sp.factor(eval_index_sums(sp.Sum(1 - dlt, (i, 1, N), (j, 1, N)))))
    res = step("E[Λ̂AΛ̂] = (1/N²)(N·same + N(N − 1)·cross), collected", tidy((n_same * same + n_cross * cross) / N**2, [Lam]))
    return res, same, cross, n_same, n_cross


@lru_cache(maxsize=256)
def wishart_sandwich(Lam: sp.MatrixSymbol, A: Any, N: Any) -> Any:
    """``E[Λ̂ A Λ̂] = ΛAΛ + (1/N)(ΛAᵀΛ + tr(AΛ)Λ)`` for the empirical covariance
    ``Λ̂ = (1/N) Σ_{i≤N} x_i x_iᵀ`` of ``N`` i.i.d. ``x_i ~ N(0, Λ)`` (``N`` symbolic).

    Derived (see :func:`derive_wishart_sandwich` for the steps): Isserlis over the labelled
    variables ``x_ia`` with ``Cov(x_iu, x_jv) = δ_ij Λ_uv``; the ``i = j`` part is the
    single-sample moment, the ``i ≠ j`` part ``ΛAΛ``; the numbers of pairs ``N`` and ``N(N − 1)``
    are delta sums. Typed in: the definition of ``Λ̂``, the i.i.d. covariance, the ``δ ∈ {0, 1}``
    case split, ``Λᵀ = Λ``.

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> L, A = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("A", d, d)
    >>> wishart_sandwich(L, A, N)
    (Trace(A*Lambda)/N)*Lambda + Lambda*A*Lambda + 1/N*Lambda*A.T*Lambda
    """
    (C, M), subs = _placeholders(Lam, A)
    return _put_back(_wishart(C, M, N)[0], subs, [Lam])


def _syms():
    d, N = sp.symbols("d N", integer=True, positive=True)
    return d, N, sp.MatrixSymbol("Lambda", d, d)


@lru_cache(maxsize=None)
def derive_wishart_sandwich() -> Derivation:
    """The steps of :func:`wishart_sandwich` at symbolic ``d``, ``N`` (``Λ``, ``A``: ``d × d``
    matrix symbols). ``result``: ``E[Λ̂AΛ̂]``; facts ``same`` (the single-sample moment),
    ``cross``, ``n_same`` (N), ``n_cross`` (N(N − 1)), ``Lambda``, ``A``, ``sizes``.

    >>> D = derive_wishart_sandwich()
    >>> D.facts["n_cross"], D.provenance
    (N*(N - 1), {'result': 'derived'})
    >>> all(r.passed for r in D.check_obligations())
    True
    """
    d, N, L = _syms()
    A = sp.MatrixSymbol("A", d, d)
    b = DerivationBuilder("Wishart-type moment E[Λ̂AΛ̂] by Isserlis, symbolic d and N")
    b.symbols(d="dimension", N="number of samples", Lambda="covariance (symmetric)", A="any d × d matrix",
              Lambda_hat="empirical covariance (1/N) Σ_i x_i x_iᵀ")
    b.assume("Isserlis: E[z_1⋯z_2k] = Σ over pairings of products of covariances; Λᵀ = Λ", key="Isserlis' theorem")
    res, same, cross, n_same, n_cross = _wishart(L, A, N, b)
    b.obligation("same_is_single_sample_moment", tidy(same - fourth_moment_sandwich(L, A), [L]),
                 description="the i = j part is E[x xᵀ A x xᵀ]")
    target = L * A * L + (L * A.T * L + sp.Trace(A * L) * L) / N
    b.obligation("wishart_form", tidy(res - target, [L]), description="E[Λ̂AΛ̂] = ΛAΛ + (1/N)(ΛAᵀΛ + tr(AΛ)Λ)")
    for k, v in (("same", same), ("cross", cross), ("n_same", n_same), ("n_cross", n_cross), ("Lambda", L), ("A", A),
                 ("sizes", (d, N))):
        b.fact(k, v)
    return b.done(res)


# ------------------------------------------------------------------------------------------------
# ZFB: population loss of the linear self-attention predictor


def zfb_gamma(Lam: sp.MatrixSymbol, N: Any) -> Any:
    """``Γ_N = (1 + 1/N) Λ + (1/N) tr(Λ) I_d`` (ZFB's definition, typed in).

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> zfb_gamma(sp.MatrixSymbol("Lambda", d, d), N)
    (Trace(Lambda)/N)*I + (1 + 1/N)*Lambda
    """
    d = _d(Lam)
    return (1 + 1 / N) * Lam + sp.Trace(Lam) / N * sp.Identity(d)


def _replace_pair(e, first, second, by):
    """Replace adjacent factors ``first·second`` inside every ``MatMul`` of ``e`` by ``by``."""
    def fix(m):
        args, out, k = list(m.args), [], 0
        while k < len(args):
            if k + 1 < len(args) and args[k] == first and args[k + 1] == second:
                out.append(by)
                k += 2
            else:
                out.append(args[k])
                k += 1
        return sp.MatMul(*out).doit()
    return e.replace(lambda t: isinstance(t, sp.MatMul), fix)


def _zfb(Lam, B, N, b: DerivationBuilder | None = None):
    if b is None:
        return _zfb_cached(Lam, B, N)
    step, assume = b.step, b.assume
    d = _d(Lam)
    w = sp.MatrixSymbol("w", d, 1)
    X = sp.MatrixSymbol("X", d, N)
    Lh = sp.MatrixSymbol("Lambda_hat", d, d)
    a, i, k = _idx("a", "i", "k")
    assume("x_i ~ N(0, Λ) i.i.d. (columns of X, d × N), x_q ~ N(0, Λ), w ~ N(0, I_d), all independent; y_i = wᵀx_i; "
           "h = (1/N) Σ_i y_i x_i; prediction ŷ = hᵀ B x_q, target wᵀ x_q; L(B) = ½ E(ŷ − wᵀx_q)²", key="Gaussian ICL setting")
    h_sum = sp.Sum(sp.Sum(w[k, 0] * X[k, i], (k, 0, d - 1)) * X[a, i], (i, 0, N - 1))
    h = step("N·h_a = Σ_i (Σ_k w_k X_ki) X_ai as a matrix: N·h = X Xᵀ w, i.e. h = Λ̂ w with Λ̂ = (1/N) X Xᵀ",
             sp.MatrixExpr.from_index_summation(h_sum, first_index=a))
    b.obligation("Lambda_hat_symmetric", tidy((X * X.T).T - X * X.T), description="Λ̂ᵀ = Λ̂ (Λ̂ = XXᵀ/N)")
    xq = sp.MatrixSymbol("x_q", d, 1)
    u = B.T * Lh * w - w
    resid = step("ŷ − wᵀx_q with h = Λ̂w: (Λ̂w)ᵀBx_q − wᵀx_q", (Lh * w).T * B * xq - w.T * xq)
    b.obligation("residual_is_u_x_q", tidy(resid - u.T * xq, [Lh]),
                 description="ŷ − wᵀx_q = uᵀx_q with u = Bᵀh − w = BᵀΛ̂w − w")
    uu = step("u uᵀ, expanded (Λ̂ᵀ = Λ̂)", sp.expand((u * u.T).doit()).xreplace({Lh.T: Lh}))
    Mww = step("E[w wᵀ] = I (Isserlis with covariance I)", second_moment(sp.Identity(d)))
    assume("E over w first (w independent of X; linearity): w wᵀ → E[w wᵀ] inside each term", key="E over w first")
    Ew = step("E_w[u uᵀ]", tidy(_replace_pair(uu, w, w.T, Mww), [Lh]))
    hat_mean = step("E[Λ̂] = (1/N) Σ_i E[x_i x_iᵀ] = (1/N)·N·Λ (the count is a sum over i)",
                    tidy(eval_index_sums(sp.Sum(1, (i, 1, N))) * second_moment(Lam) / N, [Lam]))
    hat_sq = step("E[Λ̂ I Λ̂] (Wishart-type moment with A = I)", wishart_sandwich(Lam, sp.Identity(d), N))
    assume("E over X (linearity): Λ̂² → E[Λ̂ I Λ̂], then Λ̂ → E[Λ̂]", key="E over X (linearity)")
    Euu = _sym(Ew.xreplace({sp.MatPow(Lh, 2): hat_sq}), [Lh])
    Euu = step("E[u uᵀ]", tidy(Euu.xreplace({Lh: hat_mean}), [Lam]))
    Mqq = step("E[x_q x_qᵀ] = Λ", second_moment(Lam))
    assume("x_q independent of (w, X): E(uᵀx_q)² = E tr(x_q x_qᵀ u uᵀ) = tr(E[x_q x_qᵀ] E[u uᵀ])", key="independent query x_q")
    loss = step("L(B) = ½ tr(Λ E[u uᵀ]), traces expanded", tidy(sp.Trace(Mqq * Euu) / 2, [Lam]))
    hh = tidy(hat_sq, [Lam])
    return {"loss": loss, "hh": hh, "hw": hat_mean, "ww": Mww, "h": h, "Euu": Euu, "residual": resid, "uu": uu}


@lru_cache(maxsize=64)
def _zfb_cached(Lam, B, N):
    return _zfb(Lam, B, N, DerivationBuilder("scratch"))


def zfb_moments(Lam: sp.MatrixSymbol, N: Any) -> dict[str, Any]:
    """The prompt moments of ZFB with ``h = (1/N) Σ_i y_i x_i = Λ̂ w``: ``{"hh": E[hhᵀ],
    "hw": E[hwᵀ], "ww": E[wwᵀ]}``; ``E[hhᵀ] = E[Λ̂ I Λ̂] = ΛΓ_N`` (expanded), ``E[hwᵀ] = Λ``,
    ``E[wwᵀ] = I``. Derived by :func:`wishart_sandwich` and :func:`second_moment` (typed in:
    independence of ``w`` and the ``x_i``, linearity).

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> L = sp.MatrixSymbol("Lambda", d, d)
    >>> m = zfb_moments(L, N)
    >>> m["hh"], m["hw"]
    ((Trace(Lambda)/N)*Lambda + (1 + 1/N)*Lambda**2, Lambda)
    >>> tidy(m["hh"] - L * zfb_gamma(L, N), [L])
    0
    """
    z = _zfb(Lam, sp.MatrixSymbol("B", _d(Lam), _d(Lam)), N)
    return {"hh": z["hh"], "hw": z["hw"], "ww": z["ww"]}


@lru_cache(maxsize=256)
def zfb_population_loss(Lam: sp.MatrixSymbol, B: Any, N: Any) -> Any:
    """``L(B) = ½ E_{x_i, x_q, w}(hᵀBx_q − wᵀx_q)²`` as a trace polynomial, quadratic in ``B``:
    ``½ tr(BᵀΛΓ_N BΛ) − tr(BΛ²) + ½ tr Λ`` (expanded; one term per trace monomial). Derived as in :func:`derive_zfb_loss`.

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> L, B = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("B", d, d)
    >>> zfb_population_loss(L, B, N)
    -Trace(B*Lambda**2) + Trace(B*Lambda*B.T*Lambda**2)/2 + Trace(Lambda)/2 + Trace(B*Lambda*B.T*Lambda**2)/(2*N) + Trace(B*Lambda*B.T*Lambda)*Trace(Lambda)/(2*N)
    """
    return _zfb(Lam, B, N)["loss"]


def _diff_by(expr, X):
    """``∂expr/∂X`` term by term (linearity). SymPy 1.14's ``diff`` of a *sum* of traces by a
    matrix symbol returns ``ZeroMatrix`` (sympy/sympy#26585, open); each term alone
    differentiates correctly."""
    parts = [sp.diff(t, X) for t in sp.Add.make_args(sp.expand(expr))]
    parts = [q for q in parts if isinstance(q, sp.MatrixExpr) and not isinstance(q, sp.ZeroMatrix)]
    return sp.MatAdd(*parts) if parts else sp.ZeroMatrix(*X.shape)


@lru_cache(maxsize=256)
def zfb_loss_gradient(Lam: sp.MatrixSymbol, B: sp.MatrixSymbol, N: Any) -> Any:
    """``∂L/∂B`` by SymPy's matrix calculus on :func:`zfb_population_loss`, tidied with ``Λᵀ = Λ``:
    ``ΛΓ_N BΛ − Λ²`` expanded.

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> L, B = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("B", d, d)
    >>> g = zfb_loss_gradient(L, B, N)
    >>> tidy(g - (L * zfb_gamma(L, N) * B * L - L * L), [L])
    0
    """
    return tidy(_diff_by(zfb_population_loss(Lam, B, N), B), [Lam])


@lru_cache(maxsize=None)
def derive_zfb_loss() -> Derivation:
    """ZFB population loss of the linear self-attention predictor at symbolic ``d`` and ``N``,
    its gradient and its stationary point ``B = Γ_N⁻¹``.

    Steps: ``h = Λ̂w`` (``from_index_summation``); ``u uᵀ`` expanded; ``E_w`` (``wwᵀ → I``),
    ``E_X`` (``Λ̂² → E[Λ̂IΛ̂]`` by :func:`wishart_sandwich`, ``Λ̂ → Λ``), ``E_{x_q}``; the loss
    as traces; quadratic in ``B`` (``B → tB`` has degree 2 in ``t``); ``sp.diff`` by ``B``; the
    gradient equals ``ΛΓ_N BΛ − Λ²``; written with a symbol ``G`` for ``Γ_N`` it vanishes at
    ``B = G⁻¹``, and solving ``ΛGBΛ = Λ²`` gives ``B = (ΛG)⁻¹Λ²Λ⁻¹ = G⁻¹``. Typed in: the model
    and the laws, independence/linearity of E, ``Λᵀ = Λ``, invertibility of ``Λ`` and ``Γ_N``
    (Λ positive definite) and that the stationary point of this convex quadratic is the minimum.
    ``result``: ``{"loss", "gradient", "B_star"}``; facts ``hh``, ``hw``, ``Gamma_N``, ``G``,
    ``Lambda``, ``B``, ``sizes``, ``degree_in_B``.

    >>> D = derive_zfb_loss()
    >>> D.result["B_star"], D.facts["degree_in_B"]
    (G**(-1), 2)
    >>> all(r.passed for r in D.check_obligations())
    True
    """
    d, N, L = _syms()
    B = sp.MatrixSymbol("B", d, d)
    G = sp.MatrixSymbol("G", d, d)
    b = DerivationBuilder("ZFB population loss, gradient and stationary point, symbolic d and N")
    b.symbols(d="dimension", N="prompt length", Lambda="covariance of x (symmetric positive definite)",
              B="w22·W11^{KQ}", G="Γ_N = (1 + 1/N)Λ + (1/N)tr(Λ)I", Lambda_hat="(1/N) Σ_i x_i x_iᵀ")
    b.inherit(derive_wishart_sandwich(), "wishart")
    z = _zfb(L, B, N, b)
    Gam = b.define("Γ_N = (1 + 1/N)Λ + (1/N)tr(Λ)I", zfb_gamma(L, N))
    b.obligation("hh_is_Lambda_Gamma", tidy(z["hh"] - L * Gam, [L]), description="E[hhᵀ] = ΛΓ_N")
    b.obligation("hw_is_Lambda", tidy(z["hw"] - L, [L]), description="E[hwᵀ] = Λ")
    loss = z["loss"]
    t = sp.Symbol("t")
    scaled = b.step("L(tB), collected in t", sp.collect(sp.expand(tidy(loss.xreplace({B: t * B}), [L])), t))
    deg = sp.degree(scaled, t)
    b.obligation("quadratic_in_B", sp.Integer(deg - 2), description="L is a quadratic polynomial in B")
    grad = b.step("∂L/∂B (matrix calculus, term by term), Λᵀ = Λ", tidy(_diff_by(loss, B), [L]))
    b.obligation("gradient_form", tidy(grad - (L * Gam * B * L - L * L), [L]), description="∂L/∂B = ΛΓ_N BΛ − Λ²")
    gG = b.step("The gradient with G standing for Γ_N", L * G * B * L - L * L)
    b.obligation("G_form_is_gradient", tidy(gG.xreplace({G: Gam}) - grad, [L]),
                 description="G → Γ_N in ΛGBΛ − Λ² gives the derived gradient")
    at = b.step("At B = G⁻¹", (gG.xreplace({B: G.I})).doit())
    b.obligation("stationary_at_Gamma_inverse", at, description="∇L(Γ_N⁻¹) = 0")
    b.assume("Λ and Γ_N are invertible (Λ ≻ 0); L is a convex quadratic (Hessian ΛΓ_N ⊗ Λ ≻ 0), so its stationary "
             "point is its unique minimiser", key="convex quadratic, Λ ≻ 0")
    Bstar = b.step("Solve ΛGBΛ = Λ²: B = (ΛG)⁻¹ Λ² Λ⁻¹", (sp.Inverse(L * G) * L * L * L.I).doit())
    b.obligation("B_star_is_G_inverse", tidy(Bstar - G.I), description="B* = Γ_N⁻¹")
    for k, v in (("hh", z["hh"]), ("hw", z["hw"]), ("Gamma_N", Gam), ("G", G), ("Lambda", L), ("B", B), ("sizes", (d, N)),
                 ("degree_in_B", deg), ("h", z["h"])):
        b.fact(k, v)
    return b.done({"loss": loss, "gradient": grad, "B_star": Bstar})


# ------------------------------------------------------------------------------------------------
# recording the moment calculus inside another derivation, and trace forms of commuting matrices


def wishart_steps(b: DerivationBuilder, Lam: sp.MatrixSymbol, A: sp.MatrixSymbol, N: Any) -> Any:
    """Record the steps of :func:`wishart_sandwich` (Isserlis over ``x_ia`` in index form, each
    pairing read as a matrix by ``from_index_summation``, the pair counts as delta sums) in the
    builder ``b`` and return ``E[Λ̂AΛ̂]`` (``Lam``, ``A``: ``MatrixSymbol``s).

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> L, A = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("A", d, d)
    >>> b = DerivationBuilder("demo"); r = wishart_steps(b, L, A, N)
    >>> tidy(r - wishart_sandwich(L, A, N), [L]), [s.how for s in b._steps][:2]
    (0, ['assumed', 'derived'])
    """
    return _wishart(Lam, A, N, b)[0]


def zfb_loss_steps(b: DerivationBuilder, Lam: sp.MatrixSymbol, B: sp.MatrixSymbol, N: Any) -> dict[str, Any]:
    """Record the steps of the ZFB population loss (as in :func:`derive_zfb_loss`: ``h = Λ̂w``,
    ``E_w``, ``E_X`` by the Wishart moment, ``E_{x_q}``) in ``b``; returns ``{"loss", "hh", "hw",
    "ww", "h", "Euu", "residual", "uu"}`` (``N``: the prompt length, a symbol or a number).

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> L, B = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("B", d, d)
    >>> z = zfb_loss_steps(DerivationBuilder("demo"), L, B, N)
    >>> tidy(z["loss"] - zfb_population_loss(L, B, N), [L])
    0
    """
    return _zfb(Lam, B, N, b)


def _scalar_image(e, traces):
    return sp.sympify(e).xreplace(traces) if traces else sp.sympify(e)


def _matrix_image(m, images, traces):
    if not isinstance(m, sp.MatrixExpr):
        return _scalar_image(m, traces)
    if isinstance(m, sp.MatrixSymbol):
        if m not in images:
            raise ValueError(f"no scalar image for {m}")
        return images[m]
    if isinstance(m, sp.Identity):
        return sp.Integer(1)
    if isinstance(m, sp.ZeroMatrix):
        return sp.Integer(0)
    if isinstance(m, sp.MatMul):
        return sp.Mul(*[_matrix_image(a, images, traces) for a in m.args])
    if isinstance(m, sp.MatAdd):
        return sp.Add(*[_matrix_image(a, images, traces) for a in m.args])
    if isinstance(m, sp.MatPow):
        return _matrix_image(m.base, images, traces) ** m.exp
    if isinstance(m, sp.Inverse):
        return 1 / _matrix_image(m.arg, images, traces)
    if isinstance(m, sp.Transpose):
        return _matrix_image(m.arg, images, traces)
    raise ValueError(f"cannot map {type(m).__name__} {m}")


def commuting_trace_image(expr: Any, images: dict, scalar_traces: dict | None = None) -> Any:
    """The scalar image ``F(λ)`` of a trace polynomial ``Σ_k c_k tr(f_k(Λ))`` whose matrices are
    symmetric functions of one matrix and so commute: each ``MatrixSymbol`` ``S`` in a trace is
    replaced by its image ``images[S]`` (a function of a scalar ``λ``; ``S⁻¹`` by ``1/images[S]``,
    ``Sᵀ`` like ``S``), and ``F = Σ_k c_k f_k``. Traces named in ``scalar_traces`` (e.g.
    ``{Trace(Λ): t}``) that multiply another trace are scalars (``c_k`` may contain them); a term
    made of such traces alone keeps one of them as its trace. Each term must hold exactly one other
    trace (else ``ValueError``).

    Premise (the caller's to state): the matrices are symmetric and commute, and ``f ↦ f(Λ)`` is an
    algebra homomorphism on rational functions whose poles avoid the spectrum (functional calculus),
    so ``Σ_k c_k tr(f_k(Λ)) = tr(F(Λ))``; ``F ≡ 0`` then gives 0.

    >>> d, N = sp.symbols("d N", integer=True, positive=True)
    >>> L, G = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("G", d, d)
    >>> lam, t = sp.symbols("lambda t", positive=True)
    >>> e = sp.Trace(G.I * L * G.I * L) * sp.Trace(L) + sp.Trace(L)
    >>> commuting_trace_image(e, {L: lam, G: 2 * lam}, {sp.Trace(L): t})
    lambda + t/4
    """
    scalar_traces = dict(scalar_traces or {})
    out = []
    for term in sp.Add.make_args(sp.expand(sp.sympify(expr))):
        coeff, trs = sp.Integer(1), []
        for f in sp.Mul.make_args(term):
            base, k = (f.base, f.exp) if isinstance(f, sp.Pow) and isinstance(f.base, sp.Trace) else (f, 1)
            if isinstance(base, sp.Trace):
                if not (sp.sympify(k).is_Integer and k > 0):
                    raise ValueError(f"trace to a non-integer or negative power in {term}")
                trs += [base] * int(k)
            else:
                coeff *= f
        others = [x for x in trs if x not in scalar_traces]
        if not trs or len(others) > 1:
            raise ValueError(f"term {term} is not linear in one trace")
        main = others[0] if others else trs[0]
        rest = list(trs)
        rest.remove(main)
        scal = sp.Mul(*[scalar_traces[x] for x in rest])
        out.append(_scalar_image(coeff, scalar_traces) * scal * _matrix_image(main.arg, images, scalar_traces))
    return sp.Add(*out)
