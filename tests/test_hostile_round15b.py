"""Hostile pass 10 (tester b): regressions for its findings (docs/extending.md: the comparison helpers)."""

import numpy as np
import pytest

from proofs_checks import compare, worst
from proofs_checks.comparisons import close, exact, relative, seed_spread, z_test


# F1: the comparison helpers read text as numbers (worst('123') was 3.0, relative('12', '12', …) passed,
# compare(worst(['0']), 0.1, …) passed), where compare() itself refuses text: never reinterpreted.
@pytest.mark.parametrize("call", [
    lambda: worst("123"),
    lambda: worst(["0.5", 2.0]),
    lambda: worst({"a": "9"}),
    lambda: worst([np.array(["1", "2"])]),
    lambda: relative("12", "12", 0.1, "j"),
    lambda: relative([1.0, 2.0], ["1", "2"], 0.1, "j"),
    lambda: close("1", "1", 0.1, "j"),
    lambda: close([1.0], [1.0], "0.1", "j"),
    lambda: seed_spread(["1", "1.0"], "1"),
    lambda: seed_spread([[1.0], [1.0]], ["1"]),
    lambda: exact("0", "j"),
    lambda: exact({"a": "0"}, "j"),
    lambda: z_test({"a": ("1", "1", "0.1")}),
])
def test_comparison_helpers_refuse_text(call):
    with pytest.raises(TypeError, match="text"):
        call()


def test_comparison_helpers_still_take_numbers():
    assert worst([np.float64(0.5), 2, np.array([1.0, 3.0])]) == 3.0
    assert worst({"a": 1, "b": [0.5, 0.25]}) == 1.0
    assert relative([1.0, 2.0], (1.0, 2.0), 1e-12, "j").passed
    assert close(np.array([1.0]), [1.0], np.array([0.1]), "j").passed
    assert seed_spread(iter([[1.0], [1.02], [0.98]]), [1.0], floor=1e-3).passed
    assert exact({"count": 0, "ok": False}, "j").passed
    assert z_test({"a": (1.0, 0.1, 1.0)}).passed
    assert not compare(worst([0.5]), 0.1, "j").passed
