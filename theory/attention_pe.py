"""The sinusoidal positional encoding derived in SymPy (claim ``attn.sinusoidal_pe``). Part of
:mod:`theory.attention`."""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from theory.derivation import Derivation, DerivationBuilder
from theory.attention_derive import _expand_angles


# --------------------------------------------------------------------------------------------
# attn.sinusoidal_pe


@lru_cache(maxsize=None)
def derive_sinusoidal_pe() -> Derivation:
    """Derive with the angle-addition identities that the sinusoidal encoding shifted by k is a
    fixed rotation of the unshifted one, pair by pair.

    Pair i of ``PE(p)`` is ``(sin pω_i, cos pω_i)`` with ``ω_i = base^{−2i/D}`` (Vaswani et al.,
    lecture notes 003 §3). ``result`` is the 2×2 matrix ``R(kω)`` with
    ``[sin (p+k)ω, cos (p+k)ω] = [sin pω, cos pω] · R(kω)`` (row vectors); it does not contain p.
    ``facts``: ``omega`` (ω_i in symbols i, D, base), ``orthogonality`` (RᵀR − I, zero),
    ``composition`` (R(jω)R(kω) − R((j+k)ω), zero), ``symbols``.

    >>> d = derive_sinusoidal_pe()
    >>> d.result
    Matrix([
    [cos(k*omega), -sin(k*omega)],
    [sin(k*omega),  cos(k*omega)]])
    >>> d.facts["depends_on_p"]
    False
    """
    b = DerivationBuilder("Sinusoidal positional encoding: shift by k is a block rotation")
    b.symbols(p="position", k="shift", j="a second shift", omega="frequency ω_i of pair i", i="pair index",
              D="model width", base="the base (10000 in Vaswani et al.)", s="sin(pω)", c="cos(pω)")
    p, k, j = sp.symbols("p k j", real=True)
    w = sp.Symbol("omega", positive=True)
    i, D, base = sp.symbols("i D base", positive=True)
    omega = base ** (-2 * i / D)
    b.define("Frequencies ω_i = base^(−2i/D); PE(p)_2i = sin(pω_i), PE(p)_2i+1 = cos(pω_i)", omega)
    circle = sp.sin(p * w) ** 2 + sp.cos(p * w) ** 2
    b.step("Each pair lies on the unit circle, sin²(pω) + cos²(pω) =", sp.trigsimp(circle))
    b.obligation("pair_on_unit_circle", circle - 1,
                 description="sin² + cos² = 1, so every entry of PE(p) lies in [−1, 1] (the closed cube; PE(0) has entries 0 and 1)")
    s_sh = _expand_angles(sp.sin((p + k) * w))
    c_sh = _expand_angles(sp.cos((p + k) * w))
    b.step("sin((p+k)ω) by angle addition", s_sh)
    b.step("cos((p+k)ω) by angle addition", c_sh)
    s, c = sp.symbols("s c", real=True)
    lin = [e.subs({sp.sin(p * w): s, sp.cos(p * w): c}) for e in (s_sh, c_sh)]
    R = sp.Matrix([[sp.diff(lin[col], var) for col in range(2)] for var in (s, c)])
    b.step("Both are linear in (s, c) = (sin pω, cos pω); coefficient matrix R with [s', c'] = [s, c] R", R)
    b.obligation("linearity_residual", sp.Matrix([[s, c]]) * R - sp.Matrix([lin]),
                 description="[s, c]·R reproduces both shifted entries")
    resid = sp.simplify(sp.Matrix([[s, c]]) * R - sp.Matrix([lin]))
    b.fact("linearity_residual", resid)
    b.fact("depends_on_p", p in R.free_symbols)
    b.step("∂R/∂p (R does not depend on the position)", R.diff(p))
    b.obligation("independent_of_position", R.diff(p))
    b.obligation("orthogonality", R.T * R - sp.eye(2), description="RᵀR = I")
    b.fact("orthogonality", sp.simplify(R.T * R - sp.eye(2)))
    b.step("RᵀR − I", b.facts["orthogonality"])
    Rj = R.subs(k, j)
    Rjk = R.subs(k, j + k)
    b.obligation("composition", Rj * R - Rjk.applyfunc(_expand_angles), description="R(jω) R(kω) = R((j+k)ω)")
    b.fact("composition", sp.simplify(Rj * R - Rjk.applyfunc(_expand_angles)))
    b.step("R(jω) R(kω) − R((j+k)ω)", b.facts["composition"])
    b.fact("omega", omega)
    b.fact("symbols", {"k": k, "omega": w, "i": i, "D": D, "base": base, "p": p})
    return b.done(R)
