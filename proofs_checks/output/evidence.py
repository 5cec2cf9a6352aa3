"""A claim's evidence in one word (for the report index and the terminal): how far its weakest
clause is established.

    derived ∀ sizes   every clause derived by SymPy for every size
    derived at sizes  some clause derived only at fixed sizes (and none weaker)
    checked           some clause checked numerically over stated ranges
    cited             some clause cited from a named theorem
    argued            some clause argued in words (over SymPy-computed pieces), not derived
    evidence          an evidence or conjecture claim: numbers reported, never a proof

Reads a catalogue entry or a results-document entry (both carry ``kind`` and ``clauses``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ORDER", "LABELS", "evidence_key", "evidence_label", "clause_label", "clause_labels"]

#: strongest first (the registry's EVIDENCE order)
ORDER = ("derived", "derived_at", "checked", "cited", "argued", "assumed")
LABELS = {"derived": "derived ∀ sizes", "derived_at": "derived at sizes", "checked": "checked", "cited": "cited",
          "argued": "argued", "assumed": "assumed", "evidence": "evidence", "undeclared": "scope not declared"}


def evidence_key(entry: dict[str, Any]) -> str:
    """``derived`` / ``derived_at`` / ``checked`` / ``cited`` / ``argued`` / ``assumed`` (the weakest clause),
    ``evidence`` (an evidence or conjecture claim), ``undeclared`` (no clauses).

        >>> evidence_key({"kind": "theorem", "clauses": [{"evidence": "derived"}, {"evidence": "checked"}]})
        'checked'
        >>> evidence_key({"kind": "evidence", "clauses": [{"evidence": "derived"}]})
        'evidence'
    """
    if entry.get("kind") in ("evidence", "conjecture"):
        return "evidence"
    kinds = [c.get("evidence") for c in entry.get("clauses") or [] if isinstance(c, dict)]
    kinds = [k for k in kinds if k in ORDER]
    if not kinds:
        return "undeclared"
    return max(kinds, key=ORDER.index)


def evidence_label(entry: dict[str, Any]) -> str:
    """The badge text of :func:`evidence_key` (``'derived ∀ sizes'``, ``'checked'``, ...)."""
    return LABELS[evidence_key(entry)]


def clause_label(clause: dict[str, Any]) -> str:
    """One clause's evidence as a badge text."""
    return LABELS.get(str(clause.get("evidence")), str(clause.get("evidence") or "?"))


def clause_labels(clause: dict[str, Any]) -> str:
    """A clause's main evidence and, when stronger, its best (a clause cited and also checked is not
    shown as merely ``checked``; one derived for every size and also checked shows ``derived ∀ sizes``).

        >>> clause_labels({"evidence": "checked", "all_evidence": [{"evidence": "cited"}, {"evidence": "checked"}]})
        'cited + checked'
        >>> clause_labels({"evidence": "derived", "all_evidence": [{"evidence": "derived"}, {"evidence": "checked"}]})
        'derived ∀ sizes'
    """
    main = [str(e.get("evidence")) for e in (clause.get("all_evidence") or [])[:1] if isinstance(e, dict)]
    kinds = list(dict.fromkeys(main + [str(clause.get("evidence"))]))
    return " + ".join(LABELS.get(k, k or "?") for k in kinds)
