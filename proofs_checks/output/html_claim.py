"""A claim page's top half: the statement first, then the verdict box (what was established, at
which sizes, by which layer), then the hypotheses and clauses, each in its own block where the
maths wraps or scrolls inside its own box (never over its neighbour), each text once.

Notes are shown without the project's own bookkeeping (``Audit (issue 33): …``): see
:func:`reader_notes`.
"""

from __future__ import annotations

import re
from typing import Any

from proofs_checks.output.evidence import clause_label, evidence_key, evidence_label
from proofs_checks.mathml import latex_to_mathml
from proofs_checks.output.html_base import (_badge, _e, _num, _status_badge, fix_glyphs, math_html, split_statement,
                                            statement_html, tex_for_mathml)

__all__ = ["reader_notes", "claim_head_html", "statement_parts_html", "evidence_badge"]

_EVIDENCE_CLASS = {"derived": "ok", "derived_at": "ok2", "checked": "evi", "cited": "inc", "argued": "inc", "assumed": "skip",
                   "evidence": "evi2", "undeclared": "skip"}


def evidence_badge(r: dict[str, Any]) -> str:
    """The claim's evidence in a badge (derived ∀ sizes / derived at sizes / checked / cited / evidence)."""
    key = evidence_key(r)
    return f'<span class="badge {_EVIDENCE_CLASS.get(key, "skip")}" title="weakest clause">{_e(evidence_label(r))}</span>'


def _clause_badge(c: dict[str, Any]) -> str:
    return f'<span class="badge {_EVIDENCE_CLASS.get(str(c.get("evidence")), "skip")}">{_e(clause_label(c))}</span>'


_BOOKKEEPING = re.compile(r"\b(Audit|Corrected|Found|Fixed|Changed)\s*\((?:issue|pass)[^)]*\)\s*:\s*")


def reader_notes(text: Any) -> str:
    """A claim's notes as a reader sees them: the project's own bookkeeping labels removed
    (``Audit (issue 33): `` is dropped, ``Corrected (issue 33): `` becomes ``Corrected: ``, a bare
    ``(issue 33)`` or ``(pass 4 Q7)`` goes).

        >>> reader_notes("Audit (issue 33): the old text chained limits.")
        'The old text chained limits.'
        >>> reader_notes("Corrected (issue 33): stated without x.")
        'Corrected: stated without x.'
    """
    s = "" if text is None else str(text)

    def label(m: re.Match) -> str:
        return "" if m[1] == "Audit" else f"{m[1]}: "

    s = _BOOKKEEPING.sub(label, s)
    s = re.sub(r"\s*\((?:issue \d+|pass \d+[^)]*)\)", "", s)
    s = re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m[1] + m[2].upper(), s)
    return s.strip()


def _layers(r: dict[str, Any]) -> dict[str, str]:
    """Check name → layer (the derivation is the symbolic layer)."""
    out = {"derivation": "symbolic"}
    for c in r.get("checks") or []:
        out[str(c.get("name"))] = str(c.get("layer") or "")
    return out


def _verdict_html(r: dict[str, Any]) -> str:
    layers = _layers(r)
    meta = (f"{_e(r.get('kind'))} · source: {_e(r.get('source') or '–')} · {_num(r.get('seconds'))} s · "
            f"device {_e(r.get('device'))} · mode {_e(r.get('mode'))} · seed {_e(r.get('seed'))}")
    st = str(r.get("status") or "")
    cls = {"verified": "ok", "refuted": "bad", "error": "err", "evidence": "evi"}.get(st, "inc")
    b = [f'<section class="verdict v-{cls}" id="verdict"><div class="vhead"><span class="vstatus">{_status_badge(r)}</span> '
         f'{evidence_badge(r)} <span class="dim">{meta}</span></div>']
    if r.get("message"):
        b.append(f'<p class="vmsg">{_e(r["message"])}</p>')
    clauses = [c for c in r.get("clauses") or [] if isinstance(c, dict)]
    if clauses:
        groups: dict[str, list[dict[str, Any]]] = {}  # clauses with the same evidence are named together
        for c in clauses:
            evs = c.get("all_evidence") or [{"evidence": c.get("evidence"), "scope": c.get("scope")}]
            how = "; ".join(f"<b>{_e(clause_label(e))}</b>: {_e(e.get('scope'))}" for e in evs)
            groups.setdefault(how, []).append(c)
        items = []
        for how, cs in groups.items():
            names = " ".join(f"<span class=cname>{_e(c.get('name'))}</span> {_clause_badge(c)}" for c in cs)
            by = [f"{_e(n)} <span class=dim>({_e(layers.get(str(n), '?'))})</span>"
                  for n in dict.fromkeys(n for c in cs for n in c.get("checks") or [])]
            items.append(f"<li>{names}<div>{how}</div>" + (f'<div class="by">by {", ".join(by)}</div>' if by else "")
                         + "</li>")
        b.append("<p><b>What was established</b>, clause by clause (at which sizes, by which layer):</p>"
                 f'<ul class="est">{"".join(items)}</ul>')
    elif r.get("evidence_summary"):
        b.append(f"<p><b>Evidence:</b> {_e(r['evidence_summary'])}</p>")
    if r.get("fixed_sizes"):
        b.append(f"<p><b>Derivation at fixed sizes:</b> {_e(r['fixed_sizes'])}</p>")
    b.append("</section>")
    return "".join(b)


def claim_head_html(r: dict[str, Any]) -> str:
    """Title, the statement (an erratum: as stated and corrected), then the verdict box."""
    cid = str(r.get("id"))
    b = [f'<h1><span class="cid">{_e(cid)}</span></h1>',
         f'<p class="ctitle"><span class="status" id="status">{_status_badge(r)}</span> {_e(r.get("title"))}</p>']
    if r.get("kind") == "erratum":
        b.append(f'<div class="box stated"><b>As stated in the lecture notes</b>{statement_html(r.get("stated_statement"))}</div>')
        b.append(f'<div class="box corrected"><b>Corrected</b>{statement_html(r.get("statement"))}</div>')
    else:
        b.append('<div class="statement">' + (statement_html(r.get("statement")) or
                                              '<p class="dim">(no statement recorded)</p>') + "</div>")
    if r.get("status") == "error" and r.get("message"):
        b.append(f'<div class="box errorbox">{_e(r["message"])}</div>')
        r = dict(r, message="")
    b.append(_verdict_html(r))
    return "\n".join(b)


def item_math(latex: Any) -> str:
    """A hypothesis's or clause's formula, left-aligned, one line per top-level part when long;
    each line scrolls inside its own box when it is still wider than the column."""
    if not latex:
        return ""
    parts = split_statement(str(latex), min_len=70)
    rendered = [latex_to_mathml(tex_for_mathml(x), "inline") for x in parts]
    if not all(rendered):
        return math_html(latex)
    return '<div class="math lines left">' + "".join(f"<div>{fix_glyphs(m)}</div>" for m in rendered) + "</div>"


def _item(name: str, badge: str, latex: Any, extra: str) -> str:
    body = item_math(latex)
    return (f'<div class="item"><div class="iname"><span class=cname>{_e(name)}</span> {badge}</div>'
            f'<div class="ibody">{body}{extra}</div></div>')


def statement_parts_html(r: dict[str, Any]) -> str:
    """Hypotheses (each with the counterexample that shows it necessary, or "not shown necessary"),
    clauses (each with its evidence badge; the scope is in the verdict box), assumptions and notes."""
    b = []
    hyps = [h for h in r.get("hypotheses") or [] if isinstance(h, dict)]
    if hyps:
        items = []
        for h in hyps:
            cx = h.get("counterexample")
            if h.get("necessary") and cx:
                inst = ", ".join(f"{k} = {v}" for k, v in (cx.get("instance") or {}).items())
                badge, why = _badge("ok", "necessary"), (f"<div class=dim>dropping it breaks <i>{_e(cx.get('clause'))}</i>: "
                                                         f"{_e(inst)}: {_e(cx.get('shows'))}</div>")
            elif h.get("necessary") is None:
                badge, why = "", ""
            else:
                badge = _badge("skipped", "not shown necessary")
                words = re.sub(r"^not shown necessary\s*[:(—-]?\s*", "", str(h.get("why_not_shown") or ""))
                why = f"<div class=dim>{_e(words)}</div>" if words else ""
            words = f"<div>{_e(h['text'])}</div>" if h.get("text") else ""
            items.append(_item(str(h.get("name")), badge, h.get("latex"), words + why))
        b.append(f'<h2>Hypotheses</h2><div class="items">{"".join(items)}</div>')
    elif r.get("no_hypotheses"):
        b.append(f"<p><b>Hypotheses:</b> none ({_e(r['no_hypotheses'])})</p>")
    clauses = [c for c in r.get("clauses") or [] if isinstance(c, dict)]
    if clauses:
        items = [_item(str(c.get("name")), _clause_badge(c), c.get("latex"),
                       f"<div>{_e(c['text'])}</div>" if c.get("text") else "") for c in clauses]
        b.append('<h2>Clauses</h2><p class="dim">Evidence and scope of each clause: in the verdict above.</p>'
                 f'<div class="items">{"".join(items)}</div>')
    if r.get("assumptions"):
        b.append("<p><b>Assumptions</b> (taken, not derived; inherited ones included):</p><ul>"
                 + "".join(f"<li>{_e(a)}</li>" for a in r["assumptions"]) + "</ul>")
    if r.get("notes"):
        b.append(f"<p><b>Notes.</b> {_e(reader_notes(r['notes']))}</p>")
    return "".join(b)
