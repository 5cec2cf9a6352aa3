"""Hostile pass 56, tester B: reproducers, each failing on ebb8a8b (run there as xfail, strict)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from tests.test_hostile_round53a import _tv  # the private environment and `python -m proofs_checks` of 53a


def _double(check, *, title: str = "2x = x + x", name: str = "zz56b.double"):
    """A notebook claim `2x = x + x` (one numeric check ``check``, one mutant 3x), not registered."""
    from proofs_checks.plugin import Claim, Mutant

    return Claim(id=name, title=title, statement="2x = x + x", source="arithmetic", kind="identity",
                 form=lambda x: 2 * x, checks=(check,), no_symbolic="arithmetic",
                 mutants=(Mutant("triple", "wrong constant", "3x", lambda x: 3 * x),))


# 56b-1: a check returning rounding(err, 10, c=-1) (or n < 0) makes the claim `error` with "check ... cannot reject
# anything: rounding: n = 10, c = -1: a tolerance needs a finite operation count": n and c are finite, and a negative
# tolerance rejects everything, the opposite of what the line says.
@pytest.mark.parametrize("n, c", [(10, -1.0), (-10, 64.0)])
def test_f1_a_negative_rounding_tolerance_is_not_called_unable_to_reject(n, c):
    import proofs_checks as pc
    from proofs_checks.plugin import numeric, rounding

    @numeric("2x against x + x, rounding with a negative count or constant")
    def negative(form, ctx):
        x = ctx.rng().standard_normal(50)
        return rounding(np.max(np.abs(form(x) - (x + x))), n, c=c)

    r = pc.check_claim(_double(negative))
    assert r.status == "error", r.message
    assert "finite operation count" not in r.message and "cannot reject anything" not in r.message, r.message


# 56b-2: the registry refuses a title with "\n" ("a title is one line", extending.md) but accepts one holding
# U+2028 LINE SEPARATOR or U+2029 PARAGRAPH SEPARATOR, which `list` and `show` print raw.
@pytest.mark.parametrize("sep", ["\u2028", "\u2029"])
def test_f2_a_title_with_a_unicode_line_break_is_refused(sep):
    from proofs_checks.plugin import numeric
    from proofs_checks.registry import RegistryError

    @numeric("unused")
    def unused(form, ctx):
        raise AssertionError("not run")

    with pytest.raises(RegistryError, match="one line"):
        _double(unused, title=f"first line{sep}second line").validate()


# 56b-3: any pickle given as --weights FILE.pt is called "in torch.save's legacy (non-zip) format", with the advice
# torch.save(torch.load(FILE, weights_only=True), FILE) — which fails on a file torch.save never wrote.
def test_f3_a_plain_pickle_is_not_called_a_legacy_torch_file(tmp_path):
    with open(tmp_path / "plain.pt", "wb") as f:
        pickle.dump({"W_PV": [[1.0, 0.0], [0.0, 1.0]], "W_KQ": [[1.0, 0.0], [0.0, 1.0]]}, f)
    r = _tv(tmp_path, "check", "icl", "--lambda", "1,2", "--N", "5", "--weights", "plain.pt", "--quick",
            "--no-progress")
    assert r.returncode == 2, r.stderr
    assert "legacy" not in r.stderr, r.stderr


# 56b-4: a coefficient past float64 on the large side once expanded is refused (exit 2, "rescale the system"); one
# below its range once expanded (1e-300·1e-300 = 1e-600, read as 0 by the SOS solver) is "inconclusive" (exit 3) with
# advice (--region, a smaller --eps, a V of higher degree) that cannot help. cli.md: "a non-zero one below its range
# (1e-400, which would read as 0), is one line saying so, exit 2; in check lyapunov, so is a coefficient of f, V or
# ∇V·f past float64 once expanded".
@pytest.mark.parametrize("f, V", [("-x*1e-300*1e-300", "x**2"), ("-x", "x**2*1e-200*1e-200")])
def test_f4_a_coefficient_below_float64_once_expanded_is_refused(tmp_path, f, V):
    r = _tv(tmp_path, "check", "lyapunov", "--f", f, "--V", V, "--vars", "x", "--no-progress")
    assert r.returncode == 2, (r.returncode, r.stdout[-800:], r.stderr[-800:])
