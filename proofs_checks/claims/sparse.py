"""Group E: sparse-attention patterns and the Yun et al. (2020) universal-approximation conditions
(lecture notes 002). Binds numerics/sparse.py to graph-algorithm references, torch's masked
scaled_dot_product_attention, and mutants."""

from __future__ import annotations

import math

import numpy as np
import torch

from numerics import sparse as nsp
from numerics.torch_utils import generator, resolve_device
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant, compare, worst
from proofs_checks.claims._common import declare, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest
from proofs_checks.claims._attention_common import Resolved

_EXACT = "exact: booleans and integer layer counts; any disagreement with the reference is an error"

# --------------------------------------------------------------------------------------------
# sparse.connectivity
# form: {"builders": {name: builder}, "has_self_loops", "hamiltonian_path", "layers_to_full",
#        "sparse_attention"} (signatures as in numerics/sparse.py)


def _small_cases(form, rng) -> list[tuple[str, list[np.ndarray], bool]]:
    """(label, patterns, claimed_universal) at n ≤ 8 where brute force over n! paths is cheap."""
    B = form["builders"]
    pos = [(f"band n={n} w={w}", B["band"](n, w)) for n in (5, 7) for w in (1, 2)]
    pos += [(f"strided n={n} l={l}", B["strided"](n, l)) for n in (6, 7) for l in (2, 3)]
    pos += [(f"fixed n={n} l={l} c={c}", B["fixed"](n, l, c)) for n, l, c in ((6, 2, 1), (6, 3, 1), (6, 3, 2), (8, 4, 1))]
    pos += [(f"star n={n}", B["star"](n)) for n in (5, 7)]
    pos += [(f"longformer n={n} g={g}", B["longformer"](n, 1, g)) for n, g in ((6, (0,)), (7, (0, 6)), (7, (3,)))]
    pos += [(f"bigbird n=7 r={r} seed={s}", B["bigbird"](7, 1, 1, r, s)) for r in (1, 2) for s in (int(rng.integers(1 << 30)),)]
    cases = [(lab, m, True) for lab, m in pos]
    n = 6
    i, j = np.indices((n, n))
    neg = {
        "block-diagonal (disconnected)": [(i // 3) == (j // 3)],
        "pure star, no ring (no Hamiltonian path)": [(i == 0) | (j == 0) | (i == j)],
        "causal band (never full)": [(j <= i) & (i - j <= 1)],
        "band without diagonal": [np.abs(i - j) == 1],
        "two patterns, second disconnected": [np.abs(i - j) <= 1, (i % 2) == (j % 2)],
    }
    cases += [(lab, m, False) for lab, m in neg.items()]
    for t in range(6):  # random directed patterns, some with self-loops
        m = rng.random((n, n)) < 0.35
        if t % 2 == 0:
            np.fill_diagonal(m, True)
        cases.append((f"random density 0.35 #{t}", [m], False))
    return cases


def _path_ok(masks, path) -> bool:
    """Independent verification of a returned path (not the form's own verifier)."""
    n = masks[0].shape[0]
    if path is None or sorted(int(p) for p in path) != list(range(n)):
        return False
    return all(any(bool(m[path[t + 1], path[t]]) for m in masks) for t in range(n - 1))


def _conditions_small(form, ctx) -> CheckResult:
    """At n ≤ 8: the form's three conditions against the literal definitions (diagonal; brute force
    over all n! orders for the Hamiltonian path, with every returned path verified edge by edge;
    Yun et al.'s set recursion for the layer count) on the six patterns and on negative patterns
    (disconnected, starless, causal, no self-loops, random). Every one of the six patterns must
    satisfy all three conditions by the reference."""
    rng = ctx.rng()
    cases = _small_cases(form, rng)
    mismatches, claim_fail, rows = [], [], []
    for label, masks, universal in cases:
        ref_loops = all(all(bool(m[t, t]) for t in range(m.shape[0])) for m in masks)
        ref_path = nsp.hamiltonian_path_exists_bruteforce(masks)
        ref_layers = nsp.layers_to_full_sets(masks)
        loops = bool(form["has_self_loops"](masks))
        path = form["hamiltonian_path"](masks)
        layers = form["layers_to_full"](masks)
        ok = (loops == ref_loops and (path is not None) == ref_path and (path is None or _path_ok(masks, path))
              and layers == ref_layers)
        if not ok:
            mismatches.append({"case": label, "form": [loops, path, layers], "reference": [ref_loops, ref_path, ref_layers]})
        if universal and not (ref_loops and ref_path and ref_layers is not None):
            claim_fail.append(label)
        rows.append({"case": label, "self_loops": ref_loops, "hamiltonian_path": ref_path, "layers_to_full": ref_layers})
    err = len(mismatches) + len(claim_fail)
    return compare(err, 0, _EXACT, seeds=[ctx.seed_for()], sizes={"cases": len(cases), "n_max": 8},
                   details={"mismatches": mismatches[:10], "patterns_failing_the_conditions": claim_fail, "cases": rows})


def _large_patterns(form, n):
    B = form["builders"]
    s = largest(2, int(round(math.sqrt(n))))
    blk = next(b for b in range(s, 0, -1) if n % b == 0)
    return {
        "band w=1": (B["band"](n, 1), math.ceil((n - 1) / 1)),
        "band w=4": (B["band"](n, 4), math.ceil((n - 1) / 4)),
        f"strided l={s}": (B["strided"](n, s), None),
        f"fixed l={blk} c=1": (B["fixed"](n, blk, 1), None),
        "star": (B["star"](n), 2),
        "longformer w=2 g=1": (B["longformer"](n, 2, (0,)), 2),
        "bigbird w=1 g=1 r=2": (B["bigbird"](n, 1, 1, 2, 7), None),
    }


def _layers_large(form, ctx) -> CheckResult:
    """At n = 48/128/256 (quick/default/full): the form's layer counts against graph distances
    (scipy.sparse.csgraph shortest paths: with self-loops a token reaches another within s layers
    iff their distance ≤ s) for single patterns, Yun's set recursion for cycled pairs, and the
    closed forms ⌈(n−1)/w⌉ for the band and 2 for star/Longformer; the constructive Hamiltonian
    witness is verified edge by edge; self-loops hold."""
    n = ctx.size(48, 128, 256)
    errs, table = {}, {}
    for label, (masks, closed) in _large_patterns(form, n).items():
        layers = form["layers_to_full"](masks)
        ref = nsp.layers_to_full_distance(masks[0]) if len(masks) == 1 else nsp.layers_to_full_sets(masks)
        path = form["hamiltonian_path"](masks)
        bad = int(layers != ref) + int(closed is not None and layers != closed) + int(not _path_ok(masks, path))
        bad += int(not form["has_self_loops"](masks)) + int(not all(np.all(np.diag(m)) for m in masks))
        errs[label] = bad
        table[label] = {"layers_to_full": layers, "reference": ref, "closed_form": closed, "patterns_per_cycle": len(masks),
                        "edges_per_layer": int(sum(m.sum() for m in masks) / len(masks)), "hamiltonian_witness_ok": _path_ok(masks, path)}
    return compare(worst(errs), 0, _EXACT, sizes={"n": n}, details={"table": table})


def _sweep_cases(form, n, rng):
    """Every builder at n tokens over the parameter ranges of the clauses: (label, masks, closed form of
    the layer count or None)."""
    B = form["builders"]
    out = [(f"band w={w}", B["band"](n, w), largest(1, math.ceil((n - 1) / w))) for w in range(1, 5)]
    out += [(f"strided l={l}", B["strided"](n, l), None) for l in range(2, 6)]
    out += [(f"fixed l={l} c={c}", B["fixed"](n, l, c), None) for l in range(1, 7) if n % l == 0 for c in range(1, l + 1)]
    out.append(("star", B["star"](n), 1 if n <= 3 else 2))
    out += [(f"longformer w={w} g=(0,)", B["longformer"](n, w, (0,)), 1 if n <= w + 2 else 2) for w in range(1, 4)]
    out += [(f"longformer w={w} g={g}", B["longformer"](n, w, g), None) for w in (1, 2) for g in ((n - 1,), (n // 2,), (0, n - 1))]
    out += [(f"bigbird w={w} g={g} r={r}", B["bigbird"](n, w, g, r, int(rng.integers(1 << 30))), None)
            for w in (1, 2) for g in (0, 1, 2) for r in (0, 2)]
    return out


def _sweep(form, ctx) -> CheckResult:
    """EVERY n from 1 to 16/32/48 (quick/default/full) and every parameter in the listed ranges
    (band w ≤ 4, strided ℓ ≤ 5, fixed ℓ ≤ 6 dividing n with every 1 ≤ c ≤ ℓ, star, Longformer w ≤ 3
    with globals at the start, end, middle, both ends, BigBird w ≤ 2, g ≤ 2, r ∈ {0, 2}): self-loops
    (the diagonal), the form's Hamiltonian path verified edge by edge here, the form's layer count
    equal to Yun et al.'s set recursion (and finite), and the closed forms band max(1, ⌈(n−1)/w⌉),
    star 1 (n ≤ 3) or 2, Longformer with global token 0: 1 (n ≤ w + 2) or 2."""
    rng = ctx.rng()
    n_max = ctx.size(16, 32, 48)
    fails, count = [], 0
    for n in range(1, n_max + 1):
        for label, masks, closed in _sweep_cases(form, n, rng):
            count += 1
            loops = all(bool(np.all(np.diag(m))) for m in masks) and bool(form["has_self_loops"](masks))
            path_ok = _path_ok(masks, form["hamiltonian_path"](masks))
            layers, ref = form["layers_to_full"](masks), nsp.layers_to_full_sets(masks)
            ok = loops and path_ok and ref is not None and layers == ref and (closed is None or ref == closed)
            if not ok:
                fails.append({"n": n, "case": label, "self_loops": loops, "path_verified": path_ok, "layers": layers,
                              "set_recursion": ref, "closed_form": closed})
    return compare(len(fails), 0, _EXACT, seeds=[ctx.seed_for()], sizes={"n": f"1..{n_max}", "cases": count},
                   details={"failures": fails[:10]})


def _attention_vs_sdpa(form, ctx) -> CheckResult:
    """The form's sparse attention (over attended keys only) equals torch's
    scaled_dot_product_attention with attn_mask = the pattern, for every pattern of the six."""
    dev = resolve_device(ctx.device)
    n, b, h, d, dv = ctx.size(24, 64, 128), 2, 3, 8, 5
    seed = ctx.seed_for()
    g = generator(seed, dev)
    q, k = (torch.randn(b, h, n, d, generator=g, dtype=torch.float64, device=dev) for _ in range(2))
    v = torch.randn(b, h, n, dv, generator=g, dtype=torch.float64, device=dev)
    R = Resolved()
    blk = next(x for x in range(5, 0, -1) if n % x == 0)
    pats = {"band": form["builders"]["band"](n, 2), "strided": form["builders"]["strided"](n, 5),
            "fixed": form["builders"]["fixed"](n, blk, 1), "star": form["builders"]["star"](n),
            "longformer": form["builders"]["longformer"](n, 2, (0, n - 1)),
            "bigbird": form["builders"]["bigbird"](n, 1, 1, 2, seed % 1000)}
    for name, masks in pats.items():
        for t, m in enumerate(masks):
            out = form["sparse_attention"](q, k, v, m)
            ref = nsp.masked_dense_attention(q, k, v, m, dev)
            R.pair(f"{name}[{t}]", out, ref)
    scale = float(v.abs().max())
    tol = 64 * n * EPS * scale
    return R.result(tol, f"float64 rounding of a softmax-weighted sum over ≤ n = {n} keys (64·n·eps·max|v|)",
                    seeds=[seed], sizes={"n": n, "batch": b, "heads": h, "d": d}, device=str(dev))


_SWEEP_SCOPE = ("every n ≤ 16/32/48 (quick/default/full) with band w ≤ 4, strided ℓ ≤ 5, fixed ℓ ≤ 6 (ℓ | n, every c), star, "
                "Longformer w ≤ 3 (globals at start/end/middle), BigBird w ≤ 2, g ≤ 2, r ∈ {0, 2}")

_FORM = {"builders": dict(nsp.BUILDERS), "has_self_loops": nsp.has_self_loops, "hamiltonian_path": nsp.hamiltonian_path,
         "layers_to_full": nsp.layers_to_full, "sparse_attention": nsp.sparse_attention}


def _with(**kw):
    f = dict(_FORM)
    f["builders"] = dict(f["builders"])
    f.update({k: v for k, v in kw.items() if k != "builders"})
    f["builders"].update(kw.get("builders", {}))
    return f


def _band_no_diag(n, w=1):
    return [m & ~np.eye(n, dtype=bool) for m in nsp.band(n, w)]


def _layers_plus_one(masks, max_layers=None):
    s = nsp.layers_to_full(masks, max_layers)
    return None if s is None else s + 1


def _path_unchecked(masks, max_exact_n=16):
    return list(range(np.asarray(masks[0]).shape[0]))


def _attention_zero_fill(q, k, v, mask):
    """Masked logits set to 0 instead of −inf over the dense score matrix."""
    m = torch.as_tensor(np.asarray(mask, dtype=bool), device=q.device)
    logits = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~m, 0.0)
    return torch.softmax(logits, -1) @ v


def _layers_undirected(masks, max_layers=None):
    return nsp.layers_to_full([np.asarray(m) | np.asarray(m).T for m in masks], max_layers)


def _cx_window(ctx) -> Counterexample:
    """Without a window w ≥ 1: Longformer with w = 0 and global token 0 at n = 5 is the bare star (self,
    relay row and column): after the relay no token attends another non-relay token."""
    n = 5
    m = np.eye(n, dtype=bool) | nsp.star(n)[0] & ((np.arange(n)[:, None] == 0) | (np.arange(n)[None, :] == 0))
    exists = nsp.hamiltonian_path_exists_bruteforce([m])
    return Counterexample({"n": n, "pattern": "Longformer w = 0, global token 0"}, "hamiltonian_path",
                          f"brute force over {math.factorial(n)} orders: Hamiltonian path {'exists' if exists else 'none'}",
                          violated=not exists, justification=_EXACT)


def _cx_fixed_block(ctx) -> Counterexample:
    """Without ℓ | n: the fixed pattern (ℓ = 3, c = 1) on n = 7 tokens (the n = 9 pattern restricted to its
    first 7 tokens: its entries depend on i, j only). The partial block {6} has no summary position, so
    no full block ever hears token 6."""
    masks = [m[:7, :7] for m in nsp.fixed(9, 3, 1)]
    layers = nsp.layers_to_full_sets(masks, 100)
    return Counterexample({"n": 7, "block": 3, "summary": 1}, "full_connectivity",
                          f"Yun et al.'s set recursion reaches no full S^s within 100 layers (s = {layers})",
                          violated=layers is None, justification=_EXACT)


declare(
    id="sparse.connectivity",
    title="Sparse patterns (strided, fixed, star, Longformer, BigBird, band) meet Yun et al.'s three conditions; "
          "layers to full connectivity",
    hypotheses=(
        setting("patterns", r"n\ge1;\ \text{strided stride } \ell\ge2;\ \text{fixed } 1\le c\le\ell;\ "
                r"\text{Longformer, BigBird: any global tokens, } r\ge0 \text{ random keys}",
                "the builders' definitions (numerics.sparse)"),
        Hypothesis("window_ge_1", r"\text{band, Longformer, BigBird: window } w\ge1", "a window of half-width ≥ 1",
                   counterexample=_cx_window),
        Hypothesis("fixed_block_divides_n", r"\text{fixed: } \ell\mid n", "the fixed pattern's block divides n",
                   counterexample=_cx_fixed_block),
    ),
    clauses=(
        Clause("self_loops", r"\forall k,i:\ i\in A_k^i", "checked", _SWEEP_SCOPE + "; n ≤ 8 and n = 48/128/256 (listed "
               "parameters)", ("pattern_sweep", "conditions_vs_bruteforce", "layers_vs_graph_distance")),
        Clause("hamiltonian_path", r"\exists\gamma\ \text{Hamiltonian},\ \gamma(i)\in\textstyle\bigcup_k A_k^{\gamma(i+1)}",
               "checked", _SWEEP_SCOPE + " (the witness verified edge by edge); brute force over all n! orders at n ≤ 8",
               ("pattern_sweep", "conditions_vs_bruteforce", "layers_vs_graph_distance")),
        Clause("full_connectivity", r"\exists s:\ S^s_i=[n]\ \forall i,\ S^t_i=\textstyle\bigcup_{j\in A^i_{t}}S^{t-1}_j",
               "checked", _SWEEP_SCOPE + " (against the set recursion); graph distances at n = 48/128/256",
               ("pattern_sweep", "conditions_vs_bruteforce", "layers_vs_graph_distance")),
        Clause("layer_counts", r"s_{\text{band}}=\max(1,\lceil\tfrac{n-1}{w}\rceil),\ s_{\text{star}}=1+[n\ge4],\ "
               r"s_{\text{Longformer}(w,\{0\})}=1+[n\ge w+3]", "checked", _SWEEP_SCOPE + "; n = 48/128/256 (band w ∈ {1, 4}, "
               "star, Longformer w = 2)", ("pattern_sweep", "layers_vs_graph_distance")),
        Clause("sparse_equals_sdpa", r"\operatorname{Attn}_A(Q,K,V)=\operatorname{SDPA}(Q,K,V;\,\text{mask}=A)", "checked",
               "n = 24/64/128 (quick/default/full), batch 2, 3 heads, d = 8, every layer of the six patterns",
               ("sparse_equals_masked_sdpa",)),
    ),
    source="lecture notes 002 (sparse transformers); Yun et al., O(n) Connections are Expressive Enough (NeurIPS 2020); "
           "Child et al. 2019; Guo et al. 2019; Beltagy et al. 2020; Zaheer et al. 2020",
    kind="theorem",
    form=_FORM,
    no_symbolic="a combinatorial property of finite attention patterns: checked exhaustively by brute force and graph "
                "search (an exact decision at each size), not a symbolic identity",
    checks=(
        Check("conditions_vs_bruteforce", "numeric", _conditions_small, "three conditions vs brute force and set recursion at n ≤ 8"),
        Check("pattern_sweep", "numeric", _sweep, "every n up to 16/32/48 and every parameter in range: conditions, "
              "layer counts vs the set recursion and closed forms"),
        Check("layers_vs_graph_distance", "numeric", _layers_large, "layers to full connectivity vs scipy shortest paths and closed forms"),
        Check("sparse_equals_masked_sdpa", "numeric", _attention_vs_sdpa, "gathered sparse attention vs scaled_dot_product_attention(attn_mask)",
              uses_device=False),
    ),
    mutants=(
        Mutant("band_missing_self_loops", "dropped term", "band builder without the diagonal (1 ≤ |i−j| ≤ w)",
               _with(builders={"band": _band_no_diag})),
        Mutant("layers_off_by_one", "wrong constant", "layers-to-full reported one layer too many", _with(layers_to_full=_layers_plus_one)),
        Mutant("hamiltonian_path_unchecked", "wrong solver output", "the identity order returned as a path without checking edges "
               "(disconnected patterns claimed connected)", _with(hamiltonian_path=_path_unchecked)),
        Mutant("reachability_undirected", "wrong formula", "reachability on the symmetrised pattern (ignores who attends whom)",
               _with(layers_to_full=_layers_undirected)),
        Mutant("masked_logits_zero", "wrong formula", "masked scores set to 0 instead of −∞ (masked keys keep weight)",
               _with(sparse_attention=_attention_zero_fill)),
    ),
    notes="Strided and fixed patterns are the bidirectional versions analysed by Yun et al.; the fixed pattern gets "
          "self-loops in its summary pattern and needs n to be a multiple of the block: without it (n = 7, ℓ = 3) the "
          "partial block is never heard by the others (counterexample fixed_block_divides_n). The conditions are what "
          "Yun et al.'s universal-approximation theorem assumes; that theorem itself is not checked here. Layer counts "
          "are in the details of layers_vs_graph_distance.",
)
