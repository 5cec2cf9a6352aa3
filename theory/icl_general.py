"""ICL derivations for symbolic sizes (issue 34): von Oswald's GD layer for every ``d, N``, the full
Hessian of the ZFB loss at the origin over every LSA weight for every ``d``, and the general-target
risk (ZFB Thm 4.2) for every ``d, N, M``.

Each derivation works with ``MatrixSymbol``s of symbolic shape and the Gaussian moment calculus of
:mod:`theory.gaussian` (Isserlis in index form, read back by ``MatrixExpr.from_index_summation``);
each inherits the fixed-size derivation of :mod:`theory.icl` (prefix ``at_d2...``) and adds an
obligation that the general result, specialised to those sizes, equals it exactly. The typed-in
steps (premises) are named in each docstring.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import sympy as sp
from sympy.matrices.expressions.matexpr import MatrixElement

from theory import icl as ti
from theory.derivation import Derivation, DerivationBuilder
from theory.gaussian import _matrix_image, _replace_pair, isserlis, second_moment, tidy, zfb_gamma
from theory.sizes import _canon, derive_gd_step, eval_index_sums, instantiate

__all__ = [
    "derive_gd_one_step_general",
    "gd_layer_general",
    "derive_nonconvex_general",
    "derive_general_target_risk_general",
    "matrix_function_scalar",
    "evaluate",
]


def _sizes():
    return sp.symbols("d N", integer=True, positive=True)


# ------------------------------------------------------------------------------------------------
# icl.gd_one_step: von Oswald's layer for symbolic d, N


@lru_cache(maxsize=None)
def derive_gd_one_step_general() -> Derivation:
    """von Oswald et al. (2023) for symbolic ``d`` and ``N``: with tokens as columns
    ``E = [X; y]`` (``X`` d×N, ``y`` 1×N), ``W_K = W_Q = [[I_d, 0], [0, 0]]``,
    ``W_V = [[0, 0], [W_0, −1]]`` (``W_0`` 1×d) and ``P = (η/N) I``, the layer
    ``E ↦ E + P W_V E (W_K E)ᵀ W_Q E`` (keys/values over the context) maps the labels to
    ``y − ΔW X`` and leaves ``X``; the query ``(x_q, −W_0x_q)`` ends with label ``−(W_0 + ΔW)x_q``,
    where ``ΔW = −(η/N)(W_0X − y)Xᵀ`` is the GD step of :func:`theory.sizes.derive_gd_step`
    (inherited as ``gd_step.*``: index and matrix-calculus routes). Also one ``Γ⁻¹``-preconditioned
    step from 0 predicts ``x_qᵀΓ⁻¹h``, ``h = Xyᵀ/N``, for a symmetric ``Γ`` (symbolic ``d``, ``N``).

    Derived: ``block_collapse`` of the block products. Typed in: the layer and its weights (the
    construction), ``Δw = −η∇L`` (in ``derive_gd_step``). Cross-check: :func:`theory.icl.derive_gd_one_step`
    at ``d = N = 2`` inherited (``at_d2_N2.*``); the general labels and query output specialised there
    equal its tokens. ``result``: ``{"labels": 1×N row, "query_label": 1×1}``; facts ``symbols``,
    ``sizes``, ``delta_W``.

    >>> D = derive_gd_one_step_general()
    >>> D.result["labels"]
    (eta/N)*(W_0*X - y)*X.T*X + y
    """
    d, N = _sizes()
    eta = sp.Symbol("eta", positive=True)
    X, y = sp.MatrixSymbol("X", d, N), sp.MatrixSymbol("y", 1, N)
    W0, xq = sp.MatrixSymbol("W_0", 1, d), sp.MatrixSymbol("x_q", d, 1)
    G = sp.MatrixSymbol("Gamma", d, d)
    Z = sp.ZeroMatrix
    b = DerivationBuilder("One linear-attention layer = one GD step, symbolic d and N")
    b.symbols(d="input dimension (symbolic)", N="number of context tokens (symbolic)", X="context inputs (d × N, columns)",
              y="context labels (1 × N)", W_0="initial weights (1 × d)", x_q="query (d × 1)", eta="step size",
              Gamma="a symmetric preconditioner (standing for Γ_N)")
    gd = derive_gd_step()
    b.inherit(gd, "gd_step")
    w, Xg, yg, etag = (gd.facts[k] for k in ("w", "X", "y", "eta"))
    dW = gd.facts["target"].xreplace({w: W0, Xg: X, yg: y, etag: eta, gd.facts["sizes"][0]: d, gd.facts["sizes"][1]: N})
    dW = b.step("ΔW = −(η/N)(W_0X − y)Xᵀ (derive_gd_step at w = W_0)", dW)
    WK = b.define("W_K = W_Q = [[I_d, 0], [0, 0]]", sp.BlockMatrix([[sp.Identity(d), Z(d, 1)], [Z(1, d), Z(1, 1)]]))
    WV = b.define("W_V = [[0, 0], [W_0, −1]]", sp.BlockMatrix([[Z(d, d), Z(d, 1)], [W0, -sp.Identity(1)]]))
    E = b.define("Context tokens as columns E = [X; y]; P = (η/N) I", sp.BlockMatrix([[X], [y]]))
    P = eta / N
    new = b.step("E + P W_V E (W_K E)ᵀ W_Q E (block_collapse)", sp.block_collapse(E + P * WV * E * (WK * E).T * WK * E))
    xs = new.blocks[0, 0]
    labels = b.step("Its label row (block (2, 1))", new.blocks[1, 0])
    b.obligation("inputs_unchanged", _canon(xs - X), description="the x-part of every token is unchanged")
    b.obligation("labels_are_y_minus_dW_X", _canon(labels - (y - dW * X)), description="new labels y − ΔW X")
    q = b.define("Query token (x_q, −W_0x_q)", sp.BlockMatrix([[xq], [-W0 * xq]]))
    qn = b.step("Query update (keys/values over the context only)", sp.block_collapse(q + P * WV * E * (WK * E).T * WK * q))
    qlab = b.step("The query's updated label (block (2, 1))", qn.blocks[1, 0])
    b.obligation("query_input_unchanged", _canon(qn.blocks[0, 0] - xq))
    b.obligation("query_reads_updated_prediction", _canon(-qlab - (W0 + dW) * xq),
                 description="−(query's updated label) = (W_0 + ΔW)x_q")
    # preconditioned step from 0 (η = 1) with a symmetric Γ: w_1 = −Γ⁻¹∇L(0) (∇L as a column: −Δwᵀ/η)
    grad0 = b.step("∇L(0) as a column: −(ΔW at W_0 = 0, η = 1)ᵀ", (-(dW.xreplace({W0: Z(1, d), eta: 1}))).T.doit())
    w1 = b.step("One Γ⁻¹-preconditioned step from 0: w_1 = −Γ⁻¹∇L(0)", (-G.I * grad0).doit())
    h = X * y.T / N
    pres = b.step("x_qᵀw_1 − x_qᵀΓ⁻¹h, h = (1/N)Σ y_ix_i = Xyᵀ/N", _canon(xq.T * w1 - xq.T * G.I * h))
    b.obligation("preconditioned_step_is_lsa", pres, description="one Γ⁻¹-preconditioned step from 0 predicts x_qᵀΓ⁻¹h")
    # cross-check against the fixed-size derivation
    fixed = ti.derive_gd_one_step(2, 2)
    b.inherit(fixed, "at_d2_N2")
    s = fixed.facts["symbols"]
    vals = {"X": sp.Matrix.hstack(*s["xs"]), "y": sp.Matrix([s["ys"]]), "W_0": s["W0"], "x_q": s["xq"]}
    at = {d: 2, N: 2}
    lab2 = instantiate(labels.xreplace({eta: s["eta"]}), at, vals)
    q2 = instantiate(qlab.xreplace({eta: s["eta"]}), at, vals)
    b.obligation("general_at_d2_N2_equals_fixed",
                 [lab2[0, j] - fixed.result[j][2] for j in range(2)] + [sp.expand(q2[0, 0] - _fixed_query(fixed))],
                 description="labels and query output at d = N = 2 equal derive_gd_one_step(2, 2)'s")
    for k, v in (("symbols", {"X": X, "y": y, "W_0": W0, "x_q": xq, "eta": eta, "Gamma": G}), ("sizes", (d, N)),
                 ("delta_W", dW)):
        b.fact(k, v)
    return b.done({"labels": labels, "query_label": qlab})


def _fixed_query(fixed: Derivation):
    """The query's updated label in :func:`theory.icl.derive_gd_one_step`: −(W_0 + ΔW)x_q + its residual."""
    s = fixed.facts["symbols"]
    dW = next(st.expr for st in fixed.steps if st.text.startswith("ΔW = "))
    return sp.expand(-((s["W0"] + dW) * s["xq"])[0, 0] - fixed.facts["query_residual"])


def gd_layer_general(X, y, x_q, W0, eta):
    """Evaluate :func:`derive_gd_one_step_general`'s closed forms at numbers (NumPy, one prompt):
    ``X`` (d, N) columns, ``y`` (N,), ``x_q`` (d,), ``W0`` (d,). Returns (new labels (N,), prediction)
    where the prediction is minus the query's updated label.

    >>> import numpy as np
    >>> lab, pred = gd_layer_general(np.eye(2), np.array([1.0, 2.0]), np.array([1.0, 0.0]), np.zeros(2), 1.0)
    >>> lab.tolist(), float(pred)
    ([0.5, 1.0], 0.5)
    """
    import numpy as np

    X = np.asarray(X, float)
    D = derive_gd_one_step_general()
    vals = {"X": X, "y": np.asarray(y, float)[None], "W_0": np.asarray(W0, float)[None],
            "x_q": np.asarray(x_q, float)[:, None], "eta": float(eta), "N": X.shape[1], "d": X.shape[0]}
    lab, ql = (evaluate(D.result[k], vals) for k in ("labels", "query_label"))
    return np.asarray(lab, float)[0], -float(np.asarray(ql, float).reshape(-1)[0])


# ------------------------------------------------------------------------------------------------
# icl.nonconvex: the Hessian of the ZFB loss at the origin over every weight, symbolic d


def _index_expectation(t, gauss: dict) -> list[Any]:
    """``E`` of a 1×1 matrix product ``t`` whose Gaussian factors are entries of the symbols in
    ``gauss`` (``symbol -> cov(u, v)`` of two of its entries; different symbols independent): ``t``
    in index form, Isserlis over its Gaussian entries, each pairing term read back as a matrix
    expression (a trace) by ``from_index_summation``."""
    c0, m0 = t.as_coeff_mmul()
    s = m0[0, 0]
    body, lims = (s.function, s.limits) if isinstance(s, sp.Sum) else (s, ())
    zero = {x: 0 for x, lo, hi in lims if lo == hi}  # the indices of 1-wide shapes
    body, lims = body.xreplace(zero), tuple(lm for lm in lims if lm[0] not in zero)
    gv, coef = [], sp.Integer(1)
    for f in sp.Mul.make_args(body):
        base, ex = f.as_base_exp()
        if isinstance(base, MatrixElement) and base.parent in gauss:
            gv += [base] * int(ex)
        else:
            coef *= f

    def cov(u, v):
        return gauss[u.parent](u, v) if u.parent == v.parent else sp.Integer(0)

    out = []
    for term in sp.Add.make_args(sp.expand(sp.Add(*isserlis(gv, cov)))):
        if term == 0:
            continue
        r = sp.MatrixExpr.from_index_summation(sp.Sum(coef * term, *lims) if lims else coef * term)
        out.append(c0 * (sp.Trace(r.parent) if isinstance(r, MatrixElement) else r))
    return out


def _eigen_apply(e, q, lam, L):
    """Use ``Λq = λq`` (so ``qᵀΛ = λqᵀ``): ``qᵀΛᵏ → λᵏqᵀ`` and ``Λᵏq → λᵏq`` inside every product."""
    def fix(m):
        c, mm = m.as_coeff_mmul()
        args = list(mm.args) if isinstance(mm, sp.MatMul) else [mm]
        changed = True
        while changed:
            changed = False
            for k in range(len(args) - 1):
                a, b_ = args[k], args[k + 1]
                for vec, mat, left in ((q.T, b_, True), (q, a, False)):
                    if (args[k] if left else args[k + 1]) != vec:
                        continue
                    power = 1 if mat == L else (int(mat.exp) if isinstance(mat, sp.MatPow) and mat.base == L else 0)
                    if power:
                        c = c * lam**power
                        args[k:k + 2] = [vec]
                        changed = True
                        break
                if changed:
                    break
        return c * sp.MatMul(*args).doit() if len(args) > 1 else c * args[0]
    return sp.expand(e).replace(lambda t: isinstance(t, sp.MatMul), fix)


@lru_cache(maxsize=None)
def derive_nonconvex_general() -> Derivation:
    """The Hessian at the origin of the ZFB population loss ``L = ½E(ŷ − y_q)²`` over EVERY weight
    of ``W^{PV}, W^{KQ}`` (``2(d+1)²`` of them), for symbolic ``d`` and ``N`` (``ρ = N``).

    Steps: the block form ``ŷ = [w21ᵀ, w22](EEᵀ/N)[W11; w21'ᵀ]x_q`` (inherited from
    :func:`theory.icl.derive_lsa_prediction_form_general`, ``prediction_form.*``; the blocks
    ``P11, p12, k12, k22`` do not enter) with ``y = wᵀX`` and ``XXᵀ = NΛ̂``; ŷ is bilinear in the
    weights, so ``L(tθ) = ½t⁴E ŷ² − t²E[ŷ y_q] + ½E y_q²`` and the Hessian at 0 is that of the
    quadratic part ``L₂ = −E[ŷ y_q]``; ``E[Λ̂] = Λ`` (each term is linear in Λ̂); ``E`` over
    ``(w, x_q)`` by Isserlis in index form (odd terms vanish), giving
    ``L₂ = −w22 tr(Λ²W11) − w21ᵀΛ²w21'``; the Hessian action ``Hθ = ∇L₂`` (matrix calculus);
    eigenvectors checked symbolically: ``(w22, W11) = (1, ±Λ²/F)`` with eigenvalue ``∓F``,
    ``F = √tr(Λ⁴) = ‖Λ²‖_F``; ``(w21, w21') = (q, ±q)`` with ``Λq = λq`` and eigenvalue ``∓λ²``;
    ``W11 ⟂ Λ²`` and the absent blocks with eigenvalue 0; the count ``2 + 2d + (d² − 1) + (d+1)²
    = 2(d+1)²`` (the shapes); ``F² − λ_k⁴ = Σ_i (1 − δ_ik)λ_i⁴`` (a delta sum) so ``λ_min = −F``.

    Typed in: the data model and independence of ``X, w, x_q``; Isserlis; ``Λᵀ = Λ``; the spectral
    theorem (an orthonormal eigenbasis ``q_1..q_d`` of Λ, ``tr Λ⁴ = Σλ_i⁴``); that orthogonal
    eigenvectors as many as the dimension exhaust the spectrum; a sum of nonnegative terms is ≥ 0;
    that the Hessian at 0 is that of the degree-2 part (``ŷ(tθ) = t²ŷ(θ)`` is an obligation); the
    kernel count ``d² − 1`` of ``W11 ⟂ Λ²`` (the orthogonal complement of one non-zero matrix).
    Cross-check: :func:`theory.icl.derive_nonconvex` (d = 2, the (w22, W11) Hessian) inherited as
    ``at_d2.*``: the general ``L₂`` at ``d = 2`` has that Hessian and that smallest eigenvalue.
    ``result``: the smallest eigenvalue ``−√tr(Λ⁴)``; facts ``L2``, ``hessian_action``, ``spectrum``,
    ``Lambda``, ``sizes``, ``weights``.

    >>> derive_nonconvex_general().result
    -sqrt(Trace(Lambda**4))
    """
    d, N = _sizes()
    b = DerivationBuilder("Full Hessian of the ZFB loss at the origin over every LSA weight, symbolic d")
    b.symbols(d="dimension (symbolic)", N="prompt length (symbolic), ρ = N", Lambda="covariance of x (symmetric)",
              Lambda_hat="(1/N) X Xᵀ", w="task vector, N(0, I_d)", x_q="query, N(0, Λ)",
              w21="last row of W^PV, first d entries (1 × d)", w22="W^PV_{d+1,d+1}", W11="W^KQ's top-left d × d block",
              w21p="w21': last row of W^KQ, first d entries (1 × d)", F="‖Λ²‖_F = √tr(Λ⁴)", q="a unit eigenvector of Λ",
              lambda_="its eigenvalue", s="a sign ±1")
    pf = ti.derive_lsa_prediction_form_general()
    b.inherit(pf, "prediction_form")
    blk = next(st.expr for st in pf.steps if st.text.startswith("The block form"))
    rho = next(s for s in blk.free_symbols if s.name == "rho")
    m = {x.name: x for x in blk.atoms(sp.MatrixSymbol)}
    X, y, xq = m["X"], m["y"], m["x_q"]
    dd, NN = X.shape
    w21, w22, W11, w21p = m["w21"], m["w22"], m["W11"], m["w21'"]
    w = sp.MatrixSymbol("w", dd, 1)
    L, Lh = sp.MatrixSymbol("Lambda", dd, dd), sp.MatrixSymbol("Lambda_hat", dd, dd)
    b.assume("ρ = N; noise-free labels y = wᵀX; x_i, x_q ~ N(0, Λ), w ~ N(0, I_d), all independent; L = ½E(ŷ − wᵀx_q)²", key="noise-free Gaussian setting")
    yh = b.step("ŷ with ρ = N and y = wᵀX", blk.xreplace({rho: NN, y: w.T * X}))
    tt = sp.Symbol("t", real=True)
    scaled = yh.xreplace({v: tt * v for v in (w21, w22, W11, w21p)})
    b.obligation("yhat_homogeneous_degree_2", sp.expand((scaled - tt**2 * yh).doit()),
                 description="ŷ(tθ) = t²ŷ(θ): every term has one factor from W^PV's last row and one from W^KQ's first d columns")
    b.assume("ŷ(tθ) = t²ŷ(θ) (the obligation above) gives L(tθ) = ½t⁴E ŷ(θ)² − t²E[ŷ(θ)y_q] + ½E y_q² (the square "
             "expanded, E linear); the Hessian at 0 of a polynomial is that of its degree-2 part, so ∇²L(0) is the Hessian of "
             "L₂(θ) = −E[ŷ(θ) y_q]", key="homogeneity ŷ(tθ) = t²ŷ(θ)")
    prod = b.step("ŷ·y_q, y_q = wᵀx_q, expanded; X Xᵀ = N Λ̂",
                  _replace_pair(sp.expand((yh * (w.T * xq)).doit()), X, X.T, NN * Lh))
    i = sp.Symbol("i", integer=True)
    hat = b.step("E[Λ̂] = (1/N) Σ_i E[x_i x_iᵀ] = Λ (the count is a sum over i)",
                 tidy(eval_index_sums(sp.Sum(1, (i, 1, NN))) * second_moment(L) / NN, [L]))
    nonlinear = [t for t in (prod.args if isinstance(prod, sp.MatAdd) else (prod,))
                 if sum(1 for f in sp.MatMul.make_args(t) if f.has(Lh)) > 1 or t.has(sp.MatPow(Lh, 2))]
    b.obligation("linear_in_Lambda_hat", sp.Integer(len(nonlinear)), description="every term has at most one factor Λ̂")
    b.assume("X is independent of (w, x_q) and each term is linear in Λ̂: E_X replaces Λ̂ by E[Λ̂]", key="independence of X")
    prod = b.step("E over X", prod.xreplace({Lh: hat}))
    gauss = {w: lambda u, v: sp.KroneckerDelta(u.i, v.i), xq: lambda u, v: L[u.i, v.i]}
    terms = prod.args if isinstance(prod, sp.MatAdd) else (prod,)
    parts = [p for t in terms for p in _index_expectation(t, gauss)]
    u = sp.Symbol("u", real=True)
    Eyy = b.step("E over (w, x_q): Isserlis in index form, each pairing read back as a trace (odd terms vanish)",
                 tidy(sp.Add(*parts), [L]).xreplace({sp.Trace(w22): u}))
    L2 = b.step("L₂ = −E[ŷ y_q] (u = w22)", -Eyy)
    b.obligation("quadratic_part", tidy(L2 + u * sp.Trace(L * L * W11) + sp.Trace(w21 * L * L * w21p.T), [L]),
                 description="L₂ = −w22 tr(Λ²W11) − w21ᵀΛ²w21'")
    parts_d = {name: sp.Add(*[sp.diff(t, v) for t in sp.Add.make_args(L2)]) for name, v in
               (("W11", W11), ("w21", w21), ("w21'", w21p))}
    Hact = {"w22": b.step("(Hθ)_{w22} = ∂L₂/∂w22", sp.diff(L2, u))}
    for name, e in parts_d.items():
        Hact[name] = b.step(f"(Hθ)_{name} = ∂L₂/∂{name} (matrix calculus, Λᵀ = Λ)", tidy(e, [L]))
    F = sp.sqrt(sp.Trace(L**4))
    eig = {}
    for s in (1, -1):
        vec = {u: 1, W11: s * L**2 / F}
        mu = b.step(f"(w22, W11) = (1, {'+' if s > 0 else '−'}Λ²/F): eigenvalue (Hθ)_{{w22}}/w22",
                    sp.simplify(tidy(Hact["w22"].xreplace(vec), [L])))
        res = tidy(Hact["W11"].xreplace(vec) - mu * vec[W11], [L])
        b.obligation(f"eigvec_w22_W11_sign{'+' if s > 0 else '-'}", [sp.simplify(mu + s * F), res],
                     description=f"H(1, {s:+d}Λ²/F) = {-s:+d}F·(1, {s:+d}Λ²/F)")
        eig[s] = mu
    q, lam = sp.MatrixSymbol("q", dd, 1), sp.Symbol("lambda", positive=True)
    b.assume("Λq = λq (q an eigenvector of Λ; qᵀΛ = λqᵀ by Λᵀ = Λ)", key="eigenvector q")
    for s in (1, -1):
        vec = {w21: q.T, w21p: s * q.T}
        r1 = _eigen_apply(Hact["w21"].xreplace(vec).doit() - (-s * lam**2) * q.T, q, lam, L)
        r2 = _eigen_apply(Hact["w21'"].xreplace(vec).doit() - (-s * lam**2) * s * q.T, q, lam, L)
        b.step(f"(w21, w21') = (qᵀ, {'+' if s > 0 else '−'}qᵀ): Hθ − ({'−' if s > 0 else '+'}λ²)θ", sp.Tuple(r1, r2))
        b.obligation(f"eigvec_w21_sign{'+' if s > 0 else '-'}", [_canon(r1), _canon(r2)],
                     description=f"H(q, {s:+d}q) = {-s:+d}λ²(q, {s:+d}q)")
    V = sp.MatrixSymbol("V", dd, dd)
    zero_on = b.step("θ = (w22 = 0, W11 = V) with tr(Λ²V) = 0: (Hθ)_{w22}",
                     Hact["w22"].xreplace({W11: V}))
    b.obligation("zero_eigvecs_W11_perp", [sp.expand(zero_on.xreplace({sp.Trace(L**2 * V): 0})),
                                           _canon(Hact["W11"].xreplace({u: 0}))],
                 description="W11 ⟂ Λ² (w22 = 0) is in the kernel")
    b.obligation("absent_blocks_in_kernel", sp.Integer(len(set(pf.facts["params_used"]) ^ {"w21", "w22", "W11", "w21'"})),
                 description="P11, p12, k12, k22 do not enter ŷ (the prediction form): H vanishes on them")
    shapes = {"P11": (dd, dd), "p12": (dd, 1), "w21": (1, dd), "w22": (1, 1),
              "W11": (dd, dd), "k12": (dd, 1), "w21'": (1, dd), "k22": (1, 1)}
    total = b.step("Number of weights (from the block shapes)", sp.expand(sum(r * c for r, c in shapes.values())))
    counted = b.step("Eigenvectors found: 2 (w22, W11) + 2d (w21, w21') + (d² − 1) (W11 ⟂ Λ²) + (d + 1)² (absent blocks)",
                     sp.expand(2 + 2 * dd + (dd**2 - 1) + sum(shapes[k][0] * shapes[k][1] for k in ("P11", "p12", "k12", "k22"))))
    b.obligation("eigenbasis_complete", sp.expand(total - counted), description="as many eigenvectors as weights: 2(d+1)²")
    b.assume("Spectral theorem: Λ has an orthonormal eigenbasis q_1..q_d; the eigenvectors above are mutually orthogonal "
             "(disjoint blocks, q_i ⟂ q_j, V ⟂ Λ²), so the spectrum is ±F, ±λ_i² and 0 with multiplicity 2d² + 2d", key="spectral theorem")
    k = sp.Symbol("k", integer=True)
    lv = sp.IndexedBase("lambda", positive=True)
    b.assume("tr Λ⁴ = Σ_i λ_i⁴ (eigenvalues λ_i of Λ)", key="tr Λ⁴ = Σ λ_i⁴")
    gap = b.step("F² − λ_k⁴ = Σ_i λ_i⁴ − Σ_i δ_ik λ_i⁴ (delta sum evaluated, k ∈ [1, d])",
                 eval_index_sums(sp.Sum(sp.KroneckerDelta(i, k) * lv[i] ** 4, (i, 1, dd)), {k: (1, dd)}))
    b.obligation("delta_sum_is_lambda_k4", gap - lv[k] ** 4, description="Σ_i δ_ik λ_i⁴ = λ_k⁴")
    b.assume("F² − λ_k⁴ = Σ_i (1 − δ_ik)λ_i⁴ is a sum of nonnegative terms: F ≥ λ_k², so −F ≤ −λ_k² for every k", key="F ≥ λ_k²")
    mn = eig[1]
    # cross-check at d = 2 against the (w22, W11) Hessian of derive_nonconvex(2)
    fixed = ti.derive_nonconvex(2)
    b.inherit(fixed, "at_d2")
    Lf, Hf = fixed.facts["Lambda"], fixed.facts["hessian"]
    U = sp.Matrix(2, 2, lambda r, c: sp.Symbol(f"U_{r + 1}{c + 1}", real=True))
    L2_at = instantiate(L2.xreplace({w21: sp.ZeroMatrix(1, dd), w21p: sp.ZeroMatrix(1, dd)}), {dd: 2},
                        {"Lambda": Lf, "W11": U})
    H2 = sp.hessian(L2_at, [u] + list(U))
    b.obligation("general_at_d2_equals_fixed", [H2 - Hf, sp.expand(instantiate(mn, {dd: 2}, {"Lambda": Lf}) ** 2 - fixed.result ** 2)],
                 description="the general L₂ at d = 2 has derive_nonconvex(2)'s (w22, W11) Hessian and smallest eigenvalue")
    spectrum = {"minus_F": eig[1], "plus_F": eig[-1], "w21_pairs": (-lam**2, lam**2),
                "zero_multiplicity": sp.expand(total - 2 - 2 * dd)}
    for key, v in (("L2", L2), ("hessian_action", Hact), ("spectrum", spectrum), ("Lambda", L), ("sizes", (dd, NN)),
                   ("weights", {"w21": w21, "w22": u, "W11": W11, "w21'": w21p}), ("F", F)):
        b.fact(key, v)
    return b.done(mn)


# ------------------------------------------------------------------------------------------------
# icl.general_target_risk: ZFB Thm 4.2 for symbolic d, N, M


def matrix_function_scalar(e, scalars: dict) -> Any:
    """Read a matrix expression built from commuting symmetric matrices (``scalars``: matrix symbol
    -> scalar symbol), ``Identity``, transposes of them and scalars as the scalar function it applies
    to each eigenvalue (functional calculus: ``p(Λ) = q(Λ)`` when ``p = q``), the reading
    :func:`theory.gaussian.commuting_trace_image` applies inside a trace. Raises ``ValueError`` on any
    other matrix.

    >>> d = sp.Symbol("d", integer=True, positive=True)
    >>> L, G = sp.MatrixSymbol("Lambda", d, d), sp.MatrixSymbol("G", d, d)
    >>> l, g = sp.symbols("l g")
    >>> matrix_function_scalar(2 * L * G * L + sp.Identity(d), {L: l, G: g})
    2*g*l**2 + 1
    """
    return _matrix_image(e, scalars, None)


@lru_cache(maxsize=None)
def derive_general_target_risk_general() -> Derivation:
    """ZFB Thm 4.2 for symbolic ``d``, ``N`` and ``M``: the predictor ``ŷ = x_qᵀGh``, ``G = Γ_N⁻¹``,
    ``h = (1/M)Σ_{i≤M} y_ix_i`` of i.i.d. pairs independent of the query ``(x_q, y_q)``, has excess
    risk ``E(ŷ − y)² − min_w E(⟨w,x⟩ − y)² = (1/M)tr(ΣΓ_N⁻²Λ) + (1/N²)[aᵀΓ_N⁻²Λ³a + 2tr(Λ)aᵀΓ_N⁻²Λ²a
    + tr(Λ)²aᵀΓ_N⁻²Λa]`` with ``a = Λ⁻¹E[xy]``, ``Σ = Cov(xy)``.

    Steps: ``E[hhᵀ]`` as ``(1/M²)Σ_{i,j}`` with the ``i = j`` and ``i ≠ j`` counts ``M`` and
    ``M(M − 1)`` as delta sums; the risk in index form with the query's and h's second moments,
    read back as traces (``from_index_summation``); ``min_w`` by matrix calculus (gradient ``2Λv −
    2Λa``, zero at ``v = a``); the excess as ``tr(ΣA₁)/M + tr(PA₂)`` with ``P = aaᵀ``
    (``A₁ = M·∂/∂Σ``, ``A₂ = ∂/∂P``, matrix calculus, and the split checked); ``ΓΛ = ΛΓ`` (tidy),
    so ``Γ⁻¹Λ = ΛΓ⁻¹``; ``A₁``, ``A₂`` read as scalar functions of Λ's eigenvalue ``l`` with
    ``g = 1/γ(l)``, ``γ = (1 + 1/N)l + t/N`` (functional calculus) equal ``g²l`` and
    ``g²l(l + t)²/N²``: the corrected form.

    Typed in: the laws (``E[xxᵀ] = Λ``, ``E[xy] = Λa``, ``Σ = E[y²xxᵀ] − ΛaaᵀΛ``, independence of
    the pairs and of the query), ``Λᵀ = Λ``, ``Σᵀ = Σ``, ``Λ ≻ 0`` (``Λ``, ``Γ_N`` invertible; the
    stationary point of the convex quadratic is its minimum), the functional calculus for the
    symmetric ``Λ`` (``G = f(Λ)``, ``f(l) = 1/γ(l)``, ``t = tr Λ`` a constant). Only second moments of
    the law enter. Also: the lecture notes' form (``Λ⁻²Λ`` everywhere) differs for every ``d, N, M``
    (at ``Λ = I_d`` with the linear target ``y = aᵀx``, ``Σ = aaᵀ + ‖a‖²I``; also its coefficient of
    ``‖a‖²``). Cross-check: :func:`theory.icl.derive_general_target_risk` (d = 2)
    inherited as ``at_d2.*``; the general result at ``d = 2`` equals its result exactly.
    ``result``: the excess risk (a scalar matrix-expression in ``Lambda``, ``Sigma``, ``a``, ``N``,
    ``M``); facts ``symbols``, ``sizes``, ``A1``, ``A2``, ``scalar_forms``, ``corrected``.

    >>> D = derive_general_target_risk_general()
    >>> D.facts["scalar_forms"]["A1"]
    g**2*l
    """
    d, N = _sizes()
    M = sp.Symbol("M", integer=True, positive=True)
    L, S, P = (sp.MatrixSymbol(n, d, d) for n in ("Lambda", "Sigma", "P"))
    G, Gm = sp.MatrixSymbol("G", d, d), sp.MatrixSymbol("Gamma", d, d)
    a = sp.MatrixSymbol("a", d, 1)
    Ey2 = sp.Symbol("m_yy", positive=True)
    sym = [L, S, P, G]
    b = DerivationBuilder("Risk of the trained LSA on a general target law (ZFB Thm 4.2), symbolic d, N, M")
    b.symbols(d="dimension (symbolic)", N="training prompt length (symbolic)", M="test context length (symbolic)",
              Lambda="E[xxᵀ] (symmetric, positive definite)", a="Λ⁻¹E[xy]", Sigma="Cov(xy) (symmetric)",
              P="aaᵀ (so aᵀAa = tr(AP))", G="Γ_N⁻¹ (symmetric)", Gamma="Γ_N = (1 + 1/N)Λ + (tr Λ/N)I",
              m_yy="E y²", l="an eigenvalue of Λ", g="the matching eigenvalue of G", t="tr Λ")
    b.assume("(x_i, y_i)_{i≤M} and (x_q, y_q) i.i.d., x ~ N(0, Λ), E[xy] = Λa, Σ = Cov(xy) = E[y²xxᵀ] − ΛaaᵀΛ; "
             "h = (1/M)Σ_i y_ix_i; ŷ = x_qᵀGh; Λᵀ = Λ, Σᵀ = Σ, Gᵀ = G; P = aaᵀ", key="i.i.d. Gaussian setting")
    i, j = sp.symbols("i j", integer=True)
    dlt = sp.KroneckerDelta(i, j)
    same = b.define("i = j: E[y_i²x_ix_iᵀ] = Σ + ΛPΛ (definition of Σ)", S + L * P * L)
    cross = b.define("i ≠ j: E[y_ix_i]E[y_jx_j]ᵀ = ΛaaᵀΛ = ΛPΛ (independence)", L * P * L)
    n_same = b.step("Pairs with i = j: Σ_{i,j=1}^{M} δ_ij", eval_index_sums(sp.Sum(dlt, (i, 1, M), (j, 1, M))))
    n_cross = b.step("Pairs with i ≠ j: Σ_{i,j=1}^{M} (1 − δ_ij)", sp.factor(eval_index_sums(sp.Sum(1 - dlt, (i, 1, M), (j, 1, M)))))
    Ehh = b.step("E[hhᵀ] = (1/M²)(M·same + M(M − 1)·cross)", tidy((n_same * same + n_cross * cross) / M**2, sym))
    b.obligation("Ehh", tidy(Ehh - (S / M + L * P * L), sym), description="E[hhᵀ] = Σ/M + ΛaaᵀΛ")
    H, m = sp.MatrixSymbol("H", d, d), sp.MatrixSymbol("m", d, 1)
    p_, q_, r_, s_ = sp.symbols("p q r s", integer=True)
    lim = lambda *x: tuple((v, 0, d - 1) for v in x)  # noqa: E731
    b.assume("E(x_qᵀGh − y_q)² = Σ G_pq G_rs E[x_p x_r] E[h_q h_s] − 2Σ G_pq E[y_q x_p] E[h_q] + E y² (the query is "
             "independent of h), with E[x xᵀ] = Λ, E[h hᵀ] = H, E[y x] = E[h] = m = Λa", key="independent query")
    quad = sp.MatrixExpr.from_index_summation(sp.Sum(G[p_, q_] * G[r_, s_] * L[p_, r_] * H[q_, s_], *lim(p_, q_, r_, s_)))
    lin = sp.MatrixExpr.from_index_summation(sp.Sum(m[p_, 0] * G[p_, q_] * m[q_, 0], *lim(p_, q_)))
    lin = sp.Trace(lin.parent) if isinstance(lin, MatrixElement) else lin
    risk = b.step("Read back as traces", tidy(quad, sym) - 2 * lin + Ey2)
    risk = risk.xreplace({H: Ehh, m: L * a})
    risk = b.step("Insert E[hhᵀ] and m = Λa; aaᵀ = P (cyclicity of the trace)", tidy(_aat_to_P(tidy(risk, sym), a, P), sym))
    v = sp.MatrixSymbol("v", d, 1)
    lsq = b.step("E(vᵀx − y)² = vᵀΛv − 2vᵀΛa + E y² (the same second moments)",
                 sp.Trace(v.T * L * v) - 2 * sp.Trace(v.T * L * a) + Ey2)
    grad = b.step("∂/∂v (matrix calculus, Λᵀ = Λ)", tidy(_diff(lsq, v), [L]))
    b.obligation("least_squares_at_a", _canon(grad.xreplace({v: a})), description="the gradient vanishes at v = a")
    b.assume("Λ ≻ 0: the quadratic is strictly convex, v = a is its minimiser", key="strict convexity (Λ ≻ 0)")
    mn = b.step("min_v E(vᵀx − y)² = E y² − tr(ΛP)", tidy(_aat_to_P(tidy(lsq.xreplace({v: a}), [L]), a, P), sym))
    excess = b.step("Excess risk E(ŷ − y)² − min", tidy(risk - mn, sym))
    A1 = b.step("A₁ = M·∂(excess)/∂Σ (matrix calculus, symmetric)", tidy(M * _diff(excess, S), sym).T.doit())
    A2 = b.step("A₂ = ∂(excess)/∂P", tidy(_diff(excess, P), sym).T.doit())
    A1, A2 = tidy(A1, sym), tidy(A2, sym)
    b.obligation("excess_is_linear_in_Sigma_P", tidy(excess - sp.Trace(S * A1) / M - sp.Trace(P * A2), sym),
                 description="excess = tr(ΣA₁)/M + tr(PA₂)")
    Gam = zfb_gamma(L, N)
    b.obligation("Gamma_commutes_with_Lambda", tidy(Gam * L - L * Gam, [L]), description="Γ_NΛ = ΛΓ_N")
    comm = b.step("Γ⁻¹(ΛΓ − ΓΛ)Γ⁻¹ expanded = Γ⁻¹Λ − ΛΓ⁻¹", _canon(Gm.I * (L * Gm - Gm * L) * Gm.I))
    b.obligation("inverse_commutes", _canon(comm - (Gm.I * L - L * Gm.I)),
                 description="ΓΛ = ΛΓ gives Γ⁻¹Λ = ΛΓ⁻¹")
    l, g, t = sp.symbols("l g t", positive=True)
    b.assume("Functional calculus for symmetric Λ: G = Γ_N⁻¹ = f(Λ), f(l) = 1/((1 + 1/N)l + t/N), t = tr Λ; matrices "
             "built from Λ, G and I are p(Λ) for a rational p, and p(Λ) = q(Λ) when p = q on the eigenvalues", key="functional calculus")
    gam = (1 + 1 / N) * l + t / N
    f1 = b.step("A₁ as a function of the eigenvalue l (g for G)", sp.expand(matrix_function_scalar(A1, {L: l, G: g})))
    f2 = b.step("A₂ as a function of l", sp.expand(matrix_function_scalar(A2, {L: l, G: g})))
    c1, c2 = g**2 * l, g**2 * l * (l + t) ** 2 / N**2
    b.obligation("variance_term", sp.cancel((f1 - c1).subs(g, 1 / gam)), description="A₁ = Γ_N⁻²Λ")
    b.obligation("bias_term", sp.cancel((f2 - c2).subs(g, 1 / gam)),
                 description="A₂ = (1/N²)(Γ_N⁻²Λ³ + 2tr(Λ)Γ_N⁻²Λ² + tr(Λ)²Γ_N⁻²Λ)")
    Gi = Gam.I
    tr = sp.Trace(L)
    corrected = (sp.Trace(S * Gi**2 * L) / M + (sp.Trace(a.T * Gi**2 * L**3 * a) + 2 * tr * sp.Trace(a.T * Gi**2 * L**2 * a)
                                                 + tr**2 * sp.Trace(a.T * Gi**2 * L * a)) / N**2)
    b.define("Corrected Thm 4.2 (matrix form)", corrected)
    # lecture notes' form at Λ = I_d, Σ = 0 (every d, N): bias coefficient (1 + 2t + t²)/(lN²) against c2
    stated2 = (1 + 2 * t + t**2) / (l * N**2)
    diff_I = b.step("Bias coefficient minus the lecture notes' (Λ⁻²Λ norms) at Λ = I_d (l = 1, t = d)",
                    sp.factor((stated2 - c2.subs(g, 1 / gam)).subs({l: 1, t: d})))
    b.obligation("stated_form_differs", diff_I, "positive",
                 description="at Λ = I_d the notes' coefficient of ‖a‖² exceeds the derived one, for every d, N")
    # a real law as witness: the linear target y = aᵀx at Λ = I_d (Σ = Cov(x xᵀa) = aaᵀ + ‖a‖²I, tr Σ = (d+1)‖a‖²)
    b.assume("Linear target y = aᵀx, x ~ N(0, I_d): Σ = E[x xᵀ a aᵀ x xᵀ] − aaᵀ = (2aaᵀ + ‖a‖²I) − aaᵀ = aaᵀ + ‖a‖²I "
             "(Isserlis), so tr Σ = (d + 1)‖a‖², min_w E(⟨w,x⟩ − y)² = 0 and E y⁴ = 3‖a‖⁴ < ∞", key="linear-target moments",
             clauses=("notes_form_wrong",))  # the witness law of notes_form_wrong only
    diff_lin = b.step("(Notes' risk − derived risk)/‖a‖² for the linear target at Λ = I_d: (d + 1)(1 − A₁)/M + bias "
                      "coefficient difference (the notes' A₁ is Λ⁻²Λ = I)",
                      sp.factor(((d + 1) * (1 - c1.subs(g, 1 / gam)) / M).subs({l: 1, t: d}) + diff_I))
    b.obligation("stated_form_differs_linear_target", diff_lin, "positive",
                 description="at Λ = I_d, y = aᵀx (a ≠ 0; a real law, E y⁴ < ∞) the notes' risk exceeds the derived one, "
                             "for every d, N, M ≥ 1")
    result = b.step("Excess risk with G = Γ_N⁻¹ and P = aaᵀ inserted",
                    excess.xreplace({G: Gi}).xreplace({P: a * a.T}))
    # cross-check at d = 2
    fixed = ti.derive_general_target_risk(2)
    b.inherit(fixed, "at_d2")
    vals = {"Lambda": fixed.facts["Lambda"], "Sigma": fixed.facts["Sigma"], "a": fixed.facts["a"]}
    at2 = instantiate(result.xreplace({N: ti.Nsym, M: ti.Msym, Ey2: fixed.facts["m_yy"]}), {d: 2}, vals)
    b.obligation("general_at_d2_equals_fixed", sp.cancel(sp.together(at2 - fixed.result)),
                 description="the general excess risk at d = 2 is derive_general_target_risk(2)'s")
    for key, val in (("symbols", {"Lambda": L, "Sigma": S, "a": a, "m_yy": Ey2}), ("sizes", (d, N, M)), ("A1", A1),
                     ("A2", A2), ("scalar_forms", {"A1": f1, "A2": f2, "symbols": (l, g, t)}), ("corrected", corrected)):
        b.fact(key, val)
    return b.done(result)


def _aat_to_P(e, a, P):
    """Rotate each trace with one ``a`` and one ``aᵀ`` so that ``a`` opens it; where ``aᵀ`` follows, ``a aᵀ → P``."""
    def fix(tr):
        arg = tr.arg
        c, mm = arg.as_coeff_mmul()
        f = list(mm.args) if isinstance(mm, sp.MatMul) else [mm]
        if a in f and a.T in f:
            k = f.index(a)
            f = f[k:] + f[:k]  # a first (cyclicity)
            if len(f) > 1 and f[1] == a.T:
                return c * sp.Trace(sp.MatMul(P, *f[2:]).doit() if len(f) > 2 else P)
        return tr
    return e.replace(lambda x: isinstance(x, sp.Trace), fix)


def _diff(expr, X):
    """``∂expr/∂X`` term by term (SymPy's ``diff`` of a sum of traces by a matrix symbol is unreliable)."""
    parts = [sp.diff(t, X) for t in sp.Add.make_args(sp.expand(expr)) if t.has(X)]
    parts = [q for q in parts if isinstance(q, sp.MatrixExpr) and not isinstance(q, sp.ZeroMatrix)]
    return sp.MatAdd(*parts) if parts else sp.ZeroMatrix(*X.shape)


# ------------------------------------------------------------------------------------------------
# evaluating a general closed form at numbers (any size)


def evaluate(expr: Any, values: dict) -> Any:
    """Evaluate a (matrix) expression at numbers with NumPy float64: ``values`` maps names of matrix
    symbols and scalar symbols (sizes included) to arrays/numbers; ``Identity``, ``Trace``,
    ``Inverse``, powers (negative: inverse), transposes, sums and products.

    >>> d = sp.Symbol("d", integer=True, positive=True)
    >>> L = sp.MatrixSymbol("Lambda", d, d)
    >>> float(evaluate(sp.Trace((L + sp.Identity(d)) ** -1) / d, {"Lambda": [[1.0, 0], [0, 3.0]], "d": 2}))
    0.375
    """
    import numpy as np

    def ev(e):
        if isinstance(e, sp.MatrixSymbol):
            return np.asarray(values[e.name], float)
        if isinstance(e, sp.Identity):
            return np.eye(int(ev(e.rows)))
        if isinstance(e, sp.ZeroMatrix):
            return np.zeros((int(ev(e.rows)), int(ev(e.cols))))
        if isinstance(e, sp.Trace):
            return float(np.trace(ev(e.arg)))
        if isinstance(e, sp.Inverse):
            return np.linalg.inv(ev(e.arg))
        if isinstance(e, sp.Transpose):
            return ev(e.arg).T
        if isinstance(e, sp.MatPow):
            base, k = ev(e.base), int(e.exp)
            return np.linalg.matrix_power(base if k >= 0 else np.linalg.inv(base), abs(k))
        if isinstance(e, (sp.MatMul, sp.Mul)):
            out = 1.0
            for arg in e.args:
                v = ev(arg)
                out = out @ v if (np.ndim(out) and np.ndim(v)) else out * v
            return out
        if isinstance(e, (sp.MatAdd, sp.Add)):
            parts = [ev(arg) for arg in e.args]
            out = parts[0]
            for p in parts[1:]:
                out = out + p
            return out
        if isinstance(e, sp.Pow):
            return ev(e.base) ** float(e.exp)
        if isinstance(e, sp.Symbol):
            return float(values[e.name])
        if e.is_number:
            return float(e)
        raise ValueError(f"cannot evaluate {type(e).__name__}: {e}")

    return ev(sp.sympify(expr))
