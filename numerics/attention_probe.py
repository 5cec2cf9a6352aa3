"""Black-box properties of a user's self-attention map (``tverify check attention``).

The object under test is a map ``f(x)``: ``x`` of shape ``(batch, T, D)`` (tokens are rows) to
``(batch, T, D)``, optionally returning ``(out, weights)`` with ``weights`` ``(batch, [H,] T, T)``
(the ``torch.nn.MultiheadAttention`` convention: row ``t`` holds the weights of query ``t`` over the
keys). Every property is measured on seeded Gaussian probes in float64 (unless the caller asks for
float32) and returned as a :class:`Property` with its measured error, its tolerance (float64 rounding
scaled by the sizes involved, stated in ``justification``) and a pass/fail/skip status.

Conventions of the reference (``torch.nn.functional.scaled_dot_product_attention``): per head
``softmax(Q Kᵀ · scale) V`` with the softmax over keys (last axis), ``scale = 1/√d_k`` by default,
``is_causal`` masks keys after the query. A :class:`Mapping` holds the projections of ``nn.Linear``
layers (``y = x Wᵀ + b``, weights ``(out, in)``); ``heads`` splits the projected width evenly.

This module imports torch only (no ``proofs_checks``).
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch
import torch.nn.functional as F

__all__ = ["Property", "Mapping", "call", "exposed_weights", "find_mapping", "reference_attention",
           "unit_roundoff", "prop_finite", "prop_weights_distribution", "prop_convex_combination", "fit_single_head",
           "prop_reference_agreement", "prop_scale", "prop_causal", "prop_permutation", "prop_extreme_logits",
           "prop_dtype_device", "head_count_hint"]

#: Attribute names under which modules commonly keep their last attention weights.
WEIGHT_ATTRS = ("attn_weights", "attention_weights", "last_attn", "last_attention", "attn_probs", "att_weights",
                "attn", "att", "weights", "A", "probs")
_Q = ("q_proj", "q", "query", "to_q", "W_q", "Wq", "w_q", "wq", "q_lin", "q_linear", "W_Q", "WQ")
_K = ("k_proj", "k", "key", "to_k", "W_k", "Wk", "w_k", "wk", "k_lin", "k_linear", "W_K", "WK")
_V = ("v_proj", "v", "value", "to_v", "W_v", "Wv", "w_v", "wv", "v_lin", "v_linear", "W_V", "WV")
_O = ("out_proj", "o_proj", "o", "out", "to_out", "proj", "W_o", "Wo", "w_o", "wo", "c_proj", "out_lin", "dense",
      "W_O", "WO")
_QKV = ("qkv", "c_attn", "in_proj", "qkv_proj", "to_qkv", "Wqkv", "W_qkv")
_HEAD_ATTRS = ("num_heads", "n_heads", "heads", "n_head", "nhead", "h", "n_heads_")


def unit_roundoff(dtype: torch.dtype) -> float:
    """``u = eps/2`` of ``dtype`` (1.1e-16 for float64, 6.0e-8 for float32)."""
    return float(torch.finfo(dtype).eps) / 2


@dataclass
class Property:
    """One named property: ``status`` ``"pass"`` / ``"fail"`` / ``"skip"``, the measured ``error``
    and its ``tolerance`` (``None`` when skipped), the tolerance's ``justification`` and a
    ``detail`` line (what was measured, or why it failed or was skipped)."""

    name: str
    status: str
    error: float | None
    tolerance: float | None
    justification: str
    detail: str = ""
    numbers: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        fin = lambda v: v if (v is None or math.isfinite(v)) else None  # noqa: E731
        return {"name": self.name, "status": self.status, "error": fin(self.error), "tolerance": fin(self.tolerance),
                "justification": self.justification, "detail": self.detail, **({"numbers": self.numbers} if self.numbers else {})}


def _judge(name: str, error: float, tol: float, just: str, detail: str = "", **numbers) -> Property:
    error = float(error)
    if not math.isfinite(error):
        return Property(name, "fail", error, tol, just, (detail + "; " if detail else "") + "the error is not finite (NaN/inf)",
                        numbers)
    return Property(name, "pass" if error <= tol else "fail", error, tol, just, detail, numbers)


def _skip(name: str, why: str) -> Property:
    return Property(name, "skip", None, None, "", why)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max|a − b| / max(max|b|, tiny)`` in float64 (NaN when either holds NaN/inf)."""
    a, b = a.double(), b.double()
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return float("nan")
    scale = float(b.abs().max()) if b.numel() else 0.0
    return float((a - b).abs().max()) / max(scale, 1e-300) if a.numel() else 0.0


# ------------------------------------------------------------------------------------------------
# calling the object


def call(f: Callable, x: torch.Tensor) -> tuple[Any, torch.Tensor | None]:
    """``f(x)`` under ``torch.no_grad``: ``(out, weights)``; a tuple/list result is ``(out, weights,
    ...)`` where ``weights`` is kept only if it is a tensor whose last two axes are ``(T, T)``."""
    with torch.no_grad():
        r = f(x)
    if isinstance(r, (tuple, list)):
        out = r[0] if r else None
        w = r[1] if len(r) > 1 else None
        T = x.shape[-2]
        if not (isinstance(w, torch.Tensor) and w.dim() >= 3 and tuple(w.shape[-2:]) == (T, T)):
            w = None
        return out, w
    return r, None


def exposed_weights(f: Any, x: torch.Tensor, returned: torch.Tensor | None) -> tuple[torch.Tensor | None, str]:
    """The attention weights ``(batch, H, T, T)`` the object returned or stored on itself (one of
    :data:`WEIGHT_ATTRS`, set by its last call on ``x``), and where they came from."""
    B, T = x.shape[0], x.shape[-2]

    def norm(w):
        w = w.detach()
        if w.dim() == 3:
            w = w[:, None]
        return w if w.dim() == 4 and w.shape[0] == B and tuple(w.shape[-2:]) == (T, T) else None

    if returned is not None and norm(returned) is not None:
        return norm(returned), "returned by the call"
    for name in WEIGHT_ATTRS:
        w = getattr(f, name, None)
        if isinstance(w, torch.Tensor) and not isinstance(w, torch.nn.Parameter) and norm(w) is not None:
            return norm(w), f"attribute .{name}"
    return None, ""


# ------------------------------------------------------------------------------------------------
# declared weight mappings


@dataclass
class Mapping:
    """Projections of a multi-head attention in ``nn.Linear`` form (weights ``(out, in)``):
    ``Q = x Wqᵀ + bq`` etc., ``heads`` heads splitting ``Q, K, V`` evenly, output ``O Woᵀ + bo``
    (``wo = None``: no output projection). ``source`` says where the weights came from."""

    wq: torch.Tensor
    bq: torch.Tensor | None
    wk: torch.Tensor
    bk: torch.Tensor | None
    wv: torch.Tensor
    bv: torch.Tensor | None
    wo: torch.Tensor | None
    bo: torch.Tensor | None
    heads: int
    source: str

    @property
    def d_k(self) -> int:
        return self.wq.shape[0] // self.heads

    def to(self, dtype, device) -> "Mapping":
        cv = lambda t: None if t is None else t.detach().to(dtype=dtype, device=device)  # noqa: E731
        return replace(self, **{k: cv(getattr(self, k)) for k in ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo")})


def head_count_hint(obj: Any) -> int | None:
    """A head count the object declares (``num_heads``, ``n_heads``, ``heads``, ``n_head``, ``nhead``
    as an int attribute, on itself or its first ``nn.MultiheadAttention``)."""
    for name in _HEAD_ATTRS:
        v = getattr(obj, name, None)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            return v
    if isinstance(obj, torch.nn.Module):
        for m in obj.modules():
            if isinstance(m, torch.nn.MultiheadAttention):
                return int(m.num_heads)
    return None


def _lin(obj: Any, names: tuple[str, ...]) -> list[tuple[torch.Tensor, torch.Tensor | None, str]]:
    """Candidate ``(W (out, in), b, label)`` for the first attribute of ``obj`` named in ``names``:
    an ``nn.Linear`` (one candidate), or a 2-D tensor/parameter used as ``x @ W`` or ``x @ Wᵀ``
    (both candidates when square)."""
    for n in names:
        v = getattr(obj, n, None)
        if isinstance(v, torch.nn.Linear):
            return [(v.weight, v.bias, f".{n} (nn.Linear)")]
        if isinstance(v, torch.nn.Sequential) and len(v) and isinstance(v[0], torch.nn.Linear):
            return [(v[0].weight, v[0].bias, f".{n}[0] (nn.Linear)")]
        if isinstance(v, torch.Tensor) and v.dim() == 2:
            c = [(v.T, None, f".{n} (x @ {n})")]
            if v.shape[0] == v.shape[1]:
                c.append((v, None, f".{n} (x @ {n}ᵀ)"))
            return c
    return []


def find_mapping(obj: Any, D: int, heads: int | None) -> list[Mapping]:
    """Candidate mappings of ``obj``'s own weights onto multi-head SDPA: an ``nn.MultiheadAttention``
    (its ``in_proj_weight``/``q,k,v_proj_weight`` and ``out_proj``), q/k/v(/out) projections by
    common names (``q_proj``, ``query``, ``to_q``, ``W_q``, ...), or a fused ``qkv`` / ``c_attn``
    projection. Raw 2-D parameters give both orientations; an unknown head count gives every
    divisor of the query width up to 16. Empty when nothing is recognised. The caller keeps the
    candidate that agrees best with the object ("declared", orientation and heads chosen by fit)."""
    mha = obj if isinstance(obj, torch.nn.MultiheadAttention) else None
    if mha is None and isinstance(obj, torch.nn.Module):
        found = [m for m in obj.modules() if isinstance(m, torch.nn.MultiheadAttention)]
        mha = found[0] if len(found) == 1 else None
    if mha is not None:
        E = mha.embed_dim
        if mha.in_proj_weight is not None:
            wq, wk, wv = mha.in_proj_weight.split(E)
        else:
            wq, wk, wv = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        b = mha.in_proj_bias.split(E) if mha.in_proj_bias is not None else (None, None, None)
        return [Mapping(wq, b[0], wk, b[1], wv, b[2], mha.out_proj.weight, mha.out_proj.bias, int(mha.num_heads),
                        "declared: nn.MultiheadAttention weights (in_proj, out_proj)")]
    qs, ks, vs = _lin(obj, _Q), _lin(obj, _K), _lin(obj, _V)
    trip: list[tuple] = []
    if qs and ks and vs:
        trip = [(q, k, v) for q, k, v in itertools.product(qs, ks, vs)]
    else:
        for W, b, label in _lin(obj, _QKV):
            if W.shape[0] % 3 == 0:
                n = W.shape[0] // 3
                bb = b.split(n) if b is not None else (None, None, None)
                ws = W.split(n)
                trip.append(((ws[0], bb[0], label + "[q]"), (ws[1], bb[1], label + "[k]"), (ws[2], bb[2], label + "[v]")))
    if not trip:
        return []
    outs = _lin(obj, _O) or [(None, None, "no output projection")]
    cands = []
    for (q, k, v), (o, bo, ol) in itertools.product(trip, outs):
        if q[0].shape[1] != D or k[0].shape[1] != D or v[0].shape[1] != D or q[0].shape[0] != k[0].shape[0]:
            continue
        dq, dv = q[0].shape[0], v[0].shape[0]
        if o is not None and (o.shape[1] != dv or o.shape[0] != D):
            continue
        if o is None and dv != D:
            continue
        hs = [heads] if heads else [h for h in range(1, 17) if dq % h == 0 and dv % h == 0]
        for h in hs:
            if dq % h or dv % h:
                continue
            src = f"declared: {q[2]}, {k[2]}, {v[2]}, {ol}; {h} head(s)"
            cands.append(Mapping(q[0], q[1], k[0], k[1], v[0], v[1], o, bo, h, src))
    return cands


def _proj(x, W, b):
    y = x @ W.T
    return y if b is None else y + b


def _split(t: torch.Tensor, h: int) -> torch.Tensor:
    B, T, E = t.shape
    return t.reshape(B, T, h, E // h).transpose(1, 2)


def reference_attention(x: torch.Tensor, m: Mapping, *, causal: bool, scale: float | torch.Tensor | None = None
                        ) -> torch.Tensor:
    """Multi-head attention of ``x (B, T, D)`` through ``torch.nn.functional.scaled_dot_product_attention``
    with the projections of ``m`` (``scale=None``: SDPA's ``1/√d_k``; a tensor ``scale`` multiplies
    the queries instead, so that it can be differentiated). Returns ``(B, T, D)``."""
    m = m.to(x.dtype, x.device)
    q, k, v = (_split(_proj(x, W, b), m.heads) for W, b in ((m.wq, m.bq), (m.wk, m.bk), (m.wv, m.bv)))
    if isinstance(scale, torch.Tensor):  # plain ops: forward-mode AD does not reach SDPA's CPU kernels
        s = (q * scale) @ k.transpose(-1, -2)
        if causal:
            T = x.shape[1]
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))
        o = torch.softmax(s, -1) @ v
    else:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    o = o.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
    return o if m.wo is None else _proj(o, m.wo, m.bo)


def max_logit(x: torch.Tensor, m: Mapping, scale: float | None = None) -> float:
    """``max |q·k|·scale`` over the probe (default scale ``1/√d_k``)."""
    m = m.to(x.dtype, x.device)
    q, k = _split(_proj(x, m.wq, m.bq), m.heads), _split(_proj(x, m.wk, m.bk), m.heads)
    s = (1 / math.sqrt(m.d_k)) if scale is None else scale
    return float((q @ k.transpose(-1, -2)).abs().max()) * s


# ------------------------------------------------------------------------------------------------
# properties


def _tol_words(u: float, D: int, T: int, L: float) -> tuple[float, str]:
    n = 3 * D + T
    tol = 16 * u * n * max(1.0, L)
    return tol, (f"16·u·(3D+T)·max(1, |logit|max) = 16·{u:.3g}·{n}·{max(1.0, L):.3g}: rounding of the D-term "
                 "projections and T-term softmax sums, amplified by exp at the largest logit (relative to max|out|)")


def prop_finite(out: torch.Tensor) -> Property:
    """Every output entry is finite (NaN/inf fail with their count)."""
    bad = int((~torch.isfinite(out)).sum())
    return _judge("finite_output", bad / max(out.numel(), 1), 0.0, "none may be NaN/inf (exact)",
                  f"{bad} of {out.numel()} output entries are NaN/inf" if bad else "all outputs finite")


def prop_weights_distribution(w: torch.Tensor, where: str, *, causal: bool) -> Property:
    """Exposed weights ``(B, H, T, T)``: rows are probability vectors (≥ 0, sum 1); with ``causal``
    the entries above the diagonal are reported too (leakage is its own property)."""
    w = w.double()
    T = w.shape[-1]
    u = unit_roundoff(torch.float64)
    err_sum = float((w.sum(-1) - 1).abs().max())
    err_neg = float((-w).clamp_min(0).max())
    cols = float((w.sum(-2) - 1).abs().max())
    detail = (f"weights {where}: max |row sum − 1| = {err_sum:.3g}, most negative entry {-err_neg:.3g}"
              + (f"; columns sum to 1 within {cols:.2g}: the softmax runs over the query axis (wrong axis)"
                 if err_sum > 1e-6 and cols < 1e-6 else ""))
    return _judge("weights_are_distributions", max(err_sum, err_neg), 4 * u * T,
                  f"4·u·T = {4 * u * T:.3g}: rounding of a T-term sum of numbers in [0, 1]", detail)


def prop_convex_combination(f: Callable, x: torch.Tensor, out: torch.Tensor, *, causal: bool
                            ) -> tuple[Property, torch.Tensor | None]:
    """Single head: each output row is a convex combination of the value rows. The value row of
    token ``s`` in output space is ``f`` on the one-token sequence ``x_s`` (softmax over one key is
    1, so the output is ``W_o v_s + b_o``); for ``T ≤ D`` generic value rows are linearly
    independent and the coefficients ``P`` with ``out_t = Σ_s P_ts u_s`` are unique (least
    squares). The property: ``P`` ≥ 0, rows sum to 1, the fit exact. Returns ``(property, P)``
    (``P`` ``(B, T, T)``, the recovered attention weights; ``None`` when not identifiable)."""
    B, T, D = x.shape
    name = "convex_combination_of_values"
    if T > D:
        return _skip(name, f"T = {T} > D = {D}: value rows not linearly independent"), None
    u_rows, _ = call(f, x.reshape(B * T, 1, D))
    if not isinstance(u_rows, torch.Tensor) or tuple(u_rows.shape) != (B * T, 1, D):
        return _skip(name, "the object does not accept one-token sequences (batch·T, 1, D)"), None
    U = u_rows.reshape(B, T, D).double()
    Y = out.double()
    if not (torch.isfinite(U).all() and torch.isfinite(Y).all()):
        return _judge(name, float("nan"), 0.0, "value rows or outputs non-finite"), None
    # out_b (T, D) = P_b (T, T) U_b (T, D)  ->  P_bᵀ = lstsq(U_bᵀ, out_bᵀ)
    sol = torch.linalg.lstsq(U.transpose(1, 2), Y.transpose(1, 2), driver="gelsd").solution
    P = sol.transpose(1, 2)
    resid = float(((P @ U - Y).norm(dim=(1, 2)) / Y.norm(dim=(1, 2)).clamp_min(1e-300)).max())
    sv = torch.linalg.svdvals(U)
    cond = float((sv[:, 0] / sv[:, -1].clamp_min(1e-300)).max())
    e_sum = float((P.sum(-1) - 1).abs().max())
    e_neg = float((-P).clamp_min(0).max())
    u = unit_roundoff(torch.float64 if x.dtype == torch.float64 else torch.float32)
    tol = 16 * u * (T + D) * cond
    cols = float((P.sum(-2) - 1).abs().max())
    detail = (f"value rows = outputs on one-token inputs; recovered weights P: fit residual {resid:.2g}, "
              f"max |row sum − 1| {e_sum:.3g}, most negative {-e_neg:.3g}, cond(values) {cond:.3g}")
    if e_sum > 1e-6 and cols < 1e-6:
        detail += "; the recovered weights' COLUMNS sum to 1: softmax over the query axis (wrong axis)"
    prop = _judge(name, max(resid, e_sum, e_neg), tol,
                  f"16·u·(T+D)·cond(value rows) = {tol:.3g}: least-squares recovery of P amplifies rounding by the "
                  "condition number", detail)
    return prop, P


def fit_single_head(f: Callable, x: torch.Tensor, P: torch.Tensor, *, causal: bool, gen: torch.Generator,
                    max_dim: int = 32) -> tuple[Callable | None, str, float]:
    """Least-squares fit of a single-head SDPA to the object: the value map ``u(x) = x A_v + c``
    from one-token outputs and the logits ``l_ts = x_t A x_sᵀ + w·x_s`` from the recovered weights
    ``log P_ts − log P_t0`` (keys ``s ≤ t`` only when causal). Returns ``(reference, why, cond)``:
    ``reference(x)`` runs SDPA on the fitted projections (``None`` with the reason when the fit is
    impossible), ``cond`` the condition number of the logit design."""
    B, T, D = x.shape
    if D > max_dim:
        return None, f"fitting {D * D + D} logit parameters needs D ≤ {max_dim}; declare q/k/v projections", 0.0
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool)) if causal else torch.ones(T, T, dtype=torch.bool)
    if not bool((P[:, allowed] > 0).all()):
        return None, "recovered weights are not all positive: not a softmax attention", 0.0
    # value map from fresh one-token probes
    n = 2 * (D + 1)
    xs = torch.randn(n, 1, D, generator=gen, dtype=torch.float64)
    us, _ = call(f, xs.to(x.dtype))
    Xa = torch.cat([xs[:, 0], torch.ones(n, 1, dtype=torch.float64)], 1)
    coef = torch.linalg.lstsq(Xa, us[:, 0].double(), driver="gelsd").solution  # (D+1, D)
    Av, c = coef[:D], coef[D]
    # logits: pairs (t, s), s ≥ 1, with s ≤ t if causal, referenced to key 0
    xd = x.double()
    logP = torch.log(P.clamp_min(1e-300))
    rows, rhs = [], []
    for t in range(T):
        for s in range(1, (t + 1) if causal else T):
            dx = xd[:, s] - xd[:, 0]  # (B, D)
            rows.append(torch.cat([(xd[:, t, :, None] * dx[:, None, :]).reshape(B, D * D), dx], 1))
            rhs.append(logP[:, t, s] - logP[:, t, 0])
    if not rows:
        return None, "T = 1: no logit differences to fit", 0.0
    G, r = torch.cat(rows), torch.cat(rhs)
    if G.shape[0] < G.shape[1]:
        return None, f"only {G.shape[0]} logit differences for {G.shape[1]} parameters (more probes needed)", 0.0
    sol = torch.linalg.lstsq(G, r, driver="gelsd").solution
    sv = torch.linalg.svdvals(G)
    cond = float(sv[0] / sv[-1].clamp_min(1e-300))
    A, w = sol[:D * D].reshape(D, D), sol[D * D:]

    def ref(z: torch.Tensor) -> torch.Tensor:
        z = z.double()
        s = math.sqrt(D + 1)
        q = torch.cat([z @ A, torch.ones(*z.shape[:-1], 1, dtype=z.dtype)], -1) * s
        k = torch.cat([z, (z @ w)[..., None]], -1)
        v = z @ Av + c
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return ref, "", cond


def prop_reference_agreement(f: Callable, x: torch.Tensor, out: torch.Tensor, ref: Callable, *, how: str, L: float,
                             extra_tol: float = 1.0) -> Property:
    """``f`` against the reference ``ref`` (SDPA on mapped or fitted weights) on the probe ``x``
    (fresh, not used by a fit): ``max|f − ref| / max|ref|``."""
    B, T, D = x.shape
    u = unit_roundoff(x.dtype)
    with torch.no_grad():
        r = ref(x)
    err = _rel(out, r.to(out.dtype))
    tol, just = _tol_words(u, D, T, L)
    if extra_tol != 1.0:
        tol *= extra_tol
        just += f", × {extra_tol:.3g} (cond of the least-squares logit fit × √(#parameters): its forward-error bound)"
    return _judge("matches_sdpa", err, tol, just, how)


def prop_scale(f: Callable, x: torch.Tensor, out: torch.Tensor, m: Mapping, *, causal: bool) -> Property:
    """The logit scale: fit ``s`` so that SDPA with queries scaled by ``s`` (instead of ``1/√d_k``)
    best matches ``f`` (a log-grid over 10⁻² … 10² × 1/√d_k, then Gauss–Newton steps with the
    derivative by forward-mode autodiff), and compare ``s·√d_k`` with 1. The tolerance is the
    output rounding bound divided by the relative sensitivity of the outputs to ``log s``."""
    name = "scale_1_over_sqrt_dk"
    dk = m.d_k
    s0 = 1 / math.sqrt(dk)
    xd, od = x.double(), out.double()
    md = m.to(torch.float64, x.device)

    def resid(ls: torch.Tensor) -> torch.Tensor:
        return reference_attention(xd, md, causal=causal, scale=torch.exp(ls)) - od

    with torch.no_grad():
        grid = [math.log(s0) + g for g in torch.linspace(math.log(1e-2), math.log(1e2), 41).tolist()]
        vals = [float(resid(torch.tensor(g, dtype=torch.float64)).norm()) for g in grid]
    ls = torch.tensor(grid[min(range(len(vals)), key=vals.__getitem__)], dtype=torch.float64)
    J = None
    for _ in range(30):
        r, J = torch.func.jvp(resid, (ls,), (torch.ones((), dtype=torch.float64),))
        jj = float((J * J).sum())
        if jj == 0:
            break
        step = float((J * r).sum()) / jj
        ls = ls - step
        if abs(step) < 1e-15:
            break
    s_fit = float(torch.exp(ls))
    err = abs(s_fit * math.sqrt(dk) - 1)
    u = unit_roundoff(x.dtype)
    B, T, D = x.shape
    L = max_logit(xd, md, s_fit)
    out_tol, _ = _tol_words(u, D, T, L)
    sens = float(J.norm() / od.norm().clamp_min(1e-300)) if J is not None else 0.0
    tol = out_tol * math.sqrt(od.numel()) / max(sens, 1e-300)
    with torch.no_grad():
        r_rel = _rel(reference_attention(xd, md, causal=causal, scale=torch.exp(ls)), od)
    if not r_rel <= 1e3 * out_tol:
        return _skip(name, f"no logit scale makes the outputs match SDPA (relative residual {r_rel:.3g} at the best "
                           f"s = {s_fit:.4g}): the difference is not (only) the scale")
    detail = (f"best-fitting scale s = {s_fit:.6g}, s·√d_k = {s_fit * math.sqrt(dk):.6g} (d_k = {dk}); "
              + ("missing 1/√d_k (s ≈ 1)" if abs(s_fit - 1) < 1e-3 and dk > 1 else
                 ("scale differs from 1/√d_k" if err > tol else "scale is 1/√d_k")))
    return _judge(name, err, tol, f"output rounding bound {out_tol:.2g} × √(#outputs) / relative sensitivity "
                                  f"of the outputs to log s ({sens:.3g}) = {tol:.2g}", detail, s_fit=s_fit, d_k=dk)


def prop_causal(f: Callable, x: torch.Tensor, out: torch.Tensor, gen: torch.Generator, *, L: float) -> Property:
    """No output depends on a later token: for each key position ``j``, replace token ``j`` by a fresh
    draw (all ``j`` in one batch) and measure how far outputs ``t < j`` move (relative to
    ``max|out|``). The detail names the worst pair ``(t, j)`` and the offsets ``j − t`` that leak."""
    B, T, D = x.shape
    name = "causal_no_future_leak"
    if T < 2:
        return _skip(name, "T < 2")
    xs = x.unsqueeze(0).repeat(T - 1, 1, 1, 1)  # (T-1, B, T, D): copy j-1 perturbs token j
    noise = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype).to(x.device)
    for j in range(1, T):
        xs[j - 1, :, j] = noise[:, j]
    o2, _ = call(f, xs.reshape((T - 1) * B, T, D))
    o2 = o2.reshape(T - 1, B, T, D).double()
    base = out.double()
    scale = max(float(base.abs().max()), 1e-300)
    delta = (o2 - base.unsqueeze(0)).abs().amax(dim=(1, 3)) / scale  # (T-1 [j], T [t])
    jj = torch.arange(1, T)[:, None]
    tt = torch.arange(T)[None, :]
    mask = tt < jj
    d = torch.where(mask, delta, torch.zeros_like(delta))
    err = float(d.max()) if torch.isfinite(d).all() else float("nan")
    u = unit_roundoff(x.dtype)
    tol, just = _tol_words(u, D, T, L)
    if err > tol:
        k = int(d.argmax())
        j, t = k // T + 1, k % T
        offs = sorted({int(jj_ + 1 - t_) for jj_, t_ in torch.nonzero(d > tol).tolist()})
        detail = (f"LEAK: output at position {t} moves by {float(d.max()):.3g} (relative) when token {j} (= t+{j - t}) "
                  f"changes; leaking offsets j − t: {', '.join('+' + str(o) for o in offs[:8])}")
    else:
        detail = f"perturbing token j moves no output t < j (largest relative change {err:.2g})"
    return _judge(name, err, tol, just, detail)


def prop_permutation(f: Callable, x: torch.Tensor, out: torch.Tensor, gen: torch.Generator, *, L: float) -> Property:
    """``f(x[:, π]) = f(x)[:, π]`` for a random permutation ``π`` of the tokens (attention without
    positional information is permutation-equivariant)."""
    B, T, D = x.shape
    if T < 2:
        return _skip("permutation_equivariance", "T < 2")
    perm = torch.randperm(T, generator=gen)
    while bool((perm == torch.arange(T)).all()):
        perm = torch.randperm(T, generator=gen)
    o2, _ = call(f, x[:, perm])
    err = _rel(o2, out[:, perm])
    tol, just = _tol_words(unit_roundoff(x.dtype), D, T, L)
    return _judge("permutation_equivariance", err, tol, just,
                  f"tokens permuted by {perm.tolist()}" + ("; not equivariant: positional information, or a mask?"
                                                           if err > tol else ""))


def prop_extreme_logits(f: Callable, x: torch.Tensor, m: Mapping | None, targets=(700.0, 1e4)) -> Property:
    """Finite outputs when the largest logit reaches ±700 (the edge of float64's exp) and ±10⁴: the
    input is scaled by ``c = √(target / max|logit|)`` (logits are quadratic in the input for
    bias-free projections; with biases the reached logit is reported). Without a mapping the
    input is scaled by 10 and 100 (logits × 10², × 10⁴ for bilinear scores)."""
    xs, reached = [], []
    if m is not None:
        L0 = max_logit(x.double(), m.to(torch.float64, x.device))
        for tgt in targets:
            c = math.sqrt(tgt / max(L0, 1e-300))
            xs.append(x * c)
            reached.append(max_logit((x * c).double(), m.to(torch.float64, x.device)))
        how = "largest logits reached " + ", ".join(f"{r:.3g}" for r in reached)
    else:
        xs = [x * 10, x * 100]
        how = "no mapping: input scaled ×10 and ×100"
    bad = 0
    total = 0
    for z in xs:
        try:
            o, _ = call(f, z)
        except Exception as exc:  # the user's code at extreme inputs: a finding
            return Property("stable_at_extreme_logits", "fail", float("inf"), 0.0, "must run and stay finite",
                            f"{how}; raised {type(exc).__name__}: {exc}")
        bad += int((~torch.isfinite(o)).sum())
        total += o.numel()
    return _judge("stable_at_extreme_logits", bad / max(total, 1), 0.0,
                  "none may be NaN/inf: a log-sum-exp softmax is finite at any logit (exact)",
                  how + (f"; {bad} of {total} outputs NaN/inf (exp overflow: subtract the row max)" if bad else "; all finite"))


def prop_dtype_device(f: Callable, obj: Any, x: torch.Tensor, out: torch.Tensor, *, other: torch.dtype,
                      device: str, L: float) -> Property:
    """The output keeps the input's dtype and device: the object (a deep copy cast to ``other``
    when it is a module) on ``x`` in ``other``; agreement with the main run within ``other``'s
    rounding bound."""
    name = "dtype_and_device_preserved"
    g = f
    if isinstance(obj, torch.nn.Module):
        try:
            g = copy.deepcopy(obj).to(dtype=other, device=device)
        except Exception as exc:  # pragma: no cover - deepcopy of exotic modules
            return _skip(name, f"cannot copy the module to {other}: {type(exc).__name__}: {exc}")
    xo = x.to(dtype=other, device=device)
    try:
        o, _ = call(g, xo)
    except Exception as exc:
        return Property(name, "fail", float("inf"), 0.0, "must run in " + str(other).replace("torch.", ""),
                        f"raised {type(exc).__name__}: {exc}")
    if not isinstance(o, torch.Tensor):
        return Property(name, "fail", float("inf"), 0.0, "", f"returned {type(o).__name__} for {other} input")
    problems = []
    if o.dtype != other:
        problems.append(f"{str(other).replace('torch.', '')} input gave {str(o.dtype).replace('torch.', '')} output")
    if o.device != xo.device:
        problems.append(f"input on {xo.device} gave output on {o.device}")
    if problems:
        return Property(name, "fail", float("inf"), 0.0, "dtype and device must be those of the input", "; ".join(problems))
    B, T, D = x.shape
    u = max(unit_roundoff(other), unit_roundoff(x.dtype))
    tol, just = _tol_words(u, D, T, L)
    err = _rel(o.double().cpu(), out.double().cpu())
    return _judge(name, err, tol, just + " (in the coarser of the two dtypes)",
                  f"{str(other).replace('torch.', '')} on {xo.device}: same dtype and device out; relative difference "
                  f"from the {str(x.dtype).replace('torch.', '')} run {err:.2g}")
