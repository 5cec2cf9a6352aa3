"""Group F, continued: the per-layer connection counts of the sparse patterns of sparse.connectivity
(lecture notes 002, approximation part). Binds theory/approx.py and numerics/sparse.py to checks and mutants."""

from __future__ import annotations

import math

import sympy as sp

from numerics import approx as na, sparse as nsp
from proofs_checks.comparisons import exact
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant
from proofs_checks.claims._common import declare, setting
from theory import approx as ta


# --------------------------------------------------------------------------------------------
# approx.sparse_connections   form: {pattern: closed-form count (T[, c | w, g]) -> int}

_PATTERNS = {"strided_local": (), "strided_stride": (), "fixed_block": (), "fixed_summary": ("c",), "star": (),
             "longformer": ("w", "g")}


def _cases(ctx):
    """(pattern, T, params): perfect squares for strided/fixed (s = √T), all T for the others."""
    s_max, t_max = ctx.size((12, 60), (40, 300))
    out = []
    for s in range(2, s_max + 1):
        T = s * s
        out += [("strided_local", T, {}), ("strided_stride", T, {}), ("fixed_block", T, {})]
        out += [("fixed_summary", T, {"c": c}) for c in sorted({1, 2, s // 2, s}) if 1 <= c <= s]
    out += [("star", T, {}) for T in range(2, t_max + 1)]
    for T in range(3, t_max + 1):
        out += [("longformer", T, {"w": w, "g": g}) for w in (1, 2, 3) for g in (0, 1, 2) if T - g >= 2 * w]
    # every configuration T ≤ 40, g ≤ 4, w ≤ 6 (the closed form is piecewise outside T − g ≥ w)
    out += [("longformer", T, {"w": w, "g": g}) for T in range(1, 41) for w in range(1, 7) for g in range(5)
            if not (3 <= T <= t_max and w <= 3 and g <= 2 and T - g >= 2 * w)]
    return out


def _lf_branch(p, T) -> str:
    """Which derived Longformer expression holds: the polynomial (T − g ≥ w), full band, all global."""
    return ("longformer_all_global" if p["g"] >= T else "longformer" if T - p["g"] >= p["w"] else "longformer_short")


def _counts_symbolic(form, ctx) -> CheckResult:
    """The form's counts against the SymPy-derived polynomials (summations over the mask
    definitions), exactly (integers), at every case of the numeric check."""
    der = ta.derive_sparse_counts()
    S = der.facts["symbols"]
    T_, s_ = S["T"], sp.Symbol("s", positive=True, integer=True)
    fns = {}
    for k, v in der.result.items():  # integer polynomials: in s = √T where √T appears, else in T
        uses_root = v.has(sp.sqrt(T_)) or any(isinstance(a, sp.Pow) and a.base == T_ and not a.exp.is_integer for a in sp.preorder_traversal(v))
        poly = sp.expand(v.subs(T_, s_**2)) if uses_root else v
        fns[k] = (uses_root, sp.lambdify([s_ if uses_root else T_, S["c"], S["w"], S["g"]], poly, "math"))
    bad = []
    for name, T, p in _cases(ctx):
        root, fn = fns[_lf_branch(p, T) if name == "longformer" else name]
        ref = fn(math.isqrt(T) if root else T, p.get("c", 0), p.get("w", 0), p.get("g", 0))
        got = form[name](T, *[p[k] for k in _PATTERNS[name]])
        if not (isinstance(ref, int) and int(got) == got and int(got) == ref):
            bad.append({"pattern": name, "T": T, **p, "form": got, "derived": ref})
    return exact({"mismatches": float(len(bad))}, "integer counts equal the derived polynomials",
                 sizes={"cases": len(_cases(ctx))}, details={"first_mismatches": bad[:10]})


def _counts_masks(form, ctx) -> CheckResult:
    """The form's counts against the True entries of the masks built by numerics/sparse.py
    (sparse.connectivity's builders), exactly; BigBird (r random keys per query) lies between the
    Longformer count with its g globals and that plus r·T. Reports the growth exponent between the
    two largest T of each pattern (→ 1.5 for strided/fixed, 1 for star/Longformer)."""
    bad, growth = [], {}
    last: dict[str, list] = {}
    for name, T, p in _cases(ctx):
        got = form[name](T, *[p[k] for k in _PATTERNS[name]])
        ref = na.mask_counts(name, T, **p)
        if int(got) != ref:
            bad.append({"pattern": name, "T": T, **p, "form": int(got), "mask": ref})
        if not p or p in ({"c": 1}, {"w": 1, "g": 1}):
            last.setdefault(name, []).append((T, ref))
    rng = ctx.rng()
    for T in range(8, ctx.size(60, 200), 7):
        w, g, r = 1, 1, 2
        lf = form["longformer"](T, w, g)
        bb = na.mask_counts("bigbird", T, w=w, g=g, r=r, seed=int(rng.integers(1 << 30)))
        if not (lf <= bb <= lf + r * T):
            bad.append({"pattern": "bigbird", "T": T, "form_longformer": int(lf), "mask": bb})
    for name, pts in last.items():
        (T1, c1), (T2, c2) = pts[-2], pts[-1]
        growth[name] = math.log(c2 / c1) / math.log(T2 / T1)
    return exact({"mismatches": float(len(bad))}, "integer counts equal the built masks' True entries",
                 sizes={"cases": len(_cases(ctx))}, details={"first_mismatches": bad[:10], "growth_exponent": growth})


def _mut(name, fn):
    return {**na.CONNECTION_COUNTS, name: fn}


def _stated_count(name, **vals) -> int:
    """The claim's displayed polynomial (the derivation's result) at an instance."""
    der = ta.derive_sparse_counts()
    S = der.facts["symbols"]
    return int(der.result[name].subs({S[k]: v for k, v in vals.items()}))


def _cx_longformer_short(ctx) -> Counterexample:
    """Without T ≥ g + w: T = 3, w = 5, g = 1 (the window wider than the sequence). BigBird's bounds
    fail there too: with r = 1 random key per query its mask has 9 entries, above polynomial + rT."""
    poly, mask = _stated_count("longformer", T=3, w=5, g=1), na.mask_counts("longformer", 3, w=5, g=1)
    bb = na.mask_counts("bigbird", 3, w=5, g=1, r=1, seed=ctx.seed_for("bigbird"))
    return Counterexample({"T": 3, "w": 5, "g": 1, "r (BigBird)": 1}, "longformer",
                          f"the polynomial gives {poly}, the mask has {mask} True entries (every pair within w: T² = 9); "
                          f"BigBird's mask has {bb}, outside [{poly}, {poly} + rT = {poly + 3}]",
                          violated=poly != mask, error=abs(poly - mask),
                          tolerance=0.0, justification="exact integers")


def _cx_longformer_globals(ctx) -> Counterexample:
    """Without "the globals are tokens 0..g−1": one global token in the middle (token 3 of 7, w = 1)
    cuts the window: the pairs (2, 3) and (3, 4) are global anyway and no band pair bridges it."""
    poly = _stated_count("longformer", T=7, w=1, g=1)
    mask = int(nsp.longformer(7, 1, (3,))[0].sum())
    return Counterexample({"T": 7, "w": 1, "global_tokens": "(3,)"}, "longformer",
                          f"the polynomial gives {poly}, the mask with global token 3 has {mask} True entries",
                          violated=poly != mask, error=abs(poly - mask), tolerance=0.0, justification="exact integers")


def _cx_star_T1(ctx) -> Counterexample:
    """Without T ≥ 2: the star on one token (the relay alone)."""
    poly, mask = _stated_count("star", T=1), na.mask_counts("star", 1)
    return Counterexample({"T": 1}, "star", f"5T − 6 = {poly}, the mask has {mask} True entry", violated=poly != mask,
                          error=abs(poly - mask), tolerance=0.0, justification="exact integers")


_SC_SCOPE = "every T = s² with s ≤ 12 (quick) / 40 (default)"

declare(
    id="approx.sparse_connections",
    title="Connections per layer (True mask entries): strided Θ(T^{3/2}) and fixed Θ(c·T^{3/2}) (stride √T; Θ(T^{3/2}) "
          "for fixed c), star and Longformer Θ(T); exact polynomials under their size conditions",
    hypotheses=(
        setting("stride_sqrt_T", r"\text{strided, fixed: } T=s^2,\ s\ge2,\ \text{stride/block } s=\sqrt T,\ 1\le c\le s",
                "the closed forms are written in √T and the builders need a perfect "
                "square T (numerics.approx rejects any other T)"),
        Hypothesis("star_T_ge_2", r"\text{star: } T\ge2", "the star has at least one satellite", counterexample=_cx_star_T1),
        Hypothesis("longformer_T_ge_g_plus_w", r"\text{Longformer, BigBird: } w,g\in\mathbb N,\ T\ge g+w",
                   "the sequence is at least as long as globals plus window", counterexample=_cx_longformer_short),
        Hypothesis("longformer_globals_first", r"\text{global tokens } 0,\dots,g-1",
                   "the g global tokens are the first ones (BigBird's ITC layout)", counterexample=_cx_longformer_globals),
    ),
    clauses=(
        Clause("strided", r"\text{strided: } 2T^{3/2}-2T+\sqrt T\ (|i-j|<s),\ T^{3/2}\ (s\mid i-j)", "derived",
               "every s = √T ≥ 2 (summations over the mask definitions with symbolic s)", ("derivation", "counts_vs_derivation"),
               also=(("checked", _SC_SCOPE + ", against the built masks"),)),
        Clause("fixed", r"\text{fixed: } T^{3/2}\ (\text{block}),\ cT^{3/2}+T-c\sqrt T\ (\text{summary} + \text{self})", "derived",
               "every s = √T ≥ 2 and 1 ≤ c ≤ s (symbolic s, c)", ("derivation", "counts_vs_derivation"),
               also=(("checked", _SC_SCOPE + ", c ∈ {1, 2, s/2, s}, against the built masks"),)),
        Clause("star", r"\text{star: } 5T-6", "derived", "every T ≥ 3 (the ring's band sum needs T − 1 ≥ 2 satellites)",
               ("derivation", "counts_vs_derivation"),
               also=(("checked", "every 2 ≤ T ≤ 60 (quick) / 300 (default), against the built masks"),)),
        Clause("longformer", r"\text{Longformer}(w,g):\ (2w+1)T+2gT-g^2-2gw-g-w^2-w", "derived",
               "every T − g ≥ 2w (the band sum splits its clipped rows there; symbolic T, w, g)",
               ("derivation", "counts_vs_derivation", "counts_vs_built_masks"),
               also=(("checked", "every T ≤ 40, 1 ≤ w ≤ 6, g ≤ 4 with T ≥ g + w (this covers g + w ≤ T < g + 2w), and "
                                 "w ≤ 3, g ≤ 2 up to T = 60/300, against the built masks"),)),
        Clause("growth", r"\Theta(T^{3/2})\ \text{(strided; fixed block)},\ \Theta(c\,T^{3/2})\ \text{(fixed summary; }"
               r"\Theta(T^{3/2})\text{ for fixed } c),\ \Theta(T)\ \text{(star; Longformer at fixed } w,g)",
               "derived", "limits count/T^{3/2} and count/T as T → ∞ (symbolic), with c, w, g constants in the derivation "
               "(c growing with s = √T changes the order: c = s gives T², e.g. 256, 10000, 160000 at T = 16, 100, 400)",
               ("derivation",)),
        Clause("bigbird", r"\text{BigBird}(w,g,r):\ \text{Longformer}(w,g)\le\text{count}\le\text{Longformer}(w,g)+rT",
               "checked", "w = g = 1, r = 2 random keys per query, T = 8, 15, …, < 60 (quick) / 200 (default), one random "
               "draw each", ("counts_vs_built_masks",)),
    ),
    source="lecture notes 002 (sparse transformers); Child et al. 2019; Guo et al. 2019; Beltagy et al. 2020; Zaheer et al. 2020; "
           "Yun et al., O(n) Connections are Expressive Enough (NeurIPS 2020)",
    kind="identity",
    form=dict(na.CONNECTION_COUNTS),
    derivation=ta.derive_sparse_counts,
    checks=(
        Check("counts_vs_derivation", "symbolic", _counts_symbolic, "closed forms vs SymPy summations over the mask definitions"),
        Check("counts_vs_built_masks", "numeric", _counts_masks, "closed forms vs the True entries of numerics/sparse.py's masks"),
    ),
    mutants=(
        Mutant("strided_quadratic", "wrong formula", "strided stride pattern counted as T² (dense)", _mut("strided_stride", lambda T: T * T)),
        Mutant("fixed_summary_no_diagonal", "dropped term", "fixed summary pattern without its self-loops (c T^{3/2} only)",
               _mut("fixed_summary", lambda T, c: c * T * math.isqrt(T))),
        Mutant("longformer_window_off_by_one", "wrong constant", "window counted as |i−j| < w (2w − 1 per row inside)",
               _mut("longformer", lambda T, w, g: na.CONNECTION_COUNTS["longformer"](T, w - 1, g))),
        Mutant("strided_local_exponent", "wrong constant", "local pattern counted as 2T^{3/2} (lower-order terms dropped)",
               _mut("strided_local", lambda T: 2 * T * math.isqrt(T))),
    ),
    notes="Counts are the True entries of each layer's mask (self-loops included). BigBird's random keys overlap the "
          "window and globals at random, so only its structural part (no random keys = the Longformer count with globals "
          "0..g−1) is an exact polynomial; with r random keys per query the count lies in [that, that + rT]. The "
          "Longformer polynomial was displayed without its size condition: at T = 3, w = 5, g = 1 it gives −3 while the "
          "mask has 9 entries; for T < g + w the count is g(2T − g) + (T − g)² (numerics.approx._longformer_count, "
          "checked as the derivation's other branches).",
)
