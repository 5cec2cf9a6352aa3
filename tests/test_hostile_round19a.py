"""Hostile pass 13 (tester a): its finding, fixed after the pass (tverify's own theory/ and numerics/ refused as outputs)."""

from pathlib import Path

import pytest

import numerics
import theory
from proofs_checks.store import own_installation


@pytest.mark.parametrize("package", [theory, numerics])
def test_store_inside_sibling_package_is_own_code(package):
    inside = Path(package.__file__).resolve().parent / "last"
    assert own_installation(inside, holding=False) is not None
