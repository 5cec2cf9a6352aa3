"""A reference Adam in NumPy and drivers to run it side by side with ``torch.optim`` (claim ``opt.adam``).

Parameters are float64 arrays of any shape (a leading axis of seeds is just more entries: Adam is
elementwise). Hyper-parameters are a dict ``hp`` with keys ``lr, betas=(β1, β2), eps,
weight_decay, amsgrad, decoupled`` (``decoupled=True`` is AdamW, Loshchilov & Hutter 2019).
Conventions follow ``torch.optim.Adam``: L2 weight decay adds ``λθ`` to the gradient; AMSGrad
keeps the running max of the *uncorrected* ``v_t`` and bias-corrects that max.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from theory.validation import InputError, as_finite_array, require

__all__ = ["DEFAULT_HP", "check_hp", "adam_step", "seed001_step", "run_steps", "run_torch", "NoisyQuadratic"]

DEFAULT_HP = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False)


def check_hp(hp: dict) -> dict:
    """Fill defaults and validate: ``lr ≥ 0``, ``0 ≤ β < 1``, ``eps ≥ 0``, ``weight_decay ≥ 0``."""
    unknown = set(hp) - set(DEFAULT_HP)
    require(not unknown, f"unknown Adam hyper-parameters {sorted(unknown)}")
    out = dict(DEFAULT_HP, **hp)
    b1, b2 = out["betas"]
    require(np.isfinite(out["lr"]) and out["lr"] >= 0, f"lr must be ≥ 0, got {out['lr']}")
    require(0 <= b1 < 1 and 0 <= b2 < 1, f"betas must lie in [0, 1), got {out['betas']}")
    require(np.isfinite(out["eps"]) and out["eps"] >= 0, f"eps must be ≥ 0, got {out['eps']}")
    require(np.isfinite(out["weight_decay"]) and out["weight_decay"] >= 0, f"weight_decay must be ≥ 0, got {out['weight_decay']}")
    return out


def adam_step(theta: np.ndarray, grad: np.ndarray, state: dict | None, hp: dict) -> tuple[np.ndarray, dict]:
    """One bias-corrected Adam (or AdamW / AMSGrad) step; ``state=None`` starts from ``m = v = 0``.

    Returns ``(θ_new, state)`` with ``state = {"t", "m", "v", "vmax"}``; ``hp`` is complete, as
    returned by :func:`check_hp` (which fills the defaults and validates).

    >>> th, st = adam_step(np.array([1.0]), np.array([0.5]), None, check_hp(dict(lr=0.1, eps=0.0)))
    >>> th  # first step is −α sign(g) when ε = 0
    array([0.9])
    """
    b1, b2 = hp["betas"]
    if state is None:
        state = {"t": 0, "m": np.zeros_like(theta), "v": np.zeros_like(theta), "vmax": np.zeros_like(theta)}
    t = state["t"] + 1
    g = grad
    if hp.get("weight_decay", 0.0):
        if hp.get("decoupled", False):
            theta = theta * (1.0 - hp["lr"] * hp["weight_decay"])
        else:
            g = g + hp["weight_decay"] * theta
    m = b1 * state["m"] + (1.0 - b1) * g
    v = b2 * state["v"] + (1.0 - b2) * g * g
    vmax = np.maximum(state["vmax"], v) if hp.get("amsgrad", False) else state["vmax"]
    m_hat = m / (1.0 - b1 ** t)
    v_hat = (vmax if hp.get("amsgrad", False) else v) / (1.0 - b2 ** t)
    theta = theta - hp["lr"] * m_hat / (np.sqrt(v_hat) + hp["eps"])
    return theta, {"t": t, "m": m, "v": v, "vmax": vmax}


def seed001_step(theta: np.ndarray, grad: np.ndarray, state: dict | None, hp: dict) -> tuple[np.ndarray, dict]:
    """Lecture notes 001's formula taken literally: ``θ_{t+1} = θ − α m_t/(v_t + ε)`` with the exponential
    moving averages ``m_t, v_t`` (no bias correction, no square root). Not Adam."""
    b1, b2 = hp["betas"]
    if state is None:
        state = {"t": 0, "m": np.zeros_like(theta), "v": np.zeros_like(theta), "vmax": np.zeros_like(theta)}
    m = b1 * state["m"] + (1.0 - b1) * grad
    v = b2 * state["v"] + (1.0 - b2) * grad * grad
    return theta - hp["lr"] * m / (v + hp["eps"]), {"t": state["t"] + 1, "m": m, "v": v, "vmax": state["vmax"]}


Step = Callable[[np.ndarray, np.ndarray, "dict | None", dict], "tuple[np.ndarray, dict]"]
GradFn = Callable[[np.ndarray, int], np.ndarray]


def run_steps(step: Step, theta0, grad_fn: GradFn, n_steps: int, hp: dict) -> np.ndarray:
    """Iterate ``step`` from ``theta0`` with gradients ``grad_fn(θ, t)`` (t = 0, 1, ...);
    returns the trajectory, shape ``(n_steps + 1, *theta0.shape)``."""
    hp = check_hp(hp)
    theta = as_finite_array(theta0, "theta0").copy()
    traj = [theta]
    state = None
    for t in range(n_steps):
        theta, state = step(theta, grad_fn(theta, t), state, hp)
        traj.append(theta)
    return np.stack(traj)


def run_torch(theta0, grad_fn: GradFn, n_steps: int, hp: dict, device: str = "cpu", foreach: bool | None = None) -> np.ndarray:
    """The same run with ``torch.optim.Adam`` (``torch.optim.AdamW`` when ``decoupled``) on a
    float64 parameter; the gradient is computed by ``grad_fn`` on the optimiser's own iterate and
    written to ``.grad``. Returns the trajectory like :func:`run_steps`."""
    hp = check_hp(hp)
    p = torch.nn.Parameter(torch.as_tensor(as_finite_array(theta0, "theta0"), dtype=torch.float64, device=device).clone())
    cls = torch.optim.AdamW if hp["decoupled"] else torch.optim.Adam
    opt = cls([p], lr=hp["lr"], betas=tuple(hp["betas"]), eps=hp["eps"], weight_decay=hp["weight_decay"],
              amsgrad=hp["amsgrad"], foreach=foreach)
    traj = [p.detach().cpu().numpy().copy()]
    for t in range(n_steps):
        g = grad_fn(traj[-1], t)
        p.grad = torch.as_tensor(g, dtype=torch.float64, device=device)
        opt.step()
        traj.append(p.detach().cpu().numpy().copy())
    return np.stack(traj)


@dataclass(frozen=True)
class NoisyQuadratic:
    """Gradients ``g(θ, t) = h ⊙ (θ − θ*) + 0.3 sin θ + σ ξ_t`` with per-entry curvatures ``h``
    spanning ``[1e-3, 3]`` and fixed pre-drawn noise ``ξ_t`` (so two optimisers see the same
    gradient function). Shapes: ``theta_star, h, scale`` like θ; ``noise`` (n_steps, *θ.shape)."""

    theta_star: np.ndarray
    h: np.ndarray
    noise: np.ndarray
    sigma: float

    @classmethod
    def draw(cls, shape: tuple[int, ...], n_steps: int, rng: np.random.Generator, sigma: float = 0.1) -> "NoisyQuadratic":
        return cls(rng.normal(size=shape), 10.0 ** rng.uniform(-3, 0.5, size=shape), rng.normal(size=(n_steps, *shape)), sigma)

    def __call__(self, theta: np.ndarray, t: int) -> np.ndarray:
        if t >= len(self.noise):
            raise InputError(f"NoisyQuadratic drawn for {len(self.noise)} steps, asked for step {t}")
        return self.h * (theta - self.theta_star) + 0.3 * np.sin(theta) + self.sigma * self.noise[t]
