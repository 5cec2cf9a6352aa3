"""Backpropagation through time derived in SymPy (claim ``rnn.bptt``).

A scalar RNN (lecture notes 004): ``a_t = w h_{t-1} + u x_t + b``, ``h_t = σ(a_t)``, ``y_t = v h_t``,
loss ``L = Σ_t ½ (y_t − z_t)²``, for ``t = 1..T``; ``σ`` is an undefined function, so the
results hold for any differentiable activation. "Untied" means step ``t`` uses its own copy
``w_t`` of the recurrent weight.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory import sizes as _sz
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


# ------------------------------------------------------------------------------------------------
# symbolic number of steps (issue 34)

__all__ += ["derive_bptt_vector_step", "derive_bptt_general", "bptt_general_at"]

#: the parameters of the scalar RNN, in the order the cost-to-go functions take them after h
_PARAMS = ("w", "u", "b", "v")


def _cost_to_go(name: str):
    """An undefined differentiable function ``name(h, w, u, b, v)`` (the loss still to come as a
    function of the hidden state entering a step and of the later steps' parameters) whose partial
    derivatives are the named undefined functions ``name_h``, ``name_w``, …: no ``Subs`` with a
    Dummy variable in the derivatives (see :class:`dsigma`)."""
    parts = [sp.Function(f"{name}_{p}") for p in ("h",) + _PARAMS]

    def fdiff(self, argindex=1):
        return parts[argindex - 1](*self.args)

    return type(name, (sp.Function,), {"nargs": 5, "fdiff": fdiff}), parts


@lru_cache(maxsize=None)
def derive_bptt_vector_step() -> Derivation:
    """One step of BPTT for the vector RNN ``a_t = W h_{t−1} + U x_t + b``, ``h_t = σ(a_t)`` (entrywise),
    ``y_t = V h_t + c``, ``ℓ_t = ½‖y_t − z_t‖²`` in index form for symbolic widths ``d_h, d_x, d_y``
    (``IndexedBase`` entries, indices from 1): with ``δ_t = ∂R_t/∂a_t`` (``R_t`` the loss still to
    come from step t on),

    * ``δ_t[i] = σ'(a_t[i]) (Σ_o V_oi (y_t − z_t)_o + Σ_m W_mi δ_{t+1}[m])``, i.e.
      ``δ_t = σ'(a_t) ⊙ (Vᵀ(y_t − z_t) + Wᵀδ_{t+1})``: ``sp.diff`` through the sums, delta sums evaluated;
    * step t's own copies: ``∂/∂W_pq = δ_t[p] h_{t−1}[q]``, ``∂/∂U_pq = δ_t[p] x_t[q]``, ``∂/∂b_p = δ_t[p]``
      (through ``a_t``), ``∂ℓ_t/∂V_pq = (y_t − z_t)_p h_t[q]``, ``∂ℓ_t/∂c_p = (y_t − z_t)_p``.

    Typed in (SymPy has no function of a vector of symbolic length): the multivariate chain rule, as
    ``R_{t+1}`` entering through ``Σ_m δ_{t+1}[m] a_{t+1}[m]`` and ``R_t`` through ``Σ_i δ_t[i] a_t[i]``
    (their derivatives are the chain rule's), and, for tied weights, ``d/dθ L(θ, …, θ) = Σ_k ∂L/∂θ^{(k)}``
    entry by entry. ``result``: ``δ_t[i]``; facts ``sizes``, ``bases`` (the IndexedBases by name), ``i``.

    >>> derive_bptt_vector_step().result
    (Sum((c[o] - z[o] + Sum(sigma(a[j])*V[o, j], (j, 1, d_h)))*V[o, i], (o, 1, d_y)) + Sum(W[m, i]*delta_next[m], (m, 1, d_h)))*sigma'(a[i])
    """
    dh, dx, dy = sp.symbols("d_h d_x d_y", integer=True, positive=True)
    i, j, m, o, p, q = sp.symbols("i j m o p q", integer=True)
    names = ("W", "U", "b", "V", "c", "h_prev", "x", "z", "a", "delta_next", "delta")
    W, U, bv, V, c, hp, x, zz, a, dn, D = (sp.IndexedBase(n) for n in names)
    b_ = DerivationBuilder("One BPTT step for a vector RNN, symbolic widths d_h, d_x, d_y (index form)")
    b_.symbols(d_h="hidden width", d_x="input width", d_y="output width", W="recurrent weights (d_h×d_h)",
               U="input weights (d_h×d_x)", b="bias (d_h)", V="output weights (d_y×d_h)", c="output bias (d_y)",
               h_prev="h_{t−1}", a="pre-activation a_t", z="target z_t", delta_next="δ_{t+1} = ∂R_{t+1}/∂a_{t+1}",
               delta="δ_t = ∂R_t/∂a_t", sigma="the activation, entrywise (any differentiable function)")

    def y(oo):
        return sp.Sum(V[oo, j] * sigma(a[j]), (j, 1, dh)) + c[oo]

    ell = b_.define("ℓ_t = ½ Σ_o (y_t − z_t)_o², y_t[o] = Σ_j V_oj σ(a_t[j]) + c_o",
                    sp.Rational(1, 2) * sp.Sum((y(o) - zz[o]) ** 2, (o, 1, dy)))
    b_.assume("Chain rule: R_{t+1} depends on a_t only through a_{t+1}[m] = Σ_j W_mj σ(a_t[j]) + …, so ∂R_{t+1}/∂a_t "
              "is the derivative of Σ_m δ_{t+1}[m] a_{t+1}[m] with δ_{t+1} held fixed", key="chain rule")
    r_lin = sp.Sum(dn[m] * sp.Sum(W[m, j] * sigma(a[j]), (j, 1, dh)), (m, 1, dh))
    raw = b_.step("∂(ℓ_t + R_{t+1})/∂a_t[i] (SymPy through the sums)", sp.diff(ell + r_lin, a[i]))
    delta = b_.step("Delta sums evaluated for i ∈ [1, d_h]", _sz.eval_index_sums(_sz.pull_constants(sp.expand(raw)), {i: (1, dh)}))
    target = dsigma(a[i]) * (sp.Sum(V[o, i] * (y(o) - zz[o]), (o, 1, dy)) + sp.Sum(W[m, i] * dn[m], (m, 1, dh)))
    b_.obligation("delta_recursion", _sz.canonical_dummies(_sz.pull_constants(sp.expand(delta - target))),
                  description="δ_t = σ'(a_t) ⊙ (Vᵀ(y_t − z_t) + Wᵀ δ_{t+1})")
    b_.assume("Chain rule: step t's copies of W, U, b enter the loss only through a_t[i] = Σ_j W_ij h_{t−1}[j] + "
              "Σ_m U_im x_t[m] + b_i, so their gradients are those of Σ_i δ_t[i] a_t[i]", key="chain rule")
    a_t = sp.Sum(D[i] * (sp.Sum(W[i, j] * hp[j], (j, 1, dh)) + sp.Sum(U[i, m] * x[m], (m, 1, dx)) + bv[i]), (i, 1, dh))
    for name, var, rng, tgt in (("W", W[p, q], {p: (1, dh), q: (1, dh)}, D[p] * hp[q]),
                                ("U", U[p, q], {p: (1, dh), q: (1, dx)}, D[p] * x[q]),
                                ("b", bv[p], {p: (1, dh)}, D[p])):
        g = b_.step(f"∂/∂{name} of step t's copy", _sz.eval_index_sums(_sz.pull_constants(sp.expand(sp.diff(a_t, var))), rng))
        b_.obligation(f"own_gradient_{name}", sp.expand(g - tgt), description=f"∂L/∂{name}^(t) = {tgt}")
    for name, var, rng, tgt in (("V", V[p, q], {p: (1, dy), q: (1, dh)}, (y(p) - zz[p]) * sigma(a[q])),
                                ("c", c[p], {p: (1, dy)}, y(p) - zz[p])):
        g = b_.step(f"∂ℓ_t/∂{name} of step t's copy (SymPy through the sums)",
                    _sz.eval_index_sums(_sz.pull_constants(sp.expand(sp.diff(ell, var))), rng))
        b_.obligation(f"own_gradient_{name}", sp.expand(g - sp.expand(tgt)), description=f"∂L/∂{name}^(t) = (y_t − z_t) ⊗ …")
    b_.assume("Tied weights: d/dθ L(θ, …, θ) = Σ_k ∂L/∂θ^(k) at θ^(k) = θ, entry by entry (chain rule; derived in SymPy "
              "for the scalar RNN in derive_bptt_general)", key="tied-weight chain rule")
    b_.record(sizes=(dh, dx, dy), bases=dict(zip(names, (W, U, bv, V, c, hp, x, zz, a, dn, D))), i=i)
    return b_.done(delta, display=target)


@lru_cache(maxsize=None)
def derive_bptt_general() -> Derivation:
    """BPTT for the scalar RNN of this module for every number of steps ``T`` (a SymPy symbol),
    by induction over the steps, with σ any differentiable function.

    The loss still to come from step ``t`` on is ``R_t(h_{t−1}) = ℓ_t(σ(a_t)) + R_{t+1}(σ(a_t))``,
    ``a_t = w_t h_{t−1} + u_t x_t + b_t``, ``ℓ_t(h) = ½(v_t h − z_t)²``, ``R_{T+1} = 0``, ``L = R_1(h_0)``
    (the unrolling, typed in); ``R_{t+1}`` is an undefined function of ``h_t`` and of the later
    steps' parameters, so each step below holds for every ``t`` and every ``T``. Derived:

    * own-copy gradients: ``∂R_t/∂w_t = δ_t h_{t−1}``, ``∂/∂u_t = δ_t x_t``, ``∂/∂b_t = δ_t``,
      ``∂/∂v_t = (y_t − z_t) h_t`` with ``δ_t = ∂R_t/∂a_t`` (these are ``∂L/∂θ_t``: earlier losses and
      ``h_{t−1}`` do not depend on step t's copy);
    * recursion (two steps, ``R_{t+2}`` undefined): ``δ_t = σ'(a_t)(v(y_t − z_t) + w δ_{t+1})`` at tied
      weights; base ``δ_T = σ'(a_T) v (y_T − z_T)`` (``R_{T+1} = 0``);
    * tied chain rule, per parameter θ: ``d/dθ R_t = ∂R_t/∂θ_t + (∂_θ R_{t+1})(h_t)``;
    * summed over the steps for symbolic ``T`` (``Σ_{t=1}^{T}(G_t − G_{t+1})`` telescopes, SymPy):
      ``dL/dθ = Σ_{t=1}^{T} ∂L/∂θ_t``; for ``w``: ``Σ_t δ_t h_{t−1}``;
    * the vector step for symbolic widths (:func:`derive_bptt_vector_step`, inherited as ``vector_step.*``;
      the multivariate chain rule typed in there), which at ``d_h = d_x = d_y = 1`` is the scalar recursion.

    Cross-check: :func:`derive_bptt_scalar` at ``T = 2`` is inherited (``at_T2.*``) and the general
    result unrolled at ``T = 2`` (:func:`bptt_general_at`) equals its tied and untied gradients.
    ``result``: ``{"tied": Σ_t δ_t h_{t−1}, "recursion": δ_t in indexed form, "last": δ_T}``; facts
    ``T``, ``t``, ``delta``, ``h``, ``a``, ``z``, ``x``, ``symbols`` (w, u, b, v).

    >>> D = derive_bptt_general()
    >>> D.result["tied"]
    Sum(delta[t]*h[t - 1], (t, 1, T))
    >>> D.result["recursion"]
    (v*(v*h[t] - z[t]) + w*delta[t + 1])*sigma'(a[t])
    """
    T = sp.Symbol("T", integer=True, positive=True)
    t = sp.Symbol("t", integer=True, positive=True)
    w, u, bb, v = sp.symbols("w u b v", real=True)
    own = sp.symbols("w_t u_t b_t v_t", real=True)
    later = sp.symbols("w' u' b' v'", real=True)
    h, x1, z1, x2, z2, al = sp.symbols("h x_t z_t x_t+1 z_t+1 alpha", real=True)
    R1, R1p = _cost_to_go("R_next")
    R2, _ = _cost_to_go("R_after")
    b = DerivationBuilder("BPTT for a scalar RNN, every T (symbolic), by induction over the steps")
    b.symbols(T="number of steps (symbolic)", t="a step, 1 ≤ t ≤ T", h="h_{t−1}, the hidden state entering step t",
              w_t="step t's copy of w (likewise u_t, b_t, v_t)", **{"w'": "the later steps' (tied) copies of w, u, b, v"},
              R_next="R_{t+1}: loss still to come after step t, a function of h_t and the later copies",
              R_after="R_{t+2}", alpha="argument of σ (the pre-activation a_t)", delta_t="∂R_t/∂a_t",
              sigma="the activation (any differentiable function)")

    def ell(hh, zz, vv):
        return sp.Rational(1, 2) * (vv * hh - zz) ** 2

    b.define("ℓ_t(h) = ½(v_t h − z_t)², a_t = w_t h_{t−1} + u_t x_t + b_t, R_t(h_{t−1}) = ℓ_t(σ(a_t)) + R_{t+1}(σ(a_t)), "
             "R_{T+1} = 0, L = R_1(h_0); the losses before step t and h_{t−1} do not depend on the copies of steps ≥ t",
             r"R_t(h)=\tfrac12\big(v_t\sigma(a_t)-z_t\big)^2+R_{t+1}\big(\sigma(a_t)\big)")
    a_own = own[0] * h + own[1] * x1 + own[2]
    Rt = ell(sigma(a_own), z1, own[3]) + R1(sigma(a_own), *later)
    delta = b.step("δ_t = ∂/∂α [ℓ_t(σ(α)) + R_{t+1}(σ(α))] at α = a_t",
                   sp.diff(ell(sigma(al), z1, own[3]) + R1(sigma(al), *later), al).subs(al, a_own))
    h_t = sigma(a_own)
    for th, target in zip(own, (delta * h, delta * x1, delta, (own[3] * h_t - z1) * h_t)):
        g = b.step(f"∂R_t/∂{th} (= ∂L/∂{th}: nothing before step t uses it)", sp.diff(Rt, th))
        b.obligation(f"own_gradient_{th}", sp.expand(g - target),
                     description={own[0]: "∂L/∂w_t = δ_t h_{t−1}", own[1]: "∂L/∂u_t = δ_t x_t", own[2]: "∂L/∂b_t = δ_t",
                                  own[3]: "∂L/∂v_t = (y_t − z_t) h_t"}[th])
    tie = {**dict(zip(own, (w, u, bb, v))), **dict(zip(later, (w, u, bb, v)))}
    for i, th in enumerate((w, u, bb, v)):
        total = sp.diff(Rt.xreplace(tie), th)
        parts = (sp.diff(Rt, own[i]) + sp.diff(Rt, later[i])).xreplace(tie)
        rest = sp.diff(Rt, later[i]).xreplace(tie)
        b.step(f"Tied {th}: ∂R_t/∂{later[i]} is (∂_{th} R_{{t+1}})(h_t)", rest)
        b.obligation(f"tied_chain_rule_{th}", sp.expand(total - parts),
                     description=f"d/d{th} R_t = ∂R_t/∂{own[i]} + ∂R_t/∂{later[i]} at tied copies (chain rule)")
        b.obligation(f"later_part_is_next_cost_{th}", sp.expand(rest - R1p[i + 1](sigma(a_own.xreplace(tie)), w, u, bb, v)),
                     description=f"∂R_t/∂{later[i]} = (∂_{th} R_{{t+1}})(h_t): the induction hypothesis applies to it")
    # two steps: R_{t+1}(h') = ℓ_{t+1}(σ(a_{t+1})) + R_{t+2}(σ(a_{t+1})), tied copies
    a_t = a_own.xreplace(tie)
    a_next = w * sigma(a_t) + u * x2 + bb
    delta_t = b.step("Tied, R_{t+1} unrolled one more step (R_{t+2} undefined): δ_t",
                     sp.diff(ell(sigma(al), z1, v) + ell(sigma(w * sigma(al) + u * x2 + bb), z2, v)
                             + R2(sigma(w * sigma(al) + u * x2 + bb), w, u, bb, v), al).subs(al, a_t))
    delta_next = b.step("δ_{t+1} = ∂/∂α [ℓ_{t+1}(σ(α)) + R_{t+2}(σ(α))] at α = a_{t+1}",
                        sp.diff(ell(sigma(al), z2, v) + R2(sigma(al), w, u, bb, v), al).subs(al, a_next))
    A_, Dn = sp.symbols("A_t Delta_next")
    rec = dsigma(A_) * (v * (v * sigma(A_) - z1) + w * Dn)
    b.obligation("recursion", sp.expand(delta_t - rec.xreplace({A_: a_t, Dn: delta_next})),
                 description="δ_t = σ'(a_t)(v(y_t − z_t) + w δ_{t+1}) for every t < T")
    last = b.step("t = T: R_{T+1} = 0, δ_T", delta.xreplace(tie).replace(lambda e: isinstance(e, R1p[0]), lambda e: 0))
    b.obligation("recursion_base", sp.expand(last - dsigma(a_t) * v * (v * sigma(a_t) - z1)),
                 description="δ_T = σ'(a_T) v (y_T − z_T)")
    # the indexed forms and the sum over symbolic T
    dl, hb, ab, zb, xb = (sp.IndexedBase(nm) for nm in ("delta", "h", "a", "z", "x"))
    rec_ix = b.step("The recursion in indexed form (σ(a_t) = h_t)",
                    rec.xreplace({Dn: dl[t + 1], z1: zb[t]}).xreplace({sigma(A_): hb[t]}).xreplace({A_: ab[t]}))
    last_ix = b.step("δ_T in indexed form", (dsigma(A_) * v * (v * sigma(A_) - z1)).xreplace({z1: zb[T]}).xreplace(
        {sigma(A_): hb[T]}).xreplace({A_: ab[T]}))
    G, g = sp.IndexedBase("G"), sp.IndexedBase("g")
    b.assume("G_t = dR_t/dθ at h_{t−1} (tied θ), g_t = ∂L/∂θ_t: the tied chain rule reads G_t = g_t + G_{t+1}, and G_{T+1} = 0", key="tied chain rule recursion")
    tele = b.step("Σ_{t=1}^{T} (G_t − G_{t+1}) telescopes", sp.Sum(G[t] - G[t + 1], (t, 1, T)).doit())
    b.obligation("telescopes", tele - (G[1] - G[T + 1]), description="Σ_{t=1}^{T}(G_t − G_{t+1}) = G_1 − G_{T+1} for every T")
    b.step("G_{T+1} = 0: dL/dθ = G_1 =", tele.xreplace({G[T + 1]: 0}))
    total = b.step("= Σ_{t=1}^{T} (G_t − G_{t+1}), each term g_t by the tied chain rule",
                   sp.Sum(G[t] - G[t + 1], (t, 1, T)).xreplace({G[t] - G[t + 1]: g[t]}))
    tied = b.step("For θ = w: g_t = δ_t h_{t−1}", total.xreplace({g[t]: dl[t] * hb[t - 1]}))
    facts = {"T": T, "t": t, "delta": dl, "h": hb, "a": ab, "z": zb, "x": xb, "symbols": (w, u, bb, v)}
    result = {"tied": tied, "recursion": rec_ix, "last": last_ix}
    vec = derive_bptt_vector_step()
    b.inherit(vec, "vector_step")
    B_ = vec.facts["bases"]
    one = _sz.instantiate(vec.result.xreplace({vec.facts["i"]: 1}), dict.fromkeys(vec.facts["sizes"], 1)).xreplace(
        {B_["c"][1]: 0}).xreplace({sigma(B_["a"][1]): hb[t]}).xreplace(
        {B_["V"][1, 1]: v, B_["W"][1, 1]: w, B_["a"][1]: ab[t], B_["delta_next"][1]: dl[t + 1], B_["z"][1]: zb[t]})
    b.obligation("vector_step_at_width_1_is_scalar_recursion", sp.expand(one - rec_ix),
                 description="the vector step at d_h = d_x = d_y = 1 (no output bias) is the scalar recursion")
    fixed = derive_bptt_scalar(2)
    b.inherit(fixed, "at_T2")
    at = _bptt_at(result, facts, 2, fixed.facts["symbols"])
    b.obligation("general_at_T2_equals_fixed", [at["tied"] - fixed.result["tied"]]
                 + [a - f for a, f in zip(at["untied"], fixed.result["untied"])],
                 description="the general recursion unrolled at T = 2 gives derive_bptt_scalar(2)'s tied and untied gradients")
    for key, val in facts.items():
        b.fact(key, val)
    return b.done(result)


def _bptt_at(result, facts, T: int, symbols=None):
    """Unroll the general result at ``T`` steps with σ = tanh: ``{"tied", "untied"}`` in ``symbols``
    ``(w, u, b, v, h0, xs, zs)``."""
    w, u, bb, v = facts["symbols"]
    if symbols is None:
        h0 = sp.Symbol("h_0", real=True)
        symbols = (w, u, bb, v, h0, sp.symbols(f"x_1:{T + 1}", real=True), sp.symbols(f"z_1:{T + 1}", real=True))
    _, _, _, _, h0, xs, zs = symbols
    Ts, t, dl, hb, ab, zb = (facts[k] for k in ("T", "t", "delta", "h", "a", "z"))
    hv, av = {0: h0}, {}
    for k in range(1, T + 1):
        av[k] = w * hv[k - 1] + u * xs[k - 1] + bb
        hv[k] = sigma(av[k])
    state = {**{hb[k]: hv[k] for k in hv}, **{ab[k]: av[k] for k in av}, **{zb[k + 1]: zs[k] for k in range(T)}}
    dv = {T: result["last"].xreplace({Ts: T}).xreplace(state)}
    for k in range(T - 1, 0, -1):
        dv[k] = result["recursion"].xreplace({t: k}).xreplace({**state, dl[k + 1]: dv[k + 1]})
    ap = sp.Symbol("alpha")
    tanh = {sigma: sp.Lambda(ap, sp.tanh(ap)), dsigma: sp.Lambda(ap, sp.diff(sp.tanh(ap), ap))}
    terms = [result["tied"].function.xreplace({t: k}).xreplace({**state, dl[k]: dv[k]}) for k in range(1, T + 1)]
    untied = tuple(e.subs(tanh).doit() for e in terms)
    tied = _sz.instantiate(result["tied"], {Ts: T}).xreplace({**state, **{dl[k]: dv[k] for k in dv}}).subs(tanh).doit()
    return {"tied": tied, "untied": untied, "symbols": symbols}


@lru_cache(maxsize=None)
def bptt_general_at(T: int):
    """:func:`derive_bptt_general`'s gradient unrolled at ``T`` steps with σ = tanh, in the format of
    :func:`derive_bptt_scalar`'s result: ``{"tied", "untied", "symbols"}`` with ``symbols`` =
    ``(w, u, b, v, h0, xs, zs)``.

    >>> r = bptt_general_at(1); r["tied"]
    h_0*v*(1 - tanh(b + h_0*w + u*x_1)**2)*(v*tanh(b + h_0*w + u*x_1) - z_1)
    """
    D = derive_bptt_general()
    return _bptt_at(D.result, D.facts, T)
