"""Hostile pass 37, tester B: reproducers (each xfails on the frozen code, strict)."""

import pytest

# --- 37B F1: the power rule's "every output 0 only where it is read" guard, escaped by inputs it cannot nudge -------


def _three_x_read_at_zero(points, form):
    import numpy as np
    import sympy as sp
    from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, compare, numeric, symbolic

    def derive():
        b = DerivationBuilder("2x")
        a = b.fact("args", (sp.Symbol("x", real=True),))
        return b.done(b.step("double", 2 * a[0]))

    def err(f):
        return max(float(np.max(np.abs(np.asarray(f(x), float) - 2 * np.asarray(x, float)))) for x in points)

    @symbolic("at x = 0")
    def sym(f, ctx):
        return compare(err(f), 1e-12, "float64 rounding")

    @numeric("at x = 0")
    def num(f, ctx):
        return compare(err(f), 1e-12, "float64 rounding")

    return Claim(id="mine.threex", title="3x = 2x", statement="3x = 2x", source="none", kind="identity", form=form,
                 derivation=derive, checks=(sym, num),
                 mutants=(Mutant("plus1", "extra term", "x+1", lambda x: form(x) + 1),))


def test_37b_f1_false_identity_read_at_zero_lists_is_not_verified():
    import numpy as np
    from proofs_checks.plugin import check_claim

    r = check_claim(_three_x_read_at_zero([[0.0], [0.0, 0.0]], lambda x: 3.0 * np.asarray(x, float)))
    assert r.status != "verified", r.message


def test_37b_f1_false_identity_read_at_zero_int_tensors_is_not_verified():
    import numpy as np
    import torch
    from proofs_checks.plugin import check_claim

    r = check_claim(_three_x_read_at_zero([torch.tensor(0), torch.zeros(3, dtype=torch.long)],
                                          lambda x: 3.0 * np.asarray(x, float)))
    assert r.status != "verified", r.message


def test_nudged_inputs_keep_their_kind_and_move_every_number():
    """The unit of 37b F1: lists and tuples (ragged, nested, mixed with text) and integer or boolean tensors are nudged;
    what holds no number is not."""
    import numpy as np
    import torch

    from proofs_checks.scaling import _nudged

    assert _nudged([0.0, 0.0]) == [0.001, 0.001] and _nudged((0, 1)) == (0.001, 1.002)
    ragged = _nudged([[0.0], [0.0, 2.0], "name"])
    assert ragged[0] == [0.001] and ragged[1] == [0.001, 2.003] and ragged[2] == "name"
    assert _nudged(("a", "b")) is None and _nudged([]) is None and _nudged(True) is None
    t = _nudged(torch.zeros(3, dtype=torch.long))
    assert t.dtype == torch.float64 and bool((t == 0.001).all())
    assert bool((_nudged(torch.tensor([True, False])) == torch.tensor([1.002, 0.001], dtype=torch.float64)).all())
    assert np.allclose(_nudged(np.zeros(2, dtype=bool)), 0.001)
    deep: list = [0.0]
    for _ in range(10**4):
        deep = [deep]
    from proofs_checks.scaling import _nonzero_near
    assert _nonzero_near(lambda x: 0.0, (deep,), {}) is False  # nested past the interpreter's depth: no nudge, no error


def test_numbers_of_every_kind_are_nudged():
    import fractions

    import sympy as sp

    from proofs_checks.scaling import _nudged

    assert _nudged(0) == 0.001 and _nudged(0j) == 0.001 and _nudged(fractions.Fraction(0)) == 0.001
    assert _nudged(sp.Integer(0)) == 0.001 and _nudged(sp.Symbol("x")) is None and _nudged(False) is None
