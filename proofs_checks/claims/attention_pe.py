"""Group A, continued: sinusoidal positional encodings and their shift matrices (lecture notes 000, 001,
003, 004). Binds theory/attention.py and numerics/attention.py to checks, tolerances and mutants."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from numerics import attention as na
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest
from theory import attention as ta
from proofs_checks.claims._attention_common import Resolved, _maxabs


# --------------------------------------------------------------------------------------------
# attn.sinusoidal_pe
# form: {"pe": (positions, D) -> (P, D), "shift": (k, D) -> M_k with PE(p + k) = PE(p) M_k}


def _pe_symbolic(form, ctx) -> CheckResult:
    """The form's encoding and shift matrix vs the derived definition and rotation R(kω_i)."""
    der = ta.derive_sinusoidal_pe()
    sy = der.facts["symbols"]
    R = sp.lambdify([sy["k"], sy["omega"]], der.result, "numpy")
    om = sp.lambdify([sy["i"], sy["D"], sy["base"]], der.facts["omega"], "numpy")
    res = Resolved()
    pos = np.arange(0.0, 64.0)
    for D in (2, 4, 8, 16):
        w = np.array([om(i, D, 10000.0) for i in range(D // 2)])
        ref_pe = np.empty((len(pos), D))
        ref_pe[:, 0::2], ref_pe[:, 1::2] = np.sin(np.outer(pos, w)), np.cos(np.outer(pos, w))
        with np.errstate(all="ignore"):
            res.pair("pe", form["pe"](pos, D), ref_pe)
        for k in (1, 3, 50):
            ref = np.zeros((D, D))
            for i in range(D // 2):
                ref[2 * i:2 * i + 2, 2 * i:2 * i + 2] = np.asarray(R(k, w[i]), dtype=float)
            with np.errstate(all="ignore"):
                res.pair("shift", form["shift"](k, D), ref)
    return res.result(16 * 64 * EPS, "rounding of sin/cos at angles ≤ 64 (16·64·eps)",
                      sizes={"D": [2, 4, 8, 16], "k": [1, 3, 50], "positions": "0..63"},
                      details={"derived_rotation": str(der.result)})


def _pe_numeric(form, ctx) -> CheckResult:
    """Range [-1, 1]; PE(p + k) = PE(p) M_k for p up to 10⁴ and several k; M_k orthogonal;
    M_j M_k = M_{j+k}; the encoding itself against an independent mpmath construction (30 digits)."""
    P = ctx.size(200, 2000, 20000)
    pos = np.r_[np.arange(P, dtype=float), 1e4 + np.arange(8.0)]
    ks = (1, 2, 17, 100)
    R = Resolved()
    for D in (4, 16, 64):
        with np.errstate(all="ignore"):
            pe = form["pe"](pos, D)
            R.prop(f"range_excess_D{D}", largest(0.0, _maxabs(pe) - 1.0) if np.all(np.isfinite(pe)) else math.inf,
                   "amount by which |PE| exceeds 1")
            for k in ks:
                Mk = form["shift"](k, D)
                R.pair(f"shift_D{D}_k{k}", pe @ Mk, form["pe"](pos + k, D))
                R.pair(f"orthogonal_D{D}_k{k}", Mk @ Mk.T, np.eye(D))
            R.pair(f"compose_D{D}", form["shift"](2, D) @ form["shift"](17, D), form["shift"](19, D))
    # an independent construction: mpmath at 30 digits, ω_i = 10000^{-2i/D} by mpmath.power, for a
    # few positions (not the SymPy derivation, not the form's arithmetic)
    import mpmath

    with mpmath.workdps(30):
        for D in (4, 16):
            probe = [0, 1, 7, 100, 9999]
            ref = np.array([[float(mpmath.sin(p * mpmath.power(10000, mpmath.mpf(-2 * (j // 2)) / D))) if j % 2 == 0 else
                             float(mpmath.cos(p * mpmath.power(10000, mpmath.mpf(-2 * (j // 2)) / D))) for j in range(D)]
                            for p in probe])
            with np.errstate(all="ignore"):
                R.pair(f"vs_mpmath_D{D}", form["pe"](np.asarray(probe, dtype=float), D), ref)
    pmax = float(pos.max() + largest(ks))
    return R.result(16 * pmax * EPS, f"angle rounding grows with the position: 16·(max position {pmax:g})·eps",
                    sizes={"positions": len(pos), "max position": pmax, "D": [4, 16, 64], "k": list(ks)})


def _pe_sin_cos_swapped(positions, D, base=10000.0):
    pe = na.sinusoidal_pe(positions, D, base)
    out = pe.copy()
    out[..., 0::2], out[..., 1::2] = pe[..., 1::2], pe[..., 0::2]
    return out


def _pe_sum_amplitude(positions, D, base=10000.0):
    pe = na.sinusoidal_pe(positions, D, base)
    out = pe.copy()
    out[..., 0::2] = pe[..., 0::2] + pe[..., 1::2]
    return out


_PE_FORM = {"pe": na.sinusoidal_pe, "shift": na.pe_shift_matrix}

def _pe_cx_odd(ctx) -> Counterexample:
    """Without D even: at D = 3 the last sine has no cosine partner and no linear map sends PE(p) to PE(p + 1)."""
    D, pos = 3, np.arange(0.0, 4096.0)
    A, B = na.sinusoidal_pe_any_width(pos, D), na.sinusoidal_pe_any_width(pos + 1, D)
    M = np.linalg.lstsq(A, B, rcond=None)[0]
    err = _maxabs(A @ M - B)
    return exceeds({"D": D, "k": 1, "positions": "0..4095"}, "shift_rotation",
                   f"the best linear map M (least squares) leaves max |PE(p) M − PE(p + 1)| = {err:.3g}",
                   error=err, tolerance=1e-9,
                   justification="at even D the same fit reaches rounding level (≈ 1e-14 at D = 4 on these positions); "
                                 "1e-9 leaves five orders of magnitude for the conditioning of the fit")


declare(
    id="attn.sinusoidal_pe",
    title="Sinusoidal encodings lie in [−1, 1]^D and, for even D, a shift by k is a fixed block rotation",
    hypotheses=(
        Hypothesis("d_even", r"D\ \text{even}", "sin/cos pairs fill every coordinate", counterexample=_pe_cx_odd),
        setting("setting", r"p,k\in\mathbb R,\ \omega_i=b^{-2i/D},\ b>0\ (b=10000)",
                "it defines the encoding; the rotation holds for any real "
                "frequencies ω_i, the base only fixes them"),
    ),
    clauses=(
        Clause("in_closed_cube", r"PE(p)_{2i}=\sin p\omega_i,\ PE(p)_{2i+1}=\cos p\omega_i:\ PE(p)\in[-1,1]^D\ \text{(closed: }PE(0)\text{ has entries 0 and 1)}",
               "derived", "every D, p (sin² + cos² = 1 for symbolic p, ω)", ("derivation", "shift_range_numeric"),
               also=(("checked", "D ∈ {4, 16, 64}, positions 0..199 (quick) / 0..1999 / 0..19999 (full) and 10⁴..10⁴+7"),)),
        Clause("shift_rotation", r"PE(p+k)=PE(p)\,\operatorname{diag}_i\begin{bmatrix}\cos k\omega_i&-\sin k\omega_i\\\sin k\omega_i&\cos k\omega_i\end{bmatrix}\ \text{(orthogonal, }M_jM_k=M_{j+k})",
               "derived", "every even D, real p, k (one pair with symbolic p, k, ω by angle addition; the pairs are independent)",
               ("derivation", "rotation_vs_sympy", "shift_range_numeric"),
               also=(("checked", "D ∈ {2, 4, 8, 16}, k ∈ {1, 3, 50}, p ≤ 63 (vs the derivation); D ∈ {4, 16, 64}, "
                      "k ∈ {1, 2, 17, 100}, positions as above; mpmath at D ∈ {4, 16}"),)),
    ),
    source="lecture notes 003 §3 (sinusoidal encoding, r_n ∈ (−1, 1)^D); Vaswani et al. (2017) §3.5",
    kind="theorem",
    form=_PE_FORM,
    derivation=ta.derive_sinusoidal_pe,
    notes="Lecture notes 003 writes the open cube (−1, 1)^D; sin 0 = 0 and cos 0 = 1 put PE(0) on the boundary, so the closed cube is right.",
    checks=(
        Check("rotation_vs_sympy", "symbolic", _pe_symbolic, "form vs the rotation derived by angle addition"),
        Check("shift_range_numeric", "numeric", _pe_numeric, "range, shift identity up to position 10⁴, orthogonality, composition"),
    ),
    mutants=(
        Mutant("shift_transposed", "sign flip", "rotation by −kω (the transposed blocks)", dict(_PE_FORM, shift=lambda k, D, base=10000.0: na.pe_shift_matrix(k, D, base).T)),
        Mutant("shift_wrong_frequencies", "wrong constant", "shift built with ω_i = 10000^{−i/D}",
               dict(_PE_FORM, shift=lambda k, D, base=10000.0: na.pe_shift_matrix(k, 2 * D, base)[:D, :D])),
        Mutant("pe_sin_cos_swapped", "swapped index", "cos in the even and sin in the odd slots (the shift matrix no longer matches)",
               dict(_PE_FORM, pe=_pe_sin_cos_swapped)),
        Mutant("pe_amplitude", "extra term", "sin + cos in the even slots (leaves [−1, 1])", dict(_PE_FORM, pe=_pe_sum_amplitude)),
    ),
)
