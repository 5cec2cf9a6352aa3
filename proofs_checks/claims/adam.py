"""Group E: the Adam optimiser (lecture notes 001; Kingma & Ba 2015). Binds theory/adam.py and
numerics/adam.py to checks, tolerances, mutants, and records lecture notes 001's formula as an erratum."""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch

from numerics import adam as na
from proofs_checks.registry import Check, CheckResult, Claim, Mutant, register
from proofs_checks.tolerances import EPS
from proofs_checks.claims._attention_common import Resolved
from theory import adam as ta


# form: an update rule step(θ, g, state | None, hp) -> (θ_new, state), as numerics.adam.adam_step


def _variant(*, bias_correction=True, sqrt=True, eps_inside=False, swap_betas=False):
    """A wrong Adam step for the mutants (each flag plants one mistake)."""

    def step(theta, grad, state, hp):
        b1, b2 = hp["betas"][::-1] if swap_betas else hp["betas"]
        if state is None:
            state = {"t": 0, "m": np.zeros_like(theta), "v": np.zeros_like(theta), "vmax": np.zeros_like(theta)}
        t, g = state["t"] + 1, grad
        if hp["weight_decay"]:
            if hp["decoupled"]:
                theta = theta * (1.0 - hp["lr"] * hp["weight_decay"])
            else:
                g = g + hp["weight_decay"] * theta
        m = b1 * state["m"] + (1 - b1) * g
        v = b2 * state["v"] + (1 - b2) * g * g
        vmax = np.maximum(state["vmax"], v) if hp["amsgrad"] else state["vmax"]
        vv = vmax if hp["amsgrad"] else v
        m_hat = m / (1 - b1 ** t) if bias_correction else m
        v_hat = vv / (1 - b2 ** t) if bias_correction else vv
        if eps_inside:
            denom = np.sqrt(v_hat + hp["eps"])
        else:
            denom = (np.sqrt(v_hat) if sqrt else v_hat) + hp["eps"]
        return theta - hp["lr"] * m_hat / denom, {"t": t, "m": m, "v": v, "vmax": vmax}

    return step


# (lr, betas, eps): the second has a large ε so that where ε sits is visible at O(1) gradients
_CONST_HP = [dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8), dict(lr=0.1, betas=(0.5, 0.9), eps=1e-3)]
_GRADS = np.array([1e-4, -1e-2, 0.3, -1.0, 7.0, -100.0])


def _constant_gradient(form, ctx) -> CheckResult:
    """With a constant gradient the derived step is ``−α g/(|g| + ε)`` at every t (bias
    correction makes m̂ = g, v̂ = g² exactly); the form's steps over N iterations must match the
    lambdified SymPy expression, entry by entry, for gradients from 1e-4 to 100."""
    d = ta.derive_adam_bias_correction()
    alpha, g, eps, b1, b2, t = d.facts["symbols"]
    f = sp.lambdify((alpha, g, eps), d.result["step"], "numpy")
    N = ctx.size(20, 60)
    R = Resolved()
    for j, hp in enumerate(_CONST_HP):
        hpf = na.check_hp(hp)
        with np.errstate(all="ignore"):
            traj = na.run_steps(form, np.zeros_like(_GRADS), lambda th, k: _GRADS, N, hpf)
        steps = np.diff(traj, axis=0)  # (N, len(_GRADS))
        ref = f(hp["lr"], _GRADS, hp["eps"])
        R.pair(f"hp{j}", steps, np.broadcast_to(ref[None, :], steps.shape), div=hp["lr"])
    tol = 64 * N * EPS
    return R.result(tol, f"float64 rounding of the moment recursions over N={N} steps, relative to α (64·N·eps)",
                    sizes={"N": N, "grads": _GRADS.tolist()}, details={"hp": _CONST_HP,
                    "sign_limit": str(d.result["sign_limit"]), "first_uncorrected_ratio": str(d.facts["first_step_uncorrected_ratio"])})


_TORCH_CONFIGS = {
    "adam": dict(lr=1e-2),
    "amsgrad": dict(lr=1e-2, amsgrad=True),
    "l2_weight_decay": dict(lr=1e-2, weight_decay=0.05),
    "amsgrad_l2_betas": dict(lr=3e-2, betas=(0.8, 0.99), eps=1e-6, amsgrad=True, weight_decay=0.05),
    "adamw": dict(lr=1e-2, weight_decay=0.1, decoupled=True),
}


def _vs_torch(form, ctx) -> CheckResult:
    """The form driven on a noisy non-convex objective (S seeds × n entries as one array) against
    ``torch.optim.Adam`` / ``torch.optim.AdamW`` seeing the same gradient function, for default,
    AMSGrad, L2 weight decay, AMSGrad + L2 with other betas, and AdamW: max trajectory difference."""
    N = ctx.size(120, 1000, 3000)
    S, n = ctx.size(3, 8), 6
    rng = ctx.rng()
    gf = na.NoisyQuadratic.draw((S, n), N, rng)
    theta0 = rng.normal(size=(S, n))
    R, norms = Resolved(), {}
    for name, hp in _TORCH_CONFIGS.items():
        with np.errstate(all="ignore"):
            mine = na.run_steps(form, theta0, gf, N, hp)
            ref = na.run_torch(theta0, gf, N, hp, device=ctx.device)
        R.pair(name, mine, ref, div="ref1")
        norms[name] = float(np.max(np.abs(ref)))
    return R.result(1e-12, f"the claim's 1e-12 in float64, relative to max(1, max|θ|); rounding alone gives ~N·eps ≈ {N * EPS:.1e}",
                    seeds=[ctx.seed_for()], sizes={"N": N, "S": S, "n": n}, device=ctx.device,
                    details={"max_abs_theta": norms})


def _trained_regression(form, ctx) -> CheckResult:
    """Train a small torch model on the requested device (S seeds × a linear regression with a
    tanh feature layer frozen, weights on ``ctx.device``, gradients by autograd there) twice from
    the same initialisation and mini-batches: once stepping with the form's update rule, once with
    ``torch.optim.Adam``; the two parameter trajectories must agree to float64 rounding. The
    regression is convex in the trained weights, so rounding differences are not amplified."""
    from numerics.torch_utils import generator, resolve_device

    dev = resolve_device(ctx.device)
    S, n, k, steps = ctx.size(3, 8), 256, 6, ctx.size(60, 300, 1000)
    g = generator(ctx.seed_for("data"), dev)
    X = torch.tanh(torch.randn(S, n, k, generator=g, dtype=torch.float64, device=dev))
    w_true = torch.randn(S, k, generator=g, dtype=torch.float64, device=dev)
    y = torch.einsum("snk,sk->sn", X, w_true) + 0.1 * torch.randn(S, n, generator=g, dtype=torch.float64, device=dev)
    w0 = torch.randn(S, k, generator=g, dtype=torch.float64, device=dev)
    batches = torch.randint(0, n, (steps, 32), generator=g, device=dev)
    hp = na.check_hp(dict(lr=3e-2, betas=(0.9, 0.99), eps=1e-8))

    def grad_at(w, t):
        w = w.detach().requires_grad_(True)
        idx = batches[t]
        loss = 0.5 * ((torch.einsum("snk,sk->sn", X[:, idx], w) - y[:, idx]) ** 2).mean(-1).sum()
        (gw,) = torch.autograd.grad(loss, w)
        return gw

    def reference():  # form-independent: the torch.optim.Adam trajectory on the device
        p = torch.nn.Parameter(w0.clone())
        opt = torch.optim.Adam([p], lr=hp["lr"], betas=hp["betas"], eps=hp["eps"])
        traj = [p.detach().cpu().numpy().copy()]
        for t in range(steps):
            p.grad = grad_at(p, t)
            opt.step()
            traj.append(p.detach().cpu().numpy().copy())
        return np.stack(traj)

    ref = ctx.reference("torch_adam_trajectory", reference)
    theta, state, mine = w0.detach().cpu().numpy().copy(), None, []
    mine.append(theta.copy())
    with np.errstate(all="ignore"):
        for t in range(steps):
            gw = grad_at(torch.as_tensor(theta, dtype=torch.float64, device=dev), t).cpu().numpy()
            theta, state = form(theta, gw, state, hp)
            mine.append(np.asarray(theta, dtype=float).copy())
    mine = np.stack(mine)
    R = Resolved()
    R.pair("trajectory_vs_torch_adam", mine, ref, div="ref")  # max|θ − θ_torch| / max|θ_torch|
    return R.result(64 * steps * EPS,
                    f"float64 rounding of {steps} Adam steps on a convex loss (64·steps·eps, relative to max|θ|); "
                    "resolution relative to torch.optim.Adam's trajectory",
                    seeds=[ctx.seed_for("data")], sizes={"S": S, "n": n, "k": k, "steps": steps, "batch": 32},
                    device=str(dev), details={"final_loss_gap_to_start": float(np.max(np.abs(ref[-1] - ref[0])))})


register(Claim(
    id="opt.adam",
    title="Adam: bias-corrected m̂/(√v̂+ε) matches torch.optim.Adam; lecture notes 001's m_t/(v_t+ε) is not Adam",
    statement=r"\theta_t=\theta_{t-1}-\alpha\,\frac{\hat m_t}{\sqrt{\hat v_t}+\epsilon},\ \hat m_t=\frac{m_t}{1-\beta_1^t},\ "
              r"\hat v_t=\frac{v_t}{1-\beta_2^t};\ \mathbb E[\hat m_t]=\mu\ \text{(stationary mean)},\ "
              r"g\equiv\text{const}\Rightarrow\Delta\theta_t=-\alpha\frac{g}{|g|+\epsilon}\to-\alpha\operatorname{sign}g",
    source="lecture notes 001 (A word on the choice of optimizer); Kingma & Ba (2015); Loshchilov & Hutter (2019) for AdamW",
    kind="erratum",
    form=na.adam_step,
    stated=na.seed001_step,
    stated_statement=r"\theta_{t+1}=\theta-\alpha\,\frac{m_t}{v_t+\epsilon}",
    derivation=ta.derive_adam_bias_correction,
    checks=(
        Check("constant_gradient_vs_sympy", "symbolic", _constant_gradient, "steps for constant g vs −αg/(|g|+ε) derived by geometric sums"),
        Check("vs_torch_optim", "numeric", _vs_torch, "trajectories vs torch.optim.Adam/AdamW incl. amsgrad and weight decay", uses_device=False),
        Check("trained_regression", "trained", _trained_regression, "a model trained on the device with the form vs with torch.optim.Adam"),
    ),
    mutants=(
        Mutant("no_bias_correction", "dropped term", "m_t/(√v_t+ε) without the 1/(1−β^t) corrections", _variant(bias_correction=False)),
        Mutant("no_sqrt", "wrong formula", "m̂/(v̂+ε): square root missing", _variant(sqrt=False)),
        Mutant("eps_inside_sqrt", "wrong formula", "m̂/√(v̂+ε)", _variant(eps_inside=True)),
        Mutant("betas_swapped", "swapped index", "β1 and β2 exchanged", _variant(swap_betas=True)),
    ),
    notes="Lecture notes 001 writes θ_{t+1} = θ − α m_t/(v_t + ε): no bias correction and v_t instead of √v_t, so the "
          "step is not scale invariant (for constant g it is ≈ α(1−β1)/((1−β2) g), huge for small gradients). "
          "AMSGrad follows torch: the running max of the uncorrected v_t, then bias-corrected.",
))
