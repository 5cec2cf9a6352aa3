"""In-context learning of linear regression: Wick/Isserlis moments and the closed forms of ``icl.*`` (SymPy or NumPy
inputs; bad input raises :class:`theory.validation.InputError`). Part of :mod:`theory.icl` (the setting and the
conventions are in its docstring); the derivations are in :mod:`theory.icl_derive` (fixed sizes) and
:mod:`theory.icl_sizes` (symbolic sizes and the statement's hypotheses)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import sympy as sp

from theory.validation import InputError, as_finite_array, as_spd_matrix

Nsym, Msym = sp.symbols("N M", positive=True)


# ------------------------------------------------------------------------------------------------
# Wick / Isserlis


def wick_expectation(indices: tuple[int, ...], cov: sp.Matrix) -> sp.Expr:
    """``E[z_{i_1} ⋯ z_{i_k}]`` for ``z ~ N(0, cov)``: the sum over perfect pairings of the
    product of covariances (Isserlis/Wick). Zero covariances prune the recursion.

    >>> a, b, c = sp.symbols("a b c")
    >>> C = sp.Matrix([[a, b], [b, c]])
    >>> sp.expand(wick_expectation((0, 0, 1, 1), C))
    a*c + 2*b**2
    >>> wick_expectation((0, 1, 1), C)
    0
    """
    cov = sp.ImmutableMatrix(cov)
    return _wick(tuple(indices), cov)


@lru_cache(maxsize=200_000)
def _wick(idx: tuple[int, ...], cov: sp.ImmutableMatrix) -> sp.Expr:
    if len(idx) % 2:
        return sp.Integer(0)
    if not idx:
        return sp.Integer(1)
    first, rest = idx[0], idx[1:]
    total = sp.Integer(0)
    for j, other in enumerate(rest):
        c = cov[first, other]
        if c == 0:
            continue
        total += c * _wick(rest[:j] + rest[j + 1:], cov)
    return total


def symbolic_spd(d: int, name: str = "l") -> sp.Matrix:
    """A symmetric ``d×d`` matrix of symbols ``l_ij`` (i ≤ j), standing for a general Λ.

    >>> symbolic_spd(2)
    Matrix([
    [l_11, l_12],
    [l_12, l_22]])
    """
    syms = {}
    for i in range(d):
        for j in range(i, d):
            syms[(i, j)] = syms[(j, i)] = sp.Symbol(f"{name}_{i + 1}{j + 1}", real=True)
    return sp.Matrix(d, d, lambda i, j: syms[(i, j)])


def _blockdiag(*blocks: sp.Matrix) -> sp.ImmutableMatrix:
    return sp.ImmutableMatrix(sp.diag(*blocks))


# ------------------------------------------------------------------------------------------------
# public closed forms (SymPy or NumPy)


def _simplified_residual(e):
    """``sp.simplify(e)`` of a residual (an expression or an explicit matrix), trying the exact
    ``expand`` and then ``cancel`` first: when one of them already gives 0 (every entry), that 0 is
    what ``simplify`` returns too, at a fraction of the cost (issue 46); otherwise ``simplify``."""
    for cheap in (sp.expand, sp.cancel):
        x = cheap(e)
        if all(v == 0 for v in x) if isinstance(x, sp.MatrixBase) else x == 0:
            return x
    return sp.simplify(e)


def _is_sympy(*xs) -> bool:
    return any(isinstance(x, (sp.Basic, sp.MatrixBase)) for x in xs)


def _check_count(N, name: str):
    if isinstance(N, sp.Basic) and not N.is_number:
        return N
    try:
        v = float(N)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {N!r}") from None
    if not np.isfinite(v) or v < 1:
        raise InputError(f"{name} must be ≥ 1, got {N!r}")
    return N


def _lam(Lambda):
    """Validate Λ: a SymPy matrix (symmetric; positive definite when numeric) or an SPD array."""
    if isinstance(Lambda, sp.MatrixBase):
        L = sp.Matrix(Lambda)
        if L.rows != L.cols or L.rows == 0:
            raise InputError(f"Lambda must be a square matrix, got shape {L.shape}")
        if L != L.T:
            raise InputError("Lambda is not symmetric")
        if L.is_symbolic() is False or all(e.is_number for e in L):
            if not all(ev.is_positive for ev in L.eigenvals()):
                raise InputError("Lambda is not positive definite")
        return L
    return as_spd_matrix(Lambda, "Lambda")


def gamma_n(Lambda, N):
    """``Γ_N = (1 + 1/N) Λ + (1/N) tr(Λ) I_d`` (SymPy in → SymPy out, else NumPy float64).

    >>> gamma_n(sp.Matrix([[1, 0], [0, 2]]), 2)
    Matrix([
    [3,   0],
    [0, 9/2]])
    >>> gamma_n([1.0, 1.0], 4)
    array([[1.75, 0.  ],
           [0.  , 1.75]])
    """
    N = _check_count(N, "N")
    L = _lam(Lambda)
    if isinstance(L, sp.MatrixBase):
        N = sp.sympify(N)
        return (1 + 1 / N) * L + L.trace() / N * sp.eye(L.rows)
    N = float(N)
    return (1 + 1 / N) * L + np.trace(L) / N * np.eye(L.shape[0])


@dataclass(frozen=True)
class LSAPredictor:
    """The trained LSA's predictor ``ŷ = x_qᵀ Γ_N^{-1} (1/M) Σ_i y_i x_i``.

    ``matrix`` is ``Γ_N^{-1}`` (SymPy or NumPy). Call with context ``X`` of shape ``(..., M, d)``
    (rows are examples), labels ``y`` of shape ``(..., M)`` and queries ``x_q`` of shape ``(..., d)``.
    """

    matrix: Any

    def __call__(self, X, y, x_q):
        G = np.asarray(self.matrix, dtype=np.float64)
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        x_q = np.asarray(x_q, dtype=np.float64)
        if X.shape[-1] != G.shape[0] or x_q.shape[-1] != G.shape[0] or y.shape != X.shape[:-1]:
            raise InputError(f"shapes do not match: X {X.shape}, y {y.shape}, x_q {x_q.shape}, d={G.shape[0]}")
        h = np.einsum("...m,...md->...d", y, X) / X.shape[-2]
        return np.einsum("...d,de,...e->...", x_q, G, h)


def lsa_predictor(Lambda, N) -> LSAPredictor:
    """The closed-form predictor of the globally optimal LSA trained with context length ``N``.

    >>> p = lsa_predictor(sp.eye(2), 3)
    >>> p.matrix
    Matrix([
    [1/2,   0],
    [  0, 1/2]])
    >>> float(p([[1.0, 0.0]], [2.0], [1.0, 0.0]))
    1.0
    """
    G = gamma_n(Lambda, N)
    return LSAPredictor(G.inv() if isinstance(G, sp.MatrixBase) else np.linalg.inv(G))


def _mat(x, name, d, sympy_mode):
    if sympy_mode:
        X = sp.Matrix(x) if not isinstance(x, sp.MatrixBase) else x
        if X.shape != (d, d):
            raise InputError(f"{name} must have shape ({d}, {d}), got {X.shape}")
        return X
    return as_finite_array(x, name, shape=(d, d))


def population_loss(Lambda, N, B):
    """``L(B) = ½[tr(Bᵀ ΛΓ_N B Λ) − 2 tr(Λ B Λ) + tr Λ]``: the population loss of the LSA whose
    only non-zero blocks give ``ŷ = hᵀ B x_q`` (``B = w22 W11^{KQ}``), trained length ``N``.

    >>> population_loss(sp.eye(1), 1, sp.Matrix([[0]]))
    1/2
    >>> round(float(population_loss([[1.0]], 1, [[1 / 3]])), 12)
    0.333333333333
    """
    G = gamma_n(Lambda, N)
    L = _lam(Lambda)
    sym = isinstance(G, sp.MatrixBase)
    B = _mat(B, "B", G.shape[0], sym)
    if sym:
        return sp.Rational(1, 2) * ((B.T * L * G * B * L).trace() - 2 * (L * B * L).trace() + L.trace())
    return 0.5 * (np.trace(B.T @ L @ G @ B @ L) - 2 * np.trace(L @ B @ L) + np.trace(L))


def loss_minimum(Lambda, N):
    """``min L = ½[tr Λ − tr(Γ_N^{-1} Λ²)]``.

    >>> loss_minimum(sp.eye(1), 1)
    1/3
    """
    L = _lam(Lambda)
    G = gamma_n(L, N)
    if isinstance(G, sp.MatrixBase):
        return sp.Rational(1, 2) * (L.trace() - (G.inv() * L * L).trace())
    return 0.5 * (np.trace(L) - np.trace(np.linalg.solve(G, L @ L)))


def linear_task_risk(Lambda, N, M):
    """Test risk ``E(ŷ − ⟨w, x_q⟩)²`` of the trained LSA (length ``N``) on prompts of length ``M``:
    ``(1/M) tr(Γ_N^{-2} Λ² (Λ + tr(Λ) I)) + (1/N²) tr(Γ_N^{-2} Λ (Λ + tr(Λ) I)²)``.

    >>> linear_task_risk(sp.eye(1), 1, 1)
    2/3
    >>> round(float(linear_task_risk([1.0, 1.0], 10, 10)), 6)
    0.461538
    """
    L = _lam(Lambda)
    G = gamma_n(L, N)
    M = _check_count(M, "M")
    if isinstance(G, sp.MatrixBase):
        N, M = sp.sympify(N), sp.sympify(M)
        Gi2 = (G * G).inv()
        K = L + L.trace() * sp.eye(L.rows)
        return (Gi2 * L * L * K).trace() / M + (Gi2 * L * K * K).trace() / N**2
    N, M = float(N), float(M)
    Gi2 = np.linalg.inv(G @ G)
    K = L + np.trace(L) * np.eye(L.shape[0])
    return np.trace(Gi2 @ L @ L @ K) / M + np.trace(Gi2 @ L @ K @ K) / N**2


def _general_inputs(Lambda, N, M, a, Sigma):
    L = _lam(Lambda)
    G = gamma_n(L, N)
    M = _check_count(M, "M")
    d = G.shape[0]
    sym = isinstance(G, sp.MatrixBase) or _is_sympy(a, Sigma)
    if sym:
        L, G = sp.Matrix(L), sp.Matrix(G)
        a = sp.Matrix(a)
        if a.shape not in ((d, 1), (1, d)):
            raise InputError(f"a must have {d} entries, got shape {a.shape}")
        a = a.reshape(d, 1)
        S = _mat(Sigma, "Sigma", d, True)
        return L, G, sp.sympify(N), sp.sympify(M), a, S, True
    a = as_finite_array(a, "a", shape=(d,))
    S = as_finite_array(Sigma, "Sigma", shape=(d, d))
    return L, G, float(N), float(M), a, S, False


def general_target_risk(Lambda, N, M, a, Sigma, min_risk):
    """ZFB Thm 4.2 (corrected): test risk of the trained LSA on any law with ``x ~ N(0, Λ)``,
    ``a = Λ^{-1} E[xy]``, ``Σ = Cov(xy)``, ``min_risk = min_w E(⟨w,x⟩ − y)²``:

    ``min_risk + (1/M) tr(Σ Γ_N^{-2} Λ) + (1/N²)[‖a‖²_{Γ_N^{-2}Λ³} + 2 tr(Λ) ‖a‖²_{Γ_N^{-2}Λ²}
    + tr(Λ)² ‖a‖²_{Γ_N^{-2}Λ}]``.

    >>> general_target_risk(sp.eye(1), 1, 1, [1], sp.Matrix([[2]]), 0)
    2/3
    """
    L, G, N, M, a, S, sym = _general_inputs(Lambda, N, M, a, Sigma)
    if sym:
        Gi2 = (G * G).inv()
        nrm = lambda A: (a.T * A * a)[0, 0]  # noqa: E731
        t = L.trace()
        return (sp.sympify(min_risk) + (S * Gi2 * L).trace() / M
                + (nrm(Gi2 * L**3) + 2 * t * nrm(Gi2 * L**2) + t**2 * nrm(Gi2 * L)) / N**2)
    Gi2 = np.linalg.inv(G @ G)
    t = np.trace(L)
    nrm = lambda A: float(a @ A @ a)  # noqa: E731
    return (float(min_risk) + np.trace(S @ Gi2 @ L) / M
            + (nrm(Gi2 @ L @ L @ L) + 2 * t * nrm(Gi2 @ L @ L) + t**2 * nrm(Gi2 @ L)) / N**2)


def stated_general_target_risk(Lambda, N, M, a, Sigma, min_risk):
    """The risk formula as lecture notes 000 writes it (every norm ``‖a‖_{Λ^{-2}Λ}``, trace ``tr(ΣΛ^{-2}Λ)``):
    kept only to show that it is wrong (erratum ``icl.general_target_risk``)."""
    L, G, N, M, a, S, sym = _general_inputs(Lambda, N, M, a, Sigma)
    if sym:
        Li = L.inv()
        t = L.trace()
        n = (a.T * Li * a)[0, 0]
        return sp.sympify(min_risk) + (S * Li).trace() / M + (n + 2 * t * n + t**2 * n) / N**2
    Li = np.linalg.inv(L)
    t = np.trace(L)
    n = float(a @ Li @ a)
    return float(min_risk) + np.trace(S @ Li) / M + (n + 2 * t * n + t**2 * n) / N**2
