"""Att-SVM data (claims ``svm.*``; the model and notation: :mod:`numerics.att_svm`): the errors, the instance type,
the token scores and optimal tokens, the reference notebook's data generator, and the validation of a user's ``X``,
``z`` (the instances made feasible by a solve: :func:`numerics.att_svm_solve.make_instance`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from theory.validation import InputError, as_finite_array


# --------------------------------------------------------------------------------------------
# errors


class AttSVMError(InputError):
    """An Att-SVM instance cannot be solved as given (the message names sequence and token)."""


class TiedTokens(AttSVMError):
    """``x_{i,opt} = x_{i,t}`` (or ``z_i = 0``): the constraint ``0 ≥ 1`` cannot hold."""


class InfeasibleAttSVM(AttSVMError):
    """No ``W`` separates the optimal tokens; the message names the conflicting constraints."""


class SolverFailure(RuntimeError):
    """The solver stopped without an ``optimal`` status for a reason other than the input."""


# --------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class AttSVMInstance:
    """One data set for ``f(X) = vᵀXᵀS(XWz)``.

    X (n,T,d) unit-norm rows; z (n,d) unit; y (n,) ±1; v (d,) unit; opt (n,) the unique
    argmax of the scores ``gamma`` (n,T); ``local`` (n,) a locally-but-not-globally optimal
    token per sequence (setting "local" only, else ``None``); ``setting`` names the generator.
    """

    X: np.ndarray
    z: np.ndarray
    y: np.ndarray
    v: np.ndarray
    opt: np.ndarray
    gamma: np.ndarray
    setting: str = "generic"
    local: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.X.shape)  # type: ignore[return-value]


def token_scores(X: np.ndarray, y: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``γ_{it} = y_i vᵀ x_{it}``, shape ``(n, T)``."""
    return np.asarray(y, dtype=np.float64)[:, None] * (np.asarray(X, dtype=np.float64) @ np.asarray(v, dtype=np.float64))


def optimal_tokens(X: np.ndarray, y: np.ndarray, v: np.ndarray, *, rtol: float = 1e-9) -> np.ndarray:
    """``opt_i = argmax_t γ_{it}``; raises :class:`TiedTokens` when the maximum is not unique
    (two scores within ``rtol`` of each other, relative to the larger of the two), naming the sequence and the tokens.

        >>> X = np.array([[[1.0, 0.0], [-7.35e9, 0.0], [0.77, 0.0]]]); optimal_tokens(X, np.array([1.0]), np.array([1.0, 0.0]))
        array([0])
    """
    g = token_scores(X, y, v)
    opt = np.argmax(g, axis=1)
    for i, o in enumerate(opt):
        # relative to the two scores compared (an absolute floor of 1 tied every token of data scaled by 1e-300; the
        # sequence's largest |score| tied scores 2.2 and 0.77 beside one of -7.35e9: hostile pass 58a F3)
        close = np.flatnonzero(np.abs(g[i] - g[i, o]) <= rtol * np.maximum(np.abs(g[i]), abs(g[i, o])))
        if len(close) > 1:
            raise TiedTokens(f"sequence {i}: tokens {close.tolist()} share the top score {g[i, o]:.6g}; "
                             "the optimal token is not unique")
    return opt


def second_best_tokens(X: np.ndarray, y: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The token with the second-largest score in each sequence (a mutant's 'opt')."""
    return np.argsort(-token_scores(X, y, v), axis=1)[:, 1]


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _tokens_with_scores(a: np.ndarray, v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Unit rows ``x = a v + sqrt(1 − a²) u`` with ``u ⟂ v`` unit, so that ``vᵀx = a``."""
    u = u - (u @ v)[..., None] * v
    u = _unit(u)
    return a[..., None] * v + np.sqrt(1.0 - a ** 2)[..., None] * u


def reference_instance(seed: int, n: int = 6, T: int = 8, d: int = 10) -> AttSVMInstance:
    """The ``data_generator(seed)`` of the reference notebook ``local_converge.ipynb``: torch
    Gaussian draws in its order (v, labels, X, Z), rows normalised, cast to float64."""
    gen = torch.Generator()
    gen.manual_seed(int(seed))
    v = torch.randn(d, generator=gen)
    v /= torch.norm(v)
    Y = 2 * torch.ones(n) * (torch.randn(n, generator=gen) > 0) - 1
    X = torch.randn((n, T, d), generator=gen)
    X /= torch.norm(X, dim=-1, keepdim=True)
    Z = torch.randn((n, d), generator=gen)
    Z /= torch.norm(Z, dim=-1, keepdim=True)
    X, Y, Z, v = (a.double().numpy() for a in (X, Y, Z, v))
    g = token_scores(X, Y, v)
    return AttSVMInstance(X, Z, Y, v, np.argmax(g, axis=1), g, "reference")


#: data whose largest |x|·|z| is below 10^-this (or above 10^this) is refused: ‖W^mm‖ ≈ 1/(|x||z|) would exceed 1e100
#: (or fall below 1e-100) and the solvers' squared norms (‖W‖² and their products) leave float64's range
MIN_LOG10_SCALE = 100


def scale_refusal(X: np.ndarray, z: np.ndarray) -> None:
    """Raise :class:`InputError` when the data's scale leaves the Att-SVM outside float64 whatever is done with it
    (no step size helps: said before any advice about ``--lr``, hostile pass 59b F2)."""
    sx, sz = float(np.max(np.abs(X))), float(np.max(np.abs(z)))
    if sx > 0 and math.log10(sx) + math.log10(sz) < -MIN_LOG10_SCALE:
        raise InputError(f"X and z are too small for float64: the largest |x|·|z| is about 1e{math.log10(sx) + math.log10(sz):.0f}, "
                         f"so (x_opt − x_t)ᵀ W z ≥ 1 needs ‖W‖ ≳ 1e{-(math.log10(sx) + math.log10(sz)):.0f}, whose square "
                         "overflows; rescale the data (the Att-SVM direction does not depend on the scale)")
    if sx > 0 and math.log10(sx) + math.log10(sz) > MIN_LOG10_SCALE:  # the mirror image (hostile pass 45a F2: W^mm
        e = math.log10(sx) + math.log10(sz)  # underflowed to 0 and a correlation of inf was "ok")
        raise InputError(f"X and z are too large for float64: the largest |x|·|z| is about 1e{e:.0f}, so the Att-SVM "
                         f"solution has ‖W‖ ≈ 1e{-e:.0f}, whose square underflows; rescale the data (the Att-SVM "
                         "direction does not depend on the scale)")


def validate_instance(X, z, opt=None, sets=None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Shapes, finiteness, index ranges, and ties: raises :class:`InputError` /
    :class:`TiedTokens` naming the sequence and token. Returns float64 ``X, z`` and int ``opt``."""
    X = as_finite_array(X, "X", ndim=3)
    n, T, d = X.shape
    z = as_finite_array(z, "z", shape=(n, d))
    if T < 2:
        raise InputError(f"X must have at least 2 tokens per sequence, got T={T}")
    for i in range(n):
        if not np.any(z[i]):  # (not its norm: the squares of z scaled by 1e-300 underflow to 0)
            raise TiedTokens(f"sequence {i}: z_{i} = 0, every constraint (x_opt − x_t)ᵀ W z ≥ 1 reads 0 ≥ 1")
    scale_refusal(X, z)
    if sets is not None:
        S = np.asarray(sets, dtype=bool)
        if S.shape != (n, T):
            raise InputError(f"sets must have shape ({n}, {T}), got {S.shape}")
        for i in range(n):
            if not S[i].any() or S[i].all():
                raise InputError(f"sequence {i}: the selected set must be non-empty and not every token")
            for t in np.flatnonzero(S[i]):
                for tau in np.flatnonzero(~S[i]):
                    if np.array_equal(X[i, t], X[i, tau]):
                        raise TiedTokens(f"sequence {i}: selected token {t} equals unselected token {tau}")
        return X, z, None
    opt_arr = np.asarray(opt)
    if opt_arr.shape != (n,) or not np.issubdtype(opt_arr.dtype, np.integer):
        raise InputError(f"opt must be {n} integer token indices, got shape {opt_arr.shape} dtype {opt_arr.dtype}")
    if opt_arr.min() < 0 or opt_arr.max() >= T:
        raise InputError(f"opt indices must lie in [0, {T}), got {opt_arr.tolist()}")
    rows = np.arange(n)
    tied = np.all(X == X[rows, opt_arr][:, None, :], axis=-1)  # (n, T): token t equals the optimal token
    tied[rows, opt_arr] = False
    if tied.any():
        i, t = (int(a) for a in np.argwhere(tied)[0])  # the first in (sequence, token) order
        raise TiedTokens(f"sequence {i}: token {t} equals the optimal token {int(opt_arr[i])} (tied); "
                         "(x_opt − x_t)ᵀ W z ≥ 1 cannot hold")
    return X, z, opt_arr.astype(np.int64)
