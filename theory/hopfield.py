"""Hopfield networks derived in SymPy (claims ``hop.*``).

Conventions follow lecture notes 002: stored patterns are the *columns* of ``X = [x_1, ..., x_N] ∈ R^{d×N}``,
a state is a column ``ξ ∈ R^d``; ``S(·)`` is the softmax over the stored-pattern index;
``lse(β, z) = β^{-1} log Σ_l exp(β z_l)``; ``sgn(0) = +1``.

Every function returns a :class:`~theory.derivation.Derivation` whose ``facts`` carry the symbols
needed to ``lambdify`` the results, so that checks compare numerics with what SymPy derived.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = [
    "AGS_ALPHA_C",
    "derive_classical_flip",
    "derive_classical_flip_general",
    "derive_dense_update",
    "derive_capacity_formulas",
    "derive_classical_capacity",
    "derive_modern_energy",
    "derive_retrieval_bound",
    "derive_attention_identity",
]

#: Amit–Gutfreund–Sompolinsky (1985/87) critical load of the Hebbian network (replica theory,
#: retrieval with ≈1.5% wrong bits). A literature constant: not derivable by the SNR argument.
AGS_ALPHA_C = sp.Rational(138, 1000)


def _canon(M):
    """Put every entry over one denominator and expand: enough to show that a residual of
    softmax expressions vanishes, and far cheaper than ``simplify``."""
    return M.applyfunc(lambda e: sp.expand(sp.together(e))) if isinstance(M, sp.MatrixBase) else sp.expand(sp.together(M))


def _sym_matrix(name: str, rows: int, cols: int, **assumptions) -> sp.Matrix:
    return sp.Matrix(rows, cols, lambda r, c: sp.Symbol(f"{name}_{r + 1}{c + 1}", **assumptions))


# --------------------------------------------------------------------------------------------
# classical network: energy change of one asynchronous flip


@lru_cache(maxsize=None)
def derive_classical_flip(d: int = 4, i: int = 0) -> Derivation:
    """Derive ``ΔE`` when unit ``i`` of ``ξ ∈ {±1}^d`` flips, for ``E(ξ) = −½ξᵀWξ + ξᵀb`` with a
    symmetric ``W``, and that under the update ``ξ_i ← sgn((Wξ − b)_i)`` a flip gives
    ``ΔE ≤ −2w_ii``.

    ``result`` is ``ΔE`` as an expression in ``ξ, W, b``; ``facts`` hold the symbols (``xi``,
    ``W``, ``b``), ``residual`` (ΔE minus ``2ξ_i(Σ_{j≠i} w_ij ξ_j − b_i)``, simplified) and
    ``bound_gap`` (``ΔE + 2w_ii`` in terms of ``s = ξ_i h_i``; non-positive when the update flips).

    >>> r = derive_classical_flip(3, 0)
    >>> r.facts["residual"], r.facts["bound_gap_nonpositive"]
    (0, True)
    >>> r.result
    -2*b_1*xi_1 + 2*w_12*xi_1*xi_2 + 2*w_13*xi_1*xi_3
    """
    b = DerivationBuilder("Classical Hopfield: energy change of one asynchronous flip")
    b.symbols(xi_j="state of unit j (±1)", w_jk="weight between units j and k (symmetric, w_kj = w_jk)",
              b_j="bias of unit j", h_i="local field (Wξ − b)_i", s="ξ_i h_i", w_ii="self-coupling of unit i")
    xi = sp.Matrix(sp.symbols(f"xi_1:{d + 1}", real=True))
    W = sp.Matrix(d, d, lambda r, c: sp.Symbol(f"w_{min(r, c) + 1}{max(r, c) + 1}", real=True))
    bias = sp.Matrix(sp.symbols(f"b_1:{d + 1}", real=True))
    E = sp.expand((-sp.Rational(1, 2) * xi.T * W * xi + xi.T * bias)[0, 0])
    b.define("Energy E(ξ) = −½ ξᵀWξ + ξᵀb with W symmetric (w_jk = w_kj)", E)
    E_flip = E.subs(xi[i], -xi[i], simultaneous=True)
    dE = sp.expand(E_flip - E)
    b.step(f"Flip unit {i + 1}: ΔE = E(ξ with ξ_{i + 1} → −ξ_{i + 1}) − E(ξ); the w_ii ξ_i² term cancels", dE)
    target = 2 * xi[i] * (sum(W[i, j] * xi[j] for j in range(d) if j != i) - bias[i])
    b.obligation("flip_formula", dE - target, description="ΔE = 2ξ_i(Σ(j≠i) w_ij ξ_j − b_i)")
    residual = sp.simplify(dE - target)
    b.step("ΔE − 2ξ_i(Σ(j≠i) w_ij ξ_j − b_i) simplifies to", residual)
    h = sum(W[i, j] * xi[j] for j in range(d)) - bias[i]
    via_field = sp.expand(2 * xi[i] * h - 2 * W[i, i] * xi[i] ** 2)
    b.step("With the local field h_i = (Wξ − b)_i the update uses: ΔE − (2ξ_i h_i − 2 w_ii ξ_i²)",
           sp.simplify(dE - via_field))
    b.obligation("flip_via_local_field", dE - via_field)
    s, wii = sp.Symbol("s", nonpositive=True), sp.Symbol("w_ii", nonnegative=True)
    hs = sp.Symbol("h_i", real=True)
    b.assume("The update flips ξ_i only when sgn(h_i) ≠ ξ_i, i.e. s = ξ_i h_i ≤ 0 (sgn(0) = +1); and ξ_i² = 1",
             sp.Le(sp.Symbol("s"), 0), key="flip rule")
    dE_s = sp.expand((2 * xi[i] * hs - 2 * wii * xi[i] ** 2).subs(xi[i] ** 2, 1).subs(xi[i] * hs, s))
    b.step("ΔE = 2ξ_i h_i − 2w_ii ξ_i² with ξ_i h_i = s and ξ_i² = 1", dE_s)
    gap = sp.expand(dE_s + 2 * wii)
    b.step("ΔE + 2w_ii", gap)
    b.obligation("flip_lowers_energy_by_2wii", -gap, "nonnegative", description="ΔE + 2w_ii ≤ 0 whenever the update flips")
    b.fact("bound_gap", gap)
    b.fact("bound_gap_nonpositive", bool(gap.is_nonpositive))
    b.step("Hence ΔE ≤ −2w_ii ≤ 0 for w_ii ≥ 0: asynchronous updates never increase E", sp.Le(dE_s, -2 * wii))
    b.record(residual=residual, xi=tuple(xi), W=W, b=tuple(bias), energy=E)
    return b.done(dE)


def _scalar_canon(e):
    """Expand a sum of 1×1 matrix expressions and write each term in one canonical orientation
    (a 1×1 matrix equals its transpose: ``xᵀuᵀη = ηᵀux``), so that equal scalars combine."""
    e = e.expand()
    terms = e.args if isinstance(e, sp.MatAdd) else (e,)
    return sp.MatAdd(*[min(t, sp.transpose(t).doit(), key=sp.default_sort_key) for t in terms]).doit()


@lru_cache(maxsize=None)
def derive_classical_flip_general() -> Derivation:
    """:func:`derive_classical_flip` for every ``d``: unit ``i`` and the other ``n = d − 1`` units
    as blocks, ``ξ = (ξ_i, η)``, ``W = [[w_ii, vᵀ], [u, V]]``, ``b = (b_i, c)`` with ``η, u, v, c``
    matrix symbols of symbolic size ``n`` (the unit is moved first by relabelling the units).

    For a general ``W`` the flip changes ``E`` by ``ξ_i(uᵀη + vᵀη) − 2ξ_i b_i``; symmetry
    (``v = u``) makes that ``2ξ_i(Σ_{j≠i} w_ij ξ_j − b_i)``, and under the update
    ``ξ_i ← sgn((Wξ − b)_i)`` a flip happens only when ``s = ξ_i h_i ≤ 0``, so ``ΔE = 2s − 2w_ii ≤ −2w_ii``.

    ``result`` is ``ΔE`` (a 1×1 matrix expression in the blocks, symmetric ``W``); facts:
    ``general_W`` (ΔE without symmetry), ``asymmetry_term`` (what symmetry removes), ``bound_gap``.

    >>> r = derive_classical_flip_general()
    >>> r.result
    -2*beta_i.T*x_i + 2*eta.T*u*x_i
    >>> r.facts["asymmetry_term"]
    -eta.T*u*x_i + eta.T*v*x_i
    """
    b = DerivationBuilder("Classical Hopfield: energy change of one asynchronous flip, every d (block form)")
    b.symbols(x_i="the state ξ_i of unit i (a 1×1 block, ±1)", eta="the states of the other n = d − 1 units",
              w_ii="self-coupling of unit i (1×1)", u="column i of W without w_ii (weights w_ji, j ≠ i)",
              v="row i of W without w_ii (weights w_ij, j ≠ i)", V="W without row and column i",
              beta_i="bias b_i of unit i (1×1)", c="the other biases", n="d − 1", s="ξ_i h_i",
              h_i="local field (Wξ − b)_i")
    n = sp.Symbol("n", integer=True, nonnegative=True)
    eta, u, v = (sp.MatrixSymbol(k, n, 1) for k in ("eta", "u", "v"))
    V, c = sp.MatrixSymbol("V", n, n), sp.MatrixSymbol("c", n, 1)
    x, w, bi = (sp.MatrixSymbol(k, 1, 1) for k in ("x_i", "w_ii", "beta_i"))
    Wb = sp.BlockMatrix([[w, v.T], [u, V]])
    b.define("Unit i first (relabel the units): ξ = (ξ_i, η), W = [[w_ii, vᵀ], [u, V]], b = (b_i, c); "
             "d = n + 1 for every n ≥ 0", Wb)

    def energy(first):
        xi, bias = sp.BlockMatrix([[first], [eta]]), sp.BlockMatrix([[bi], [c]])
        return sp.block_collapse(-sp.Rational(1, 2) * xi.T * Wb * xi + xi.T * bias)

    E = b.step("E(ξ) = −½ ξᵀWξ + ξᵀb multiplied out by blocks", energy(x))
    general = _scalar_canon(energy(-x) - E)
    b.step("Flip ξ_i → −ξ_i: ΔE for a general W (the ηᵀVη, ηᵀc and w_ii ξ_i² terms cancel)", general)
    sym = b.assume("Symmetric W: row i equals column i, v = u", sp.Eq(v, u), key="symmetric W")
    dE = _scalar_canon(general.subs(sym.lhs, sym.rhs))
    b.step("ΔE for the symmetric W", dE, compact=r"\Delta E=2\xi_i\big(\textstyle\sum_{j\ne i}w_{ij}\xi_j-b_i\big)")
    target = 2 * x.T * u.T * eta - 2 * x.T * bi
    b.obligation("flip_formula_every_d", _scalar_canon(dE - target),
                 description="ΔE = 2ξ_i(Σ(j≠i) w_ij ξ_j − b_i) for every d (block matrix symbols)")
    asym = _scalar_canon(general - dE)
    b.step("What symmetry removed: ΔE(general W) − ΔE(symmetric W)", asym)
    # the scalar part: the same for every d (ξ_i, w_ii, b_i and σ = Σ_{j≠i} w_ij ξ_j are numbers)
    xs, ws, bs, sig = sp.symbols("xi_i w_ii b_i sigma", real=True)
    h = b.define("Local field h_i = (Wξ − b)_i = w_ii ξ_i + σ − b_i with σ = uᵀη = Σ(j≠i) w_ij ξ_j",
                 ws * xs + sig - bs)
    dE_s = 2 * xs * (sig - bs)
    b.obligation("flip_via_local_field_every_d", sp.expand(dE_s - (2 * xs * h - 2 * ws * xs ** 2)))
    b.step("ΔE − (2ξ_i h_i − 2w_ii ξ_i²)", sp.expand(dE_s - (2 * xs * h - 2 * ws * xs ** 2)))
    s, wii = sp.Symbol("s", nonpositive=True), sp.Symbol("w_ii", nonnegative=True)
    b.assume("ξ_i ∈ {±1} (ξ_i² = 1); the update ξ_i ← sgn(h_i) flips ξ_i only when sgn(h_i) ≠ ξ_i, i.e. "
             "s = ξ_i h_i ≤ 0 (sgn(0) = +1: a unit at h_i = 0 flips only from −1 to +1)", sp.Le(sp.Symbol("s"), 0), key="flip rule")
    gap = sp.expand(2 * s - 2 * wii + 2 * wii)
    b.step("ΔE + 2w_ii with ΔE = 2s − 2w_ii", gap)
    b.obligation("flip_lowers_energy_by_2wii_every_d", -gap, "nonnegative",
                 description="ΔE + 2w_ii ≤ 0 whenever the update flips")
    b.step("Hence ΔE ≤ −2w_ii, and ≤ 0 when w_ii ≥ 0", sp.Le(2 * s - 2 * wii, -2 * wii))
    b.record(general_W=general, asymmetry_term=asym, bound_gap=gap)
    return b.done(dE)


# --------------------------------------------------------------------------------------------
# dense associative memory: update as an energy difference, capacity by signal-to-noise


@lru_cache(maxsize=None)
def derive_dense_update(a: int = 2, d: int = 3, N: int = 2) -> Derivation:
    """Dense associative memory ``E(ξ) = −Σ_μ F(x_μᵀξ)`` with ``F(z) = z^a``: the update
    ``ξ_l ← sgn[−E(ξ^{(l+)}) + E(ξ^{(l−)})]`` as an explicit sum over patterns, and for ``a = 2``
    the identity with the classical rule ``sgn(Σ_{j≠l} w_lj ξ_j)`` for Hebbian ``W = Σ x_μ x_μᵀ``.

    ``result`` is the energy difference ``−E(ξ^{(1+)}) + E(ξ^{(1−)})`` (unit ``l = 1``);
    ``facts["hebbian_residual"]`` is 0 when ``a = 2``.

    >>> r = derive_dense_update(2, 3, 2)
    >>> r.facts["hebbian_residual"]
    0
    """
    b = DerivationBuilder(f"Dense associative memory F(z)=z^{a}: the update as an energy difference")
    b.symbols(xi_j="state of unit j (±1)", x_jm="coordinate j of stored pattern m", c_m="Σ_{j≠1} x_jm ξ_j",
              F="the interaction function z ↦ z^a")
    xi = sp.Matrix(sp.symbols(f"xi_1:{d + 1}", real=True))
    X = _sym_matrix("x", d, N, real=True)
    z = sp.Symbol("z")
    F = sp.Lambda(z, z ** a)
    E = lambda v: -sum(F((X[:, m].T * v)[0, 0]) for m in range(N))  # noqa: E731
    b.define("Energy E(ξ) = −Σ_μ F(x_μᵀξ)", E(xi))
    plus, minus = xi.copy(), xi.copy()
    plus[0], minus[0] = 1, -1
    diff = sp.expand(-E(plus) + E(minus))
    b.step("Update of unit 1: sgn of −E(ξ with ξ_1=+1) + E(ξ with ξ_1=−1)", diff)
    c = [sum(X[j, m] * xi[j] for j in range(1, d)) for m in range(N)]
    as_sum = sp.expand(sum(F(c[m] + X[0, m]) - F(c[m] - X[0, m]) for m in range(N)))
    b.step("Minus Σ_μ [F(c_μ + x_μ1) − F(c_μ − x_μ1)] with c_μ = Σ(j≠1) x_μj ξ_j",
           sp.simplify(diff - as_sum))
    b.obligation("update_as_pattern_sum", diff - as_sum)
    res = sp.nan
    if a == 2:
        W = X * X.T
        b.define("Hebbian weights W = Σ_μ x_μ x_μᵀ", W)
        classical = 4 * sum(W[0, j] * xi[j] for j in range(1, d))
        res = sp.simplify(diff - classical)
        b.step("For a = 2, minus 4 Σ(j≠1) w_1j ξ_j (the classical rule)", res)
        b.obligation("hebbian_rule_for_a_2", diff - classical)
    b.record(hebbian_residual=res, xi=tuple(xi), X=X)
    return b.done(diff)


@lru_cache(maxsize=None)
def derive_capacity_formulas(a: int = 2) -> Derivation:
    """No-error capacity of the dense memory ``F(z) = z^a`` (``a = 2``: classical Hebbian net)
    from the signal-to-noise argument.

    At ``ξ = x_ν`` the drive of bit ``l`` (times ``x_{νl}``) is a signal ``F(d) − F(d−2) ≈ 2a d^{a−1}``
    plus crosstalk ``Σ_{μ≠ν} 2a c_μ^{a−1} x_{μl}x_{νl}`` with ``c_μ ≈ N(0, d)``: variance
    ``4a² N E[c^{2a−2}] = 4a² N (2a−3)!! d^{a−1}``. A bit errs with probability ``≈ exp(−SNR²/2)``.
    Requiring ``d·P_err = O(1)`` (a given pattern is recalled exactly: "most patterns") and
    ``N d·P_err = O(1)`` (all patterns exact) and solving for ``N`` at leading order gives

    ``C_most = d^{a−1}/(2 (2a−3)!! ln d)``, ``C_all = d^{a−1}/(2a (2a−3)!! ln d)``.

    ``result`` is ``{"most": C_most, "all": C_all}`` as expressions in the positive symbol ``d``.

    >>> r = derive_capacity_formulas(2)
    >>> r.result["most"], r.result["all"]
    (d/(2*log(d)), d/(4*log(d)))
    >>> derive_capacity_formulas(3).result["most"]
    d**2/(6*log(d))
    """
    b = DerivationBuilder(f"Capacity of the dense memory F(z)=z^{a} by signal-to-noise")
    b.symbols(d="number of units (bits per pattern)", N="number of stored patterns", c="overlap c_μ of another pattern",
              zeta="a standard normal variable Z", a="the power of F(z) = z^a")
    d, N, u, zz = sp.symbols("d N u z", positive=True)
    zr = sp.Symbol("zeta", real=True)
    F = lambda t: t ** a  # noqa: E731
    b.define(f"F(z) = z^{a}; at ξ = x_ν the drive of bit l (times x_νl) is F(d) − F(d − 2) plus crosstalk "
             "Σ(μ≠ν) [F(c_μ + 1) − F(c_μ − 1)] x_μl x_νl", sp.Lambda(zz, F(zz)))
    signal = sp.expand(F(d) - F(d - 2))
    lead_signal = sp.limit(signal / d ** (a - 1), d, sp.oo) * d ** (a - 1)
    b.step("Signal of pattern ν on its own bit: F(d) − F(d−2), leading order", lead_signal)
    # crosstalk term of one other pattern: F(c + 1) − F(c − 1) to leading order in c
    c = sp.Symbol("c", real=True)
    one = sp.expand(F(c + 1) - F(c - 1))
    lead_one = sp.LT(sp.Poly(one, c).as_expr(), c) if a > 1 else one
    b.step("Crosstalk of one pattern μ≠ν: F(c_μ+1) − F(c_μ−1), leading term in c_μ", lead_one)
    gauss = sp.exp(-zr ** 2 / 2) / sp.sqrt(2 * sp.pi)
    b.assume("Random patterns: x_1, …, x_N i.i.d. uniform on {±1}^d (every statement below is about this distribution)", key="random ±1 patterns")
    b.assume("Central limit: the overlap c_μ = Σ(j≠l) x_μj x_νj of another pattern is ≈ √d·Z with Z ~ N(0, 1), "
             "independent across μ", gauss, key="Gaussian crosstalk (CLT)")
    moment = sp.integrate(zr ** (2 * a - 2) * gauss, (zr, -sp.oo, sp.oo))
    b.step(f"Gaussian moment E[Z^{2 * a - 2}] (c_μ ≈ √d Z)", moment)
    b.obligation("moment_is_double_factorial", moment - sp.factorial2(2 * a - 3), description=f"E[Z^{2 * a - 2}] = ({2 * a - 3})!!")
    b.fact("double_factorial_matches", sp.simplify(moment - sp.factorial2(2 * a - 3)) == 0)
    var = sp.expand(N * (lead_one.subs(c, 1) ** 2) * moment * d ** (a - 1))
    b.step("Crosstalk variance over N − 1 ≈ N patterns", var)
    snr2 = sp.simplify(lead_signal ** 2 / var)
    b.fact("snr2", snr2)
    b.step("SNR² = signal²/Var", snr2)
    b.assume("A bit errs with probability ≈ exp(−SNR²/2) (Gaussian tail, leading order in the exponent); "
             "'most patterns exact': d·P_err = O(1); 'all patterns exact': N·d·P_err = O(1)", key="Gaussian tail exp(−SNR²/2)")
    # per-bit error ≈ exp(−SNR²/2); criterion on the exponent: SNR²/2 = ln(number of bits that must be right)
    sol = sp.solve(sp.Eq(snr2 / 2, sp.log(d)), N)
    b.obligation("unique_capacity_most", sp.Integer(len(sol) - 1))
    most = sp.simplify(sol[0])
    b.step("Most patterns exact: SNR² = 2 ln d, solved for N: C_most =", most)
    # all patterns: N d exp(−SNR²/2) = O(1); with N = Θ(d^{a−1}/ln d), ln(N d) = a ln d + O(ln ln d)
    lnNd = sp.limit(sp.log(most * d) / sp.log(d), d, sp.oo) * sp.log(d)
    b.step("All patterns exact: at N = Θ(d^(a−1)/ln d), ln(Nd) = a ln d to leading order", lnNd)
    all_ = sp.simplify(sp.solve(sp.Eq(snr2 / 2, lnNd), N)[0])
    b.step("SNR² = 2 ln(Nd), solved for N: C_all =", all_)
    b.fact("d", d)
    return b.done({"most": most, "all": all_})


@lru_cache(maxsize=None)
def derive_finite_size_capacity(a: int = 2) -> Derivation:
    """Finite-``d`` correction to :func:`derive_capacity_formulas` for the *measured* capacity
    ``N_½(d)``: the number of stored patterns at which half of them are exact fixed points.

    With the same signal-to-noise ratio ``SNR² = d^{a−1}/(N (2a−3)!!)`` and independent bits, a
    pattern is a fixed point with probability ``(1 − Φ̄(SNR))^d``; setting it to ``½`` gives
    ``SNR = z_d := √2·erfc⁻¹(2(1 − 2^{−1/d}))`` exactly (no leading-order step), hence

    ``N_½(d) = d^{a−1}/((2a−3)!! z_d²) = C_most(d) · 2 ln d / z_d²``.

    The factor ``2 ln d / z_d²`` → 1 as ``d → ∞`` (``z_d² = 2 ln d − ln ln d − ln(4π ln²2) + o(1)``),
    only logarithmically: over ``d`` of 10–500 it shifts the apparent exponent of ``d`` in
    ``N_½·ln d`` by −0.06 to −0.23, which is what measurements at these ``d`` show.

    ``result``: ``{"N_half": N_½(d), "correction": 2 ln d / z_d²}`` in the positive symbol ``d``
    (``erfcinv`` lambdifies to SciPy).

    >>> r = derive_finite_size_capacity(2)
    >>> r.result["correction"]
    log(d)/erfcinv(2 - 2**((d - 1)/d))**2
    """
    b = DerivationBuilder(f"Finite-size capacity N_1/2(d) of the dense memory F(z)=z^{a}")
    b.symbols(d="number of units", N="number of stored patterns", s="signal-to-noise ratio SNR", q="per-bit error probability")
    base = derive_capacity_formulas(a)
    b.inherit(base, "snr")
    d = base.facts["d"]
    N = sp.Symbol("N", positive=True)
    snr2 = base.facts["snr2"]
    s = sp.Symbol("s", positive=True)
    q = sp.Symbol("q", positive=True)
    b.assume("A bit errs with the Gaussian tail probability q = Φ̄(SNR) = erfc(SNR/√2)/2, bits independent, so a "
             "pattern is a fixed point with probability (1 − q)^d; N_1/2 is where that probability is 1/2",
             sp.Eq(q, sp.erfc(s / sp.sqrt(2)) / 2), key="Gaussian tail, independent bits")
    q_half = sp.solve(sp.Eq((1 - q) ** d, sp.Rational(1, 2)), q)
    b.obligation("unique_q_half", sp.Integer(len(q_half) - 1))
    q_half = sp.simplify(q_half[0])
    b.step("(1 − q)^d = 1/2 solved for q", q_half)
    z = sp.sqrt(2) * sp.erfcinv(2 * q_half)
    b.step("erfc(s/√2)/2 = q inverted: the SNR at N_1/2 is z_d = √2·erfcinv(2q)", z)
    b.obligation("z_inverts_tail", sp.erfc(z / sp.sqrt(2)) / 2 - q_half)
    sol = sp.solve(sp.Eq(snr2, z ** 2), N)
    b.obligation("unique_N_half", sp.Integer(len(sol) - 1))
    N_half = sp.simplify(sol[0])
    b.step("SNR² = z_d² solved for N: N_1/2(d) =", N_half)
    corr = sp.simplify(N_half / base.result["most"])
    b.step("N_1/2 / C_most (the finite-size factor)", corr)
    b.fact("d", d)
    return b.done({"N_half": N_half, "correction": corr})


@lru_cache(maxsize=None)
def derive_exp_all_fixed_scaling() -> Derivation:
    """Finite-``d`` scaling of the exponential memory's capacity ``2^{d/2}`` (Demircigil et al. 2017,
    all patterns retrieved): the number ``N_all(d)`` of stored patterns at which *every* pattern is an
    exact fixed point with probability ``½``.

    For ``F = exp`` a pattern ``μ`` at Hamming distance ``k`` from ``x_ν`` changes the drive of a bit
    where they differ by ``e^{d−2k+2}(1 − e^{−2})``, against the own term ``e^d(1 − e^{−2})``: only
    patterns at distance ≤ 1 can flip a bit. With the ``C(N,2)`` pairs Poisson, a pair lying within
    distance 1 with probability ``(d+1)/2^d``, and each such pair breaking retrieval with some fixed
    probability ``κ``, ``P(all fixed) = exp(−κ N²(d+1)/2^{d+1})``; so
    ``N_all(d) = √(2^{d+1} ln 2/(κ(d+1)))``: the exponent ``½`` of the form, with a polynomial
    finite-size factor whose effect on the slope of ``log₂ N_all`` in ``d`` is
    ``−1/(2 ln 2 (d+1))`` (independent of ``κ``).

    ``result``: ``{"log2_N_all": log₂ N_all(d), "slope": d log₂ N_all/dd}``.

    >>> r = derive_exp_all_fixed_scaling()
    >>> d = r.facts["d"]
    >>> sp.simplify(r.result["slope"] - (sp.Rational(1, 2) - 1 / (2 * (d + 1) * sp.log(2))))
    0
    """
    b = DerivationBuilder("Finite-size scaling of the exponential memory's all-patterns capacity")
    b.symbols(d="number of units", N="number of stored patterns", k="Hamming distance", kappa="probability that a close pair breaks retrieval")
    d, N, k, kappa = sp.symbols("d N k kappa", positive=True)
    drive = sp.exp(d - 2 * k + 2) * (1 - sp.exp(-2))
    own = sp.exp(d) * (1 - sp.exp(-2))
    ratio = sp.simplify(drive / own)
    b.step("Drive of a pattern at Hamming distance k on a differing bit, relative to the own term", ratio)
    b.obligation("distance_one_cancels", ratio.subs(k, 1) - 1)
    b.obligation("distance_two_is_small", sp.exp(-2) - ratio.subs(k, 2))
    b.assume("Only pairs within Hamming distance 1 break retrieval, each with probability κ; pairs are Poisson "
             "with mean C(N,2)·(d+1)/2^d ≈ N²(d+1)/2^(d+1)", sp.exp(-kappa * N ** 2 * (d + 1) / 2 ** (d + 1)), key="Poisson near-pairs")
    sol = sp.solve(sp.Eq(kappa * N ** 2 * (d + 1) / 2 ** (d + 1), sp.log(2)), N)
    b.obligation("unique_N_all", sp.Integer(len(sol) - 1))
    N_all = sol[0]
    b.step("P(all fixed) = 1/2 solved for N", N_all)
    log2N = sp.expand_log(sp.log(N_all, 2), force=True)
    b.step("log₂ N_all", log2N)
    slope = sp.simplify(sp.diff(log2N, d))
    b.step("Its slope in d: the exponent 1/2 of 2^(d/2) plus the finite-size term", slope)
    b.obligation("slope_independent_of_kappa", sp.diff(slope, kappa))
    b.obligation("leading_exponent_half", sp.limit(slope, d, sp.oo) - sp.Rational(1, 2))
    b.fact("d", d)
    return b.done({"log2_N_all": log2N, "slope": slope})


@lru_cache(maxsize=None)
def derive_classical_capacity() -> Derivation:
    """Classical Hebbian capacities as expressions of ``d`` and why lecture notes 002's
    "C ≈ d/(2 log d) ≈ 0.14 d" conflates two criteria.

    ``result``: ``{"exact_recall": d/(2 ln d), "exact_recall_all": d/(4 ln d), "bit_error": 0.138 d}``;
    the first two are derived (signal-to-noise, :func:`derive_capacity_formulas`), ``bit_error`` is
    the Amit–Gutfreund–Sompolinsky constant times d, recorded as an assumed literature constant
    (its provenance is ``"assumed"``). ``facts["stated_ratio"]`` is ``0.14 d / (d/(2 ln d))`` and
    ``facts["stated_ratio_limit"]`` its limit (∞: the two stated expressions are not equivalent).

    >>> r = derive_classical_capacity()
    >>> r.facts["stated_ratio"], r.facts["stated_ratio_limit"]
    (7*log(d)/25, oo)
    """
    b = DerivationBuilder("Classical Hopfield capacity: exact recall versus a small fraction of wrong bits")
    b.symbols(d="number of units", C_most="patterns storable with a given pattern recalled exactly",
              C_all="patterns storable with all recalled exactly", alpha_c="AGS critical load ≈ 0.138")
    dense = derive_capacity_formulas(2)
    d = dense.facts["d"]
    heb = derive_dense_update(2)
    b.step("The dense update with F(z) = z² minus the classical Hebbian rule (derive_dense_update(2))",
           heb.facts["hebbian_residual"])
    for prefix, sub in (("dense_update", heb), ("dense_capacity", dense)):
        b.inherit(sub, prefix)  # the premises' obligations and assumptions are this claim's too
    b.step("SNR² of the Hebbian net (signal d, crosstalk variance N d; derive_capacity_formulas(2))", dense.facts["snr2"])
    b.step("Exact recall of a given (most) pattern, McEliece et al. 1987: C_most =", dense.result["most"])
    b.step("Exact recall of all patterns: C_all =", dense.result["all"])
    alpha = b.assume("α_c ≈ 0.138: critical load for retrieval with ≈1.5% wrong bits (Amit–Gutfreund–Sompolinsky, "
                     "replica theory; not derivable by the signal-to-noise argument)", AGS_ALPHA_C, role="constant", key="α_c ≈ 0.138 (AGS)")
    bit = b.assume("Capacity with ≈1.5% wrong bits: C_bit = α_c d (the literature constant times d)", alpha * d, role="constant", key="C_bit = α_c d")
    lim = sp.limit(bit / dense.result["most"], d, sp.oo)
    b.step("C_bit / C_most as d → ∞", lim)
    b.obligation("bit_error_capacity_dominates", sp.Eq(lim, sp.oo), "true", description="C_bit / C_most → ∞")
    stated_ratio = sp.nsimplify(sp.Float("0.14")) * d / (d / (2 * sp.log(d)))
    stated_ratio = sp.simplify(stated_ratio)
    b.step("Lecture notes 002 states C ≈ d/(2 log d) ≈ 0.14 d; the ratio of the two stated expressions is", stated_ratio)
    b.fact("stated_ratio", stated_ratio)
    b.fact("stated_ratio_limit", sp.limit(stated_ratio, d, sp.oo))
    b.obligation("stated_expressions_not_equivalent", sp.Eq(b.facts["stated_ratio_limit"], sp.oo), "true",
                 description="the ratio of the two stated capacities grows without bound")
    b.fact("crossover_d", sp.nsolve(stated_ratio - 1, d, 30))
    b.step("They agree only at d = exp(1/0.28) ≈ 36 and differ by a factor 0.28 ln d that grows without bound",
           b.facts["crossover_d"])
    b.fact("d", d)
    b.fact("bit_over_most_limit", lim)
    return b.done({"exact_recall": dense.result["most"], "exact_recall_all": dense.result["all"], "bit_error": bit})


# --------------------------------------------------------------------------------------------
# modern continuous Hopfield network


def _lse(beta, z):
    return sp.log(sum(sp.exp(beta * zi) for zi in z)) / beta


def _sum_linear(S: sp.Sum, index: sp.Symbol):
    """Linearity of a finite sum: Σ_l (c·f_l + …) = c·Σ_l f_l + … (constants not depending on ``index`` pulled out)."""
    out = sp.Integer(0)
    for t in sp.Add.make_args(sp.expand(S.function)):
        c, rest = t.as_independent(index, as_Add=False)
        out += c * sp.Sum(rest, *S.limits)
    return out


def _modern_descent(b: DerivationBuilder, beta):
    """Steps of :func:`derive_modern_energy` showing, for every ``d`` and ``N`` (scalar and ``Sum``
    symbols, no instantiated size), that one update ``ν = X S(βXᵀξ)`` lowers the energy by exactly
    ``½‖ξ − ν‖² + β⁻¹ KL(p‖p')`` (``p = S(βXᵀξ)``, ``p' = S(βXᵀν)``), and that ``KL ≥ 0`` (Gibbs, from
    ``log x ≤ x − 1``): the CCCP descent of Ramsauer et al. (2021) Thm 1, as an identity. Returns the decrease."""
    Nn = sp.Symbol("N", integer=True, positive=True)
    l = sp.Symbol("l", integer=True, positive=True)
    pb, qb, zb, zpb = (sp.IndexedBase(k) for k in ("p", "q", "z", "zp"))
    a, bb, cc = sp.symbols("a b c", real=True)
    L, Lp, C = sp.symbols("L Lp C", real=True)
    b.define("One update ν = ξ^new = X p with p = S(βz), z = Xᵀξ; p' = S(βz'), z' = Xᵀν. Scalars: a = ξᵀξ, "
             "b = νᵀξ = pᵀz, c = νᵀν = pᵀz' (because ν = Xp), L = ln Σ_l e^(βz_l), Lp = ln Σ_l e^(βz'_l), "
             "so lse(β, z) = L/β, lse(β, z') = Lp/β, and ln p_l = βz_l − L, ln p'_l = βz'_l − Lp",
             sp.Eq(sp.Symbol("b"), sp.Sum(pb[l] * zb[l], (l, 1, Nn))))
    E_xi = -L / beta + a / 2 + C
    E_nu = -Lp / beta + cc / 2 + C
    b.define("E(ξ) and E(ν) in these scalars (C = β⁻¹ ln N + ½M², the same for both)", sp.Eq(sp.Symbol("E(xi)") - sp.Symbol("E(nu)"), E_xi - E_nu))
    KL = sp.Sum(pb[l] * ((beta * zb[l] - L) - (beta * zpb[l] - Lp)), (l, 1, Nn))
    KL_lin = b.step("KL(p‖p') = Σ_l p_l (ln p_l − ln p'_l), by linearity of the sum", _sum_linear(KL, l))
    subs = {sp.Sum(pb[l], (l, 1, Nn)): 1, sp.Sum(pb[l] * zb[l], (l, 1, Nn)): bb, sp.Sum(pb[l] * zpb[l], (l, 1, Nn)): cc}
    KL_s = b.step("With Σ_l p_l = 1, Σ_l p_l z_l = b, Σ_l p_l z'_l = c", sp.expand(KL_lin.subs(subs)))
    b.obligation("kl_sums_resolved", sp.Integer(int(KL_s.has(sp.Sum))), description="no sum over l is left")
    sq = sp.expand(a - 2 * bb + cc)
    b.step("‖ξ − ν‖² = ξᵀξ − 2νᵀξ + νᵀν", sq)
    decrease = sp.expand(E_xi - E_nu)
    resid = sp.expand(decrease - (sq / 2 + KL_s / beta))
    b.step("E(ξ) − E(ν) − (½‖ξ − ν‖² + β⁻¹ KL(p‖p'))", resid,
           compact=r"E(\xi)-E(\xi^{\rm new})=\tfrac12\|\xi-\xi^{\rm new}\|^2+\beta^{-1}\mathrm{KL}(p\|p')")
    b.obligation("descent_identity", resid, description="E(ξ) − E(ξ^new) = ½‖ξ − ξ^new‖² + β⁻¹ KL(p‖p') for every d, N")
    x = sp.Symbol("x", positive=True)
    f = x - 1 - sp.log(x)
    b.step("Gibbs: f(x) = x − 1 − ln x; its stationary points", sp.solve(sp.diff(f, x), x))
    b.obligation("log_bound_convex", sp.diff(f, x, 2), "positive", description="f''(x) = 1/x² > 0: x = 1 is the minimum")
    b.step("f(1) (the minimum value): ln x ≤ x − 1 for x > 0", f.subs(x, 1))
    b.obligation("log_bound_minimum_zero", f.subs(x, 1))
    gibbs = _sum_linear(sp.Sum(pb[l] * (qb[l] / pb[l] - 1), (l, 1, Nn)), l)
    b.step("−KL(p‖p') = Σ_l p_l ln(p'_l/p_l) ≤ Σ_l p_l (p'_l/p_l − 1) =", gibbs)
    gibbs0 = gibbs.subs({sp.Sum(pb[l], (l, 1, Nn)): 1, sp.Sum(qb[l], (l, 1, Nn)): 1})
    b.step("= 0 (p and p' = q both sum to 1): KL(p‖p') ≥ 0", gibbs0)
    b.obligation("gibbs_bound_is_zero", gibbs0)
    h, K = sp.Symbol("h", nonnegative=True), sp.Symbol("K", nonnegative=True)
    b.step("With ‖ξ − ν‖² = h ≥ 0, KL = K ≥ 0 and β > 0 the decrease is", h / 2 + K / beta)
    b.obligation("energy_never_increases", h / 2 + K / beta, "nonnegative",
                 description="E(ξ^new) ≤ E(ξ) for β > 0 (needs β > 0: the KL term is divided by β)")
    return decrease


@lru_cache(maxsize=None)
def derive_modern_energy(d: int = 2, N: int = 2) -> Derivation:
    """Modern Hopfield energy ``E(ξ) = −lse(β, Xᵀξ) + ½ξᵀξ + β^{-1} ln N + ½M²``: gradient
    ``ξ − X S(βXᵀξ)``, the concave–convex split, the CCCP step solved for ``ξ^new`` (giving
    ``X S(βXᵀξ)``), and the bounds ``E ≥ ½(‖ξ‖ − M)² ≥ 0`` and ``E ≤ 2M²`` for ``‖ξ‖ ≤ M``
    (in particular on the convex hull of the patterns).

    ``result`` is ``ξ^new`` (a column); facts: ``energy``, ``grad``, symbols ``xi``, ``X``,
    ``beta``, ``M``, residuals (all 0), ``lower_gap``/``upper_gap`` in ``t = ‖ξ‖``.

    >>> r = derive_modern_energy(2, 2)
    >>> r.facts["grad_residual"], r.facts["cccp_residual"], r.facts["hessian_residual"]
    (0, 0, 0)
    >>> sp.expand(r.facts["lower_gap"] - (r.facts["M"] - r.facts["t"]) ** 2 / 2)
    0
    """
    b = DerivationBuilder("Modern Hopfield energy: gradient, concave–convex split, CCCP step, bounds")
    b.symbols(xi_j="coordinate j of the state ξ", x_jm="coordinate j of stored pattern m (patterns are columns of X)",
              beta="inverse temperature", M="largest pattern norm max_m ‖x_m‖", t="the state norm ‖ξ‖",
              lnN="ln N (N stored patterns)", xinew_j="coordinate j of the next state", lse="lse(β, Xᵀξ)",
              k="a parameter for t = M/(1 + k), k ≥ 0")
    beta, M = sp.symbols("beta M", positive=True)
    xi = sp.Matrix(sp.symbols(f"xi_1:{d + 1}", real=True))
    X = _sym_matrix("x", d, N, real=True)
    z = list(X.T * xi)
    lse = _lse(beta, z)
    E = -lse + (xi.T * xi)[0, 0] / 2 + sp.log(N) / beta + M ** 2 / 2
    b.define("E(ξ) = −lse(β, Xᵀξ) + ½ξᵀξ + β⁻¹ ln N + ½M²", E)
    p = [sp.exp(beta * zi) / sum(sp.exp(beta * zj) for zj in z) for zi in z]
    S = sp.Matrix(p)
    grad = sp.Matrix([sp.diff(E, v) for v in xi])
    b.step("∇E by differentiating the energy", grad, compact=r"\nabla E=\xi-X\,S(\beta X^{\top}\xi)")
    b.obligation("gradient_form", grad - (xi - X * S), description="∇E = ξ − X S(βXᵀξ)")
    grad_res = _canon(grad - (xi - X * S))
    b.step("∇E − (ξ − X S(βXᵀξ))", grad_res)
    E1 = (xi.T * xi)[0, 0] / 2 + sp.log(N) / beta + M ** 2 / 2
    E2 = -lse
    b.define("Split E = E₁ + E₂ with E₁ = ½ξᵀξ + const and E₂ = −lse", sp.Eq(sp.Symbol("E_2"), E2))
    b.step("Hessian of E₁ (the identity: E₁ is convex)", sp.hessian(E1, list(xi)))
    H2 = sp.hessian(lse, list(xi))
    P = sp.diag(*p) - S * S.T
    b.obligation("lse_hessian_form", H2 - beta * X * P * X.T, description="∇²lse = β X (diag p − ppᵀ) Xᵀ")
    hess_res = _canon(H2 - beta * X * P * X.T)
    b.step("∇²lse − β X (diag p − ppᵀ) Xᵀ", hess_res)
    b.assume("diag(p) − ppᵀ is the covariance of a one-hot draw with probabilities p, hence ⪰ 0: E₂ = −lse is concave", key="softmax covariance ⪰ 0", clauses=("cccp_step",))
    b.step("diag(p) − ppᵀ annihilates 1 (entries of (diag p − ppᵀ)1)", _canon(P * sp.ones(N, 1)))
    b.obligation("covariance_annihilates_ones", P * sp.ones(N, 1))
    new = sp.Matrix(sp.symbols(f"xinew_1:{d + 1}", real=True))
    grad_E1_new = sp.Matrix([sp.diff(E1, v) for v in xi]).subs(dict(zip(xi, new)))
    grad_E2 = sp.Matrix([sp.diff(E2, v) for v in xi])
    b.define("CCCP: ∇E₁(ξ^new) = −∇E₂(ξ)", sp.Eq(grad_E1_new, -grad_E2))
    sol = sp.solve(list(grad_E1_new + grad_E2), list(new), dict=True)[0]
    upd = sp.Matrix([sol[v] for v in new])
    b.step("Solved for ξ^new", upd, compact=r"\xi^{\mathrm{new}}=X\,S(\beta X^{\top}\xi)")
    b.obligation("cccp_step_is_softmax_update", upd - X * S)
    cccp_res = _canon(upd - X * S)
    b.step("ξ^new − X S(βXᵀξ)", cccp_res)
    descent = _modern_descent(b, beta)
    t = sp.Symbol("t", nonnegative=True)
    lnN = sp.Symbol("lnN", positive=True)
    lse_s = sp.Symbol("lse", real=True)
    E_t = -lse_s + t ** 2 / 2 + lnN / beta + M ** 2 / 2
    b.step("E in terms of lse and t = ‖ξ‖", E_t)
    hi = b.assume("lse(β, z) ≤ max_i z_i + β⁻¹ ln N ≤ M t + β⁻¹ ln N (Cauchy–Schwarz, ‖x_i‖ ≤ M)",
                  M * t + lnN / beta, role="bound", key="lse upper bound", clauses=("nonnegative",))
    lower = sp.factor(E_t.subs(lse_s, hi))
    b.step("Lower bound E ≥", lower)
    b.obligation("lower_bound_is_half_square", lower - (M - t) ** 2 / 2, description="E ≥ ½(‖ξ‖ − M)² ≥ 0")
    lo = b.assume("lse(β, z) ≥ mean_i z_i + β⁻¹ ln N ≥ −M t + β⁻¹ ln N (Jensen)", -M * t + lnN / beta, role="bound", key="lse lower bound (Jensen)", clauses=("hull_bound",))
    upper = sp.expand(E_t.subs(lse_s, lo))
    b.step("Upper bound E ≤", upper)
    upper_gap = sp.factor(2 * M ** 2 - upper)
    b.step("2M² minus that bound", upper_gap)
    k = sp.Symbol("k", nonnegative=True)
    b.obligation("upper_bound_at_most_2M2", sp.factor(upper_gap.subs(t, M / (1 + k))), "nonnegative",
                 description="2M² − bound ≥ 0 for 0 < t ≤ M, written t = M/(1 + k), k ≥ 0 (true on the convex hull)")
    b.record(energy=E, grad=grad, grad_residual=sp.Integer(0) if grad_res == sp.zeros(d, 1) else grad_res,
             cccp_residual=sp.Integer(0) if cccp_res == sp.zeros(d, 1) else cccp_res,
             hessian_residual=sp.Integer(0) if hess_res == sp.zeros(d, d) else hess_res, lower_gap=lower,
             upper_gap=upper_gap, descent_decrease=descent, t=t, xi=tuple(xi), X=X, beta=beta, M=M)
    return b.done(upd)


@lru_cache(maxsize=None)
def derive_retrieval_bound(N: int = 3, d: int = 2) -> Derivation:
    """Ramsauer et al. (2021), Theorem 5: ``‖f(ξ) − x_i‖ ≤ 2(N−1) exp(−β(Δ_i − 2εM)) M`` with
    ``f(ξ) = X S(βXᵀξ)``, ``Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j``, ``ε ≥ ‖ξ − x_i‖``.

    Steps: ``f(ξ) − x_i = Σ_{j≠i} p_j (x_j − x_i)`` (because Σp = 1); ``p_j ≤ p_j/p_i =
    exp(β(x_j − x_i)ᵀξ)``; ``(x_j − x_i)ᵀξ = (x_j − x_i)ᵀx_i + (x_j − x_i)ᵀ(ξ − x_i) ≤ −Δ_i + 2Mε``;
    ``‖x_j − x_i‖ ≤ 2M``. ``result`` is the bound in symbols ``N, beta, Delta, eps, M``
    (``facts["args"]``).

    >>> r = derive_retrieval_bound()
    >>> r.facts["decomposition_residual"], r.facts["ratio_residual"]
    (0, 0)
    >>> r.result
    2*M*(N - 1)*exp(beta*(-Delta + 2*M*epsilon))
    >>> r.provenance
    {'result': 'derived'}
    """
    b = DerivationBuilder("Theorem 5 (Ramsauer et al. 2021): one-step retrieval bound")
    b.symbols(xi_j="coordinate j of the state ξ", x_jm="coordinate j of stored pattern m (columns of X)",
              beta="inverse temperature", N="number of stored patterns", M="largest pattern norm",
              Delta="separation Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j", epsilon="distance bound ‖ξ − x_i‖ ≤ ε",
              e="the exponent (x_j − x_i)ᵀξ", j="index of another pattern", p_j="softmax weight of pattern j")
    beta = sp.Symbol("beta", positive=True)
    xi = sp.Matrix(sp.symbols(f"xi_1:{d + 1}", real=True))
    X = _sym_matrix("x", d, N, real=True)
    z = list(X.T * xi)
    Z = sum(sp.exp(beta * zj) for zj in z)
    p = [sp.exp(beta * zj) / Z for zj in z]
    f = X * sp.Matrix(p)
    b.define("One update f(ξ) = X S(βXᵀξ) (softmax over the stored patterns)", f)
    dec = sum((p[j] * (X[:, j] - X[:, 0]) for j in range(1, N)), sp.zeros(d, 1))
    b.obligation("decomposition", f - X[:, 0] - dec, description="f(ξ) − x_1 = Σ(j≠1) p_j (x_j − x_1)")
    dec_res = _canon(f - X[:, 0] - dec)
    b.step("f(ξ) − x_1 − Σ(j≠1) p_j (x_j − x_1) (uses Σ_j p_j = 1) simplifies to", dec_res)
    b.obligation("softmax_ratio", p[1] / p[0] - sp.exp(beta * (X[:, 1] - X[:, 0]).dot(xi)),
                 description="p_j / p_1 = exp(β(x_j − x_1)ᵀξ)")
    ratio_res = sp.simplify(p[1] / p[0] - sp.exp(beta * (X[:, 1] - X[:, 0]).dot(xi)))
    b.step("p_j / p_1 − exp(β(x_j − x_1)ᵀξ) simplifies to", ratio_res)
    split = sp.expand((X[:, 1] - X[:, 0]).dot(xi) - (X[:, 1] - X[:, 0]).dot(X[:, 0])
                      - (X[:, 1] - X[:, 0]).dot(xi - X[:, 0]))
    b.step("(x_j − x_1)ᵀξ − (x_j − x_1)ᵀx_1 − (x_j − x_1)ᵀ(ξ − x_1)", split)
    b.obligation("exponent_split", split)
    Nn, Delta, eps, M = sp.symbols("N Delta epsilon M", positive=True)
    e, j = sp.Symbol("e", real=True), sp.Symbol("j", integer=True, positive=True)
    b.assume("Triangle inequality: ‖f(ξ) − x_1‖ ≤ Σ(j≠1) p_j ‖x_j − x_1‖, and p_j ≤ p_j/p_1 because p_1 ≤ 1", role="bound", key="triangle inequality, p_1 ≤ 1")
    tail = sp.exp(beta * e)
    b.step("Softmax tail: p_j ≤ p_j/p_1 = exp(β e) with e = (x_j − x_1)ᵀξ", tail)
    b.obligation("tail_increasing_in_exponent", sp.diff(tail, e), "positive", description="exp(βe) increases with e")
    e_max = b.assume("e = (x_j − x_1)ᵀx_1 + (x_j − x_1)ᵀ(ξ − x_1) ≤ −Δ_1 + 2Mε (definition of Δ; Cauchy–Schwarz "
                     "with ‖x_j − x_1‖ ≤ 2M and ‖ξ − x_1‖ ≤ ε)", -Delta + 2 * M * eps, role="bound", key="exponent bound −Δ + 2Mε")
    tail_max = tail.subs(e, e_max)
    b.step("Insert the largest exponent: p_j ≤", tail_max)
    dist = b.assume("‖x_j − x_1‖ ≤ 2M (‖x_j‖ ≤ M)", 2 * M, role="bound", key="‖x_j − x_1‖ ≤ 2M")
    bound = sp.summation(tail_max * dist, (j, 2, Nn))
    b.step("Sum the N − 1 terms p_j ‖x_j − x_1‖ ≤ 2M exp(β(−Δ + 2Mε)) over j ≠ 1: ‖f(ξ) − x_1‖ ≤", bound,
           compact=r"\|f(\xi)-x_i\|\le 2(N-1)\,M\,e^{-\beta(\Delta_i-2\epsilon M)}")
    # Theorem 5's second part and the separation condition of App. A Lemmas A5–A7 (retrieval with one update)
    near = b.step("Query and fixed point within 1/(2βM) of x_i: ε = 1/(2βM) in the bound",
                  sp.simplify(bound.subs(eps, 1 / (2 * beta * M))))
    b.obligation("bound_increases_in_eps", sp.diff(bound, eps) / bound, "positive",
                 description="the bound grows with ε, so ε ≤ 1/(2βM) gives at most this")
    b.obligation("near_bound_is_2e", sp.simplify(near - 2 * sp.E * (Nn - 1) * M * sp.exp(-beta * Delta)),
                 description="= 2e(N−1)M e^(−βΔ_i) (Theorem 5)")
    Dmin = b.assume("Well separated x_i (Ramsauer et al., ICLR 2021, App. A Lemmas A5–A7): Δ_i ≥ 2/(βN) + β⁻¹ ln(2(N−1)NβM²); "
                    "then the update is a contraction on the sphere ‖ξ − x_i‖ ≤ 1/(βNM) ⊂ {‖ξ − x_i‖ ≤ 1/(2βM)} "
                    "(N ≥ 2), whose fixed point is x_i*", 2 / (beta * Nn) + sp.log(2 * (Nn - 1) * Nn * beta * M ** 2) / beta,
                    role="premise", key="well-separated patterns", clauses=("retrieval",))
    b.obligation("near_bound_decreases_in_delta", -sp.diff(near, Delta) / near, "positive")
    at_min = b.step("2e(N−1)M e^(−βΔ_i) at Δ_i = Δ_min: the retrieval error is at most",
                    sp.simplify(sp.expand_log(near.subs(Delta, Dmin), force=True)))
    b.obligation("separated_error_small", sp.simplify(at_min - sp.exp(1 - 2 / Nn) / (beta * Nn * M)),
                 description="‖f(ξ) − x_i‖ ≤ e^(1−2/N)/(βNM) for a well-separated x_i")
    b.record(near_bound=near, delta_min=Dmin, separated_error=at_min,
             decomposition_residual=sp.Integer(0) if dec_res == sp.zeros(d, 1) else dec_res, ratio_residual=ratio_res,
             split_residual=split, args=(Nn, beta, Delta, eps, M))
    return b.done(bound)


# --------------------------------------------------------------------------------------------
# attention as a Hopfield update


@lru_cache(maxsize=None)
def derive_attention_identity(S: int = 2, T: int = 3, dk: int = 2, dv: int = 2) -> Derivation:
    """``S(QKᵀ/√d_k) V`` with ``K = YW_K``, ``Q = RW_Q``, ``V = YW_KW_V`` equals one Hopfield
    update of the state patterns ``Ξ = Qᵀ`` over stored ``X = Kᵀ`` at ``β = 1/√d_k``,
    transposed, then ``W_V``.

    The linear algebra is done with ``MatrixSymbol``s; the softmax step with explicit
    ``S×d_k`` / ``T×d_k`` symbol matrices (softmax over the stored-pattern index, which is the
    column index of ``QKᵀ`` and the row index of ``XᵀΞ``). ``result`` is the attention output
    (``S×d_v``) in the symbols ``facts["Q"], facts["K"], facts["W_V"]``; ``facts["residual"]`` is
    the zero matrix.

    >>> r = derive_attention_identity(1, 2, 1, 1)
    >>> r.facts["residual"]
    Matrix([[0]])
    >>> r.facts["matrix_residual"]
    0
    """
    b = DerivationBuilder("Attention is one Hopfield update (Ramsauer et al. 2021)")
    b.symbols(q_sk="entry (s, k) of Q = R W_Q (queries are rows)", k_tk="entry (t, k) of K = Y W_K",
              v_kj="entry (k, j) of W_V", d_m="model width", Y="stored (key) tokens, rows", R="state (query) tokens, rows")
    dm = sp.Symbol("d_m", integer=True, positive=True)
    Ym, Rm = sp.MatrixSymbol("Y", T, dm), sp.MatrixSymbol("R", S, dm)
    WQ, WK, WV = sp.MatrixSymbol("W_Q", dm, dk), sp.MatrixSymbol("W_K", dm, dk), sp.MatrixSymbol("W_V", dk, dv)
    Km, Qm = Ym * WK, Rm * WQ
    Xm, Xim = Km.T, Qm.T
    b.define("Stored patterns X = Kᵀ = (YW_K)ᵀ, state patterns Ξ = Qᵀ = (RW_Q)ᵀ", sp.Eq(sp.MatrixSymbol("X", dk, T), Xm))
    logits_h = (Xm.T * Xim)
    mres = sp.simplify((logits_h.T - Qm * Km.T).doit())
    b.step("Hopfield logits XᵀΞ = K Qᵀ, i.e. (XᵀΞ)ᵀ = Q Kᵀ; (XᵀΞ)ᵀ − QKᵀ =", mres)
    b.fact("matrix_residual", sp.Integer(0) if mres == sp.ZeroMatrix(S, T) or mres == 0 else mres)
    b.obligation("logits_agree", b.facts["matrix_residual"],
                 description="matrix-expression algebra (SymPy returns ZeroMatrix when it vanishes)")
    # every size: the softmaxes as normalised entrywise exponentials, in matrix symbols
    Ss, Ts, dks, dvs = sp.symbols("S T d_k d_v", integer=True, positive=True)
    Yg, Rg = sp.MatrixSymbol("Y", Ts, dm), sp.MatrixSymbol("R", Ss, dm)
    WKg, WVg = sp.MatrixSymbol("W_K", dm, dks), sp.MatrixSymbol("W_V", dks, dvs)
    Eg, Dinv = sp.MatrixSymbol("E", Ss, Ts), sp.MatrixSymbol("Dinv", Ss, Ss)
    b.define("Every size S, T, d_k, d_v, d_m: E = exp∘(QKᵀ/√d_k) entrywise (S×T) and Dinv = diag(E1)⁻¹ "
             "(symmetric, diagonal), so attention's row softmax is S(QKᵀ/√d_k) = Dinv E; at β = 1/√d_k the "
             "Hopfield logits βXᵀΞ = βKQᵀ are (QKᵀ/√d_k)ᵀ, whose entrywise exp is Eᵀ with column sums E1, so "
             "the column softmax over the stored patterns is S(βXᵀΞ) = Eᵀ Dinv", Eg.T * Dinv)
    Kg = Yg * WKg
    att_g = Dinv * Eg * (Kg * WVg)
    hop_g = b.step("Hopfield update X S(βXᵀΞ) with X = Kᵀ = (YW_K)ᵀ, transposed, times W_V",
                   ((Kg.T * (Eg.T * Dinv)).T * WVg).doit())
    res_g = (hop_g.subs(Dinv.T, Dinv) - att_g).doit()
    b.step("Minus attention Dinv E V with V = Y W_K W_V (Dinvᵀ = Dinv)", res_g)
    b.fact("general_residual", res_g)
    b.obligation("attention_equals_hopfield_update_every_size", res_g,
                 description="matrix symbols of symbolic sizes (SymPy returns ZeroMatrix when it vanishes)")
    Q = _sym_matrix("q", S, dk, real=True)
    K = _sym_matrix("k", T, dk, real=True)
    Wv = _sym_matrix("v", dk, dv, real=True)
    beta = 1 / sp.sqrt(dk)
    X, Xi = K.T, Q.T
    A = X.T * Xi  # T×S: stored index = rows
    col_soft = sp.Matrix(T, S, lambda t, s: sp.exp(beta * A[t, s]) / sum(sp.exp(beta * A[u, s]) for u in range(T)))
    hop = (X * col_soft).T * Wv
    b.define("Hopfield update Ξ^new = X S(β XᵀΞ) (softmax over stored patterns, per state), then (Ξ^new)ᵀ W_V, "
             "first entry", hop[0, 0])
    L = Q * K.T / sp.sqrt(dk)
    row_soft = sp.Matrix(S, T, lambda s, t: sp.exp(L[s, t]) / sum(sp.exp(L[s, u]) for u in range(T)))
    att = row_soft * (K * Wv)
    b.step("Attention S(QKᵀ/√d_k) V with V = K W_V = Y W_K W_V (softmax over keys, per query), computed", att,
           compact=r"\operatorname{softmax}\!\big(QK^{\top}/\sqrt{d_k}\big)\,K W_V")
    b.obligation("attention_equals_hopfield_update", att - hop)
    res = (att - hop).applyfunc(sp.expand)
    b.step("Attention minus Hopfield update, expanded", res)
    b.record(residual=res, Q=Q, K=K, W_V=Wv, beta=beta)
    return b.done(att)
