"""The float32 rule of ``tverify check attention`` at large logits (issue 37): error / tolerance of
plain float32 attention implementations (torch SDPA, ``nn.MultiheadAttention``, a hand-written one
that scales q before q·kᵀ, and Keras 3's ``MultiHeadAttention`` with the torch backend where it
imports) against the float64 reference, at logits ~1, ~100, ~1000 and T in (17, 64, 257), causal
and not, under the old rule (2·e_plain + B64) and the rule in :func:`numerics.attention_probe.tolerance`
(the plain error floored at u·max(1, |logit|max)). D = 32, 4 heads, batch 3, 50 draws per row.

Run: ``python -m benchmarks.bench_float32_rule [draws]`` (Keras: ``PYTHONPATH=.tverify/survey-cache/
keras-3.15.1``); prints a Markdown table (benchmarks/RESULTS.md, "Float32 rule at large logits").
"""

import math
import os
import sys
import time

import torch
import torch.nn.functional as F

from numerics.attention_probe import _rel, b64, tolerance
from numerics.attention_reference import Mapping, Structure, max_logit, reference_attention

D, H = 32, 4
dk = D // H

def impl_sdpa(x, m, causal):
    x = x.float()
    q = F.linear(x, m.wq.float()); k = F.linear(x, m.wk.float()); v = F.linear(x, m.wv.float())
    B, T, _ = x.shape
    sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
    o = F.scaled_dot_product_attention(sp(q), sp(k), sp(v), is_causal=causal)
    return F.linear(o.transpose(1, 2).reshape(B, T, D), m.wo.float()).double()

def impl_hand(x, m, causal):  # scale q first, manual stable softmax
    x = x.float()
    B, T, _ = x.shape
    sp = lambda t: t.view(B, T, H, dk).transpose(1, 2)
    q = sp(x @ m.wq.float().T) * (dk ** -0.5); k = sp(x @ m.wk.float().T); v = sp(x @ m.wv.float().T)
    s = q @ k.transpose(-1, -2)
    if causal:
        s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    s = s - s.amax(-1, keepdim=True)
    p = s.exp(); p = p / p.sum(-1, keepdim=True)
    o = (p @ v).transpose(1, 2).reshape(B, T, D)
    return (o @ m.wo.float().T).double()

def impl_mha(x, m, causal, mods={}):
    key = id(m)
    if key not in mods:
        mha = torch.nn.MultiheadAttention(D, H, bias=False, batch_first=True)
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat([m.wq, m.wk, m.wv]).float()); mha.out_proj.weight.copy_(m.wo.float())
        mods.clear(); mods[key] = mha.eval()
    T = x.shape[1]
    mask = ~torch.ones(T, T, dtype=torch.bool).tril() if causal else None
    with torch.no_grad():
        return mods[key](x.float(), x.float(), x.float(), attn_mask=mask, need_weights=False)[0].double()


def impl_keras(x, m, causal, cache={}):
    import keras, numpy as np
    key = id(m)
    if key not in cache:
        l = keras.layers.MultiHeadAttention(num_heads=H, key_dim=dk, dtype="float32")
        z = torch.zeros(1, 2, D)
        l(z, z)
        ws = {w.path.split("/")[-2] + "/" + w.path.split("/")[-1]: w for w in l.weights}
        for nm, W in (("query", m.wq), ("key", m.wk), ("value", m.wv)):
            ws[nm + "/kernel"].assign(W.T.reshape(D, H, dk).float().numpy())
            ws[nm + "/bias"].assign(np.zeros((H, dk), "float32"))
        ws["attention_output/kernel"].assign(m.wo.T.reshape(H, dk, D).float().numpy())
        ws["attention_output/bias"].assign(np.zeros((D,), "float32"))
        cache.clear(); cache[key] = l
    l = cache[key]
    xf = x.float()
    with torch.no_grad():
        return l(xf, xf, use_causal_mask=causal).detach().double()

def main(draws: int | None = None) -> None:
    NDRAW = draws or int(os.environ.get("TVERIFY_F32_DRAWS", "50"))
    torch.set_num_threads(1)
    IMPLS = {"SDPA": impl_sdpa, "hand (q scaled first)": impl_hand, "nn.MultiheadAttention": impl_mha}
    try:  # Keras 3 with the torch backend, where installed (the survey caches it under .tverify/survey-cache)
        os.environ.setdefault("KERAS_BACKEND", "torch")
        import keras  # noqa: F401
        IMPLS["keras MHA"] = impl_keras
    except ImportError:
        print("keras not importable: its column is left out", file=sys.stderr)
    t0 = time.time()
    names = ", ".join(IMPLS)
    print(f"| mask | T | logits | plain e32/(u32·L) min | impl e/(u32·L) max | old rule: max err/tol ({names}) "
          "| draws > 1 (old) | new rule: max err/tol (same order) |")
    print("|---|---|---|---|---|---|---|---|")
    u = 2.0 ** -24
    for causal in (True, False):
        st = Structure(causal=causal)
        for T in (17, 64, 257):
            for L in (1.0, 100.0, 1000.0):
                old = {k: [] for k in IMPLS}; new = {k: [] for k in IMPLS}; pl = []; im = []
                for d in range(NDRAW):
                    g = torch.Generator().manual_seed(1000 * d + T + int(L))
                    W = [torch.randn(D, D, generator=g, dtype=torch.float64) / math.sqrt(D) for _ in range(4)]
                    m = Mapping(W[0], None, W[1], None, W[2], None, W[3], None, heads=H, source="t")
                    x = torch.randn(3, T, D, generator=g, dtype=torch.float64)
                    x = x * math.sqrt(L / max_logit(x, m, st))
                    Lx = max_logit(x, m, st)
                    with torch.no_grad():
                        r64 = reference_attention(x, m, st)
                        e32 = _rel(reference_attention(x, m, st, torch.float32), r64)
                        t_old = 2 * e32 + b64(D, T, Lx)
                        t_new, _ = tolerance(e32, D, T, Lx, torch.float32, 2.0)
                        pl.append(e32 / (u * max(1, Lx)))
                        for k, f in IMPLS.items():
                            e = _rel(f(x, m, causal), r64)
                            old[k].append(e / t_old); new[k].append(e / t_new); im.append(e / (u * max(1, Lx)))
                over = sum(r > 1 for v in old.values() for r in v)
                print(f"| {'causal' if causal else 'none'} | {T} | ~{L:g} | {min(pl):.3g} | {max(im):.3g} | "
                      + ", ".join(f"{max(v):.2f}" for v in old.values()) + f" | {over} | "
                      + ", ".join(f"{max(v):.2f}" for v in new.values()) + " |", flush=True)
    print(f"\n({NDRAW} draws per row, {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else None)
