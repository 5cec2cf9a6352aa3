"""Helpers shared by the Att-SVM claim modules (``att_svm``, ``att_svm_dynamics``): the source line,
figures, cosines and the instances. A module whose name starts with ``_`` registers nothing."""


from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from numerics import att_svm as ns
from proofs_checks.context import pyplot

SOURCE = "seed 002 (optimisation part); Tarzanagh, Li, Thrampoulidis, Oymak (2023); code umich-sota/TF-as-SVM"


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
    (correlation < 0.92): the (K,Q) regularisation-path check's instance (svm.gd_direction's
    ngd_KQ draws its own from the seed: :func:`_kq_instances`)."""
    for k in range(50):
        inst = ns.make_instance(2, 3, 4, seed=seed + k, setting="global")
        f = ns.solve_att_svm(inst.X, inst.z, inst.opt).W
        nu = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc").W
        if ns.correlation(f, nu) < 0.92:
            return inst, seed + k, float(ns.correlation(f, nu))
    raise RuntimeError("no instance with distinct Frobenius and nuclear solutions")
