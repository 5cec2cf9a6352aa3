"""Group E: backpropagation through time (lecture notes 004). Binds theory/rnn.py and numerics/rnn.py to
checks, tolerances and mutants."""

from __future__ import annotations

import numpy as np
import sympy as sp

from numerics import rnn as nr
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant
from proofs_checks.claims._common import declare, exceeds
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest
from proofs_checks.claims._attention_common import Resolved
from theory import rnn as tr


# form: {"combine": untied gradients (T, ...) -> tied gradient,
#        "bptt": (params, X, Z) -> dict of tied gradients (hand-written BPTT),
#        "project": untied gradients (T, ...) -> their projection onto the tied subspace (T, ...)}


#: numbers of steps at which the form is compared with the general (symbolic-T) BPTT result
_T_GENERAL = (2, 3, 5, 9)


def _symbolic(form, ctx) -> CheckResult:
    """Scalar RNN, σ = tanh: the form's combination of the untied gradients δ_k h_{k−1} and the form's
    BPTT equal the tied gradient Σ_k δ_k h_{k−1} derived for symbolic T (tr.derive_bptt_general),
    unrolled at T ∈ {2, 3, 5, 9}; at T = 3 also SymPy's dL/dw of the unrolled loss itself
    (tr.derive_bptt_scalar). The form's projection equals the derived least-squares projection (the
    average), tied = T · projection, and the projection derived for symbolic T."""
    rng = ctx.rng()
    R = Resolved()  # every entry is max_rel_error: |value − ref| / max(1, |ref|)
    d3 = tr.derive_bptt_scalar(3)
    f3 = sp.lambdify([*d3.facts["symbols"][:5], list(d3.facts["symbols"][5]), list(d3.facts["symbols"][6])],
                     d3.result["tied"], "numpy")
    for T in _T_GENERAL:
        gen = tr.bptt_general_at(T)
        w, u, b, v, h0, xs, zs = gen["symbols"]
        args = [w, u, b, v, h0, list(xs), list(zs)]
        f_tied = sp.lambdify(args, gen["tied"], "numpy", cse=True)
        f_untied = sp.lambdify(args, list(gen["untied"]), "numpy", cse=True)
        for _ in range(ctx.size(4, 12)):
            wv, uv, bv, vv, h0v = rng.normal(size=5)
            x, z = rng.normal(size=T), rng.normal(size=T)
            tied = float(f_tied(wv, uv, bv, vv, h0v, list(x), list(z)))
            untied = np.asarray(f_untied(wv, uv, bv, vv, h0v, list(x), list(z)), dtype=float)
            R.pair(f"combine_T{T}", form["combine"](untied), tied, div="ref1")
            params = {"Wh": np.array([[wv]]), "Wx": np.array([[uv]]), "b": np.array([bv]), "Wy": np.array([[vv]]),
                      "by": np.zeros(1), "h0": np.array([h0v])}
            g = form["bptt"](params, x.reshape(1, T, 1), z.reshape(1, T, 1))
            R.pair(f"bptt_T{T}", g["Wh"][0, 0], tied, div="ref1")
            if T == 3:  # the general result against SymPy's derivative of the unrolled loss (another route)
                R.pair("general_vs_direct_T3", tied, float(f3(wv, uv, bv, vv, h0v, list(x), list(z))), div="ref1")
    T = 3
    proj = tr.derive_tied_projection(T)
    f_proj = sp.lambdify([list(proj.facts["g_symbols"])], proj.result["projection"], "numpy")
    ratio = float(proj.result["tied_over_projection"])
    for _ in range(ctx.size(6, 20)):
        untied = rng.normal(size=T)
        P = np.asarray(form["project"](untied), dtype=float)
        R.pair("projection", P, np.full(T, f_proj(list(untied))), div="ref1")
        R.pair("tied_over_projection", ratio * P[0], float(np.sum(untied)), div="ref1")
    gen = tr.derive_tied_projection_general()  # symbolic T: c* = (1/T) Σ g_k, tied = T·c*
    R.prop("general_T_obligations_failed", float(sum(not o.passed for o in gen.check_obligations())),
           "count of failed obligations of the symbolic-T projection (convexity, tied = T·c*)")
    Tsym = next(iter(gen.result["tied_over_projection"].free_symbols))
    for Tg in _T_GENERAL:
        c_T = sp.expand(gen.result["projection"].subs(Tsym, Tg).doit())
        g_ix = sorted(c_T.atoms(sp.Indexed), key=lambda e: int(e.indices[0]))  # g[1], …, g[T]
        untied = rng.normal(size=Tg)
        R.pair(f"projection_vs_general_T{Tg}", np.asarray(form["project"](untied), dtype=float)[0],
               float(c_T.subs(dict(zip(g_ix, untied)))), div="ref1")
    Tmax = sorted(_T_GENERAL)[-1]
    tol = 64 * Tmax * EPS
    return R.result(tol, f"float64 rounding of a T-step chain rule (64·T·eps at T = {Tmax}, relative to max(1, |ref|))",
                    seeds=[ctx.seed_for()], sizes={"T": list(_T_GENERAL)})


def _autograd(form, ctx) -> CheckResult:
    """Vector RNNs: the form's combination of autograd gradients of untied per-step copies, and
    the form's BPTT, equal the gradients of ``torch.nn.RNN`` + ``torch.nn.Linear`` (tied) for
    every parameter."""
    rng = ctx.rng()
    shapes = [(3, 4, 2, 5, 6), (2, 6, 3, 4, 9), (1, 3, 1, 8, 4)][: ctx.size(2, 3)]
    R = Resolved()
    details = {}
    for i, (d_x, d_h, d_y, T, B) in enumerate(shapes):
        p = nr.random_params(d_x, d_h, d_y, rng)
        X, Z = rng.normal(size=(B, T, d_x)), rng.normal(size=(B, T, d_y))
        ref = nr.tied_gradients_nn_rnn(p, X, Z, ctx.device)
        unt = nr.untied_gradients(p, X, Z, ctx.device)
        mine = form["bptt"](p, X, Z)
        for k in nr.PARAM_NAMES:
            R.pair(f"combine_{k}[{i}]", form["combine"](unt[k]), ref[k], div="ref1")  # max_rel_error
            R.pair(f"bptt_{k}[{i}]", mine[k], ref[k], div="ref1")
        details[f"last_step_share_Wh[{i}]"] = float(np.linalg.norm(unt["Wh"][-1]) / largest(np.linalg.norm(ref["Wh"]), 1e-300))
    T_max = largest(s[3] for s in shapes)
    tol = 256 * T_max * largest(s[1] for s in shapes) * EPS
    return R.result(tol, "float64 rounding accumulated over T steps of d_h-term products "
                    "(256·T·d_h·eps, relative to the gradient's size)", seeds=[ctx.seed_for()],
                    sizes={"shapes(d_x,d_h,d_y,T,B)": shapes}, device=ctx.device, details=details)


def _projection(form, ctx) -> CheckResult:
    """Lecture notes 004's averaging as a projection: the form's projection of the untied gradients equals
    the least-squares projection onto ``{(W,...,W)}`` (``np.linalg.lstsq`` with the stacked
    identity design), is idempotent, and one projected untied step with rate η equals the tied
    gradient step with rate η/T (not η: the average is the gradient divided by T)."""
    rng = ctx.rng()
    d_x, d_h, d_y, T, B = 2, 3, 2, 5, 4
    p = nr.random_params(d_x, d_h, d_y, rng)
    X, Z = rng.normal(size=(B, T, d_x)), rng.normal(size=(B, T, d_y))
    unt = nr.untied_gradients(p, X, Z)
    tied = nr.tied_gradients_nn_rnn(p, X, Z)
    eta = 0.1
    R = Resolved()  # every entry is max_rel_error: |value − ref| / max(1, |ref|)
    for k in ("Wh", "Wx", "b"):
        G = unt[k]
        n = int(np.prod(G.shape[1:]))
        design = np.tile(np.eye(n), (T, 1))  # (T·n, n): maps a tied value to its T copies
        c, *_ = np.linalg.lstsq(design, G.reshape(T * n), rcond=None)
        ref = (design @ c).reshape(G.shape)
        P = np.asarray(form["project"](G), dtype=float)
        R.pair(f"vs_lstsq_{k}", P, ref, div="ref1")
        R.pair(f"idempotent_{k}", np.asarray(form["project"](P), dtype=float), P, div="ref1")
        projected_step = p[k] - eta * P[0]
        tied_step = p[k] - (eta / T) * tied[k]
        R.pair(f"projected_step_eq_tied_step_eta_over_T_{k}", projected_step, tied_step, div="ref1")
    details = {}
    details["note"] = ("averaging the T untied gradients = orthogonal projection onto tied weights; "
                       "the tied gradient is T times that average (same direction, rate rescaled by T)")
    tol = 64 * T * EPS
    return R.result(tol, "float64 rounding of a mean over T copies and a lstsq solve (64·T·eps, relative)",
                    seeds=[ctx.seed_for()], sizes={"T": T, "d_h": d_h}, details=details)


def _last_step(G):
    return np.asarray(G)[-1]


def _cx_setup(ctx, name):
    rng = ctx.rng(name)
    d_x, d_h, d_y, T, B = 2, 3, 2, 4, 3
    return nr.random_params(d_x, d_h, d_y, rng), rng.normal(size=(B, T, d_x)), rng.normal(size=(B, T, d_y)), rng


def _cx_tied_point(ctx) -> Counterexample:
    """Without W^(k) = W: copies of W_h moved apart (offsets of size 0.5); the sum of their
    gradients is not the tied gradient at the average copy (nor at any one point in general)."""
    p, X, Z, rng = _cx_setup(ctx, "tied_point")
    T = X.shape[1]
    off = 0.5 * rng.normal(size=(T, *p["Wh"].shape))
    summed = nr.sum_over_steps(nr.untied_gradients(p, X, Z, offsets={"Wh": off})["Wh"])
    tied = nr.tied_gradients_nn_rnn({**p, "Wh": p["Wh"] + off.mean(0)}, X, Z)["Wh"]
    return _gradient_gap(summed, tied, T, {"W_h copies": "W_h + 0.5·N(0,1) per step"}, "tied_is_sum",
                         "Σ_k ∂L/∂W_h^(k) at distinct copies differs from ∂L/∂W_h at their mean by {err:.3g} (relative)")


def _gradient_gap(got, ref, T: int, instance: dict, clause: str, shows: str) -> Counterexample:
    """The relative gap max|got − ref| / max(1, max|ref|) of two W_h gradients on a _cx_setup instance,
    against the claim's check's rounding tolerance."""
    err = float(np.abs(got - ref).max() / largest(1.0, np.abs(ref).max()))
    return exceeds({"d_x": 2, "d_h": 3, "d_y": 2, "T": T, **instance}, clause, shows.format(err=err),
                   error=err, tolerance=256 * T * EPS * 3,
                   justification="float64 rounding over T steps of d_h-term products (256·T·d_h·eps), as the claim's check")


def _cx_model(ctx) -> Counterexample:
    """Without a fixed h₀: h₀ = W_h·1 depends on W_h, and the true ∂L/∂W_h (torch autograd through h₀)
    has the extra term (W_hᵀδ₁)1ᵀ that Σ_t δ_t h_{t−1}ᵀ misses."""
    import torch

    p, X, Z, _ = _cx_setup(ctx, "model")
    T = X.shape[1]
    ones = np.ones(p["Wh"].shape[0])
    formula = nr.bptt_numpy({**p, "h0": p["Wh"] @ ones}, X, Z)["Wh"]
    t = {k: torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=k == "Wh") for k, v in p.items() if k != "h0"}
    h = (t["Wh"] @ torch.tensor(ones)).expand(X.shape[0], -1)
    loss = 0.0
    for k in range(T):
        h = torch.tanh(h @ t["Wh"].T + torch.tensor(X[:, k]) @ t["Wx"].T + t["b"])
        loss = loss + 0.5 * ((h @ t["Wy"].T + t["by"] - torch.tensor(Z[:, k])) ** 2).sum()
    loss.backward()
    return _gradient_gap(formula, t["Wh"].grad.numpy(), T, {"h_0": "W_h·1 (depends on W_h)"}, "bptt_recursion",
                         "Σ_t δ_t h_(t−1)ᵀ differs from autograd's ∂L/∂W_h by {err:.3g} (relative): the path through h₀ is missing")


def _cx_euclidean(ctx) -> Counterexample:
    """Without the Euclidean (equal-weight) inner product: projecting onto the tied subspace in the
    inner product Σ_k k·⟨G_k, H_k⟩ gives the weighted average Σ_k k G_k / Σ_k k, not (1/T) ∂L/∂W."""
    p, X, Z, _ = _cx_setup(ctx, "euclidean")
    T = X.shape[1]
    G = nr.untied_gradients(p, X, Z)["Wh"]
    w = np.arange(1.0, T + 1)
    n = G[0].size
    design = np.tile(np.eye(n), (T, 1)) * np.sqrt(np.repeat(w, n))[:, None]  # weighted least squares
    c, *_ = np.linalg.lstsq(design, (G.reshape(T, n) * np.sqrt(w)[:, None]).reshape(-1), rcond=None)
    ref = nr.sum_over_steps(G).reshape(n) / T
    err = float(np.abs(c - ref).max() / largest(1.0, np.abs(ref).max()))
    tol = 64 * T * EPS
    return exceeds({"T": T, "inner product": "Σ_k k·⟨G_k, H_k⟩"}, "projection_is_average",
                   f"the weighted projection of the untied W_h gradients differs from (1/T)·∂L/∂W_h by {err:.3g} (relative)",
                   error=err, tolerance=tol,
                   justification="float64 rounding of a mean over T copies and a lstsq solve (64·T·eps), as the claim's check")


_SHAPES = ("vector RNNs (d_x, d_h, d_y, T, batch) = (3, 4, 2, 5, 6), (2, 6, 3, 4, 9), (1, 3, 1, 8, 4) "
           "(first two at --quick), tanh, against torch.nn.RNN autograd")


declare(
    id="rnn.bptt",
    title="BPTT: tied-weight gradient = sum of the untied per-step gradients (at tied copies); averaging = projection",
    hypotheses=(
        Hypothesis("model", r"h_t=\sigma(W_hh_{t-1}+W_xx_t+b),\ y_t=W_yh_t+b_y,\ t=1..T,\ T\ge1,\ h_0\ \text{fixed},"
                   r"\ \sigma\in C^1,\ L=\sum_t\tfrac12\|y_t-z_t\|^2",
                   "lecture notes 004's unrolled RNN (σ ∈ C¹: the gradients are not defined otherwise; h₀ fixed: shown "
                   "necessary, an h₀ depending on W_h adds its own term)", counterexample=_cx_model),
        Hypothesis("tied_point", r"W^{(1)}=\dots=W^{(T)}=W", "the untied copies' gradients are taken at a tied point",
                   counterexample=_cx_tied_point),
        Hypothesis("euclidean", r"\Pi_{\text{tied}}\ \text{orthogonal in}\ \langle G,H\rangle=\textstyle\sum_k\operatorname{tr}(G_k^\top H_k)",
                   "the projection is the Euclidean (Frobenius, equal weights over k) one", counterexample=_cx_euclidean),
    ),
    clauses=(
        Clause("tied_is_sum", r"\frac{\partial L}{\partial W}\Big|_{\text{tied}}=\sum_{k=1}^T\frac{\partial L}{\partial W^{(k)}}\Big|_{W^{(k)}=W}"
               r"\ \ (W\in\{W_h,W_x,b,W_y,b_y\})", "derived_at",
               "d_x = d_h = d_y = 1 (scalar RNN) and every T ≥ 1 (symbolic T, by induction over the steps; the sum "
               "telescopes), each of w, u, b, v, generic differentiable σ (for vector widths the clause is the "
               "multivariate chain rule itself: checked, not derived)",
               ("derivation", "scalar_rnn_vs_sympy", "untied_sum_vs_nn_rnn"),
               also=(("derived_at", "scalar RNN, the recurrent weight w, T = 2 (unrolled loss differentiated)"), ("checked", _SHAPES)), rests_on=("tied chain rule recursion", "chain rule", "tied-weight chain rule")),
        Clause("bptt_recursion", r"\delta_t=\sigma'(a_t)\odot\big(W_y^\top(y_t-z_t)+W_h^\top\delta_{t+1}\big),\ "
               r"\frac{\partial L}{\partial W_h}=\sum_t\delta_th_{t-1}^\top", "derived",
               "every T ≥ 1 and symbolic widths d_h, d_x, d_y (the step δ_t = σ'(a_t) ⊙ (W_yᵀ(y_t − z_t) + W_hᵀδ_{t+1}) in "
               "index form with the multivariate chain rule typed in; ∂L/∂W_h = Σ_t δ_t h_{t−1}ᵀ by the telescoping sum); "
               "in SymPy throughout for the scalar RNN (the rest of the loss an undefined function, generic σ)",
               ("derivation", "scalar_rnn_vs_sympy", "untied_sum_vs_nn_rnn"),
               also=(("derived_at", "scalar RNN, ∂L/∂w, T = 2 (derivation) and T = 3 (symbolic check: vs the unrolled loss)"),
                     ("checked", "the form's BPTT and combination against the general result unrolled at T ∈ {2, 3, 5, 9} "
                      "(scalar, tanh); " + _SHAPES)), rests_on=("tied chain rule recursion", "chain rule", "tied-weight chain rule")),
        Clause("projection_is_average", r"\Pi_{\text{tied}}(G_1,\dots,G_T)=(\bar G,\dots,\bar G),\ "
               r"\bar G=\tfrac1T\textstyle\sum_kG_k=\tfrac1T\frac{\partial L}{\partial W}", "derived",
               "every T ≥ 1 (symbolic T, entrywise), theory.rnn.derive_tied_projection_general",
               ("scalar_rnn_vs_sympy", "averaging_is_projection"),
               also=(("checked", "T = 5, d_h = 3 against np.linalg.lstsq; projected step η = tied step η/T"),)),
    ),
    source="lecture notes 004 (Backpropagation Through Time); Werbos (1990)",
    kind="theorem",
    form={"combine": nr.sum_over_steps, "bptt": nr.bptt_numpy, "project": nr.project_tied},
    derivation=tr.derive_bptt_general,
    checks=(
        Check("scalar_rnn_vs_sympy", "symbolic", _symbolic,
              "scalar RNN: chain-rule sum and BPTT vs the symbolic-T result at T ∈ {2, 3, 5, 9} (and SymPy's dL/dw at T = 3); projection"),
        Check("untied_sum_vs_nn_rnn", "numeric", _autograd, "autograd of untied copies and hand BPTT vs torch.nn.RNN", uses_device=False),
        Check("averaging_is_projection", "numeric", _projection, "projection vs lstsq; projected step = tied step at η/T"),
    ),
    mutants=(
        Mutant("last_step_only", "dropped term", "only the last step's copy's gradient",
               {"combine": _last_step, "bptt": nr.bptt_numpy, "project": nr.project_tied}),
        Mutant("mean_as_gradient", "wrong constant", "the average of the copies' gradients taken as the gradient (off by T)",
               {"combine": lambda G: np.asarray(G).mean(axis=0), "bptt": nr.bptt_numpy, "project": nr.project_tied}),
        Mutant("no_recurrent_path", "dropped term", "BPTT without the δ_{t+1} W_h term (truncated to one step)",
               {"combine": nr.sum_over_steps, "bptt": lambda p, X, Z: nr.bptt_numpy(p, X, Z, recurrent_path=False),
                "project": nr.project_tied}),
        Mutant("project_by_sum", "wrong constant", "projection that replaces every copy by the sum",
               {"combine": nr.sum_over_steps, "bptt": nr.bptt_numpy,
                "project": lambda G: np.broadcast_to(np.asarray(G).sum(0), np.shape(G)).copy()}),
    ),
    notes="Lecture notes 004 says projecting onto the tied subspace 'corresponds to averaging the T weight gradients'. "
          "True of the projection (the Euclidean projection of (G_1..G_T) onto {(W,..,W)} replaces each copy by "
          "the average), but the gradient of the loss in the tied weight is the SUM, T times the average; "
          "a projected step with rate η is the tied gradient step with rate η/T.",
)
