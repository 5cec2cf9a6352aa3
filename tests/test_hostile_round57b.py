"""Hostile pass 57, tester B: reproducers, each failing on a755dd5 (run there as xfail, strict)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_hostile_round53a import _tv  # the private environment and `python -m proofs_checks` of 53a


def _true_claim(form, check, *, name: str = "zz57b.claim"):
    """A true notebook identity with the one numeric check ``check`` and a mutant 5x of ``form``, not registered."""
    from proofs_checks.plugin import Claim, Mutant

    return Claim(id=name, title="a true identity", statement="f(x) = f(x)", source="arithmetic", kind="identity",
                 form=form, checks=(check,), no_symbolic="arithmetic",
                 mutants=(Mutant("five", "wrong constant", "5/3 of the form", lambda *a: [5 * v // 3 for v in form(*a)]),))


# 57b-1: a form whose outputs are Python ints past int64 (exact big integers, which Python keeps exact): the power
# rule's own perturbation (proofs_checks/scaling.py `_Rule.ints`, "a Python int of any size stays exact") raises
# OverflowError, and the true claim is `error` with "its checks accept the form multiplied by 2 and by 1/2 ... c crashed
# on it": the check accepted nothing and did not crash; tverify's wrapper did.
def test_1_a_true_claim_on_integers_past_int64_is_not_called_an_error_in_its_checks():
    import proofs_checks as pc
    from proofs_checks.plugin import exact, numeric

    form = lambda xs: [3 * int(x) * 10**19 for x in xs]  # noqa: E731 - the claimed closed form

    @numeric("3x·10^19 against its exact value")
    def exact_big(form, ctx):
        xs = [1, 2, 3, 4]
        return exact(sum(int(v != 3 * x * 10**19) for v, x in zip(form(xs), xs)), "mismatches")

    r = pc.check_claim(_true_claim(form, exact_big))
    assert "crashed" not in r.message and "accept the form multiplied by 2" not in r.message, r.message


# 57b-2: `sweep --out ''` (an empty path, e.g. `--out "$DIR"` with DIR unset) runs the whole sweep and writes it to the
# default ./sweep (exit 3 here), where `report --out ''`, `reproduce --out ''` and `check ... --report ''` are refused
# with "--out: empty path" (exit 2); sweep's --help: "--out DIR ... the rules of `tverify report --out`".
def test_2_sweep_refuses_an_empty_out_path_as_report_does(tmp_path):
    r = _tv(tmp_path, "sweep", "check", "icl", "--grid", "N=5", "--quick", "--no-progress", "--out", "")
    assert r.returncode == 2 and "empty path" in r.stderr, (r.returncode, r.stderr[-600:])
    assert not (tmp_path / "sweep").exists()


def test_2b_list_refuses_an_empty_docs_dir(tmp_path):
    """Found with 57b F3: ``list --markdown --docs-dir ''`` read the empty path as no --docs-dir and rewrote the
    checkout's own docs/catalogue.json."""
    r = _tv(tmp_path, "list", "--markdown", "--docs-dir", "")
    assert r.returncode == 2 and "--docs-dir: empty path" in r.stderr, (r.returncode, r.stderr[-600:])


# 57b-3: the committed docs/catalogue.json holds the fingerprint of the sources at 63795b1, not of this commit's
# (registry.py, theory/lyapunov.py ... changed in 244ed33 without `make catalogue`): `list`/`show` never read it
# (cli.md: "read the JSON while it matches the sources ... answering in about 0.1 s without importing torch") and load
# the registry instead: 3.0-3.4 s for `tverify list icl.gamma_n_global_min` on a fresh store, measured.
def test_3_the_committed_catalogue_matches_the_sources():
    import json
    from pathlib import Path

    from proofs_checks.fingerprint import source_fingerprint

    doc = json.loads((Path(__file__).resolve().parents[1] / "docs" / "catalogue.json").read_text())
    assert doc["fingerprint"] == source_fingerprint(plugins=False)


# 57b-4: `check hopfield --beta 1e300` on patterns of norm 3.17 is refused with "β·M² = 1e+301 leaves float64's range
# (above 1e300), so the modern update itself would overflow": 1e301 is inside float64's range (up to 1.8e308), and the
# update Xᵀsoftmax(βXξ) and the energy −lse(βXξ)/β + ½ξᵀξ at that β compute finite values in float64 (measured:
# retrieval exact, energy -1.73). A refusal may stand; its reason must be true.
def test_4_a_beta_refusal_does_not_say_a_float64_number_leaves_float64s_range(tmp_path):
    np.save(tmp_path / "P.npy", np.random.default_rng(0).standard_normal((5, 8)))
    r = _tv(tmp_path, "check", "hopfield", "--patterns", "P.npy", "--beta", "1e300", "--quick", "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "leaves float64's range" not in r.stderr and "would overflow" not in r.stderr, r.stderr[-600:]


# 57b-5: 56b-1 fixed rounding() alone: close(tol=-1) (one or per draw), z_test(k=-1) and seed_spread(floor=-1) still make
# the claim `error` with "check c cannot reject anything: close: tolerance -1: ..." (seed_spread: "floor = -1: a
# tolerance must be finite"): a negative tolerance rejects everything, the opposite of what the line says, and -1 is
# finite. extending.md "No vacuous verdicts" lists what cannot reject anything; a negative tolerance is not among them.
# (pass 58, known beforehand: compare() and relative() read a negative tolerance as a failed check, "refuted" with no
# evidence, where the others raised: now every helper raises the one error, registry.negative_tolerance)
@pytest.mark.parametrize("helper", ["close", "close_per_draw", "z_test", "seed_spread", "compare", "relative"])
def test_5_a_negative_tolerance_is_not_called_unable_to_reject(helper):
    import proofs_checks as pc
    from proofs_checks.plugin import close, compare as bare, numeric, relative, seed_spread, z_test

    x = np.arange(1.0, 6.0)
    compare = {
        "compare": lambda v: bare(float(np.max(np.abs(v - 3 * x))), -1.0, "a negative tolerance"),
        "relative": lambda v: relative(v, 3 * x, -0.1, "a negative tolerance"),
        "close": lambda v: close(v, 3 * x, -1.0, "a negative tolerance"),
        "close_per_draw": lambda v: close(v, 3 * x, -np.ones(5), "negative tolerances"),
        "z_test": lambda v: z_test({f"e{i}": (v[i], 0.1, 3 * x[i]) for i in range(5)}, k=-1.0),
        "seed_spread": lambda v: seed_spread(np.array([v, v * 1.001]), 3 * x, floor=-1.0),
    }[helper]

    @numeric("3x against 3x with a negative tolerance")
    def negative(form, ctx):
        return compare(np.asarray(form(x), float))

    r = pc.check_claim(_true_claim(lambda v: 3 * np.asarray(v, float), negative))
    assert r.status == "error" and "negative tolerance passes nothing" in r.message, (r.status, r.message)
    assert "cannot reject anything" not in r.message and "must be finite\n" not in r.message + "\n", r.message
