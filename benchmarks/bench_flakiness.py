"""False failures of the statistical checks, measured: every check that tests an estimate against its
reference in standard errors (``comparisons.z_test``, ``comparisons.seed_spread``) states, in
``details["false_failure_probability"]``, the probability that the *correct* form fails it on a fresh
draw (union bound over its entries; normal for Monte Carlo means, Student t over seeds). This
benchmark re-runs those checks on the claims' own forms at ``R`` base seeds (1 … R, quick sizes) and
counts failures, beside the stated probability and the 95 % Clopper–Pearson upper limit of the
observed rate (3.7/R with no failure at R = 200 … so R runs can only show gross miscalibration; the
1e-4 target rests on the stated computation, which this measurement must not contradict).

``make test`` itself makes fixed draws (seed 0 for the claims, derandomized hypothesis profiles), so
its false-failure probability per run is 0 on a given platform: the rate here is what a user running
``tverify run --seed N`` meets.

Run: ``python -m benchmarks.bench_flakiness [--runs 200] [--max-seconds 2]``; checks slower than
``--max-seconds`` per run at quick sizes (the trained ones) run ``--slow-runs`` times (default 10).
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time

from proofs_checks import RunContext
from proofs_checks.registry import select
from proofs_checks.runner import run_check


def _cp_upper(failures: int, n: int, conf: float = 0.95) -> float:
    """One-sided Clopper–Pearson upper limit of a binomial rate."""
    if failures >= n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(conf, failures + 1, n - failures))


def statistical_checks(seed: int = 0):
    """(claim, check, seconds, stated union bound) for every check whose result states a false-failure
    probability, found by running each claim's checks once at ``seed``."""
    out = []
    for claim in select():
        for check in claim.checks:
            t0 = time.perf_counter()
            o = run_check(claim, check, claim.form, RunContext(mode="quick", seed=seed))
            dt = time.perf_counter() - t0
            ffp = (o.result.details.get("false_failure_probability") if o.result else None)
            if ffp:
                out.append((claim, check, dt, float(ffp["union_bound"]), ffp["model"]))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--slow-runs", type=int, default=10)
    ap.add_argument("--max-seconds", type=float, default=2.0)
    a = ap.parse_args(argv if argv is not None else [])
    found = statistical_checks()
    print("| claim | check | stated P(false failure) per run | model | runs | failures | 95% upper limit | s/run |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    total_stated = 0.0
    for claim, check, dt, stated, model in found:
        runs = a.runs if dt <= a.max_seconds else a.slow_runs
        fails, t0 = 0, time.perf_counter()
        for s in range(1, runs + 1):
            o = run_check(claim, check, claim.form, RunContext(mode="quick", seed=s))
            fails += o.status != "passed"
        per = (time.perf_counter() - t0) / runs
        total_stated += stated
        print(f"| {claim.id} | {check.name} | {stated:.2g} | {model.split(',')[0]} | {runs} | {fails} | "
              f"{_cp_upper(fails, runs):.2g} | {per:.2f} |", flush=True)
    print(f"\nSum of the stated probabilities over these {len(found)} checks (one `tverify run` at a fresh "
          f"seed, union bound): {total_stated:.2g}.")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
