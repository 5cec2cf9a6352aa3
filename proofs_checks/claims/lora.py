"""Group E: LoRA low-rank adaptation (lecture notes 001; Hu et al. 2021). Binds theory/lora.py and
numerics/lora.py to checks, tolerances and mutants."""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch
from torch import nn

from numerics import lora as nl
from numerics.torch_utils import generator, resolve_device
from proofs_checks.context import pyplot
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest, smallest
from proofs_checks.claims._attention_common import Resolved
from theory import lora as tl


# form: {"make": (base nn.Linear, r, alpha, generator) -> module with .A, .B, forward,
#        "merge": (W0, A, B, alpha, r) -> merged weight, "grads": (X, G, A, B, s) -> (dL/dA, dL/dB),
#        "count": (d, k, r) -> trainable parameters}

# (d_out, d_in, r, alpha): alpha/r != 1 everywhere so a scale error shows
_CONFIGS = [(8, 6, 2, 16.0), (5, 7, 3, 1.0), (12, 12, 4, 8.0), (3, 9, 1, 2.0)]
#: (d, k, r) at which SymPy expands the minors of BA (the rank clauses' derived scope)
_RANK_SIZES = ((3, 3, 1), (3, 4, 2))


#: (n, d, k, r) at which the form's gradients are compared with the general (symbolic-size) closed forms
_GRAD_SIZES = ((3, 3, 2, 2), (2, 2, 2, 1), (5, 4, 6, 3), (4, 7, 3, 3))


def _symbolic(form, ctx) -> CheckResult:
    """The form's gradients vs ∂L/∂A = s Bᵀ Gᵀ X, ∂L/∂B = s Gᵀ X Aᵀ derived for symbolic n, d, k, r
    (tl.derive_lora_general), specialised to four sizes (random points, and B = 0); the form's count
    vs the derived r(d + k) and the polynomial fitted to symbolic entry counts; the rank bound by
    minors at fixed sizes."""
    rng = ctx.rng()
    R = Resolved()
    for n, d, k, r in _GRAD_SIZES:
        (X, G, A, B, s), grads = tl.lora_gradients_at(n, d, k, r)
        args = [list(X), list(G), list(A), list(B), s]
        fA = sp.lambdify(args, grads["grad_A"], "numpy")
        fB = sp.lambdify(args, grads["grad_B"], "numpy")
        for trial in range(4):
            Xn, Gn, An = rng.normal(size=(n, k)), rng.normal(size=(n, d)), rng.normal(size=(r, k))
            Bn = np.zeros((d, r)) if trial == 0 else rng.normal(size=(d, r))
            sv = float(rng.uniform(0.5, 4.0))
            flat = [Xn.ravel(), Gn.ravel(), An.ravel(), Bn.ravel(), sv]
            gA, gB = form["grads"](Xn, Gn, An, Bn, sv)
            label = f"n{n}_d{d}_k{k}_r{r}"
            R.pair(f"grad_A_{label}", gA, np.asarray(fA(*flat), dtype=float), div="ref1")  # max_rel_error
            R.pair(f"grad_B_{label}", gB, np.asarray(fB(*flat), dtype=float), div="ref1")
    gen = tl.derive_lora_general()
    dg, kg, rg = gen.facts["sizes"][1:]
    cnt = tl.derive_lora_count()
    dd, kk, rr = cnt.facts["symbols"]
    grid = [(a, b, c) for a in (1, 3, 64, 768) for b in (2, 5, 64, 3072) for c in (1, 4, 8) if c <= smallest(a, b)]
    R.prop("count", float(largest(abs(form["count"](a, b, c) - int(gen.facts["count"].subs({dg: a, kg: b, rg: c})))
                                  for a, b, c in grid)), "difference of the trainable-parameter count from r(d + k) (an integer)")
    poly = sp.lambdify((dd, kk, rr), cnt.result)
    R.prop("count_vs_fit", float(largest(abs(form["count"](a, b, c) - poly(a, b, c)) for a, b, c in grid)),
           "difference of the trainable-parameter count from the fitted polynomial (an integer)")
    rank_dv = {f"{D}x{K} r={Rk}": tl.derive_lora_rank(D, K, Rk) for D, K, Rk in _RANK_SIZES}
    R.prop("nonzero_minors_of_order_r_plus_1", float(sum(int(v.result) for v in rank_dv.values())),
           "count of nonzero minors of order r+1 (derived 0)")
    R.prop("leading_r_minor_identically_zero", float(sum(sp.expand(v.facts["leading_r_minor"]) == 0 for v in rank_dv.values())),
           "count of sizes whose leading r×r minor of BA expands to 0 (derived: a nonzero polynomial, rank r generically)")
    nmax = largest(n + largest(d, k) for n, d, k, _ in _GRAD_SIZES)
    tol = 32 * nmax * EPS
    return R.result(tol, "float64 rounding of products of O(1) entries summed over n+max(d,k) terms "
                    f"(32·(n+max(d,k))·eps = 32·{nmax}·eps, relative to max(1, max|grad|)); counts and minors exact",
                    seeds=[ctx.seed_for()], sizes={"(n, d, k, r)": list(_GRAD_SIZES), "trials per size": 4})


def _base_and_lora(form, d, k, r, alpha, seed, device):
    g = generator(seed)
    base = nn.Linear(k, d, dtype=torch.float64)
    with torch.no_grad():
        base.weight.copy_(torch.randn(d, k, generator=g, dtype=torch.float64) / np.sqrt(k))
        base.bias.copy_(torch.randn(d, generator=g, dtype=torch.float64))
    base = base.to(device)
    return base, form["make"](base, r, alpha, g)


def _torch_module(form, ctx) -> CheckResult:
    """The form's LoRA wrapper of a real ``torch.nn.Linear``: equals the base at init, autograd
    gradients at step 0 (∂/∂A = 0, ∂/∂B = form's closed form), trainable count from ``numel``,
    merged weight = unmerged forward after B moves, rank of the update ≤ r (SVD)."""
    dev = resolve_device(ctx.device)
    n = ctx.size(16, 64, 256)
    R = Resolved()
    seeds = []
    for i, (d, k, r, alpha) in enumerate(_CONFIGS[: ctx.size(3, 4)]):
        seed = ctx.seed_for(i)
        seeds.append(seed)
        base, lora = _base_and_lora(form, d, k, r, alpha, seed, dev)
        g = generator(seed + 1)
        X = torch.randn(n, k, generator=g, dtype=torch.float64).to(dev)
        G = torch.randn(n, d, generator=g, dtype=torch.float64).to(dev)
        y0 = base(X).detach()
        y = lora(X)
        R.pair(f"init_vs_base[{i}]", y, y0, div="ref1")
        (G * y).sum().backward()
        gA_ref, gB_ref = lora.A.grad.cpu().numpy(), lora.B.grad.cpu().numpy()
        R.prop(f"autograd_grad_A_is_zero[{i}]", float(np.abs(gA_ref).max()), "absolute entry of autograd's ∂L/∂A at init (derived 0)")
        A0, B0 = lora.A.detach().cpu().numpy(), lora.B.detach().cpu().numpy()
        gA, gB = form["grads"](X.cpu().numpy(), G.cpu().numpy(), A0, B0, alpha / r)
        R.pair(f"grads_vs_autograd[{i}]", gA, gA_ref, div="ref1")  # max_rel_error of each gradient
        R.pair(f"grads_vs_autograd[{i}]", gB, gB_ref, div="ref1")
        R.prop(f"grad_B_nonzero[{i}]", float(np.abs(gB_ref).max() == 0.0), "indicator that ∂L/∂B vanished")
        R.prop(f"trainable_count[{i}]", float(abs(nl.count_trainable(lora) - form["count"](d, k, r))),
               "difference of the trainable-parameter count (an integer)")
        with torch.no_grad():  # pretend training moved B
            lora.B.copy_(torch.randn(d, r, generator=g, dtype=torch.float64).to(dev))
            Wm = form["merge"](base.weight, lora.A, lora.B, alpha, r)
            ym = X @ Wm.T + base.bias
            yu = lora(X)
            R.pair(f"merged_vs_unmerged[{i}]", ym, yu, div="ref1")
            sv = torch.linalg.svdvals(Wm - base.weight).cpu().numpy()
            R.prop(f"singular_values_beyond_r[{i}]", float(sv[r:].max() / largest(sv[0], 1.0)) if len(sv) > r else 0.0,
                   "singular value of the update beyond rank r, relative to max(1, σ_1)")
            R.prop(f"rank_below_r[{i}]", float(sv[r - 1] <= 1e-8 * sv[0]),
                   "indicator that σ_r of the update (random A, B) is ≤ 1e-8·σ_1 (rank < r: not generic)")
    kmax = largest(c[1] for c in _CONFIGS)
    tol = 64 * kmax * EPS
    return R.result(tol, f"float64 rounding of length-{kmax} dot products (64·k·eps, relative); "
                    "the zero gradient and the counts are exact", seeds=seeds, sizes={"n": n, "configs": _CONFIGS},
                    device=str(dev))


def _trained(form, ctx) -> CheckResult:
    """Train S LoRA adapters (one per seed, stacked with torch.func and vmapped) with
    torch.optim.Adam towards a rank-r change of the base: before the first step each adapter's
    output equals its base layer (zero-init B); afterwards the frozen base is bit-identical,
    merged = unmerged, the learned update has rank ≤ r, and (default and full sizes) the fit reached
    1e-3 of the initial loss (a rank-r target is representable)."""
    dev = resolve_device(ctx.device)
    S, steps, n = ctx.size(3, 6, 16), ctx.size(40, 400, 1500), 64
    d, k, r, alpha = 6, 5, 2, 4.0
    seeds = [ctx.seed_for("seed", s) for s in range(S)]
    mods = [_base_and_lora(form, d, k, r, alpha, sd, dev)[1] for sd in seeds]
    params, buffers = torch.func.stack_module_state(mods)
    W0 = params["base.weight"].detach().clone()
    b0 = params["base.bias"].detach().clone()
    for name, p in params.items():  # train what the module marks trainable
        p.requires_grad_(any(dict(m.named_parameters())[name].requires_grad for m in mods[:1]))
    g = generator(ctx.seed_for("data"))
    tA = torch.randn(S, r, k, generator=g, dtype=torch.float64).to(dev)
    tB = torch.randn(S, d, r, generator=g, dtype=torch.float64).to(dev)
    W_target = W0 + tB @ tA / np.sqrt(k)
    X = torch.randn(n, k, generator=g, dtype=torch.float64).to(dev)
    Y = X @ W_target.transpose(1, 2) + b0[:, None, :]

    def fwd(p, bufs, x):
        return torch.func.functional_call(mods[0], (p, bufs), (x,))

    vf = torch.vmap(fwd, in_dims=(0, 0, None))
    with torch.no_grad():  # zero-init B: before any step every adapter is exactly its base layer
        init_out, init_base = vf(params, buffers, X).clone(), X @ W0.transpose(1, 2) + b0[:, None, :]
    opt = torch.optim.Adam([p for p in params.values() if p.requires_grad], lr=0.02)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((vf(params, buffers, X) - Y) ** 2).mean(dim=(1, 2))
        loss.sum().backward()
        opt.step()
        losses.append(loss.detach().cpu().numpy())
    with torch.no_grad():
        A, B = params["A"], params["B"]
        Wm = form["merge"](params["base.weight"], A, B, alpha, r)
        ym = X @ Wm.transpose(1, 2) + params["base.bias"][:, None, :]
        yu = vf(params, buffers, X)
        sv = torch.linalg.svdvals(Wm - W0)
    Rs = Resolved()
    Rs.pair("init_output_vs_base", init_out, init_base)
    Rs.pair("base_weight_changed", params["base.weight"], W0)
    Rs.pair("base_bias_changed", params["base.bias"], b0)
    Rs.pair("merged_vs_unmerged", ym, yu, div="ref1")
    Rs.prop("singular_values_beyond_r", float((sv[:, r:].max(dim=1).values / sv[:, 0].clamp_min(1.0)).max()),
            "singular value of the learned update beyond rank r, relative to max(1, σ_1)")
    final = np.asarray(losses[-1])
    details = dict(final_loss_max=float(final.max()), initial_loss_mean=float(np.mean(losses[0])))
    if ctx.want_figures:
        plt = pyplot()

        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.semilogy(np.asarray(losses))
        ax.set_xlabel("Adam step")
        ax.set_ylabel("MSE to a rank-r change")
        ax.set_title(f"LoRA r={r} on a {d}×{k} Linear, {S} seeds")
        ctx.save_figure(fig, "lora_training")
    tol = 64 * k * EPS
    details["fit_ratio"] = float(final.max() / largest(np.mean(losses[0]), 1e-300))
    if steps >= 400:  # gated where the budget allows convergence; quick runs (40 steps) only report it
        Rs.prop("fit_ratio_over_1e-3", details["fit_ratio"] / 1e-3 * tol,
                "final/initial loss ratio, in units of 1e-3 mapped onto the tolerance (ratio/1e-3·tol)")
    return Rs.result(tol, "init = base, frozen base exact; merge and rank to float64 rounding (64·k·eps); "
                     "fit ≤ 1e-3 of the initial loss (mapped onto the same tolerance) at ≥ 400 Adam steps; resolution "
                     "relative to the base layer's output and weights and the unmerged output (the training is exact "
                     "algebra here: no optimisation error enters these comparisons)",
                     seeds=seeds, sizes={"S": S, "steps": steps, "d": d, "k": k, "r": r}, device=str(dev), details=details)


def _cx_rank_range(ctx) -> Counterexample:
    """Without r ≤ min(d, k): d = 3, k = 2, r = 3; random A, B give rank(sBA) = 2 < r (a d×k matrix
    has rank ≤ min(d, k)), so the generic-rank clause fails (the bound rank ≤ r still holds)."""
    d, k, r, alpha = 3, 2, 3, 2.0
    rng = ctx.rng("rank_range")
    B, A = rng.normal(size=(d, r)), rng.normal(size=(r, k))
    rank = int(np.linalg.matrix_rank(nl.merge_weight(np.zeros((d, k)), A, B, alpha, r)))
    return Counterexample({"d": d, "k": k, "r": r, "alpha": alpha, "A, B": "Gaussian"}, "rank_generic",
                          f"rank(sBA) = {rank} < r = {r} for Gaussian A, B", violated=rank < r,
                          error=float(r - rank), tolerance=0.0,
                          justification="matrix_rank with NumPy's default tolerance on a 3×2 matrix of O(1) entries; "
                                        "rank ≤ min(d, k) = 2 holds for every A, B, so no draw reaches r = 3")


def _cx_alpha(ctx) -> Counterexample:
    """Without α > 0: α = 0 makes the update sBA = 0 for every A, B (rank 0 < r)."""
    d, k, r = 4, 3, 2
    rng = ctx.rng("alpha")
    B, A = rng.normal(size=(d, r)), rng.normal(size=(r, k))
    rank = int(np.linalg.matrix_rank(nl.merge_weight(np.zeros((d, k)), A, B, 0.0, r)))
    return Counterexample({"d": d, "k": k, "r": r, "alpha": 0.0}, "rank_generic",
                          f"rank(sBA) = {rank} < r = {r}: with α = 0 the adapter never changes the layer",
                          violated=rank < r, error=float(r - rank), tolerance=0.0, justification="exact: s = 0")


def _base(d, k, seed):
    g = generator(seed)
    base = nn.Linear(k, d, dtype=torch.float64)
    with torch.no_grad():
        base.weight.copy_(torch.randn(d, k, generator=g, dtype=torch.float64) / np.sqrt(k))
        base.bias.copy_(torch.randn(d, generator=g, dtype=torch.float64))
    return base, g


def _cx_B_zero(ctx) -> Counterexample:
    """Without B₀ = 0: B Gaussian at init; the adapter's output differs from the base layer's."""
    d, k, r, alpha = 5, 4, 2, 4.0
    base, g = _base(d, k, ctx.seed_for("B_zero"))
    lora = nl.LoRALinear(base, r, alpha, generator=g, init_B="normal")
    X = torch.randn(8, k, generator=g, dtype=torch.float64)
    with torch.no_grad():
        gap = float((lora(X) - base(X)).abs().max() / base(X).abs().max().clamp_min(1.0))
    tol = 64 * k * EPS
    return exceeds({"d": d, "k": k, "r": r, "alpha": alpha, "B_0": "Gaussian"}, "init_equals_base",
                   f"max |f_init(x) − f_W0(x)| = {gap:.3g} (relative to max(1, |f_W0|)) on 8 inputs",
                   error=gap, tolerance=tol,
                   justification="float64 rounding of length-k dot products (64·k·eps, relative)")


def _cx_frozen(ctx) -> Counterexample:
    """Without the base frozen: the optimiser also trains W₀ and its bias, d·k + d more parameters."""
    d, k, r, alpha = 5, 4, 2, 4.0
    base, g = _base(d, k, ctx.seed_for("frozen"))
    n = nl.count_trainable(nl.LoRALinear(base, r, alpha, generator=g, freeze_base=False))
    want = nl.trainable_count(d, k, r)
    return Counterexample({"d": d, "k": k, "r": r, "base": "trainable"}, "trainable_count",
                          f"Σ numel over requires_grad = {n}, not r(d + k) = {want}", violated=n != want,
                          error=float(abs(n - want)), tolerance=0.0, justification="exact integer count")


_SIZES_RUN = "(d, k, r) ∈ {(8, 6, 2), (5, 7, 3), (12, 12, 4), (3, 9, 1)} (first three at --quick), n = 64 inputs (16 at --quick)"
_TRAINED = "d = 6, k = 5, r = 2, 6 Adam-trained seeds (3 at --quick)"


declare(
    id="lora.low_rank",
    title="LoRA: zero-init B reproduces the base layer; rank(ΔW) ≤ r (= r generically); merge = unmerged; r(d+k) trainables",
    hypotheses=(
        setting("shapes", r"W_0\in\mathbb R^{d\times k},\ B\in\mathbb R^{d\times r},\ A\in\mathbb R^{r\times k},\ "
                r"f(x)=x(W_0+\tfrac{\alpha}{r}BA)^\top+b",
                "the adapter and its clauses are defined by these shapes"),
        Hypothesis("rank_range", r"1\le r\le\min(d,k)", "the adapter rank is at most min(d, k)",
                   counterexample=_cx_rank_range),
        Hypothesis("alpha_pos", r"\alpha>0", "a positive LoRA scale α (s = α/r)", counterexample=_cx_alpha),
        Hypothesis("B0_zero", r"B_0=0", "B initialised to zero (A₀ arbitrary, e.g. Gaussian)", counterexample=_cx_B_zero),
        Hypothesis("base_frozen", r"W_0,\ b\ \text{frozen}", "only A and B are trained", counterexample=_cx_frozen),
    ),
    clauses=(
        Clause("init_equals_base", r"f_{\text{init}}=f_{W_0}", "derived",
               "symbolic n, d, k, r: X(W_0 + s·0·A)ᵀ = XW_0ᵀ (matrix symbols, B a ZeroMatrix)",
               ("derivation", "torch_linear_wrapper", "trained_adapters"), also=(("checked", _SIZES_RUN + "; " + _TRAINED),)),
        Clause("gradients", r"\partial_AL|_{B=0}=0,\ \partial_BL=\tfrac{\alpha}{r}G^\top XA^\top,\ \partial_AL=\tfrac{\alpha}{r}B^\top G^\top X",
               "derived", "symbolic n, d, k, r (SymPy matrix calculus of tr(GᵀY), and the index form with delta sums)",
               ("derivation", "gradients_count_rank_vs_sympy", "torch_linear_wrapper"),
               also=(("derived_at", "n = d = k = 2, r = 1"),
                     ("checked", "the form against the general gradients at (n, d, k, r) ∈ {(3, 3, 2, 2), (2, 2, 2, 1), "
                      "(5, 4, 6, 3), (4, 7, 3, 3)}; " + _SIZES_RUN + ", against autograd at B = 0"))),
        Clause("rank_le_r", r"\operatorname{rank}(\tfrac{\alpha}{r}BA)\le r", "derived",
               "symbolic d, k, r: rank(BA) ≤ Min(d, k, r) ≤ r read off the shapes (rank rules typed in: rank(PQ) ≤ "
               "min(rank P, rank Q), rank P ≤ min(rows, cols))",
               ("derivation", "gradients_count_rank_vs_sympy", "torch_linear_wrapper", "trained_adapters"),
               also=(("derived_at", "(d, k, r) = (3, 3, 1), (3, 4, 2): every (r+1)×(r+1) minor of BA expands to 0"),
                     ("checked", _SIZES_RUN + " (SVD); " + _TRAINED)), rests_on=("rank inequalities",)),
        Clause("rank_generic", r"\operatorname{rank}(\tfrac{\alpha}{r}BA)=r\ \text{for generic}\ A,B\ \text{(all but a null set)}",
               "derived", "symbolic r ≤ min(d, k): the leading r×r minor det(B_r A_r) = det B_r · det A_r is 1 at B_r = A_r = I_r, "
               "a nonzero polynomial (typed in: it vanishes only on a null set; a nonzero r×r minor gives rank ≥ r; "
               "s = α/r ≠ 0 keeps the rank)", ("derivation", "gradients_count_rank_vs_sympy", "torch_linear_wrapper"),
               also=(("derived_at", "(d, k, r) = (3, 3, 1), (3, 4, 2): the leading r×r minor of BA is a nonzero polynomial"),
                     ("checked", _SIZES_RUN + ": σ_r > 1e-8·σ_1 for Gaussian A, B")), rests_on=("generic rank (null set)",)),
        Clause("merge", r"x(W_0+\tfrac{\alpha}{r}BA)^\top=xW_0^\top+\tfrac{\alpha}{r}(xA^\top)B^\top", "derived",
               "symbolic n, d, k, r (matrix symbols)", ("derivation", "torch_linear_wrapper", "trained_adapters"),
               also=(("checked", _SIZES_RUN + "; " + _TRAINED),)),
        Clause("trainable_count", r"\#\text{trainable}=r(d+k)", "derived",
               "symbolic d, k, r: the entries of A (r×k) and B (d×r), read off their shapes (the base is frozen)",
               ("derivation", "gradients_count_rank_vs_sympy", "torch_linear_wrapper"),
               also=(("derived_at", "d, k, r ∈ {1, 2} fitted to a multilinear ansatz (the ansatz is assumed), held out at "
                      "(5, 3, 4), (7, 2, 3)"),
                     ("checked", "numel of the torch module at " + _SIZES_RUN.split(" (first")[0]
                      + "; the formula at d ∈ {1, 3, 64, 768}, k ∈ {2, 5, 64, 3072}, r ∈ {1, 4, 8}")), rests_on=("multilinear-count ansatz",)),
    ),
    source="lecture notes 001 (fine-tuning: W ↦ W + BA); Hu et al. (2021) LoRA",
    kind="theorem",
    form={"make": nl.make_lora, "merge": nl.merge_weight, "grads": nl.lora_grads, "count": nl.trainable_count},
    derivation=tl.derive_lora_general,
    checks=(
        Check("gradients_count_rank_vs_sympy", "symbolic", _symbolic,
              "form's gradients vs the symbolic-size closed forms at four sizes; count vs r(d + k); rank bound by minors"),
        Check("torch_linear_wrapper", "numeric", _torch_module, "LoRA around torch.nn.Linear: init, autograd, numel, merge, SVD rank", uses_device=False),
        Check("trained_adapters", "trained", _trained, "Adam-trained adapters (vmapped over seeds): base frozen, merge, rank"),
    ),
    mutants=(
        Mutant("B_random_init", "wrong formula", "B initialised Gaussian: output differs from the base at init, ∂L/∂A ≠ 0",
               dict(make=lambda base, r, a, g: nl.LoRALinear(base, r, a, generator=g, init_B="normal"),
                    merge=nl.merge_weight, grads=nl.lora_grads, count=nl.trainable_count)),
        Mutant("merge_scale_alpha", "wrong constant", "merge with scale α instead of α/r",
               dict(make=nl.make_lora, merge=lambda W0, A, B, a, r: W0 + a * (B @ A), grads=nl.lora_grads, count=nl.trainable_count)),
        Mutant("count_rdk", "wrong formula", "trainable count r·d·k",
               dict(make=nl.make_lora, merge=nl.merge_weight, grads=nl.lora_grads, count=lambda d, k, r: r * d * k)),
        Mutant("grads_drop_scale", "dropped term", "gradients without the factor α/r",
               dict(make=nl.make_lora, merge=nl.merge_weight, grads=lambda X, G, A, B, s: nl.lora_grads(X, G, A, B, 1.0),
                    count=nl.trainable_count)),
        Mutant("base_not_frozen", "wrong formula", "base layer left trainable (count d·k + d + r(d+k), base moves in training)",
               dict(make=lambda base, r, a, g: nl.LoRALinear(base, r, a, generator=g, freeze_base=False),
                    merge=nl.merge_weight, grads=nl.lora_grads, count=nl.trainable_count)),
    ),
    notes="Lecture notes 001 writes W ↦ W + BA without the α/r scale of Hu et al.; the scale only reparametrises B "
          "(α ≠ 0). rank(BA) ≤ r holds for every r; it is an upper bound, attained for generic A, B only when "
          "r ≤ min(d, k) (else rank ≤ min(d, k) < r), and after training the rank can be lower (e.g. B still 0).",
)
