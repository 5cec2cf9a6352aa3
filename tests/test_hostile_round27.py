"""Hostile pass 21 and the notes of pass 20, fixed: the lead's tests (the testers' reproducers are in
test_hostile_round27a/b.py)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv, named", [
    (["check", "attention", "--module", "m.py:A", "--scale", "1e-400"], "--scale 1e-400"),
    (["check", "hopfield", "--patterns", "P.npy", "--beta=2.5e-999"], "--beta=2.5e-999"),
])
def test_a_non_zero_number_below_float64s_range_is_named_not_read_as_zero(capsys, argv, named):
    """Pass 20 note: ``--scale 1e-400`` was refused as "got 0.0", a number the user never wrote."""
    from proofs_checks.cli import _main

    with pytest.raises(SystemExit) as e:
        _main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(f"tverify: error: {named}: the number is below a float64's range"), err
    assert "got 0.0" not in err


def test_a_written_zero_is_still_read_as_zero():
    from proofs_checks.cli import _underflowing_number

    assert _underflowing_number(["--scale", "0.0e-400", "--seed", "0", "--tol", "0e5"]) is None
