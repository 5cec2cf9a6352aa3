"""Group D, continued: the energy of modern (dense associative) Hopfield networks (lecture notes 002,
memorisation part). Binds theory/hopfield.py and numerics/hopfield.py to checks, tolerances and mutants."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
import torch

from numerics import hopfield as nh
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, REL_UNITS
from theory import hopfield as th
from proofs_checks.claims._hopfield_common import abs_resolution


# --------------------------------------------------------------------------------------------
# hop.modern_energy
# form: {"energy": (xi, P, beta) -> E, "grad": (xi, P, beta) -> ∇E, "update": (xi, P, beta) -> xi_new}


def _modern_symbolic(form, ctx) -> CheckResult:
    """Energy, gradient and CCCP update of the form against SymPy's (lambdified) derivation."""
    d, N = 2, 2
    der = th.derive_modern_energy(d, N)
    xs, Xs, beta, M = der.facts["xi"], der.facts["X"], der.facts["beta"], der.facts["M"]
    args = list(xs) + list(Xs) + [beta, M]
    fE = sp.lambdify(args, der.facts["energy"], "numpy")
    fG = sp.lambdify(args, der.facts["grad"], "numpy")
    fU = sp.lambdify(args, der.result, "numpy")
    rng = ctx.rng()
    errs = {"energy": 0.0, "grad": 0.0, "update": 0.0}
    got_ref = {"energy": ([], []), "grad": ([], []), "update": ([], [])}
    scale = 1.0
    for _ in range(24):
        X = rng.normal(size=(d, N))  # columns = patterns (seed convention)
        xi = rng.normal(size=d) * 1.5
        b = float(rng.choice([0.3, 1.0, 4.0]))
        Mv = float(np.max(np.linalg.norm(X, axis=0)))
        a = list(xi) + list(X.ravel()) + [b, Mv]
        P = torch.from_numpy(X.T.copy())[None]
        xt = torch.from_numpy(xi.copy())[None, None]
        for key, got, ref in (("energy", form["energy"](xt, P, b).numpy().ravel()[:1], np.ravel(fE(*a))),
                              ("grad", form["grad"](xt, P, b).numpy().ravel(), np.ravel(fG(*a))),
                              ("update", form["update"](xt, P, b).numpy().ravel(), np.ravel(fU(*a)))):
            errs[key] = largest(errs[key], float(np.max(np.abs(got - ref))) if got.shape == ref.shape else math.inf)
            got_ref[key][0].append(got)
            got_ref[key][1].append(ref)
        scale = largest(scale, Mv ** 2, float(xi @ xi))
    tol = 256 * EPS * scale
    pairs = [(np.concatenate(g), np.concatenate(r)) for g, r in got_ref.values()
             if all(x.shape == y.shape for x, y in zip(g, r))]
    eps, conf = abs_resolution(pairs, tol)
    return compare(worst(errs), tol, "float64 rounding of exp/log/sums at magnitude max(M², ‖ξ‖²) (256·eps·scale)",
                   seeds=[ctx.seed_for()], sizes={"d": d, "N": N, "instances": 24},
                   details={**errs, "resolution_confirmed": conf}, resolution=eps,
                   resolution_units=REL_UNITS + " (SymPy's energy, gradient or update: (tol + error)/max|reference|, best)")


def _ref_energy(xi, P, beta):
    """Independent torch reference (written out, not the numerics module)."""
    z = torch.einsum("bsd,bnd->bsn", xi, P)
    M = torch.linalg.vector_norm(P, dim=-1).max(-1).values
    return (-torch.logsumexp(beta[:, None, None] * z, -1) / beta[:, None] + 0.5 * (xi ** 2).sum(-1)
            + math.log(P.shape[1]) / beta[:, None] + 0.5 * M[:, None] ** 2)


def _modern_numeric(form, ctx) -> CheckResult:
    """Batched: energy vs an independent reference, gradient vs autograd, E never increases along
    the form's updates and drops by exactly ½‖ξ − ξ^new‖² + β⁻¹KL(p‖p') at every update of every
    instance, E ≥ 0 everywhere (far points included), E ≤ 2M² on the convex hull."""
    rng = ctx.rng()
    B, S, N, d = ctx.size(32, 128, 512), 8, 8, 6
    P = torch.from_numpy(rng.normal(size=(B, N, d)) * rng.uniform(0.3, 3.0, size=(B, 1, 1)))
    betas = torch.from_numpy(np.exp(rng.uniform(np.log(0.1), np.log(20.0), size=B)))
    M = P.norm(dim=-1).amax(-1)
    far = torch.from_numpy(rng.normal(size=(B, S, d))) * M[:, None, None] * 2
    E_form = torch.stack([form["energy"](far[k:k + 1], P[k:k + 1], float(betas[k]))[0] for k in range(B)])
    E_ref = _ref_energy(far, P, betas)
    errs = {"energy_vs_reference": float((E_form - E_ref).abs().max())}
    xg = far.clone().requires_grad_(True)
    _ref_energy(xg, P, betas).sum().backward()
    G = torch.stack([form["grad"](far[k:k + 1], P[k:k + 1], float(betas[k]))[0] for k in range(B)])
    errs["grad_vs_autograd"] = float((G - xg.grad).abs().max())
    errs["negative_energy"] = float(largest(0.0, -E_form.min()))
    w = torch.from_numpy(rng.dirichlet(np.full(N, 0.3), size=(B, S)))
    w[:, 0] = 0
    w[:, 0, 0] = 1.0  # a vertex
    hull = w @ P
    E_hull = torch.stack([form["energy"](hull[k:k + 1], P[k:k + 1], float(betas[k]))[0] for k in range(B)])
    errs["above_2M2_on_hull"] = float(largest(0.0, (E_hull - 2 * M[:, None] ** 2).max()))
    xi, rise, ident = far, 0.0, 0.0
    E_prev = _ref_energy(xi, P, betas)
    trace = [E_prev[:4, 0].tolist()]
    for _ in range(ctx.size(15, 30, 60)):
        new = torch.stack([form["update"](xi[k:k + 1], P[k:k + 1], float(betas[k]))[0] for k in range(B)])
        E_new = _ref_energy(new, P, betas)
        rise = largest(rise, float((E_new - E_prev).max()))
        # the exact decrease E(ξ) − E(ξ^new) = ½‖ξ − ξ^new‖² + β⁻¹KL(p‖p') (derived for every d, N), per instance
        logp = torch.log_softmax(betas[:, None, None] * (xi @ P.transpose(-1, -2)), -1)
        logq = torch.log_softmax(betas[:, None, None] * (new @ P.transpose(-1, -2)), -1)
        kl = (logp.exp() * (logp - logq)).sum(-1)
        pred = 0.5 * ((xi - new) ** 2).sum(-1) + kl / betas[:, None]
        ident = largest(ident, float((E_prev - E_new - pred).abs().max()))
        trace.append(E_new[:4, 0].tolist())
        xi, E_prev = new, E_new
    errs["max_energy_rise_along_updates"] = largest(rise, 0.0)
    errs["descent_identity"] = ident
    if ctx.want_figures:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.semilogy(np.maximum(np.asarray(trace), 1e-16), lw=1)
        ax.set_xlabel("update ξ ← X S(βXᵀξ)")
        ax.set_ylabel("E(ξ)")
        ax.set_title("Modern Hopfield energy along CCCP updates")
        ctx.save_figure(fig, "energy_traces")
    scale = float((M ** 2).max() * 4 + (far ** 2).sum(-1).max())
    tol = 256 * EPS * scale
    eps, conf = abs_resolution([(E_form.detach().numpy(), E_ref.detach().numpy()), (G.detach().numpy(), xg.grad.numpy())], tol,
                               rest=worst({k: v for k, v in errs.items() if k not in ("energy_vs_reference", "grad_vs_autograd")}))
    return compare(worst(errs), tol, "float64 rounding at the energy's magnitude (256·eps·max(4M², ‖ξ‖²))",
                   seeds=[ctx.seed_for()], sizes={"batch": B, "states": S, "N": N, "d": d},
                   details={**errs, "resolution_confirmed": conf}, resolution=eps,
                   resolution_units=REL_UNITS + " (the reference energy or autograd gradient at far states: "
                   "(tol + error)/max|reference|, best)")


def _lse_neg_beta_energy(xi, P, beta):
    N = P.shape[-2]
    M = P.norm(dim=-1).amax(-1)[..., None]
    z = xi @ P.transpose(-1, -2)
    return -nh.lse(-beta, z) + 0.5 * (xi * xi).sum(-1) + math.log(N) / beta + 0.5 * M ** 2


_MODERN = {"energy": nh.modern_energy, "grad": nh.modern_grad, "update": nh.modern_update}

def _cx_negative_beta(ctx) -> Counterexample:
    """Without β > 0: at β = −2 (lse becomes a soft minimum, −lse is convex, the CCCP split fails) one
    update ξ ← X S(βXᵀξ) overshoots to the other side and raises E. d = 1, patterns 1 and −1, ξ = 0.5."""
    P = torch.tensor([[[1.0], [-1.0]]], dtype=torch.float64)
    xi = torch.tensor([[[0.5]]], dtype=torch.float64)
    beta = -2.0
    new = nh.modern_update(xi, P, beta)
    E0, E1 = float(nh.modern_energy(xi, P, beta)), float(nh.modern_energy(new, P, beta))
    return exceeds({"d": 1, "X": "(1, -1)", "xi": 0.5, "beta": beta}, "descent",
                   f"ξ 0.5 → {float(new):.4f}: E {E0:.4f} → {E1:.4f} (rise {E1 - E0:.3g})",
                   error=E1 - E0, tolerance=1e-12,
                   justification="float64 rounding of a two-term log-sum-exp (≈ 1e-16) is far below the rise")


declare(
    id="hop.modern_energy",
    title="Modern Hopfield energy (β > 0): CCCP step ξ ← X S(βXᵀξ) lowers E by ½‖Δξ‖² + β⁻¹KL; 0 ≤ E ≤ 2M² on the hull",
    hypotheses=(
        setting("setting", r"X=[x_1,\dots,x_N]\in\mathbb R^{d\times N},\ M=\max_i\|x_i\|,\ \xi\in\mathbb R^d,\ E(\xi)=-\operatorname{lse}(\beta,X^\top\xi)+\tfrac12\xi^\top\xi+\beta^{-1}\ln N+\tfrac12M^2",
                "the definitions of E and M", text="any N ≥ 1 patterns and any state"),
        Hypothesis("beta_positive", r"\beta>0", "positive inverse temperature", counterexample=_cx_negative_beta),
    ),
    clauses=(
        Clause("gradient", r"\nabla E(\xi)=\xi-X\,S(\beta X^\top\xi)", "derived_at", "d = N = 2 (derivation and symbolic check)",
               ("derivation", "energy_grad_update_vs_sympy", "descent_and_bounds"),
               also=(("checked", "d = 6, N = 8 against autograd, 32/128 instances (quick/default), β ∈ [0.1, 20], states "
                      "at 2M"),)),
        Clause("cccp_step", r"E=E_1+E_2,\ E_1=\tfrac12\xi^\top\xi+\text{const convex},\ E_2=-\operatorname{lse}\text{ concave};\ \nabla E_1(\xi^{\rm new})=-\nabla E_2(\xi)\ \text{solved: }\xi^{\rm new}=X\,S(\beta X^\top\xi)",
               "derived_at", "d = N = 2 (Hessian of lse = βX(diag p − ppᵀ)Xᵀ, solved CCCP step; diag p − ppᵀ ⪰ 0 taken "
               "as a covariance)", ("derivation", "energy_grad_update_vs_sympy"), rests_on=("softmax covariance ⪰ 0",)),
        Clause("descent", r"E(\xi)-E(\xi^{\rm new})=\tfrac12\|\xi-\xi^{\rm new}\|^2+\beta^{-1}\mathrm{KL}\big(S(\beta X^\top\xi)\,\|\,S(\beta X^\top\xi^{\rm new})\big)\ge0:\ E\text{ never increases}",
               "derived", "every d, N and β > 0 (scalar and Σ-symbols: the identity uses only ξ^new = Xp and Σp = 1; "
               "KL ≥ 0 from ln x ≤ x − 1)", ("derivation", "descent_and_bounds"),
               also=(("checked", "every update of 15/30 steps (quick/default) on 32/128 instances, d = 6, N = 8, "
                      "β ∈ [0.1, 20]: no rise, and the identity to float64 rounding"),
                     ("cited", "Ramsauer et al. (ICLR 2021) Thm 1 (CCCP, Yuille & Rangarajan 2003): for β > 0 the "
                      "update never increases E and E(ξ^t) converges to the energy of a stationary point"))),
        Clause("nonnegative", r"E(\xi)\ge\tfrac12(\|\xi\|-M)^2\ge0", "derived",
               "every d, N (SymPy in t = ‖ξ‖) from the listed premises lse(β, z) ≤ max_l z_l + β⁻¹ln N and Cauchy–Schwarz",
               ("derivation", "descent_and_bounds"),
               also=(("checked", "states at 2M, d = 6, N = 8, 32/128 instances"),), rests_on=("lse upper bound",)),
        Clause("hull_bound", r"E(\xi)\le2M^2\text{ for }\|\xi\|\le M\ (\text{in particular on the convex hull of the }x_i)", "derived",
               "every d, N (SymPy in t = ‖ξ‖ ≤ M) from the listed premise lse(β, z) ≥ mean_l z_l + β⁻¹ln N (Jensen)",
               ("derivation", "descent_and_bounds"),
               also=(("checked", "8 hull points per instance (one a vertex), 32/128 instances"),), rests_on=("lse lower bound (Jensen)",)),
    ),
    source="lecture notes 002; Ramsauer et al. (2021), Hopfield Networks is All You Need; Yuille & Rangarajan (2003) CCCP",
    kind="theorem",
    form=_MODERN,
    derivation=lambda: th.derive_modern_energy(2, 2),
    checks=(
        Check("energy_grad_update_vs_sympy", "symbolic", _modern_symbolic, "vs SymPy's energy, gradient and CCCP solution"),
        Check("descent_and_bounds", "numeric", _modern_numeric, "monotone along updates, 0 ≤ E ≤ 2M² on the hull, autograd"),
    ),
    mutants=(
        Mutant("lse_sign_flipped", "sign flip", "E = +lse(β, Xᵀξ) + …",
               {**_MODERN, "energy": lambda xi, P, b: nh.modern_energy(xi, P, b) + 2 * nh.lse(b, xi @ P.transpose(-1, -2))}),
        Mutant("lse_negative_beta", "wrong formula", "β misplaced: −lse(−β, Xᵀξ)",
               {**_MODERN, "energy": _lse_neg_beta_energy}),
        Mutant("update_without_beta", "dropped term", "ξ_new = X S(Xᵀξ) (β dropped)",
               {**_MODERN, "update": lambda xi, P, b: nh.modern_update(xi, P, 1.0)}),
        Mutant("energy_without_half_M2", "dropped term", "E without the ½M² constant",
               {**_MODERN, "energy": lambda xi, P, b: nh.modern_energy(xi, P, b) - 0.5 * P.norm(dim=-1).amax(-1)[..., None] ** 2}),
    ),
)
