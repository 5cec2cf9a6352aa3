"""In-context learning of linear regression by linear self-attention, derived in SymPy (claims ``icl.*``).

Setting (Zhang, Frei, Bartlett, JMLR 2024; lecture notes 000): ``x_i ~ N(0, Λ)``, ``w ~ N(0, I_d)``,
``y_i = ⟨w, x_i⟩``; the prompt is the column-form matrix

    E = [[x_1 … x_N x_q], [y_1 … y_N 0]] ∈ R^{(d+1)×(N+1)}        (tokens are COLUMNS here)

and ``f_LSA(E) = E + W^{PV} E (Eᵀ W^{KQ} E)/ρ``, ``ŷ = f_LSA(E)[d+1, N+1]``.

Convention used throughout: with ``h = (1/N) Σ y_i x_i`` and ``B = w22 · W11^{KQ}`` (the other
blocks zero) the prediction is ``ŷ = hᵀ B x_q``; the global minimiser is ``B = Γ_N^{-1}``,
``Γ_N = (1 + 1/N) Λ + (1/N) tr(Λ) I``.

Every derivation starts from definitions: Gaussian moments come from Isserlis/Wick pairings
(:func:`wick_expectation`), gradients from ``sp.diff``, limits from ``sp.limit``. The public
closed-form functions (:func:`gamma_n`, :func:`lsa_predictor`, :func:`population_loss`,
:func:`loss_minimum`, :func:`linear_task_risk`, :func:`general_target_risk`) accept SymPy or NumPy
inputs and raise :class:`theory.validation.InputError` on bad input.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import sympy as sp

from sympy.matrices.expressions.matadd import canonicalize

from theory import gaussian
from theory.derivation import Derivation, DerivationBuilder
from theory.sizes import instantiate
from theory.validation import InputError, as_finite_array, as_spd_matrix

__all__ = [
    "wick_expectation",
    "symbolic_spd",
    "gamma_n",
    "lsa_predictor",
    "LSAPredictor",
    "population_loss",
    "loss_minimum",
    "linear_task_risk",
    "general_target_risk",
    "stated_general_target_risk",
    "derive_lsa_prediction_form",
    "derive_moments",
    "derive_wishart",
    "derive_population_loss",
    "derive_global_min",
    "derive_loss_minimum",
    "derive_linear_task_risk",
    "derive_general_target_risk",
    "derive_limits",
    "derive_gd_one_step",
    "derive_nonconvex",
    "derive_lsa_prediction_form_general",
    "derive_all_weights_min",
    "exact_lsa_loss",
    "derive_population_loss_general",
    "derive_global_min_general",
    "derive_loss_minimum_general",
    "derive_linear_task_risk_general",
]

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


# ------------------------------------------------------------------------------------------------
# derivations


@lru_cache(maxsize=None)
def derive_lsa_prediction_form(d: int = 2, N: int = 2) -> Derivation:
    """Expand ``[E + W^{PV} E Eᵀ W^{KQ} E/ρ]_{d+1,N+1}`` for fully symbolic ``W^{PV}, W^{KQ}, E``
    and show it equals the block form ``[w21ᵀ, w22](E Eᵀ/ρ)[W11; w21'ᵀ] x_q``.

    ``result`` is the expanded prediction; ``facts``: ``residual`` (0), ``params_used`` (the
    weights it depends on), the symbols, and ``block_form``.

    >>> D = derive_lsa_prediction_form(1, 1)
    >>> D.facts["residual"]
    0
    >>> sorted(map(str, D.facts["params_used"]))
    ['kq_11', 'kq_21', 'pv_21', 'pv_22']
    """
    b = DerivationBuilder("LSA prediction: only the last row of W^PV and first d columns of W^KQ matter")
    b.symbols(pv_ij="entry (i, j) of W^PV", kq_ij="entry (i, j) of W^KQ", x_ji="coordinate i of context example j",
              xq_i="coordinate i of the query", y_j="label of example j", rho="the normalisation ρ")
    D1, T = d + 1, N + 1
    PV = sp.Matrix(D1, D1, lambda i, j: sp.Symbol(f"pv_{i + 1}{j + 1}"))
    KQ = sp.Matrix(D1, D1, lambda i, j: sp.Symbol(f"kq_{i + 1}{j + 1}"))
    X = sp.Matrix(d, T, lambda i, j: sp.Symbol(f"x_{j + 1}{i + 1}" if j < N else f"xq_{i + 1}"))
    y = sp.Matrix(1, T, lambda i, j: sp.Symbol(f"y_{j + 1}") if j < N else sp.Integer(0))
    E = X.col_join(y)
    rho = sp.Symbol("rho", positive=True)
    b.define("Prompt E (tokens are columns, query label 0)", E)
    b.define("f_LSA(E) = E + W^PV E (Eᵀ W^KQ E)/ρ; the prediction is entry (d+1, N+1)",
             r"\hat y=\Big[E+W^{PV}E\,\frac{E^{\top}W^{KQ}E}{\rho}\Big]_{d+1,N+1}")
    F = E + PV * E * (E.T * KQ * E) / rho
    yhat = sp.expand(F[d, N])
    b.step("ŷ = [E + W^(PV) E (Eᵀ W^(KQ) E)/ρ], entry (d+1, N+1), expanded", yhat)
    used = sorted(yhat.free_symbols & (set(PV) | set(KQ)), key=str)
    b.fact("params_used", used)
    b.step("Weights that appear in ŷ", sp.Matrix([used]))
    row = PV[d, :]
    cols = KQ[:, :d]
    xq = X[:, N]
    block = sp.expand((row * (E * E.T) / rho * cols * xq)[0, 0])
    b.define("Block form [w21ᵀ, w22] (E Eᵀ/ρ) [W11; w21'ᵀ] x_q (the claimed form), expanded", block)
    b.obligation("prediction_equals_block_form", yhat - block)
    res = sp.simplify(yhat - block)
    b.step("Difference (simplified)", res)
    b.record(residual=res, block_form=block, symbols={"PV": PV, "KQ": KQ, "X": X, "y": y, "rho": rho})
    return b.done(yhat)


def _moment_blocks(d: int):
    """Joint Gaussian z = (w, x_1, x_2): indices and covariance diag(I, Λ, Λ) for symbolic Λ."""
    L = symbolic_spd(d)
    cov = _blockdiag(sp.eye(d), L, L)
    w = list(range(d))
    x1 = list(range(d, 2 * d))
    x2 = list(range(2 * d, 3 * d))
    return L, cov, w, x1, x2


def _gamma(L: sp.Matrix, N=Nsym) -> sp.Matrix:
    """``Γ_N = (1 + 1/N) Λ + (1/N) tr(Λ) I`` for an explicit SymPy matrix (no validation)."""
    return (1 + 1 / N) * L + L.trace() / N * sp.eye(L.rows)


def _loss_trace(L, G, B, I):
    """``½ tr(Λ (Bᵀ ΛΓ B − Bᵀ Λ − Λ B + I))``: the population loss after inserting
    ``E[hhᵀ] = ΛΓ_N``, ``E[hwᵀ] = Λ``, ``E[wwᵀ] = I`` into ``½ tr(Λ E[(Bᵀh − w)(Bᵀh − w)ᵀ])``.
    Works for explicit matrices and for MatrixSymbols (then the trace is a ``Trace``)."""
    inner = B.T * L * G * B - B.T * L - L * B + I
    if isinstance(L, sp.MatrixBase):
        return sp.Rational(1, 2) * (L * inner).trace()
    return sp.Trace(L * inner) / 2


def _general_symbols():
    n = sp.Symbol("n", integer=True, positive=True)
    return n, sp.MatrixSymbol("Lambda", n, n), sp.MatrixSymbol("Gamma_N", n, n), sp.MatrixSymbol("B", n, n)


@lru_cache(maxsize=None)
def derive_moments(d: int = 2) -> Derivation:
    """``E[h hᵀ]`` and ``E[h wᵀ]`` for ``h = (1/N) Σ y_i x_i`` by Wick sums at symbolic Λ (d×d),
    then the matrix form for general Λ (MatrixSymbol algebra).

    ``result`` = ``{"hh": E[hhᵀ], "hw": E[hwᵀ]}`` (SymPy matrices in ``l_ij`` and ``N``);
    ``facts``: ``Lambda``, ``hh_minus_LambdaGamma`` (zero matrix), ``matrix_form_residual`` (0).

    >>> D = derive_moments(2)
    >>> D.facts["hh_minus_LambdaGamma"].is_zero_matrix
    True
    >>> D.result["hw"] == D.facts["Lambda"]
    True
    """
    b = DerivationBuilder("Moments of h = (1/N) Σ y_i x_i by Isserlis/Wick")
    b.symbols(l_ij="entry (i, j) of the covariance Λ of x (symmetric, l_ji = l_ij)", N="context length",
              w="task vector, N(0, I_d)", h="(1/N) Σ_i y_i x_i with y_i = ⟨w, x_i⟩", A_pq="entry of a generic matrix A",
              n="dimension (general Λ)")
    L, cov, w, x1, x2 = _moment_blocks(d)
    b.define("Joint Gaussian (w, x_i, x_j), i ≠ j: covariance diag(I, Λ, Λ)", sp.Matrix(cov))
    b.assume("Isserlis/Wick: a Gaussian moment E[z_1 ⋯ z_2k] is the sum over pairings of products of covariances",
             r"E[z_1\cdots z_{2k}]=\sum_{\text{pairings}}\prod \operatorname{Cov}", key="Isserlis' theorem")
    # E[y_i x_ia y_i x_ib] with y_i = Σ_k w_k x_ik: degree-6 Wick sums
    same = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        _wick((w[k], x1[k], w[l], x1[l], x1[a], x1[c]), cov) for k in range(d) for l in range(d))))
    cross = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        _wick((w[k], x1[k], x1[a], w[l], x2[l], x2[c]), cov) for k in range(d) for l in range(d))))
    b.step("Same example i = j: E[y_i² x_i x_iᵀ] (Wick sum)", same)
    b.step("Different examples i ≠ j: E[y_i y_j x_i x_jᵀ] (Wick sum)", cross)
    hh = sp.expand(same / Nsym + (1 - 1 / Nsym) * cross)
    b.step("E[hhᵀ] = (1/N)·same + (1 − 1/N)·cross  (N same-index terms, N(N−1) others, over N²)", hh)
    hw = sp.Matrix(d, d, lambda a, c: sp.expand(sum(_wick((w[k], x1[k], x1[a], w[c]), cov) for k in range(d))))
    b.step("E[h wᵀ] = E[y x wᵀ] (Wick sum)", hw)
    G = _gamma(L)
    b.define("Γ_N = (1 + 1/N)Λ + (1/N)tr(Λ)I", G, compact=r"\Gamma_N=(1+\tfrac1N)\Lambda+\tfrac1N\operatorname{tr}(\Lambda)I")
    b.obligation("hh_equals_Lambda_Gamma", hh - L * G, description="E[hhᵀ] = ΛΓ_N")
    b.obligation("hw_equals_Lambda", hw - L, description="E[hwᵀ] = Λ")
    resid = _simplified_residual(hh - L * G)
    b.step("E[hhᵀ] − Λ Γ_N", resid)
    b.fact("hh_minus_LambdaGamma", resid)
    b.fact("hw_minus_Lambda", _simplified_residual(hw - L))
    # general Λ: the three Wick pairings of E[x xᵀ A x xᵀ] read as matrix products
    n = sp.Symbol("n", integer=True, positive=True)
    Lm, A = sp.MatrixSymbol("Lambda", n, n), sp.MatrixSymbol("A", n, n)
    four = Lm * A * Lm + Lm * A.T * Lm + sp.Trace(A * Lm) * Lm
    b.assume("General Λ: the pairings (ac)(eb), (ae)(cb), (ab)(ce) of Σ A_ce E[x_a x_c x_e x_b] read as "
             "matrix products give E[x xᵀ A x xᵀ]", four, key="fourth-moment pairings")
    four_entry = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        sp.Symbol(f"A_{p}{q}") * _wick((x1[a], x1[p], x1[q], x1[c]), cov) for p in range(d) for q in range(d))))
    A_d = sp.Matrix(d, d, lambda p, q: sp.Symbol(f"A_{p}{q}"))
    b.step(f"E[x xᵀ A x xᵀ] by Wick sums at d = {d}", four_entry)
    b.obligation("four_moment_matrix_form", four_entry - (L * A_d * L + L * A_d.T * L + (A_d * L).trace() * L),
                 description=f"the matrix form of the fourth moment agrees with the Wick sum at d = {d}")
    four_check = _simplified_residual(four_entry - (L * A_d * L + L * A_d.T * L + (A_d * L).trace() * L))
    b.fact("four_moment_residual", four_check)
    b.step(f"Check of that matrix form against the Wick sum at d = {d}", four_check)
    hh_gen = (four.subs(A, sp.Identity(n)) / Nsym + (1 - 1 / Nsym) * Lm * Lm)
    G_gen = (1 + 1 / Nsym) * Lm + sp.Trace(Lm) / Nsym * sp.Identity(n)
    mres = sp.simplify(sp.expand(hh_gen.doit() - Lm * G_gen))
    b.step("General Λ: E[hhᵀ] = (1/N)E[xxᵀxxᵀ] + (1 − 1/N)Λ² minus ΛΓ_N", mres)
    b.obligation("general_hh_equals_Lambda_Gamma", mres,
                 description="matrix-expression algebra (SymPy returns ZeroMatrix when it vanishes)")
    b.fact("matrix_form_residual", mres)
    b.fact("Lambda", L)
    return b.done({"hh": hh, "hw": hw})


@lru_cache(maxsize=None)
def derive_wishart(d: int = 2) -> Derivation:
    """``E[S A S]`` for ``S = (1/M) Σ_i x_i x_iᵀ`` and a general (non-symmetric) ``A`` by Wick sums.

    ``result`` is the derived matrix; ``facts["residual"]`` is its difference from
    ``ΛAΛ + (1/M)(ΛAᵀΛ + tr(AΛ)Λ)`` (zero), ``facts["A"]``, ``facts["Lambda"]``.

    >>> derive_wishart(2).facts["residual"].is_zero_matrix
    True
    """
    b = DerivationBuilder("Wishart moment E[S A S] by Isserlis/Wick")
    b.symbols(l_ij="entry (i, j) of Λ (symmetric)", A_pq="entry of a generic matrix A", M="number of samples in S")
    L, cov, _, x1, x2 = _moment_blocks(d)
    b.define("S = (1/M) Σ_i x_i x_iᵀ with x_i ~ N(0, Λ) independent", r"S=\tfrac1M\sum_{i=1}^M x_ix_i^{\top}")
    A = sp.Matrix(d, d, lambda p, q: sp.Symbol(f"A_{p + 1}{q + 1}"))
    same = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        A[p, q] * _wick((x1[a], x1[p], x1[q], x1[c]), cov) for p in range(d) for q in range(d))))
    cross = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        A[p, q] * _wick((x1[a], x1[p], x2[q], x2[c]), cov) for p in range(d) for q in range(d))))
    b.step("i = j: E[x xᵀ A x xᵀ] (Wick sum)", same)
    b.step("i ≠ j: E[x_i x_iᵀ A x_j x_jᵀ] (Wick sum)", cross)
    res = sp.expand(same / Msym + (1 - 1 / Msym) * cross)
    b.step("E[SAS] = (1/M)·same + (1 − 1/M)·cross", res)
    target = L * A * L + (L * A.T * L + (A * L).trace() * L) / Msym
    b.obligation("wishart_matrix_form", res - target, description="E[SAS] = ΛAΛ + (1/M)(ΛAᵀΛ + tr(AΛ)Λ)")
    resid = _simplified_residual(res - target)
    b.step("Minus ΛAΛ + (1/M)(ΛAᵀΛ + tr(AΛ)Λ)", resid)
    b.record(residual=resid, A=A, Lambda=L)
    return b.done(res)


@lru_cache(maxsize=None)
def derive_population_loss(d: int = 2) -> Derivation:
    """``L(B) = ½ E(hᵀ B x_q − wᵀ x_q)²`` from the Wick moments of :func:`derive_moments`.

    ``result`` is a polynomial in ``B`` entries ``b_ij``, ``l_ij`` and ``N``; ``facts``: ``B``,
    ``Lambda``, ``gradient`` (∂L/∂B, a matrix).

    >>> D = derive_population_loss(1)
    >>> sp.factor(D.result.subs(D.facts["B"][0, 0], 0))
    l_11/2
    """
    b = DerivationBuilder("Population loss of the LSA in B = w22·W11")
    b.symbols(b_ij="entry (i, j) of B = w22·W11", l_ij="entry (i, j) of Λ (symmetric)", N="context length")
    mom = derive_moments(d)
    b.inherit(mom, "moments")
    L = mom.facts["Lambda"]
    B = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"b_{i + 1}{j + 1}", real=True))
    b.define("Block form with only w22, W11 non-zero and ρ = N: ŷ = hᵀ B x_q, B = w22·W11", B)
    b.assume("x_q ~ N(0, Λ) is independent of (h, w): E over x_q gives ½ E (Bᵀh − w)ᵀ Λ (Bᵀh − w)",
             r"L(B)=\tfrac12\operatorname{tr}\big(\Lambda\,E[(B^{\top}h-w)(B^{\top}h-w)^{\top}]\big)", key="independent query x_q")
    inner = B.T * mom.result["hh"] * B - B.T * mom.result["hw"] - mom.result["hw"].T * B + sp.eye(d)
    loss = sp.expand(sp.Rational(1, 2) * (L * inner).trace())
    b.step("Insert the derived E[hhᵀ], E[hwᵀ] and E[wwᵀ] = I", loss,
           compact=r"L(B)=\tfrac12\big[\operatorname{tr}(B^{\top}\Lambda\Gamma_N B\Lambda)-2\operatorname{tr}(\Lambda B\Lambda)+\operatorname{tr}\Lambda\big]")
    grad = sp.Matrix(d, d, lambda i, j: sp.expand(sp.diff(loss, B[i, j])))
    b.step("Gradient ∂L/∂B (differentiated entry by entry)", grad,
           compact=r"\nabla_B L=\Lambda\Gamma_N B\Lambda-\Lambda^2")
    G = _gamma(L)
    b.obligation("gradient_matrix_form", grad - (L * G * B * L - L * L), description="∂L/∂B = ΛΓ_N B Λ − Λ²")
    b.record(gradient=grad, B=B, Lambda=L)
    return b.done(loss)


@lru_cache(maxsize=None)
def derive_global_min(d: int = 2) -> Derivation:
    """Solve ``∇_B L = 0`` at symbolic Λ, derive the stationarity equation for general Λ by
    matrix calculus and solve it entrywise in the eigenbasis, and derive the conserved quantity
    ``u² − ‖U‖_F²`` of the gradient flow on ``B = uU`` (u = w22, U = W11) and the limit of u.

    ``result`` is the solution ``B*`` (SymPy matrix); facts: ``residual_vs_gamma_inv`` (zero),
    ``hessian_B`` (Hessian in row-major vec B, equal to ``ΛΓ_N ⊗ Λ``), ``general_gradient``
    (the matrix-calculus gradient), ``eigen_solution`` (``δ_ij/γ_i``), ``conserved_rate``
    (d/dt of ``u² − ‖U‖_F²`` along the flow, 0), ``u_limit`` (in terms of ``F``, the Frobenius
    norm of ``Γ_N^{-1}``), ``conserved``.

    >>> D = derive_global_min(2)
    >>> D.facts["residual_vs_gamma_inv"].is_zero_matrix
    True
    >>> D.facts["eigen_solution"]
    KroneckerDelta(i, j)/gamma_i
    """
    b = DerivationBuilder("Global minimiser of the population loss: w22·W11 = Γ_N⁻¹")
    b.symbols(b_ij="entry (i, j) of B = w22·W11", l_ij="entry (i, j) of Λ (symmetric)", N="context length",
              lambda_i="eigenvalue i of Λ", gamma_i="eigenvalue i of Γ_N, (1 + 1/N)λ_i + tr(Λ)/N",
              u="w22", U_ij="entry (i, j) of U = W11", L_B="the loss as a function of the entries of B",
              F="Frobenius norm of Γ_N^{-1}", nU="Frobenius norm of U")
    P = derive_population_loss(d)
    b.inherit(P, "population_loss")
    B, L = P.facts["B"], P.facts["Lambda"]
    G = _gamma(L)
    eqs = list(P.facts["gradient"])
    b.step("Stationarity: every entry of ∂L/∂B vanishes (a linear system in the b_ij)", sp.Matrix(eqs),
           compact=r"\Lambda\Gamma_N B\Lambda-\Lambda^2=0")
    sol = sp.solve(eqs, list(B), dict=True)
    b.obligation("unique_stationary_point", sp.Integer(len(sol) - 1), description="the linear system has exactly one solution")
    Bstar = B.subs(sol[0]).applyfunc(sp.factor) if sol else B * sp.nan
    b.step("Its solution", Bstar, compact=r"B^{*}=\Gamma_N^{-1}")
    b.obligation("solution_is_gamma_inverse", Bstar * G - sp.eye(d), description="B* Γ_N = I")
    resid = (Bstar * G - sp.eye(d)).applyfunc(sp.simplify)
    b.step("B* Γ_N − I", resid)
    b.fact("residual_vs_gamma_inv", resid)
    H = sp.hessian(P.result, list(B))
    b.step("Hessian in row-major vec B = (b_11, b_12, …)", H, compact=r"\nabla^2_{\operatorname{vec}B}L=\Lambda\Gamma_N\otimes\Lambda")
    b.obligation("hessian_is_kronecker", H - sp.kronecker_product(L * G, L), description="Hessian = ΛΓ_N ⊗ Λ")
    b.assume("ΛΓ_N and Λ are positive definite (Γ_N = (1+1/N)Λ + (tr Λ/N)I commutes with Λ), and a Kronecker "
             "product of positive-definite matrices is positive definite: L is strictly convex in B, so B* is the "
             "global minimum", key="positive-definite Hessian")
    b.fact("hessian_B", H)
    # general Λ: matrix calculus on the trace form, then entry (i, j) in the eigenbasis
    n, Lm, Gm, Bm = _general_symbols()
    loss_m = _loss_trace(Lm, Gm, Bm, sp.Identity(n))
    b.step("General Λ (n×n): the loss with E[hhᵀ] = ΛΓ_N and E[hwᵀ] = Λ inserted", loss_m)
    # Λ and Γ_N are symmetric and commute (Γ_N is a polynomial in Λ); canonicalize collects terms
    grad_m = canonicalize(sp.diff(loss_m, Bm).subs({Lm.T: Lm, Gm.T: Gm}).subs(Gm * Lm, Lm * Gm))
    b.step("Its matrix derivative, with Λ and Γ_N symmetric and commuting (Γ_N is a polynomial in Λ)", grad_m)
    b.fact("general_gradient", grad_m)
    at_d = grad_m.subs(n, d).xreplace({sp.MatrixSymbol(m.name, d, d): sp.ImmutableMatrix(v)
                                       for m, v in ((Lm, L), (Gm, G), (Bm, B))}).doit()
    b.obligation("general_gradient_matches_entrywise", sp.Matrix(at_d) - P.facts["gradient"],
                 description=f"the matrix-calculus gradient at n = {d} equals the entry-by-entry gradient")
    lam, gam = sp.MatrixSymbol("lambda", n, 1), sp.MatrixSymbol("gamma", n, 1)
    i, j = sp.symbols("i j", integer=True, nonnegative=True)
    li, lj, gi, bij = sp.symbols("lambda_i lambda_j gamma_i b_ij", positive=True)
    b.assume("Eigenbasis of Λ (rotations leave the loss invariant): Λ = diag(λ), and Γ_N = diag(γ) in the same basis "
             "because it is a polynomial in Λ", r"\Lambda=\operatorname{diag}(\lambda),\ \Gamma_N=\operatorname{diag}(\gamma)", key="eigenbasis of Λ")
    entry = grad_m.subs({Lm: sp.DiagMatrix(lam), Gm: sp.DiagMatrix(gam)})[i, j].doit()
    # the Piecewise guards say 0 ≤ i, j ≤ n − 1, true for the indices of an entry
    entry = entry.replace(lambda e: isinstance(e, sp.Piecewise), lambda e: e.args[0][0])
    entry = sp.factor(entry.subs({Bm[i, j]: bij, lam[i, 0]: li, lam[j, 0]: lj, gam[i, 0]: gi}))
    b.step("Entry (i, j) of the gradient in the eigenbasis (δ_ij = KroneckerDelta(i, j)), set to 0", sp.Eq(entry, 0),
           equation=True)
    esol = sp.solve(entry, bij)
    b.obligation("unique_eigenbasis_solution", sp.Integer(len(esol) - 1))
    b.step("Solved for b_ij", esol[0])
    # δ_ij vanishes unless i = j, and there λ_j = λ_i
    eig = sp.simplify(esol[0].subs(lj, li))
    b.step("δ_ij ≠ 0 only when i = j, where λ_j = λ_i: B* is diagonal with entries 1/γ_i, i.e. Γ_N⁻¹", eig)
    b.fact("eigen_solution", eig)
    # gradient flow on (u, U) with B = uU: u² − ‖U‖_F² is conserved, for ANY loss of the product
    u = sp.Symbol("u", real=True)
    U = sp.Matrix(d, d, lambda r, c: sp.Symbol(f"U_{r + 1}{c + 1}", real=True))
    LB = sp.Function("L_B")(*[u * e for e in U])
    b.define(f"Gradient flow on (u, U) for a loss L_B(uU) of the product (any differentiable L_B; d = {d})",
             r"\dot u=-\partial_u L_B(uU),\quad \dot U=-\nabla_U L_B(uU)")
    du = -sp.diff(LB, u)
    dU = U.applyfunc(lambda e: -sp.diff(LB, e))
    b.step("du/dt by the chain rule", du)
    Q = u**2 - sum(e**2 for e in U)
    rate = sp.expand(sp.diff(Q, u) * du + sum(sp.diff(Q, e) * de for e, de in zip(U, dU)))
    b.step("d/dt (u² − Σ U_ij²) along the flow", rate)
    b.obligation("conserved_along_flow", rate, description="d/dt (u² − Σ_ij U_ij²) = 0 for every loss of the product")
    b.fact("conserved_rate", rate)
    b.assume("ZFB initialisation: u² equals the squared Frobenius norm of U at t = 0, so u² − Σ_ij U_ij² = 0 for all t", key="balanced ZFB initialisation",
             clauses=("flow_limit",))
    F, nU = sp.symbols("F nU", positive=True)
    b.assume("At the limit uU = Γ_N⁻¹ (the flow converges to the global minimum, ZFB Thm 4.1), so u·nU = F",
             sp.Eq(u * nU, F), key="ZFB Thm 4.1 convergence", clauses=("flow_limit",))
    up = sp.Symbol("u", positive=True)
    lim = sp.solve([sp.Eq(up**2, nU**2), sp.Eq(up * nU, F)], [up, nU], dict=True)
    b.obligation("unique_positive_limit", sp.Integer(len(lim) - 1))
    b.step("u² = nU² and u·nU = F give u =", lim[0][up])
    b.record(u_limit=lim[0][up], conserved="u**2 - ||U||_F**2", F=F)
    return b.done(Bstar)


@lru_cache(maxsize=None)
def derive_loss_minimum(d: int = 2) -> Derivation:
    """Insert ``B* = Γ_N^{-1}`` into the derived loss; also the eigenbasis form ``½Σ(λ − λ²/γ)``,
    from the one-dimensional loss of one eigen-direction minimised over its entry ``b``.

    ``result`` is the minimum (SymPy in ``l_ij``, ``N``); facts: ``Lambda``, ``eigen_form``
    (per eigenvalue λ, in ``λ``, ``t = tr Λ`` and ``N``), ``eigen_symbols``.

    >>> D = derive_loss_minimum(1)
    >>> sp.factor(D.result)
    l_11/(N + 2)
    """
    b = DerivationBuilder("Minimum of the population loss")
    b.symbols(l_ij="entry (i, j) of Λ (symmetric)", N="context length", lambda_="an eigenvalue of Λ",
              t="tr Λ", gamma="the matching eigenvalue of Γ_N", b="the entry of B* in that eigen-direction")
    P, S = derive_population_loss(d), derive_global_min(d)
    b.inherit(S, "global_min")
    B = P.facts["B"]
    val = sp.simplify(P.result.subs({B[i, j]: S.result[i, j] for i in range(d) for j in range(d)}))
    b.step("L(B*) with the solved B*", val, compact=r"\tfrac12\big[\operatorname{tr}\Lambda-\operatorname{tr}(\Gamma_N^{-1}\Lambda^2)\big]")
    lam, t = sp.symbols("lambda t", positive=True)
    gam, bb = sp.Symbol("gamma", positive=True), sp.Symbol("b", real=True)
    b.assume("Eigenbasis: Λ, Γ_N and B* = Γ_N⁻¹ are diagonal, so the trace form of the loss is a sum over "
             "eigen-directions of its 1×1 version (Λ = λ, Γ_N = γ, B = b)", key="eigenbasis of Λ")
    per = sp.expand(_loss_trace(sp.Matrix([[lam]]), sp.Matrix([[gam]]), sp.Matrix([[bb]]), sp.eye(1)))
    b.step("One eigen-direction: ½ tr(Λ(BᵀΛΓB − BᵀΛ − ΛB + I)) at 1×1", per)
    bstar = sp.solve(sp.diff(per, bb), bb)
    b.obligation("unique_minimiser_per_direction", sp.Integer(len(bstar) - 1))
    b.step("∂/∂b = 0 gives b =", bstar[0])
    g = (1 + 1 / Nsym) * lam + t / Nsym
    per_min = sp.simplify(per.subs(bb, bstar[0]).subs(gam, g))
    b.step("Its minimum, with γ = (1 + 1/N)λ + t/N (t = tr Λ)", per_min)
    L = P.facts["Lambda"]
    diag_sub = {L[0, k]: 0 for k in range(1, d)} | {L[r, c]: 0 for r in range(d) for c in range(d) if r != c}
    tr = sum(L[k, k] for k in range(d))
    b.obligation("eigen_form_matches_matrix_form",
                 val.subs(diag_sub) - sum(per_min.subs({lam: L[k, k], t: tr}) for k in range(d)),
                 description=f"at diagonal Λ (d = {d}) the minimum is the sum of the per-direction minima")
    b.record(eigen_form=per_min, eigen_symbols=(lam, t), Lambda=L)
    return b.done(val)


@lru_cache(maxsize=None)
def derive_linear_task_risk(d: int = 2) -> Derivation:
    """``R = E(x_qᵀ Γ_N^{-1} S w − x_qᵀ w)²`` with ``S = (1/M)Σ x_i x_iᵀ`` via the Wishart moment,
    then its split into ``1/M`` and ``1/N²`` terms in the eigenbasis (general Λ).

    ``result`` = ``{"matrix": R(l_ij, N, M) at this d, "eigen": per-eigenvalue term r(λ, t, N, M)}``
    with ``R = Σ_k r(λ_k, tr Λ, N, M)``; ``facts["split_residual"]`` (``r`` minus the stated
    ``(1/M) λ²(λ+t)/γ_N² + (1/N²) λ(λ+t)²/γ_N²``, 0).

    >>> D = derive_linear_task_risk(1)
    >>> D.facts["split_residual"]
    0
    """
    b = DerivationBuilder("Linear-task test risk of the trained LSA")
    b.symbols(l_ij="entry (i, j) of Λ (symmetric)", N="training context length", M="test context length",
              lambda_="an eigenvalue of Λ", t="tr Λ", gamma_N="(1 + 1/N)λ + t/N", gamma_M="(1 + 1/M)λ + t/M",
              u="1/M")
    W = derive_wishart(d)
    b.inherit(W, "wishart")
    L, A = W.facts["Lambda"], W.facts["A"]
    G = _gamma(L)
    Gi = G.inv()
    ESS = W.result.subs({A[i, j]: (1 if i == j else 0) for i in range(d) for j in range(d)})
    b.step("E[S wwᵀ S] = E[S I S] (w ⟂ S, E wwᵀ = I), from the Wishart moment", ESS)
    b.obligation("ESS_equals_Lambda_Gamma_M", ESS - L * _gamma(L, Msym), description="E[SS] = ΛΓ_M")
    b.assume("x_q ~ N(0, Λ) independent of (S, w): R = tr(Λ E[(Γ⁻¹S w − w)(Γ⁻¹S w − w)ᵀ])", key="independent query x_q")
    R = (L * (Gi * ESS * Gi - Gi * L - L * Gi + sp.eye(d))).trace()
    R = sp.factor(R)  # factor puts it over one denominator and cancels (as factor(cancel(together(R))), cheaper)
    b.step("R = tr(Λ(Γ⁻¹E[SS]Γ⁻¹ − Γ⁻¹Λ − ΛΓ⁻¹ + I))", R)
    lam, t = sp.symbols("lambda t", positive=True)
    gN_, gM_ = sp.symbols("gamma_N gamma_M", positive=True)
    b.assume("Eigenbasis: Λ, Γ_N and E[SS] = ΛΓ_M are diagonal, so R is a sum over eigen-directions of its 1×1 "
             "version (Λ = λ, Γ_N = γ_N, Γ_M = γ_M)", key="eigenbasis of Λ")
    l1, gn1 = sp.Matrix([[lam]]), sp.Matrix([[gN_]])
    per = (l1 * (gn1.inv() * l1 * sp.Matrix([[gM_]]) * gn1.inv() - gn1.inv() * l1 - l1 * gn1.inv() + sp.eye(1))).trace()
    per = sp.expand(per)
    b.step("One eigen-direction", per)
    gN = (1 + 1 / Nsym) * lam + t / Nsym
    gM = (1 + 1 / Msym) * lam + t / Msym
    u = sp.Symbol("u", positive=True)
    per_u = per.subs({gN_: gN, gM_: gM}).subs(Msym, 1 / u)
    b.obligation("linear_in_one_over_M", sp.diff(per_u, u, 2), description="the risk is affine in 1/M")
    at_inf = sp.factor(sp.simplify(per_u.subs(u, 0)))
    slope = sp.factor(sp.simplify(sp.diff(per_u, u)))
    b.step("Its value at 1/M = 0 (the 1/N² term)", at_inf)
    b.step("Its coefficient of 1/M", slope)
    eigen = at_inf + slope / Msym
    b.step("Per-eigenvalue risk r(λ, t, N, M)", eigen)
    split = lam**2 * (lam + t) / (Msym * gN**2) + lam * (lam + t) ** 2 / (Nsym**2 * gN**2)
    b.define("The stated split (1/M) λ²(λ+t)/γ_N² + (1/N²) λ(λ+t)²/γ_N²", split)
    b.obligation("split_matches_stated_form", eigen - split)
    b.obligation("per_direction_form", per.subs({gN_: gN, gM_: gM}) - eigen)
    sres = _simplified_residual(eigen - split)
    b.step("r minus the stated split", sres)
    b.fact("split_residual", sres)
    diag_sub = {L[r, c]: 0 for r in range(d) for c in range(d) if r != c}
    tr = sum(L[k, k] for k in range(d))
    b.obligation("eigen_sum_matches_matrix_form",
                 R.subs(diag_sub) - sum(eigen.subs({lam: L[k, k], t: tr}) for k in range(d)),
                 description=f"at diagonal Λ (d = {d}) R is the sum of the per-eigenvalue terms")
    b.fact("eigen_symbols", (lam, t))
    b.fact("Lambda", L)
    return b.done({"matrix": R, "eigen": eigen})


def _second_moment_expectation(poly_expr, pairs_xy: dict, pairs_h: dict, first_h: dict, xy_vars, h_vars):
    """``E`` of a polynomial that is of degree 2 in the query variables ``(x_q, y_q)`` and of
    degree ≤ 2 in ``h``, with ``(x_q, y_q)`` independent of ``h``: each monomial factorises into
    a second moment of the query part (``pairs_xy[(u, v)]``) times a moment of the h part
    (``pairs_h[(h_k, h_l)]`` or ``first_h[h_k]`` or 1)."""
    gens = list(xy_vars) + list(h_vars)
    P = sp.Poly(sp.expand(poly_expr), *gens)
    total = sp.Integer(0)
    nxy = len(xy_vars)
    for mono, coeff in P.terms():
        def factor_of(exps, vars_, moments2, moments1):
            picked = [v for v, e in zip(vars_, exps) for _ in range(e)]
            if not picked:
                return sp.Integer(1)
            if len(picked) == 1:
                return moments1[picked[0]]
            if len(picked) == 2:
                return moments2[tuple(picked)]
            raise ValueError("only moments of order ≤ 2 are known here")
        fx = factor_of(mono[:nxy], xy_vars, pairs_xy, None)
        fh = factor_of(mono[nxy:], h_vars, pairs_h, first_h)
        total += coeff * fx * fh
    return total


@lru_cache(maxsize=None)
def derive_general_target_risk(d: int = 2) -> Derivation:
    """ZFB Thm 4.2 from second moments: ``ŷ = x_qᵀ Γ^{-1} h``, ``E h = Λa``, ``Cov h = Σ/M``,
    query independent of the context; ``min_w E(⟨w,x⟩ − y)² = E y² − aᵀΛa``. The expectations
    are computed monomial by monomial from these second moments.

    ``result`` = excess risk ``E(ŷ−y)² − min`` (SymPy, symbolic ``a``, ``Σ``, ``l_ij``);
    facts: ``residual_vs_corrected`` (0), ``difference_vs_stated`` (non-zero), ``a``, ``Sigma``.

    >>> D = derive_general_target_risk(1)
    >>> D.facts["residual_vs_corrected"]
    0
    >>> D.facts["difference_vs_stated"] == 0
    False
    """
    b = DerivationBuilder("Test risk on a general target law (ZFB Thm 4.2)")
    b.symbols(l_i="eigenvalue i of Λ (Λ diagonal)", a_i="coordinate i of a = Λ^{-1} E[xy]", s_ij="entry of Σ = Cov(xy)",
              m_yy="E y²", x_i="coordinate i of the query x_q", y="the query label y_q", h_i="coordinate i of h",
              v_i="coordinate i of a linear predictor v", N="training context length", M="test context length")
    # Rotating coordinates (x ↦ Qᵀx, a ↦ Qᵀa, Σ ↦ QᵀΣQ) leaves every term invariant, so Λ may be
    # taken diagonal (its eigenvalues l_i) while a and Σ stay general.
    L = sp.diag(*sp.symbols(f"l_1:{d + 1}", positive=True))
    b.assume("Eigenbasis of Λ (every term is invariant under a rotation of x, a and Σ); a and Σ general", L, key="eigenbasis of Λ")
    a = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"a_{i + 1}", real=True))
    Sg = symbolic_spd(d, "s")
    Ey2 = sp.Symbol("m_yy", positive=True)
    G = _gamma(L)
    Gi = G.inv()
    xs = sp.symbols(f"x_1:{d + 1}", real=True)
    y = sp.Symbol("y", real=True)
    hs = sp.symbols(f"h_1:{d + 1}", real=True)
    La = L * a
    mom_xy = {}
    for i in range(d):
        for j in range(d):
            mom_xy[(xs[i], xs[j])] = L[i, j]
        mom_xy[(xs[i], y)] = mom_xy[(y, xs[i])] = La[i]
    mom_xy[(y, y)] = Ey2
    b.assume("Query (x_q, y_q): E[x xᵀ] = Λ, E[y x] = Λa (definition of a), E y² = m_yy",
             r"E[xx^{\top}]=\Lambda,\ E[yx]=\Lambda a,\ E[y^2]=m_{yy}", key="query moments")
    b.assume("h = (1/M)Σ y_i x_i is independent of the query, with E h = Λa and Cov h = Σ/M",
             r"E[h]=\Lambda a,\ \operatorname{Cov}(h)=\Sigma/M", key="h independent of the query")
    Ehh = Sg / Msym + La * La.T
    b.step("E[hhᵀ] = Cov h + E h E hᵀ", Ehh)
    mom_h = {(hs[i], hs[j]): Ehh[i, j] for i in range(d) for j in range(d)}
    first_h = {hs[i]: La[i] for i in range(d)}
    b.define("Prediction of the trained LSA: ŷ = x_qᵀ Γ_N⁻¹ h", r"\hat y=x_q^{\top}\Gamma_N^{-1}h")
    # expectations with a generic symmetric matrix g standing for Γ_N^{-1}, inserted afterwards
    Gs = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"g_{min(i, j) + 1}{max(i, j) + 1}", real=True))
    yhat = (sp.Matrix([xs]) * Gs * sp.Matrix(hs))[0, 0]
    risk_g = _second_moment_expectation((yhat - y) ** 2, mom_xy, mom_h, first_h, list(xs) + [y], hs)
    b.step("E(ŷ − y_q)² with g = Γ_N⁻¹ (symmetric), monomial by monomial from those moments", risk_g,
           compact=r"\operatorname{tr}(g\Lambda g\,E[hh^{\top}])-2(\Lambda a)^{\top}g\,\Lambda a+E y^2,\quad g=\Gamma_N^{-1}")
    wv = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"v_{i + 1}"))
    quad = _second_moment_expectation(((sp.Matrix([xs]) * wv)[0, 0] - y) ** 2, mom_xy, {}, {}, list(xs) + [y], [])
    b.step("E(⟨v, x⟩ − y)² for a linear predictor v", quad)
    wstar = sp.solve([sp.diff(quad, v) for v in wv], list(wv), dict=True)[0]
    mn = sp.simplify(quad.subs(wstar))
    b.step("Its minimum over v (at v = a)", mn)
    excess = sp.expand(risk_g - mn).subs({Gs[i, j]: Gi[i, j] for i in range(d) for j in range(d)})
    b.step("Excess risk, with g = Γ_N⁻¹ inserted", excess)
    t = L.trace()
    Gi2 = Gi * Gi
    nrm = lambda A: (a.T * A * a)[0, 0]  # noqa: E731
    corrected = (Sg * Gi2 * L).trace() / Msym + (nrm(Gi2 * L**3) + 2 * t * nrm(Gi2 * L**2) + t**2 * nrm(Gi2 * L)) / Nsym**2
    b.define("Corrected Thm 4.2: (1/M)tr(ΣΓ⁻²Λ) + (1/N²)[aᵀΓ⁻²Λ³a + 2tr(Λ)aᵀΓ⁻²Λ²a + tr(Λ)²aᵀΓ⁻²Λa]",
             corrected)
    b.obligation("matches_corrected_form", excess - corrected)
    rc = sp.cancel(sp.together(excess - corrected))
    b.step("Excess risk minus the corrected form", rc)
    Li = L.inv()
    nn = nrm(Li * Li * L)
    stated = (Sg * Li * Li * L).trace() / Msym + (nn + 2 * t * nn + t**2 * nn) / Nsym**2
    b.define("The seed's form (Λ⁻²Λ in every norm and in the trace)", stated)
    ds = excess - stated
    point = {s: sp.Rational(k + 2, k + 3) for k, s in enumerate(sorted(ds.free_symbols, key=str))}
    b.step("Excess risk minus the lecture notes' form at a rational point: not zero", ds.subs(point))
    b.obligation("stated_form_differs", ds.subs(point) ** 2, "positive",
                 description="(excess − stated)² at a rational point is > 0")
    b.record(residual_vs_corrected=rc, difference_vs_stated=ds, a=a, Sigma=Sg, Lambda=L, m_yy=Ey2)
    return b.done(excess)


@lru_cache(maxsize=None)
def derive_limits(d: int = 2) -> Derivation:
    """``Γ_N → Λ`` (N → ∞); linear-task risk → ``(1/N²)`` term (M → ∞) → 0 (N → ∞); under the
    covariate shift ``x ↦ c x`` at test, ``ŷ/y_q → c²`` as M → ∞ (the model does not transfer),
    derived from the LSA prediction with the shifted context moments (Wick), and the resulting
    risk ``(c² − 1)² E y_q²``.

    ``result`` = ``{"gamma_inf": Γ_∞ (matrix in l_ij), "risk_M_inf": per-eigenvalue limit M → ∞,
    "risk_NM_inf": 0 (M → ∞ then N → ∞), "risk_N_inf": per-eigenvalue limit N → ∞ at fixed M,
    "risk_MN_inf": 0 (N → ∞ then M → ∞), "shift_factor": c²}``; ``facts["shift_risk"]`` (in ``c``, ``w``, ``l_ij``).

    >>> D = derive_limits(2)
    >>> D.result["shift_factor"]
    c**2
    >>> D.result["risk_NM_inf"]
    0
    """
    b = DerivationBuilder("Limits N → ∞ and M → ∞; covariate shift")
    b.symbols(l_ij="entry (i, j) of Λ (symmetric)", N="training context length", M="test context length",
              c="scale of the test covariates, x ↦ c·x", w_i="coordinate i of the task vector w",
              xq_i="coordinate i of the (shifted) query")
    L = symbolic_spd(d)
    G = _gamma(L)
    b.define("Γ_N = (1 + 1/N)Λ + (1/N)tr(Λ)I", G)
    Ginf = G.applyfunc(lambda e: sp.limit(e, Nsym, sp.oo))
    b.step("limit N → ∞ of Γ_N (entrywise)", Ginf)
    b.obligation("gamma_tends_to_Lambda", Ginf - L)
    R1 = derive_linear_task_risk(1)
    b.inherit(R1, "linear_task_risk", clauses=("risk_M_inf", "risk_N_inf", "risk_vanishes"))
    R = R1.result["eigen"]
    b.step("Per-eigenvalue risk r(λ, t, N, M) of derive_linear_task_risk", R)
    Rm = sp.simplify(sp.limit(R, Msym, sp.oo))
    b.step("limit M → ∞ of the per-eigenvalue risk: the 1/N² term survives", Rm)
    Rnm = sp.limit(Rm, Nsym, sp.oo)
    b.step("then N → ∞", Rnm)
    b.obligation("risk_vanishes_in_the_limit", Rnm)
    Rn = sp.simplify(sp.limit(R, Nsym, sp.oo))
    b.step("limit N → ∞ of the per-eigenvalue risk at fixed M: a 1/M term survives", Rn)
    Rmn = sp.limit(Rn, Msym, sp.oo)
    b.step("then M → ∞ (the other order)", Rmn)
    b.obligation("risk_vanishes_in_the_other_order", Rmn)
    c = sp.Symbol("c", positive=True)
    w = sp.Matrix(sp.symbols(f"w_1:{d + 1}", real=True))
    xq = sp.Matrix(sp.symbols(f"xq_1:{d + 1}", real=True))
    cov = (c * sp.eye(d)) * L * (c * sp.eye(d)).T
    b.step("Shifted covariates x' = c·x with x ~ N(0, Λ): Cov x' = c²Λ", cov)
    Eyx = sp.Matrix(d, 1, lambda a_, _: sp.expand(sum(w[k] * wick_expectation((k, a_), cov) for k in range(d))))
    b.step("E[y' x'] with y' = ⟨w, x'⟩ (Wick, second moments)", Eyx)
    b.assume("M → ∞: h' = (1/M)Σ y'_i x'_i tends to E[y' x'] (law of large numbers), and N → ∞: the trained "
             "matrix is Γ_∞⁻¹", key="limits M, N → ∞ (LLN)", clauses=("shift",))
    yhat = sp.simplify((xq.T * Ginf.inv() * Eyx)[0, 0])
    b.step("ŷ' = x'_qᵀ Γ_∞⁻¹ h'", yhat)
    yq = (w.T * xq)[0, 0]
    factor = sp.simplify(yhat / yq)
    b.step("Ratio to the true label y'_q = ⟨w, x'_q⟩", factor)
    b.obligation("prediction_is_a_multiple_of_the_label", sp.diff(factor, xq[0]),
                 description="the ratio does not depend on the query")
    Ey2 = sp.expand((w.T * cov * w)[0, 0])
    b.step("E y'_q² = wᵀ(c²Λ)w", Ey2)
    shift_risk = sp.factor(sp.expand((factor - 1) ** 2 * Ey2))
    b.step("Test risk E(ŷ' − y'_q)² = (ratio − 1)² E y'_q²: zero only at c = 1", shift_risk)
    b.fact("shift_risk", shift_risk)
    b.fact("Lambda", L)
    return b.done({"gamma_inf": Ginf, "risk_M_inf": Rm, "risk_NM_inf": Rnm, "risk_N_inf": Rn, "risk_MN_inf": Rmn,
                   "shift_factor": factor})


@lru_cache(maxsize=None)
def derive_gd_one_step(d: int = 2, N: int = 2) -> Derivation:
    """von Oswald et al. (2023): one linear-attention layer with ``W_K = W_Q = [[I,0],[0,0]]``,
    ``W_V = [[0,0],[W_0, −1]]``, ``P = (η/N) I`` maps ``(x_j, y_j) ↦ (x_j, y_j − ΔW x_j)`` with
    ``ΔW`` one GD step on ``(1/2N)Σ(W x_i − y_i)²``; and the trained LSA equals one step of GD
    preconditioned by ``Γ_N^{-1}`` from 0.

    ``result`` = updated token list (SymPy column vectors, one per context token); facts:
    ``token_residual`` (zeros), ``query_residual`` (0), ``preconditioned_residual`` (0), symbols.

    >>> D = derive_gd_one_step(1, 2)
    >>> D.facts["query_residual"], D.facts["preconditioned_residual"]
    (0, 0)
    """
    b = DerivationBuilder("One linear-attention layer = one GD step")
    b.symbols(x_ji="coordinate i of context input j", y_j="label j", xq_i="coordinate i of the query",
              w0_i="coordinate i of the initial weights W_0 (a row)", eta="step size",
              g_ij="entry of a symmetric preconditioner (standing for Γ_N^{-1})", w_i="coordinate i of the weights W")
    eta = sp.Symbol("eta", positive=True)
    xs = [sp.Matrix(d, 1, lambda i, _, j=j: sp.Symbol(f"x_{j + 1}{i + 1}")) for j in range(N)]
    ys = [sp.Symbol(f"y_{j + 1}") for j in range(N)]
    xq = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"xq_{i + 1}"))
    W0 = sp.Matrix(1, d, lambda _, i: sp.Symbol(f"w0_{i + 1}"))
    Z = sp.zeros(d, d)
    WK = sp.diag(sp.eye(d), sp.zeros(1, 1))
    WV = sp.Matrix(sp.BlockMatrix([[Z, sp.zeros(d, 1)], [W0, sp.Matrix([[-1]])]]))
    P = eta / N * sp.eye(d + 1)
    b.define("W_K = W_Q = [[I, 0], [0, 0]]", WK)
    b.define("W_V = [[0, 0], [W_0, −1]]", WV)
    b.define("P = (η/N) I", P)
    tokens = [xs[j].col_join(sp.Matrix([[ys[j]]])) for j in range(N)]
    b.define("Tokens e_j = (x_j, y_j)", tokens[0])
    attn = lambda e: P * sum((WV * ei * (WK * ei).T * (WK * e) for ei in tokens), sp.zeros(d + 1, 1))  # noqa: E731
    new = [sp.expand(e + attn(e)) for e in tokens]
    b.step("e_j + P Σ_i W_V e_i (W_K e_i)ᵀ(W_Q e_j), context keys and values only, every token", new)
    w = sp.Matrix(1, d, lambda _, i: sp.Symbol(f"w_{i + 1}"))
    loss = sum(((w * xs[i])[0, 0] - ys[i]) ** 2 for i in range(N)) / (2 * N)
    b.define("Loss (1/2N) Σ_i (W x_i − y_i)²", loss)
    grad = sp.Matrix(1, d, lambda _, k: sp.diff(loss, w[k])).subs({w[k]: W0[k] for k in range(d)})
    dW = -eta * grad
    b.step("ΔW = −η ∇_W (1/2N)Σ(W x_i − y_i)² at W_0", dW)
    resid = sp.Matrix([sp.expand(new[j][d] - (ys[j] - (dW * xs[j])[0, 0])) for j in range(N)])
    b.step("Updated label minus (y_j − ΔW x_j)", resid)
    b.obligation("token_update_is_gd_step", resid)
    b.fact("token_residual", resid)
    q = xq.col_join(sp.Matrix([[-(W0 * xq)[0, 0]]]))
    qnew = sp.expand(q + attn(q))
    qres = sp.expand(-qnew[d] - ((W0 + dW) * xq)[0, 0])
    b.step("Query token (x_q, −W_0 x_q): minus its updated label minus (W_0 + ΔW) x_q", qres)
    b.obligation("query_reads_updated_prediction", qres)
    b.fact("query_residual", qres)
    # preconditioned GD from 0 with P = Γ^{-1}, η = 1 equals x_qᵀ Γ^{-1} h
    Gi = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"g_{min(i, j) + 1}{max(i, j) + 1}"))
    b.define("A symmetric preconditioner standing for Γ_N⁻¹", Gi)
    loss0 = sum(((w * xs[i])[0, 0] - ys[i]) ** 2 for i in range(N)) / (2 * N)
    g0 = sp.Matrix(d, 1, lambda k, _: sp.diff(loss0, w[k])).subs({w[k]: 0 for k in range(d)})
    w1 = -Gi * g0
    b.step("One GD step from 0 preconditioned by Γ⁻¹", w1)
    h = sum((ys[i] * xs[i] for i in range(N)), sp.zeros(d, 1)) / N
    pres = sp.expand((xq.T * w1)[0, 0] - (xq.T * Gi * h)[0, 0])
    b.step("Its prediction minus the LSA's x_qᵀ Γ⁻¹ h", pres)
    b.obligation("preconditioned_step_is_lsa", pres)
    b.fact("preconditioned_residual", pres)
    b.fact("symbols", {"eta": eta, "xs": xs, "ys": ys, "xq": xq, "W0": W0})
    return b.done(new)


@lru_cache(maxsize=None)
def derive_nonconvex(d: int = 2) -> Derivation:
    """Hessian of ``L(u, U) = L_B(u U)`` (u = w22, U = W11) at the origin: the only non-zero
    entries are ``−(Λ²)_ij`` between u and U_ij, so the eigenvalues are ``±`` the Frobenius norm of
    ``Λ²`` and 0.

    ``result`` = the smallest eigenvalue (SymPy in ``l_ij``); facts: ``hessian``, ``Lambda``.

    >>> D = derive_nonconvex(1)
    >>> D.result
    -l_11**2
    """
    b = DerivationBuilder("Non-convexity: a negative Hessian eigenvalue at the origin")
    b.symbols(u="w22", U_ij="entry (i, j) of U = W11", l_ij="entry (i, j) of Λ (symmetric)", N="context length")
    P = derive_population_loss(d)
    b.inherit(P, "population_loss")
    B, L = P.facts["B"], P.facts["Lambda"]
    u = sp.Symbol("u", real=True)
    U = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"U_{i + 1}{j + 1}", real=True))
    LuU = P.result.subs({B[i, j]: u * U[i, j] for i in range(d) for j in range(d)}, simultaneous=True)
    b.step("L(u, U) = L_B(uU)", LuU)
    vars_ = [u] + list(U)
    H = sp.hessian(LuU, vars_).subs({v: 0 for v in vars_})
    b.step("Hessian at u = 0, U = 0 (variables u, U_11, U_12, …)", H,
           compact=r"\begin{pmatrix}0&-\operatorname{vec}(\Lambda^2)^{\top}\\-\operatorname{vec}(\Lambda^2)&0\end{pmatrix}")
    L2 = L * L
    b.obligation("hessian_couples_u_with_minus_Lambda_squared",
                 [H[0, 1 + k] + L2[k] for k in range(d * d)] + [H[1 + k, 1 + m] for k in range(d * d) for m in range(d * d)],
                 description="H_{u,U_ij} = −(Λ²)_ij and the U-block vanishes")
    ev = H.eigenvals()
    lo = [e for e in ev if sp.simplify(e).could_extract_minus_sign()]
    mn = sp.simplify(lo[0]) if lo else sp.Integer(0)
    b.step("Smallest eigenvalue: minus the Frobenius norm of Λ²", mn)
    b.obligation("smallest_eigenvalue_is_minus_frobenius_norm", mn**2 - sum(e**2 for e in L2),
                 description="its square is Σ_ij (Λ²)_ij²")
    b.fact("hessian", H)
    b.fact("Lambda", L)
    return b.done(mn)


# ------------------------------------------------------------------------------------------------
# the statement's hypotheses: the general block form, the loss over every LSA weight, and an exact
# evaluator of the LSA's loss under other data laws (for the counterexamples of icl.*)


@lru_cache(maxsize=None)
def derive_lsa_prediction_form_general() -> Derivation:
    """The block form of the LSA prediction for symbolic ``d`` and ``N`` (block-matrix algebra):
    with ``E = [[X, x_q], [y, 0]]`` (query label 0) and the weights in blocks
    ``W^{PV} = [[P11, p12], [w21ᵀ, w22]]``, ``W^{KQ} = [[W11, k12], [w21'ᵀ, k22]]``, the (2, 2) block of
    ``E + W^{PV} E Eᵀ W^{KQ} E/ρ`` equals ``[w21ᵀ, w22](E Eᵀ/ρ)[W11; w21'ᵀ] x_q``.

    ``result`` is the (2, 2) block (a 1×1 matrix expression); facts: ``residual`` (``ZeroMatrix`` or
    0), ``params_used`` (the weight blocks it contains).

    >>> D = derive_lsa_prediction_form_general()
    >>> sorted(D.facts["params_used"])
    ['W11', 'w21', "w21'", 'w22']
    """
    b = DerivationBuilder("LSA prediction in blocks, symbolic d and N")
    b.symbols(d="dimension of x (symbolic)", N="number of context examples (symbolic)", X="context inputs (d×N)",
              y="context labels (1×N)", x_q="query (d×1)", rho="the normalisation ρ")
    d, N = sp.symbols("d N", integer=True, positive=True)
    X, y, xq = sp.MatrixSymbol("X", d, N), sp.MatrixSymbol("y", 1, N), sp.MatrixSymbol("x_q", d, 1)
    E = sp.BlockMatrix([[X, xq], [y, sp.ZeroMatrix(1, 1)]])
    b.define("E = [[X, x_q], [y, 0]] (the query's label entry is 0)", E)
    names = {}

    def ms(name, r, c):
        names[name] = sp.MatrixSymbol(name, r, c)
        return names[name]

    PV = sp.BlockMatrix([[ms("P11", d, d), ms("p12", d, 1)], [ms("w21", 1, d), ms("w22", 1, 1)]])
    KQ = sp.BlockMatrix([[ms("W11", d, d), ms("k12", d, 1)], [ms("w21'", 1, d), ms("k22", 1, 1)]])
    b.define("W^PV and W^KQ in blocks (all blocks symbolic)", sp.Tuple(PV, KQ))
    rho = sp.Symbol("rho", positive=True)
    prod = sp.block_collapse(PV * E * E.T * KQ * E)
    yhat = prod.blocks[1, 1] / rho  # the (d+1, N+1) entry of E itself is the query label 0
    b.step("Block (2, 2) of E + W^PV E Eᵀ W^KQ E/ρ (E's own block is the 0 label)", yhat)
    blk = sp.block_collapse(sp.BlockMatrix([[names["w21"], names["w22"]]]) * E * E.T
                            * sp.BlockMatrix([[names["W11"]], [names["w21'"]]]) * xq) / rho
    b.define("The block form [w21ᵀ, w22](E Eᵀ/ρ)[W11; w21'ᵀ] x_q", blk)
    res = sp.expand(yhat - blk)
    b.step("Difference", res)
    b.obligation("prediction_equals_block_form", res)
    used = sorted(n for n, m in names.items() if yhat.has(m))
    b.step("Weight blocks that appear in ŷ", sp.Tuple(*[sp.Symbol(n) for n in used]))
    b.obligation("other_blocks_absent", sp.Integer(len((set(names) - set(used)) ^ {"P11", "p12", "k12", "k22"})),
                 kind="zero", description="exactly P11, p12 (first d rows of W^PV) and k12, k22 (last column of W^KQ) are absent")
    b.fact("params_used", used)
    b.fact("residual", res)
    return b.done(yhat)


@lru_cache(maxsize=None)
def derive_all_weights_min(d: int = 2, N: int = 2) -> Derivation:
    """Global minimisers over EVERY LSA weight (not only ``B = w22·W11``), at fixed ``d`` and ``N``.

    With ``ρ = N`` and noise-free labels, ``ŷ − y_q`` splits under ``w ↦ −w`` into an even part
    (``w21ᵀ (Σx_ixᵢᵀ + x_q x_qᵀ)/N W11 x_q + w22 (Σ y_i²/N) w21'ᵀ x_q``) and an odd part
    ``hᵀ B_eff x_q − y_q`` with ``B_eff = w22 W11 + w21 w21'ᵀ``; the symmetry of ``w``'s law removes
    the cross term, so ``L = ½E[even²] + L_B(B_eff) ≥ L_B(Γ_N⁻¹)``. Equality needs ``B_eff = Γ_N⁻¹``
    (invertible) and the even part to vanish identically: SymPy solves the even part's coefficient
    equations, and on every branch either ``det B_eff ≡ 0`` (rank ≤ 1 < d: excluded when d ≥ 2) or
    ``w21 = w21' = 0``. At d = 1 the rank argument fails (``det`` of a 1×1 rank-one matrix is not 0).

    ``result``: the surviving branches (dicts); facts: ``branches``, ``beff``, ``excluded`` (per
    branch: True when ``det B_eff ≡ 0`` there), ``weights``.

    >>> D = derive_all_weights_min(2, 2)
    >>> all(br[s] == 0 for br in D.result for s in D.facts["weights"]["w21"] + D.facts["weights"]["w21'"])
    True
    """
    b = DerivationBuilder("Global minimisers over every LSA weight: w21 = w21' = 0, w22·W11 = Γ_N⁻¹")
    b.symbols(p_i="entry i of w21 (last row of W^PV)", p_22="w22", k_ij="entry (i, j) of W11 = W^KQ_11",
              q_i="entry i of w21' (last row of W^KQ, first d columns)", x_ji="coordinate i of context example j",
              xq_i="coordinate i of the query", w_i="coordinate i of the task w")
    G = derive_global_min(d)
    b.inherit(G, "global_min")
    p21 = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"p_{i + 1}"))
    p22 = sp.Symbol("p_22")
    K11 = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"k_{i + 1}{j + 1}"))
    k21 = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"q_{i + 1}"))
    X = sp.Matrix(d, N, lambda a, j: sp.Symbol(f"x_{j + 1}{a + 1}"))
    xq = sp.Matrix(d, 1, lambda a, _: sp.Symbol(f"xq_{a + 1}"))
    w = sp.Matrix(d, 1, lambda a, _: sp.Symbol(f"w_{a + 1}"))
    y = X.T * w
    E = X.row_join(xq).col_join(y.T.row_join(sp.zeros(1, 1)))
    PV = sp.zeros(d + 1, d + 1)
    PV[d, :d], PV[d, d] = p21.T, p22
    KQ = sp.zeros(d + 1, d + 1)
    KQ[:d, :d], KQ[d, :d] = K11, k21.T
    b.assume("Only the last row (w21ᵀ, w22) of W^PV and the first d columns (W11; w21'ᵀ) of W^KQ enter ŷ "
             "(icl.lsa_prediction_form); ρ = N; noise-free labels y = Xᵀw", sp.Tuple(PV, KQ), key="entries that enter ŷ")
    yhat = sp.expand((E + PV * E * (E.T * KQ * E) / N)[d, N])
    err = yhat - (w.T * xq)[0, 0]
    b.step(f"ŷ − y_q from the matrix product (d = {d}, N = {N})", err)
    flip = {wi: -wi for wi in w}
    even = sp.expand((err + err.xreplace(flip)) / 2)
    odd = sp.expand((err - err.xreplace(flip)) / 2)
    b.step("Even part in w: (e(w) + e(−w))/2", even)
    b.step("Odd part in w: (e(w) − e(−w))/2", odd)
    h = X * X.T * w / N
    Beff = p22 * K11 + p21 * k21.T
    b.define("B_eff = w22·W11 + w21·w21'ᵀ and h = (1/N) Σ y_i x_i", Beff)
    b.obligation("odd_part_is_B_eff_predictor", odd - ((h.T * Beff * xq)[0, 0] - (w.T * xq)[0, 0]),
                 description="odd part = hᵀ B_eff x_q − y_q")
    b.assume("w ~ N(0, I) is symmetric and independent of the x's: E[even·odd] = 0, so "
             "L = ½E[even²] + L_B(B_eff) ≥ L_B(B_eff) ≥ L_B(Γ_N⁻¹) (L_B strictly convex, minimum at Γ_N⁻¹: global_min)",
             r"L=\tfrac12\mathbb E[\mathrm{even}^2]+L_B(B_{\mathrm{eff}})", key="symmetric w")
    b.assume("A polynomial that vanishes almost surely under a non-degenerate Gaussian (Λ ≻ 0) vanishes "
             "identically: a global minimiser has B_eff = Γ_N⁻¹ and every coefficient of the even part 0", key="a.s.-zero polynomial vanishes")
    data = list(X) + list(xq) + list(w)
    coeffs = sp.Poly(even, *data).coeffs()
    b.step("Coefficients of the even part (polynomial in x, x_q, w)", sp.Matrix(coeffs))
    weights = list(p21) + [p22] + list(K11) + list(k21)
    branches = sp.solve(coeffs, weights, dict=True)
    b.step("Their common zeros (SymPy's polynomial solve, every branch)", sp.Tuple(*[sp.Dict(s) for s in branches]))
    for k, s in enumerate(branches):
        b.obligation(f"branch_{k}_solves", sp.Matrix([sp.expand(c.subs(s)) for c in coeffs]),
                     description="the branch zeroes every coefficient")
    dets = [sp.factor((Beff.subs(s)).det()) for s in branches]
    b.step("det B_eff on each branch", sp.Tuple(*dets))
    excluded = [dt == 0 for dt in dets]
    keep = [s for s, ex in zip(branches, excluded) if not ex]
    b.step(f"Branches with det B_eff ≢ 0 (Γ_N⁻¹ is invertible; at d = {d} ≥ 2 a rank-one w21·w21'ᵀ has det 0)",
           sp.Tuple(*[sp.Dict(s) for s in keep]))
    zeros = list(p21) + list(k21)
    b.obligation("survivors_have_w21_and_w21p_zero",
                 sp.Matrix([sp.sympify(z).subs(s) for s in keep for z in zeros]) if keep else sp.Integer(0),
                 description="on every branch that can reach the invertible Γ_N⁻¹, w21 = 0 and w21' = 0")
    b.obligation("some_branch_survives", sp.Integer(0 if keep else 1))
    b.step("There B_eff = w22·W11 = Γ_N⁻¹ (the global minimiser over B)", Beff.subs({z: 0 for z in zeros}))
    b.record(branches=branches, excluded=excluded, beff=Beff,
             weights={"w21": list(p21), "w22": p22, "W11": list(K11), "w21'": list(k21)})
    return b.done(keep)


def _moment(law: str, var, k: int):
    """``E[z^k]`` for ``z ~ N(0, var)`` (``law="gaussian"``) or ``z = ±√var`` equally likely
    (``"rademacher"``)."""
    if k % 2:
        return sp.Integer(0)
    if law == "gaussian":
        return var ** (k // 2) * sp.factorial2(k - 1)
    if law == "rademacher":
        return var ** (k // 2)
    raise InputError(f"unknown law {law!r} (gaussian, rademacher)")


def exact_lsa_loss(Wpv, Wkq, N: int, lam, *, rho=None, x_law: str = "gaussian", task_var=1, noise_var=0,
                   query_noise: bool = True):
    """``½ E(ŷ − y_q)²`` of the LSA with weights ``Wpv, Wkq`` ((d+1)×(d+1), numbers or SymPy symbols)
    on prompts of length ``N``, computed exactly from the LSA's matrix product (not from a closed
    form): ``ŷ`` is entry (d+1, N+1) of ``E + W^{PV} E (Eᵀ W^{KQ} E)/ρ`` (``ρ = N`` unless given),
    ``(ŷ − y_q)²`` is expanded as a polynomial in the data and each monomial is replaced by its
    moment. Data: ``x`` with independent coordinates of variances ``lam`` (a diagonal ``Λ``;
    ``x_law`` "gaussian" or "rademacher" = ``±√λ_a``), ``w`` with independent ``N(0, task_var)``
    coordinates (a number or one per coordinate), labels ``y_i = ⟨w, x_i⟩ + ε_i`` with
    ``ε_i ~ N(0, noise_var)`` (on the query label too unless ``query_noise=False``).

    >>> b = sp.Symbol("b")
    >>> sp.expand(exact_lsa_loss([[0, 0], [0, 1]], [[b, 0], [0, 0]], 2, [1]))
    b**2 - b + 1/2
    """
    lam = [sp.sympify(v) for v in lam]
    d = len(lam)
    PV, KQ = sp.Matrix(Wpv), sp.Matrix(Wkq)
    if PV.shape != (d + 1, d + 1) or KQ.shape != (d + 1, d + 1):
        raise InputError(f"weights must be ({d + 1}, {d + 1}), got {PV.shape} and {KQ.shape}")
    rho = sp.Integer(N) if rho is None else sp.sympify(rho)
    tv = [sp.sympify(t) for t in task_var] if isinstance(task_var, (list, tuple)) else [sp.sympify(task_var)] * d
    X = sp.Matrix(d, N + 1, lambda a, j: sp.Symbol(f"x_{j}_{a}"))
    w = [sp.Symbol(f"w_{a}") for a in range(d)]
    eps = [sp.Symbol(f"e_{j}") for j in range(N + 1)]
    y = [sum(w[a] * X[a, j] for a in range(d)) + eps[j] for j in range(N + 1)]
    E = X.col_join(sp.Matrix([y[:N] + [0]]))
    yhat = E[d, N] + (PV[d, :] * E * (E.T * (KQ * E[:, N])))[0, 0] / rho
    err = yhat - (y[N] if query_noise else y[N] - eps[N])
    gens = list(X) + w + eps  # X row-major: coordinate a outer, example j inner
    laws = ([(x_law, lam[a]) for a in range(d) for _ in range(N + 1)] + [("gaussian", t) for t in tv]
            + [("gaussian", sp.sympify(noise_var))] * (N + 1))
    P = sp.Poly(err, *gens)
    total = sp.Integer(0)
    for mon, c in (P * P).terms():
        f = c
        for (law, v), k in zip(laws, mon):
            if k:
                f *= _moment(law, v, k)
                if f == 0:
                    break
        total += f
    return sp.expand(total / 2)


# ------------------------------------------------------------------------------------------------
# symbolic sizes (issue 34): the population loss, its minimiser and minimum, and the linear-task
# risk for symbolic d, N, M by theory.gaussian's Isserlis calculus in index form. Each inherits the
# fixed-size derivation above as ``at_d2`` and states, as an obligation, that the general result at
# d = 2 with Λ = (l_ij) (theory.sizes.instantiate) equals it exactly.


def _sym_sizes():
    d, N, M = sp.symbols("d N M", integer=True, positive=True)
    return d, N, M, sp.MatrixSymbol("Lambda", d, d)


def _at_d(expr, d, k: int, values: dict, renames: dict, inverse_of: sp.MatrixSymbol | None = None):
    """``expr`` at ``d = k``, the size symbols renamed (``N → Nsym``: the fixed-size derivations'
    symbols) and explicit matrices put in by name (``values``). With ``inverse_of = G``, ``G⁻¹`` is
    put in as ``values[G.name]``'s inverse, each entry cancelled (an unsimplified symbolic inverse
    makes the expansion slow)."""
    e = sp.sympify(expr).xreplace(renames)
    if inverse_of is not None:
        Gi = sp.MatrixSymbol(inverse_of.name + "_inv", *inverse_of.shape)
        e = e.xreplace({sp.Inverse(inverse_of): Gi, sp.MatPow(inverse_of, -1): Gi})
        Gk = sp.Matrix(values[inverse_of.name])
        values = {**values, Gi.name: (Gk.adjugate() / Gk.det()).applyfunc(sp.cancel)}
    return instantiate(e, {d: k}, values)


def _isserlis_loss_steps(b: DerivationBuilder, L, B, n, A):
    """Record in ``b`` the Isserlis contraction of ``E[Λ̂AΛ̂]`` (``A`` any ``d × d`` matrix, ``n``
    samples) and the ZFB loss of ``ŷ = hᵀBx_q`` at prompt length ``n``; obligations: the Wishart form,
    ``E[hhᵀ]`` is that moment at ``A = I`` and equals ``ΛΓ_n``, ``E[hwᵀ] = Λ``. Returns the loss steps'
    dict (:func:`theory.gaussian.zfb_loss_steps`)."""
    b.assume("Isserlis' theorem: for a centred Gaussian vector E[z_1⋯z_2k] is the sum over the pairings of the "
             "products of covariances; Λᵀ = Λ", key="Isserlis' theorem")
    W = gaussian.wishart_steps(b, L, A, n)
    b.obligation("wishart_form", gaussian.tidy(W - (L * A * L + (L * A.T * L + sp.Trace(A * L) * L) / n), [L]),
                 description="E[Λ̂AΛ̂] = ΛAΛ + (1/n)(ΛAᵀΛ + tr(AΛ)Λ), every d")
    z = gaussian.zfb_loss_steps(b, L, B, n)
    d = L.rows
    b.obligation("hh_is_the_isserlis_moment", gaussian.tidy(z["hh"] - W.xreplace({A: sp.Identity(d)}), [L]),
                 description="E[hhᵀ] = E[Λ̂IΛ̂]: the contracted moment at A = I")
    b.obligation("hh_is_Lambda_Gamma", gaussian.tidy(z["hh"] - L * gaussian.zfb_gamma(L, n), [L]),
                 description="E[hhᵀ] = ΛΓ, Γ = (1 + 1/n)Λ + (1/n)tr(Λ)I")
    b.obligation("hw_is_Lambda", gaussian.tidy(z["hw"] - L, [L]), description="E[hwᵀ] = Λ")
    return z


@lru_cache(maxsize=None)
def derive_population_loss_general() -> Derivation:
    """The LSA's population loss in ``B = w22·W11`` for symbolic ``d`` and ``N``.

    Steps: the LSA's prediction with ``w21 = w21' = 0``, ``ρ = N`` by ``block_collapse`` is
    ``ŷ = hᵀBx_q`` with ``h = Λ̂w``; the Wishart moment ``E[Λ̂AΛ̂]`` by Isserlis in index form (the
    pairings of ``E[x_ia x_ip x_jq x_jc]`` contracted by ``from_index_summation``, pair counts as delta
    sums); ``E_w``, ``E_X``, ``E_{x_q}`` (:func:`theory.gaussian.zfb_loss_steps`). Obligations: the
    Wishart form, ``E[hhᵀ] = ΛΓ_N``, ``E[hwᵀ] = Λ``, the stated loss formula, and the cross-checks:
    at ``d = 2`` the general loss equals :func:`derive_population_loss` (inherited as ``at_d2``), at
    ``d = 3`` the general ``E[hhᵀ]`` equals :func:`derive_moments`. Typed in: the model and laws,
    Isserlis' theorem, independence and linearity of E, ``Λᵀ = Λ``, the ``δ_ij ∈ {0, 1}`` case split.

    ``result``: ``{"loss", "hh", "hw"}``; facts ``Gamma_N``, ``Lambda``, ``B``, ``sizes`` (d, N).

    >>> D = derive_population_loss_general()
    >>> D.result["hw"], D.provenance["loss"]
    (Lambda, 'derived')
    """
    d, N, _, L = _sym_sizes()
    B, A, W11 = (sp.MatrixSymbol(n, d, d) for n in ("B", "A", "W11"))
    X, w, xq = sp.MatrixSymbol("X", d, N), sp.MatrixSymbol("w", d, 1), sp.MatrixSymbol("x_q", d, 1)
    w22 = sp.Symbol("w22", real=True)
    b = DerivationBuilder("Population loss of the LSA in B = w22·W11, symbolic d and N (Isserlis in index form)")
    b.symbols(d="dimension (symbolic)", N="prompt length (symbolic)", Lambda="covariance of x (symmetric)",
              B="w22·W11", A="any d × d matrix", X="context inputs as columns (d × N)", w="task vector",
              x_q="query", Lambda_hat="(1/N) X Xᵀ", Gamma_N="(1 + 1/N)Λ + (1/N)tr(Λ)I", W11="first d columns' top block "
              "of W^KQ", w22="last entry of W^PV's last row")
    E = b.define("Prompt E = [[X, x_q], [wᵀX, 0]] (labels y = wᵀX, the query's label 0)",
                 sp.BlockMatrix([[X, xq], [w.T * X, sp.ZeroMatrix(1, 1)]]))
    row, col = sp.BlockMatrix([[sp.ZeroMatrix(1, d), w22 * sp.Identity(1)]]), sp.BlockMatrix([[W11], [sp.ZeroMatrix(1, d)]])
    b.define("W^PV's last row [0, w22] and W^KQ's first d columns [W11; 0] (w21 = w21' = 0), ρ = N", sp.Tuple(row, col))
    yhat = b.step("ŷ = [0, w22](EEᵀ/N)[W11; 0]x_q by block_collapse (the block form of icl.lsa_prediction_form)",
                  sp.block_collapse(row * E * E.T * col * xq) / N)
    b.obligation("prediction_is_hT_B_xq", gaussian.tidy(yhat - (X * X.T / N * w).T * (w22 * W11) * xq),
                 description="ŷ = hᵀBx_q with h = (1/N)Σ y_i x_i = Λ̂w and B = w22·W11")
    z = _isserlis_loss_steps(b, L, B, N, A)
    hh = b.step("E[hhᵀ] = E[Λ̂IΛ̂]", z["hh"])
    hw = b.step("E[hwᵀ] = E[Λ̂]", z["hw"])
    Gam = b.define("Γ_N = (1 + 1/N)Λ + (1/N)tr(Λ)I", gaussian.zfb_gamma(L, N))
    stated = (sp.Trace(B.T * L * Gam * B * L) - 2 * sp.Trace(L * B * L) + sp.Trace(L)) / 2
    b.obligation("loss_formula", gaussian.tidy(z["loss"] - stated, [L]),
                 description="L(B) = ½[tr(BᵀΛΓ_N BΛ) − 2tr(ΛBΛ) + tr Λ] for every d, N")
    P2 = derive_population_loss(2)
    b.inherit(P2, "at_d2")
    at2 = b.step("Cross-check: the general loss at d = 2, Λ = (l_ij), B = (b_ij)",
                 _at_d(z["loss"], d, 2, {"Lambda": P2.facts["Lambda"], "B": P2.facts["B"]}, {N: Nsym}))
    b.obligation("general_equals_at_d2", sp.expand(at2 - P2.result),
                 description="the general loss at d = 2 equals the loss derived by Wick sums at d = 2")
    M3 = derive_moments(3)
    hh3 = b.step("Cross-check: the general E[hhᵀ] at d = 3, Λ = (l_ij)",
                 _at_d(hh, d, 3, {"Lambda": M3.facts["Lambda"]}, {N: Nsym}))
    b.obligation("hh_equals_at_d3", sp.Matrix(hh3 - M3.result["hh"]).applyfunc(sp.expand),
                 description="the general E[hhᵀ] at d = 3 equals the Wick sums at d = 3")
    for k, v in (("Gamma_N", Gam), ("Lambda", L), ("B", B), ("sizes", (d, N)), ("h", z["h"])):
        b.fact(k, v)
    return b.done({"loss": z["loss"], "hh": hh, "hw": hw})


def _grad(expr, X):
    """``∂expr/∂X`` term by term (SymPy 1.14 differentiates a sum of traces by a matrix symbol to
    ``ZeroMatrix``, sympy/sympy#26585; each term alone is right): as theory.gaussian's gradient."""
    parts = [sp.diff(t, X) for t in sp.Add.make_args(sp.expand(expr))]
    parts = [p for p in parts if isinstance(p, sp.MatrixExpr) and not isinstance(p, sp.ZeroMatrix)]
    return sp.MatAdd(*parts) if parts else sp.ZeroMatrix(*X.shape)


def _sum_of_squares(K):
    """``tr(KᵀK)`` as the index sum ``Σ_{i,j} K_ij²`` with real entries (``IndexedBase``)."""
    k = sp.IndexedBase(K.name.lower(), real=True)
    s = sp.Trace(K.T * K).rewrite(sp.Sum)
    return s.replace(lambda e: isinstance(e, sp.matrices.expressions.matexpr.MatrixElement) and e.parent == K,
                     lambda e: k[e.i, e.j])


@lru_cache(maxsize=None)
def derive_global_min_general() -> Derivation:
    """The minimiser over ``B`` of the population loss, symbolic ``d`` and ``N``: ``B* = Γ_N⁻¹``,
    unique, with ``L(Γ_N⁻¹ + H) = L(Γ_N⁻¹) + ½tr(HᵀΛΓ_N HΛ)`` and that form positive for ``H ≠ 0``.

    Steps (from :func:`derive_population_loss_general`, inherited as ``population_loss``): the
    gradient by matrix calculus, ``ΛΓ_N BΛ − Λ²``; ``L(B + tH)`` collected in ``t`` (degree 2; the
    ``t`` coefficient is ``tr(∇L(B)ᵀH)``, the ``t²`` coefficient ``½tr(HᵀΛΓ_N HΛ)``, i.e. the Hessian
    ``ΛΓ_N ⊗ Λ`` on row-major vec H); with ``Λ = C²`` (C its symmetric square root) that form is
    ``(1 + 1/N)‖C²HC‖_F² + (tr Λ/N)‖CHC‖_F²``, sums of squares (index form), and ``C²HC = 0`` gives
    ``H = 0``; ``vᵀΓ_N v = (1 + 1/N)‖Cv‖² + (tr Λ/N)‖v‖²``; with ``G`` for ``Γ_N`` the gradient vanishes
    at ``G⁻¹`` and solving gives ``G⁻¹``. The gradient flow on ``B = uU``: ``u² − ‖U‖_F²`` is conserved
    (matrix calculus, any loss of the product) and ``u → ‖Γ_N⁻¹‖_F^{1/2}`` when balanced. Cross-checks
    (inherited ``at_d2``: :func:`derive_global_min`): the general ``Γ_N⁻¹`` at ``d = 2`` is its solved
    minimiser, and the general second-order form is its Hessian's quadratic form.

    Typed in: Λ ≻ 0 has a symmetric invertible square root C; a sum of real squares vanishes only when
    every term does; a positive-definite matrix is invertible; the chain rule for the flow; ZFB's
    balanced initialisation and convergence (for the limit of u).

    ``result``: ``Γ_N⁻¹`` (an ``Inverse``); facts ``Gamma_N``, ``G``, ``gradient``, ``second_order``,
    ``conserved_rate`` (0), ``u_limit``, ``Lambda``, ``B``, ``H``, ``sizes``.

    >>> D = derive_global_min_general()
    >>> D.facts["conserved_rate"], D.facts["u_limit"]
    (0, sqrt(F))
    """
    d, N, _, L = _sym_sizes()
    B, H, G, C = (sp.MatrixSymbol(n, d, d) for n in ("B", "H", "G", "C"))
    tdir = sp.Symbol("t", real=True)
    b = DerivationBuilder("Minimiser of the population loss over B: B* = Γ_N⁻¹, symbolic d and N")
    b.symbols(d="dimension (symbolic)", N="prompt length (symbolic)", Lambda="covariance of x (symmetric positive "
              "definite)", B="w22·W11", H="a direction in B-space", t="step along H", G="Γ_N as a symbol",
              C="the symmetric square root of Λ (Λ = C²)", v="a vector", u="w22", U="W11", F="‖Γ_N⁻¹‖_F",
              nU="‖U‖_F")
    P = derive_population_loss_general()
    b.inherit(P, "population_loss")
    loss = P.result["loss"]
    Gam = gaussian.zfb_gamma(L, N)
    grad = b.step("∂L/∂B by matrix calculus, term by term (Λᵀ = Λ)", gaussian.tidy(_grad(loss, B), [L]))
    b.obligation("gradient_form", gaussian.tidy(grad - (L * Gam * B * L - L * L), [L]), description="∂L/∂B = ΛΓ_N BΛ − Λ²")
    b.step("Stationarity: ∂L/∂B = 0", sp.Eq(L * G * B * L - L * L, sp.ZeroMatrix(d, d), evaluate=False),
           compact=r"\Lambda\Gamma_N B\Lambda-\Lambda^2=0", equation=True)
    # second order: L(B + tH) is a quadratic in t
    Lt = b.step("L(B + tH), collected in t", sp.collect(sp.expand(gaussian.tidy(loss.xreplace({B: B + tdir * H}), [L])), tdir))
    b.obligation("quadratic_in_B", sp.Integer(sp.degree(Lt, tdir) - 2), description="L(B + tH) has degree 2 in t")
    c0, c1, c2 = (Lt.coeff(tdir, k) for k in range(3))
    b.obligation("zeroth_order_is_L", gaussian.tidy(c0 - loss, [L]), description="L(B + tH)|_{t=0} = L(B)")
    b.obligation("first_order_is_gradient", gaussian.tidy(c1 - sp.Trace(grad.T * H), [L]),
                 description="the t coefficient is ⟨∇L(B), H⟩ = tr(∇L(B)ᵀH)")
    q = sp.Trace(H.T * L * Gam * H * L)
    b.step("Hessian: d²/dt² L(B + tH) = 2·(t² coefficient), independent of B", gaussian.tidy(2 * c2, [L]),
           compact=r"\nabla^2L[H,H]=\operatorname{tr}(H^\top\Lambda\Gamma_N H\Lambda)=\operatorname{vec}(H)^\top"
           r"(\Lambda\Gamma_N\otimes\Lambda)\operatorname{vec}(H)")
    b.obligation("hessian_is_kronecker", gaussian.tidy(2 * c2 - q, [L]),
                 description="the second-order form is tr(HᵀΛΓ_N HΛ), i.e. ΛΓ_N ⊗ Λ on row-major vec H")
    # positivity of the second-order form and of Γ_N, through Λ = C²
    b.assume("Λ ≻ 0: Λ = C² with C symmetric and invertible (its positive square root)", key="Λ = C², C invertible")
    K1, K2 = C * C * H * C, C * H * C
    b.step("tr(HᵀΛΓ_N HΛ) at Λ = C², tidied (Cᵀ = C)", gaussian.tidy(q.xreplace({L: C * C}), [C]))
    b.obligation("hessian_sum_of_squares",
                 gaussian.tidy(q.xreplace({L: C * C}) - ((1 + 1 / N) * sp.Trace(K1.T * K1)
                                                         + sp.Trace(C * C) / N * sp.Trace(K2.T * K2)), [C]),
                 description="tr(HᵀΛΓ_N HΛ) = (1 + 1/N)‖C²HC‖_F² + (tr Λ/N)‖CHC‖_F² with tr Λ = ‖C‖_F²")
    K = sp.MatrixSymbol("K", d, d)
    sq = b.step("‖K‖_F² = tr(KᵀK) in index form, entries real", _sum_of_squares(K))
    b.obligation("frobenius_nonnegative", sq, "nonnegative", description="tr(KᵀK) = Σ_ij K_ij² ≥ 0")
    b.obligation("coefficient_positive", 1 + 1 / N, "positive", description="1 + 1/N > 0")
    b.assume("A sum of real squares vanishes only when every term does: ‖K‖_F = 0 ⇒ K = 0", key="sum of squares zero")
    b.obligation("H_from_C2HC", gaussian.tidy((C.I * C.I * K1 * C.I).doit() - H),
                 description="C²HC = 0 ⇒ H = C⁻²(C²HC)C⁻¹ = 0: the second-order form is positive for H ≠ 0")
    v = sp.MatrixSymbol("v", d, 1)
    b.obligation("Gamma_N_positive_definite",
                 gaussian.tidy((v.T * Gam * v).xreplace({L: C * C})
                               - ((1 + 1 / N) * (C * v).T * (C * v) + sp.Trace(C * C) / N * v.T * v), [C]),
                 description="vᵀΓ_N v = (1 + 1/N)‖Cv‖² + (tr Λ/N)‖v‖² > 0 for v ≠ 0: Γ_N ≻ 0, invertible")
    b.obligation("Gamma_commutes_with_Lambda", gaussian.tidy(Gam * L - L * Gam, [L]), description="Γ_NΛ = ΛΓ_N")
    # the stationary point, with G standing for Γ_N (invertible: Γ_N ≻ 0)
    b.assume("A positive-definite matrix is invertible: Λ, C and Γ_N have inverses", key="positive definite ⇒ invertible")
    gG = b.step("The gradient with G standing for Γ_N", L * G * B * L - L * L)
    b.obligation("G_form_is_gradient", gaussian.tidy(gG.xreplace({G: Gam}) - grad, [L]),
                 description="G → Γ_N in ΛGBΛ − Λ² gives the derived gradient")
    at = b.step("At B = G⁻¹", gG.xreplace({B: G.I}).doit())
    b.obligation("stationary_at_Gamma_inverse", at, description="∇L(Γ_N⁻¹) = 0")
    Bs = b.step("Solve ΛGBΛ = Λ²: B = (ΛG)⁻¹Λ²Λ⁻¹", (sp.Inverse(L * G) * L * L * L.I).doit())
    b.obligation("solution_is_gamma_inverse", gaussian.tidy(Bs - G.I), description="the stationary point is Γ_N⁻¹ (unique)")
    b.step("Hence L(Γ_N⁻¹ + tH) = L(Γ_N⁻¹) + t·tr(∇L(Γ_N⁻¹)ᵀH) + t²/2·tr(HᵀΛΓ_N HΛ), the first-order term "
           "vanishing: Γ_N⁻¹ is the unique global minimiser", sp.Trace(at.T * H).doit())
    Bstar = b.step("B* = Γ_N⁻¹", sp.Inverse(Gam))
    # gradient flow on B = uU (matrix calculus, any loss of the product)
    u = sp.Symbol("u", real=True)
    U, Gr = sp.MatrixSymbol("U", d, d), sp.MatrixSymbol("nabla_L", d, d)
    b.assume("Gradient flow on (u, U) for a loss L_B(uU) of the product, ∇L the gradient of L_B at uU; chain rule: "
             "du/dt = −tr(∇Lᵀ U), dU/dt = −u∇L", key="gradient-flow chain rule", clauses=("flow_limit",))
    dQ = b.step("∂/∂U of ‖U‖_F² = tr(UᵀU) (matrix calculus)", sp.diff(sp.Trace(U.T * U), U))
    rate = b.step("d/dt (u² − ‖U‖_F²) = 2u·du/dt − tr((∂‖U‖_F²/∂U)ᵀ dU/dt), tidied",
                  gaussian.tidy(2 * u * (-sp.Trace(Gr.T * U)) - sp.Trace(dQ.T * (-u * Gr))))
    b.obligation("conserved_along_flow", rate, description="u² − ‖U‖_F² is conserved for every loss of the product, every d")
    F, nU = sp.symbols("F nU", positive=True)
    b.assume("ZFB initialisation balanced (u² = ‖U‖_F² at t = 0), and the flow converges to uU = Γ_N⁻¹ "
             "(ZFB Thm 4.1), so u² = nU² and u·nU = F", key="ZFB Thm 4.1 convergence", clauses=("flow_limit",))
    up = sp.Symbol("u", positive=True)
    lim = sp.solve([sp.Eq(up**2, nU**2), sp.Eq(up * nU, F)], [up, nU], dict=True)
    b.obligation("unique_positive_limit", sp.Integer(len(lim) - 1))
    ulim = b.step("u² = nU² and u·nU = F give u =", lim[0][up])
    # cross-checks at d = 2
    D2 = derive_global_min(2)
    b.inherit(D2, "at_d2")
    L2 = derive_population_loss(2).facts["Lambda"]
    G2 = b.step("Cross-check: the general Γ_N at d = 2, Λ = (l_ij)", _at_d(Gam, d, 2, {"Lambda": L2}, {N: Nsym}))
    b.obligation("general_minimiser_equals_at_d2", G2 * D2.result - sp.eye(2),
                 description="Γ_N(d = 2)·B*(d = 2) = I: the general minimiser is the one solved at d = 2")
    Hs = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"h_{i + 1}{j + 1}", real=True))
    q2 = b.step("Cross-check: the general second-order form at d = 2, H = (h_ij)",
                _at_d(q, d, 2, {"Lambda": L2, "H": Hs}, {N: Nsym}))
    vecH = sp.Matrix(list(Hs))
    b.obligation("hessian_equals_at_d2", sp.expand(q2 - (vecH.T * D2.facts["hessian_B"] * vecH)[0, 0]),
                 description="tr(HᵀΛΓ_N HΛ) at d = 2 is vec(H)ᵀ(∇²L)vec(H) with the Hessian derived at d = 2")
    for k, val in (("Gamma_N", Gam), ("G", G), ("gradient", grad), ("second_order", q), ("conserved_rate", rate),
                   ("u_limit", ulim), ("F", F), ("Lambda", L), ("B", B), ("H", H), ("sizes", (d, N))):
        b.fact(k, val)
    return b.done(Bstar)


@lru_cache(maxsize=None)
def derive_loss_minimum_general() -> Derivation:
    """The minimum ``L(Γ_N⁻¹) = ½[tr Λ − tr(Γ_N⁻¹Λ²)]`` for symbolic ``d`` and ``N``: the loss of
    :func:`derive_population_loss_general` written with ``G`` for ``Γ_N`` (an obligation checks that
    ``G → Γ_N`` gives the derived loss), at ``B = G⁻¹`` (``Gᵀ = G``), the minimiser of
    :func:`derive_global_min_general` (inherited as ``global_min``). Cross-check (inherited ``at_d2``):
    at ``d = 2`` with ``Λ = (l_ij)`` it equals :func:`derive_loss_minimum`. ``result``: the minimum with
    ``Γ_N`` written out; facts ``in_G`` (the minimum in ``G``), ``G``, ``Gamma_N``, ``Lambda``.

    >>> D = derive_loss_minimum_general()
    >>> D.facts["in_G"]
    -Trace(G**(-1)*Lambda**2)/2 + Trace(Lambda)/2
    """
    d, N, _, L = _sym_sizes()
    B, G = sp.MatrixSymbol("B", d, d), sp.MatrixSymbol("G", d, d)
    b = DerivationBuilder("Minimum of the population loss, symbolic d and N")
    b.symbols(d="dimension (symbolic)", N="prompt length (symbolic)", Lambda="covariance of x (symmetric positive definite)",
              B="w22·W11", G="Γ_N as a symbol (symmetric)")
    b.inherit(derive_global_min_general(), "global_min")
    loss = derive_population_loss_general().result["loss"]
    Gam = gaussian.zfb_gamma(L, N)
    LG = b.define("The loss written with G for Γ_N: ½tr(BᵀΛGBΛ) − tr(ΛBΛ) + ½tr Λ",
                  (sp.Trace(B.T * L * G * B * L) - 2 * sp.Trace(L * B * L) + sp.Trace(L)) / 2)
    b.obligation("G_form_is_the_loss", gaussian.tidy(LG.xreplace({G: Gam}) - loss, [L]),
                 description="G → Γ_N in that form gives the derived loss")
    val = b.step("At the minimiser B = G⁻¹ (Gᵀ = G, Λᵀ = Λ)", gaussian.tidy(LG.xreplace({B: G.I}), [L, G]))
    b.obligation("minimum_form", gaussian.tidy(val - (sp.Trace(L) - sp.Trace(G.I * L * L)) / 2, [L, G]),
                 description="min L = ½[tr Λ − tr(Γ_N⁻¹Λ²)]")
    mn = b.step("min L with Γ_N written out", val.xreplace({G: Gam}))
    D2 = derive_loss_minimum(2)
    b.inherit(D2, "at_d2")
    L2 = D2.facts["Lambda"]
    G2 = _at_d(Gam, d, 2, {"Lambda": L2}, {N: Nsym})
    m2 = b.step("Cross-check: the general minimum at d = 2, Λ = (l_ij)", _at_d(val, d, 2, {"Lambda": L2, "G": G2}, {N: Nsym}, G))
    b.obligation("general_equals_at_d2", sp.cancel(m2 - D2.result),
                 description="the general minimum at d = 2 equals the minimum derived at d = 2")
    for k, v in (("in_G", val), ("G", G), ("Gamma_N", Gam), ("Lambda", L), ("sizes", (d, N))):
        b.fact(k, v)
    return b.done(mn)


@lru_cache(maxsize=None)
def derive_linear_task_risk_general() -> Derivation:
    """Test risk ``R = E(x_qᵀΓ_N⁻¹ h_M − ⟨w, x_q⟩)²`` of ``B = Γ_N⁻¹`` on prompts of length ``M``
    (``h_M = (1/M)Σ_{i≤M} y_i x_i``, ρ = M), symbolic ``d``, ``N``, ``M``.

    Steps: ``R = 2·L_M(B)`` at ``B = G⁻¹`` (``G`` standing for ``Γ_N``, symmetric), with ``L_M`` the
    population loss at prompt length ``M`` derived as in :func:`derive_population_loss_general`
    (Isserlis contraction of the Wishart moment in index form); the matrix form
    ``tr Λ − 2tr(Γ_N⁻¹Λ²) + tr(Γ_N⁻¹ΛΓ_MΓ_N⁻¹Λ)`` (no commutation used); ``Γ_NΛ = ΛΓ_N``; then the
    scalar image (:func:`theory.gaussian.commuting_trace_image`: ``Λ → λ``, ``Γ_N⁻¹ → 1/γ_N(λ)``,
    ``tr Λ → t``) of ``R`` minus the stated form and minus the 1/M + 1/N² split vanishes identically.
    That image ``r(λ, t, N, M)`` is the per-eigenvalue risk (``R = Σ_i r(λ_i)``). Typed in: the model
    and laws, Isserlis, independence and linearity of E, ``Λᵀ = Λ``, and that ``λ ↦ Λ, 1/γ_N ↦ Γ_N⁻¹``
    extends to a ring homomorphism (Λ and Γ_N⁻¹ commute, Γ_N = γ_N(Λ) invertible) with the trace linear.
    Cross-checks (inherited ``at_d2``: :func:`derive_linear_task_risk`): at ``d = 2`` with ``Λ = (l_ij)``
    the general ``R`` equals its matrix result, and ``r`` equals its per-eigenvalue term.

    ``result``: ``R`` (in ``G``, ``Λ``, ``M``); facts ``G``, ``Gamma_N``, ``Gamma_M``, ``stated``,
    ``split``, ``eigen`` (``r``), ``eigen_symbols`` (λ, t), ``Lambda``, ``sizes`` (d, N, M).

    >>> D = derive_linear_task_risk_general()
    >>> D.provenance
    {'result': 'derived'}
    """
    d, N, M, L = _sym_sizes()
    B, A, G = (sp.MatrixSymbol(n, d, d) for n in ("B", "A", "G"))
    b = DerivationBuilder("Linear-task test risk of B = Γ_N⁻¹ at test length M, symbolic d, N and M")
    b.symbols(d="dimension (symbolic)", N="training prompt length (symbolic)", M="test prompt length (symbolic)",
              Lambda="covariance of x (symmetric positive definite)", B="the predictor's matrix", A="any d × d matrix",
              G="Γ_N as a symbol (symmetric)", Lambda_hat="(1/M) Σ_{i≤M} x_i x_iᵀ on the test prompt",
              lambda_="scalar image of Λ (an eigenvalue)", t="tr Λ", gamma_N="(1 + 1/N)λ + t/N")
    b.define("Test prompt of length M (ρ = M): ŷ = hᵀBx_q, h = (1/M)Σ_{i≤M} y_i x_i, B = Γ_N⁻¹ (trained at length N); "
             "R = E(ŷ − ⟨w, x_q⟩)² = 2·L_M(B) with L_M the population loss at prompt length M")
    z = _isserlis_loss_steps(b, L, B, M, A)
    R = b.step("R = 2·L_M(G⁻¹), Gᵀ = G, traces tidied", gaussian.tidy(2 * z["loss"].xreplace({B: G.I}), [L, G]))
    GamN, GamM = gaussian.zfb_gamma(L, N), gaussian.zfb_gamma(L, M)
    b.obligation("risk_matrix_form",
                 gaussian.tidy(R - (sp.Trace(L) - 2 * sp.Trace(G.I * L * L) + sp.Trace(G.I * L * GamM * G.I * L)), [L, G]),
                 description="R = tr Λ − 2tr(Γ_N⁻¹Λ²) + tr(Γ_N⁻¹ΛΓ_MΓ_N⁻¹Λ) (no commutation used)")
    b.obligation("Gamma_commutes_with_Lambda", gaussian.tidy(GamN * L - L * GamN, [L]), description="Γ_NΛ = ΛΓ_N")
    b.assume("λ ↦ Λ, 1/γ_N(λ) ↦ Γ_N⁻¹ extends to a ring homomorphism from rational functions in λ with powers of γ_N "
             "as denominators (Λ and Γ_N⁻¹ commute; Γ_N = γ_N(Λ) is invertible), and the trace is linear: a trace "
             "form Σ_k c_k tr(f_k(Λ)) is tr(F(Λ)) with F = Σ_k c_k f_k, so F ≡ 0 makes it 0", key="ring homomorphism λ ↦ Λ")
    lam, t = sp.symbols("lambda t", positive=True)
    img = lambda e: gaussian.commuting_trace_image(gaussian.tidy(e, [L, G]),  # noqa: E731
                                                   {L: lam, G: (1 + 1 / N) * lam + t / N}, {sp.Trace(L): t})
    r = b.step("Scalar image r(λ, t, N, M) of R (Λ → λ, Γ_N → γ_N(λ) = (1 + 1/N)λ + t/N, tr Λ → t)",
               sp.factor(sp.together(img(R))))
    K = L + sp.Trace(L) * sp.Identity(d)
    stated = sp.Trace(L) - 2 * sp.Trace(G.I * L * L) + sp.Trace(G.I * G.I * GamM * L * L)
    split = sp.Trace(G.I * G.I * L * L * K) / M + sp.Trace(G.I * G.I * L * K * K) / N**2
    b.obligation("risk_formula", sp.cancel(img(R - stated)),
                 description="R = tr Λ − 2tr(Γ_N⁻¹Λ²) + tr(Γ_N⁻²Γ_MΛ²): the image of the difference is 0")
    b.obligation("split_form", sp.cancel(img(R - split)),
                 description="R = (1/M)tr(Γ_N⁻²Λ²(Λ + tr(Λ)I)) + (1/N²)tr(Γ_N⁻²Λ(Λ + tr(Λ)I)²)")
    D2 = derive_linear_task_risk(2)
    b.inherit(D2, "at_d2")
    L2 = D2.facts["Lambda"]
    ren = {N: Nsym, M: Msym}
    G2 = _at_d(GamN, d, 2, {"Lambda": L2}, ren)
    R2 = b.step("Cross-check: the general R at d = 2, Λ = (l_ij)", _at_d(R, d, 2, {"Lambda": L2, "G": G2}, ren, G))
    b.obligation("general_equals_at_d2", sp.cancel(sp.together(R2 - D2.result["matrix"])),
                 description="the general risk at d = 2 equals the risk derived by Wick sums at d = 2")
    l2, t2 = D2.facts["eigen_symbols"]
    b.obligation("eigen_term_equals_at_d2", sp.cancel(r.xreplace({lam: l2, t: t2, **ren}) - D2.result["eigen"]),
                 description="r(λ, t, N, M) equals the per-eigenvalue term of the d = 2 derivation")
    for k, v in (("G", G), ("Gamma_N", GamN), ("Gamma_M", GamM), ("stated", stated), ("split", split), ("eigen", r),
                 ("eigen_symbols", (lam, t)), ("Lambda", L), ("sizes", (d, N, M))):
        b.fact(k, v)
    return b.done(R)
