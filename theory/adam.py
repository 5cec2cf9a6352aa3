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
    >>> [r.passed for r in d.check_obligations()]
    [True, True, True, True, True]
    """
    b = DerivationBuilder("Adam: bias correction and the constant-gradient step")
    b.symbols(beta_1="decay of the first moment", beta_2="decay of the second moment", alpha="learning rate",
              epsilon="the ε in the denominator", g="a constant gradient (or g_i: the gradient at step i)",
              mu="E[g_i] (the same at every step)", s="E[g_i²] (the same at every step), e.g. σ² + μ²",
              t="step count", i="summation index", m="the expectation E[m_t] as a sequence in t")
    b1, b2 = sp.symbols("beta_1 beta_2", positive=True)
    alpha, eps = sp.symbols("alpha epsilon", positive=True)
    g, mu = sp.symbols("g mu", real=True)
    s = sp.Symbol("s", positive=True)  # E[g²]
    t, i = sp.symbols("t i", integer=True, positive=True)
    gi = sp.Function("g")
    b.define("Adam's moments: m_t = β1 m_(t−1) + (1−β1) g_t, v_t = β2 v_(t−1) + (1−β2) g_t², m_0 = v_0 = 0; "
             "m̂_t = m_t/(1−β1^t), v̂_t = v_t/(1−β2^t), Δθ_t = −α m̂_t/(√v̂_t + ε)",
             r"m_t=\beta_1m_{t-1}+(1-\beta_1)g_t,\ \hat m_t=\frac{m_t}{1-\beta_1^t},\ \Delta\theta_t=-\alpha\frac{\hat m_t}{\sqrt{\hat v_t}+\epsilon}")
    m_unrolled = (1 - b1) * sp.Sum(b1 ** (t - i) * gi(i), (i, 1, t))
    b.step("Unroll the recursion from m_0 = 0: m_t =", m_unrolled)
    m_rec = {k: (1 - b1) * sum(b1 ** (k - j) * gi(j) for j in range(1, k + 1)) for k in range(0, 5)}
    b.obligation("unrolled_form_solves_recursion",
                 [m_rec[k] - b1 * m_rec[k - 1] - (1 - b1) * gi(k) for k in range(1, 5)],
                 description="the unrolled sum satisfies m_t = β1 m_{t−1} + (1−β1) g_t for t = 1..4 (and m_0 = 0)")
    Em = sp.simplify(((1 - b1) * sp.Sum(b1 ** (t - i) * mu, (i, 1, t))).doit())
    b.step("Take expectations with E[g_i] = μ and sum the geometric series: E[m_t] =", Em)
    mseq = sp.Function("m")
    rs = sp.rsolve(mseq(t) - b1 * mseq(t - 1) - (1 - b1) * mu, mseq(t), {mseq(0): 0})
    b.step("Independently: solve E[m_t] = β1 E[m_(t−1)] + (1−β1)μ, E[m_0] = 0 (rsolve)", rs)
    b.obligation("geometric_sum_matches_recursion", Em - rs)
    mhat = sp.simplify(Em / (1 - b1 ** t))
    b.fact("mhat_mean", mhat)
    b.step("E[m̂_t] = E[m_t]/(1−β1^t)", mhat)
    b.obligation("mhat_unbiased", mhat - mu, description="E[m̂_t] = μ")
    Ev = sp.simplify(((1 - b2) * sp.Sum(b2 ** (t - i) * s, (i, 1, t))).doit())
    b.step("Likewise with E[g_i²] = s: E[v_t] =", Ev)
    vhat = sp.simplify(Ev / (1 - b2 ** t))
    b.fact("vhat_mean", vhat)
    b.step("E[v̂_t] = E[v_t]/(1−β2^t)", vhat)
    b.obligation("vhat_unbiased", vhat - s, description="E[v̂_t] = E[g²] (= σ² + μ² for gradients of variance σ²)")
    # constant gradient: the moments are deterministic, so the same sums give m̂, v̂ exactly
    m_c = sp.simplify(Em.subs(mu, g))
    v_c = sp.simplify(Ev.subs(s, g ** 2))
    b.step("Constant gradient g: the moments are deterministic, m_t =", m_c)
    b.step("and v_t =", v_c)
    step = sp.simplify(-alpha * (m_c / (1 - b1 ** t)) / (sp.sqrt(v_c / (1 - b2 ** t)) + eps))
    b.step("Δθ_t = −α m̂_t/(√v̂_t + ε)", step)
    b.obligation("corrected_step_is_g_over_abs_g", step - (-alpha * g / (sp.Abs(g) + eps)),
                 description="every corrected step is −α g/(|g| + ε)")
    unc = -alpha * m_c / (sp.sqrt(v_c) + eps)
    b.step("Without bias correction: −α m_t/(√v_t + ε)", unc)
    gp = sp.Symbol("g", positive=True)
    b.fact("first_step_uncorrected_ratio", sp.simplify(sp.limit(unc.subs({t: 1, g: gp}) / (-alpha), eps, 0)))
    b.step("First uncorrected step / α sign(g) as ε → 0", b.facts["first_step_uncorrected_ratio"])
    lim = sp.limit(step, eps, 0).rewrite(sp.sign)
    b.step("As ε → 0 the step tends to", lim)
    b.fact("symbols", (alpha, g, eps, b1, b2, t))
    return b.done({"step": step, "uncorrected_step": unc, "sign_limit": lim})
