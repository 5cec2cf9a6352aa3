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
