"""LoRA (low-rank adaptation) derived in SymPy (claim ``lora.low_rank``).

Conventions follow ``torch.nn.Linear``: a layer maps a row ``x ∈ R^k`` to ``x W0ᵀ`` with
``W0 ∈ R^{d×k}`` (d = out features, k = in features). LoRA adds ``s·B A`` with
``B ∈ R^{d×r}``, ``A ∈ R^{r×k}`` and scale ``s = α/r`` (Hu et al. 2021), so a batch
``X ∈ R^{n×k}`` maps to ``Y = X (W0 + s B A)ᵀ``.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import sympy as sp

from theory import sizes as _sz
from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_lora_gradients", "derive_lora_rank", "derive_lora_count"]


def _mat(name: str, rows: int, cols: int) -> sp.Matrix:
    return sp.Matrix(rows, cols, lambda i, j: sp.Symbol(f"{name}_{i}{j}", real=True))


@lru_cache(maxsize=None)
def derive_lora_gradients(n: int = 2, d: int = 2, k: int = 2, r: int = 1) -> Derivation:
    """Differentiate ``L = Σ G ∘ Y`` (``G`` = upstream gradient ∂L/∂Y) with
    ``Y = X (W0 + s B A)ᵀ`` entry by entry, and read off the matrix forms
    ``∂L/∂B = s Gᵀ X Aᵀ`` and ``∂L/∂A = s Bᵀ Gᵀ X`` (product rule); at ``B = 0``,
    ``∂L/∂A = 0`` while ``∂L/∂B`` is generally nonzero.

    ``result`` is ``{"grad_A": ..., "grad_B": ...}`` as SymPy matrices in the symbols of
    ``facts["symbols"]`` = (X, G, A, B, s); ``facts`` also holds the residuals of the matrix
    forms (zero matrices) and the gradients at ``B = 0``.

    >>> dv = derive_lora_gradients(1, 1, 1, 1)
    >>> dv.result["grad_A"]
    Matrix([[B_00*G_00*X_00*s]])
    >>> dv.facts["grad_A_at_B0"]
    Matrix([[0]])
    """
    b = DerivationBuilder("LoRA gradients by the product rule")
    b.symbols(X_ij="input batch entry (rows are examples)", G_ij="upstream gradient ∂L/∂Y", A_ij="entry of A (r×k)",
              B_ij="entry of B (d×r)", W_ij="entry of the frozen W0 (d×k)", s="scale α/r")
    X, G, A, B = _mat("X", n, k), _mat("G", n, d), _mat("A", r, k), _mat("B", d, r)
    W0 = _mat("W", d, k)
    s = sp.Symbol("s", positive=True)
    Y = X * (W0 + s * B * A).T
    b.define("Forward pass Y = X (W0 + s B A)ᵀ (entry Y_00 shown)", Y[0, 0])
    L = sum(G[i, j] * Y[i, j] for i in range(n) for j in range(d))
    b.define("Loss linearised by the upstream gradient G: L = Σ_ij G_ij Y_ij", L)
    gA = A.applyfunc(lambda a: sp.expand(sp.diff(L, a)))
    gB = B.applyfunc(lambda e: sp.expand(sp.diff(L, e)))
    b.step("∂L/∂A_pq by differentiating L entry by entry", gA, compact=r"\partial L/\partial A=s\,B^{\top}G^{\top}X")
    b.step("∂L/∂B_pq by differentiating L entry by entry", gB, compact=r"\partial L/\partial B=s\,G^{\top}XA^{\top}")
    b.obligation("residual_A", gA - s * B.T * G.T * X, description="∂L/∂A = s Bᵀ Gᵀ X")
    b.obligation("residual_B", gB - s * G.T * X * A.T, description="∂L/∂B = s Gᵀ X Aᵀ")
    resA = (gA - (s * B.T * G.T * X).expand()).applyfunc(sp.simplify)
    resB = (gB - (s * G.T * X * A.T).expand()).applyfunc(sp.simplify)
    b.fact("residual_A", resA)
    b.fact("residual_B", resB)
    b.step("Residual against the matrix form s Bᵀ Gᵀ X", resA)
    b.step("Residual against the matrix form s Gᵀ X Aᵀ", resB)
    zero_B = {e: 0 for e in B}
    b.fact("grad_A_at_B0", gA.subs(zero_B))
    b.fact("grad_B_at_B0", gB.subs(zero_B))
    b.step("At initialisation B = 0: ∂L/∂A", b.facts["grad_A_at_B0"])
    b.obligation("grad_A_vanishes_at_B0", b.facts["grad_A_at_B0"], description="A does not move at the first step")
    b.step("At initialisation B = 0: ∂L/∂B (does not involve B)", b.facts["grad_B_at_B0"])
    b.fact("symbols", (X, G, A, B, s))
    return b.done({"grad_A": gA, "grad_B": gB})


@lru_cache(maxsize=None)
def derive_lora_rank(d: int = 3, k: int = 3, r: int = 1) -> Derivation:
    """Every ``(r+1)×(r+1)`` minor of ``B A`` (``B`` d×r, ``A`` r×k, symbolic entries) expands
    to 0, so ``rank(BA) ≤ r`` (Cauchy–Binet); some ``r×r`` minor is a nonzero polynomial, so the
    bound is attained generically. ``result`` is the number of nonzero ``(r+1)``-minors (0).

    >>> derive_lora_rank(2, 2, 1).result
    0
    """
    b = DerivationBuilder(f"rank(BA) ≤ r for d={d}, k={k}, r={r}")
    b.symbols(A_ij="entry of A (r×k)", B_ij="entry of B (d×r)")
    A, B = _mat("A", r, k), _mat("B", d, r)
    M = B * A
    b.step("The update ΔW = B A", M)
    m = r + 1
    minors = []
    if m <= min(d, k):
        for rows in itertools.combinations(range(d), m):
            for cols in itertools.combinations(range(k), m):
                minors.append(sp.expand(M.extract(list(rows), list(cols)).det()))
    nonzero = sp.Integer(sum(1 for e in minors if e != 0))
    b.step(f"Number of {m}×{m} minors of BA that do not expand to 0", nonzero)
    b.obligation("all_larger_minors_vanish", minors, description=f"every {m}×{m} minor is 0, so rank(BA) ≤ {r}")
    top = sp.expand(M.extract(list(range(r)), list(range(r))).det())
    b.fact("leading_r_minor", top)
    b.step(f"The leading {r}×{r} minor (a nonzero polynomial: rank r is attained generically)", top)
    b.obligation("leading_minor_nonzero", sp.sympify(top != 0), "true",
                 description="the expanded polynomial has a term, so some B, A give rank exactly r")
    return b.done(nonzero)


@lru_cache(maxsize=None)
def derive_lora_count() -> Derivation:
    """Count the free entries of ``A`` (r×k) and ``B`` (d×r) built symbolically on the grid
    ``d, k, r ∈ {1, 2}`` and fit the multilinear polynomial in (d, k, r) through the 8 counts;
    the fit is the trainable-parameter count ``r(d + k)``.

    >>> sp.factor(derive_lora_count().result)
    r*(d + k)
    """
    b = DerivationBuilder("Trainable parameters of a LoRA adapter")
    b.symbols(d="out features", k="in features", r="rank of the adapter", c0="coefficients c0..c7 of the ansatz")
    d, k, r = sp.symbols("d k r", positive=True, integer=True)
    monos = [sp.Integer(1), d, k, r, d * k, d * r, k * r, d * k * r]
    cs = sp.symbols("c0:8")
    ansatz = sum(c * mo for c, mo in zip(cs, monos))
    b.assume("Ansatz: the count is multilinear in (d, k, r) (each matrix has one factor per dimension)", ansatz, key="multilinear-count ansatz", clauses=("trainable_count",))

    def n_free(dd, kk, rr):
        return len(_mat("A", rr, kk).free_symbols | _mat("B", dd, rr).free_symbols)

    eqs = []
    for dd, kk, rr in itertools.product((1, 2), repeat=3):
        eqs.append(sp.Eq(ansatz.subs({d: dd, k: kk, r: rr}), n_free(dd, kk, rr)))
    b.step("Counts of free entries of A and B on the grid d,k,r ∈ {1,2} (first equation)", eqs[0], equation=True)
    sol = sp.solve(eqs, cs, dict=True)[0]
    count = sp.expand(ansatz.subs(sol))
    b.step("Multilinear polynomial through the 8 counts", count)
    b.obligation("fit_predicts_held_out_counts",
                 [count.subs({d: dd, k: kk, r: rr}) - n_free(dd, kk, rr) for dd, kk, rr in ((5, 3, 4), (7, 2, 3))],
                 description="the fit equals fresh counts at (d, k, r) = (5, 3, 4) and (7, 2, 3)")
    b.fact("symbols", (d, k, r))
    return b.done(count)


# ------------------------------------------------------------------------------------------------
# symbolic sizes (issue 34)

__all__ += ["derive_lora_general", "lora_gradients_at"]


def _lora_symbols():
    n, d, k, r = sp.symbols("n d k r", integer=True, positive=True)
    X, G = sp.MatrixSymbol("X", n, k), sp.MatrixSymbol("G", n, d)
    A, B, W0 = sp.MatrixSymbol("A", r, k), sp.MatrixSymbol("B", d, r), sp.MatrixSymbol("W_0", d, k)
    return n, d, k, r, X, G, A, B, W0, sp.Symbol("s", positive=True)


@lru_cache(maxsize=None)
def derive_lora_general() -> Derivation:
    """The LoRA facts for symbolic sizes ``n`` (batch), ``d`` (out), ``k`` (in) and ``r`` (rank),
    with matrix symbols ``X`` (n×k), ``G = ∂L/∂Y`` (n×d), ``A`` (r×k), ``B`` (d×r), ``W_0`` (d×k):

    * gradients of ``L = tr(Gᵀ Y)``, ``Y = X(W_0 + sBA)ᵀ``: ``∂L/∂A = s Bᵀ Gᵀ X`` and
      ``∂L/∂B = s Gᵀ X Aᵀ``, twice: SymPy's matrix calculus, and the index form
      ``Σ_{i,j} G_ij Y_ij`` differentiated by ``A_pq`` (delta sums evaluated); at ``B = 0``
      (a ``ZeroMatrix``) ``∂L/∂A = 0`` and the output is ``X W_0ᵀ``;
    * merge: ``X(W_0 + sBA)ᵀ = X W_0ᵀ + s (X Aᵀ) Bᵀ``;
    * rank: inherited :func:`theory.sizes.derive_lora_rank_bound` (``rank(BA) ≤ Min(d, k, r) ≤ r``,
      rank rules typed in); generic rank ``r`` for ``r ≤ min(d, k)``: the leading r×r minor of
      ``BA`` is ``det(B_r A_r) = det B_r · det A_r`` (SymPy), equal to ``1`` at ``B_r = A_r = I_r``,
      so a nonzero polynomial (premises: its zero set is a null set; a nonzero r×r minor means rank ≥ r);
    * trainable count ``r·k + d·r = r(d + k)`` (the entries of ``A`` and ``B``, read off their shapes).

    Cross-checks: :func:`derive_lora_gradients` at ``n = d = k = 2, r = 1`` inherited (``at_n2_d2_k2_r1.*``)
    with the general gradients specialised there (:func:`lora_gradients_at`) equal to its result;
    :func:`derive_lora_count` inherited (``count_fit.*``), its fitted polynomial equal to ``r(d + k)``;
    :func:`derive_lora_rank` at ``(3, 4, 2)`` inherited (``rank_at_d3_k4_r2.*``), where the general
    bound is ``2 = r``. ``result``: ``{"grad_A", "grad_B"}``; facts ``symbols`` (X, G, A, B, s),
    ``sizes``, ``count``, ``rank_bound``, ``leading_minor``.

    >>> derive_lora_general().result["grad_A"]
    s*B.T*G.T*X
    """
    n, d, k, r, X, G, A, B, W0, s = _lora_symbols()
    b = DerivationBuilder("LoRA for symbolic n, d, k, r: gradients, B = 0 start, merge, rank, trainable count")
    b.symbols(n="batch size (symbolic)", d="out features (symbolic)", k="in features (symbolic)", r="LoRA rank (symbolic)",
              X="input batch (n×k)", G="upstream gradient ∂L/∂Y (n×d)", A="r×k factor", B="d×r factor",
              W_0="frozen weight (d×k)", s="scale α/r", B_r="top r×r block of B", A_r="left r×r block of A")
    Y = b.define("Forward pass Y = X (W_0 + s B A)ᵀ", X * (W0 + s * B * A).T)
    L = b.define("Loss linearised by the upstream gradient: L = tr(Gᵀ Y) = Σ_ij G_ij Y_ij", sp.Trace(G.T * Y))
    gA = b.step("∂L/∂A (SymPy matrix calculus)", sp.diff(L, A))
    gB = b.step("∂L/∂B (SymPy matrix calculus)", sp.diff(L, B))
    b.obligation("grad_A", _sz._canon(gA - s * B.T * G.T * X), description="∂L/∂A = s Bᵀ Gᵀ X")
    b.obligation("grad_B", _sz._canon(gB - s * G.T * X * A.T), description="∂L/∂B = s Gᵀ X Aᵀ")
    i, j, p, q = sp.symbols("i j p q", integer=True)
    Lidx = sp.Sum(G[i, j] * Y[i, j], (i, 0, n - 1), (j, 0, d - 1))
    for name, M, first, target in (("A", A, (p, q), s * B.T * G.T * X), ("B", B, (p, q), s * G.T * X * A.T)):
        rows, cols = M.shape
        e = b.step(f"Index route: ∂(Σ_ij G_ij Y_ij)/∂{name}_pq, constants pulled out, delta sums evaluated",
                   _sz.eval_index_sums(_sz.pull_constants(sp.expand(sp.diff(Lidx, M[p, q]))), {p: (0, rows - 1), q: (0, cols - 1)}))
        mat = sp.MatrixExpr.from_index_summation(sp.expand(_sz.pull_constants(e) / s), first_index=p, last_index=q)
        b.obligation(f"index_route_grad_{name}", _sz._canon(s * mat - target), description=f"the index route gives ∂L/∂{name} too")
    zB = {B: sp.ZeroMatrix(d, r)}
    gA0 = b.step("At B = 0: ∂L/∂A", gA.xreplace(zB).doit())
    b.obligation("grad_A_vanishes_at_B0", gA0, description="A does not move at the first step")
    Y0 = b.step("At B = 0: the output", Y.xreplace(zB).doit())
    b.obligation("init_equals_base", _sz._canon(Y0 - X * W0.T), description="f_init = f_{W_0}")
    b.obligation("merge", _sz._canon(Y - (X * W0.T + s * (X * A.T) * B.T)), description="X(W_0 + sBA)ᵀ = XW_0ᵀ + s(XAᵀ)Bᵀ")
    rb = _sz.derive_lora_rank_bound()
    b.inherit(rb, "rank_bound")
    Br, Ar = sp.MatrixSymbol("B_r", r, r), sp.MatrixSymbol("A_r", r, r)
    minor = b.step("r ≤ min(d, k): the leading r×r minor of BA is det(B_r A_r)", sp.det(Br * Ar))
    at_I = b.step("At B_r = A_r = I_r", minor.xreplace({Br: sp.Identity(r), Ar: sp.Identity(r)}).doit())
    b.obligation("leading_minor_not_identically_zero", at_I - 1, description="the minor is 1 at one point: a nonzero polynomial")
    b.assume("A polynomial that is not identically zero vanishes only on a null set; a nonzero r×r minor means rank ≥ r", key="generic rank (null set)", clauses=("rank_generic",))
    count = b.step("Trainable entries: rows·cols of A plus rows·cols of B", sp.expand(A.rows * A.cols + B.rows * B.cols))
    b.obligation("trainable_count", count - r * (d + k), description="#trainable = r(d + k)")
    facts = {"symbols": (X, G, A, B, s), "sizes": (n, d, k, r), "count": count, "rank_bound": rb.result, "leading_minor": minor}
    fixed = derive_lora_gradients(2, 2, 2, 1)
    b.inherit(fixed, "at_n2_d2_k2_r1")
    at = _lora_at({"grad_A": gA, "grad_B": gB}, facts, 2, 2, 2, 1, fixed.facts["symbols"])
    b.obligation("general_at_n2_d2_k2_r1_equals_fixed", [at[key] - fixed.result[key] for key in ("grad_A", "grad_B")],
                 description="the general gradients specialised to n = d = k = 2, r = 1 are derive_lora_gradients(2, 2, 2, 1)'s")
    fit = derive_lora_count()
    b.inherit(fit, "count_fit")
    dd, kk, rr = fit.facts["symbols"]
    b.obligation("general_count_equals_fit", count.xreplace({d: dd, k: kk, r: rr}) - fit.result,
                 description="r(d + k) from the shapes is the polynomial fitted to counted entries")
    mins = derive_lora_rank(3, 4, 2)
    b.inherit(mins, "rank_at_d3_k4_r2")
    b.obligation("general_rank_bound_at_d3_k4_r2", [_sz.instantiate(rb.result, dict(zip(rb.facts["sizes"], (3, 4, 2)))) - 2, mins.result],
                 description="the general bound at (d, k, r) = (3, 4, 2) is r = 2, and every 3×3 minor vanishes there")
    for key, val in facts.items():
        b.fact(key, val)
    return b.done({"grad_A": gA, "grad_B": gB})


def _lora_at(grads, facts, n: int, d: int, k: int, r: int, symbols=None):
    ns, ds, ks, rs = facts["sizes"]
    X, G, A, B, s = facts["symbols"]
    if symbols is None:
        symbols = (_mat("X", n, k), _mat("G", n, d), _mat("A", r, k), _mat("B", d, r), sp.Symbol("s", positive=True))
    vals = dict(zip(("X", "G", "A", "B"), symbols[:4]))
    out = {}
    for key, e in grads.items():
        e = e.xreplace({ns: n, ds: d, ks: k, rs: r, s: symbols[4]})
        e = e.xreplace({m: sp.ImmutableMatrix(vals[m.name]) for m in e.atoms(sp.MatrixSymbol)})
        out[key] = sp.Matrix(e.doit()).applyfunc(sp.expand)
    return out


@lru_cache(maxsize=None)
def lora_gradients_at(n: int, d: int, k: int, r: int):
    """:func:`derive_lora_general`'s gradients specialised to ``(n, d, k, r)``: ``(symbols, grads)``
    with ``symbols = (X, G, A, B, s)`` explicit matrices of scalar symbols (as in
    :func:`derive_lora_gradients`) and ``grads`` keyed ``grad_A``, ``grad_B``.

    >>> lora_gradients_at(1, 1, 1, 1)[1]["grad_A"]
    Matrix([[B_00*G_00*X_00*s]])
    """
    D = derive_lora_general()
    symbols = (_mat("X", n, k), _mat("G", n, d), _mat("A", r, k), _mat("B", d, r), sp.Symbol("s", positive=True))
    return symbols, _lora_at(D.result, D.facts, n, d, k, r, symbols)
