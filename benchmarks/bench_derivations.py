"""Every claim's derivation (steps and obligations, as ``tverify run`` uses it): cold against cached.

Run: ``.venv/bin/python -m benchmarks.bench_derivations`` (or ``python -m benchmarks.run derivations``).
Prints a Markdown table, one row per claim with a derivation: the seconds to build the derivation and
decide its obligations from scratch (``TVERIFY_DERIVATION_CACHE=0``, SymPy's cache cleared first), the
seconds to read it from a fresh ``docs/catalogue.json`` (cached by source fingerprint), and their
ratio — measured in the same run. The cached column needs the catalogue to be current
(``make catalogue``); otherwise it says so and only the cold column is measured.
"""

from __future__ import annotations

import os
import time

from sympy.core.cache import clear_cache


def main() -> None:
    from proofs_checks import fingerprint
    from proofs_checks.registry import select
    from proofs_checks.runner import derivation_info

    claims = [c for c in select([]) if c.derivation is not None]
    fresh = bool(fingerprint._fresh_derivations())
    print("| claim | steps | cold s | cached s | cold / cached |")
    print("|---|---:|---:|---:|---:|")
    total_cold = total_cached = 0.0
    for c in claims:
        os.environ["TVERIFY_DERIVATION_CACHE"] = "0"
        clear_cache()
        t0 = time.perf_counter()
        info = derivation_info(c)
        cold = time.perf_counter() - t0
        os.environ["TVERIFY_DERIVATION_CACHE"] = "1"
        cached = float("nan")
        if fresh:
            t0 = time.perf_counter()
            hit = derivation_info(c)
            cached = time.perf_counter() - t0 if hit.get("cached") else float("nan")
        total_cold += cold
        total_cached += cached if cached == cached else 0.0
        ratio = f"{cold / cached:.0f}×" if cached == cached and cached > 0 else "–"
        print(f"| {c.id} | {len(info['steps'])} | {cold:.2f} | {'–' if cached != cached else f'{cached:.4f}'} | {ratio} |")
    print(f"| **all {len(claims)}** | | {total_cold:.1f} | {total_cached:.3f} | "
          f"{(f'{total_cold / total_cached:.0f}×' if total_cached else '–')} |")
    if not fresh:
        print("\n(docs/catalogue.json is not current: `make catalogue` first to measure the cached column)")


if __name__ == "__main__":
    main()
