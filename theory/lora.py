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
    b.assume("Ansatz: the count is multilinear in (d, k, r) (each matrix has one factor per dimension)", ansatz)

    def n_free(dd, kk, rr):
        return len(_mat("A", rr, kk).free_symbols | _mat("B", dd, rr).free_symbols)

    eqs = []
    for dd, kk, rr in itertools.product((1, 2), repeat=3):
        eqs.append(sp.Eq(ansatz.subs({d: dd, k: kk, r: rr}), n_free(dd, kk, rr)))
    b.step("Counts of free entries of A and B on the grid d,k,r ∈ {1,2} (first equation)", eqs[0])
    sol = sp.solve(eqs, cs, dict=True)[0]
    count = sp.expand(ansatz.subs(sol))
    b.step("Multilinear polynomial through the 8 counts", count)
    b.obligation("fit_predicts_held_out_counts",
                 [count.subs({d: dd, k: kk, r: rr}) - n_free(dd, kk, rr) for dd, kk, rr in ((5, 3, 4), (7, 2, 3))],
                 description="the fit equals fresh counts at (d, k, r) = (5, 3, 4) and (7, 2, 3)")
    b.fact("symbols", (d, k, r))
    return b.done(count)
