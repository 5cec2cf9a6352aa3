"""Group A, continued: permutation equivariance, LayerNorm and the transformer block (lecture notes 000,
001, 003, 004). Binds theory/attention.py and numerics/attention.py to checks, tolerances and mutants."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import sympy as sp
import torch

from numerics import attention as na
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import confirm_resolution, largest, smallest
from theory import attention as ta
from proofs_checks.claims._attention_common import Resolved, _T, _maxabs, _np, _torch_seed


# --------------------------------------------------------------------------------------------
# attn.permutation_equivariance
# form: {"block": block(X, params, *, causal) -> X', "relation": "equivariant" | "invariant",
#        "broken_by": set of {"positional_encoding", "causal_mask"}}

_SETTINGS = ("plain", "positional_encoding", "causal_mask")


def _relation_pair(relation, fX, fPX, perm):
    """(f(PX), its claimed value): P f(X) (equivariant) or f(X) (invariant)."""
    target = np.take_along_axis(fX, perm[..., None], axis=-2) if relation == "equivariant" else fX
    return fPX, target


def _residuals(pairs, delta=0.0):
    """‖f(PX) − (1 + δ)·target‖_∞ per batch element, per setting (δ = 0: the relation's residual;
    δ ≠ 0: against the reference scaled by 1 + δ, for the resolution)."""
    with np.errstate(all="ignore"):
        return {s: np.abs(fPX - (1.0 + delta) * t).reshape(len(fPX), -1).max(-1) for s, (fPX, t) in pairs.items()}


def _equivariance_verdicts(form, apply, X, perm, pe):
    """(f(PX), claimed value) in the three settings; ``apply(X, causal)`` runs the block."""
    PX = np.take_along_axis(X, perm[..., None], axis=-2)
    PE = np.broadcast_to(pe, X.shape)
    out = {}
    with np.errstate(all="ignore"):
        out["plain"] = _relation_pair(form["relation"], apply(X, False), apply(PX, False), perm)
        out["positional_encoding"] = _relation_pair(form["relation"], apply(X + PE, False), apply(PX + PE, False), perm)
        out["causal_mask"] = _relation_pair(form["relation"], apply(X, True), apply(PX, True), perm)
    return out


def _kept(form, s):
    return s == "plain" or s not in form["broken_by"]


def _relation_resolution(form, pairs, tol_eq) -> float:
    """Smallest relative change δ of the claimed value (P f(X), or f(X)) that a setting claimed to
    keep the relation rejects: its residual against (1 + δ)·target is at least |δ|·max|target| −
    residual (triangle inequality), which exceeds tol_eq for |δ| > (tol_eq + residual)/max|target|."""
    res = _residuals(pairs)
    eps = [(tol_eq + float(np.max(res[s]))) / _maxabs(t) for s, (_, t) in pairs.items()
           if _kept(form, s) and 0 < _maxabs(t) < math.inf]
    return smallest(eps) if eps else math.nan


_REL_UNITS_PERM = ("relative change of the claimed value P·f(X) (f(X) for invariance), max|f(PX) − (1+δ)·P f(X)| "
                   "in a setting claimed to keep the relation")


def _equivariance_score(form, residuals, scale, N, D):
    """Each setting in units of its threshold: a setting claimed to keep the relation needs a
    residual within rounding (tol_eq); one claimed to break it needs a residual ≥ thr_break
    (a counterexample). Score ≤ 1 means the claim holds in that setting."""
    tol_eq = 64 * N * D * EPS * scale
    thr_break = 1e-6 * scale
    score, shown = {}, {}
    for s in _SETTINGS:
        r = residuals[s]
        claimed_kept = _kept(form, s)
        if claimed_kept:
            score[s] = float(np.max(r)) / tol_eq if np.all(np.isfinite(r)) else math.inf
        else:
            score[s] = thr_break / largest(float(np.max(r)), 1e-300)
        shown[s] = {"max_residual": float(np.max(r)), "claimed": "kept" if claimed_kept else "broken"}
    return score, shown, tol_eq, thr_break


def _perm_batch(rng, B, N):
    perm = np.stack([rng.permutation(N) for _ in range(B)])
    perm[0] = np.r_[1, 0, np.arange(2, N)]  # the simplest counterexample: swap the first two tokens
    return perm


def _perm_symbolic(form, ctx) -> CheckResult:
    """The form's claims vs the derivation: equivariance for every permutation (N = 3), broken by a
    causal mask and by an added positional encoding (exact counterexamples)."""
    der = ta.derive_permutation_equivariance(3)
    derived_broken = {s for s, key in (("causal_mask", "breaks_with_causal_mask"),
                                       ("positional_encoding", "breaks_with_positional_encoding")) if der.result[key]}
    wrong = []
    if der.result["equivariant"] and form["relation"] != "equivariant":
        wrong.append(f"relation {form['relation']!r} but SymPy derives equivariance")
    for s in sorted(derived_broken ^ set(form["broken_by"])):
        wrong.append(f"{s}: claimed {'broken' if s in form['broken_by'] else 'kept'}, derived {'broken' if s in derived_broken else 'kept'}")
    return compare(len(wrong), 0, "exact: the claimed truth table must equal the derived one",
                   sizes={"N": 3}, details={"disagreements": wrong, "causal_counterexample": der.facts["causal_counterexample"],
                                            "pe_counterexample": der.facts["pe_counterexample"]})


def _perm_numeric(form, ctx) -> CheckResult:
    """Our block (attention + LayerNorm + MLP) on random inputs and permutations: the claimed
    relation holds to rounding without PE/mask; each claimed breaker yields a counterexample."""
    rng = ctx.rng()
    B, N, D, M, F = ctx.size(6, 16, 64), 6, 8, 2, 16
    p = na.random_block_params(rng, D, M, F)
    X = rng.normal(size=(B, N, D))
    perm = _perm_batch(rng, B, N)
    pe = na.sinusoidal_pe(np.arange(N), D)
    pairs = _equivariance_verdicts(form, lambda Z, causal: form["block"](Z, p, causal=causal), X, perm, pe)
    res = _residuals(pairs)
    with np.errstate(all="ignore"):
        scale = largest(1.0, _maxabs(form["block"](X, p)))
    scale = scale if math.isfinite(scale) else 1.0
    score, shown, tol_eq, thr = _equivariance_score(form, res, scale, N, D)
    eps = _relation_resolution(form, pairs, tol_eq)
    conf = confirm_resolution(lambda dl: worst(_equivariance_score(form, _residuals(pairs, dl), scale, N, D)[0]), 1.0, eps)
    return compare(worst(score), 1.0, f"residual / threshold: kept ⇒ ≤ 64·N·D·eps·scale = {tol_eq:.2g}; broken ⇒ ≥ {thr:.2g} "
                   "(1e-6·scale); resolution: (tol_eq + residual)/max|P f(X)| over the kept settings (the breakers are "
                   "counterexamples, margins, not comparisons)",
                   seeds=[ctx.seed_for()], sizes={"batch": B, "N": N, "D": D, "heads": M, "mlp width": F},
                   details={"settings": shown, "score": score, "swap_counterexample_residual": {s: float(r[0]) for s, r in res.items()},
                            "resolution_confirmed": conf},
                   resolution=eps, resolution_units=_REL_UNITS_PERM)


def _perm_torch(form, ctx) -> CheckResult:
    """The claims on torch.nn.TransformerEncoderLayer (pre- and post-LN, dropout 0, float64):
    causal via src_mask + is_causal, PE = sinusoidal encoding added to the input; and the form's
    block, given the pre-LN layer's weights, reproduces that layer's outputs to rounding."""
    rng = ctx.rng()
    B, N, D, M, F = ctx.size(4, 16, 64), 6, 8, 2, 16
    X = rng.normal(size=(B, N, D))
    perm = _perm_batch(rng, B, N)
    pe = na.sinusoidal_pe(np.arange(N), D)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(N, dtype=torch.float64, device=ctx.device)
    score, shown, eps, parts = {}, {}, [], []
    for norm_first in (True, False):
        with _torch_seed(ctx.seed_for(norm_first)):
            layer = torch.nn.TransformerEncoderLayer(D, M, dim_feedforward=F, dropout=0.0, batch_first=True,
                                                     norm_first=norm_first, dtype=torch.float64).to(ctx.device).eval()

        def apply(Z, causal, layer=layer):
            with torch.no_grad():
                kw = {"src_mask": mask, "is_causal": True} if causal else {}
                return _np(layer(_T(Z, ctx.device), **kw))

        pairs = _equivariance_verdicts(form, apply, X, perm, pe)
        ref = apply(X, False)
        scale = largest(1.0, _maxabs(ref))
        sc, sh, tol_eq, thr = _equivariance_score(form, _residuals(pairs), scale, N, D)
        tag = "pre_ln" if norm_first else "post_ln"
        score.update({f"{tag}_{k}": v for k, v in sc.items()})
        shown[tag] = sh
        eps.append(_relation_resolution(form, pairs, tol_eq))
        parts.append((tag, pairs, scale))
        if norm_first:  # the form's block is the pre-LN layer: same weights, same outputs
            with np.errstate(all="ignore"):
                mine = form["block"](X, na.encoder_layer_to_block(layer))
            score["block_vs_torch_pre_ln"] = _maxabs(mine - ref) / tol_eq if np.all(np.isfinite(mine)) else math.inf
            if math.isfinite(score["block_vs_torch_pre_ln"]):
                eps.append((tol_eq + _maxabs(mine - ref)) / _maxabs(ref))
            block = (mine, ref, tol_eq)

    def score_at(dl):  # every comparison against its reference scaled by 1 + dl
        out = {}
        for tag, pairs, scale in parts:
            out.update({f"{tag}_{k}": v for k, v in _equivariance_score(form, _residuals(pairs, dl), scale, N, D)[0].items()})
        mine, ref, tol_b = block
        with np.errstate(all="ignore"):
            out["block_vs_torch_pre_ln"] = _maxabs(mine - (1 + dl) * ref) / tol_b
        return worst(out)

    eps_min = smallest(eps)
    return compare(worst(score), 1.0, "residual / threshold as in the numeric check (rounding-level vs 1e-6·scale); "
                   "resolution: (tol_eq + residual)/max|reference| over the kept settings of both layers and the "
                   "form's block against torch's pre-LN layer",
                   seeds=[ctx.seed_for(), ctx.seed_for(True), ctx.seed_for(False)], sizes={"batch": B, "N": N, "D": D, "heads": M},
                   device=ctx.device, details={"settings": shown, "score": score,
                                               "resolution_confirmed": confirm_resolution(score_at, 1.0, eps_min)},
                   resolution=eps_min, resolution_units=_REL_UNITS_PERM + " (and of torch's layer output for the block)")


def _block_with_position(X, p, *, causal=False):
    Y = na.block_pre_ln(X, p, causal=causal)
    return Y + 0.5 * na.sinusoidal_pe(np.arange(Y.shape[-2]), Y.shape[-1])


def _block_token_mixing(X, p, *, causal=False):
    Y = na.block_pre_ln(X, p, causal=causal)
    return Y + np.cumsum(Y, axis=-2) / np.arange(1, Y.shape[-2] + 1)[:, None]


_PERM_FORM = {"block": na.block_pre_ln, "relation": "equivariant", "broken_by": frozenset({"positional_encoding", "causal_mask"})}

def _perm_cx(ctx, what: str, run) -> Counterexample:
    """f(PX) vs P f(X) for the swap of tokens 1 and 2, N = 3, D = 4, two heads, MLP width 8, where
    ``run(block, Z)`` is the block in the setting ``what`` (the hypothesis dropped)."""
    rng = ctx.rng()
    N, D, M, F = 3, 4, 2, 8
    p = na.random_block_params(rng, D, M, F)
    X = rng.normal(size=(N, D))
    perm = np.array([1, 0, 2])
    f = lambda Z: run(lambda W, **kw: na.block_pre_ln(W, p, **kw), Z)  # noqa: E731
    res = _maxabs(f(X[perm]) - f(X)[perm])
    scale = largest(1.0, _maxabs(f(X)))
    thr = 1e-6 * scale
    return exceeds({"N": N, "D": D, "heads": M, "mlp width": F, "P": "swap tokens 1 and 2", "setting": what},
                   "equivariant", f"max |f(PX) − P f(X)| = {res:.3g} with {what}", error=res,
                   tolerance=thr, justification="the numeric check's threshold for a broken relation (1e-6·max(1, max|f(X)|)); "
                   "without the setting the residual is at rounding level (≤ 64·N·D·eps·scale)")


def _perm_cx_pe(ctx) -> Counterexample:
    return _perm_cx(ctx, "sinusoidal PE added to the input",
                    lambda blk, Z: blk(Z + na.sinusoidal_pe(np.arange(Z.shape[-2]), Z.shape[-1])))


def _perm_cx_mask(ctx) -> Counterexample:
    return _perm_cx(ctx, "a causal mask", lambda blk, Z: blk(Z, causal=True))


def _perm_cx_mixing(ctx) -> Counterexample:
    return _perm_cx(ctx, "a running mean over tokens after the block",
                    lambda blk, Z: (lambda Y: Y + np.cumsum(Y, axis=-2) / np.arange(1, Y.shape[-2] + 1)[:, None])(blk(Z)))


def _perm_cx_dropout(ctx) -> Counterexample:
    """Without eval mode: torch's TransformerEncoderLayer(4, 2, 8, dropout=0.1) in .train(), the same
    seed before both calls (so the dropout masks are the same, attached to positions, not tokens)."""
    N, D = 3, 4
    with _torch_seed(ctx.seed_for("dropout_init")):
        layer = torch.nn.TransformerEncoderLayer(D, 2, 8, dropout=0.1, batch_first=True, dtype=torch.float64).train()
    X = _T(ctx.rng().normal(size=(1, N, D)))
    perm = [1, 0, 2]
    outs = []
    for Z in (X[:, perm], X):
        with torch.no_grad(), _torch_seed(ctx.seed_for("dropout_masks")):
            outs.append(_np(layer(Z)))
    res = _maxabs(outs[0] - outs[1][:, perm])
    thr = 1e-6 * largest(1.0, _maxabs(outs[1]))
    return exceeds({"layer": "TransformerEncoderLayer(4, 2, 8, dropout=0.1).train()", "N": N,
                    "P": "(2, 1, 3): swap tokens 1 and 2", "seed": "the same before both calls"}, "equivariant",
                   f"max |f(PX) − P f(X)| = {res:.3g}", error=res, tolerance=thr,
                   justification="the numeric check's threshold for a broken relation (1e-6·max(1, max|f(X)|)); "
                   "in .eval() the same layer gives a residual at rounding level")


declare(
    id="attn.permutation_equivariance",
    fixed_sizes="a permutation of a symbolic number of tokens has no SymPy form (PermutationMatrix needs a concrete permutation): derived at N = 3 (a generic 3×3 score matrix), checked at N = 6 only",
    title="A block without PE or mask, dropout off (eval mode), is permutation-equivariant (PE or a causal mask breaks it)",
    hypotheses=(
        Hypothesis("no_positional_encoding", r"\text{no positional encoding added to }X",
                   counterexample=_perm_cx_pe),
        Hypothesis("no_causal_mask", r"\text{no attention mask}", counterexample=_perm_cx_mask),
        Hypothesis("tokenwise_sublayers", r"\text{LayerNorm, MLP, projections act on each token alone}",
                   "every sub-layer other than attention is token-wise", counterexample=_perm_cx_mixing),
        Hypothesis("dropout_off", r"\text{dropout off (eval mode)}", "a deterministic block: no dropout at training time",
                   counterexample=_perm_cx_dropout),
    ),
    clauses=(
        Clause("equivariant", r"f(PX)=Pf(X)\ \text{for every permutation }P\text{ (attention + LayerNorm + MLP block)}",
               "derived_at", "N = 3: softmax S(PSPᵀ) = P S(S) Pᵀ for a generic 3×3 score matrix, a one-head layer on "
               "one-dimensional tokens; that token-wise maps commute with P is taken as their definition",
               ("derivation", "truth_table_vs_sympy", "block_permutations", "torch_encoder_layer"),
               also=(("checked", "N = 6, D = 8, two heads, MLP width 16: our block and torch's pre-/post-LN "
                      "TransformerEncoderLayer, 6/16/64 (torch: 4/16/64) random inputs and permutations, the first the swap of "
                      "tokens 1 and 2, to rounding"),), rests_on=("row-wise maps commute with P",)),
    ),
    source="lecture notes 003 §3; lecture notes 004 (poll: order is ignored); lecture notes 001 ('position-invariant')",
    kind="theorem",
    form=_PERM_FORM,
    derivation=lambda: ta.derive_permutation_equivariance(3),
    checks=(
        Check("truth_table_vs_sympy", "symbolic", _perm_symbolic, "claimed relation and breakers vs the derivation"),
        Check("block_permutations", "numeric", _perm_numeric, "our block: relation to rounding; counterexamples with PE and mask"),
        Check("torch_encoder_layer", "numeric", _perm_torch, "the same on torch.nn.TransformerEncoderLayer", uses_device=False),
    ),
    mutants=(
        Mutant("claims_pe_keeps_equivariance", "wrong formula", "claims positional encodings keep equivariance",
               dict(_PERM_FORM, broken_by=frozenset({"causal_mask"}))),
        Mutant("claims_mask_keeps_equivariance", "wrong formula", "claims a causal mask keeps equivariance",
               dict(_PERM_FORM, broken_by=frozenset({"positional_encoding"}))),
        Mutant("claims_invariance", "wrong formula", "claims invariance f(PX) = f(X) instead of equivariance", dict(_PERM_FORM, relation="invariant")),
        Mutant("block_hidden_position", "extra term", "a block that adds a positional term internally", dict(_PERM_FORM, block=_block_with_position)),
        Mutant("block_token_mixing", "wrong axis", "a running mean over tokens instead of a token-wise map", dict(_PERM_FORM, block=_block_token_mixing)),
    ),
)


# --------------------------------------------------------------------------------------------
# attn.layernorm
# form: layernorm(X, eps=0.0, gamma=None, beta=None), over the last axis


def _ln_inputs(ctx, B, N, D):
    rng = ctx.rng(B, N, D)
    mu = rng.uniform(-10, 10, size=(B, N, 1))
    sd = np.exp(rng.uniform(np.log(0.1), np.log(10.0), size=(B, N, 1)))
    return mu + sd * rng.normal(size=(B, N, D)), float(np.max(np.abs(mu) / sd))


def _ln_symbolic(form, ctx) -> CheckResult:
    """The form's per-token mean and population variance vs the derived 0 and v/(v+ε)."""
    der = ta.derive_layernorm(3)
    var_ref = sp.lambdify([der.facts["v"], der.facts["eps"]], der.result["variance"], "numpy")
    B, N, D = 4, 5, 16
    X, cond = _ln_inputs(ctx, B, N, D)
    v = X.var(axis=-1)  # population variance (ddof 0), NumPy's own
    R = Resolved()
    for eps in (0.0, 1e-3, 0.1, 1.0):
        with np.errstate(all="ignore"):
            Z = form(X, eps)
        R.prop(f"mean_eps{eps:g}", _maxabs(Z.mean(-1)), "absolute per-token mean of the output (derived 0)")
        R.pair(f"var_eps{eps:g}", Z.var(-1), var_ref(v, eps))
        if eps > 0:  # the boundary v = 0 (constant tokens; 2·1 has an exact mean): mean 0, variance 0/(0 + ε) = 0
            C = np.full((2, D), 2.0)
            with np.errstate(all="ignore"):
                Zc = form(C, eps)
            R.prop(f"mean_constant_eps{eps:g}", _maxabs(Zc.mean(-1)), "absolute per-token mean of the output (derived 0)")
            R.pair(f"var_constant_eps{eps:g}", Zc.var(-1), var_ref(np.zeros(2), eps))
    return R.result(32 * D * EPS * (1 + cond), "float64 rounding, amplified by cancellation |μ|/σ (32·D·eps·(1 + max|μ|/σ)); "
                    "resolution relative to the derived variance v/(v+ε) (the mean 0 has no scale: property_resolutions)",
                    seeds=[ctx.seed_for(B, N, D)], sizes={"batch": B, "tokens": N, "D": D, "max |mean|/sd": cond})


def _ln_vs_torch(form, ctx) -> CheckResult:
    """vs torch.nn.LayerNorm (random weight and bias, several ε) and F.layer_norm with ε = 0."""
    B, N, D = ctx.size(4, 16, 64), 5, 12
    X, cond = _ln_inputs(ctx, B, N, D)
    rng = ctx.rng("affine")
    R = Resolved()
    Xt = _T(X, ctx.device)
    Xk = X.copy()
    Xk[0, 0] = 2.0  # a constant token (v = 0), defined for ε > 0
    Xkt = _T(Xk, ctx.device)
    for eps in (1e-5, 0.1, 1.0):
        ln = torch.nn.LayerNorm(D, eps=eps, dtype=torch.float64, device=ctx.device)
        g, b = 1 + 0.5 * rng.normal(size=D), 0.5 * rng.normal(size=D)
        with torch.no_grad():
            ln.weight.copy_(_T(g)), ln.bias.copy_(_T(b))
            ref = _np(ln(Xkt))
        with np.errstate(all="ignore"):
            R.pair(f"LayerNorm_eps{eps:g}", form(Xk, eps, g, b), ref)
    with torch.no_grad():
        ref0 = _np(torch.nn.functional.layer_norm(Xt, (D,), eps=0.0))
    with np.errstate(all="ignore"):
        R.pair("layer_norm_eps0", form(X), ref0)
    return R.result(32 * D * EPS * (1 + cond) * 3, "float64 rounding × cancellation |μ|/σ × max|γ| (32·D·eps·(1+max|μ|/σ)·3)",
                    seeds=[ctx.seed_for(B, N, D), ctx.seed_for("affine")], sizes={"batch": B, "tokens": N, "D": D},
                    device=ctx.device)


def _ln_mutant(axis=-1, ddof=0, eps_outside=False, center=True, affine_inside=False):
    def f(X, eps=0.0, gamma=None, beta=None):
        X = np.asarray(X, dtype=np.float64)
        mu = X.mean(axis=axis, keepdims=True) if center else 0.0
        sd2 = X.var(axis=axis, keepdims=True, ddof=ddof)
        Z = (X - mu) / (np.sqrt(sd2) + eps if eps_outside else np.sqrt(sd2 + eps))
        g = 1.0 if gamma is None else gamma
        b = 0.0 if beta is None else beta
        return g * (Z + b) if affine_inside else g * Z + b
    return f


def _ln_cx_constant_eps0(ctx) -> Counterexample:
    """Without v + ε > 0: ε = 0 on a constant token, LN(x) = 0/0."""
    x = np.full((1, 4), 2.0)
    with np.errstate(all="ignore"):
        z = na.layernorm(x, 0.0)
        m = float(z.mean())
    zt = _np(torch.nn.functional.layer_norm(_T(x), (4,), eps=0.0))
    return Counterexample({"epsilon": 0.0, "x": "(2, 2, 2, 2)", "v": 0.0}, "mean_zero",
                          f"LN(x) = {np.array2string(z[0], precision=3)} (0/0): mean {m}, not 0; torch's layer_norm with "
                          f"eps = 0 gives {np.array2string(zt[0], precision=3)}", violated=not abs(m) <= 32 * 4 * EPS,
                          error=m, tolerance=32 * 4 * EPS,
                          justification="a defined LayerNorm output has mean 0 to rounding (32·D·eps); NaN is not a number")


declare(
    id="attn.layernorm",
    fixed_sizes="the mean and variance identities are written with explicit entries at D = 3; an index-sum version over symbolic D is not written yet (D = 12 is checked)",
    title="LayerNorm: mean 0 and variance v/(v+ε) per token (1 at ε = 0 for a non-constant token); with affine it is torch.nn.LayerNorm",
    hypotheses=(
        setting("finite_token", r"x\in\mathbb R^D\ \text{finite},\ \varepsilon\ge0",
                "μ and v are not defined for an infinite entry"),
        Hypothesis("v_plus_eps_positive", r"v+\varepsilon>0\ (\varepsilon>0\text{ or }x\text{ not constant})",
                   "ε > 0, or the token is not constant", counterexample=_ln_cx_constant_eps0),
    ),
    clauses=(
        Clause("mean_zero", r"\operatorname{LN}(x)_l=(x_l-\mu)/\sqrt{v+\varepsilon},\ \mu=\frac{1}{D}\sum_lx_l,\ v=\frac{1}{D}\sum_l(x_l-\mu)^2:\ \frac{1}{D}\sum_l\operatorname{LN}(x)_l=0",
               "derived_at", "D = 3", ("derivation", "moments_vs_sympy"),
               also=(("checked", "D = 16, ε ∈ {0, 10⁻³, 0.1, 1}, |μ|/σ up to 100, constant tokens at ε > 0"),)),
        Clause("variance", r"\frac{1}{D}\sum_l\operatorname{LN}(x)_l^2=\frac{v}{v+\varepsilon}\ (=1\text{ at }\varepsilon=0)",
               "derived_at", "D = 3 (v > 0)", ("derivation", "moments_vs_sympy"),
               also=(("checked", "D = 16, ε ∈ {0, 10⁻³, 0.1, 1}; v = 0 (constant tokens) at ε > 0: variance 0"),)),
        Clause("torch_layernorm", r"\gamma\odot\operatorname{LN}(x)+\beta=\text{torch.nn.LayerNorm}(D,\varepsilon)(x)",
               "checked", "D = 12, ε ∈ {10⁻⁵, 0.1, 1} with random γ, β (a constant token included), and F.layer_norm at "
               "ε = 0, 4/16/64 × 5 tokens", ("vs_torch_layernorm",)),
    ),
    source="lecture notes 000 (token normalisation); lecture notes 001, 004; Ba, Kiros, Hinton (2016)",
    kind="theorem",
    form=na.layernorm,
    derivation=lambda: ta.derive_layernorm(3),
    checks=(
        Check("moments_vs_sympy", "symbolic", _ln_symbolic, "output mean and variance vs the derived 0 and v/(v+ε)"),
        Check("vs_torch_layernorm", "numeric", _ln_vs_torch, "vs torch.nn.LayerNorm and F.layer_norm", uses_device=False),
    ),
    mutants=(
        Mutant("sample_variance", "wrong constant", "variance with 1/(D−1) (ddof=1) instead of 1/D", _ln_mutant(ddof=1)),
        Mutant("token_axis", "wrong axis", "normalised over the token axis instead of the feature axis", _ln_mutant(axis=-2)),
        Mutant("eps_outside_sqrt", "wrong formula", "(x − μ)/(σ + ε) instead of (x − μ)/√(σ² + ε)", _ln_mutant(eps_outside=True)),
        Mutant("no_centering", "dropped term", "the mean is not subtracted", _ln_mutant(center=False)),
        Mutant("affine_inside", "wrong formula", "γ(x̂ + β) instead of γx̂ + β", _ln_mutant(affine_inside=True)),
    ),
)


# --------------------------------------------------------------------------------------------
# attn.block_recipe (erratum: lecture notes 000's last line)
# form: {"pre_ln": block(X, p, *, causal), "post_ln": block(X, p, *, causal)}


def _torch_ln(ln):
    g, b, e = ln
    return lambda Z: _np(torch.nn.functional.layer_norm(_T(Z), (Z.shape[-1],), _T(g), _T(b), e))


def _block_symbolic(form, ctx) -> CheckResult:
    """With both branches switched off (W_O = 0, last MLP layer = 0) the derivation says pre-LN is
    the identity and post-LN is LN_2(LN_1(x)); evaluated with torch's layer_norm as LN."""
    der = ta.derive_block_recipe()
    x, fns = der.facts["x"], der.facts["functions"]
    rng = ctx.rng()
    B, N, D, M, F = 3, 5, 8, 2, 16
    p = na.random_block_params(rng, D, M, F).zero_branches()
    X = rng.normal(size=(B, N, D)) * 2 + 1
    mods = [{"LN_1": _torch_ln(p.ln1), "LN_2": _torch_ln(p.ln2)}, "numpy"]
    R = Resolved()
    for name in ("pre_ln", "post_ln"):
        ref = sp.lambdify(x, der.result[name], modules=mods)(X)
        ref = np.broadcast_to(ref, X.shape)
        with np.errstate(all="ignore"):
            R.pair(name, form[name](X, p), ref)
    return R.result(64 * D * EPS * largest(1.0, _maxabs(X)), "float64 rounding of two LayerNorms (64·D·eps·max|x|)",
                    seeds=[ctx.seed_for()], sizes={"batch": B, "N": N, "D": D},
                    details={"derived": {k: str(v) for k, v in der.result.items()}})


def _block_vs_torch(form, ctx) -> CheckResult:
    """pre_ln vs TransformerEncoderLayer(norm_first=True), post_ln vs norm_first=False (ReLU,
    dropout 0, float64, LayerNorm weights perturbed so the mapping is exercised), with and without
    the causal mask."""
    rng = ctx.rng()
    B, N, D, M, F = ctx.size(3, 8, 32), 6, 8, 2, 16
    X = rng.normal(size=(B, N, D))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(N, dtype=torch.float64, device=ctx.device)
    R = Resolved()
    for norm_first, name in ((True, "pre_ln"), (False, "post_ln")):
        with _torch_seed(ctx.seed_for(norm_first)):
            layer = torch.nn.TransformerEncoderLayer(D, M, dim_feedforward=F, dropout=0.0, batch_first=True,
                                                     norm_first=norm_first, dtype=torch.float64).eval()
            with torch.no_grad():
                for n in (layer.norm1, layer.norm2):
                    n.weight.add_(0.3 * torch.randn(D, dtype=torch.float64))
                    n.bias.add_(0.3 * torch.randn(D, dtype=torch.float64))
            layer = layer.to(ctx.device)
        p = na.encoder_layer_to_block(layer)
        for causal in (False, True):
            with torch.no_grad():
                kw = {"src_mask": mask, "is_causal": True} if causal else {}
                ref = _np(layer(_T(X, ctx.device), **kw))
            with np.errstate(all="ignore"):
                R.pair(f"{name}{'_causal' if causal else ''}", form[name](X, p, causal=causal), ref)
    return R.result(64 * (D + F + N) * EPS * 10, "float64 rounding through attention, two LayerNorms and the MLP "
                    "(64·(D+F+N)·eps·10, outputs O(10))", seeds=[ctx.seed_for(), ctx.seed_for(True), ctx.seed_for(False)],
                    sizes={"batch": B, "N": N, "D": D, "heads": M, "mlp width": F}, device=ctx.device)


def _pre_ln_no_second_residual(X, p, *, causal=False):
    y = np.asarray(X) + na.mhsa_concat(na.layernorm(X, p.ln1[2], *p.ln1[:2]), causal=causal, **p.attn)
    return na.mlp(na.layernorm(y, p.ln2[2], *p.ln2[:2]), *p.mlp)


def _pre_ln_normalised_stream(X, p, *, causal=False):
    xn = na.layernorm(X, p.ln1[2], *p.ln1[:2])
    y = xn + na.mhsa_concat(xn, causal=causal, **p.attn)
    return y + na.mlp(na.layernorm(y, p.ln2[2], *p.ln2[:2]), *p.mlp)


def _post_ln_no_final_norm(X, p, *, causal=False):
    X = np.asarray(X)
    y = na.layernorm(X + na.mhsa_concat(X, causal=causal, **p.attn), p.ln1[2], *p.ln1[:2])
    return y + na.mlp(y, *p.mlp)


def _swap_norms(block):
    return lambda X, p, *, causal=False: block(X, replace(p, ln1=p.ln2, ln2=p.ln1), causal=causal)


_BLOCK_FORM = {"pre_ln": na.block_pre_ln, "post_ln": na.block_post_ln}

def _recipe_vs_torch_layer(ctx, tag: str, dropout: float, recipe) -> tuple[float, float, dict]:
    """max |recipe − TransformerEncoderLayer(norm_first=True)| on one small instance (N, D, heads, width =
    3, 4, 2, 8; training mode iff dropout > 0), the torch check's rounding tolerance, and the sizes."""
    N, D, M, F = 3, 4, 2, 8
    with _torch_seed(ctx.seed_for(tag)):
        layer = torch.nn.TransformerEncoderLayer(D, M, dim_feedforward=F, dropout=dropout, batch_first=True,
                                                 norm_first=True, dtype=torch.float64).train(dropout > 0)
        X = ctx.rng().normal(size=(1, N, D))
        with torch.no_grad():
            ref = _np(layer(_T(X)))
    out = recipe(X, na.encoder_layer_to_block(layer))
    return _maxabs(out - ref), 64 * (D + F + N) * EPS * 10, {"N": N, "D": D, "heads": M, "mlp width": F}


_TORCH_TOL_WHY = "the torch check's rounding tolerance (64·(D+F+N)·eps·10)"


def _block_cx_dropout(ctx) -> Counterexample:
    """Without dropout off: torch's layer in training mode with dropout 0.5 is not the recipe."""
    err, tol, sizes = _recipe_vs_torch_layer(ctx, "dropout", 0.5, na.block_pre_ln)
    return exceeds({**sizes, "dropout": 0.5, "mode": "train"}, "matches_torch",
                   f"max |pre-LN recipe − TransformerEncoderLayer(norm_first=True)| = {err:.3g}",
                   error=err, tolerance=tol, justification=_TORCH_TOL_WHY)


def _pre_ln_gelu(X, p):
    """The pre-LN recipe with MLP(z) = gelu(zW₁ + b₁)W₂ + b₂ (torch's exact erf GELU)."""
    W1, b1, W2, b2 = p.mlp
    y = X + na.mhsa_concat(na.layernorm(X, p.ln1[2], *p.ln1[:2]), **p.attn)
    pre = na.layernorm(y, p.ln2[2], *p.ln2[:2]) @ W1 + b1
    return y + _np(torch.nn.functional.gelu(_T(pre))) @ W2 + b2


def _block_cx_gelu(ctx) -> Counterexample:
    """Without the ReLU MLP: the pre-LN recipe with a GELU MLP (same weights) is not torch's
    TransformerEncoderLayer(norm_first=True), whose default activation is ReLU."""
    err, tol, sizes = _recipe_vs_torch_layer(ctx, "gelu", 0.0, _pre_ln_gelu)
    return exceeds({**sizes, "MLP": "gelu(zW₁ + b₁)W₂ + b₂", "torch": "default (ReLU), eval"}, "matches_torch",
                   f"max |pre-LN recipe with a GELU MLP − TransformerEncoderLayer(norm_first=True)| = {err:.3g}",
                   error=err, tolerance=tol, justification=_TORCH_TOL_WHY)


declare(
    id="attn.block_recipe",
    title="Transformer block: pre-LN residual x' = y + MLP(LN y) (lecture notes 000 corrected) and post-LN",
    hypotheses=(
        Hypothesis("dropout_off", r"\text{dropout off (p = 0 or eval mode), for the torch clause}",
                   counterexample=_block_cx_dropout),
        Hypothesis("relu_mlp", r"\operatorname{MLP}(z)=\operatorname{relu}(zW_1+b_1)W_2+b_2\ \text{(for the torch clause)}",
                   "the activation of torch's default layer (the zero-branch clauses hold for any maps)",
                   counterexample=_block_cx_gelu),
    ),
    clauses=(
        Clause("pre_ln_residual", r"\text{pre-LN: }y=x+\operatorname{MHSA}(\operatorname{LN}_1x),\ x'=y+\operatorname{MLP}(\operatorname{LN}_2y):\ \operatorname{MLP}\equiv0\Rightarrow x'=y;\ \operatorname{MHSA}\equiv\operatorname{MLP}\equiv0\Rightarrow x'=x",
               "derived", "any maps LN₁, LN₂, MHSA, MLP (undefined SymPy functions of the stream; no size enters)",
               ("derivation", "zero_branches_vs_sympy"),
               also=(("checked", "N = 5, D = 8, two heads, MLP width 16, W_O = 0 and last MLP layer = 0"),)),
        Clause("post_ln_zero_branches", r"\text{post-LN: }y=\operatorname{LN}_1(x+\operatorname{MHSA}x),\ x'=\operatorname{LN}_2(y+\operatorname{MLP}y):\ \operatorname{MHSA}\equiv\operatorname{MLP}\equiv0\Rightarrow x'=\operatorname{LN}_2(\operatorname{LN}_1x)",
               "derived", "any maps LN₁, LN₂, MHSA, MLP (undefined SymPy functions)", ("derivation", "zero_branches_vs_sympy"),
               also=(("checked", "N = 5, D = 8 with torch's layer_norm as LN"),)),
        Clause("matches_torch", r"\text{pre-LN}=\text{TransformerEncoderLayer(norm\_first=True)},\ \text{post-LN}=\text{(norm\_first=False)}",
               "checked", "N = 6, D = 8, two heads, MLP width 16, ReLU, LayerNorm weights perturbed, with and without the "
               "causal mask, 3/8/32 sequences", ("vs_torch_encoder_layer",)),
    ),
    source="lecture notes 000 (final recipe); lecture notes 001 (LayerNorm after the sub-layer); lecture notes 003 (the layer "
           "MLP(Y(X) + X): a residual, no normalisation); Vaswani et al. (2017); Xiong et al. (2020)",
    kind="erratum",
    form=_BLOCK_FORM,
    stated={"pre_ln": na.block_pre_ln_as_stated, "post_ln": na.block_post_ln},
    stated_statement=r"y=x+\operatorname{MHSA}(\bar x),\ \bar y=\operatorname{LayerNorm}(y),\ x^{(m)}=\bar y+\operatorname{MLP}(y)",
    notes=("Lecture notes 000's last line adds the normalised ȳ and feeds the un-normalised y to the MLP; as stated, switching the "
           "MLP off gives LN(y), not y, so it is not a residual update. Lecture notes 001's recipe is post-LN (LayerNorm after "
           "each sub-layer, its step 2 without a residual); lecture notes 003's layer MLP(Y(X) + X) has no LayerNorm. Both torch "
           "variants (norm_first True/False) are checked."),
    derivation=ta.derive_block_recipe,
    checks=(
        Check("zero_branches_vs_sympy", "symbolic", _block_symbolic, "branches off: pre-LN is the identity, post-LN is LN₂∘LN₁"),
        Check("vs_torch_encoder_layer", "numeric", _block_vs_torch, "vs torch.nn.TransformerEncoderLayer (norm_first True/False)", uses_device=False),
    ),
    mutants=(
        Mutant("pre_ln_no_second_residual", "dropped term", "x' = MLP(LN₂ y): the second residual is dropped", dict(_BLOCK_FORM, pre_ln=_pre_ln_no_second_residual)),
        Mutant("pre_ln_normalised_stream", "wrong formula", "the residual stream carries LN₁(x) instead of x", dict(_BLOCK_FORM, pre_ln=_pre_ln_normalised_stream)),
        Mutant("post_ln_no_final_norm", "dropped term", "post-LN without the second LayerNorm", dict(_BLOCK_FORM, post_ln=_post_ln_no_final_norm)),
        Mutant("norms_swapped", "swapped index", "LN₁'s parameters used for LN₂ and vice versa", dict(_BLOCK_FORM, pre_ln=_swap_norms(na.block_pre_ln))),
        Mutant("post_ln_is_pre_ln", "wrong formula", "the post-LN variant computed as pre-LN", dict(_BLOCK_FORM, post_ln=na.block_pre_ln)),
    ),
)
