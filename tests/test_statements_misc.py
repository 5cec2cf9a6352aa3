"""Structured statements of lora.low_rank, rnn.bptt, opt.adam and the three Lyapunov claims: every
statement mutant (a hypothesis dropped) is killed by its counterexample, and the corrected
statements' counterexamples compute the values the claims report."""

from __future__ import annotations

import math

import numpy as np
import pytest

from proofs_checks.context import RunContext
from proofs_checks.registry import select
from proofs_checks.runner import run_mutant

from proofs_checks.claims import load_all  # noqa: E402

load_all()  # the built-in claims registered as built-in first: a claim module imported by a test alone was refused as a plugin's

pytestmark = pytest.mark.xdist_group("statements")

IDS = ("lora.low_rank", "rnn.bptt", "opt.adam", "lyap.conditions", "lyap.backward_construction", "lyap.sos_certificate")


def _claim(cid):
    return select([cid])[0]


def _cx(cid, hyp):
    return _claim(cid).hypothesis(hyp).counterexample(RunContext(mode="quick"))


@pytest.mark.parametrize("cid", IDS)
def test_statement_mutants_killed(cid):
    c = _claim(cid)
    muts = c.statement_mutants()
    assert muts, cid
    ctx = RunContext(mode="quick")
    alive = [m.name for m in muts if not run_mutant(c, m, ctx).killed]
    assert not alive, (cid, alive)


@pytest.mark.parametrize("cid", IDS)
def test_declared_and_rendered(cid):
    c = _claim(cid)
    assert c.declared and c.hypotheses
    names = {cl.name for cl in c.clauses}
    for h in c.hypotheses:
        assert h.counterexample is not None or h.necessary_note.strip(), (cid, h.name)
        if h.counterexample is not None:
            assert h.counterexample(RunContext(mode="quick")).clause in names, (cid, h.name)


def test_lora_rank_needs_r_le_min_dk_and_is_generic():
    cx = _cx("lora.low_rank", "rank_range")
    assert cx.instance == {"d": 3, "k": 2, "r": 3, "alpha": 2.0, "A, B": "Gaussian"}
    assert cx.violated and cx.error == 1.0 and cx.clause == "rank_generic"  # rank 2 < r = 3
    assert _cx("lora.low_rank", "alpha_pos").error == 2.0  # α = 0: rank 0 < r = 2
    fr = _cx("lora.low_rank", "base_frozen")
    assert fr.violated and fr.error == 5 * 4 + 5  # d·k + d extra trainables
    assert _cx("lora.low_rank", "B0_zero").error > 0.1
    rank_le_r = {cl.name: cl for cl in _claim("lora.low_rank").clauses}["rank_le_r"]
    assert rank_le_r.evidence == "derived" and "derived_at" in dict(rank_le_r.also)  # symbolic sizes; minors at fixed ones


def test_rnn_tied_point_and_projection():
    for h in ("tied_point", "euclidean"):
        cx = _cx("rnn.bptt", h)
        assert cx.violated and cx.error > 1e3 * cx.tolerance, (h, cx.error)
    from theory import rnn as tr

    d = tr.derive_tied_projection_general()
    assert str(d.result["tied_over_projection"]) == "T" and all(o.passed for o in d.check_obligations())
    clauses = {cl.name: cl for cl in _claim("rnn.bptt").clauses}
    assert clauses["projection_is_average"].evidence == "derived"
    assert clauses["tied_is_sum"].evidence == "derived_at" and "every T" in clauses["tied_is_sum"].scope  # scalar RNN


def test_adam_counterexample_values():
    init = _cx("opt.adam", "init_zero")
    # m₀ = 1, g = 0.5: m₁ = 0.95, m̂₁ = 9.5, v̂₁ = 0.25, Δθ₁ = −0.1·9.5/(0.5 + 1e-8)
    assert init.violated and "-1.9" in init.shows and init.clause == "constant_gradient"
    for h in ("betas", "eps_pos"):
        cx = _cx("opt.adam", h)
        assert cx.violated and "nan" in cx.shows, h
    st = _cx("opt.adam", "stationary")
    assert st.violated and abs(st.error - (2.0 - 0.29 / 0.19)) < 1e-12  # m̂₂ = (0.9·0.1·1 + 0.1·2)/(1 − 0.81)
    ev = {cl.name: cl.evidence for cl in _claim("opt.adam").clauses}
    assert ev == {"update_rule": "checked", "unbiased": "derived", "constant_gradient": "derived"}


def test_adam_lecture_notes_step_for_constant_gradient():
    from numerics import adam as nadam

    hp = nadam.check_hp(dict(lr=0.1, eps=0.0))
    g, b1, b2 = 0.5, 0.9, 0.999
    traj = nadam.run_steps(nadam.seed001_step, np.zeros(1), lambda th, t: np.full(1, g), 20000, hp)
    steps = -np.diff(traj[:, 0])
    assert steps[0] == pytest.approx(0.1 * (1 - b1) / ((1 - b2) * g), rel=1e-12)  # t = 1 only
    assert steps[-1] == pytest.approx(0.1 / g, rel=1e-6)  # t → ∞: α/g
    assert "→ α/g" in _claim("opt.adam").notes


def test_lyapunov_conditions_counterexamples():
    rot = _cx("lyap.conditions", "Vdot_neg")  # V̇ ≡ 0: stable, not asymptotically stable
    assert rot.violated and abs(rot.error - 1.0) < 1e-6 and rot.details["properties"]["Vdot_nonpositive"] is True
    kh = _cx("lyap.conditions", "radially_unbounded")  # Khalil: V bounded on the x-axis, trajectories escape
    assert kh.violated and kh.error > 1.0 and kh.clause == "global"
    for h in ("V0_zero", "V_pos"):
        cx = _cx("lyap.conditions", h)
        assert cx.violated and abs(cx.error - math.exp(5.0)) < 1e-4 * math.exp(5.0), h  # x(t) = e^t x(0)


def test_backward_construction_counterexamples():
    p = _cx("lyap.backward_construction", "P_psd")
    assert p.violated and p.error == 4.0  # V̇ = −4x² + 4y² at (0, 1)
    v = _cx("lyap.backward_construction", "V_pd")
    assert v.violated and abs(v.error - math.exp(10.0)) < 1e-4 * math.exp(10.0)  # f = 2x: x(t) = e^{2t} x(0)
    assert _cx("lyap.backward_construction", "S_skew").violated


def test_sos_needs_positive_margin_and_definite_bounds():
    from numerics import lyapunov as nl
    from proofs_checks.claims.lyapunov_sos import EPS_SOS, _semidefinite_decay

    for h in ("eps_pos", "bounds_definite"):
        cx = _cx("lyap.sos_certificate", h)
        assert cx.violated and "(True)" in cx.shows and cx.clause == "gas", h
    # with ε > 0 and q = x² + y² the suite's own programs reject the semidefinite decay
    cert = nl.certify(_semidefinite_decay(), EPS_SOS)
    assert cert.results["V"].feasible and cert.results["decay"].infeasible


def test_sos_gas_needs_the_certificates():
    cx = _cx("lyap.sos_certificate", "sos_certificates")
    assert cx.violated and cx.clause == "gas"
    assert cx.details["decay_at_1_0"] == -2.001  # −∇V·f − εq = −2.001(x² + y²) < 0: not SOS
    assert abs(cx.details["growth_T1"] - math.e) < 1e-6  # x(t) = e^t x(0): unstable
    certified = next(cl for cl in _claim("lyap.sos_certificate").clauses if cl.name == "certified")
    assert certified.evidence == "derived_at" and "panel candidates" in certified.latex


def test_backward_construction_states_lipschitz_regularity():
    h = _claim("lyap.backward_construction").hypothesis("regular")
    assert h.counterexample is None and "Lipschitz" in h.necessary_note and "C^2" in h.latex
    lyap = next(cl for cl in _claim("lyap.backward_construction").clauses if cl.name == "lyapunov")
    assert "Lipschitz" in lyap.scope
