"""``tverify check lyapunov --f "..." --V "..."``: certify a candidate Lyapunov function of your
polynomial system by sums of squares, re-checked exactly.

Two SOS programs (cvxpy; Clarabel, SCS as the fallback) look for Gram matrices ``G_1, G_2 ⪰ 0``
with ``V − εp = z(x)ᵀG_1z(x)`` and ``−∇V·f − εq = w(x)ᵀG_2w(x)``, where ``p``, ``q`` are
``Σ_i x_i^{2k}`` at the lowest even degree of the polynomial they bound. Each Gram matrix found is
rounded to rationals, projected exactly onto the coefficient equations and tested for PSD exactly
(pivoted LDLᵀ); SymPy expands the Gram form and compares it with the polynomial. A certificate
proves ``V ≥ εp`` (positive definite, radially unbounded) and ``V̇ ≤ −εq``: the origin is globally
asymptotically stable.

Verdicts (see :mod:`proofs_checks.sanity._verdict`) and exit codes:

* 0 ``ok``: certified (both programs feasible and both exact re-checks pass);
* 1 ``mismatch``: not certified: a program is infeasible (the solver's status, with the condition
  that failed and, when one is found, a point where that polynomial is negative);
* 3 ``inconclusive``: the solver did not return a conclusive status, or its Gram matrix failed
  the exact re-check (too close to singular: try a smaller ``--eps``);
* 2 bad input, one line on stderr: a parse error, a name that is not a variable, a function call,
  a non-polynomial, ``f``'s components not matching the variables, ``f(0) ≠ 0``, ``--eps ≤ 0``.
"""

from __future__ import annotations

import math

import click

from proofs_checks import guards
from proofs_checks.options import UsageError, require_device
from proofs_checks.sanity._common import check_json_target, check_options, emit
from proofs_checks.sanity._verdict import Verdict
from theory.validation import InputError

__all__ = ["command", "parse_eps", "estimate_resources"]

_LABEL = {"V": "V − εp", "decay": "−∇V·f − εq"}


def parse_eps(text: str):
    """``--eps`` as an exact rational (a decimal or a fraction), strictly between 0 and 1.

    >>> parse_eps("0.001")
    1/1000
    >>> parse_eps("0")
    Traceback (most recent call last):
    ...
    theory.validation.InputError: --eps must be in (0, 1), got 0
    """
    import re

    import sympy as sp

    t = text.strip()
    if not re.fullmatch(r"[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+/[0-9]+", t):
        raise InputError(f"--eps: not a positive number: {text!r}")
    try:
        e = sp.Rational(t)
    except (TypeError, ValueError, ZeroDivisionError):
        raise InputError(f"--eps: not a number: {text!r}") from None
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


@click.command("lyapunov")
@click.option("--f", "f_text", required=True, metavar="EXPR,EXPR,...",
              help='The vector field, one polynomial per variable, separated by commas, e.g. "-x**3 - y, x - y**3". '
                   "Allowed: numbers, the variables, + - * / ** (whole exponents) and parentheses.")
@click.option("--V", "V_text", required=True, metavar="EXPR", help='The candidate Lyapunov function, e.g. "x**2 + y**2".')
@click.option("--vars", "vars_text", default=None, metavar="x,y,...",
              help="The state variables in the order of --f's components (default: the names used, alphabetically).")
@click.option("--eps", "eps_text", default="0.001", show_default=True, metavar="E",
              help="The margin ε in V − εp and −∇V·f − εq (a decimal or a fraction in (0, 1)).")
@check_options
def command(f_text, V_text, vars_text, eps_text, seed, device, mode, json_path, max_memory, no_progress):
    """Certify that V is a global Lyapunov function of x' = f(x) by sums of squares (cvxpy),
    re-checked exactly in SymPy: certified (exit 0), not certified (1: an SOS program is
    infeasible; the condition that failed is named), inconclusive (3: solver trouble).
    The SOS programs are deterministic and run on CPU; --seed and --quick/--full only
    set the random search for a point where a failed condition is negative.

    \b
    Examples:
      tverify check lyapunov --f "-x**3 - y, x - y**3" --V "x**2 + y**2"
      tverify check lyapunov --f "-x + y, -x - y - z, -z" --V "x**2 + y**2 + z**2" --vars x,y,z
      tverify check lyapunov --f "y, -x - y" --V "3*x**2/2 + x*y + y**2" --eps 1/100 --json out.json
    """
    check_json_target(json_path)
    from proofs_checks.options import require_cpu_only

    require_cpu_only(device, "check lyapunov (SOS programs with cvxpy)")
    import numpy as np
    import sympy as sp

    from theory import lyapunov as tl

    eps = parse_eps(eps_text)
    cand = tl.parse_system(f_text, V_text, vars_text)
    vdot = cand.vdot()
    degree = max(sp.Poly(cand.V, *cand.vars).total_degree(), sp.Poly(vdot, *cand.vars).total_degree() if vdot != 0 else 0)
    est = estimate_resources(len(cand.vars), degree)
    guards.check_memory(est, max_memory, hint="lower the degree of V or f")
    prog = guards.Progress("check lyapunov", enabled=not no_progress, estimate=est.seconds)
    if est.seconds > 10:
        prog.note(f"estimated ≈ {guards.fmt_seconds(est.seconds)} and ≈ {guards.fmt_bytes(est.bytes)} of memory for "
                  f"SOS programs in {len(cand.vars)} variables at degree {degree}")

    from numerics import lyapunov as nl

    names = ", ".join(map(str, cand.vars))
    doc: dict = {"check": "lyapunov", "vars": [str(v) for v in cand.vars], "f": [str(e) for e in cand.f],
                 "V": str(cand.V), "Vdot": str(vdot), "eps": str(eps),
                 "inputs": {"f": f_text, "V": V_text, "vars": vars_text, "eps": eps_text, "seed": seed, "device": device,
                            "mode": mode}, "resources": est.to_json()}
    lines = [f"system x' = f(x) in ({names}): f = ({', '.join(map(str, cand.f))})",
             f"candidate V = {cand.V}", f"∇V·f = {vdot}"]
    prog.phase("solving the SOS programs", 0, 1).sub(0)
    try:
        ce = nl.certify(cand, eps)
    except nl.SolverFailure as exc:
        v = Verdict("inconclusive", "the SOS programs could not be solved", f"solver: {exc}", {},
                    [f"no conclusive solver status: {exc}"], "rescale the system (coefficients near 1) or lower the degree")
        emit(doc, v, lines + [f"solver failed: {exc}"], json_path)
    prog.done()
    lines += [f"p = {ce.targets['p']}, q = {ce.targets['q']} (Σ x_i^2k at the lowest even degree), ε = {eps}"]
    progs, numbers = {}, {"eps": float(eps)}
    for key, label in _LABEL.items():
        r, ex = ce.results[key], ce.rechecks[key]
        gs = ce.structures[key]
        entry = {"polynomial": str(ce.targets[key]), "status": r.status, "solver": r.solver, "message": r.message,
                 "basis": [str(m) for m in gs.basis_exprs()], "t": r.t, "min_eig": r.min_eig,
                 "solver_coefficient_residual": r.residual, "attempts": [list(a) for a in r.attempts]}
        line = f"{label} = {ce.targets[key]}: {r.status}"
        if r.feasible:
            line += (f" ({r.solver}), Gram {gs.size}×{gs.size} in ({', '.join(entry['basis'])}), "
                     f"smallest eigenvalue {_fmt(r.min_eig)}")
        if ex is not None:
            entry.update(exact_residual=str(ex.residual), exact_psd=ex.psd, exact_min_pivot=ex.min_pivot,
                         exact_min_eig=ex.min_eig, rounding_residual=ex.rounding_residual,
                         gram_exact=[[str(v) for v in row] for row in ex.G.tolist()])
            line += (f"; exact re-check: residual {ex.residual} (solver's Gram before projection: "
                     f"{ex.rounding_residual:.2e}), exactly PSD: {'yes' if ex.psd else 'no'}")
        elif not r.feasible:
            if r.status == "structurally infeasible":
                line += f" ({r.message})"
            w = nl.negative_witness(ce.targets[key], cand.vars, np.random.default_rng(seed),
                                    {"quick": 1000, "default": 4000, "full": 20000}[mode])
            if w is not None:
                entry["negative_at"] = {"point": [float(c) for c in w[0]], "value": w[1]}
                pt = ", ".join(f"{c:.4g}" for c in w[0])
                line += f"; it is negative at ({pt}): {w[1]:.3g}"
        progs[key] = entry
        lines.append(line)
        numbers[f"min_eig_{key}"] = r.min_eig if r.feasible else None
        numbers[f"exact_residual_{key}"] = str(ex.residual) if ex is not None else None
    doc["programs"] = progs
    doc["certified"] = ce.certified
    infeasible = [k for k in _LABEL if ce.results[k].infeasible]
    if ce.certified:
        crit = (f"both SOS programs optimal; smallest Gram eigenvalues {_fmt(ce.results['V'].min_eig)} (V − εp) and "
                f"{_fmt(ce.results['decay'].min_eig)} (−∇V·f − εq); exact re-check residuals "
                f"{ce.rechecks['V'].residual} and {ce.rechecks['decay'].residual} after rounding to 2^-40 and exact "
                "projection, both rational Gram matrices exactly PSD (pivoted LDLᵀ)")
        v = Verdict("ok", "certified: V is a global Lyapunov function (V ≥ εp, ∇V·f ≤ −εq; V − εp and −∇V·f − εq "
                          "are sums of squares)", crit, numbers)
    elif infeasible:
        why = "; ".join(f"{_LABEL[k]} infeasible (not a sum of squares: solver status {ce.results[k].status})"
                        for k in infeasible)
        neg = [k for k in infeasible if "negative_at" in progs[k]]
        extra = ("; a point where it is negative was found, so the condition fails for this ε and p, q (p, q take the "
                 "lowest even degree of V and −∇V·f)" if neg else
                 "; no point where it is negative was found: it may be nonnegative without being a sum of squares "
                 "(try a higher-degree V or a smaller --eps)")
        v = Verdict("mismatch", f"not certified: {why}", why + extra, numbers)
    else:
        bad = ce.failed()
        v = Verdict("inconclusive", "cannot decide: " + "; ".join(bad), "; ".join(bad), numbers, bad,
                    "a smaller --eps (a Gram matrix on the boundary of the PSD cone does not survive rounding) or a "
                    "rescaled system")
    emit(doc, v, lines, json_path)
