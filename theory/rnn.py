"""Backpropagation through time derived in SymPy (claim ``rnn.bptt``).

A scalar RNN (lecture notes 004): ``a_t = w h_{t-1} + u x_t + b``, ``h_t = σ(a_t)``, ``y_t = v h_t``,
loss ``L = Σ_t ½ (y_t − z_t)²``, for ``t = 1..T``; ``σ`` is an undefined function, so the
results hold for any differentiable activation. "Untied" means step ``t`` uses its own copy
``w_t`` of the recurrent weight.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder

__all__ = ["derive_bptt_scalar", "derive_tied_projection", "derive_tied_projection_general"]


class dsigma(sp.Function):
    """σ′, the derivative of the activation: an undefined function, as σ is. ``sp.diff`` of σ(a) would
    give ``Subs(Derivative(σ(ξ), ξ), ξ, a)`` with a Dummy ξ whose index depends on the process's string
    hashes, and that index ordered the printed factors of a product: the same derivation printed
    differently in two processes."""

    def _latex(self, printer, exp=None):
        body = r"\sigma'\left(%s\right)" % printer._print(self.args[0])
        return body if exp is None else r"\left(%s\right)^{%s}" % (body, exp)

    def _sympystr(self, printer):
        return "sigma'(%s)" % printer._print(self.args[0])


class sigma(sp.Function):
    """The activation σ, any differentiable function; its derivative is :class:`dsigma`."""

    def fdiff(self, argindex=1):
        return dsigma(self.args[0])


def _unroll(T, w_of, u, b, v, h0, xs, zs, sigma):
    h, hs, As = h0, [h0], []
    for t in range(T):
        a = w_of(t) * h + u * xs[t] + b
        h = sigma(a)
        As.append(a)
        hs.append(h)
    L = sum(sp.Rational(1, 2) * (v * hs[t + 1] - zs[t]) ** 2 for t in range(T))
    return L, hs, As


@lru_cache(maxsize=None)
def derive_bptt_scalar(T: int = 3) -> Derivation:
    """For the scalar RNN above: ``dL/dw`` with ``w`` tied equals ``Σ_k ∂L/∂w_k`` of the untied
    copies evaluated at ``w_k = w`` (chain rule: ``w`` enters every step), and both equal the
    BPTT recursion ``δ_T = σ'(a_T) v (y_T − z_T)``, ``δ_t = σ'(a_t) (v (y_t − z_t) + w δ_{t+1})``,
    ``dL/dw = Σ_t δ_t h_{t−1}``.

    ``result`` = ``{"tied": dL/dw, "untied": (∂L/∂w_1, ..., ∂L/∂w_T) at w_k = w}`` with
    ``σ = tanh`` substituted (for lambdify); ``facts["symbols"]`` = (w, u, b, v, h0, xs, zs);
    ``facts["tied_minus_sum_untied"]`` and ``facts["bptt_minus_tied"]`` are 0 for generic σ.

    >>> d = derive_bptt_scalar(2)
    >>> d.facts["tied_minus_sum_untied"], d.facts["bptt_minus_tied"]
    (0, 0)
    """
    b_ = DerivationBuilder(f"BPTT for a scalar RNN with T={T} steps")
    b_.symbols(w="recurrent weight (tied)", w_k="untied copy of w used at step k", u="input weight", b="bias",
               v="output weight", h_0="initial hidden state", x_t="input at step t", z_t="target at step t",
               sigma="the activation (any differentiable function)", alpha="argument of σ'")
    w, u, b, v, h0 = sp.symbols("w u b v h_0", real=True)
    xs = sp.symbols(f"x_1:{T + 1}", real=True)
    zs = sp.symbols(f"z_1:{T + 1}", real=True)
    ws = sp.symbols(f"w_1:{T + 1}", real=True)
    b_.define("a_t = w h_(t−1) + u x_t + b, h_t = σ(a_t), y_t = v h_t, L = Σ_t ½(y_t − z_t)²",
              r"L=\sum_{t=1}^{T}\tfrac12\big(v\,\sigma(w h_{t-1}+u x_t+b)-z_t\big)^2")
    L_tied, hs, As = _unroll(T, lambda t: w, u, b, v, h0, xs, zs, sigma)
    L_untied, _, _ = _unroll(T, lambda t: ws[t], u, b, v, h0, xs, zs, sigma)
    b_.step("Unrolled loss with tied w (the last hidden state shown)", sp.Eq(sp.Symbol(f"h_{T}"), hs[-1]))
    g_tied = sp.diff(L_tied, w)
    b_.step("dL/dw, differentiating the unrolled loss in the tied weight", g_tied)
    at_tied = {wk: w for wk in ws}
    g_untied = [sp.diff(L_untied, wk).subs(at_tied) for wk in ws]
    b_.step("∂L/∂w_k of the untied copies, evaluated at w_k = w (k = 1 shown)", g_untied[0])
    b_.obligation("tied_is_sum_of_untied", g_tied - sum(g_untied), description="dL/dw = Σ_k ∂L/∂w_k at w_k = w")
    diff = sp.simplify(sp.expand(g_tied - sum(g_untied)))
    b_.fact("tied_minus_sum_untied", diff)
    b_.step("dL/dw − Σ_k ∂L/∂w_k simplifies to", diff)
    # BPTT recursion, backwards in time
    ap = sp.Symbol("alpha")
    dsig = [sp.diff(sigma(ap), ap).subs(ap, a) for a in As]
    delta = [None] * T
    for t in reversed(range(T)):
        upstream = v * (v * hs[t + 1] - zs[t]) + (w * delta[t + 1] if t + 1 < T else 0)
        delta[t] = dsig[t] * upstream
    b_.define("BPTT recursion: δ_T = σ'(a_T) v (y_T − z_T), δ_t = σ'(a_t)(v(y_t − z_t) + w δ_(t+1)), "
              "dL/dw = Σ_t δ_t h_(t−1)", r"\delta_t=\sigma'(a_t)\big(v(y_t-z_t)+w\,\delta_{t+1}\big)")
    bptt = sum(delta[t] * hs[t] for t in range(T))
    b_.step("The recursion evaluated backwards in time: Σ_t δ_t h_(t−1)", bptt)
    b_.obligation("bptt_equals_gradient", bptt.doit() - g_tied.doit())
    bdiff = sp.simplify(sp.expand(bptt.doit() - g_tied.doit()))
    b_.fact("bptt_minus_tied", bdiff)
    b_.step("BPTT recursion − dL/dw simplifies to", bdiff)
    tanh = {sigma: sp.Lambda(ap, sp.tanh(ap)), dsigma: sp.Lambda(ap, sp.diff(sp.tanh(ap), ap))}  # σ′ derived
    res_tied = g_tied.subs(tanh).doit()
    res_untied = tuple(g.subs(tanh).doit() for g in g_untied)
    b_.step("dL/dw with σ = tanh (for evaluation)", res_tied)
    b_.step("∂L/∂w_k at w_k = w with σ = tanh, k = 1..T", res_untied)
    b_.fact("symbols", (w, u, b, v, h0, xs, zs))
    return b_.done({"tied": res_tied, "untied": res_untied})


@lru_cache(maxsize=None)
def derive_tied_projection(T: int = 3) -> Derivation:
    """Lecture notes 004's "project onto the tied subspace, i.e. average": for untied gradients
    ``g = (g_1..g_T)`` the Euclidean projection onto ``{(c, ..., c)}`` minimises ``Σ (g_k − c)²``,
    giving ``c* = (1/T) Σ g_k`` (the average), while the tied gradient is ``Σ g_k = T c*``.
    So the projected (averaged) step with rate η is the tied gradient step with rate η/T: same
    direction, the average is *not* the gradient.

    ``result`` = ``{"projection": c*, "tied_over_projection": T}``.

    >>> derive_tied_projection(2).result["projection"]
    g_1/2 + g_2/2
    >>> derive_tied_projection(4).result["tied_over_projection"]
    4
    """
    b = DerivationBuilder(f"Projection onto tied weights, T={T}")
    b.symbols(g_k="untied gradient of copy k", c="common value of a tied point (c, …, c)", eta="step size",
              w="the tied weight")
    g = sp.symbols(f"g_1:{T + 1}", real=True)
    c, eta, w = sp.symbols("c eta w", real=True)
    obj = sum((gk - c) ** 2 for gk in g)
    b.define("Squared distance from g to the tied point (c, ..., c)", obj)
    cstar = sp.solve(sp.diff(obj, c), c)[0]
    b.step("Stationary point c* (the objective is a convex quadratic in c)", cstar)
    ratio = sp.simplify(sum(g) / cstar)
    b.step("Tied gradient Σ_k g_k divided by the projection", ratio)
    b.obligation("convex_in_c", sp.diff(obj, c, 2), "positive", description="the stationary point is the minimum")
    step_diff = sp.simplify((w - eta * cstar) - (w - (eta / T) * sum(g)))
    b.obligation("projected_step_is_tied_step_eta_over_T", (w - eta * cstar) - (w - (eta / T) * sum(g)))
    b.fact("projected_step_minus_tied_step_eta_over_T", step_diff)
    b.step("(w − η c*) − (w − (η/T) Σ g_k)", step_diff)
    b.fact("g_symbols", g)
    return b.done({"projection": cstar, "tied_over_projection": ratio})


@lru_cache(maxsize=None)
def derive_tied_projection_general() -> Derivation:
    """The projection of :func:`derive_tied_projection` for a symbolic number of steps ``T ≥ 1``:
    ``Σ_{k=1}^T (g_k − c)²`` has derivative ``2Tc − 2Σ_k g_k`` in ``c`` and second derivative
    ``2T > 0``, so ``c* = (1/T) Σ_k g_k`` and ``Σ_k g_k / c* = T``. The Frobenius distance of
    matrices is a sum of such terms, one per entry, so the same holds entrywise for matrices.

    >>> d = derive_tied_projection_general()
    >>> d.result["tied_over_projection"]
    T
    """
    b = DerivationBuilder("Projection onto tied weights, symbolic T")
    T = sp.Symbol("T", integer=True, positive=True)
    k = sp.Symbol("k", integer=True, positive=True)
    g = sp.IndexedBase("g", real=True)
    c = sp.Symbol("c", real=True)
    b.symbols(T="number of steps (any T ≥ 1)", k="step index", g_k="untied gradient of copy k (one entry)",
              c="common value of a tied point (c, …, c)")
    obj = sp.Sum((g[k] - c) ** 2, (k, 1, T))
    b.define("Squared distance from (g_1..g_T) to the tied point (c, ..., c)", obj)
    d1 = b.step("∂/∂c, summed", sp.expand(sp.diff(obj, c).doit()).doit())
    d2 = b.step("∂²/∂c²", sp.diff(obj, c, 2).doit())
    b.obligation("convex_in_c", d2, "positive", description="the stationary point is the minimum")
    cstar = b.step("Stationary point c*", sp.solve(d1, c)[0])
    ratio = b.step("Σ_k g_k divided by c*", sp.simplify(sp.Sum(g[k], (k, 1, T)) / cstar))
    b.obligation("tied_is_T_times_projection", ratio - T, description="the tied gradient Σ_k g_k is T times the average")
    return b.done({"projection": cstar, "tied_over_projection": ratio})
