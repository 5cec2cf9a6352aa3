"""Helpers shared by the Att-SVM claim modules (``att_svm``, ``att_svm_separator``, ``att_svm_dynamics``,
``att_svm_rates``): the source line, figures, cosines, the instances and the stuck "global" instance.
A module whose name starts with ``_`` registers nothing."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from numerics import att_svm as ns
from proofs_checks.context import pyplot
from proofs_checks.claims._common import setting
from proofs_checks.claims._hopfield_common import abs_resolution  # noqa: F401  (shared helper, see its docstring)

SOURCE = "lecture notes 002 (optimisation part); Tarzanagh, Li, Thrampoulidis, Oymak (2023); code umich-sota/TF-as-SVM"


def _figure(ctx, name, curves, ylabel, xlabel="iteration", logx=False):
    if not ctx.want_figures:
        return
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for label, (x, y) in curves.items():
        ax.plot(x, y, label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    ctx.save_figure(fig, name)


def _cos(A, B) -> np.ndarray:
    """Reference correlation: torch's cosine_similarity on the flattened matrices (the real thing)."""
    A = torch.as_tensor(np.asarray(A, dtype=np.float64))
    B = torch.as_tensor(np.broadcast_to(np.asarray(B, dtype=np.float64), A.shape).copy())
    return torch.nn.functional.cosine_similarity(A.flatten(-2), B.flatten(-2), dim=-1, eps=1e-300).numpy()


@lru_cache(maxsize=None)
def _inst(n, T, d, seed, setting="generic", local_slack=0.0, queries="random"):
    return ns.make_instance(n, T, d, seed=seed, setting=setting, local_slack=local_slack, queries=queries)


@lru_cache(maxsize=None)
def _kq_instance(seed: int):
    """A small instance (n=2, T=3, d=4) on which the Frobenius and nuclear solutions differ
    (correlation < 0.92): the (K,Q) regularisation-path check's instance (svm.gd_direction_kq's
    ngd_KQ draws its own from the seed: att_svm_dynamics._kq_instances)."""
    for k in range(50):
        inst = ns.make_instance(2, 3, 4, seed=seed + k, setting="global")
        f = ns.solve_att_svm(inst.X, inst.z, inst.opt).W
        nu = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc").W
        if ns.correlation(f, nu) < 0.92:
            return inst, seed + k, float(ns.correlation(f, nu))
    raise RuntimeError("no instance with distinct Frobenius and nuclear solutions")



#: units of :func:`direction_resolution`
ANGLE_UNITS = ("angle (radians) between the form's limit direction and the true one that is rejected: arccos(1 − tol) "
               "+ arccos(1 − error) (triangle inequality for angles; a correlation is blind to the limit's scale, "
               "so no relative change of W^mm along itself is rejected; tan of it bounds the rejected relative "
               "perpendicular change ‖ΔW_⊥‖/‖W^mm‖)")

#: why the direction checks' resolution stays above the 1% trained target (appended to their justifications)
ANGLE_WHY = ("Resolution: the angle arccos(1 − tol) + arccos(1 − error) (≈ 0.14 rad from tol 0.01 alone, 0.20 from "
             "0.02), not ≤ 0.01: arccos(1 − x) ≈ √(2x), so an angle of 0.01 needs 1 − corr ≤ 1.25e-5 both as tolerance "
             "and as error; with 1 − corr ≈ ‖W^⊥‖²/(2‖W_k‖²) and ‖W_k‖ ∝ k under NGD that is ‖W_k‖ ≈ 200‖W^⊥‖, "
             "≈ 15× the budget for the measured 1 − corr ≈ 3e-3, and a tolerance that small would need a bound on "
             "the rate's constant ‖W^⊥‖ that the theorems do not give (a direction limit, no population quantity to "
             "evaluate exactly)")


def direction_resolution(one_minus_corr: float, tol: float) -> float:
    """Resolution of ``1 − corr(W_k, limit) ≤ tol`` as an angle: the trained direction is within
    ``a = arccos(1 − error)`` of the form's limit, and a limit rotated by ``φ`` from the true one
    has ``1 − corr ≥ 1 − cos(φ − a)``, rejected once ``φ > arccos(1 − tol) + a``.

    >>> round(direction_resolution(0.0, 0.01), 4)
    0.1415
    """
    import math

    if not (math.isfinite(one_minus_corr) and 0 <= tol < 1):
        return float("nan")
    c = float(np.clip(1.0 - one_minus_corr, -1.0, 1.0))
    return float(math.acos(1.0 - tol) + math.acos(c))


#: the near-orthogonal regime of Vasudeva, Deora, Thrampoulidis (2024): equal non-optimal scores, token
#: components orthogonal to v orthonormal across all tokens, scores ≤ 0.3 (so |⟨x_it, x_jτ⟩| ≤ 0.09 for
#: distinct tokens) and orthonormal queries (numerics.att_svm.make_instance, tokens="orthogonal")
ORTH_SIZE, ORTH_TOP = (4, 5, 24), (0.2, 0.3)


@lru_cache(maxsize=None)
def _orth_inst(seed: int, setting: str = "global"):
    """An instance of the near-orthogonal regime (ORTH_SIZE, scores in ORTH_TOP, orthonormal queries)."""
    return ns.make_instance(*ORTH_SIZE, seed=seed, setting=setting, top=ORTH_TOP, queries="orthogonal",
                            tokens="orthogonal")


def coherence(X: np.ndarray) -> float:
    """max |⟨x_it, x_jτ⟩| over distinct tokens (i, t) ≠ (j, τ) of all sequences (unit tokens: the largest |cos|)."""
    F = np.asarray(X, dtype=np.float64).reshape(-1, np.shape(X)[-1])
    G = np.abs(F @ F.T)
    np.fill_diagonal(G, 0.0)
    return float(G.max())


# --------------------------------------------------------------------------------------------
# helpers shared by the claim modules att_svm_dynamics, att_svm_rates

_UNIQUE = setting("unique_opt", r"\mathrm{opt}_i=\mathrm{argmax}_t\,\gamma_{it}\ \text{unique}",
                  "W^mm is defined by the constraints of the (unique) top-score tokens")


#: a "global" instance (equal non-optimal scores, random tokens and queries: coherence ≈ 0.9) on which NGD
#: and GD from a small init stay in a locally optimal non-opt token set (measured: 1 − corr(W_k, W^mm) =
#: 0.39, 0.40, 0.40 at k = 1000, 4000, 20000 for NGD, 0.31 → 0.28 for GD; Polyak's ‖W_k‖ overflows float64 by k = 10)
STUCK_SIZE, STUCK_SEED, STUCK_STEPS = (5, 6, 8), 389, 300


def _stuck_run(steps: int = STUCK_STEPS, method: str = "ngd", lr: float = 0.1):
    inst = _inst(*STUCK_SIZE, STUCK_SEED, "global")
    return inst, ns.train(inst, method=method, lr=lr, iters=steps, B=1, seed=STUCK_SEED, init=0.01)
