"""Hostile pass 13 (tester a): findings left open, pinned as strict xfails."""

from pathlib import Path

import pytest

import numerics
import theory
from proofs_checks.store import own_installation


@pytest.mark.xfail(strict=True, reason="hostile 13a F1: own_installation() lists proofs_checks/ only; "
                   "tverify's sibling packages theory/ and numerics/ (its own code in an editable install) "
                   "are accepted as --store/--json/--out/new-claim --dir targets")
@pytest.mark.parametrize("package", [theory, numerics])
def test_store_inside_sibling_package_is_own_code(package):
    inside = Path(package.__file__).resolve().parent / "last"
    assert own_installation(inside, holding=False) is not None
