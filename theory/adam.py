"""Adam's bias correction derived in SymPy (claim ``opt.adam``).

Adam (Kingma & Ba 2015): ``m_t = β1 m_{t−1} + (1−β1) g_t``, ``v_t = β2 v_{t−1} + (1−β2) g_t²``,
``m_0 = v_0 = 0``, ``m̂_t = m_t/(1−β1^t)``, ``v̂_t = v_t/(1−β2^t)``,
``θ_t = θ_{t−1} − α m̂_t/(√v̂_t + ε)`` (elementwise).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_adam_bias_correction"]


@lru_cache(maxsize=None)
def derive_adam_bias_correction() -> Derivation:
    """Unroll the moment recursions into geometric sums and sum them:
    ``m_t = (1−β1) Σ_{i≤t} β1^{t−i} g_i``, so for gradients with constant mean ``μ``,
    ``E[m_t] = (1−β1^t) μ`` and ``E[m̂_t] = μ`` (likewise ``E[v̂_t] = E[g²]``). For a constant
    gradient ``g`` every step is ``−α g/(|g| + ε)``, which tends to ``−α sign(g)`` as ε → 0;
    without the corrections the step is ``−α (1−β1^t) g/(√(1−β2^t)|g| + ε)`` (first step
    ≈ ``(1−β1)/√(1−β2)`` times too large for the default betas).

    ``result`` = ``{"step": Δθ_t for constant g, "uncorrected_step": ..., "sign_limit": ...}``;
    ``facts["symbols"]`` = (α, g, ε, β1, β2, t).

    >>> d = derive_adam_bias_correction()
    >>> d.facts["mhat_mean"], d.facts["vhat_mean"]
    (mu, s)
    >>> d.result["sign_limit"]
    -alpha*sign(g)
    """
    b = DerivationBuilder("Adam: bias correction and the constant-gradient step")
    b1, b2 = sp.symbols("beta_1 beta_2", positive=True)
    alpha, eps = sp.symbols("alpha epsilon", positive=True)
    g, mu = sp.symbols("g mu", real=True)
    s = sp.Symbol("s", positive=True)  # E[g²]
    t, i = sp.symbols("t i", integer=True, positive=True)
    gi = sp.Function("g")
    m_unrolled = (1 - b1) * sp.Sum(b1 ** (t - i) * gi(i), (i, 1, t))
    b.step("Unroll m_t = β1 m_{t−1} + (1−β1) g_t from m_0 = 0", sp.Eq(sp.Symbol("m_t"), m_unrolled))
    Em = sp.simplify(((1 - b1) * sp.Sum(b1 ** (t - i) * mu, (i, 1, t))).doit())
    b.step("Take expectations with E[g_i] = μ and sum the geometric series", sp.Eq(sp.Symbol("E[m_t]"), Em))
    mhat = sp.simplify(Em / (1 - b1 ** t))
    b.fact("mhat_mean", mhat)
    b.step("E[m̂_t] = E[m_t]/(1−β1^t)", sp.Eq(sp.Symbol("E[mhat_t]"), mhat))
    Ev = sp.simplify(((1 - b2) * sp.Sum(b2 ** (t - i) * s, (i, 1, t))).doit())
    vhat = sp.simplify(Ev / (1 - b2 ** t))
    b.fact("vhat_mean", vhat)
    b.step("Likewise with E[g_i²] = s: E[v̂_t]", sp.Eq(sp.Symbol("E[vhat_t]"), vhat))
    # constant gradient: the moments are deterministic, so the same sums give m̂, v̂ exactly
    m_c = sp.simplify(Em.subs(mu, g))
    v_c = sp.simplify(Ev.subs(s, g ** 2))
    step = sp.simplify(-alpha * (m_c / (1 - b1 ** t)) / (sp.sqrt(v_c / (1 - b2 ** t)) + eps))
    b.step("Constant gradient g: Δθ_t = −α m̂_t/(√v̂_t + ε)", step)
    unc = -alpha * m_c / (sp.sqrt(v_c) + eps)
    b.step("Without bias correction: −α m_t/(√v_t + ε)", unc)
    gp = sp.Symbol("g", positive=True)
    b.fact("first_step_uncorrected_ratio", sp.simplify(sp.limit(unc.subs({t: 1, g: gp}) / (-alpha), eps, 0)))
    b.step("First uncorrected step / α sign(g) as ε → 0", b.facts["first_step_uncorrected_ratio"])
    lim = sp.limit(step, eps, 0).rewrite(sp.sign)
    b.step("As ε → 0 the step tends to", lim)
    b.fact("symbols", (alpha, g, eps, b1, b2, t))
    return b.done({"step": step, "uncorrected_step": unc, "sign_limit": lim})
