"""Helpers shared by every claim module. A module whose name starts with ``_`` registers nothing."""

from __future__ import annotations

from typing import Any

from proofs_checks.registry import Claim, Counterexample, Hypothesis, register


def exceeds(instance: dict[str, Any], clause: str, shows: str, *, error: Any, tolerance: Any,
            justification: str = "") -> Counterexample:
    """The counterexample whose measured violation ``error`` must exceed ``tolerance``: ``violated``
    is ``error > tolerance``, computed here once instead of restated at every call.

        >>> cx = exceeds({"T": 1}, "open_interval", "S = 1 at T = 1", error=1.0, tolerance=0.0)
        >>> cx.violated, cx.error, cx.tolerance
        (True, 1.0, 0.0)
    """
    return Counterexample(instance, clause, shows, violated=error > tolerance, error=error, tolerance=tolerance,
                          justification=justification)


def declare(**fields: Any) -> Claim:
    """Register a built-in claim. Every built-in claim declares its hypotheses and clauses, and its
    displayed statement is rendered from them (:func:`proofs_checks.registry.render_statement`), never
    typed in: ``declare(id=..., title=..., hypotheses=..., clauses=..., ...)`` is
    ``register(Claim(id=..., title=..., statement="", ...))``. Returns the registered claim."""
    return register(Claim(statement="", **fields))


def setting(name: str, latex: str, why: str, *, text: str = "") -> Hypothesis:
    """A hypothesis that is part of the claim's setting (the clauses are not defined, or not about
    this object, without it), so no counterexample can drop it: ``why`` says what it sets up.

        >>> setting("finite", r"x\\in\\mathbb R", "S(x) is not defined otherwise").necessary_note
        'part of the setting: S(x) is not defined otherwise'
    """
    return Hypothesis(name, latex, text, necessary_note=f"part of the setting: {why}")
