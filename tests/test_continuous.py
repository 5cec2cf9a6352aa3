"""Continuous mutants (``tverify mutants --continuous``): the form scaled by 1 ± 2ε, with ε the
best relative resolution of the claim's numeric or trained checks, is rejected."""

from __future__ import annotations

import json

from tests.cli_helpers import invoke


def test_continuous_mutants_confirm_the_resolution():
    code, out, _ = invoke("mutants", "icl.general_target_risk", "attn.softmax_simplex", "--quick", "--continuous",
                          "--json", "-", "--no-progress")
    doc = json.loads(out)
    row = doc["continuous"]["icl.general_target_risk"]
    assert row["rejected_at_2eps"] and 0 < row["epsilon"] < 0.25, row
    assert row["rows"]["+2eps"]["rejected_by"] and row["rows"]["-2eps"]["rejected_by"]
    assert "skipped" in doc["continuous"]["attn.softmax_simplex"]  # its resolutions are not relative
    assert code == 0
