"""The kill matrix: every mutant against every check, against the old fail-fast run.

Run: ``.venv/bin/python -m benchmarks.bench_kill_matrix [--mode quick|default] [PATTERN ...]``
(or via ``python -m benchmarks.run kill_matrix``, quick mode over every claim).

Three runs of the same mutants, in one process, one after the other, each from a cold reference
cache (``clear_reference_cache``):

* **fail-fast** (the baseline, the behaviour before the kill matrix): checks cheapest layer first,
  stop at the first rejection;
* **full matrix, no reference cache**: every check on every mutant, each recomputing its
  form-independent reference (Monte Carlo samples, trained models, solver outputs);
* **full matrix, cached references** (what ``tverify mutants`` and ``make report`` do): the claim
  runs first (as in a report), so each mutant costs only its comparisons where a check declares
  its reference through ``ctx.reference``.

Prints a Markdown table with wall times and ratios against the fail-fast baseline.
"""

from __future__ import annotations

import argparse
import time

from proofs_checks import context as pc_context
from proofs_checks.context import RunContext, clear_reference_cache, reference_cache_info
from proofs_checks.registry import select
from proofs_checks.runner import run_claim, run_mutant


def _run(claims, mode: str, *, fail_fast: bool, claims_first: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    n_checks = 0
    for c in claims:
        if claims_first:
            run_claim(c, RunContext(mode=mode), with_derivation=False)
        for m in c.all_mutants():
            r = run_mutant(c, m, RunContext(mode=mode), fail_fast=fail_fast)
            n_checks += len(r.outcomes)
    return time.perf_counter() - t0, n_checks


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("quick", "default"), default="quick")
    ap.add_argument("patterns", nargs="*")
    a = ap.parse_args(argv if argv is not None else [])
    claims = select(a.patterns)
    n_mut = sum(len(c.all_mutants()) for c in claims)

    clear_reference_cache()
    t_ff, n_ff = _run(claims, a.mode, fail_fast=True, claims_first=False)

    clear_reference_cache()
    real = pc_context.RunContext.reference
    pc_context.RunContext.reference = lambda self, name, compute, *keys: compute()  # no cache
    try:
        t_nc, n_nc = _run(claims, a.mode, fail_fast=False, claims_first=False)
    finally:
        pc_context.RunContext.reference = real

    clear_reference_cache()
    t_claims0 = time.perf_counter()
    for c in claims:
        run_claim(c, RunContext(mode=a.mode), with_derivation=False)
    t_claims = time.perf_counter() - t_claims0
    t0 = time.perf_counter()
    n_full = 0
    for c in claims:
        for m in c.all_mutants():
            n_full += len(run_mutant(c, m, RunContext(mode=a.mode)).outcomes)
    t_full = time.perf_counter() - t0
    info = reference_cache_info()

    print(f"{len(claims)} claims, {n_mut} mutants, mode {a.mode}\n")
    print("| run | check runs | wall (s) | vs fail-fast |")
    print("|---|---:|---:|---:|")
    print(f"| fail-fast (baseline: cheapest layer first, stop at first rejection) | {n_ff} | {t_ff:.1f} | 1.00× |")
    print(f"| full matrix, no reference cache | {n_nc} | {t_nc:.1f} | {t_nc / t_ff:.2f}× |")
    print(f"| full matrix, cached references (after the claims ran: {t_claims:.1f} s) | {n_full} | {t_full:.1f} | {t_full / t_ff:.2f}× |")
    print(f"\nreference cache: {info['hits']} hits, {info['misses']} misses")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
