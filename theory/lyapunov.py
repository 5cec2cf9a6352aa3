"""Lyapunov functions derived in SymPy (claims ``lyap.conditions``, ``lyap.backward_construction``,
``lyap.sos_certificate``), and the exact side of sum-of-squares certificates.

Conventions: a system ``x' = f(x)`` on ``R^n`` with ``f(0) = 0``; states are column vectors
``x = (x_1, …, x_n)``; ``V̇ = ∇V·f`` (the derivative of ``V`` along trajectories, the Lie derivative).
Symbols are real. Polynomials have rational coefficients (exact arithmetic throughout).

Three parts:

* the Lyapunov conditions (``lyap.conditions``): a panel of planar systems with their candidates
  (two globally asymptotically stable ones, Khalil's counterexample whose ``V`` is not radially
  unbounded, an unstable system whose ``V`` has ``V(0) ≠ 0``, a rotation with ``V̇ ≡ 0``), a
  symbolic decision of the hypotheses (:func:`decide_properties`) and the two readings of the
  theorem (:func:`corrected_conclusion`, :func:`stated_conclusion`);
* the backward construction ``f = (−P + S)∇V`` (``lyap.backward_construction``);
* sum-of-squares certificates (``lyap.sos_certificate``): monomial bases and the Gram structure of
  a polynomial (:func:`gram_structure`), the bound polynomials ``Σ x_i^{2k}``
  (:func:`bound_polynomial`), and the exact re-check of a numeric Gram matrix
  (:func:`exact_recheck`: rounding to rationals, exact projection onto the coefficient-matching
  subspace, exact PSD test by pivoted LDLᵀ, SymPy expansion of ``z(x)ᵀ G z(x)``).

The module is the namespace of :mod:`theory.lyapunov_conditions` (the conditions and the backward construction),
:mod:`theory.lyapunov_sos` (sum-of-squares certificates) and :mod:`theory.lyapunov_parse` (a user's system, parsed
as data: ``tverify check lyapunov``).
"""

from __future__ import annotations

from theory.lyapunov_conditions import (backward_instance, Candidate, conditions_panel,  # noqa: F401
                                        corrected_conclusion, decide_properties, derive_backward_construction,
                                        derive_conditions, LEVELS, lie_derivative, MAX_DEGREE, MAX_TERMS, MAX_VARS,
                                        PROPERTIES, stated_conclusion, x, y)
from theory.lyapunov_sos import (_monomials_between, bound_polynomial, derive_sos_certificate, exact_psd,  # noqa: F401
                                 exact_recheck, ExactRecheck, gram_form, gram_structure, GramStructure, lowest_degree,
                                 sos_panel, sos_targets)
from theory.lyapunov_parse import (_check_ast, check_float64_coefficients, MAX_NESTING, natural_key,  # noqa: F401
                                   parse_system, PARSER_NAMES, RESERVED_NAMES)

__all__ = [
    "Candidate",
    "LEVELS",
    "PROPERTIES",
    "conditions_panel",
    "decide_properties",
    "corrected_conclusion",
    "stated_conclusion",
    "lie_derivative",
    "derive_conditions",
    "derive_backward_construction",
    "lowest_degree",
    "bound_polynomial",
    "sos_targets",
    "GramStructure",
    "gram_structure",
    "gram_form",
    "exact_psd",
    "ExactRecheck",
    "exact_recheck",
    "derive_sos_certificate",
    "sos_panel",
    "parse_system",
    "MAX_DEGREE",
    "MAX_VARS",
]
