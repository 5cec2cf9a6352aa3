"""Symbolic-size layer (theory.sizes, theory.gaussian): cold time of each derivation.

Run: ``.venv/bin/python -m benchmarks.bench_symbolic`` (or ``python -m benchmarks.run symbolic``).
Prints a Markdown table. "Cold": every ``lru_cache`` of theory.sizes / theory.gaussian (and, for
the baselines, of theory.icl) and SymPy's own cache are cleared before each timing, so a
derivation pays for everything it builds on. Also timed: evaluating its obligations, and one
instantiation of the result at an explicit size. Baselines measured in the same run: the
fixed-size Wick derivations of theory.icl (``derive_wishart(d)``, ``derive_population_loss(d)``
at d = 2, 3), which the symbolic-d results replace.
"""

from __future__ import annotations

import inspect
import time

import sympy as sp
from sympy.core.cache import clear_cache

from theory import gaussian as tg
from theory import sizes as tz


def _clear(*mods) -> None:
    clear_cache()
    for mod in mods:
        for _, f in inspect.getmembers(mod):
            if hasattr(f, "cache_clear"):
                f.cache_clear()


def _mods():
    mods = [tz, tg]
    try:
        from theory import icl as ti
        mods.append(ti)
    except Exception:  # pragma: no cover - the baseline module is optional here
        pass
    return mods


def _cold(f):
    """(result, wall seconds, CPU seconds) of a cold call; CPU time is the steadier number on a
    shared machine."""
    _clear(*_mods())
    t0, c0 = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - t0, time.process_time() - c0


def _obligations(D) -> tuple[str, float]:
    t0 = time.perf_counter()
    res = D.check_obligations()
    secs = time.perf_counter() - t0
    return f"{sum(r.passed for r in res)}/{len(res)} hold", secs


def main() -> None:
    d, N = sp.symbols("d N", integer=True, positive=True)
    L, A, B = (sp.MatrixSymbol(n, d, d) for n in ("Lambda", "A", "B"))
    rows = []
    derivs = [
        ("sizes.derive_softmax_sum (symbolic T)", tz.derive_softmax_sum),
        ("sizes.derive_softmax_jacobian (symbolic T)", tz.derive_softmax_jacobian),
        ("sizes.derive_convex_combination (symbolic T)", tz.derive_convex_combination),
        ("sizes.derive_multihead_concat (3 heads, symbolic widths)", lambda: tz.derive_multihead_concat(3)),
        ("sizes.derive_lora_rank_bound (symbolic m, n, r)", tz.derive_lora_rank_bound),
        ("sizes.derive_gd_step (symbolic d, N)", tz.derive_gd_step),
        ("gaussian.derive_wishart_sandwich (symbolic d, N)", tg.derive_wishart_sandwich),
        ("gaussian.derive_zfb_loss (symbolic d, N; loss, gradient, B*)", tg.derive_zfb_loss),
    ]
    for name, f in derivs:
        D, secs, cpu = _cold(f)
        status, osecs = _obligations(D)
        rows.append((name, secs, cpu, f"obligations {status} in {osecs:.2f} s"))
    funcs = [
        ("gaussian.second_moment", lambda: tg.second_moment(L)),
        ("gaussian.fourth_moment_sandwich", lambda: tg.fourth_moment_sandwich(L, A)),
        ("gaussian.quadratic_forms_moment", lambda: tg.quadratic_forms_moment(L, A, B)),
        ("gaussian.wishart_sandwich", lambda: tg.wishart_sandwich(L, A, N)),
        ("gaussian.zfb_moments", lambda: tg.zfb_moments(L, N)),
        ("gaussian.zfb_population_loss", lambda: tg.zfb_population_loss(L, B, N)),
        ("gaussian.zfb_loss_gradient", lambda: tg.zfb_loss_gradient(L, B, N)),
    ]
    for name, f in funcs:
        _, secs, cpu = _cold(f)
        rows.append((name + " (symbolic d)", secs, cpu, ""))
    # instantiation of a symbolic-d result at explicit d (symbolic entries)
    for dim in (2, 4):
        expr = tg.quadratic_forms_moment(L, A, B)
        vals = {n: sp.Matrix(dim, dim, lambda i, j, n=n: sp.Symbol(f"{n}_{min(i, j)}{max(i, j)}" if n == "Lambda"
                                                                    else f"{n}_{i}{j}")) for n in ("Lambda", "A", "B")}
        t0, c0 = time.perf_counter(), time.process_time()
        tz.instantiate(expr, {d: dim}, vals)
        rows.append((f"instantiate E[(xᵀAx)(xᵀBx)] at d = {dim} (symbolic entries)", time.perf_counter() - t0,
                     time.process_time() - c0, ""))
    base = []
    try:
        from theory import icl as ti
        for dim in (2, 3):
            for name, f in ((f"icl.derive_wishart({dim}) (fixed d, Wick sums)", lambda: ti.derive_wishart(dim)),
                            (f"icl.derive_population_loss({dim}) (fixed d)", lambda: ti.derive_population_loss(dim))):
                _, secs, cpu = _cold(f)
                base.append((name, secs, cpu))
    except Exception as e:  # pragma: no cover - icl is edited elsewhere; the table still prints
        base.append((f"baseline unavailable: {type(e).__name__}", float("nan"), float("nan")))
    print("| derivation / function (cold) | wall s | CPU s | notes |")
    print("|---|---:|---:|---|")
    for name, secs, cpu, note in rows:
        print(f"| {name} | {secs:.3f} | {cpu:.3f} | {note} |")
    print()
    print("| baseline (same run, cold) | wall s | CPU s |")
    print("|---|---:|---:|")
    for name, secs, cpu in base:
        print(f"| {name} | {secs:.3f} | {cpu:.3f} |")
    w = next((c for n, _, c, _ in rows if n.startswith("gaussian.derive_wishart")), float("nan"))
    b3 = next((c for n, _, c in base if n.startswith("icl.derive_wishart(3)")), float("nan"))
    if b3 == b3 and w == w:
        print(f"\nsymbolic-d Wishart derivation / fixed d = 3 Wick derivation (CPU): {w / b3:.2f}×")


if __name__ == "__main__":
    main()
