"""MathML for formulas: LaTeX through ``latex2mathml``, SymPy's presentation printer as a fallback,
and a whitelist check (:func:`safe_mathml`) so that nothing but MathML reaches a page. Used by the
runner (derivation steps carry their MathML) and by :mod:`proofs_checks.output.html_report`; it imports
nothing of the project.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from html.entities import html5 as _HTML5_ENTITIES
from typing import Any

__all__ = ["MATHML_NS", "latex_text", "latex_to_mathml", "sympy_to_mathml", "expr_mathml", "safe_mathml"]

MATHML_NS = "http://www.w3.org/1998/Math/MathML"

# MathML Core elements (plus a few legacy ones Chromium tolerates); anything else is rejected.
_MATHML_TAGS = frozenset(
    "math mrow mi mn mo ms mtext mspace msub msup msubsup munder mover munderover mfrac msqrt mroot "
    "mstyle merror mpadded mphantom menclose mtable mtr mtd mlabeledtr mmultiscripts mprescripts none "
    "semantics annotation annotation-xml maction".split()
)
_ALLOWED_ATTRS = frozenset(
    "display xmlns mathvariant stretchy fence form separator accent accentunder lspace rspace width "
    "height depth voffset columnalign rowalign columnspacing rowspacing columnlines rowlines frame "
    "displaystyle scriptlevel linethickness encoding notation movablelimits largeop symmetric "
    "minsize maxsize mathsize mathcolor mathbackground class dir".split()
)


def _numeric_entities(s: str) -> str:
    """Replace HTML named character references (``&ExponentialE;``) by numeric ones, so that the
    string parses as XML; the five XML entities stay."""

    def repl(m: re.Match) -> str:
        name = m.group(1)
        if name in ("lt", "gt", "amp", "quot", "apos"):
            return m.group(0)
        ch = _HTML5_ENTITIES.get(name + ";")
        if ch is None:
            return "&amp;" + name + ";"
        return "".join(f"&#x{ord(c):X};" for c in ch)

    return re.sub(r"&([A-Za-z][A-Za-z0-9]*);", repl, s)


def safe_mathml(markup: str | None) -> str | None:
    """``markup`` if it is one well-formed ``<math>`` element made only of MathML elements and
    harmless attributes (named entities made numeric), else ``None``.

    Also ``None`` when a token element holds a backslash command (an unknown LaTeX macro that
    ``latex2mathml`` passed through as text) -- that would render as garbage.

    >>> safe_mathml('<math><mi>x</mi></math>')
    '<math><mi>x</mi></math>'
    >>> safe_mathml('<math><mi>x</mi><script>alert(1)</script></math>') is None
    True
    >>> safe_mathml('<math><mi>\\\\foo</mi></math>') is None
    True
    """
    if not markup or not isinstance(markup, str):
        return None
    s = _numeric_entities(markup.strip())
    try:
        root = ET.fromstring(s)
    except ET.ParseError:
        return None
    for el in root.iter():
        tag = el.tag.split("}", 1)[-1] if isinstance(el.tag, str) else ""
        if tag not in _MATHML_TAGS:
            return None
        if el is root and tag != "math":
            return None
        for a in el.attrib:
            if a.split("}", 1)[-1] not in _ALLOWED_ATTRS:
                return None
        if tag in ("mi", "mo", "mn") and el.text and el.text.strip().startswith("\\"):
            return None
    return s


def _with_annotation(mathml: str, latex: str) -> str:
    """Wrap the content of ``<math>`` in ``<semantics>`` with the LaTeX source as annotation
    (copy-paste keeps the source; browsers render only the first child)."""
    i = mathml.find(">")
    j = mathml.rfind("</math>")
    if i < 0 or j < 0 or not latex or "<semantics" in mathml:
        return mathml
    head, body = mathml[: i + 1], mathml[i + 1 : j]
    if head.endswith("/>"):
        return mathml
    ann = f'<annotation encoding="application/x-tex">{html.escape(latex, quote=False)}</annotation>'
    return f"{head}<semantics><mrow>{body}</mrow>{ann}</semantics></math>"


def latex_to_mathml(latex: str | None, display: str = "block") -> str | None:
    """MathML for ``latex`` via ``latex2mathml``, validated; ``None`` when it cannot be converted
    cleanly (so the caller shows the source instead).

    >>> m = latex_to_mathml(r"\\frac{a}{b}")
    >>> m.startswith("<math") and "<mfrac>" in m
    True
    >>> latex_to_mathml(r"x^{") is None
    True
    """
    if not latex or not isinstance(latex, str) or not latex.strip():
        return None
    try:
        from latex2mathml.converter import convert

        out = convert(latex, display=display)
    except Exception:
        return None
    out = safe_mathml(out)
    return _with_annotation(out, latex) if out else None


def sympy_to_mathml(expr: Any, display: str = "block") -> str | None:
    """MathML from SymPy's presentation printer for a SymPy object (``None`` for anything else or
    when printing fails). SymPy leaves ``<``/``>`` operators unescaped; they are fixed here."""
    try:
        import sympy as sp

        if not isinstance(expr, (sp.Basic, sp.MatrixBase)):
            return None
        body = sp.mathml(expr, printer="presentation")
    except Exception:
        return None
    body = re.sub(r"<(mo|mi|mtext)>(<=?|>=?|&)</\1>", lambda m: f"<{m[1]}>{html.escape(m[2])}</{m[1]}>", body)
    return safe_mathml(f'<math xmlns="{MATHML_NS}" display="{display}">{body}</math>')


def expr_mathml(expr: Any, latex: str | None) -> str:
    """MathML for a derivation step: its LaTeX through ``latex2mathml`` (SymPy's LaTeX printer is
    the most complete), else SymPy's presentation MathML printer, else ``''``. Never raises."""
    try:
        return latex_to_mathml(latex) or sympy_to_mathml(expr) or ""
    except Exception:  # pragma: no cover - printing must never break a report
        return ""


_L2T = None


def _grouped(text: str) -> str:
    """``text`` in parentheses unless it is one token or already parenthesised (for a fraction's
    numerator/denominator and a multi-character subscript, which plain text would misread)."""
    text = text.strip()
    if re.fullmatch(r"[^\s+\-−/·,=<>]+", text) or re.fullmatch(r"\((?:[^()]|\([^()]*\))*\)", text):
        return text
    return f"({text})"


def _arg(node, i: int, l2tobj) -> str:
    args = node.nodeargd.argnlist if node.nodeargd is not None else []
    return l2tobj.nodelist_to_text([args[i]]).strip() if len(args) > i and args[i] is not None else ""


def _frac(node, l2tobj) -> str:
    return f"{_grouped(_arg(node, 0, l2tobj))}/{_grouped(_arg(node, 1, l2tobj))}"


def _xrightarrow(node, l2tobj) -> str:
    over = _arg(node, 1, l2tobj)
    return f" →[{over}] " if over else " → "


def _sqrt(node, l2tobj) -> str:  # \sqrt[3]{8}: the index kept (it read √(8): hostile pass 48b F5)
    n, a = _arg(node, 0, l2tobj), _arg(node, 1, l2tobj)
    return f"({a})^(1/{n})" if n else f"√({a})"


def _overline(node, l2tobj) -> str:  # \overline{z}: z̄ (it dropped the bar: the conjugate read as z)
    a = _arg(node, 0, l2tobj)
    return a + "\u0305" if len(a) == 1 else f"‾({a})"


def _binom(node, l2tobj) -> str:
    return f"C({_arg(node, 0, l2tobj)}, {_arg(node, 1, l2tobj)})"


def _underset(node, l2tobj) -> str:  # \underset{θ}{\arg\min}: argmin_θ
    return f"{_arg(node, 1, l2tobj)}_{_grouped(_arg(node, 0, l2tobj))} "


#: symbols pylatexenc has no text for (it dropped them: ¬P read P, A ⟺ B read A B: hostile pass 48b F5, F6)
_SYMBOLS = {"iff": " ⟺ ", "implies": " ⟹ ", "impliedby": " ⟸ ", "land": " ∧ ", "lor": " ∨ ", "neg": "¬", "lnot": "¬",
            "coloneqq": " ≔ ", "bmod": " mod ", "Pr": "Pr", "det": "det ", "arg": "arg", "mid": " | ", "setminus": " ∖ "}
#: commands whose dropping loses nothing (sizes, spacing, a wrapper whose argument is kept)
_DROPPABLE = {"left", "right", "middle", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr",
              "Biggl", "Biggr", "displaystyle", "textstyle", "scriptstyle", "limits", "nolimits", "operatorname",
              "mathop", "ne", "tfrac", "dfrac", "lVert", "rVert", "begin", "end", "overset", "rm", "it", "bf", "sf",
              "substack"}


def _walker_context():
    from pylatexenc.latexwalker import get_default_latex_context_db
    from pylatexenc.macrospec import MacroSpec

    db = get_default_latex_context_db()
    db.add_context_category("tverify", prepend=True, macros=[MacroSpec("binom", "{{"), MacroSpec("underset", "{{"),
                                                             MacroSpec("overline", "{")])
    return db


def _converter():
    from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

    ctx = get_default_latex_context_db()
    ctx.add_context_category("tverify", prepend=True, macros=[
        MacroTextSpec("frac", simplify_repl=_frac), MacroTextSpec("xrightarrow", simplify_repl=_xrightarrow),
        MacroTextSpec("sqrt", simplify_repl=_sqrt), MacroTextSpec("overline", simplify_repl=_overline),
        MacroTextSpec("binom", simplify_repl=_binom), MacroTextSpec("underset", simplify_repl=_underset),
        *(MacroTextSpec(k, simplify_repl=v) for k, v in _SYMBOLS.items())])
    return LatexNodes2Text(math_mode="text", strict_latex_spaces=True, latex_context=ctx), _walker_context(), ctx


def unconvertible(latex: str) -> list[str]:
    """The commands in ``latex`` that the terminal's conversion would drop with their meaning (no text known for
    them: ``\\cancel``, ``\\over``, ``\\choose``, a user's own macro): the caller shows the LaTeX itself then, marked, rather
    than a Unicode text that states something else (hostile pass 48b F5)."""
    global _L2T
    if _L2T is None:
        _L2T = _converter()
    ctx = _L2T[2]
    names = set(re.findall(r"\\([A-Za-z]+)", str(latex or "").replace("\\\\", " ")))  # (\\\\ ends a row)
    return sorted(n for n in names if n not in _DROPPABLE and ctx.get_macro_spec(n) is None)


def _subscripts(src: str) -> str:
    """``x_{t-1}`` → ``x_{(t-1)}``: a multi-token subscript or superscript keeps its grouping in text."""
    def group(m: re.Match) -> str:
        body = m.group(2)
        multi = re.search(r"[+\-,<>=]|\\(le|ge|leq|geq|ne|neq|in|notin)(?![a-zA-Z])", body)
        return m.group(1) + "{(" + body + ")}" if multi and "\\" not in body[:1] else m.group(0)
    return re.sub(r"([_^])\{([^{}]*)\}", group, src)


def latex_text(latex: str | None) -> str:
    r"""LaTeX as readable Unicode text for a terminal (``pylatexenc``): ``\frac{a}{b+c}`` → ``a/(b+c)``,
    ``\Gamma_N^{-1}`` → ``Γ_N^(-1)``, ``\sum`` → ``∑``, ``\xrightarrow{N\to\infty}`` → ``→[N → ∞]``.
    Norm bars ``\|x\|`` become ``‖x‖``. Never raises: LaTeX it cannot read is returned as written.

        >>> latex_text(r"\text{If } T \ge 2\text{, then } \sum_t S_t = 1")
        'If T ≥ 2, then ∑_t S_t = 1'
        >>> latex_text(r"\|l\| \to \infty")
        '‖l‖ → ∞'
        >>> latex_text(r"\tfrac1D \texttt{mask}")
        '1/D mask'
        >>> latex_text(r"\max_{j\ne i}")
        'max_(j≠i)'
        >>> latex_text(r"\theta_t=\theta_{t-1}-\alpha\frac{\hat m_t}{\sqrt{\hat v_t}+\epsilon}")
        'θ_t=θ_(t-1)-αm̂_t/(√(v̂_t)+ϵ)'
        >>> latex_text(r"\frac{N}{N+D}\xrightarrow{N\to\infty}1")
        'N/(N+D) →[N → ∞] 1'
        >>> latex_text(r"\frac1M\sum_{i\le M}y_ix_i")
        '1/M∑_(i ≤ M)y_ix_i'
    """
    global _L2T
    if not latex:
        return ""
    src = str(latex).replace(r"\|", "‖").replace(r"\lVert", "‖").replace(r"\rVert", "‖")
    src = re.sub(r"\\[td]frac(?![a-zA-Z])", r"\\frac", src)  # \tfrac1D: the parser knows \frac's arguments
    src = re.sub(r"\\ne(?![a-zA-Z])", r"\\neq", src)  # pylatexenc drops \ne
    src = re.sub(r"\\(texttt|textsf|textrm|textit|textbf|mathtt)\{", r"\\text{", src)
    src = _subscripts(src)
    try:
        if _L2T is None:
            _L2T = _converter()
        from pylatexenc.latexwalker import LatexWalker

        l2t, wdb, _ = _L2T
        nodes, _, _ = LatexWalker(src, latex_context=wdb, tolerant_parsing=True).get_latex_nodes()
        out = l2t.nodelist_to_text(nodes)
    except Exception:  # pragma: no cover - a terminal still gets the LaTeX
        return str(latex)
    out = re.sub(r"\s*([≥≤∈→≽≼⟺⟹⟸])\s*", r" \1 ", out)  # relations stand apart, as on paper
    out = out.replace(" → [", " →[")
    return re.sub(r"[ \t]+", " ", out).strip()
