"""Hostile pass 6 (issue 44's acceptance): each finding fixed here, reproduced as a test."""

from __future__ import annotations

import pytest

from proofs_checks.runner import STATUSES
from proofs_checks.store import RESULT_STATUSES, StoreEntryError, validate_entry


def test_f1_every_status_run_stores_is_one_show_reads():
    """`TVERIFY_DERIVATION_BUDGET=0.000001 tverify run attn.softmax_simplex` stored status 'undecided';
    `show` then warned the entry 'has status undecided, not one of verified, …' and skipped the last
    result: the store's reader refused what its writer wrote."""
    assert set(STATUSES) == set(RESULT_STATUSES)
    for status in STATUSES:
        assert validate_entry({"id": "a.b", "status": status}, "a.b")["status"] == status


def test_f1_a_status_nobody_writes_is_still_refused():
    with pytest.raises(StoreEntryError, match="not one of"):
        validate_entry({"id": "a.b", "status": "proven"}, "a.b")


@pytest.mark.parametrize("args", [("1", 2.0), (1.0, "2"), ({"a": "0.5"}, 1.0), (b"1", 2.0)])
def test_f3_compare_refuses_text_for_a_number(args):
    """`compare('1', 2, 'x')` passed (error 1.0 read from the text '1'): a check's error or tolerance
    given as text was silently reinterpreted as a number."""
    from proofs_checks import compare

    with pytest.raises(TypeError, match="must be a number, got text"):
        compare(*args, "x")


@pytest.mark.parametrize("command", [("show", "attn.causal_mask"), ("list",)])
def test_a_bad_derivation_budget_is_refused_where_claims_are_listed_or_shown(monkeypatch, command):
    """Hostile pass 6 note: ``show`` from the cached catalogue took TVERIFY_DERIVATION_BUDGET=-5 that ``run``
    refused; the budget is now read at the same edge as the other variables of loading claims."""
    from tests.cli_helpers import invoke

    monkeypatch.setenv("TVERIFY_DERIVATION_BUDGET", "-5")
    code, out, err = invoke(*command)
    assert code == 2 and "TVERIFY_DERIVATION_BUDGET" in err and len(err.strip().splitlines()) == 1, (code, err)


@pytest.mark.parametrize("args", [("check", "lyapunov", "--f", "-x,-y", "--V", "x**2+y**2", "--report", "-"),
                                  ("report", "attn.causal_mask", "--quick", "--out", "-")])
def test_a_report_folder_named_dash_is_refused(tmp_path, monkeypatch, args):
    """Hostile pass 7 note: ``--report -`` wrote a folder named '-' where ``--json -`` means standard output."""
    from tests.cli_helpers import invoke

    monkeypatch.chdir(tmp_path)
    code, out, err = invoke(*args)
    assert code == 2 and "not standard output" in err and len(err.strip().splitlines()) == 1, (code, err)
    assert not (tmp_path / "-").exists()


def test_compare_of_an_array_says_which_call():
    import numpy as np

    from proofs_checks.registry import compare

    with pytest.raises(TypeError, match="compare: the error and the tolerance are numbers"):
        compare(np.array([1.0, 2.0]), 1.0, "x")
