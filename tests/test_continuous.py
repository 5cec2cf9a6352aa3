"""Continuous mutants (``tverify mutants --continuous``): the form scaled by 1 ± 2ε, with ε the
best relative resolution of the claim's numeric or trained checks, is rejected."""

from __future__ import annotations

import json

from tests.cli_helpers import invoke


def test_continuous_mutants_confirm_the_resolution():
    # sparse.connectivity: exact counts, every relative resolution at float64 rounding (a cheap claim: the
    # skip path of a whole `mutants --continuous` run; the other skip reason is pinned below, in-process)
    code, out, _ = invoke("mutants", "icl.general_target_risk", "sparse.connectivity", "--quick", "--continuous",
                          "--json", "-", "--no-progress")
    doc = json.loads(out)
    row = doc["continuous"]["icl.general_target_risk"]
    assert row["rejected_at_2eps"] and 0 < row["epsilon"] < 0.25, row
    assert row["rows"]["+2eps"]["rejected_by"] and row["rows"]["-2eps"]["rejected_by"]
    assert "float64 rounding" in doc["continuous"]["sparse.connectivity"]["skipped"]
    assert code == 0


def test_a_claim_without_a_relative_resolution_is_skipped_with_the_reason():
    """Absolute tolerances only (as scale.param_counts' exact counts): nothing to scale against, said so."""
    from proofs_checks import Check, Claim, Mutant, RunContext, compare
    from proofs_checks.continuous import continuous_probe
    from proofs_checks.runner import run_claim

    claim = Claim(id="zz.absolute", title="t", statement="x = 1", source="test", kind="identity", form=1.0,
                  checks=(Check("c", "numeric", lambda form, ctx: compare(abs(form - 1.0), 1e-12, "exact")),),
                  mutants=(Mutant("m", "wrong constant", "2", 2.0),))
    ctx = RunContext(mode="quick", seed=0)
    res = run_claim(claim, ctx, with_derivation=False)
    assert res.status == "verified", res.message
    row = continuous_probe(claim, res, ctx)
    assert row == {"skipped": "no numeric or trained check states a two-sided relative resolution"}, row


def test_report_probe_runs_only_the_best_check_and_is_rendered():
    """`tverify report` confirms each claim's best relative resolution with that check alone, and the
    kill-summary page and report.md show the outcome."""
    from proofs_checks import RunContext
    from proofs_checks.continuous import continuous_probe
    from proofs_checks.output.html_report import _continuous_cell
    from proofs_checks.registry import select
    from proofs_checks.runner import run_claim

    (claim,) = select(["icl.general_target_risk"])
    ctx = RunContext(mode="quick", seed=0)
    row = continuous_probe(claim, run_claim(claim, ctx, with_derivation=False), ctx, only_best=True)
    assert row["rejected_at_2eps"] and row["rows"]["+2eps"]["rejected_by"] == [row["check"]], row
    assert "rejected (ε = " in _continuous_cell(row) and "not run" in _continuous_cell({"skipped": "x"})
