"""In-context learning of linear regression: the statement's hypotheses (the general block form, the loss over every
LSA weight, an exact evaluator of the LSA's loss under other data laws) and the derivations for symbolic sizes d, N, M.
Part of :mod:`theory.icl`."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory import gaussian
from theory.derivation import Derivation, DerivationBuilder
from theory.icl_derive import (derive_global_min, derive_linear_task_risk, derive_loss_minimum, derive_moments,
                               derive_population_loss)
from theory.icl_forms import Msym, Nsym
from theory.sizes import instantiate
from theory.validation import InputError


# ------------------------------------------------------------------------------------------------
# the statement's hypotheses: the general block form, the loss over every LSA weight, and an exact
# evaluator of the LSA's loss under other data laws (for the counterexamples of icl.*)


@lru_cache(maxsize=None)
def derive_lsa_prediction_form_general() -> Derivation:
    """The block form of the LSA prediction for symbolic ``d`` and ``N`` (block-matrix algebra):
    with ``E = [[X, x_q], [y, 0]]`` (query label 0) and the weights in blocks
    ``W^{PV} = [[P11, p12], [w21ᵀ, w22]]``, ``W^{KQ} = [[W11, k12], [w21'ᵀ, k22]]``, the (2, 2) block of
    ``E + W^{PV} E Eᵀ W^{KQ} E/ρ`` equals ``[w21ᵀ, w22](E Eᵀ/ρ)[W11; w21'ᵀ] x_q``.

    ``result`` is the (2, 2) block (a 1×1 matrix expression); facts: ``residual`` (``ZeroMatrix`` or
    0), ``params_used`` (the weight blocks it contains).

    >>> D = derive_lsa_prediction_form_general()
    >>> sorted(D.facts["params_used"])
    ['W11', 'w21', "w21'", 'w22']
    """
    b = DerivationBuilder("LSA prediction in blocks, symbolic d and N")
    b.symbols(d="dimension of x (symbolic)", N="number of context examples (symbolic)", X="context inputs (d×N)",
              y="context labels (1×N)", x_q="query (d×1)", rho="the normalisation ρ")
    d, N = sp.symbols("d N", integer=True, positive=True)
    X, y, xq = sp.MatrixSymbol("X", d, N), sp.MatrixSymbol("y", 1, N), sp.MatrixSymbol("x_q", d, 1)
    E = sp.BlockMatrix([[X, xq], [y, sp.ZeroMatrix(1, 1)]])
    b.define("E = [[X, x_q], [y, 0]] (the query's label entry is 0)", E)
    names = {}

    def ms(name, r, c):
        names[name] = sp.MatrixSymbol(name, r, c)
        return names[name]

    PV = sp.BlockMatrix([[ms("P11", d, d), ms("p12", d, 1)], [ms("w21", 1, d), ms("w22", 1, 1)]])
    KQ = sp.BlockMatrix([[ms("W11", d, d), ms("k12", d, 1)], [ms("w21'", 1, d), ms("k22", 1, 1)]])
    b.define("W^PV and W^KQ in blocks (all blocks symbolic)", sp.Tuple(PV, KQ))
    rho = sp.Symbol("rho", positive=True)
    prod = sp.block_collapse(PV * E * E.T * KQ * E)
    yhat = prod.blocks[1, 1] / rho  # the (d+1, N+1) entry of E itself is the query label 0
    b.step("Block (2, 2) of E + W^PV E Eᵀ W^KQ E/ρ (E's own block is the 0 label)", yhat)
    blk = sp.block_collapse(sp.BlockMatrix([[names["w21"], names["w22"]]]) * E * E.T
                            * sp.BlockMatrix([[names["W11"]], [names["w21'"]]]) * xq) / rho
    b.define("The block form [w21ᵀ, w22](E Eᵀ/ρ)[W11; w21'ᵀ] x_q", blk)
    res = sp.expand(yhat - blk)
    b.step("Difference", res)
    b.obligation("prediction_equals_block_form", res)
    used = sorted(n for n, m in names.items() if yhat.has(m))
    b.step("Weight blocks that appear in ŷ", sp.Tuple(*[sp.Symbol(n) for n in used]))
    b.obligation("other_blocks_absent", sp.Integer(len((set(names) - set(used)) ^ {"P11", "p12", "k12", "k22"})),
                 kind="zero", description="exactly P11, p12 (first d rows of W^PV) and k12, k22 (last column of W^KQ) are absent")
    b.fact("params_used", used)
    b.fact("residual", res)
    return b.done(yhat)


@lru_cache(maxsize=None)
def derive_all_weights_min(d: int = 2, N: int = 2) -> Derivation:
    """Global minimisers over EVERY LSA weight (not only ``B = w22·W11``), at fixed ``d`` and ``N``.

    With ``ρ = N`` and noise-free labels, ``ŷ − y_q`` splits under ``w ↦ −w`` into an even part
    (``w21ᵀ (Σx_ixᵢᵀ + x_q x_qᵀ)/N W11 x_q + w22 (Σ y_i²/N) w21'ᵀ x_q``) and an odd part
    ``hᵀ B_eff x_q − y_q`` with ``B_eff = w22 W11 + w21 w21'ᵀ``; the symmetry of ``w``'s law removes
    the cross term, so ``L = ½E[even²] + L_B(B_eff) ≥ L_B(Γ_N⁻¹)``. Equality needs ``B_eff = Γ_N⁻¹``
    (invertible) and the even part to vanish identically: SymPy solves the even part's coefficient
    equations, and on every branch either ``det B_eff ≡ 0`` (rank ≤ 1 < d: excluded when d ≥ 2) or
    ``w21 = w21' = 0``. At d = 1 the rank argument fails (``det`` of a 1×1 rank-one matrix is not 0).

    ``result``: the surviving branches (dicts); facts: ``branches``, ``beff``, ``excluded`` (per
    branch: True when ``det B_eff ≡ 0`` there), ``weights``.

    >>> D = derive_all_weights_min(2, 2)
    >>> all(br[s] == 0 for br in D.result for s in D.facts["weights"]["w21"] + D.facts["weights"]["w21'"])
    True
    """
    b = DerivationBuilder("Global minimisers over every LSA weight: w21 = w21' = 0, w22·W11 = Γ_N⁻¹")
    b.symbols(p_i="entry i of w21 (last row of W^PV)", p_22="w22", k_ij="entry (i, j) of W11 = W^KQ_11",
              q_i="entry i of w21' (last row of W^KQ, first d columns)", x_ji="coordinate i of context example j",
              xq_i="coordinate i of the query", w_i="coordinate i of the task w")
    G = derive_global_min(d)
    b.inherit(G, "global_min")
    p21 = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"p_{i + 1}"))
    p22 = sp.Symbol("p_22")
    K11 = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"k_{i + 1}{j + 1}"))
    k21 = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"q_{i + 1}"))
    X = sp.Matrix(d, N, lambda a, j: sp.Symbol(f"x_{j + 1}{a + 1}"))
    xq = sp.Matrix(d, 1, lambda a, _: sp.Symbol(f"xq_{a + 1}"))
    w = sp.Matrix(d, 1, lambda a, _: sp.Symbol(f"w_{a + 1}"))
    y = X.T * w
    E = X.row_join(xq).col_join(y.T.row_join(sp.zeros(1, 1)))
    PV = sp.zeros(d + 1, d + 1)
    PV[d, :d], PV[d, d] = p21.T, p22
    KQ = sp.zeros(d + 1, d + 1)
    KQ[:d, :d], KQ[d, :d] = K11, k21.T
    b.assume("Only the last row (w21ᵀ, w22) of W^PV and the first d columns (W11; w21'ᵀ) of W^KQ enter ŷ "
             "(icl.lsa_prediction_form); ρ = N; noise-free labels y = Xᵀw", sp.Tuple(PV, KQ), key="entries that enter ŷ")
    yhat = sp.expand((E + PV * E * (E.T * KQ * E) / N)[d, N])
    err = yhat - (w.T * xq)[0, 0]
    b.step(f"ŷ − y_q from the matrix product (d = {d}, N = {N})", err)
    flip = {wi: -wi for wi in w}
    even = sp.expand((err + err.xreplace(flip)) / 2)
    odd = sp.expand((err - err.xreplace(flip)) / 2)
    b.step("Even part in w: (e(w) + e(−w))/2", even)
    b.step("Odd part in w: (e(w) − e(−w))/2", odd)
    h = X * X.T * w / N
    Beff = p22 * K11 + p21 * k21.T
    b.define("B_eff = w22·W11 + w21·w21'ᵀ and h = (1/N) Σ y_i x_i", Beff)
    b.obligation("odd_part_is_B_eff_predictor", odd - ((h.T * Beff * xq)[0, 0] - (w.T * xq)[0, 0]),
                 description="odd part = hᵀ B_eff x_q − y_q")
    b.assume("w ~ N(0, I) is symmetric and independent of the x's: E[even·odd] = 0, so "
             "L = ½E[even²] + L_B(B_eff) ≥ L_B(B_eff) ≥ L_B(Γ_N⁻¹) (L_B strictly convex, minimum at Γ_N⁻¹: global_min)",
             r"L=\tfrac12\mathbb E[\mathrm{even}^2]+L_B(B_{\mathrm{eff}})", key="symmetric w")
    b.assume("A polynomial that vanishes almost surely under a non-degenerate Gaussian (Λ ≻ 0) vanishes "
             "identically: a global minimiser has B_eff = Γ_N⁻¹ and every coefficient of the even part 0", key="a.s.-zero polynomial vanishes")
    data = list(X) + list(xq) + list(w)
    coeffs = sp.Poly(even, *data).coeffs()
    b.step("Coefficients of the even part (polynomial in x, x_q, w)", sp.Matrix(coeffs))
    weights = list(p21) + [p22] + list(K11) + list(k21)
    branches = sp.solve(coeffs, weights, dict=True)
    b.step("Their common zeros (SymPy's polynomial solve, every branch)", sp.Tuple(*[sp.Dict(s) for s in branches]))
    for k, s in enumerate(branches):
        b.obligation(f"branch_{k}_solves", sp.Matrix([sp.expand(c.subs(s)) for c in coeffs]),
                     description="the branch zeroes every coefficient")
    dets = [sp.factor((Beff.subs(s)).det()) for s in branches]
    b.step("det B_eff on each branch", sp.Tuple(*dets))
    excluded = [dt == 0 for dt in dets]
    keep = [s for s, ex in zip(branches, excluded) if not ex]
    b.step(f"Branches with det B_eff ≢ 0 (Γ_N⁻¹ is invertible; at d = {d} ≥ 2 a rank-one w21·w21'ᵀ has det 0)",
           sp.Tuple(*[sp.Dict(s) for s in keep]))
    zeros = list(p21) + list(k21)
    b.obligation("survivors_have_w21_and_w21p_zero",
                 sp.Matrix([sp.sympify(z).subs(s) for s in keep for z in zeros]) if keep else sp.Integer(0),
                 description="on every branch that can reach the invertible Γ_N⁻¹, w21 = 0 and w21' = 0")
    b.obligation("some_branch_survives", sp.Integer(0 if keep else 1))
    b.step("There B_eff = w22·W11 = Γ_N⁻¹ (the global minimiser over B)", Beff.subs({z: 0 for z in zeros}))
    b.record(branches=branches, excluded=excluded, beff=Beff,
             weights={"w21": list(p21), "w22": p22, "W11": list(K11), "w21'": list(k21)})
    return b.done(keep)


def _moment(law: str, var, k: int):
    """``E[z^k]`` for ``z ~ N(0, var)`` (``law="gaussian"``) or ``z = ±√var`` equally likely
    (``"rademacher"``)."""
    if k % 2:
        return sp.Integer(0)
    if law == "gaussian":
        return var ** (k // 2) * sp.factorial2(k - 1)
    if law == "rademacher":
        return var ** (k // 2)
    raise InputError(f"unknown law {law!r} (gaussian, rademacher)")


def exact_lsa_loss(Wpv, Wkq, N: int, lam, *, rho=None, x_law: str = "gaussian", task_var=1, noise_var=0,
                   query_noise: bool = True):
    """``½ E(ŷ − y_q)²`` of the LSA with weights ``Wpv, Wkq`` ((d+1)×(d+1), numbers or SymPy symbols)
    on prompts of length ``N``, computed exactly from the LSA's matrix product (not from a closed
    form): ``ŷ`` is entry (d+1, N+1) of ``E + W^{PV} E (Eᵀ W^{KQ} E)/ρ`` (``ρ = N`` unless given),
    ``(ŷ − y_q)²`` is expanded as a polynomial in the data and each monomial is replaced by its
    moment. Data: ``x`` with independent coordinates of variances ``lam`` (a diagonal ``Λ``;
    ``x_law`` "gaussian" or "rademacher" = ``±√λ_a``), ``w`` with independent ``N(0, task_var)``
    coordinates (a number or one per coordinate), labels ``y_i = ⟨w, x_i⟩ + ε_i`` with
    ``ε_i ~ N(0, noise_var)`` (on the query label too unless ``query_noise=False``).

    >>> b = sp.Symbol("b")
    >>> sp.expand(exact_lsa_loss([[0, 0], [0, 1]], [[b, 0], [0, 0]], 2, [1]))
    b**2 - b + 1/2
    """
    lam = [sp.sympify(v) for v in lam]
    d = len(lam)
    PV, KQ = sp.Matrix(Wpv), sp.Matrix(Wkq)
    if PV.shape != (d + 1, d + 1) or KQ.shape != (d + 1, d + 1):
        raise InputError(f"weights must be ({d + 1}, {d + 1}), got {PV.shape} and {KQ.shape}")
    rho = sp.Integer(N) if rho is None else sp.sympify(rho)
    tv = [sp.sympify(t) for t in task_var] if isinstance(task_var, (list, tuple)) else [sp.sympify(task_var)] * d
    X = sp.Matrix(d, N + 1, lambda a, j: sp.Symbol(f"x_{j}_{a}"))
    w = [sp.Symbol(f"w_{a}") for a in range(d)]
    eps = [sp.Symbol(f"e_{j}") for j in range(N + 1)]
    y = [sum(w[a] * X[a, j] for a in range(d)) + eps[j] for j in range(N + 1)]
    E = X.col_join(sp.Matrix([y[:N] + [0]]))
    yhat = E[d, N] + (PV[d, :] * E * (E.T * (KQ * E[:, N])))[0, 0] / rho
    err = yhat - (y[N] if query_noise else y[N] - eps[N])
    gens = list(X) + w + eps  # X row-major: coordinate a outer, example j inner
    laws = ([(x_law, lam[a]) for a in range(d) for _ in range(N + 1)] + [("gaussian", t) for t in tv]
            + [("gaussian", sp.sympify(noise_var))] * (N + 1))
    P = sp.Poly(err, *gens)
    total = sp.Integer(0)
    for mon, c in (P * P).terms():
        f = c
        for (law, v), k in zip(laws, mon):
            if k:
                f *= _moment(law, v, k)
                if f == 0:
                    break
        total += f
    return sp.expand(total / 2)


# ------------------------------------------------------------------------------------------------
# symbolic sizes (issue 34): the population loss, its minimiser and minimum, and the linear-task
# risk for symbolic d, N, M by theory.gaussian's Isserlis calculus in index form. Each inherits the
# fixed-size derivation above as ``at_d2`` and states, as an obligation, that the general result at
# d = 2 with Λ = (l_ij) (theory.sizes.instantiate) equals it exactly.


def _sym_sizes():
    d, N, M = sp.symbols("d N M", integer=True, positive=True)
    return d, N, M, sp.MatrixSymbol("Lambda", d, d)


def _at_d(expr, d, k: int, values: dict, renames: dict, inverse_of: sp.MatrixSymbol | None = None):
    """``expr`` at ``d = k``, the size symbols renamed (``N → Nsym``: the fixed-size derivations'
    symbols) and explicit matrices put in by name (``values``). With ``inverse_of = G``, ``G⁻¹`` is
    put in as ``values[G.name]``'s inverse, each entry cancelled (an unsimplified symbolic inverse
    makes the expansion slow)."""
    e = sp.sympify(expr).xreplace(renames)
    if inverse_of is not None:
        Gi = sp.MatrixSymbol(inverse_of.name + "_inv", *inverse_of.shape)
        e = e.xreplace({sp.Inverse(inverse_of): Gi, sp.MatPow(inverse_of, -1): Gi})
        Gk = sp.Matrix(values[inverse_of.name])
        values = {**values, Gi.name: (Gk.adjugate() / Gk.det()).applyfunc(sp.cancel)}
    return instantiate(e, {d: k}, values)


def _isserlis_loss_steps(b: DerivationBuilder, L, B, n, A):
    """Record in ``b`` the Isserlis contraction of ``E[Λ̂AΛ̂]`` (``A`` any ``d × d`` matrix, ``n``
    samples) and the ZFB loss of ``ŷ = hᵀBx_q`` at prompt length ``n``; obligations: the Wishart form,
    ``E[hhᵀ]`` is that moment at ``A = I`` and equals ``ΛΓ_n``, ``E[hwᵀ] = Λ``. Returns the loss steps'
    dict (:func:`theory.gaussian.zfb_loss_steps`)."""
    b.assume("Isserlis' theorem: for a centred Gaussian vector E[z_1⋯z_2k] is the sum over the pairings of the "
             "products of covariances; Λᵀ = Λ", key="Isserlis' theorem")
    W = gaussian.wishart_steps(b, L, A, n)
    b.obligation("wishart_form", gaussian.tidy(W - (L * A * L + (L * A.T * L + sp.Trace(A * L) * L) / n), [L]),
                 description="E[Λ̂AΛ̂] = ΛAΛ + (1/n)(ΛAᵀΛ + tr(AΛ)Λ), every d")
    z = gaussian.zfb_loss_steps(b, L, B, n)
    d = L.rows
    b.obligation("hh_is_the_isserlis_moment", gaussian.tidy(z["hh"] - W.xreplace({A: sp.Identity(d)}), [L]),
                 description="E[hhᵀ] = E[Λ̂IΛ̂]: the contracted moment at A = I")
    b.obligation("hh_is_Lambda_Gamma", gaussian.tidy(z["hh"] - L * gaussian.zfb_gamma(L, n), [L]),
                 description="E[hhᵀ] = ΛΓ, Γ = (1 + 1/n)Λ + (1/n)tr(Λ)I")
    b.obligation("hw_is_Lambda", gaussian.tidy(z["hw"] - L, [L]), description="E[hwᵀ] = Λ")
    return z


@lru_cache(maxsize=None)
def derive_population_loss_general() -> Derivation:
    """The LSA's population loss in ``B = w22·W11`` for symbolic ``d`` and ``N``.

    Steps: the LSA's prediction with ``w21 = w21' = 0``, ``ρ = N`` by ``block_collapse`` is
    ``ŷ = hᵀBx_q`` with ``h = Λ̂w``; the Wishart moment ``E[Λ̂AΛ̂]`` by Isserlis in index form (the
    pairings of ``E[x_ia x_ip x_jq x_jc]`` contracted by ``from_index_summation``, pair counts as delta
    sums); ``E_w``, ``E_X``, ``E_{x_q}`` (:func:`theory.gaussian.zfb_loss_steps`). Obligations: the
    Wishart form, ``E[hhᵀ] = ΛΓ_N``, ``E[hwᵀ] = Λ``, the stated loss formula, and the cross-checks:
    at ``d = 2`` the general loss equals :func:`derive_population_loss` (inherited as ``at_d2``), at
    ``d = 3`` the general ``E[hhᵀ]`` equals :func:`derive_moments`. Typed in: the model and laws,
    Isserlis' theorem, independence and linearity of E, ``Λᵀ = Λ``, the ``δ_ij ∈ {0, 1}`` case split.

    ``result``: ``{"loss", "hh", "hw"}``; facts ``Gamma_N``, ``Lambda``, ``B``, ``sizes`` (d, N).

    >>> D = derive_population_loss_general()
    >>> D.result["hw"], D.provenance["loss"]
    (Lambda, 'derived')
    """
    d, N, _, L = _sym_sizes()
    B, A, W11 = (sp.MatrixSymbol(n, d, d) for n in ("B", "A", "W11"))
    X, w, xq = sp.MatrixSymbol("X", d, N), sp.MatrixSymbol("w", d, 1), sp.MatrixSymbol("x_q", d, 1)
    w22 = sp.Symbol("w22", real=True)
    b = DerivationBuilder("Population loss of the LSA in B = w22·W11, symbolic d and N (Isserlis in index form)")
    b.symbols(d="dimension (symbolic)", N="prompt length (symbolic)", Lambda="covariance of x (symmetric)",
              B="w22·W11", A="any d × d matrix", X="context inputs as columns (d × N)", w="task vector",
              x_q="query", Lambda_hat="(1/N) X Xᵀ", Gamma_N="(1 + 1/N)Λ + (1/N)tr(Λ)I", W11="first d columns' top block "
              "of W^KQ", w22="last entry of W^PV's last row")
    E = b.define("Prompt E = [[X, x_q], [wᵀX, 0]] (labels y = wᵀX, the query's label 0)",
                 sp.BlockMatrix([[X, xq], [w.T * X, sp.ZeroMatrix(1, 1)]]))
    row, col = sp.BlockMatrix([[sp.ZeroMatrix(1, d), w22 * sp.Identity(1)]]), sp.BlockMatrix([[W11], [sp.ZeroMatrix(1, d)]])
    b.define("W^PV's last row [0, w22] and W^KQ's first d columns [W11; 0] (w21 = w21' = 0), ρ = N", sp.Tuple(row, col))
    yhat = b.step("ŷ = [0, w22](EEᵀ/N)[W11; 0]x_q by block_collapse (the block form of icl.lsa_prediction_form)",
                  sp.block_collapse(row * E * E.T * col * xq) / N)
    b.obligation("prediction_is_hT_B_xq", gaussian.tidy(yhat - (X * X.T / N * w).T * (w22 * W11) * xq),
                 description="ŷ = hᵀBx_q with h = (1/N)Σ y_i x_i = Λ̂w and B = w22·W11")
    z = _isserlis_loss_steps(b, L, B, N, A)
    hh = b.step("E[hhᵀ] = E[Λ̂IΛ̂]", z["hh"])
    hw = b.step("E[hwᵀ] = E[Λ̂]", z["hw"])
    Gam = b.define("Γ_N = (1 + 1/N)Λ + (1/N)tr(Λ)I", gaussian.zfb_gamma(L, N))
    stated = (sp.Trace(B.T * L * Gam * B * L) - 2 * sp.Trace(L * B * L) + sp.Trace(L)) / 2
    b.obligation("loss_formula", gaussian.tidy(z["loss"] - stated, [L]),
                 description="L(B) = ½[tr(BᵀΛΓ_N BΛ) − 2tr(ΛBΛ) + tr Λ] for every d, N")
    P2 = derive_population_loss(2)
    b.inherit(P2, "at_d2")
    at2 = b.step("Cross-check: the general loss at d = 2, Λ = (l_ij), B = (b_ij)",
                 _at_d(z["loss"], d, 2, {"Lambda": P2.facts["Lambda"], "B": P2.facts["B"]}, {N: Nsym}))
    b.obligation("general_equals_at_d2", sp.expand(at2 - P2.result),
                 description="the general loss at d = 2 equals the loss derived by Wick sums at d = 2")
    M3 = derive_moments(3)
    hh3 = b.step("Cross-check: the general E[hhᵀ] at d = 3, Λ = (l_ij)",
                 _at_d(hh, d, 3, {"Lambda": M3.facts["Lambda"]}, {N: Nsym}))
    b.obligation("hh_equals_at_d3", sp.Matrix(hh3 - M3.result["hh"]).applyfunc(sp.expand),
                 description="the general E[hhᵀ] at d = 3 equals the Wick sums at d = 3")
    for k, v in (("Gamma_N", Gam), ("Lambda", L), ("B", B), ("sizes", (d, N)), ("h", z["h"])):
        b.fact(k, v)
    return b.done({"loss": z["loss"], "hh": hh, "hw": hw})


def _grad(expr, X):
    """``∂expr/∂X`` term by term (SymPy 1.14 differentiates a sum of traces by a matrix symbol to
    ``ZeroMatrix``, sympy/sympy#26585; each term alone is right): as theory.gaussian's gradient."""
    parts = [sp.diff(t, X) for t in sp.Add.make_args(sp.expand(expr))]
    parts = [p for p in parts if isinstance(p, sp.MatrixExpr) and not isinstance(p, sp.ZeroMatrix)]
    return sp.MatAdd(*parts) if parts else sp.ZeroMatrix(*X.shape)


def _sum_of_squares(K):
    """``tr(KᵀK)`` as the index sum ``Σ_{i,j} K_ij²`` with real entries (``IndexedBase``)."""
    k = sp.IndexedBase(K.name.lower(), real=True)
    s = sp.Trace(K.T * K).rewrite(sp.Sum)
    return s.replace(lambda e: isinstance(e, sp.matrices.expressions.matexpr.MatrixElement) and e.parent == K,
                     lambda e: k[e.i, e.j])


@lru_cache(maxsize=None)
def derive_global_min_general() -> Derivation:
    """The minimiser over ``B`` of the population loss, symbolic ``d`` and ``N``: ``B* = Γ_N⁻¹``,
    unique, with ``L(Γ_N⁻¹ + H) = L(Γ_N⁻¹) + ½tr(HᵀΛΓ_N HΛ)`` and that form positive for ``H ≠ 0``.

    Steps (from :func:`derive_population_loss_general`, inherited as ``population_loss``): the
    gradient by matrix calculus, ``ΛΓ_N BΛ − Λ²``; ``L(B + tH)`` collected in ``t`` (degree 2; the
    ``t`` coefficient is ``tr(∇L(B)ᵀH)``, the ``t²`` coefficient ``½tr(HᵀΛΓ_N HΛ)``, i.e. the Hessian
    ``ΛΓ_N ⊗ Λ`` on row-major vec H); with ``Λ = C²`` (C its symmetric square root) that form is
    ``(1 + 1/N)‖C²HC‖_F² + (tr Λ/N)‖CHC‖_F²``, sums of squares (index form), and ``C²HC = 0`` gives
    ``H = 0``; ``vᵀΓ_N v = (1 + 1/N)‖Cv‖² + (tr Λ/N)‖v‖²``; with ``G`` for ``Γ_N`` the gradient vanishes
    at ``G⁻¹`` and solving gives ``G⁻¹``. The gradient flow on ``B = uU``: ``u² − ‖U‖_F²`` is conserved
    (matrix calculus, any loss of the product) and ``u → ‖Γ_N⁻¹‖_F^{1/2}`` when balanced. Cross-checks
    (inherited ``at_d2``: :func:`derive_global_min`): the general ``Γ_N⁻¹`` at ``d = 2`` is its solved
    minimiser, and the general second-order form is its Hessian's quadratic form.

    Typed in: Λ ≻ 0 has a symmetric invertible square root C; a sum of real squares vanishes only when
    every term does; a positive-definite matrix is invertible; the chain rule for the flow; ZFB's
    balanced initialisation and convergence (for the limit of u).

    ``result``: ``Γ_N⁻¹`` (an ``Inverse``); facts ``Gamma_N``, ``G``, ``gradient``, ``second_order``,
    ``conserved_rate`` (0), ``u_limit``, ``Lambda``, ``B``, ``H``, ``sizes``.

    >>> D = derive_global_min_general()
    >>> D.facts["conserved_rate"], D.facts["u_limit"]
    (0, sqrt(F))
    """
    d, N, _, L = _sym_sizes()
    B, H, G, C = (sp.MatrixSymbol(n, d, d) for n in ("B", "H", "G", "C"))
    tdir = sp.Symbol("t", real=True)
    b = DerivationBuilder("Minimiser of the population loss over B: B* = Γ_N⁻¹, symbolic d and N")
    b.symbols(d="dimension (symbolic)", N="prompt length (symbolic)", Lambda="covariance of x (symmetric positive "
              "definite)", B="w22·W11", H="a direction in B-space", t="step along H", G="Γ_N as a symbol",
              C="the symmetric square root of Λ (Λ = C²)", v="a vector", u="w22", U="W11", F="‖Γ_N⁻¹‖_F",
              nU="‖U‖_F")
    P = derive_population_loss_general()
    b.inherit(P, "population_loss")
    loss = P.result["loss"]
    Gam = gaussian.zfb_gamma(L, N)
    grad = b.step("∂L/∂B by matrix calculus, term by term (Λᵀ = Λ)", gaussian.tidy(_grad(loss, B), [L]))
    b.obligation("gradient_form", gaussian.tidy(grad - (L * Gam * B * L - L * L), [L]), description="∂L/∂B = ΛΓ_N BΛ − Λ²")
    b.step("Stationarity: ∂L/∂B = 0", sp.Eq(L * G * B * L - L * L, sp.ZeroMatrix(d, d), evaluate=False),
           compact=r"\Lambda\Gamma_N B\Lambda-\Lambda^2=0", equation=True)
    # second order: L(B + tH) is a quadratic in t
    Lt = b.step("L(B + tH), collected in t", sp.collect(sp.expand(gaussian.tidy(loss.xreplace({B: B + tdir * H}), [L])), tdir))
    b.obligation("quadratic_in_B", sp.Integer(sp.degree(Lt, tdir) - 2), description="L(B + tH) has degree 2 in t")
    c0, c1, c2 = (Lt.coeff(tdir, k) for k in range(3))
    b.obligation("zeroth_order_is_L", gaussian.tidy(c0 - loss, [L]), description="L(B + tH)|_{t=0} = L(B)")
    b.obligation("first_order_is_gradient", gaussian.tidy(c1 - sp.Trace(grad.T * H), [L]),
                 description="the t coefficient is ⟨∇L(B), H⟩ = tr(∇L(B)ᵀH)")
    q = sp.Trace(H.T * L * Gam * H * L)
    b.step("Hessian: d²/dt² L(B + tH) = 2·(t² coefficient), independent of B", gaussian.tidy(2 * c2, [L]),
           compact=r"\nabla^2L[H,H]=\operatorname{tr}(H^\top\Lambda\Gamma_N H\Lambda)=\operatorname{vec}(H)^\top"
           r"(\Lambda\Gamma_N\otimes\Lambda)\operatorname{vec}(H)")
    b.obligation("hessian_is_kronecker", gaussian.tidy(2 * c2 - q, [L]),
                 description="the second-order form is tr(HᵀΛΓ_N HΛ), i.e. ΛΓ_N ⊗ Λ on row-major vec H")
    # positivity of the second-order form and of Γ_N, through Λ = C²
    b.assume("Λ ≻ 0: Λ = C² with C symmetric and invertible (its positive square root)", key="Λ = C², C invertible")
    K1, K2 = C * C * H * C, C * H * C
    b.step("tr(HᵀΛΓ_N HΛ) at Λ = C², tidied (Cᵀ = C)", gaussian.tidy(q.xreplace({L: C * C}), [C]))
    b.obligation("hessian_sum_of_squares",
                 gaussian.tidy(q.xreplace({L: C * C}) - ((1 + 1 / N) * sp.Trace(K1.T * K1)
                                                         + sp.Trace(C * C) / N * sp.Trace(K2.T * K2)), [C]),
                 description="tr(HᵀΛΓ_N HΛ) = (1 + 1/N)‖C²HC‖_F² + (tr Λ/N)‖CHC‖_F² with tr Λ = ‖C‖_F²")
    K = sp.MatrixSymbol("K", d, d)
    sq = b.step("‖K‖_F² = tr(KᵀK) in index form, entries real", _sum_of_squares(K))
    b.obligation("frobenius_nonnegative", sq, "nonnegative", description="tr(KᵀK) = Σ_ij K_ij² ≥ 0")
    b.obligation("coefficient_positive", 1 + 1 / N, "positive", description="1 + 1/N > 0")
    b.assume("A sum of real squares vanishes only when every term does: ‖K‖_F = 0 ⇒ K = 0", key="sum of squares zero")
    b.obligation("H_from_C2HC", gaussian.tidy((C.I * C.I * K1 * C.I).doit() - H),
                 description="C²HC = 0 ⇒ H = C⁻²(C²HC)C⁻¹ = 0: the second-order form is positive for H ≠ 0")
    v = sp.MatrixSymbol("v", d, 1)
    b.obligation("Gamma_N_positive_definite",
                 gaussian.tidy((v.T * Gam * v).xreplace({L: C * C})
                               - ((1 + 1 / N) * (C * v).T * (C * v) + sp.Trace(C * C) / N * v.T * v), [C]),
                 description="vᵀΓ_N v = (1 + 1/N)‖Cv‖² + (tr Λ/N)‖v‖² > 0 for v ≠ 0: Γ_N ≻ 0, invertible")
    b.obligation("Gamma_commutes_with_Lambda", gaussian.tidy(Gam * L - L * Gam, [L]), description="Γ_NΛ = ΛΓ_N")
    # the stationary point, with G standing for Γ_N (invertible: Γ_N ≻ 0)
    b.assume("A positive-definite matrix is invertible: Λ, C and Γ_N have inverses", key="positive definite ⇒ invertible")
    gG = b.step("The gradient with G standing for Γ_N", L * G * B * L - L * L)
    b.obligation("G_form_is_gradient", gaussian.tidy(gG.xreplace({G: Gam}) - grad, [L]),
                 description="G → Γ_N in ΛGBΛ − Λ² gives the derived gradient")
    at = b.step("At B = G⁻¹", gG.xreplace({B: G.I}).doit())
    b.obligation("stationary_at_Gamma_inverse", at, description="∇L(Γ_N⁻¹) = 0")
    Bs = b.step("Solve ΛGBΛ = Λ²: B = (ΛG)⁻¹Λ²Λ⁻¹", (sp.Inverse(L * G) * L * L * L.I).doit())
    b.obligation("solution_is_gamma_inverse", gaussian.tidy(Bs - G.I), description="the stationary point is Γ_N⁻¹ (unique)")
    b.step("Hence L(Γ_N⁻¹ + tH) = L(Γ_N⁻¹) + t·tr(∇L(Γ_N⁻¹)ᵀH) + t²/2·tr(HᵀΛΓ_N HΛ), the first-order term "
           "vanishing: Γ_N⁻¹ is the unique global minimiser", sp.Trace(at.T * H).doit())
    Bstar = b.step("B* = Γ_N⁻¹", sp.Inverse(Gam))
    # gradient flow on B = uU (matrix calculus, any loss of the product)
    u = sp.Symbol("u", real=True)
    U, Gr = sp.MatrixSymbol("U", d, d), sp.MatrixSymbol("nabla_L", d, d)
    b.assume("Gradient flow on (u, U) for a loss L_B(uU) of the product, ∇L the gradient of L_B at uU; chain rule: "
             "du/dt = −tr(∇Lᵀ U), dU/dt = −u∇L", key="gradient-flow chain rule", clauses=("flow_limit",))
    dQ = b.step("∂/∂U of ‖U‖_F² = tr(UᵀU) (matrix calculus)", sp.diff(sp.Trace(U.T * U), U))
    rate = b.step("d/dt (u² − ‖U‖_F²) = 2u·du/dt − tr((∂‖U‖_F²/∂U)ᵀ dU/dt), tidied",
                  gaussian.tidy(2 * u * (-sp.Trace(Gr.T * U)) - sp.Trace(dQ.T * (-u * Gr))))
    b.obligation("conserved_along_flow", rate, description="u² − ‖U‖_F² is conserved for every loss of the product, every d")
    F, nU = sp.symbols("F nU", positive=True)
    b.assume("ZFB initialisation balanced (u² = ‖U‖_F² at t = 0), and the flow converges to uU = Γ_N⁻¹ "
             "(ZFB Thm 4.1), so u² = nU² and u·nU = F", key="ZFB Thm 4.1 convergence", clauses=("flow_limit",))
    up = sp.Symbol("u", positive=True)
    lim = sp.solve([sp.Eq(up**2, nU**2), sp.Eq(up * nU, F)], [up, nU], dict=True)
    b.obligation("unique_positive_limit", sp.Integer(len(lim) - 1))
    ulim = b.step("u² = nU² and u·nU = F give u =", lim[0][up])
    # cross-checks at d = 2
    D2 = derive_global_min(2)
    b.inherit(D2, "at_d2")
    L2 = derive_population_loss(2).facts["Lambda"]
    G2 = b.step("Cross-check: the general Γ_N at d = 2, Λ = (l_ij)", _at_d(Gam, d, 2, {"Lambda": L2}, {N: Nsym}))
    b.obligation("general_minimiser_equals_at_d2", G2 * D2.result - sp.eye(2),
                 description="Γ_N(d = 2)·B*(d = 2) = I: the general minimiser is the one solved at d = 2")
    Hs = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"h_{i + 1}{j + 1}", real=True))
    q2 = b.step("Cross-check: the general second-order form at d = 2, H = (h_ij)",
                _at_d(q, d, 2, {"Lambda": L2, "H": Hs}, {N: Nsym}))
    vecH = sp.Matrix(list(Hs))
    b.obligation("hessian_equals_at_d2", sp.expand(q2 - (vecH.T * D2.facts["hessian_B"] * vecH)[0, 0]),
                 description="tr(HᵀΛΓ_N HΛ) at d = 2 is vec(H)ᵀ(∇²L)vec(H) with the Hessian derived at d = 2")
    for k, val in (("Gamma_N", Gam), ("G", G), ("gradient", grad), ("second_order", q), ("conserved_rate", rate),
                   ("u_limit", ulim), ("F", F), ("Lambda", L), ("B", B), ("H", H), ("sizes", (d, N))):
        b.fact(k, val)
    return b.done(Bstar)


@lru_cache(maxsize=None)
def derive_loss_minimum_general() -> Derivation:
    """The minimum ``L(Γ_N⁻¹) = ½[tr Λ − tr(Γ_N⁻¹Λ²)]`` for symbolic ``d`` and ``N``: the loss of
    :func:`derive_population_loss_general` written with ``G`` for ``Γ_N`` (an obligation checks that
    ``G → Γ_N`` gives the derived loss), at ``B = G⁻¹`` (``Gᵀ = G``), the minimiser of
    :func:`derive_global_min_general` (inherited as ``global_min``). Cross-check (inherited ``at_d2``):
    at ``d = 2`` with ``Λ = (l_ij)`` it equals :func:`derive_loss_minimum`. ``result``: the minimum with
    ``Γ_N`` written out; facts ``in_G`` (the minimum in ``G``), ``G``, ``Gamma_N``, ``Lambda``.

    >>> D = derive_loss_minimum_general()
    >>> D.facts["in_G"]
    -Trace(G**(-1)*Lambda**2)/2 + Trace(Lambda)/2
    """
    d, N, _, L = _sym_sizes()
    B, G = sp.MatrixSymbol("B", d, d), sp.MatrixSymbol("G", d, d)
    b = DerivationBuilder("Minimum of the population loss, symbolic d and N")
    b.symbols(d="dimension (symbolic)", N="prompt length (symbolic)", Lambda="covariance of x (symmetric positive definite)",
              B="w22·W11", G="Γ_N as a symbol (symmetric)")
    b.inherit(derive_global_min_general(), "global_min")
    loss = derive_population_loss_general().result["loss"]
    Gam = gaussian.zfb_gamma(L, N)
    LG = b.define("The loss written with G for Γ_N: ½tr(BᵀΛGBΛ) − tr(ΛBΛ) + ½tr Λ",
                  (sp.Trace(B.T * L * G * B * L) - 2 * sp.Trace(L * B * L) + sp.Trace(L)) / 2)
    b.obligation("G_form_is_the_loss", gaussian.tidy(LG.xreplace({G: Gam}) - loss, [L]),
                 description="G → Γ_N in that form gives the derived loss")
    val = b.step("At the minimiser B = G⁻¹ (Gᵀ = G, Λᵀ = Λ)", gaussian.tidy(LG.xreplace({B: G.I}), [L, G]))
    b.obligation("minimum_form", gaussian.tidy(val - (sp.Trace(L) - sp.Trace(G.I * L * L)) / 2, [L, G]),
                 description="min L = ½[tr Λ − tr(Γ_N⁻¹Λ²)]")
    mn = b.step("min L with Γ_N written out", val.xreplace({G: Gam}))
    D2 = derive_loss_minimum(2)
    b.inherit(D2, "at_d2")
    L2 = D2.facts["Lambda"]
    G2 = _at_d(Gam, d, 2, {"Lambda": L2}, {N: Nsym})
    m2 = b.step("Cross-check: the general minimum at d = 2, Λ = (l_ij)", _at_d(val, d, 2, {"Lambda": L2, "G": G2}, {N: Nsym}, G))
    b.obligation("general_equals_at_d2", sp.cancel(m2 - D2.result),
                 description="the general minimum at d = 2 equals the minimum derived at d = 2")
    for k, v in (("in_G", val), ("G", G), ("Gamma_N", Gam), ("Lambda", L), ("sizes", (d, N))):
        b.fact(k, v)
    return b.done(mn)


@lru_cache(maxsize=None)
def derive_linear_task_risk_general() -> Derivation:
    """Test risk ``R = E(x_qᵀΓ_N⁻¹ h_M − ⟨w, x_q⟩)²`` of ``B = Γ_N⁻¹`` on prompts of length ``M``
    (``h_M = (1/M)Σ_{i≤M} y_i x_i``, ρ = M), symbolic ``d``, ``N``, ``M``.

    Steps: ``R = 2·L_M(B)`` at ``B = G⁻¹`` (``G`` standing for ``Γ_N``, symmetric), with ``L_M`` the
    population loss at prompt length ``M`` derived as in :func:`derive_population_loss_general`
    (Isserlis contraction of the Wishart moment in index form); the matrix form
    ``tr Λ − 2tr(Γ_N⁻¹Λ²) + tr(Γ_N⁻¹ΛΓ_MΓ_N⁻¹Λ)`` (no commutation used); ``Γ_NΛ = ΛΓ_N``; then the
    scalar image (:func:`theory.gaussian.commuting_trace_image`: ``Λ → λ``, ``Γ_N⁻¹ → 1/γ_N(λ)``,
    ``tr Λ → t``) of ``R`` minus the stated form and minus the 1/M + 1/N² split vanishes identically.
    That image ``r(λ, t, N, M)`` is the per-eigenvalue risk (``R = Σ_i r(λ_i)``). Typed in: the model
    and laws, Isserlis, independence and linearity of E, ``Λᵀ = Λ``, and that ``λ ↦ Λ, 1/γ_N ↦ Γ_N⁻¹``
    extends to a ring homomorphism (Λ and Γ_N⁻¹ commute, Γ_N = γ_N(Λ) invertible) with the trace linear.
    Cross-checks (inherited ``at_d2``: :func:`derive_linear_task_risk`): at ``d = 2`` with ``Λ = (l_ij)``
    the general ``R`` equals its matrix result, and ``r`` equals its per-eigenvalue term.

    ``result``: ``R`` (in ``G``, ``Λ``, ``M``); facts ``G``, ``Gamma_N``, ``Gamma_M``, ``stated``,
    ``split``, ``eigen`` (``r``), ``eigen_symbols`` (λ, t), ``Lambda``, ``sizes`` (d, N, M).

    >>> D = derive_linear_task_risk_general()
    >>> D.provenance
    {'result': 'derived'}
    """
    d, N, M, L = _sym_sizes()
    B, A, G = (sp.MatrixSymbol(n, d, d) for n in ("B", "A", "G"))
    b = DerivationBuilder("Linear-task test risk of B = Γ_N⁻¹ at test length M, symbolic d, N and M")
    b.symbols(d="dimension (symbolic)", N="training prompt length (symbolic)", M="test prompt length (symbolic)",
              Lambda="covariance of x (symmetric positive definite)", B="the predictor's matrix", A="any d × d matrix",
              G="Γ_N as a symbol (symmetric)", Lambda_hat="(1/M) Σ_{i≤M} x_i x_iᵀ on the test prompt",
              lambda_="scalar image of Λ (an eigenvalue)", t="tr Λ", gamma_N="(1 + 1/N)λ + t/N")
    b.define("Test prompt of length M (ρ = M): ŷ = hᵀBx_q, h = (1/M)Σ_{i≤M} y_i x_i, B = Γ_N⁻¹ (trained at length N); "
             "R = E(ŷ − ⟨w, x_q⟩)² = 2·L_M(B) with L_M the population loss at prompt length M")
    z = _isserlis_loss_steps(b, L, B, M, A)
    R = b.step("R = 2·L_M(G⁻¹), Gᵀ = G, traces tidied", gaussian.tidy(2 * z["loss"].xreplace({B: G.I}), [L, G]))
    GamN, GamM = gaussian.zfb_gamma(L, N), gaussian.zfb_gamma(L, M)
    b.obligation("risk_matrix_form",
                 gaussian.tidy(R - (sp.Trace(L) - 2 * sp.Trace(G.I * L * L) + sp.Trace(G.I * L * GamM * G.I * L)), [L, G]),
                 description="R = tr Λ − 2tr(Γ_N⁻¹Λ²) + tr(Γ_N⁻¹ΛΓ_MΓ_N⁻¹Λ) (no commutation used)")
    b.obligation("Gamma_commutes_with_Lambda", gaussian.tidy(GamN * L - L * GamN, [L]), description="Γ_NΛ = ΛΓ_N")
    b.assume("λ ↦ Λ, 1/γ_N(λ) ↦ Γ_N⁻¹ extends to a ring homomorphism from rational functions in λ with powers of γ_N "
             "as denominators (Λ and Γ_N⁻¹ commute; Γ_N = γ_N(Λ) is invertible), and the trace is linear: a trace "
             "form Σ_k c_k tr(f_k(Λ)) is tr(F(Λ)) with F = Σ_k c_k f_k, so F ≡ 0 makes it 0", key="ring homomorphism λ ↦ Λ")
    lam, t = sp.symbols("lambda t", positive=True)
    img = lambda e: gaussian.commuting_trace_image(gaussian.tidy(e, [L, G]),  # noqa: E731
                                                   {L: lam, G: (1 + 1 / N) * lam + t / N}, {sp.Trace(L): t})
    r = b.step("Scalar image r(λ, t, N, M) of R (Λ → λ, Γ_N → γ_N(λ) = (1 + 1/N)λ + t/N, tr Λ → t)",
               sp.factor(sp.together(img(R))))
    K = L + sp.Trace(L) * sp.Identity(d)
    stated = sp.Trace(L) - 2 * sp.Trace(G.I * L * L) + sp.Trace(G.I * G.I * GamM * L * L)
    split = sp.Trace(G.I * G.I * L * L * K) / M + sp.Trace(G.I * G.I * L * K * K) / N**2
    b.obligation("risk_formula", sp.cancel(img(R - stated)),
                 description="R = tr Λ − 2tr(Γ_N⁻¹Λ²) + tr(Γ_N⁻²Γ_MΛ²): the image of the difference is 0")
    b.obligation("split_form", sp.cancel(img(R - split)),
                 description="R = (1/M)tr(Γ_N⁻²Λ²(Λ + tr(Λ)I)) + (1/N²)tr(Γ_N⁻²Λ(Λ + tr(Λ)I)²)")
    D2 = derive_linear_task_risk(2)
    b.inherit(D2, "at_d2")
    L2 = D2.facts["Lambda"]
    ren = {N: Nsym, M: Msym}
    G2 = _at_d(GamN, d, 2, {"Lambda": L2}, ren)
    R2 = b.step("Cross-check: the general R at d = 2, Λ = (l_ij)", _at_d(R, d, 2, {"Lambda": L2, "G": G2}, ren, G))
    b.obligation("general_equals_at_d2", sp.cancel(sp.together(R2 - D2.result["matrix"])),
                 description="the general risk at d = 2 equals the risk derived by Wick sums at d = 2")
    l2, t2 = D2.facts["eigen_symbols"]
    b.obligation("eigen_term_equals_at_d2", sp.cancel(r.xreplace({lam: l2, t: t2, **ren}) - D2.result["eigen"]),
                 description="r(λ, t, N, M) equals the per-eigenvalue term of the d = 2 derivation")
    for k, v in (("G", G), ("Gamma_N", GamN), ("Gamma_M", GamM), ("stated", stated), ("split", split), ("eigen", r),
                 ("eigen_symbols", (lam, t)), ("Lambda", L), ("sizes", (d, N, M))):
        b.fact(k, v)
    return b.done(R)
