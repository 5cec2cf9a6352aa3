"""``moved(reason, *pinned_by)``: the mark of a test moved out of ``make test`` for its time (issue 46), the
``integration`` mark with its reason and the faster tests of ``make test`` that pin what it re-verifies
(tests/test_tiers.py checks them)."""

from __future__ import annotations

import pytest


def moved(reason: str, *pinned_by: str):
    return pytest.mark.integration(reason=reason, pinned_by=tuple(pinned_by))
