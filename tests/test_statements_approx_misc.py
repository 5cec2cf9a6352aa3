"""Structured statements of approx.contextual_mapping, approx.universal_equivariant,
approx.sparse_connections, perf.favor_unbiased, gnn.attention_is_gnn, sparse.connectivity and
scale.param_counts: every statement mutant (a hypothesis dropped) is killed by its computed
counterexample, and the corrected statements' counterexample values are what the audit found."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sps
from scipy import integrate
from scipy.sparse.csgraph import NegativeCycleError, shortest_path

from numerics import approx as na
from numerics import favor as nf
from numerics import gnn as ng
from numerics import scale as ns
from numerics import sparse as nsp
from proofs_checks.claims import load_all
from proofs_checks.context import RunContext
from proofs_checks.registry import registry
from proofs_checks.runner import run_counterexample, run_mutant

load_all()  # the claim modules through the registry's loader (imported alone, a module's claims were refused as
# plugins' claims in built-in groups: this file failed to collect when it ran first in a worker)

IDS = ("approx.contextual_mapping", "approx.universal_equivariant", "approx.sparse_connections", "perf.favor_unbiased",
       "gnn.attention_is_gnn", "sparse.connectivity", "scale.param_counts")


def _cx(claim_id, hyp):
    c = registry.get(claim_id)
    return c.hypothesis(hyp).counterexample(RunContext(mode="quick").for_check(c.id, f"cx:{hyp}"))


@pytest.mark.parametrize("claim_id", IDS)
def test_statement_mutants_killed(claim_id):
    c = registry.get(claim_id)
    assert c.declared and c.statement.startswith(r"\text{If }")
    muts = c.statement_mutants()
    assert muts, "every claim here has at least one hypothesis with a counterexample"
    for m in muts:
        assert run_mutant(c, m, RunContext(mode="quick")).killed, m.name
    for h in c.hypotheses:  # the others say why none is shown
        assert h.counterexample is not None or h.necessary_note.strip()


@pytest.mark.parametrize("claim_id", IDS)
def test_counterexamples_name_a_clause_and_are_violated(claim_id):
    c = registry.get(claim_id)
    names = {cl.name for cl in c.clauses}
    for h in c.hypotheses:
        if h.counterexample is not None:
            cx = _cx(claim_id, h.name)
            assert cx.clause in names and cx.violated
            assert run_counterexample(c, h.name, RunContext(mode="quick")).status == "failed"


# ---- gnn.attention_is_gnn: Bellman–Ford needs no negative cycle and its initialisation


def test_negative_cycle_two_rounds_give_0_1_minus2():
    src, dst, w = np.array([0, 1, 2]), np.array([1, 2, 1]), np.array([1.0, -3.0, 1.0])
    d = ng.min_aggregation_gnn(1, 3, np.zeros(3, int), src, dst, w, 2, allow_negative=True)[0, 0]
    assert d.tolist() == [0.0, 1.0, -2.0]
    with pytest.raises(NegativeCycleError):
        shortest_path(sps.csr_matrix((w, (src, dst)), shape=(3, 3)), method="BF")
    cx = _cx("gnn.attention_is_gnn", "no_negative_cycle")
    assert cx.clause == "bellman_ford" and cx.error == 2.0


def test_empty_neighbourhood_is_undefined_not_false_and_mask_is_adjacency():
    c = registry.get("gnn.attention_is_gnn")
    h = c.hypothesis("nonempty_neighbourhoods")
    assert h.counterexample is None and "undefined" in h.necessary_note
    assert "A_{ij}=1\\iff j\\in N(i)" in c.hypothesis("graph").latex
    assert ng.adjacency_mask(np.array([0]), np.array([1]), 2)[1].tolist() == [True, False]  # edge 0 → 1: A_10 = 1


def test_wrong_initialisation_and_negative_weights_rejected_by_default():
    cx = _cx("gnn.attention_is_gnn", "bf_initialisation")
    assert cx.error == 3.0  # d⁽³⁾(0 → 3) = 0 while dist = 3
    with pytest.raises(Exception, match="non-negative"):
        ng.min_aggregation_gnn(1, 2, [0], [0], [1], [-1.0], 1)


# ---- approx.contextual_mapping: γ and λ are the construction's


def test_gamma_times_4_breaks_half_delta():
    W = dict(na.construction_weights(1, 4))
    W["W_O"] = 4 * W["W_O"]
    sep = na.separations(1, 4, 3, W).distinct_tokens
    assert sep == pytest.approx(0.0831, abs=5e-4) and sep < 0.125


def test_lambda_doubled_breaks_the_margin_and_origin_collides():
    cx = _cx("approx.contextual_mapping", "lambda_relation")
    assert cx.error > 1e-4  # bound 1.6e-4, separation 3.2e-7
    cx = _cx("approx.contextual_mapping", "grid_without_origin")
    assert cx.violated and "0 at 50 digits" in cx.shows


# ---- approx.sparse_connections: the Longformer polynomial needs T ≥ g + w and leading globals


def test_longformer_polynomial_counterexamples():
    assert _cx("approx.sparse_connections", "longformer_T_ge_g_plus_w").shows.startswith("the polynomial gives -3, the mask has 9")
    assert na.mask_counts("longformer", 3, w=5, g=1) == 9
    assert int(nsp.longformer(7, 1, (3,))[0].sum()) == 27 and na.CONNECTION_COUNTS["longformer"](7, 1, 1) == 29
    assert na.mask_counts("star", 1) == 1 and na.CONNECTION_COUNTS["star"](1) == -1
    for T in range(1, 30):  # with g ≤ T the polynomial holds exactly when T ≥ g + w
        for w in range(1, 6):
            for g in range(0, min(T, 4) + 1):
                poly = (2 * w + 1) * T + 2 * g * T - g * g - 2 * g * w - g - w * w - w
                assert (poly == na.mask_counts("longformer", T, w=w, g=g)) == (T >= g + w)


def test_growth_is_stated_at_fixed_c_and_bigbird_needs_T_ge_g_plus_w():
    c = registry.get("approx.sparse_connections")
    for T in (16, 100, 400):  # c = s = √T: the fixed summary pattern is dense, T², not Θ(T^{3/2})
        assert na.mask_counts("fixed_summary", T, c=math.isqrt(T)) == T * T
    (growth,) = [cl for cl in c.clauses if cl.name == "growth"]
    assert "c\\,T^{3/2}" in growth.latex and "constants" in growth.scope
    assert "BigBird" in c.hypothesis("longformer_T_ge_g_plus_w").latex
    T, w, g, r = 3, 5, 1, 1  # the polynomial −3, its BigBird upper bound −3 + rT = 0 < 9
    poly = (2 * w + 1) * T + 2 * g * T - g * g - 2 * g * w - g - w * w - w
    assert poly == -3 and na.mask_counts("bigbird", T, w=w, g=g, r=r, seed=0) == 9 > poly + r * T
    assert "BigBird's mask has 9" in _cx("approx.sparse_connections", "longformer_T_ge_g_plus_w").shows


# ---- perf.favor_unbiased: ORF lowers the positive MSE only for d ≥ 2, m ≥ 2, x + y ≠ 0


def test_orf_counterexamples_exact():
    x = np.array([0.3, -0.2, 0.25, 0.1])
    y = np.array([0.2, 0.35, -0.1, 0.3])
    assert nf.orf_mse(x, y, 1) == pytest.approx(nf.mse_positive(x, y, 1), rel=1e-13)
    assert nf.orf_mse(x, -x, 4) == 0.0 == nf.mse_positive(x, -x, 4)
    assert nf.orf_mse(x, y, 4) / nf.mse_positive(x, y, 4) == pytest.approx(0.9198, abs=1e-4)
    xt, yt = np.array([1.65, 0.5, 0.0, 0.0]), np.array([-1.65, 0.5, 0.0, 0.0])
    assert nf.orf_mse(xt, yt, 4, "trig") / nf.mse_trig(xt, yt, 4) == pytest.approx(1.0127, abs=1e-4)


def test_orthogonal_pair_moment_against_quadrature():
    """d = 4: (u₁ᵀẑ, u₂ᵀẑ) is uniform on the unit disk; E cos(α r), r ~ χ₄, by 1-D quadrature."""
    def ecos(alpha):
        return integrate.quad(lambda r: r**3 * math.exp(-r * r / 2) / 2 * math.cos(alpha * r), 0, 30, limit=200)[0]

    s = 3.3
    val = integrate.dblquad(lambda th, rho: ecos(s * rho * math.cos(th)) * ecos(s * rho * math.sin(th)) * rho / math.pi,
                            0, 1, 0, 2 * math.pi, epsabs=1e-9, epsrel=1e-7)[0]
    assert nf.orthogonal_pair_moment(s, 4, "cos") == pytest.approx(val, abs=1e-7)
    assert val - math.exp(-s * s) > 2e-3  # positive covariance: orthogonal trig features are worse here


def test_thm2_bound_holds_for_the_exact_orf_mse():
    rng = np.random.default_rng(0)
    for d in (2, 5, 8):
        x, y = rng.normal(size=(50, d)) * 0.4, rng.normal(size=(50, d)) * 0.4
        a, b, c = (x * x).sum(-1), (y * y).sum(-1), (x * y).sum(-1)
        gap = nf.mse_positive(x, y, d) - nf.orf_mse(x, y, d)
        assert np.all(gap >= 2 * (d - 1) / (d * (d + 2)) * (np.exp(c) - np.exp(-(a + b) / 2)) ** 2)


def test_orf_needs_d_ge_2_and_m_le_d_is_the_cited_range():
    x, y = np.array([0.3]), np.array([0.5])
    for m in (2, 3):  # d = 1: one row per block, P = 0, the MSEs agree to rounding
        assert nf.orf_mse(x, y, m) == pytest.approx(nf.mse_positive(x, y, m), rel=1e-14)
    assert _cx("perf.favor_unbiased", "d_ge_2").violated
    (orf,) = [cl for cl in registry.get("perf.favor_unbiased").clauses if cl.name == "orf_lower"]
    assert "only m ≤ d" in orf.scope and "d ≥ 2" in orf.scope and "\\lfloor m/d\\rfloor" in orf.latex
    assert "(8, 17)" in dict(orf.evidences())["checked"]


# ---- scale.param_counts: what is and is not reproduced


def test_scale_rows_reproduced_and_not():
    counts = {c.name: ns.total_params(c) for c in ns.TABLE}
    assert counts["RoBERTa"] == 355_359_744 and len(ns.TABLE) == 7
    assert 12 * ns.per_layer_params(512) + 37000 * 512 == 56_772_608
    assert ns.encoder_decoder_params(512, 8, 6, 6, 37000) == 63_084_544
    assert ns.encoder_decoder_params(1024, 16, 6, 6, 37000) == 214_249_472
    assert [c.name for c in ns.TABLE if c.convention[0] == "truncate"] == ["GPT-2"]
    (rows,) = [cl for cl in registry.get("scale.param_counts").clauses if cl.name == "table_rows"]
    assert "6 of the 7 rows rounded" in rows.scope and "truncated" in rows.latex


# ---- sparse.connectivity


def test_fixed_pattern_partial_block_never_full_but_has_a_path():
    masks = [m[:7, :7] for m in nsp.fixed(9, 3, 1)]
    assert nsp.layers_to_full_sets(masks, 100) is None and nsp.hamiltonian_path(masks) is not None
    assert not _cx("sparse.connectivity", "window_ge_1").shows.endswith("exists")
