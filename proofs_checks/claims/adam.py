"""Group E: the Adam optimiser (lecture notes 001; Kingma & Ba 2015). Binds theory/adam.py and
numerics/adam.py to checks, tolerances, mutants, and records lecture notes 001's formula as an erratum."""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch

from numerics import adam as na
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant
from proofs_checks.claims._common import declare, exceeds
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


_CX_HP = dict(lr=0.1, betas=(0.9, 0.999), eps=1e-8)


def _steps(hp, grads, state=None):
    """Adam steps Δθ_t from θ = 0 with the given gradients (the reference numerics.adam.adam_step)."""
    theta, out = np.zeros(1), []
    with np.errstate(all="ignore"):
        for g in grads:
            new, state = na.adam_step(theta, np.array([float(g)]), state, hp)
            out.append(float(new[0] - theta[0]))
            theta = new
    return np.array(out), state


def _cx_init(ctx) -> Counterexample:
    """Without m₀ = v₀ = 0: m₀ = 1 and a constant gradient g = 0.5; the bias correction divides the
    leftover β₁^t m₀ by 1 − β₁^t too, so the steps are not −αg/(|g| + ε) (the steps from m₀ = 0)."""
    hp = na.check_hp(_CX_HP)
    g = [0.5] * 3
    ref, _ = _steps(hp, g)  # from m₀ = v₀ = 0: −αg/(|g| + ε) (clause constant_gradient)
    one = {"t": 0, "m": np.ones(1), "v": np.zeros(1), "vmax": np.zeros(1)}
    got, _ = _steps(hp, g, one)
    err = float(np.max(np.abs(got - ref)) / hp["lr"])
    tol = 64 * 3 * EPS
    return exceeds({"m_0": 1.0, "v_0": 0.0, "g": 0.5, "alpha": hp["lr"], "betas": "(0.9, 0.999)", "steps": 3},
                   "constant_gradient", f"steps {np.round(got, 4).tolist()} instead of {np.round(ref, 4).tolist()}",
                   error=err, tolerance=tol,
                   justification="float64 rounding of 3 moment updates, relative to α (64·steps·eps), as the claim's check")


def _cx_recursions(ctx) -> Counterexample:
    """Without the bias-corrected recursions (m̂_t = m_t, v̂_t = v_t: the moments used uncorrected): the first
    step for a constant g is −α(1 − β₁)g/(√(1 − β₂)|g| + ε), not −αg/(|g| + ε)."""
    hp = na.check_hp(_CX_HP)
    (b1, b2), lr, eps, g = hp["betas"], hp["lr"], hp["eps"], 0.5
    got = -lr * (1 - b1) * g / (np.sqrt((1 - b2) * g * g) + eps)
    ref = -lr * g / (abs(g) + eps)
    err, tol = abs(got - ref) / lr, 64 * EPS
    return exceeds({"m̂_t, v̂_t": "m_t, v_t (no bias correction)", "g": g, "alpha": lr, "betas": f"({b1}, {b2})", "t": 1},
                   "constant_gradient", f"Δθ_1 = {got:.4g} instead of −αg/(|g| + ε) = {ref:.4g}",
                   error=err, tolerance=tol,
                   justification="float64 rounding of one moment update, relative to α (64·eps), as the claim's check")


def _cx_betas(ctx) -> Counterexample:
    """Without β ∈ [0, 1): β₁ = 1 keeps m_t = 0 and the correction 1 − β₁^t = 0: m̂_t = 0/0."""
    hp = {**na.check_hp(_CX_HP), "betas": (1.0, 0.999)}
    got, _ = _steps(hp, [0.5])
    return Counterexample({"beta_1": 1.0, "beta_2": 0.999, "g": 0.5}, "constant_gradient",
                          f"Δθ_1 = {got[0]} (m̂_1 = 0/0), not −αg/(|g| + ε)", violated=not np.isfinite(got[0]),
                          justification="a non-finite step is no step")


def _cx_eps(ctx) -> Counterexample:
    """Without ε > 0: ε = 0 and a zero gradient give v̂_t = 0 and the step 0/0."""
    hp = na.check_hp({**_CX_HP, "eps": 0.0})
    got, _ = _steps(hp, [0.0, 0.0])
    return Counterexample({"eps": 0.0, "g": 0.0}, "constant_gradient",
                          f"Δθ = {got.tolist()} (0/0), not the finite step 0 = −α·0/(0 + ε)",
                          violated=not np.all(np.isfinite(got)), justification="a non-finite step is no step")


def _cx_stationary(ctx) -> Counterexample:
    """Without a stationary mean: deterministic gradients g_i = i (E[g_i] = i); m̂_2 is a weighted
    average of g_1 and g_2, not E[g_2] = 2."""
    hp = na.check_hp(_CX_HP)
    _, st = _steps(hp, [1.0, 2.0])
    mhat = float(st["m"][0] / (1 - hp["betas"][0] ** st["t"]))
    err = abs(mhat - 2.0)
    tol = 64 * EPS * 2
    return exceeds({"g_i": "i (deterministic)", "t": 2, "beta_1": 0.9}, "unbiased",
                   f"m̂_2 = {mhat:.6g}, not E[g_2] = 2", error=err, tolerance=tol,
                   justification="float64 rounding of two moment updates (64·eps·|g|)")


_TORCH_SCOPE = ("N = 1000 steps (120 at --quick), 8 × 6 parameters (3 × 6 at --quick), 5 configurations (Adam, AMSGrad, "
                "L2 decay, AMSGrad + L2 with β = (0.8, 0.99), ε = 1e-6, AdamW), relative 1e-12; and a regression trained "
                "300 steps (60 at --quick) on the device")


declare(
    id="opt.adam",
    title="Adam: bias-corrected m̂/(√v̂+ε) matches torch.optim.Adam; lecture notes 001's m_t/(v_t+ε) is not Adam",
    hypotheses=(
        Hypothesis("recursions", r"m_t=\beta_1m_{t-1}+(1-\beta_1)g_t,\ v_t=\beta_2v_{t-1}+(1-\beta_2)g_t^2,\ "
                   r"\hat m_t=\frac{m_t}{1-\beta_1^t},\ \hat v_t=\frac{v_t}{1-\beta_2^t},\ t\ge1,\ \text{float64}",
                   "Kingma & Ba (2015), Algorithm 1 (t counts the steps taken; m̂_0 = 0/0 is not defined)",
                   counterexample=_cx_recursions),
        Hypothesis("init_zero", r"m_0=v_0=0", "moments start at zero", counterexample=_cx_init),
        Hypothesis("betas", r"\beta_1,\beta_2\in[0,1)", counterexample=_cx_betas),
        Hypothesis("eps_pos", r"\epsilon>0", counterexample=_cx_eps),
        Hypothesis("stationary", r"\mathbb E[g_i]=\mu,\ \mathbb E[g_i^2]=s\ (i\le t)\ \text{(for unbiasedness)}",
                   "gradients with a stationary mean and second moment", counterexample=_cx_stationary),
    ),
    clauses=(
        Clause("update_rule", r"\theta_t=\theta_{t-1}-\alpha\,\frac{\hat m_t}{\sqrt{\hat v_t}+\epsilon}\ "
               r"\text{is torch.optim.Adam's step (to }10^{-12}\text{ relative)}", "checked", _TORCH_SCOPE,
               ("vs_torch_optim", "trained_regression")),
        Clause("unbiased", r"\mathbb E[\hat m_t]=\mu,\ \mathbb E[\hat v_t]=s", "derived",
               "every t ≥ 1, symbolic β₁, β₂ > 0 (geometric sums; β = 0 is immediate: m̂_t = g_t)", ("derivation",)),
        Clause("constant_gradient", r"g_t\equiv g\in\mathbb R\Rightarrow\Delta\theta_t=-\alpha\frac{g}{|g|+\epsilon}\ "
               r"\text{(finite)}\to-\alpha\operatorname{sign}g\ (\epsilon\to0)", "derived",
               "every t ≥ 1, symbolic β₁, β₂ > 0, α > 0, ε > 0, g ∈ ℝ", ("derivation", "constant_gradient_vs_sympy"),
               also=(("checked", "N = 60 steps (20 at --quick), g ∈ {±1e-4 … ±100}, (α, β, ε) = (1e-3, (0.9, 0.999), 1e-8), "
                                 "(0.1, (0.5, 0.9), 1e-3)"),)),
    ),
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
          "step is not scale invariant (for constant g > 0 its size is α(1−β1^t)g/((1−β2^t)g² + ε): ≈ α(1−β1)/((1−β2) g) "
          "at t = 1, → α/g as t → ∞ (ε ≪ g²), huge for small gradients either way). "
          "AMSGrad follows torch: the running max of the uncorrected v_t, then bias-corrected.",
)
