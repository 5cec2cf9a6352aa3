"""FAVOR+ random features for the softmax kernel, derived in SymPy (claim ``perf.favor_unbiased``).

Conventions: ``x, y ∈ R^d``, ``ω_1..ω_m ~ N(0, I_d)`` i.i.d., ``SM(x, y) = e^{xᵀy}``. Positive
features ``φ⁺(x) = e^{−‖x‖²/2}/√m (e^{ω_iᵀx})_i`` (``m`` entries); trigonometric features
``φᵗ(x) = e^{‖x‖²/2}/√m (sin ω_iᵀx, cos ω_iᵀx)_i`` (``2m`` entries, ``m`` frequencies).

Every Gaussian expectation is reduced to one dimension: for fixed ``z``, rotation invariance of
``N(0, I)`` gives ``ωᵀz ~ ‖z‖ t`` with ``t ~ N(0, 1)``, so ``E f(ωᵀz) = ∫ f(‖z‖t) e^{−t²/2}/√(2π) dt``.
The derivation works with the scalars ``a = ‖x‖², b = ‖y‖², c = xᵀy`` (``‖x ± y‖² = a + b ± 2c``).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_favor", "derive_squared_error_moments", "gaussian_expectation", "mean_central_moments"]

_t = sp.Symbol("t", real=True)


def gaussian_expectation(f: sp.Expr, t: sp.Symbol = _t) -> sp.Expr:
    """``E f(t)`` for ``t ~ N(0, 1)``, by integrating against the standard normal density.

    >>> s = sp.Symbol("s", positive=True)
    >>> gaussian_expectation(sp.exp(s * _t))
    exp(s**2/2)
    >>> gaussian_expectation(sp.cos(s * _t))
    exp(-s**2/2)
    """
    dens = sp.exp(-t**2 / 2) / sp.sqrt(2 * sp.pi)
    return sp.simplify(sp.integrate(sp.expand(f) * dens, (t, -sp.oo, sp.oo), conds="none"))


@lru_cache(maxsize=None)
def _favor_symbols() -> dict:
    """The scalar symbols of both FAVOR+ derivations: ``a = ‖x‖², b = ‖y‖², c = xᵀy``, ``m``."""
    return {"a": sp.Symbol("a", nonnegative=True), "b": sp.Symbol("b", nonnegative=True),
            "c": sp.Symbol("c", real=True), "m": sp.Symbol("m", positive=True, integer=True)}


@lru_cache(maxsize=None)
def _one_dim_integrals() -> dict:
    """``E e^{st}``, ``E cos(st)``, ``E cos²(st)`` for ``t ~ N(0, 1)`` by integration (``s ≥ 0``)."""
    s = sp.Symbol("s", nonnegative=True)
    return {"s": s, "mgf": gaussian_expectation(sp.exp(s * _t)), "E_cos": gaussian_expectation(sp.cos(s * _t)),
            "E_cos2": gaussian_expectation(sp.cos(s * _t) ** 2)}


@lru_cache(maxsize=None)
def _squared_error_moments(mse_positive: sp.Expr, mse_trig: sp.Expr):
    """Moments of the squared error for both estimators (see :func:`derive_squared_error_moments`).

    Returns ``(steps, obligations, facts, out)``: the steps as ``(how, text, expr)`` to replay into
    a builder, the obligations as ``(name, expr, description)``, the facts and the result."""
    S = _favor_symbols()
    a, b, c, m = S["a"], S["b"], S["c"], S["m"]
    I = _one_dim_integrals()
    s, mgf = I["s"], I["mgf"]  # E e^{s t} = e^{s²/2}
    lam = sp.Symbol("lambda", real=True)
    steps, obligations, facts = [], [], {}
    order = 6
    # positive: one term Y = e^{-(a+b)/2} e^{ωᵀ(x+y)}, so Y^k = e^{-k(a+b)/2} e^{k ωᵀ(x+y)}
    nz = sp.sqrt(a + b + 2 * c)
    raw_pos = {0: sp.Integer(1)}
    for k in range(1, order + 1):
        raw_pos[k] = sp.powsimp(sp.exp(-k * (a + b) / 2) * mgf.subs(s, k * nz), combine="exp")
    steps.append(("derived", "Positive term Y: E Y^k = e^{−k(a+b)/2} M(k‖x+y‖)  (log-normal moments), k = 4 shown", raw_pos[4]))
    # trig: one term T = e^{(a+b)/2} cos(ωᵀ(x−y)); cos^k θ = 2^{−k} Σ_j C(k,j) e^{i(2j−k)θ} and
    # E e^{iλt} = M(iλ) = e^{−λ²/2} (M is entire, so the real-argument integral continues analytically)
    char = mgf.subs(s, sp.I * lam)
    steps.append(("assumed", "Characteristic function E e^{iλt} = M(iλ) (the MGF is entire: analytic continuation)", char))
    nw = sp.sqrt(a + b - 2 * c)
    ecos = {k: sp.expand(sum(sp.binomial(k, j) * char.subs(lam, (2 * j - k) * s) for j in range(k + 1)) / 2**k)
            for k in range(0, order + 1)}
    res = tuple(ecos[k] - I[name] for k, name in ((1, "E_cos"), (2, "E_cos2")))
    obligations.append(("cos_moments_match_integrals", list(res),
                        "E cos^k(st) from the characteristic function equals the direct integral, k = 1, 2"))
    facts["cos_moment_residuals"] = tuple(sp.simplify(r) for r in res)
    steps.append(("derived", "E cos^k(st) from the binomial expansion; minus the direct integrals for k = 1, 2",
                  facts["cos_moment_residuals"]))
    raw_trig = {k: sp.expand(sp.exp(k * (a + b) / 2) * ecos[k].subs(s, nw)) for k in range(order + 1)}
    steps.append(("derived", "Trig term T: E T^k = e^{k(a+b)/2} E cos^k(‖x−y‖t), k = 2 shown", raw_trig[2]))
    cm = mean_central_moments(order)
    msym, mus = cm["m"], cm["mu"]
    steps.append(("derived", "Mean of m i.i.d. copies: E(D̄ − E D̄)^4 from the cumulants κ_j/m^{j−1}", cm[4]))
    out = {}
    for name, raw, mse in (("positive", raw_pos, mse_positive), ("trig", raw_trig, mse_trig)):
        cen = {mus[j - 2]: _central_from_raw(raw, j) for j in range(2, order + 1)}
        M2, M4, M6 = (cm[j].subs(cen).subs(msym, m) for j in (2, 4, 6))
        mean_S = M2
        var_S = M4 - M2**2
        mu3_S = M6 - 3 * M4 * M2 + 2 * M2**3
        steps.append(("derived", f"{name}: E S = E D̄²", mean_S))
        steps.append(("derived", f"{name}: Var S = E D̄⁴ − (E D̄²)²", var_S))
        steps.append(("derived", f"{name}: E(S − ES)³ = E D̄⁶ − 3 E D̄⁴ E D̄² + 2 (E D̄²)³", mu3_S))
        diff = sp.powsimp(sp.expand(mean_S - mse), combine="exp")
        obligations.append((f"mean_S_equals_mse_{name}", diff,
                            f"the first moment of the squared error is the derived MSE ({name} features)"))
        facts[f"mean_S_minus_derived_mse_{name}"] = sp.simplify(diff)
        out[name] = {"mean_S": mean_S, "var_S": var_S, "mu3_S": mu3_S}
    facts["raw_moments"] = {"positive": raw_pos, "trig": raw_trig}
    return steps, obligations, facts, out


def _replay(B: DerivationBuilder, steps) -> None:
    for how, text, expr in steps:
        if how == "derived":
            B.step(text, expr)
        else:
            B.assume(text, expr, key="characteristic function = M(iλ)")


@lru_cache(maxsize=None)
def derive_favor() -> Derivation:
    """Unbiasedness and mean squared error of positive and trigonometric random features, and the
    exact moments of their squared error (used for the Monte Carlo standard error of the claim).

    ``result`` is a dict of closed forms in ``a = ‖x‖², b = ‖y‖², c = xᵀy`` and ``m``:
    ``"kernel_positive"``, ``"kernel_trig"`` (both ``e^c``), ``"mse_positive"``, ``"mse_trig"``.
    ``facts`` holds the symbols, the 1-D Gaussian integrals, the 2-D check of the rotation
    reduction, and ``"*_minus_stated"``: derived MSE minus the formulas as Choromanski et al. state
    them (``(1/m) e^{‖x+y‖²} SM² (1 − e^{−‖x+y‖²})`` and
    ``(1/2m) e^{‖x+y‖²} SM^{−2} (1 − e^{−‖x−y‖²})²``), simplified.

    >>> d = derive_favor()
    >>> d.result["kernel_positive"], d.result["kernel_trig"]
    (exp(c), exp(c))
    >>> d.facts["mse_positive_minus_stated"], d.facts["mse_trig_minus_stated"]
    (0, 0)
    """
    B = DerivationBuilder("FAVOR+: unbiased softmax-kernel features and their MSE")
    B.symbols(a="‖x‖²", b="‖y‖²", c="xᵀy", m="number of random features (frequencies)", s="‖z‖ for a fixed z",
              t="a standard normal variable", u="first coordinate of z (d = 2 check)", v="second coordinate of z",
              omega_i="coordinate i of ω ~ N(0, I)", SM="the softmax kernel e^{xᵀy}", lambda_="argument of the "
              "characteristic function", mu2="central moments mu2..mu6 of one term", tau="argument of the cumulant series")
    S = _favor_symbols()
    a, b, c, m = S["a"], S["b"], S["c"], S["m"]
    I = _one_dim_integrals()
    s = I["s"]
    B.assume("Rotation invariance: for ω ~ N(0, I_d) and fixed z, ωᵀz has the law of ‖z‖·t, t ~ N(0,1); "
             "every expectation below is a 1-D integral in t",
             "E f(\\omega^\\top z)=\\int f(\\|z\\| t)\\,\\tfrac{e^{-t^2/2}}{\\sqrt{2\\pi}}dt", key="rotation invariance")
    mgf = B.step("Gaussian MGF: E exp(s t)", I["mgf"])
    # the rotation reduction checked in two dimensions: E e^{u ω1 + v ω2} as a double integral
    u, v = sp.symbols("u v", real=True)
    w1, w2 = sp.symbols("omega_1 omega_2", real=True)
    dens2 = sp.exp(-(w1**2 + w2**2) / 2) / (2 * sp.pi)
    inner = sp.integrate(sp.exp(u * w1 + v * w2) * dens2, (w1, -sp.oo, sp.oo), conds="none")
    two_d = sp.simplify(sp.integrate(inner, (w2, -sp.oo, sp.oo), conds="none"))
    rot_resid = sp.simplify(two_d - mgf.subs(s, sp.sqrt(u**2 + v**2)))
    B.fact("rotation_2d_residual", rot_resid)
    B.step("Check of the reduction in d = 2: ∫∫ exp(uω₁+vω₂) N(ω) dω − M(√(u²+v²))", rot_resid)
    B.obligation("rotation_reduction_2d", two_d - mgf.subs(s, sp.sqrt(u**2 + v**2)))

    # ---- positive features: one term Z = e^{-(a+b)/2} e^{ωᵀ(x+y)}, ‖x+y‖² = a + b + 2c
    nz2 = a + b + 2 * c
    nw2 = a + b - 2 * c
    B.define("Positive features: φ⁺(x)ᵀφ⁺(y) is the mean of m terms Z = exp(−(a+b)/2) exp(ωᵀ(x+y)), ‖x+y‖² = a + b + 2c",
             r"\phi^+(x)^{\top}\phi^+(y)=\tfrac1m\sum_i e^{-(a+b)/2}e^{\omega_i^{\top}(x+y)}")
    EZ = sp.simplify(sp.powsimp(sp.exp(-(a + b) / 2) * mgf.subs(s, sp.sqrt(nz2)), combine="exp"))
    B.step("E[φ⁺(x)ᵀφ⁺(y)] = exp(−(a+b)/2) E exp(ωᵀ(x+y)) = exp(−(a+b)/2) M(‖x+y‖)", EZ)
    B.obligation("positive_unbiased", EZ - sp.exp(c), description="E = exp(xᵀy)")
    EZ2 = sp.powsimp(sp.exp(-(a + b)) * mgf.subs(s, 2 * sp.sqrt(nz2)), combine="exp")
    B.step("Second moment of one term: exp(−(a+b)) E exp(2ωᵀ(x+y))", EZ2)
    mse_pos = sp.simplify(sp.expand((EZ2 - EZ**2) / m))
    B.step("Unbiased, so MSE = Var/m = (E Z² − (E Z)²)/m", mse_pos)
    SM = sp.exp(c)
    stated_pos = sp.exp(nz2) * SM**2 * (1 - sp.exp(-nz2)) / m
    B.define("Stated (1/m) exp(‖x+y‖²) SM² (1 − exp(−‖x+y‖²))", stated_pos)
    B.obligation("mse_positive_matches_stated", sp.powsimp(sp.expand(mse_pos - stated_pos), combine="exp"))
    diff_pos = sp.simplify(sp.expand(sp.powsimp(sp.expand(mse_pos - stated_pos), combine="exp")))
    B.fact("mse_positive_minus_stated", diff_pos)
    B.step("MSE minus the stated form", diff_pos)

    # ---- trigonometric features: sin·sin + cos·cos = cos(ωᵀ(x−y)); one term e^{(a+b)/2} cos(ωᵀ(x−y))
    B.define("Trigonometric features: sin·sin + cos·cos = cos(ωᵀ(x−y)); one term exp((a+b)/2) cos(ωᵀ(x−y)), "
             "‖x−y‖² = a + b − 2c", r"\phi^t(x)^{\top}\phi^t(y)=\tfrac1m\sum_i e^{(a+b)/2}\cos(\omega_i^{\top}(x-y))")
    Ecos = B.step("E cos(s t)", I["E_cos"])
    Ecos2 = B.step("E cos²(s t)", I["E_cos2"])
    ET = sp.simplify(sp.powsimp(sp.exp((a + b) / 2) * Ecos.subs(s, sp.sqrt(nw2)), combine="exp"))
    B.step("E[φᵗ(x)ᵀφᵗ(y)] = exp((a+b)/2) E cos(‖x−y‖t)", ET)
    B.obligation("trig_unbiased", ET - sp.exp(c), description="E = exp(xᵀy)")
    var_cos = sp.factor(sp.simplify(Ecos2 - Ecos**2))
    B.step("Var cos(s t) = E cos² − (E cos)²", var_cos)
    mse_trig = sp.exp(a + b) * var_cos.subs(s, sp.sqrt(nw2)) / m
    B.step("MSE of the m-frequency estimator = exp(a+b) Var cos(‖x−y‖t)/m", mse_trig)
    stated_trig = sp.exp(nz2) * SM**-2 * (1 - sp.exp(-nw2)) ** 2 / (2 * m)
    B.define("Stated (1/2m) exp(‖x+y‖²) SM⁻² (1 − exp(−‖x−y‖²))² (2m features from m frequencies)", stated_trig)
    B.obligation("mse_trig_matches_stated", sp.powsimp(sp.expand(mse_trig - stated_trig), combine="exp"))
    diff_trig = sp.simplify(sp.expand(sp.powsimp(sp.expand(mse_trig - stated_trig), combine="exp")))
    B.fact("mse_trig_minus_stated", diff_trig)
    B.step("MSE minus the stated form", diff_trig)

    # ---- exact moments of the squared error (the Monte Carlo check's standard error uses them)
    steps, obligations, facts, _ = _squared_error_moments(mse_pos, mse_trig)
    _replay(B, steps)
    for name, expr, desc in obligations:
        B.obligation(name, expr, description=desc)
    B.fact("symbols", {"a": a, "b": b, "c": c, "m": m})
    B.fact("integrals", {"mgf": mgf, "E_cos": Ecos, "E_cos2": Ecos2})
    return B.done({"kernel_positive": EZ, "kernel_trig": ET, "mse_positive": mse_pos, "mse_trig": mse_trig})


@lru_cache(maxsize=None)
def mean_central_moments(order: int = 6) -> dict:
    """Central moments of the mean of ``m`` i.i.d. copies of ``D`` in terms of the central moments
    ``mu2..mu_order`` of one copy, by cumulants: the mean's cumulant generating function is
    ``m·K_D(τ/m)`` with ``K_D = log E e^{τ(D−ED)}``, expanded as a power series in ``τ``.

    Returns ``{j: E(D̄ − ED)^j}`` for ``j = 2..order`` with the symbols under ``"m"`` and ``"mu"``.

    >>> r = mean_central_moments(4)
    >>> m, (mu2, mu3, mu4) = r["m"], r["mu"]
    >>> sp.simplify(r[4] - (mu4 + 3 * (m - 1) * mu2**2) / m**3)
    0
    """
    m = sp.Symbol("m", positive=True, integer=True)
    tau = sp.Symbol("tau")
    mus = sp.symbols(f"mu2:{order + 1}")
    mgf = 1 + sum(mus[j - 2] * tau**j / sp.factorial(j) for j in range(2, order + 1))
    cgf = sp.series(sp.log(mgf), tau, 0, order + 1).removeO()
    mom = sp.series(sp.exp(sp.expand(m * cgf.subs(tau, tau / m))), tau, 0, order + 1).removeO()
    out = {j: sp.factor(sp.expand(mom.coeff(tau, j) * sp.factorial(j))) for j in range(2, order + 1)}
    out.update({"m": m, "mu": mus})
    return out


def _central_from_raw(raw: dict, j: int) -> sp.Expr:
    """``E(Y − EY)^j = Σ_i C(j, i) E[Y^i] (−EY)^{j−i}`` (``raw[0] = 1``)."""
    return sp.expand(sum(sp.binomial(j, i) * raw[i] * (-raw[1]) ** (j - i) for i in range(j + 1)))


@lru_cache(maxsize=None)
def derive_squared_error_moments() -> Derivation:
    """Exact mean, variance and third central moment of the squared error ``S = (K − e^{c})²`` of
    the ``m``-frequency estimators ``K`` (positive and trigonometric features, i.i.d. ``ω``), in
    ``a = ‖x‖², b = ‖y‖², c = xᵀy`` and ``m``. Used to put an EXACT standard error on a Monte Carlo
    MSE estimate (the sample SE of a heavy-tailed ``S`` is itself noisy and correlated with the
    estimate). Derived independently of the MSE formulas: raw moments of one term from the
    Gaussian MGF, central moments by the binomial expansion, moments of the m-term mean by cumulants.
    The same steps and obligations are part of :func:`derive_favor` (the claim's derivation).

    ``result``: ``{"positive"|"trig": {"mean_S", "var_S", "mu3_S"}}``; ``facts``: the raw moments,
    ``"mean_S_minus_derived_mse_*"`` (0: the first moment agrees with :func:`derive_favor`) and
    ``"cos_moment_residuals"`` (the E cos^k obtained from the MGF at imaginary argument minus the
    direct integrals for k = 1, 2).

    >>> d = derive_squared_error_moments()
    >>> d.facts["mean_S_minus_derived_mse_positive"], d.facts["mean_S_minus_derived_mse_trig"]
    (0, 0)
    >>> d.facts["cos_moment_residuals"]
    (0, 0)
    >>> all(r.passed for r in d.check_obligations())
    True
    """
    base = derive_favor()
    B = DerivationBuilder("FAVOR+: exact moments of the squared error of the m-frequency estimators")
    B.symbols(a="‖x‖²", b="‖y‖²", c="xᵀy", m="number of frequencies", s="‖z‖ for a fixed z",
              lambda_="argument of the characteristic function", mu2="central moments mu2..mu6 of one term")
    B.step("MSE of the positive features (derive_favor)", base.result["mse_positive"])
    B.step("MSE of the trigonometric features (derive_favor)", base.result["mse_trig"])
    steps, obligations, facts, out = _squared_error_moments(base.result["mse_positive"], base.result["mse_trig"])
    _replay(B, steps)
    for name, expr, desc in obligations:
        B.obligation(name, expr, description=desc)
    for name in ("positive", "trig"):
        B.step(f"{name}: (E S, Var S, E(S − ES)³)", out[name])
    for k, v in facts.items():
        B.fact(k, v)
    B.fact("symbols", base.facts["symbols"])
    return B.done(out)
