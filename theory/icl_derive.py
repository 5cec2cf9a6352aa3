"""In-context learning of linear regression: the derivations at fixed sizes (d = 2 and the like; symbolic Λ, N, M),
each a chain of SymPy operations from the definitions. Part of :mod:`theory.icl`."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp
from sympy.matrices.expressions.matadd import canonicalize

from theory.derivation import Derivation, DerivationBuilder
from theory.icl_forms import Msym, Nsym, _blockdiag, _simplified_residual, _wick, symbolic_spd, wick_expectation

# ------------------------------------------------------------------------------------------------
# derivations


@lru_cache(maxsize=None)
def derive_lsa_prediction_form(d: int = 2, N: int = 2) -> Derivation:
    """Expand ``[E + W^{PV} E Eᵀ W^{KQ} E/ρ]_{d+1,N+1}`` for fully symbolic ``W^{PV}, W^{KQ}, E``
    and show it equals the block form ``[w21ᵀ, w22](E Eᵀ/ρ)[W11; w21'ᵀ] x_q``.

    ``result`` is the expanded prediction; ``facts``: ``residual`` (0), ``params_used`` (the
    weights it depends on), the symbols, and ``block_form``.

    >>> D = derive_lsa_prediction_form(1, 1)
    >>> D.facts["residual"]
    0
    >>> sorted(map(str, D.facts["params_used"]))
    ['kq_11', 'kq_21', 'pv_21', 'pv_22']
    """
    b = DerivationBuilder("LSA prediction: only the last row of W^PV and first d columns of W^KQ matter")
    b.symbols(pv_ij="entry (i, j) of W^PV", kq_ij="entry (i, j) of W^KQ", x_ji="coordinate i of context example j",
              xq_i="coordinate i of the query", y_j="label of example j", rho="the normalisation ρ")
    D1, T = d + 1, N + 1
    PV = sp.Matrix(D1, D1, lambda i, j: sp.Symbol(f"pv_{i + 1}{j + 1}"))
    KQ = sp.Matrix(D1, D1, lambda i, j: sp.Symbol(f"kq_{i + 1}{j + 1}"))
    X = sp.Matrix(d, T, lambda i, j: sp.Symbol(f"x_{j + 1}{i + 1}" if j < N else f"xq_{i + 1}"))
    y = sp.Matrix(1, T, lambda i, j: sp.Symbol(f"y_{j + 1}") if j < N else sp.Integer(0))
    E = X.col_join(y)
    rho = sp.Symbol("rho", positive=True)
    b.define("Prompt E (tokens are columns, query label 0)", E)
    b.define("f_LSA(E) = E + W^PV E (Eᵀ W^KQ E)/ρ; the prediction is entry (d+1, N+1)",
             r"\hat y=\Big[E+W^{PV}E\,\frac{E^{\top}W^{KQ}E}{\rho}\Big]_{d+1,N+1}")
    F = E + PV * E * (E.T * KQ * E) / rho
    yhat = sp.expand(F[d, N])
    b.step("ŷ = [E + W^(PV) E (Eᵀ W^(KQ) E)/ρ], entry (d+1, N+1), expanded", yhat)
    used = sorted(yhat.free_symbols & (set(PV) | set(KQ)), key=str)
    b.fact("params_used", used)
    b.step("Weights that appear in ŷ", sp.Matrix([used]))
    row = PV[d, :]
    cols = KQ[:, :d]
    xq = X[:, N]
    block = sp.expand((row * (E * E.T) / rho * cols * xq)[0, 0])
    b.define("Block form [w21ᵀ, w22] (E Eᵀ/ρ) [W11; w21'ᵀ] x_q (the claimed form), expanded", block)
    b.obligation("prediction_equals_block_form", yhat - block)
    res = sp.simplify(yhat - block)
    b.step("Difference (simplified)", res)
    b.record(residual=res, block_form=block, symbols={"PV": PV, "KQ": KQ, "X": X, "y": y, "rho": rho})
    return b.done(yhat)


def _moment_blocks(d: int):
    """Joint Gaussian z = (w, x_1, x_2): indices and covariance diag(I, Λ, Λ) for symbolic Λ."""
    L = symbolic_spd(d)
    cov = _blockdiag(sp.eye(d), L, L)
    w = list(range(d))
    x1 = list(range(d, 2 * d))
    x2 = list(range(2 * d, 3 * d))
    return L, cov, w, x1, x2


def _gamma(L: sp.Matrix, N=Nsym) -> sp.Matrix:
    """``Γ_N = (1 + 1/N) Λ + (1/N) tr(Λ) I`` for an explicit SymPy matrix (no validation)."""
    return (1 + 1 / N) * L + L.trace() / N * sp.eye(L.rows)


def _loss_trace(L, G, B, I):
    """``½ tr(Λ (Bᵀ ΛΓ B − Bᵀ Λ − Λ B + I))``: the population loss after inserting
    ``E[hhᵀ] = ΛΓ_N``, ``E[hwᵀ] = Λ``, ``E[wwᵀ] = I`` into ``½ tr(Λ E[(Bᵀh − w)(Bᵀh − w)ᵀ])``.
    Works for explicit matrices and for MatrixSymbols (then the trace is a ``Trace``)."""
    inner = B.T * L * G * B - B.T * L - L * B + I
    if isinstance(L, sp.MatrixBase):
        return sp.Rational(1, 2) * (L * inner).trace()
    return sp.Trace(L * inner) / 2


def _general_symbols():
    n = sp.Symbol("n", integer=True, positive=True)
    return n, sp.MatrixSymbol("Lambda", n, n), sp.MatrixSymbol("Gamma_N", n, n), sp.MatrixSymbol("B", n, n)


@lru_cache(maxsize=None)
def derive_moments(d: int = 2) -> Derivation:
    """``E[h hᵀ]`` and ``E[h wᵀ]`` for ``h = (1/N) Σ y_i x_i`` by Wick sums at symbolic Λ (d×d),
    then the matrix form for general Λ (MatrixSymbol algebra).

    ``result`` = ``{"hh": E[hhᵀ], "hw": E[hwᵀ]}`` (SymPy matrices in ``l_ij`` and ``N``);
    ``facts``: ``Lambda``, ``hh_minus_LambdaGamma`` (zero matrix), ``matrix_form_residual`` (0).

    >>> D = derive_moments(2)
    >>> D.facts["hh_minus_LambdaGamma"].is_zero_matrix
    True
    >>> D.result["hw"] == D.facts["Lambda"]
    True
    """
    b = DerivationBuilder("Moments of h = (1/N) Σ y_i x_i by Isserlis/Wick")
    b.symbols(l_ij="entry (i, j) of the covariance Λ of x (symmetric, l_ji = l_ij)", N="context length",
              w="task vector, N(0, I_d)", h="(1/N) Σ_i y_i x_i with y_i = ⟨w, x_i⟩", A_pq="entry of a generic matrix A",
              n="dimension (general Λ)")
    L, cov, w, x1, x2 = _moment_blocks(d)
    b.define("Joint Gaussian (w, x_i, x_j), i ≠ j: covariance diag(I, Λ, Λ)", sp.Matrix(cov))
    b.assume("Isserlis/Wick: a Gaussian moment E[z_1 ⋯ z_2k] is the sum over pairings of products of covariances",
             r"E[z_1\cdots z_{2k}]=\sum_{\text{pairings}}\prod \operatorname{Cov}", key="Isserlis' theorem")
    # E[y_i x_ia y_i x_ib] with y_i = Σ_k w_k x_ik: degree-6 Wick sums
    same = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        _wick((w[k], x1[k], w[l], x1[l], x1[a], x1[c]), cov) for k in range(d) for l in range(d))))
    cross = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        _wick((w[k], x1[k], x1[a], w[l], x2[l], x2[c]), cov) for k in range(d) for l in range(d))))
    b.step("Same example i = j: E[y_i² x_i x_iᵀ] (Wick sum)", same)
    b.step("Different examples i ≠ j: E[y_i y_j x_i x_jᵀ] (Wick sum)", cross)
    hh = sp.expand(same / Nsym + (1 - 1 / Nsym) * cross)
    b.step("E[hhᵀ] = (1/N)·same + (1 − 1/N)·cross  (N same-index terms, N(N−1) others, over N²)", hh)
    hw = sp.Matrix(d, d, lambda a, c: sp.expand(sum(_wick((w[k], x1[k], x1[a], w[c]), cov) for k in range(d))))
    b.step("E[h wᵀ] = E[y x wᵀ] (Wick sum)", hw)
    G = _gamma(L)
    b.define("Γ_N = (1 + 1/N)Λ + (1/N)tr(Λ)I", G, compact=r"\Gamma_N=(1+\tfrac1N)\Lambda+\tfrac1N\operatorname{tr}(\Lambda)I")
    b.obligation("hh_equals_Lambda_Gamma", hh - L * G, description="E[hhᵀ] = ΛΓ_N")
    b.obligation("hw_equals_Lambda", hw - L, description="E[hwᵀ] = Λ")
    resid = _simplified_residual(hh - L * G)
    b.step("E[hhᵀ] − Λ Γ_N", resid)
    b.fact("hh_minus_LambdaGamma", resid)
    b.fact("hw_minus_Lambda", _simplified_residual(hw - L))
    # general Λ: the three Wick pairings of E[x xᵀ A x xᵀ] read as matrix products
    n = sp.Symbol("n", integer=True, positive=True)
    Lm, A = sp.MatrixSymbol("Lambda", n, n), sp.MatrixSymbol("A", n, n)
    four = Lm * A * Lm + Lm * A.T * Lm + sp.Trace(A * Lm) * Lm
    b.assume("General Λ: the pairings (ac)(eb), (ae)(cb), (ab)(ce) of Σ A_ce E[x_a x_c x_e x_b] read as "
             "matrix products give E[x xᵀ A x xᵀ]", four, key="fourth-moment pairings")
    four_entry = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        sp.Symbol(f"A_{p}{q}") * _wick((x1[a], x1[p], x1[q], x1[c]), cov) for p in range(d) for q in range(d))))
    A_d = sp.Matrix(d, d, lambda p, q: sp.Symbol(f"A_{p}{q}"))
    b.step(f"E[x xᵀ A x xᵀ] by Wick sums at d = {d}", four_entry)
    b.obligation("four_moment_matrix_form", four_entry - (L * A_d * L + L * A_d.T * L + (A_d * L).trace() * L),
                 description=f"the matrix form of the fourth moment agrees with the Wick sum at d = {d}")
    four_check = _simplified_residual(four_entry - (L * A_d * L + L * A_d.T * L + (A_d * L).trace() * L))
    b.fact("four_moment_residual", four_check)
    b.step(f"Check of that matrix form against the Wick sum at d = {d}", four_check)
    hh_gen = (four.subs(A, sp.Identity(n)) / Nsym + (1 - 1 / Nsym) * Lm * Lm)
    G_gen = (1 + 1 / Nsym) * Lm + sp.Trace(Lm) / Nsym * sp.Identity(n)
    mres = sp.simplify(sp.expand(hh_gen.doit() - Lm * G_gen))
    b.step("General Λ: E[hhᵀ] = (1/N)E[xxᵀxxᵀ] + (1 − 1/N)Λ² minus ΛΓ_N", mres)
    b.obligation("general_hh_equals_Lambda_Gamma", mres,
                 description="matrix-expression algebra (SymPy returns ZeroMatrix when it vanishes)")
    b.fact("matrix_form_residual", mres)
    b.fact("Lambda", L)
    return b.done({"hh": hh, "hw": hw})


@lru_cache(maxsize=None)
def derive_wishart(d: int = 2) -> Derivation:
    """``E[S A S]`` for ``S = (1/M) Σ_i x_i x_iᵀ`` and a general (non-symmetric) ``A`` by Wick sums.

    ``result`` is the derived matrix; ``facts["residual"]`` is its difference from
    ``ΛAΛ + (1/M)(ΛAᵀΛ + tr(AΛ)Λ)`` (zero), ``facts["A"]``, ``facts["Lambda"]``.

    >>> derive_wishart(2).facts["residual"].is_zero_matrix
    True
    """
    b = DerivationBuilder("Wishart moment E[S A S] by Isserlis/Wick")
    b.symbols(l_ij="entry (i, j) of Λ (symmetric)", A_pq="entry of a generic matrix A", M="number of samples in S")
    L, cov, _, x1, x2 = _moment_blocks(d)
    b.define("S = (1/M) Σ_i x_i x_iᵀ with x_i ~ N(0, Λ) independent", r"S=\tfrac1M\sum_{i=1}^M x_ix_i^{\top}")
    A = sp.Matrix(d, d, lambda p, q: sp.Symbol(f"A_{p + 1}{q + 1}"))
    same = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        A[p, q] * _wick((x1[a], x1[p], x1[q], x1[c]), cov) for p in range(d) for q in range(d))))
    cross = sp.Matrix(d, d, lambda a, c: sp.expand(sum(
        A[p, q] * _wick((x1[a], x1[p], x2[q], x2[c]), cov) for p in range(d) for q in range(d))))
    b.step("i = j: E[x xᵀ A x xᵀ] (Wick sum)", same)
    b.step("i ≠ j: E[x_i x_iᵀ A x_j x_jᵀ] (Wick sum)", cross)
    res = sp.expand(same / Msym + (1 - 1 / Msym) * cross)
    b.step("E[SAS] = (1/M)·same + (1 − 1/M)·cross", res)
    target = L * A * L + (L * A.T * L + (A * L).trace() * L) / Msym
    b.obligation("wishart_matrix_form", res - target, description="E[SAS] = ΛAΛ + (1/M)(ΛAᵀΛ + tr(AΛ)Λ)")
    resid = _simplified_residual(res - target)
    b.step("Minus ΛAΛ + (1/M)(ΛAᵀΛ + tr(AΛ)Λ)", resid)
    b.record(residual=resid, A=A, Lambda=L)
    return b.done(res)


@lru_cache(maxsize=None)
def derive_population_loss(d: int = 2) -> Derivation:
    """``L(B) = ½ E(hᵀ B x_q − wᵀ x_q)²`` from the Wick moments of :func:`derive_moments`.

    ``result`` is a polynomial in ``B`` entries ``b_ij``, ``l_ij`` and ``N``; ``facts``: ``B``,
    ``Lambda``, ``gradient`` (∂L/∂B, a matrix).

    >>> D = derive_population_loss(1)
    >>> sp.factor(D.result.subs(D.facts["B"][0, 0], 0))
    l_11/2
    """
    b = DerivationBuilder("Population loss of the LSA in B = w22·W11")
    b.symbols(b_ij="entry (i, j) of B = w22·W11", l_ij="entry (i, j) of Λ (symmetric)", N="context length")
    mom = derive_moments(d)
    b.inherit(mom, "moments")
    L = mom.facts["Lambda"]
    B = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"b_{i + 1}{j + 1}", real=True))
    b.define("Block form with only w22, W11 non-zero and ρ = N: ŷ = hᵀ B x_q, B = w22·W11", B)
    b.assume("x_q ~ N(0, Λ) is independent of (h, w): E over x_q gives ½ E (Bᵀh − w)ᵀ Λ (Bᵀh − w)",
             r"L(B)=\tfrac12\operatorname{tr}\big(\Lambda\,E[(B^{\top}h-w)(B^{\top}h-w)^{\top}]\big)", key="independent query x_q")
    inner = B.T * mom.result["hh"] * B - B.T * mom.result["hw"] - mom.result["hw"].T * B + sp.eye(d)
    loss = sp.expand(sp.Rational(1, 2) * (L * inner).trace())
    b.step("Insert the derived E[hhᵀ], E[hwᵀ] and E[wwᵀ] = I", loss,
           compact=r"L(B)=\tfrac12\big[\operatorname{tr}(B^{\top}\Lambda\Gamma_N B\Lambda)-2\operatorname{tr}(\Lambda B\Lambda)+\operatorname{tr}\Lambda\big]")
    grad = sp.Matrix(d, d, lambda i, j: sp.expand(sp.diff(loss, B[i, j])))
    b.step("Gradient ∂L/∂B (differentiated entry by entry)", grad,
           compact=r"\nabla_B L=\Lambda\Gamma_N B\Lambda-\Lambda^2")
    G = _gamma(L)
    b.obligation("gradient_matrix_form", grad - (L * G * B * L - L * L), description="∂L/∂B = ΛΓ_N B Λ − Λ²")
    b.record(gradient=grad, B=B, Lambda=L)
    return b.done(loss)


@lru_cache(maxsize=None)
def derive_global_min(d: int = 2) -> Derivation:
    """Solve ``∇_B L = 0`` at symbolic Λ, derive the stationarity equation for general Λ by
    matrix calculus and solve it entrywise in the eigenbasis, and derive the conserved quantity
    ``u² − ‖U‖_F²`` of the gradient flow on ``B = uU`` (u = w22, U = W11) and the limit of u.

    ``result`` is the solution ``B*`` (SymPy matrix); facts: ``residual_vs_gamma_inv`` (zero),
    ``hessian_B`` (Hessian in row-major vec B, equal to ``ΛΓ_N ⊗ Λ``), ``general_gradient``
    (the matrix-calculus gradient), ``eigen_solution`` (``δ_ij/γ_i``), ``conserved_rate``
    (d/dt of ``u² − ‖U‖_F²`` along the flow, 0), ``u_limit`` (in terms of ``F``, the Frobenius
    norm of ``Γ_N^{-1}``), ``conserved``.

    >>> D = derive_global_min(2)
    >>> D.facts["residual_vs_gamma_inv"].is_zero_matrix
    True
    >>> D.facts["eigen_solution"]
    KroneckerDelta(i, j)/gamma_i
    """
    b = DerivationBuilder("Global minimiser of the population loss: w22·W11 = Γ_N⁻¹")
    b.symbols(b_ij="entry (i, j) of B = w22·W11", l_ij="entry (i, j) of Λ (symmetric)", N="context length",
              lambda_i="eigenvalue i of Λ", gamma_i="eigenvalue i of Γ_N, (1 + 1/N)λ_i + tr(Λ)/N",
              u="w22", U_ij="entry (i, j) of U = W11", L_B="the loss as a function of the entries of B",
              F="Frobenius norm of Γ_N^{-1}", nU="Frobenius norm of U")
    P = derive_population_loss(d)
    b.inherit(P, "population_loss")
    B, L = P.facts["B"], P.facts["Lambda"]
    G = _gamma(L)
    eqs = list(P.facts["gradient"])
    b.step("Stationarity: every entry of ∂L/∂B vanishes (a linear system in the b_ij)", sp.Matrix(eqs),
           compact=r"\Lambda\Gamma_N B\Lambda-\Lambda^2=0")
    sol = sp.solve(eqs, list(B), dict=True)
    b.obligation("unique_stationary_point", sp.Integer(len(sol) - 1), description="the linear system has exactly one solution")
    Bstar = B.subs(sol[0]).applyfunc(sp.factor) if sol else B * sp.nan
    b.step("Its solution", Bstar, compact=r"B^{*}=\Gamma_N^{-1}")
    b.obligation("solution_is_gamma_inverse", Bstar * G - sp.eye(d), description="B* Γ_N = I")
    resid = (Bstar * G - sp.eye(d)).applyfunc(sp.simplify)
    b.step("B* Γ_N − I", resid)
    b.fact("residual_vs_gamma_inv", resid)
    H = sp.hessian(P.result, list(B))
    b.step("Hessian in row-major vec B = (b_11, b_12, …)", H, compact=r"\nabla^2_{\operatorname{vec}B}L=\Lambda\Gamma_N\otimes\Lambda")
    b.obligation("hessian_is_kronecker", H - sp.kronecker_product(L * G, L), description="Hessian = ΛΓ_N ⊗ Λ")
    b.assume("ΛΓ_N and Λ are positive definite (Γ_N = (1+1/N)Λ + (tr Λ/N)I commutes with Λ), and a Kronecker "
             "product of positive-definite matrices is positive definite: L is strictly convex in B, so B* is the "
             "global minimum", key="positive-definite Hessian")
    b.fact("hessian_B", H)
    # general Λ: matrix calculus on the trace form, then entry (i, j) in the eigenbasis
    n, Lm, Gm, Bm = _general_symbols()
    loss_m = _loss_trace(Lm, Gm, Bm, sp.Identity(n))
    b.step("General Λ (n×n): the loss with E[hhᵀ] = ΛΓ_N and E[hwᵀ] = Λ inserted", loss_m)
    # Λ and Γ_N are symmetric and commute (Γ_N is a polynomial in Λ); canonicalize collects terms
    grad_m = canonicalize(sp.diff(loss_m, Bm).subs({Lm.T: Lm, Gm.T: Gm}).subs(Gm * Lm, Lm * Gm))
    b.step("Its matrix derivative, with Λ and Γ_N symmetric and commuting (Γ_N is a polynomial in Λ)", grad_m)
    b.fact("general_gradient", grad_m)
    at_d = grad_m.subs(n, d).xreplace({sp.MatrixSymbol(m.name, d, d): sp.ImmutableMatrix(v)
                                       for m, v in ((Lm, L), (Gm, G), (Bm, B))}).doit()
    b.obligation("general_gradient_matches_entrywise", sp.Matrix(at_d) - P.facts["gradient"],
                 description=f"the matrix-calculus gradient at n = {d} equals the entry-by-entry gradient")
    lam, gam = sp.MatrixSymbol("lambda", n, 1), sp.MatrixSymbol("gamma", n, 1)
    i, j = sp.symbols("i j", integer=True, nonnegative=True)
    li, lj, gi, bij = sp.symbols("lambda_i lambda_j gamma_i b_ij", positive=True)
    b.assume("Eigenbasis of Λ (rotations leave the loss invariant): Λ = diag(λ), and Γ_N = diag(γ) in the same basis "
             "because it is a polynomial in Λ", r"\Lambda=\operatorname{diag}(\lambda),\ \Gamma_N=\operatorname{diag}(\gamma)", key="eigenbasis of Λ")
    entry = grad_m.subs({Lm: sp.DiagMatrix(lam), Gm: sp.DiagMatrix(gam)})[i, j].doit()
    # the Piecewise guards say 0 ≤ i, j ≤ n − 1, true for the indices of an entry
    entry = entry.replace(lambda e: isinstance(e, sp.Piecewise), lambda e: e.args[0][0])
    entry = sp.factor(entry.subs({Bm[i, j]: bij, lam[i, 0]: li, lam[j, 0]: lj, gam[i, 0]: gi}))
    b.step("Entry (i, j) of the gradient in the eigenbasis (δ_ij = KroneckerDelta(i, j)), set to 0", sp.Eq(entry, 0),
           equation=True)
    esol = sp.solve(entry, bij)
    b.obligation("unique_eigenbasis_solution", sp.Integer(len(esol) - 1))
    b.step("Solved for b_ij", esol[0])
    # δ_ij vanishes unless i = j, and there λ_j = λ_i
    eig = sp.simplify(esol[0].subs(lj, li))
    b.step("δ_ij ≠ 0 only when i = j, where λ_j = λ_i: B* is diagonal with entries 1/γ_i, i.e. Γ_N⁻¹", eig)
    b.fact("eigen_solution", eig)
    # gradient flow on (u, U) with B = uU: u² − ‖U‖_F² is conserved, for ANY loss of the product
    u = sp.Symbol("u", real=True)
    U = sp.Matrix(d, d, lambda r, c: sp.Symbol(f"U_{r + 1}{c + 1}", real=True))
    LB = sp.Function("L_B")(*[u * e for e in U])
    b.define(f"Gradient flow on (u, U) for a loss L_B(uU) of the product (any differentiable L_B; d = {d})",
             r"\dot u=-\partial_u L_B(uU),\quad \dot U=-\nabla_U L_B(uU)")
    du = -sp.diff(LB, u)
    dU = U.applyfunc(lambda e: -sp.diff(LB, e))
    b.step("du/dt by the chain rule", du)
    Q = u**2 - sum(e**2 for e in U)
    rate = sp.expand(sp.diff(Q, u) * du + sum(sp.diff(Q, e) * de for e, de in zip(U, dU)))
    b.step("d/dt (u² − Σ U_ij²) along the flow", rate)
    b.obligation("conserved_along_flow", rate, description="d/dt (u² − Σ_ij U_ij²) = 0 for every loss of the product")
    b.fact("conserved_rate", rate)
    b.assume("ZFB initialisation: u² equals the squared Frobenius norm of U at t = 0, so u² − Σ_ij U_ij² = 0 for all t", key="balanced ZFB initialisation",
             clauses=("flow_limit",))
    F, nU = sp.symbols("F nU", positive=True)
    b.assume("At the limit uU = Γ_N⁻¹ (the flow converges to the global minimum, ZFB Thm 4.1), so u·nU = F",
             sp.Eq(u * nU, F), key="ZFB Thm 4.1 convergence", clauses=("flow_limit",))
    up = sp.Symbol("u", positive=True)
    lim = sp.solve([sp.Eq(up**2, nU**2), sp.Eq(up * nU, F)], [up, nU], dict=True)
    b.obligation("unique_positive_limit", sp.Integer(len(lim) - 1))
    b.step("u² = nU² and u·nU = F give u =", lim[0][up])
    b.record(u_limit=lim[0][up], conserved="u**2 - ||U||_F**2", F=F)
    return b.done(Bstar)


@lru_cache(maxsize=None)
def derive_loss_minimum(d: int = 2) -> Derivation:
    """Insert ``B* = Γ_N^{-1}`` into the derived loss; also the eigenbasis form ``½Σ(λ − λ²/γ)``,
    from the one-dimensional loss of one eigen-direction minimised over its entry ``b``.

    ``result`` is the minimum (SymPy in ``l_ij``, ``N``); facts: ``Lambda``, ``eigen_form``
    (per eigenvalue λ, in ``λ``, ``t = tr Λ`` and ``N``), ``eigen_symbols``.

    >>> D = derive_loss_minimum(1)
    >>> sp.factor(D.result)
    l_11/(N + 2)
    """
    b = DerivationBuilder("Minimum of the population loss")
    b.symbols(l_ij="entry (i, j) of Λ (symmetric)", N="context length", lambda_="an eigenvalue of Λ",
              t="tr Λ", gamma="the matching eigenvalue of Γ_N", b="the entry of B* in that eigen-direction")
    P, S = derive_population_loss(d), derive_global_min(d)
    b.inherit(S, "global_min")
    B = P.facts["B"]
    val = sp.simplify(P.result.subs({B[i, j]: S.result[i, j] for i in range(d) for j in range(d)}))
    b.step("L(B*) with the solved B*", val, compact=r"\tfrac12\big[\operatorname{tr}\Lambda-\operatorname{tr}(\Gamma_N^{-1}\Lambda^2)\big]")
    lam, t = sp.symbols("lambda t", positive=True)
    gam, bb = sp.Symbol("gamma", positive=True), sp.Symbol("b", real=True)
    b.assume("Eigenbasis: Λ, Γ_N and B* = Γ_N⁻¹ are diagonal, so the trace form of the loss is a sum over "
             "eigen-directions of its 1×1 version (Λ = λ, Γ_N = γ, B = b)", key="eigenbasis of Λ")
    per = sp.expand(_loss_trace(sp.Matrix([[lam]]), sp.Matrix([[gam]]), sp.Matrix([[bb]]), sp.eye(1)))
    b.step("One eigen-direction: ½ tr(Λ(BᵀΛΓB − BᵀΛ − ΛB + I)) at 1×1", per)
    bstar = sp.solve(sp.diff(per, bb), bb)
    b.obligation("unique_minimiser_per_direction", sp.Integer(len(bstar) - 1))
    b.step("∂/∂b = 0 gives b =", bstar[0])
    g = (1 + 1 / Nsym) * lam + t / Nsym
    per_min = sp.simplify(per.subs(bb, bstar[0]).subs(gam, g))
    b.step("Its minimum, with γ = (1 + 1/N)λ + t/N (t = tr Λ)", per_min)
    L = P.facts["Lambda"]
    diag_sub = {L[0, k]: 0 for k in range(1, d)} | {L[r, c]: 0 for r in range(d) for c in range(d) if r != c}
    tr = sum(L[k, k] for k in range(d))
    b.obligation("eigen_form_matches_matrix_form",
                 val.subs(diag_sub) - sum(per_min.subs({lam: L[k, k], t: tr}) for k in range(d)),
                 description=f"at diagonal Λ (d = {d}) the minimum is the sum of the per-direction minima")
    b.record(eigen_form=per_min, eigen_symbols=(lam, t), Lambda=L)
    return b.done(val)


@lru_cache(maxsize=None)
def derive_linear_task_risk(d: int = 2) -> Derivation:
    """``R = E(x_qᵀ Γ_N^{-1} S w − x_qᵀ w)²`` with ``S = (1/M)Σ x_i x_iᵀ`` via the Wishart moment,
    then its split into ``1/M`` and ``1/N²`` terms in the eigenbasis (general Λ).

    ``result`` = ``{"matrix": R(l_ij, N, M) at this d, "eigen": per-eigenvalue term r(λ, t, N, M)}``
    with ``R = Σ_k r(λ_k, tr Λ, N, M)``; ``facts["split_residual"]`` (``r`` minus the stated
    ``(1/M) λ²(λ+t)/γ_N² + (1/N²) λ(λ+t)²/γ_N²``, 0).

    >>> D = derive_linear_task_risk(1)
    >>> D.facts["split_residual"]
    0
    """
    b = DerivationBuilder("Linear-task test risk of the trained LSA")
    b.symbols(l_ij="entry (i, j) of Λ (symmetric)", N="training context length", M="test context length",
              lambda_="an eigenvalue of Λ", t="tr Λ", gamma_N="(1 + 1/N)λ + t/N", gamma_M="(1 + 1/M)λ + t/M",
              u="1/M")
    W = derive_wishart(d)
    b.inherit(W, "wishart")
    L, A = W.facts["Lambda"], W.facts["A"]
    G = _gamma(L)
    Gi = G.inv()
    ESS = W.result.subs({A[i, j]: (1 if i == j else 0) for i in range(d) for j in range(d)})
    b.step("E[S wwᵀ S] = E[S I S] (w ⟂ S, E wwᵀ = I), from the Wishart moment", ESS)
    b.obligation("ESS_equals_Lambda_Gamma_M", ESS - L * _gamma(L, Msym), description="E[SS] = ΛΓ_M")
    b.assume("x_q ~ N(0, Λ) independent of (S, w): R = tr(Λ E[(Γ⁻¹S w − w)(Γ⁻¹S w − w)ᵀ])", key="independent query x_q")
    R = (L * (Gi * ESS * Gi - Gi * L - L * Gi + sp.eye(d))).trace()
    R = sp.factor(R)  # factor puts it over one denominator and cancels (as factor(cancel(together(R))), cheaper)
    b.step("R = tr(Λ(Γ⁻¹E[SS]Γ⁻¹ − Γ⁻¹Λ − ΛΓ⁻¹ + I))", R)
    lam, t = sp.symbols("lambda t", positive=True)
    gN_, gM_ = sp.symbols("gamma_N gamma_M", positive=True)
    b.assume("Eigenbasis: Λ, Γ_N and E[SS] = ΛΓ_M are diagonal, so R is a sum over eigen-directions of its 1×1 "
             "version (Λ = λ, Γ_N = γ_N, Γ_M = γ_M)", key="eigenbasis of Λ")
    l1, gn1 = sp.Matrix([[lam]]), sp.Matrix([[gN_]])
    per = (l1 * (gn1.inv() * l1 * sp.Matrix([[gM_]]) * gn1.inv() - gn1.inv() * l1 - l1 * gn1.inv() + sp.eye(1))).trace()
    per = sp.expand(per)
    b.step("One eigen-direction", per)
    gN = (1 + 1 / Nsym) * lam + t / Nsym
    gM = (1 + 1 / Msym) * lam + t / Msym
    u = sp.Symbol("u", positive=True)
    per_u = per.subs({gN_: gN, gM_: gM}).subs(Msym, 1 / u)
    b.obligation("linear_in_one_over_M", sp.diff(per_u, u, 2), description="the risk is affine in 1/M")
    at_inf = sp.factor(sp.simplify(per_u.subs(u, 0)))
    slope = sp.factor(sp.simplify(sp.diff(per_u, u)))
    b.step("Its value at 1/M = 0 (the 1/N² term)", at_inf)
    b.step("Its coefficient of 1/M", slope)
    eigen = at_inf + slope / Msym
    b.step("Per-eigenvalue risk r(λ, t, N, M)", eigen)
    split = lam**2 * (lam + t) / (Msym * gN**2) + lam * (lam + t) ** 2 / (Nsym**2 * gN**2)
    b.define("The stated split (1/M) λ²(λ+t)/γ_N² + (1/N²) λ(λ+t)²/γ_N²", split)
    b.obligation("split_matches_stated_form", eigen - split)
    b.obligation("per_direction_form", per.subs({gN_: gN, gM_: gM}) - eigen)
    sres = _simplified_residual(eigen - split)
    b.step("r minus the stated split", sres)
    b.fact("split_residual", sres)
    diag_sub = {L[r, c]: 0 for r in range(d) for c in range(d) if r != c}
    tr = sum(L[k, k] for k in range(d))
    b.obligation("eigen_sum_matches_matrix_form",
                 R.subs(diag_sub) - sum(eigen.subs({lam: L[k, k], t: tr}) for k in range(d)),
                 description=f"at diagonal Λ (d = {d}) R is the sum of the per-eigenvalue terms")
    b.fact("eigen_symbols", (lam, t))
    b.fact("Lambda", L)
    return b.done({"matrix": R, "eigen": eigen})


def _second_moment_expectation(poly_expr, pairs_xy: dict, pairs_h: dict, first_h: dict, xy_vars, h_vars):
    """``E`` of a polynomial that is of degree 2 in the query variables ``(x_q, y_q)`` and of
    degree ≤ 2 in ``h``, with ``(x_q, y_q)`` independent of ``h``: each monomial factorises into
    a second moment of the query part (``pairs_xy[(u, v)]``) times a moment of the h part
    (``pairs_h[(h_k, h_l)]`` or ``first_h[h_k]`` or 1)."""
    gens = list(xy_vars) + list(h_vars)
    P = sp.Poly(sp.expand(poly_expr), *gens)
    total = sp.Integer(0)
    nxy = len(xy_vars)
    for mono, coeff in P.terms():
        def factor_of(exps, vars_, moments2, moments1):
            picked = [v for v, e in zip(vars_, exps) for _ in range(e)]
            if not picked:
                return sp.Integer(1)
            if len(picked) == 1:
                return moments1[picked[0]]
            if len(picked) == 2:
                return moments2[tuple(picked)]
            raise ValueError("only moments of order ≤ 2 are known here")
        fx = factor_of(mono[:nxy], xy_vars, pairs_xy, None)
        fh = factor_of(mono[nxy:], h_vars, pairs_h, first_h)
        total += coeff * fx * fh
    return total


@lru_cache(maxsize=None)
def derive_general_target_risk(d: int = 2) -> Derivation:
    """ZFB Thm 4.2 from second moments: ``ŷ = x_qᵀ Γ^{-1} h``, ``E h = Λa``, ``Cov h = Σ/M``,
    query independent of the context; ``min_w E(⟨w,x⟩ − y)² = E y² − aᵀΛa``. The expectations
    are computed monomial by monomial from these second moments.

    ``result`` = excess risk ``E(ŷ−y)² − min`` (SymPy, symbolic ``a``, ``Σ``, ``l_ij``);
    facts: ``residual_vs_corrected`` (0), ``difference_vs_stated`` (non-zero), ``a``, ``Sigma``.

    >>> D = derive_general_target_risk(1)
    >>> D.facts["residual_vs_corrected"]
    0
    >>> D.facts["difference_vs_stated"] == 0
    False
    """
    b = DerivationBuilder("Test risk on a general target law (ZFB Thm 4.2)")
    b.symbols(l_i="eigenvalue i of Λ (Λ diagonal)", a_i="coordinate i of a = Λ^{-1} E[xy]", s_ij="entry of Σ = Cov(xy)",
              m_yy="E y²", x_i="coordinate i of the query x_q", y="the query label y_q", h_i="coordinate i of h",
              v_i="coordinate i of a linear predictor v", N="training context length", M="test context length")
    # Rotating coordinates (x ↦ Qᵀx, a ↦ Qᵀa, Σ ↦ QᵀΣQ) leaves every term invariant, so Λ may be
    # taken diagonal (its eigenvalues l_i) while a and Σ stay general.
    L = sp.diag(*sp.symbols(f"l_1:{d + 1}", positive=True))
    b.assume("Eigenbasis of Λ (every term is invariant under a rotation of x, a and Σ); a and Σ general", L, key="eigenbasis of Λ")
    a = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"a_{i + 1}", real=True))
    Sg = symbolic_spd(d, "s")
    Ey2 = sp.Symbol("m_yy", positive=True)
    G = _gamma(L)
    Gi = G.inv()
    xs = sp.symbols(f"x_1:{d + 1}", real=True)
    y = sp.Symbol("y", real=True)
    hs = sp.symbols(f"h_1:{d + 1}", real=True)
    La = L * a
    mom_xy = {}
    for i in range(d):
        for j in range(d):
            mom_xy[(xs[i], xs[j])] = L[i, j]
        mom_xy[(xs[i], y)] = mom_xy[(y, xs[i])] = La[i]
    mom_xy[(y, y)] = Ey2
    b.assume("Query (x_q, y_q): E[x xᵀ] = Λ, E[y x] = Λa (definition of a), E y² = m_yy",
             r"E[xx^{\top}]=\Lambda,\ E[yx]=\Lambda a,\ E[y^2]=m_{yy}", key="query moments")
    b.assume("h = (1/M)Σ y_i x_i is independent of the query, with E h = Λa and Cov h = Σ/M",
             r"E[h]=\Lambda a,\ \operatorname{Cov}(h)=\Sigma/M", key="h independent of the query")
    Ehh = Sg / Msym + La * La.T
    b.step("E[hhᵀ] = Cov h + E h E hᵀ", Ehh)
    mom_h = {(hs[i], hs[j]): Ehh[i, j] for i in range(d) for j in range(d)}
    first_h = {hs[i]: La[i] for i in range(d)}
    b.define("Prediction of the trained LSA: ŷ = x_qᵀ Γ_N⁻¹ h", r"\hat y=x_q^{\top}\Gamma_N^{-1}h")
    # expectations with a generic symmetric matrix g standing for Γ_N^{-1}, inserted afterwards
    Gs = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"g_{min(i, j) + 1}{max(i, j) + 1}", real=True))
    yhat = (sp.Matrix([xs]) * Gs * sp.Matrix(hs))[0, 0]
    risk_g = _second_moment_expectation((yhat - y) ** 2, mom_xy, mom_h, first_h, list(xs) + [y], hs)
    b.step("E(ŷ − y_q)² with g = Γ_N⁻¹ (symmetric), monomial by monomial from those moments", risk_g,
           compact=r"\operatorname{tr}(g\Lambda g\,E[hh^{\top}])-2(\Lambda a)^{\top}g\,\Lambda a+E y^2,\quad g=\Gamma_N^{-1}")
    wv = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"v_{i + 1}"))
    quad = _second_moment_expectation(((sp.Matrix([xs]) * wv)[0, 0] - y) ** 2, mom_xy, {}, {}, list(xs) + [y], [])
    b.step("E(⟨v, x⟩ − y)² for a linear predictor v", quad)
    wstar = sp.solve([sp.diff(quad, v) for v in wv], list(wv), dict=True)[0]
    mn = sp.simplify(quad.subs(wstar))
    b.step("Its minimum over v (at v = a)", mn)
    excess = sp.expand(risk_g - mn).subs({Gs[i, j]: Gi[i, j] for i in range(d) for j in range(d)})
    b.step("Excess risk, with g = Γ_N⁻¹ inserted", excess)
    t = L.trace()
    Gi2 = Gi * Gi
    nrm = lambda A: (a.T * A * a)[0, 0]  # noqa: E731
    corrected = (Sg * Gi2 * L).trace() / Msym + (nrm(Gi2 * L**3) + 2 * t * nrm(Gi2 * L**2) + t**2 * nrm(Gi2 * L)) / Nsym**2
    b.define("Corrected Thm 4.2: (1/M)tr(ΣΓ⁻²Λ) + (1/N²)[aᵀΓ⁻²Λ³a + 2tr(Λ)aᵀΓ⁻²Λ²a + tr(Λ)²aᵀΓ⁻²Λa]",
             corrected)
    b.obligation("matches_corrected_form", excess - corrected)
    rc = sp.cancel(sp.together(excess - corrected))
    b.step("Excess risk minus the corrected form", rc)
    Li = L.inv()
    nn = nrm(Li * Li * L)
    stated = (Sg * Li * Li * L).trace() / Msym + (nn + 2 * t * nn + t**2 * nn) / Nsym**2
    b.define("The seed's form (Λ⁻²Λ in every norm and in the trace)", stated)
    ds = excess - stated
    point = {s: sp.Rational(k + 2, k + 3) for k, s in enumerate(sorted(ds.free_symbols, key=str))}
    b.step("Excess risk minus the lecture notes' form at a rational point: not zero", ds.subs(point))
    b.obligation("stated_form_differs", ds.subs(point) ** 2, "positive",
                 description="(excess − stated)² at a rational point is > 0")
    b.record(residual_vs_corrected=rc, difference_vs_stated=ds, a=a, Sigma=Sg, Lambda=L, m_yy=Ey2)
    return b.done(excess)


@lru_cache(maxsize=None)
def derive_limits(d: int = 2) -> Derivation:
    """``Γ_N → Λ`` (N → ∞); linear-task risk → ``(1/N²)`` term (M → ∞) → 0 (N → ∞); under the
    covariate shift ``x ↦ c x`` at test, ``ŷ/y_q → c²`` as M → ∞ (the model does not transfer),
    derived from the LSA prediction with the shifted context moments (Wick), and the resulting
    risk ``(c² − 1)² E y_q²``.

    ``result`` = ``{"gamma_inf": Γ_∞ (matrix in l_ij), "risk_M_inf": per-eigenvalue limit M → ∞,
    "risk_NM_inf": 0 (M → ∞ then N → ∞), "risk_N_inf": per-eigenvalue limit N → ∞ at fixed M,
    "risk_MN_inf": 0 (N → ∞ then M → ∞), "shift_factor": c²}``; ``facts["shift_risk"]`` (in ``c``, ``w``, ``l_ij``).

    >>> D = derive_limits(2)
    >>> D.result["shift_factor"]
    c**2
    >>> D.result["risk_NM_inf"]
    0
    """
    b = DerivationBuilder("Limits N → ∞ and M → ∞; covariate shift")
    b.symbols(l_ij="entry (i, j) of Λ (symmetric)", N="training context length", M="test context length",
              c="scale of the test covariates, x ↦ c·x", w_i="coordinate i of the task vector w",
              xq_i="coordinate i of the (shifted) query")
    L = symbolic_spd(d)
    G = _gamma(L)
    b.define("Γ_N = (1 + 1/N)Λ + (1/N)tr(Λ)I", G)
    Ginf = G.applyfunc(lambda e: sp.limit(e, Nsym, sp.oo))
    b.step("limit N → ∞ of Γ_N (entrywise)", Ginf)
    b.obligation("gamma_tends_to_Lambda", Ginf - L)
    R1 = derive_linear_task_risk(1)
    b.inherit(R1, "linear_task_risk", clauses=("risk_M_inf", "risk_N_inf", "risk_vanishes"))
    R = R1.result["eigen"]
    b.step("Per-eigenvalue risk r(λ, t, N, M) of derive_linear_task_risk", R)
    Rm = sp.simplify(sp.limit(R, Msym, sp.oo))
    b.step("limit M → ∞ of the per-eigenvalue risk: the 1/N² term survives", Rm)
    Rnm = sp.limit(Rm, Nsym, sp.oo)
    b.step("then N → ∞", Rnm)
    b.obligation("risk_vanishes_in_the_limit", Rnm)
    Rn = sp.simplify(sp.limit(R, Nsym, sp.oo))
    b.step("limit N → ∞ of the per-eigenvalue risk at fixed M: a 1/M term survives", Rn)
    Rmn = sp.limit(Rn, Msym, sp.oo)
    b.step("then M → ∞ (the other order)", Rmn)
    b.obligation("risk_vanishes_in_the_other_order", Rmn)
    c = sp.Symbol("c", positive=True)
    w = sp.Matrix(sp.symbols(f"w_1:{d + 1}", real=True))
    xq = sp.Matrix(sp.symbols(f"xq_1:{d + 1}", real=True))
    cov = (c * sp.eye(d)) * L * (c * sp.eye(d)).T
    b.step("Shifted covariates x' = c·x with x ~ N(0, Λ): Cov x' = c²Λ", cov)
    Eyx = sp.Matrix(d, 1, lambda a_, _: sp.expand(sum(w[k] * wick_expectation((k, a_), cov) for k in range(d))))
    b.step("E[y' x'] with y' = ⟨w, x'⟩ (Wick, second moments)", Eyx)
    b.assume("M → ∞: h' = (1/M)Σ y'_i x'_i tends to E[y' x'] (law of large numbers), and N → ∞: the trained "
             "matrix is Γ_∞⁻¹", key="limits M, N → ∞ (LLN)", clauses=("shift",))
    yhat = sp.simplify((xq.T * Ginf.inv() * Eyx)[0, 0])
    b.step("ŷ' = x'_qᵀ Γ_∞⁻¹ h'", yhat)
    yq = (w.T * xq)[0, 0]
    factor = sp.simplify(yhat / yq)
    b.step("Ratio to the true label y'_q = ⟨w, x'_q⟩", factor)
    b.obligation("prediction_is_a_multiple_of_the_label", sp.diff(factor, xq[0]),
                 description="the ratio does not depend on the query")
    Ey2 = sp.expand((w.T * cov * w)[0, 0])
    b.step("E y'_q² = wᵀ(c²Λ)w", Ey2)
    shift_risk = sp.factor(sp.expand((factor - 1) ** 2 * Ey2))
    b.step("Test risk E(ŷ' − y'_q)² = (ratio − 1)² E y'_q²: zero only at c = 1", shift_risk)
    b.fact("shift_risk", shift_risk)
    b.fact("Lambda", L)
    return b.done({"gamma_inf": Ginf, "risk_M_inf": Rm, "risk_NM_inf": Rnm, "risk_N_inf": Rn, "risk_MN_inf": Rmn,
                   "shift_factor": factor})


@lru_cache(maxsize=None)
def derive_gd_one_step(d: int = 2, N: int = 2) -> Derivation:
    """von Oswald et al. (2023): one linear-attention layer with ``W_K = W_Q = [[I,0],[0,0]]``,
    ``W_V = [[0,0],[W_0, −1]]``, ``P = (η/N) I`` maps ``(x_j, y_j) ↦ (x_j, y_j − ΔW x_j)`` with
    ``ΔW`` one GD step on ``(1/2N)Σ(W x_i − y_i)²``; and the trained LSA equals one step of GD
    preconditioned by ``Γ_N^{-1}`` from 0.

    ``result`` = updated token list (SymPy column vectors, one per context token); facts:
    ``token_residual`` (zeros), ``query_residual`` (0), ``preconditioned_residual`` (0), symbols.

    >>> D = derive_gd_one_step(1, 2)
    >>> D.facts["query_residual"], D.facts["preconditioned_residual"]
    (0, 0)
    """
    b = DerivationBuilder("One linear-attention layer = one GD step")
    b.symbols(x_ji="coordinate i of context input j", y_j="label j", xq_i="coordinate i of the query",
              w0_i="coordinate i of the initial weights W_0 (a row)", eta="step size",
              g_ij="entry of a symmetric preconditioner (standing for Γ_N^{-1})", w_i="coordinate i of the weights W")
    eta = sp.Symbol("eta", positive=True)
    xs = [sp.Matrix(d, 1, lambda i, _, j=j: sp.Symbol(f"x_{j + 1}{i + 1}")) for j in range(N)]
    ys = [sp.Symbol(f"y_{j + 1}") for j in range(N)]
    xq = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"xq_{i + 1}"))
    W0 = sp.Matrix(1, d, lambda _, i: sp.Symbol(f"w0_{i + 1}"))
    Z = sp.zeros(d, d)
    WK = sp.diag(sp.eye(d), sp.zeros(1, 1))
    WV = sp.Matrix(sp.BlockMatrix([[Z, sp.zeros(d, 1)], [W0, sp.Matrix([[-1]])]]))
    P = eta / N * sp.eye(d + 1)
    b.define("W_K = W_Q = [[I, 0], [0, 0]]", WK)
    b.define("W_V = [[0, 0], [W_0, −1]]", WV)
    b.define("P = (η/N) I", P)
    tokens = [xs[j].col_join(sp.Matrix([[ys[j]]])) for j in range(N)]
    b.define("Tokens e_j = (x_j, y_j)", tokens[0])
    attn = lambda e: P * sum((WV * ei * (WK * ei).T * (WK * e) for ei in tokens), sp.zeros(d + 1, 1))  # noqa: E731
    new = [sp.expand(e + attn(e)) for e in tokens]
    b.step("e_j + P Σ_i W_V e_i (W_K e_i)ᵀ(W_Q e_j), context keys and values only, every token", new)
    w = sp.Matrix(1, d, lambda _, i: sp.Symbol(f"w_{i + 1}"))
    loss = sum(((w * xs[i])[0, 0] - ys[i]) ** 2 for i in range(N)) / (2 * N)
    b.define("Loss (1/2N) Σ_i (W x_i − y_i)²", loss)
    grad = sp.Matrix(1, d, lambda _, k: sp.diff(loss, w[k])).subs({w[k]: W0[k] for k in range(d)})
    dW = -eta * grad
    b.step("ΔW = −η ∇_W (1/2N)Σ(W x_i − y_i)² at W_0", dW)
    resid = sp.Matrix([sp.expand(new[j][d] - (ys[j] - (dW * xs[j])[0, 0])) for j in range(N)])
    b.step("Updated label minus (y_j − ΔW x_j)", resid)
    b.obligation("token_update_is_gd_step", resid)
    b.fact("token_residual", resid)
    q = xq.col_join(sp.Matrix([[-(W0 * xq)[0, 0]]]))
    qnew = sp.expand(q + attn(q))
    qres = sp.expand(-qnew[d] - ((W0 + dW) * xq)[0, 0])
    b.step("Query token (x_q, −W_0 x_q): minus its updated label minus (W_0 + ΔW) x_q", qres)
    b.obligation("query_reads_updated_prediction", qres)
    b.fact("query_residual", qres)
    # preconditioned GD from 0 with P = Γ^{-1}, η = 1 equals x_qᵀ Γ^{-1} h
    Gi = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"g_{min(i, j) + 1}{max(i, j) + 1}"))
    b.define("A symmetric preconditioner standing for Γ_N⁻¹", Gi)
    loss0 = sum(((w * xs[i])[0, 0] - ys[i]) ** 2 for i in range(N)) / (2 * N)
    g0 = sp.Matrix(d, 1, lambda k, _: sp.diff(loss0, w[k])).subs({w[k]: 0 for k in range(d)})
    w1 = -Gi * g0
    b.step("One GD step from 0 preconditioned by Γ⁻¹", w1)
    h = sum((ys[i] * xs[i] for i in range(N)), sp.zeros(d, 1)) / N
    pres = sp.expand((xq.T * w1)[0, 0] - (xq.T * Gi * h)[0, 0])
    b.step("Its prediction minus the LSA's x_qᵀ Γ⁻¹ h", pres)
    b.obligation("preconditioned_step_is_lsa", pres)
    b.fact("preconditioned_residual", pres)
    b.fact("symbols", {"eta": eta, "xs": xs, "ys": ys, "xq": xq, "W0": W0})
    return b.done(new)


@lru_cache(maxsize=None)
def derive_nonconvex(d: int = 2) -> Derivation:
    """Hessian of ``L(u, U) = L_B(u U)`` (u = w22, U = W11) at the origin: the only non-zero
    entries are ``−(Λ²)_ij`` between u and U_ij, so the eigenvalues are ``±`` the Frobenius norm of
    ``Λ²`` and 0.

    ``result`` = the smallest eigenvalue (SymPy in ``l_ij``); facts: ``hessian``, ``Lambda``.

    >>> D = derive_nonconvex(1)
    >>> D.result
    -l_11**2
    """
    b = DerivationBuilder("Non-convexity: a negative Hessian eigenvalue at the origin")
    b.symbols(u="w22", U_ij="entry (i, j) of U = W11", l_ij="entry (i, j) of Λ (symmetric)", N="context length")
    P = derive_population_loss(d)
    b.inherit(P, "population_loss")
    B, L = P.facts["B"], P.facts["Lambda"]
    u = sp.Symbol("u", real=True)
    U = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"U_{i + 1}{j + 1}", real=True))
    LuU = P.result.subs({B[i, j]: u * U[i, j] for i in range(d) for j in range(d)}, simultaneous=True)
    b.step("L(u, U) = L_B(uU)", LuU)
    vars_ = [u] + list(U)
    H = sp.hessian(LuU, vars_).subs({v: 0 for v in vars_})
    b.step("Hessian at u = 0, U = 0 (variables u, U_11, U_12, …)", H,
           compact=r"\begin{pmatrix}0&-\operatorname{vec}(\Lambda^2)^{\top}\\-\operatorname{vec}(\Lambda^2)&0\end{pmatrix}")
    L2 = L * L
    b.obligation("hessian_couples_u_with_minus_Lambda_squared",
                 [H[0, 1 + k] + L2[k] for k in range(d * d)] + [H[1 + k, 1 + m] for k in range(d * d) for m in range(d * d)],
                 description="H_{u,U_ij} = −(Λ²)_ij and the U-block vanishes")
    ev = H.eigenvals()
    lo = [e for e in ev if sp.simplify(e).could_extract_minus_sign()]
    mn = sp.simplify(lo[0]) if lo else sp.Integer(0)
    b.step("Smallest eigenvalue: minus the Frobenius norm of Λ²", mn)
    b.obligation("smallest_eigenvalue_is_minus_frobenius_norm", mn**2 - sum(e**2 for e in L2),
                 description="its square is Σ_ij (Λ²)_ij²")
    b.fact("hessian", H)
    b.fact("Lambda", L)
    return b.done(mn)
