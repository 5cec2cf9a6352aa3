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
    X, G, A, B = _mat("X", n, k), _mat("G", n, d), _mat("A", r, k), _mat("B", d, r)
    W0 = _mat("W", d, k)
    s = sp.Symbol("s", positive=True)
    Y = X * (W0 + s * B * A).T
    b.step("Forward pass Y = X (W0 + s B A)ᵀ (entry Y_00 shown)", Y[0, 0])
    L = sum(G[i, j] * Y[i, j] for i in range(n) for j in range(d))
    b.step("Loss linearised by the upstream gradient G: L = Σ_ij G_ij Y_ij", L)
    gA = A.applyfunc(lambda a: sp.expand(sp.diff(L, a)))
    gB = B.applyfunc(lambda e: sp.expand(sp.diff(L, e)))
    b.step("∂L/∂A_pq by differentiating L entry by entry", gA)
    b.step("∂L/∂B_pq by differentiating L entry by entry", gB)
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
    A, B = _mat("A", r, k), _mat("B", d, r)
    M = B * A
    b.step("The update ΔW = B A", M)
    m = r + 1
    nonzero = 0
    if m <= min(d, k):
        for rows in itertools.combinations(range(d), m):
            for cols in itertools.combinations(range(k), m):
                if sp.expand(M.extract(list(rows), list(cols)).det()) != 0:
                    nonzero += 1
    b.step(f"Number of {m}×{m} minors of BA that do not expand to 0", sp.Integer(nonzero))
    top = sp.expand(M.extract(list(range(r)), list(range(r))).det())
    b.fact("leading_r_minor", top)
    b.step(f"The leading {r}×{r} minor (a nonzero polynomial: rank r is attained generically)", top)
    return b.done(sp.Integer(nonzero))


@lru_cache(maxsize=None)
def derive_lora_count() -> Derivation:
    """Count the free entries of ``A`` (r×k) and ``B`` (d×r) built symbolically on the grid
    ``d, k, r ∈ {1, 2}`` and fit the multilinear polynomial in (d, k, r) through the 8 counts;
    the fit is the trainable-parameter count ``r(d + k)``.

    >>> sp.factor(derive_lora_count().result)
    r*(d + k)
    """
    b = DerivationBuilder("Trainable parameters of a LoRA adapter")
    d, k, r = sp.symbols("d k r", positive=True, integer=True)
    monos = [sp.Integer(1), d, k, r, d * k, d * r, k * r, d * k * r]
    cs = sp.symbols("c0:8")
    ansatz = sum(c * mo for c, mo in zip(cs, monos))
    eqs = []
    for dd, kk, rr in itertools.product((1, 2), repeat=3):
        n_free = len(_mat("A", rr, kk).free_symbols | _mat("B", dd, rr).free_symbols)
        eqs.append(sp.Eq(ansatz.subs({d: dd, k: kk, r: rr}), n_free))
    b.step("Counts of free entries of A and B on the grid d,k,r ∈ {1,2} (first equation)", eqs[0])
    sol = sp.solve(eqs, cs, dict=True)[0]
    count = sp.expand(ansatz.subs(sol))
    b.step("Multilinear polynomial through the 8 counts", count)
    b.fact("symbols", (d, k, r))
    return b.done(count)
