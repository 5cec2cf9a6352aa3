"""``tverify check lyapunov --f "..." --V "..."``: certify a candidate Lyapunov function of your
polynomial system by sums of squares, re-checked exactly; refute it only with an exact counterexample.

Two SOS programs (cvxpy; Clarabel, SCS as the fallback) look for Gram matrices ``G_1, G_2 ⪰ 0``
with ``V − εp = z(x)ᵀG_1z(x)`` and ``−∇V·f − εq = w(x)ᵀG_2w(x)``. The margins ``p``, ``q`` are
``Σ_i x_i^{2k_i}`` (positive definite, radially unbounded) with exponents read off the polynomial
they sit under (:func:`numerics.lyapunov_search.margin_candidates`: the even pure powers of ``V`` and
of ``−V̇``, the vertices of their Newton polytopes on the axes, lowest first, then highest, then
``Σ x_i^{2k}`` at the lowest even degree); each program tries them until one certifies. With
``--region R`` each program carries an S-procedure multiplier ``s(x)(R² − ‖x‖²)`` (``s`` SOS): a
local certificate on the ball ``‖x‖ ≤ R``. Each Gram matrix found is rounded to rationals,
projected exactly onto the coefficient equations and tested for PSD exactly (pivoted LDLᵀ); SymPy
expands the Gram form and compares it with the polynomial. A certificate proves ``V ≥ εp`` and
``V̇ ≤ −εq`` (on the ball with ``--region``): the origin is globally (locally) asymptotically stable.

Verdicts (see :mod:`proofs_checks.sanity._verdict`) and exit codes:

* 0 ``ok``: certified (both programs certified by the exact re-check);
* 1 ``mismatch``: refuted by an exact counterexample shown in the output: a rational point ``x ≠ 0``
  (inside the ball with ``--region``) where ``V(x) ≤ 0`` or ``∇V·f(x) ≥ 0``, evaluated in exact
  rational arithmetic (:func:`numerics.lyapunov_search.exact_counterexample`);
* 3 ``inconclusive``: no certificate and no counterexample: a failed SOS search refutes nothing
  (the polynomial may be nonnegative without being SOS at these margins); the output lists every
  margin tried and what might decide it (a local ``--region``, a smaller ``--eps``, another ``V``);
* 2 bad input, one line on stderr: a parse error, a name that is not a variable, a function call,
  a non-polynomial, ``f``'s components not matching the variables, ``f(0) ≠ 0``, ``V(0) ≠ 0`` (a
  Lyapunov function vanishes at the equilibrium: never certified), ``--eps`` or ``--region ≤ 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import click

from proofs_checks import guards
from proofs_checks.sanity._common import (SanityResult, check_json_target, check_options, check_report_dir, finish,
                                          report_option)
from proofs_checks.sanity._verdict import Verdict
from theory.validation import InputError

__all__ = ["command", "parse_eps", "parse_region", "estimate_resources", "run_lyapunov"]





def _short_number(x) -> str:
    """An exact rational as typed when short (``1/1000``), else in scientific notation (``1e-300``, not
    a 300-digit fraction)."""
    text = str(x)
    if len(text) <= 24:
        return text
    import sympy as sp

    # SymPy's own decimal (arbitrary exponent): float() of 1e-400 is 0, which printed "ε = 0" for a positive ε
    import mpmath

    short = mpmath.nstr(sp.Float(x, 17)._to_mpmath(60), 6).replace(".0e", "e")  # 1e-400 as typed, never "0"
    return f"{short} (exactly {text[:12]}…, {len(text)} characters)"


def _rational(text: str, option: str):
    """``text`` (a decimal or a fraction, no sign) as an exact SymPy rational; one line naming ``option``."""
    import re

    import sympy as sp

    t = text.strip()
    if not re.fullmatch(r"[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+/[0-9]+", t):
        raise InputError(f"{option}: not a positive number: {text!r}")
    try:
        return sp.Rational(t)
    except (TypeError, ValueError, ZeroDivisionError):
        raise InputError(f"{option}: not a number: {text!r}") from None


def parse_eps(text: str):
    """``--eps`` as an exact rational (a decimal or a fraction), strictly between 0 and 1.

    >>> parse_eps("0.001")
    1/1000
    >>> parse_eps("0")
    Traceback (most recent call last):
    ...
    theory.validation.InputError: --eps must be in (0, 1), got 0
    """
    e = _rational(text, "--eps")
    if not (0 < e < 1):
        raise InputError(f"--eps must be in (0, 1), got {e}")
    return e


def estimate_resources(n: int, degree: int) -> guards.Estimate:
    """Memory and time of the two SOS programs: the Gram matrix of a degree-``degree`` polynomial
    in ``n`` variables has ``N = C(n + d/2, d/2)`` rows; the conic solver's KKT system holds about
    ``N⁴/4`` nonzeros in the worst case (the PSD cone's dense block), and the exact re-check
    expands ``N²`` products.

    >>> estimate_resources(2, 4).bytes < 2**20
    True
    """
    h = max(1, degree // 2)
    N = math.comb(n + h, h)
    parts = {f"conic KKT system (Gram size {N})": 8.0 * 4 * (N * N / 2) ** 2 / 4 + 1e6}
    seconds = 0.2 + 1e-7 * N**4 + 1e-4 * N * N
    return guards.Estimate(sum(parts.values()), seconds, parts)


def _fmt(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.6g}"


def parse_region(text: str | None):
    """``--region R``: the radius of the ball of a local certificate, an exact positive rational.

    >>> parse_region("1/2")
    1/2
    """
    if text is None:
        return None
    r = _rational(text, "--region")
    if not (0 < r <= 10**6):
        raise InputError(f"--region must be in (0, 1e6], got {_short_number(r)}")
    return r


@dataclass(frozen=True)
class LyapunovRequest:
    """The validated inputs of the check (one line for each bad one, before any SOS program is built):
    ε, the region's radius (None: global), the parsed system and candidate, ∇V·f, the SOS degree, the
    resource estimate."""
    eps: object
    region: object
    cand: object
    vdot: object
    degree: int
    est: guards.Estimate


def lyapunov_request(f_text: str, V_text: str, vars_text: str | None, *, eps_text: str, region_text: str | None,
                     max_memory=None) -> LyapunovRequest:
    import sympy as sp

    from theory import lyapunov as tl

    eps = parse_eps(eps_text)
    region = parse_region(region_text)
    cand = tl.parse_system(f_text, V_text, vars_text)
    V0 = cand.V.subs({v: 0 for v in cand.vars})
    if V0 != 0:
        raise InputError(f"--V: V(0) = {V0} ≠ 0; a Lyapunov function vanishes at the equilibrium "
                         f"(use V − ({V0}))")
    vdot = cand.vdot()
    degree = max(sp.Poly(cand.V, *cand.vars).total_degree(), sp.Poly(vdot, *cand.vars).total_degree() if vdot != 0 else 0)
    if region is not None:
        degree = max(degree + degree % 2, 4)
    est = estimate_resources(len(cand.vars), degree)
    guards.check_memory(est, max_memory, hint="lower the degree of V or f")
    return LyapunovRequest(eps, region, cand, vdot, degree, est)


def _programs(search: dict, label: dict, lines: list, numbers: dict) -> dict:
    """The SOS programs tried (a line each, appended to ``lines``), whether each was certified (into
    ``numbers``), and their JSON (the one used, or the last tried, with every attempt)."""
    progs = {}
    for key in ("V", "decay"):
        atts = search[key]
        for a in atts:
            line = f"{label[key]} with {'p' if key == 'V' else 'q'} = {a.margin}: {a.status}"
            if a.solver:
                line += f" ({a.solver})"
            if a.exact_residual is not None:
                line += (f"; exact re-check: residual {a.exact_residual}, exactly PSD: {'yes' if a.exact_psd else 'no'}"
                         f", smallest Gram eigenvalue {_fmt(a.min_eig)}")
            elif a.message and a.status == "structurally infeasible":
                line += f" ({a.message})"
            lines.append(line)
        used = search["used"][key]
        last = used or (atts[-1] if atts else None)
        progs[key] = {**(last.to_json() if last else {}), "attempts": [a.to_json() for a in atts]}
        numbers[f"certified_{key}"] = used is not None
    return progs


def run_lyapunov(f_text: str, V_text: str, vars_text: str | None = None, *, eps_text: str = "0.001",
                 region_text: str | None = None, seed: int = 0, mode: str = "default", max_memory=None,
                 progress: bool = False) -> SanityResult:
    """The check of the module docstring as a :class:`SanityResult` (``doc["certificate"]`` or
    ``doc["counterexample"]``). Bad input raises :class:`InputError` / :class:`UsageError` (one line)."""
    import numpy as np

    req = lyapunov_request(f_text, V_text, vars_text, eps_text=eps_text, region_text=region_text, max_memory=max_memory)
    eps, region, cand, vdot, degree, est = req.eps, req.region, req.cand, req.vdot, req.degree, req.est
    prog = guards.Progress("check lyapunov", enabled=progress, estimate=est.seconds)
    if est.seconds > 10:
        prog.note(f"estimated ≈ {guards.fmt_seconds(est.seconds)} and ≈ {guards.fmt_bytes(est.bytes)} of memory for "
                  f"SOS programs in {len(cand.vars)} variables at degree {degree}")
    from numerics import lyapunov_search as ls

    names = ", ".join(map(str, cand.vars))
    where = "globally" if region is None else f"on the ball ‖x‖ ≤ {_short_number(region)}"
    doc: dict = {"check": "lyapunov", "vars": [str(v) for v in cand.vars], "f": [str(e) for e in cand.f],
                 "V": str(cand.V), "Vdot": str(vdot), "eps": str(eps), "region": None if region is None else str(region),
                 "inputs": {"f": f_text, "V": V_text, "vars": vars_text, "eps": eps_text, "region": region_text,
                            "seed": seed, "mode": mode}, "resources": est.to_json()}
    lines = [f"system x' = f(x) in ({names}): f = ({', '.join(map(str, cand.f))})",
             f"candidate V = {cand.V}", f"∇V·f = {vdot}",
             f"certificate sought {where}, ε = {_short_number(eps)}" + ("" if region is None else
                                                          "; S-procedure multiplier s(x)·(R² − ‖x‖²), s SOS")]
    prog.phase("solving the SOS programs", 0, 1).sub(0)
    search = ls.search_certificate(cand, eps, region)
    prog.done()
    label = {"V": "V − εp", "decay": "−∇V·f − εq"}
    numbers = {"eps": float(eps), "region": None if region is None else float(region)}
    doc["programs"] = _programs(search, label, lines, numbers)
    doc["certified"] = bool(search["certified"])
    figures = {}
    if len(cand.vars) >= 1:
        figures["level_sets"] = lambda: _figure(cand, region, doc.get("counterexample"))
    if search["certified"]:
        uV, uD = search["used"]["V"], search["used"]["decay"]
        doc["certificate"] = {"p": str(uV.margin), "q": str(uD.margin), "eps": str(eps),
                              "region": None if region is None else str(region),
                              "V_minus_eps_p": uV.to_json(), "decay": uD.to_json()}
        doc["counterexample"] = None
        crit = (f"V − εp with p = {uV.margin} and −∇V·f − εq with q = {uD.margin} (ε = {_short_number(eps)}) are sums of squares"
                + ("" if region is None else f" plus s(x)(R² − ‖x‖²) with SOS multipliers s, R = {_short_number(region)}")
                + f"; smallest Gram eigenvalues {_fmt(uV.min_eig)} (V − εp) and {_fmt(uD.min_eig)} (−∇V·f − εq)"
                + f"; exact re-check residuals {uV.exact_residual} and {uD.exact_residual} after rounding to 2^-40 and "
                  "exact projection, both rational Gram matrices exactly PSD (pivoted LDLᵀ)")
        summ = ("certified: V is a global Lyapunov function (V ≥ εp, ∇V·f ≤ −εq; p, q positive definite and radially "
                "unbounded): the origin is globally asymptotically stable" if region is None else
                f"certified on the ball ‖x‖ ≤ {_short_number(region)}: V ≥ εp and ∇V·f ≤ −εq there: the origin is locally "
                "asymptotically stable (sublevel sets of V inside the ball are invariant)")
        v = Verdict("ok", summ, crit, numbers)
    else:
        ce = ls.exact_counterexample(cand, np.random.default_rng(seed),
                                     {"quick": 100, "default": 400, "full": 2000}[mode], region=region)
        doc["certificate"] = None
        tried = "; ".join(f"{label[k]}: " + ", ".join(f"{'p' if k == 'V' else 'q'} = {a.margin} → {a.status}"
                                                        + (" (exact re-check failed)" if a.exact_residual is not None
                                                           and not a.certified else "")
                                                        for a in search[k])
                          for k in ("V", "decay") if search["used"][k] is None)
        if ce is not None:
            doc["counterexample"] = ce.to_json()
            lines.append(f"counterexample: {ce.text(cand.vars)}")
            numbers["counterexample"] = ce.to_json()
            what = ("V is not positive definite" if ce.condition == "V > 0" else
                    "∇V·f is not negative off the origin")
            v = Verdict("mismatch", f"refuted: {what}: {ce.text(cand.vars)}",
                        f"an exact counterexample: a rational point x ≠ 0{'' if region is None else ' in the ball'} "
                        f"where the condition {ce.condition} fails, evaluated in exact rational arithmetic; "
                        f"the SOS search had found no certificate ({tried})", numbers)
        else:
            doc["counterexample"] = None
            reasons = [f"no SOS certificate at the margins tried ({tried}), and no point x ≠ 0 with V(x) ≤ 0 or "
                       "∇V·f(x) ≥ 0 was found: a failed SOS search refutes nothing"]
            sugg = ("a local certificate on a ball (--region R), a smaller --eps, or a V of higher degree (a "
                    "nonnegative polynomial need not be a sum of squares)" if region is None else
                    "a smaller --region or --eps, or a V of higher degree")
            v = Verdict("inconclusive", "cannot decide: no certificate and no counterexample found", tried, numbers,
                        reasons, sugg)
    return SanityResult("lyapunov", doc, v, [], lines, figures)


def _figure(cand, region, ce=None):
    """Level sets of V in the plane of the first two variables (others 0) with the sign of ∇V·f; a
    counterexample ``ce`` (its JSON) is marked, the window widened to hold it and, in more than two
    variables, the plane taken through it."""
    import matplotlib.pyplot as plt
    import numpy as np

    from numerics.lyapunov import lambdify_candidate

    _, Vf, Df = lambdify_candidate(cand)
    n = len(cand.vars)
    pt = None if not ce else np.asarray(ce["point_float"], dtype=float)
    R = 2.0 if region is None else float(region)
    if pt is not None and region is None:
        R = max(R, 1.25 * float(np.abs(pt[:2]).max()))
    g = np.linspace(-R, R, 201)
    A, B = np.meshgrid(g, g)
    X = np.zeros(A.shape + (n,))
    if pt is not None and n > 2:
        X[..., 2:] = pt[2:]
    X[..., 0] = A
    if n > 1:
        X[..., 1] = B
    with np.errstate(all="ignore"):
        Vv, Dv = Vf(X.reshape(-1, n)).reshape(A.shape), Df(X.reshape(-1, n)).reshape(A.shape)
    fig, ax = plt.subplots(figsize=(5, 4.5))
    ax.contourf(A, B, np.sign(Dv), levels=[-1.5, -0.5, 0.5, 1.5], colors=["#cfe8cf", "#eeeeee", "#f4c7c3"], alpha=0.8)
    cs = ax.contour(A, B, Vv, levels=12, colors="k", linewidths=0.7)
    ax.clabel(cs, fontsize=6)
    if pt is not None:
        ax.plot([pt[0]], [pt[1] if n > 1 else 0.0], "rx", ms=9, mew=2,
                label=f"counterexample: {'V ≤ 0' if ce['condition'] == 'V > 0' else '∇V·f ≥ 0'}")
        ax.legend(fontsize=7, loc="upper right")
    if region is not None and n > 1:
        ax.add_patch(plt.Circle((0, 0), float(region), fill=False, ls="--", lw=0.8, color="0.3"))
    ax.set_xlabel(str(cand.vars[0]))
    ax.set_ylabel(str(cand.vars[1]) if n > 1 else "(one variable)")
    others = "" if n <= 2 else (" (other variables 0)" if pt is None else " (other variables at the counterexample)")
    ax.set_title("level sets of V; green ∇V·f < 0, red ∇V·f > 0" + others, fontsize=8)
    return fig


@click.command("lyapunov")
@click.option("--f", "f_text", required=True, metavar="EXPR,EXPR,...",
              help='The vector field, one polynomial per variable, separated by commas, e.g. "-x**3 - y, x - y**3". '
                   "Allowed: numbers, the variables, + - * / ** (whole exponents) and parentheses.")
@click.option("--V", "V_text", required=True, metavar="EXPR", help='The candidate Lyapunov function, e.g. "x**2 + y**2".')
@click.option("--vars", "vars_text", default=None, metavar="x,y,...",
              help="The state variables in the order of --f's components (default: the names used, in natural order: x1, x2, x10).")
@click.option("--eps", "eps_text", default="0.001", show_default=True, metavar="E",
              help="The margin ε in V − εp and −∇V·f − εq (a decimal or a fraction in (0, 1)).")
@click.option("--region", "region_text", default=None, metavar="R",
              help="Certify locally on the ball ‖x‖ ≤ R (S-procedure) instead of globally.")
@report_option
@check_options
def command(f_text, V_text, vars_text, eps_text, region_text, report_dir, seed, device, mode, json_path, max_memory,
            no_progress):
    """Certify that V is a Lyapunov function of x' = f(x) by sums of squares (cvxpy), re-checked
    exactly in SymPy: certified (exit 0), refuted by an exact counterexample (1: a rational point
    where V ≤ 0 or ∇V·f ≥ 0 off the origin), inconclusive (3: no certificate, no counterexample;
    a failed SOS search refutes nothing). V(0) ≠ 0 is refused (exit 2). The SOS programs are
    deterministic and run on CPU; --seed and --quick/--full only set the random search for a
    counterexample.

    \b
    Examples:
      tverify check lyapunov --f "-x**3 - y, x - y**3" --V "x**2 + y**2"
      tverify check lyapunov --f "-x + 4*y, -x - y**3" --V "x**2 + 4*y**2"
      tverify check lyapunov --f "-x + x**3, -y" --V "x**2 + y**2" --region 1/2
      tverify check lyapunov --f "-x + y, -x - y - z, -z" --V "x**2 + y**2 + z**2" --vars x,y,z
      tverify check lyapunov --f "y, -x - y" --V "3*x**2/2 + x*y + y**2" --eps 1/100 --json out.json
    """
    check_report_dir(report_dir, json_path)  # first: a --json inside --report is refused for that reason
    check_json_target(json_path)
    from proofs_checks.options import require_cpu_only

    require_cpu_only(device, "check lyapunov (SOS programs with cvxpy)")
    result = run_lyapunov(f_text, V_text, vars_text, eps_text=eps_text, region_text=region_text, seed=seed, mode=mode,
                          max_memory=max_memory, progress=not no_progress)
    result.doc["inputs"]["device"] = device
    finish(result, json_path, report_dir)
