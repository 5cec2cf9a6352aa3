"""A verification must not hinge on one lucky seed: every claim at further base seeds.

tests/test_registry.py runs each claim at base seed 0; here the same claims run at base seeds
1 and 3 (quick sizes; seed 2 too under the thorough profile). Theorem/identity/erratum claims must verify at each seed. Evidence and
conjecture claims must run without error; whether they *support* the claim at a given seed is
reported, not asserted (that is what makes them evidence); they run here only under the thorough
profile (see CASES).

Seeds 1 and 3 are where a sweep over 0–13 first found seed-dependent tolerances (Att-SVM
regularisation path, FAVOR+ MSE standard error); they stay here as regression seeds.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.integration(reason="the claims at further seeds than make test runs")

from proofs_checks import RunContext
from proofs_checks.registry import select
from proofs_checks.runner import run_claim

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
# 1 and 3 are the regression seeds (below); seed 2 only under the thorough profile, which keeps
# `make test` within its budget (the statistical checks' false-failure rates over 200 seeds are
# measured by benchmarks/bench_flakiness.py, not here).
SEEDS = (1, 2, 3) if THOROUGH else (1, 3)
# Evidence claims only have to run cleanly (their support is reported, not asserted), which their
# seed-0 run in tests/test_registry.py already shows; several train transformers (10-25 s each at
# quick sizes), so `make test` leaves their other seeds to the thorough profile
# (HYPOTHESIS_PROFILE=thorough), where they run at one extra seed.
CASES = [(c, s) for c in select() for s in ((SEEDS[:1] if THOROUGH else ()) if c.is_evidence else SEEDS)]


@pytest.mark.parametrize("claim,seed", CASES, ids=[f"{c.id}@seed{s}" for c, s in CASES])
def test_claim_at_other_seeds(claim, seed):
    res = run_claim(claim, RunContext(mode="quick", seed=seed), with_derivation=False)
    detail = "; ".join(f"{o.name}: {o.status} {o.error_message or ''}"
                       f"{(o.result.error, o.result.tolerance) if o.result else ''}" for o in res.checks)
    if claim.is_evidence:
        assert res.status == "evidence", f"{claim.id} at seed {seed}: {res.status} ({res.message}) [{detail}]"
    else:
        assert res.status == "verified", f"{claim.id} at seed {seed}: {res.status} ({res.message}) [{detail}]"
