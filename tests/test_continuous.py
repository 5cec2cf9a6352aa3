"""Continuous mutants (``tverify mutants --continuous``): the form scaled by 1 ± 2ε, with ε the
best relative resolution of the claim's numeric or trained checks, is rejected."""

from __future__ import annotations

import json

from tests.cli_helpers import invoke


def test_continuous_mutants_confirm_the_resolution():
    code, out, _ = invoke("mutants", "icl.general_target_risk", "scale.param_counts", "--quick", "--continuous",
                          "--json", "-", "--no-progress")
    doc = json.loads(out)
    row = doc["continuous"]["icl.general_target_risk"]
    assert row["rejected_at_2eps"] and 0 < row["epsilon"] < 0.25, row
    assert row["rows"]["+2eps"]["rejected_by"] and row["rows"]["-2eps"]["rejected_by"]
    assert "skipped" in doc["continuous"]["scale.param_counts"]  # exact counts: no relative resolution
    assert code == 0


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
