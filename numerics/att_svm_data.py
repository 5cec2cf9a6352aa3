"""Att-SVM data (claims ``svm.*``; the model and notation: :mod:`numerics.att_svm`): the errors, the instances
(generic, tied, token sets), their token scores and optimal tokens, and the validation of a user's ``X``, ``z``."""

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
    (two scores within ``rtol`` of each other), naming the sequence and the tokens."""
    g = token_scores(X, y, v)
    opt = np.argmax(g, axis=1)
    for i, o in enumerate(opt):
        # relative to the sequence's own scores (an absolute floor of 1 tied every token of data scaled by 1e-300)
        close = np.flatnonzero(np.abs(g[i] - g[i, o]) <= rtol * float(np.max(np.abs(g[i]))))
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


def make_instance(n: int, T: int, d: int, *, seed: int = 0, setting: str = "generic", gap: float = 0.1,
                  top: tuple[float, float] = (0.5, 0.9), local_slack: float = 0.0,
                  queries: str = "random", tokens: str = "random") -> AttSVMInstance:
    """A random instance with a unique optimal token per sequence (score gap ≥ ``gap``).

    setting
      "generic"  non-optimal scores uniform in ``[−0.9, γ_opt − gap]``.
      "global"   every non-optimal token of a sequence has the same score ``γ_opt − gap``
                 (the global-convergence regime of Vasudeva, Deora, Thrampoulidis 2024).
      "local"    additionally a second token ``local_i`` (score ``γ_opt − gap``) that is locally
                 optimal (its Att-SVM is feasible and every support token has a lower score),
                 built by putting ``x_opt`` antipodal to ``x_local`` orthogonally to ``v``.
                 ``local_slack > 0`` further requires every token scoring above ``local_i`` to
                 have margin ≥ ``1 + local_slack`` under the local Att-SVM ``W^mm_local``: the
                 cone around ``W^mm_local`` from which GD stays local (TLTO'23 Thm 3) has a
                 width that shrinks to 0 as that margin approaches 1 (a near-tight higher-score
                 token pulls GD out of the set), so a slack keeps the instance in the regime
                 where a modest initialisation is inside the cone.
    queries
      "random"      ``z_i`` independent uniform unit vectors.
      "orthogonal"  ``z_i`` orthonormal (needs n ≤ d): ``W z_i`` are then independent free vectors,
                    the loss separates over sequences, and in the "global" setting each
                    sequence's term is a decreasing function of its own ``s_opt`` alone, so no
                    other token set can attract GD. With random queries and n = 5, d = 8 about 1
                    instance in 60 has a region where NGD lingers in a non-opt set for thousands
                    of iterations (the cross-talk ``z_iᵀz_j`` couples the sequences).
    tokens
      "random"      the component of each token orthogonal to ``v`` is a random direction.
      "orthogonal"  those components are orthonormal across ALL tokens of all sequences (needs
                    n·T ≤ d − 1; "generic"/"global" only): ``⟨x_it, x_jτ⟩ = (vᵀx_it)(vᵀx_jτ)``
                    exactly, so with small scores (``top``) the tokens are nearly orthogonal,
                    the data assumption of Vasudeva, Deora, Thrampoulidis (2024). The random
                    draws are the same as for "random" (the components are orthonormalised).
    Tokens are unit rows; ``vᵀx`` is set exactly, the rest of each token is a random direction.
    Each draw is checked with :func:`validate_instance` (shapes, ties) and certified feasible by
    solving its Att-SVM; infeasible draws are redrawn (up to 200 times, then :class:`InputError`).
    """
    if setting not in ("generic", "global", "local"):
        raise InputError(f"unknown setting {setting!r} (generic, global, local)")
    if not (n >= 1 and T >= 2 and d >= 2):
        raise InputError(f"need n ≥ 1, T ≥ 2, d ≥ 2, got n={n}, T={T}, d={d}")
    if not (0 < gap < 1):
        raise InputError(f"gap must lie in (0, 1), got {gap}")
    if queries not in ("random", "orthogonal") or (queries == "orthogonal" and n > d):
        raise InputError(f"queries must be 'random' or 'orthogonal' (the latter needs n ≤ d), got {queries!r} with n={n}, d={d}")
    if tokens not in ("random", "orthogonal") or (tokens == "orthogonal" and (n * T > d - 1 or setting == "local")):
        raise InputError(f"tokens must be 'random' or 'orthogonal' (the latter needs n·T ≤ d − 1 and setting generic or "
                         f"global), got {tokens!r} with n={n}, T={T}, d={d}, setting={setting!r}")
    rng = np.random.default_rng(seed)
    for _attempt in range(200):
        v = _unit(rng.normal(size=d))
        y = rng.choice([-1.0, 1.0], size=n)
        z = _unit(rng.normal(size=(n, d)))
        if queries == "orthogonal":
            z = np.linalg.qr(z.T)[0].T.copy()
        g_opt = rng.uniform(*top, size=n)
        opt = rng.integers(0, T, size=n)
        if setting == "generic":
            g = -0.9 + rng.uniform(size=(n, T)) * (g_opt[:, None] - gap + 0.9)
        else:
            g = np.repeat((g_opt - gap)[:, None], T, axis=1)
        g[np.arange(n), opt] = g_opt
        u = rng.normal(size=(n, T, d))
        local = None
        if setting == "local":
            local = (opt + 1 + rng.integers(0, T - 1, size=n)) % T
            g = np.repeat((g_opt - 2 * gap)[:, None], T, axis=1)
            g[np.arange(n), opt] = g_opt
            g[np.arange(n), local] = g_opt - gap
            u[np.arange(n), opt] = -u[np.arange(n), local]
        if tokens == "orthogonal":  # orthonormal components ⟂ v across every (i, t)
            U = u.reshape(n * T, d) - np.outer(u.reshape(n * T, d) @ v, v)
            u = np.linalg.qr(U.T)[0].T.reshape(n, T, d)
        X = _tokens_with_scores(y[:, None] * g, v, u)
        inst = AttSVMInstance(X, z, y, v, opt, token_scores(X, y, v), setting, local)
        try:
            validate_instance(inst.X, inst.z, inst.opt)
            from numerics.att_svm_solve import is_locally_optimal, solve_att_svm

            solve_att_svm(inst.X, inst.z, inst.opt)  # raises InfeasibleAttSVM when no W separates
            if setting == "local" and not is_locally_optimal(inst, inst.local, slack=local_slack):
                continue
        except AttSVMError:
            continue
        return inst
    raise InputError(f"could not draw a feasible {setting!r} instance with n={n}, T={T}, d={d} (try a larger d)")


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
