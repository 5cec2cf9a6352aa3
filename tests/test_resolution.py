"""Issue 29: resolving power of the checks (comparison kinds' resolutions, confirmed by scaling the
reference), and the ranges that used to pass silently (Longformer counts, contextual mapping)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs_checks import comparisons as cmp
from proofs_checks.registry import compare, default_resolution

from proofs_checks.claims import load_all  # noqa: E402

load_all()  # the built-in claims registered as built-in first: a claim module imported by a test alone was refused as a plugin's


def test_relative_resolution_is_confirmed():
    ref = np.array([1.0, -2.0, 3.0])
    r = cmp.relative(ref * (1 + 1e-12), ref, 1e-10, "rounding")
    assert r.passed and r.resolution < 1.1e-10 and r.resolution_units == cmp.REL_UNITS
    conf = r.details["resolution_confirmed"]
    assert conf["rejects_2eps"] and conf["accepts_half_eps"]
    for f, ok in ((1 + 2 * r.resolution, False), (1 + r.resolution / 2, True)):
        assert cmp.relative(ref * (1 + 1e-12), ref * f, 1e-10, "x").passed is ok


def test_z_test_and_seed_spread_resolution():
    r = cmp.z_test({"a": (1.001, 0.001, 1.0), "b": (2.0, 0.1, 2.0)})
    assert math.isclose(r.resolution, (5 * 0.001 + 0.001) / 1.0)
    assert r.details["resolution_confirmed"]["rejects_2eps"]
    s = cmp.seed_spread([[1.0, 2.0], [1.02, 2.0], [0.98, 2.0]], [1.0, 2.0], floor=1e-3)
    assert s.passed and 0 < s.resolution < 0.05 and s.details["resolution_confirmed"]["rejects_2eps"]


def test_exact_and_default_resolution():
    assert cmp.exact({"n": 0.0}, "x").resolution == 0.0
    assert default_resolution(0.0, 0.0) == (0.0, default_resolution(0.0, 0.0)[1])
    r = compare(1e-3, 0.1, "x")
    assert math.isclose(r.resolution, 0.101)
    assert math.isnan(compare(float("nan"), 0.1, "x").resolution)


def test_longformer_count_every_small_configuration():
    """The Longformer/BigBird count against brute-force counting for all T ≤ 40, g ≤ 4, w ≤ 6
    (including T − g < 2w, T − g < w and g ≥ T)."""
    import numerics.approx as na

    for T in range(1, 41):
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        for g in range(5):
            for w in range(7):
                brute = int(((np.abs(i - j) <= w) | (i < g) | (j < g)).sum())
                assert na.CONNECTION_COUNTS["longformer"](T, w, g) == brute, (T, g, w)
                if w >= 1:
                    assert na.mask_counts("longformer", T, w=w, g=g) == brute, (T, g, w)


@pytest.mark.parametrize("d,b,n", [(3, 2, 3), (2, 3, 3), (1, 9, 2)])
def test_contextual_mapping_separations_in_mpmath_up_to_K9(d, b, n):
    """K = 8, 9: the separations (down to 1e-59) are computed in mpmath and respect the derived
    bound, the tight pair within τ ≤ 1.09 of it; the float64 enumeration cannot resolve them."""
    import numerics.approx as na
    from proofs_checks.claims.approx import _precision

    W, bound = na.construction_weights(d, b), na.margin_bound(d, b)["same_token"]
    rnd, dps = _precision(n, d, float(np.min(bound)))
    assert dps > 0 and rnd < 1e-6 * float(np.min(bound))
    same = na.same_token_separations_mp(d, b, n, W, dps)
    assert np.all(same >= bound * (1 - 1e-12))
    assert 1.0 <= na.tight_pair_separation_mp(d, b, n, W, dps) / bound[-1] <= 1.09
    assert na.same_token_separations_mp(d, b, n, W, dps + 20) == pytest.approx(same, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_att_svm_exact_optimum_within_certified_tolerance(seed):
    """The default solve is within the certificate-derived tolerance of the exact Frobenius optimum
    (SciPy's dual polished to the KKT point), and the certified bound really bounds the distance."""
    import numerics.att_svm as ns
    from proofs_checks.claims.att_svm_separator import FRO_DIST

    inst = ns.make_instance(8, 5, 8, seed=seed)
    A = ns.constraint_matrix(inst.X, inst.z, inst.opt)[0]
    Wp, ap = ns.polish_fro(A, ns.solve_att_svm_dual_scipy(inst.X, inst.z, inst.opt)[1])
    dref = ns.fro_distance_bound(A, Wp, ap)
    res = ns.solve_att_svm(inst.X, inst.z, inst.opt, "fro")
    dist = np.linalg.norm(res.W - Wp) / np.linalg.norm(Wp)
    assert dref < 1e-6 and dist <= FRO_DIST + dref
    assert dist <= ns.fro_distance_bound(A, res.W, res.duals) + dref


def test_nuclear_rational_certificate_brackets_both_solvers():
    """The exact bracket of the nuclear-norm optimum (from SCS's point and duals) contains Clarabel's value
    up to its certified gap, and is a valid bracket: the lower bound is below every feasible value."""
    import numerics.att_svm as ns
    from theory.att_svm import nuclear_certificate

    inst = ns.make_instance(6, 5, 5, seed=1)
    A = ns.constraint_matrix(inst.X, inst.z, inst.opt)[0]
    scs = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc", solver="SCS")
    cert = nuclear_certificate(A, scs.W, scs.duals)
    assert cert is not None and 0 <= cert["relative_gap"] < 1e-6
    cl = ns.solve_att_svm(inst.X, inst.z, inst.opt, norm="nuc")
    v = float(np.linalg.norm(cl.W, "nuc")) / min(1.0, float(np.min(np.einsum("kab,ab->k", A, cl.W))))  # made feasible
    assert cert["lower"] <= v * (1 + 1e-12) and v <= cert["upper_float"] * (1 + ns.certified_gap(cl.W, A, cl.duals, "nuc") + 1e-12)


@pytest.mark.parametrize("cid", ["opt.adam", "gnn.attention_is_gnn", "lora.low_rank", "rnn.bptt", "sparse.connectivity"])
def test_rounding_claims_resolution_named_and_within_target(cid):
    """Every check of these claims states a finite resolution in named units (never the placeholder
    'tolerance + |error|'), at most 1e-9 at quick sizes (rounding-level comparisons; the trained ones
    compare with torch's own computation), confirmed where relative."""
    from proofs_checks import RunContext
    from proofs_checks.registry import ERROR_UNITS, get_claim
    from proofs_checks.runner import run_claim

    res = run_claim(get_claim(cid), RunContext(mode="quick"), with_derivation=False)
    assert res.status == "verified", res.message
    for o in res.checks:
        r = o.result
        assert r.resolution_units and r.resolution_units != ERROR_UNITS, (o.name, r.resolution_units)
        assert math.isfinite(r.resolution) and 0 <= r.resolution <= 1e-9, (o.name, r.resolution)
        if r.resolution > 0:
            assert r.details["resolution_confirmed"]["rejects_2eps"], o.name


@pytest.mark.parametrize("kw", [{"dof": 0.5}, {"dof": float("nan")}, {"dof": True}, {"dof": {"a": 0}},
                                {"resolution_from": ["b"]}, {"resolution_from": []}])
def test_z_test_options_out_of_their_domain_are_one_line(kw):
    """A ``dof`` that is no whole number ≥ 1, or a ``resolution_from`` naming no measured label: one ValueError line,
    never a raw AttributeError/KeyError from inside (hostile pass 33b, a note)."""
    from proofs_checks.comparisons import z_test

    with pytest.raises(ValueError, match="z_test: "):
        z_test({"a": (1.0, 0.1, 1.0)}, **kw)
