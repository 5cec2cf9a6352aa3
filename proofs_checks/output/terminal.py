"""What ``tverify show`` and ``tverify run`` print: plain lines wrapped to the terminal's width
(``COLUMNS`` first, piped output too), every wrapped line keeping its indentation, maths as Unicode
text with explicit grouping (never LaTeX), no machine paths.

``show`` leads with the answer: title, statement, hypotheses and clauses one line each with their
evidence, and the last result (:func:`show_summary`, at most ~60 lines at 100 columns); ``--full``
adds the derivation, obligations, checks and mutants (:func:`show_full`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from proofs_checks.mathml import latex_text
from proofs_checks.output.wraptext import hang_wrap, unbrace_scripts, width
from proofs_checks.output.evidence import clause_labels, evidence_label
from proofs_checks.errors import visible

__all__ = ["Line", "width", "math_text", "text_of", "wrap", "show_summary", "show_full", "last_checks", "totals_line",
           "fmt_duration", "short", "print_lines"]

#: hypotheses or clauses listed by the summary before "… N more"
MAX_ITEMS = 12


# ------------------------------------------------------------------------------------------------
# maths as Unicode text


_TEXTY = re.compile(r"\\(text|mathrm|operatorname|texttt|textsf|textrm|textit|textbf|mathtt)\{")


_NON_FACTORS = ("right|left|[Bb]igg?[lr]?|quad|qquad|le|ge|leq|geq|ne|neq|in|to|cdot|times|sim|approx|succ|succeq|preceq|mid|"
                "xrightarrow|rightarrow|Rightarrow|iff|implies|coloneqq|equiv|pm")
#: big operators: a fraction after one (with its limits) is its operand, not a factor beside it
_OPERATOR_BEFORE = re.compile(r"\\(?:sum|prod|int|lim|max|min|sup|inf|" + _NON_FACTORS + r")"
                              r"(?:\s*[_^](?:\{[^{}]*\}|\\?[A-Za-z0-9]+))*\s*$")
_NOT_FACTOR = re.compile(r"\\(?:" + _NON_FACTORS + r"|,|;|\s)(?![A-Za-z])")


_TEXT_OPEN = re.compile(r"\\(?:text|mathrm|textrm)\{")
_TEXT_CLOSE = re.compile(r"\\(?:text|mathrm|textrm)\{([^{}]*)\}$")


def _juxtaposed_after(src: str, i: int) -> bool:
    rest = src[i:].lstrip()
    if not rest:
        return False
    m = _TEXT_OPEN.match(rest)
    if m:  # prose after a fraction (", then", ")"): a factor only when it starts with a letter or digit
        return rest[m.end():m.end() + 1].isalnum()
    if rest[0] == "\\":
        return not _NOT_FACTOR.match(rest) and rest[1:2].isalpha()
    return rest[0].isalnum() or rest[0] == "("


def _juxtaposed_before(src: str, i: int) -> bool:
    head = src[:i].rstrip()
    if not head or not (head[-1].isalnum() or head[-1] in ")}"):
        return False
    m = _TEXT_CLOSE.search(head)
    if m:  # prose before a fraction ("(and "): a factor only when it ends with a letter or digit
        return m[1][-1:].isalnum()
    return not _OPERATOR_BEFORE.search(head)


def _group(src: str, i: int) -> int:
    """The index after the brace group opening at ``src[i] == "{"`` (``len(src)`` when unbalanced)."""
    depth = 0
    for j in range(i, len(src)):
        if src[j] == "\\":
            continue
        if src[j] == "{" and (j == 0 or src[j - 1] != "\\"):
            depth += 1
        elif src[j] == "}" and src[j - 1] != "\\":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(src)


_SIMPLE = re.compile(r"\s*(?:\\(?:hat|tilde|bar|vec|dot|mathbf|mathcal|mathbb|boldsymbol)\s*)?"
                     r"(?:\\[A-Za-z]+|[A-Za-z0-9.]+)(?:\s*[_^](?:\{[^{}]*\}|\\?[A-Za-z0-9]+))*\s*")


def _part(body: str) -> str:
    """A numerator or denominator: bracketed unless it is one symbol (with its scripts)."""
    inner = _fracs(body)
    if _SIMPLE.fullmatch(body) or body.strip().startswith(r"\left("):
        return inner
    return r"\left(" + inner + r"\right)"


def _fracs(src: str) -> str:
    """``\\frac{A}{B}``: A and B bracketed unless one symbol (``e^{l_t}/(∑_τ e^{l_τ})``); a fraction
    juxtaposed with a factor bracketed too, with an explicit product sign."""
    out, i = [], 0
    while True:
        k = src.find(r"\frac{", i)
        if k < 0:
            return "".join(out) + src[i:]
        a_end = _group(src, k + 5)
        if a_end >= len(src) or src[a_end] != "{":
            out.append(src[i:a_end])
            i = a_end
            continue
        b_end = _group(src, a_end)
        num, den = src[k + 6:a_end - 1], src[a_end + 1:b_end - 1]
        frac = r"\frac{" + _part(num) + "}{" + _part(den) + "}"
        before, after = _juxtaposed_before(src, k), _juxtaposed_after(src, b_end)
        if before or after:
            frac = (r"\cdot " if before else "") + r"\left(" + frac + r"\right)" + (r"\cdot " if after else "")
        out += [src[i:k], frac]
        i = b_end


_HYPHEN = "\u2011"  # a hyphen inside \text{...} (restored after the operators are spaced)


def _group_script(m: re.Match) -> str:
    """A sub- or superscript of more than one token in brackets (``^{1/2}`` → ``^(1/2)``,
    ``_{i\\le M}`` → ``_(i ≤ M)``); ``_{22}``, ``^{PV}``, ``_{\\max}`` stay as they are."""
    body = m[2].strip()
    if re.fullmatch(r"\\[A-Za-z]+|[A-Za-z0-9]+'*|\\left\(.*\\right\)|\(.*\)", body):
        return m[0]
    return m[1] + r"{\left(" + body + r"\right)}"


def _scripts(src: str) -> str:
    """Each sub- or superscript group through :func:`_group_script`, nested braces included (``x^{\\frac{3}{2}}`` read
    x^3/2 and ``e^{q_i\\cdot k_j/\\sqrt{d_k}}`` e^q_i·k_j/√(d_k): a regex saw only groups without braces; 48b F5, F6)."""
    out, i = [], 0
    while True:
        m = re.compile(r"(?<!\\)([_^])\{").search(src, i)
        if m is None:
            return "".join(out) + src[i:]
        end = _group(src, m.end() - 1)
        body = _scripts(src[m.end():end - 1])
        out += [src[i:m.start()], _group_script(re.match(r"([_^])\{(.*)\}", f"{m[1]}{{{body}}}", re.S))]
        i = end


def _prepare(src: str) -> str:
    r"""LaTeX rewritten so that the text keeps its grouping: a fraction next to a factor is
    parenthesised (``\tfrac1N\operatorname{tr}`` → ``(1/N)·tr``), ``\overset{iid}{\sim}`` becomes
    ``∼[iid]``, multi-token exponents are grouped (``^{1/2}`` → ``^(1/2)``), and a subscript
    followed by a letter is set apart (``y_ix_i`` → ``y_i x_i``)."""
    src = re.sub(r"\\[td]?frac\s*(\{[^{}]*\}|\\[A-Za-z]+|[A-Za-z0-9])\s*(\{[^{}]*\}|\\[A-Za-z]+|[A-Za-z0-9])",
                 lambda m: r"\frac{" + m[1].strip("{}") + "}{" + m[2].strip("{}") + "}", src)
    src = re.sub(r"\\text\{([^{}]*)\}", lambda m: r"\text{" + m[1].replace("-", _HYPHEN) + "}", src)
    src = re.sub(r"\\operatorname\{([^{}]*)\}\s*(?=[A-Za-z0-9\\])", r"\\operatorname{\1}\\ ", src)  # Var q, not Varq
    src = _fracs(src)
    src = re.sub(r"\\overset\{\\text\{([^{}]*)\}\}\{\\sim\}", r" \\sim[\1] ", src)
    src = re.sub(r"\\overset\{([^{}]*)\}\{([^{}]*)\}", r"\2[\1]", src)
    src = _scripts(src)
    src = re.sub(r"\\(log|exp|ln|sin|cos|tanh|det|tr|max|min|sup|inf|lim|arg|dim|rank|deg)(?![A-Za-z])\s*(?=[A-Za-z0-9\\])",
                 r"\\\1\\ ", src)
    # after a subscript/superscript, a letter or a command starts a new factor: set it apart
    src = re.sub(r"((?<!\\)[_^](?:\{[^{}]*\}|\\[A-Za-z]+(?![A-Za-z])|[A-Za-z0-9]))(?=\s*[A-Za-z]|\s*\\(?:mathcal|Lambda|Gamma|"
                 r"Sigma|Theta|alpha|beta|gamma|theta|lambda|mu|sigma|tau|phi|psi|omega|rho|eta|xi|zeta|delta|epsilon|"
                 r"varepsilon|hat|tilde|bar|operatorname|mathbb|mathbf|mathrm|frac|sqrt|ell)(?![A-Za-z]))", r"\1\\ ", src)
    return src


_REL = "=≠≤≥<>∈∉∼≈≽≼≻≺⪰⪯→⟹⟺⇒⇔⊂⊆∝"


def _space_ops(text: str) -> str:
    """Spaces around relations and around ``+`` / binary ``−`` outside sub- and superscript groups;
    a closing bracket juxtaposed with a factor gets an explicit ``·``."""
    out, depth_script, stack = [], 0, []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "(":
            script = i > 0 and text[i - 1] in "_^"
            stack.append(script)
            depth_script += script
        elif ch == ")" and stack:
            depth_script -= stack.pop()
        if depth_script == 0 and ch in "+" and out and out[-1] not in "(^_[{ ":
            out.append(" + ")
            i += 1
            continue
        if depth_script == 0 and ch in "-−" and out and out[-1] not in "(^_[{ ,=" and (i + 1 < len(text) and text[i + 1] != ">"):
            prev = "".join(out).rstrip()
            if prev and prev[-1] not in _REL + "(,[{":
                out.append(" − ")
                i += 1
                continue
        if ch in _REL and depth_script == 0:
            out.append(f"{ch} " if out and out[-1].endswith(("(", "[")) else f" {ch} ")
            i += 1
            continue
        if ch == "," and depth_script == 0:
            out.append(", ")
            i += 1
            continue
        out.append(ch)
        i += 1
    s = "".join(out)
    s = re.sub(r"\)(?=[A-Za-zΑ-ωϑϕ𝒩ℝ𝔼])", ")·", s)
    s = s.replace(" ∼ [", " ∼[")
    return re.sub(r"[ \t]+", " ", s).strip()


def math_text(latex: Any) -> str:
    r"""A LaTeX formula as readable Unicode for a terminal, with explicit grouping.

        >>> for tex in (r"\Gamma_N=(1+\tfrac1N)\Lambda+\tfrac1N\operatorname{tr}(\Lambda)I_d",
        ...             r"x_1,\dots,x_N,x_q\overset{\text{iid}}{\sim}\mathcal N(0,\Lambda)",
        ...             r"w_{22}\to\|\Gamma_N^{-1}\|_F^{1/2}", r"\Lambda\succ0"):
        ...     print(math_text(tex))
        Γ_N = (1 + 1/N)·Λ + (1/N)·tr(Λ)·I_d
        x_1, …, x_N, x_q ∼[iid] 𝒩(0, Λ)
        w_22 → ‖Γ_N^(-1)‖_F^(1/2)
        Λ ≻ 0
    """
    if latex is None:
        return ""
    src = str(latex)
    if "\\" not in src and "{" not in src and "^" not in src and "_" not in src:
        return src
    from proofs_checks.mathml import unconvertible

    lost = unconvertible(src)
    if lost:  # a text without them would state something else (¬P read P, ∛8 read √8: hostile pass 48b F5)
        return f"{src}   [LaTeX as written: {', '.join(chr(92) + n for n in lost)} has no text form here]"
    try:
        out = latex_text(_prepare(src))
    except Exception:  # pragma: no cover - latex_text never raises; belt and braces
        out = src
    if "\\" in out:  # anything the converter left: drop the command words, keep their arguments
        out = re.sub(r"\\([A-Za-z]+)", r"\1", out).replace("\\", "")
    out = _space_ops(out).replace(_HYPHEN, "-")
    return re.sub(r"([" + _REL + r"]) ?\u0338 ?", "\\1\u0338 ", out)  # \not\propto: "∝̸", the slash on its relation


def text_of(value: Any) -> str:
    r"""Prose that may hold LaTeX (a mutant's description, ``\Lambda\succ0``): Unicode, never LaTeX.
    ``$…$`` spans and bare commands are converted; plain prose is returned as it is."""
    s = "" if value is None else str(value)
    if "\\" not in s and "$" not in s:
        return unbrace_scripts(s)  # "Θ(T^{3/2})" in a title: Θ(T^(3/2)), as in statements
    if "$" in s:
        return re.sub(r"\$([^$]+)\$", lambda m: math_text(m[1]), s).replace("\\", "")
    cut = s.rfind(": ", 0, s.find("\\"))  # "prose: formula" (a mutant's description): only the formula
    if cut >= 0:
        return s[:cut + 2] + math_text(s[cut + 2:])
    return math_text(s)


# ------------------------------------------------------------------------------------------------
# lines and wrapping


@dataclass
class Line:
    """One logical line: ``indent`` spaces, then ``text``; wrapped lines are indented by
    ``indent + hang``. ``style`` colours the whole line, ``mark`` a word in it; ``pre`` lines
    (SymPy's two-dimensional pretty forms) are never wrapped."""

    text: str
    indent: int = 0
    hang: int = 4
    style: str = ""
    mark: tuple[str, str] | None = None
    pre: bool = False


def wrap(lines: list[Line], cols: int, unbrace: bool = True) -> list[tuple[str, Line]]:
    """Each logical line cut at word boundaries to ``cols`` columns, continuation lines keeping
    the indentation (plus the hang); ``unbrace``: scripts braced the LaTeX way written as in plain text (never for
    ``show --latex``, whose braces are LaTeX's grouping: hostile pass 54b F7)."""
    out = []
    for ln in lines:
        if ln.pre or not ln.text.strip():
            out.append((" " * ln.indent + ln.text if ln.text.strip() else "", ln))
            continue
        parts = hang_wrap(unbrace_scripts(ln.text) if unbrace else ln.text, cols, ln.indent, ln.hang)
        out.extend((p, ln) for p in parts)
    return out


def short(text: str, room: int) -> str:
    """``text`` cut at a word boundary to ``room`` characters, with "…" when cut."""
    text = " ".join(str(text).split())
    if len(text) <= room:
        return text
    cut = text[: max(room - 1, 1)]
    if " " in cut[room // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:·(") + "…"


# ------------------------------------------------------------------------------------------------
# show


def _fmt_num(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "–" if x is None else str(x)


def _last_result(e: dict[str, Any], last: dict[str, Any] | None, unreadable: bool, cols: int,
                 store_flag: str = "") -> list[Line]:
    cid = e["id"]
    if not last:  # the run advised writes where show looks: with the --store show was given (hostile pass 55b F9)
        why = ("the stored entry is unreadable and was skipped (the warning above says what `tverify run` does "
               "with it)") if unreadable else f"none yet (run `tverify {store_flag}run {cid}`)"
        return [Line(f"last result: {why}", style="bold")]
    st = str(last.get("status"))
    checks = last.get("checks") or []
    counts: dict[str, int] = {}
    for ch in checks:
        counts[str(ch.get("status"))] = counts.get(str(ch.get("status")), 0) + 1
    worst, ratio = None, -1.0
    for ch in checks:
        err, tol = ch.get("error"), ch.get("tolerance")
        if isinstance(err, (int, float)) and isinstance(tol, (int, float)) and tol and tol > 0 and err / tol > ratio:
            worst, ratio = ch, err / tol
    when = f", {last['created']}" if last.get("created") else ""
    out = [Line(f"last result: {st} (mode {last.get('mode')}, seed {last.get('seed')}, device {last.get('device')}"
                f"{when})", style="bold", mark=(st, st), hang=2)]
    if last.get("sources_changed_since"):
        out.append(Line(f"from before a source changed (tverify's code or a claims plugin's): it may not be what the "
                        f"claim gives now; `tverify run {cid}` gives the current result", indent=2, hang=2))
    if last.get("message"):  # read from the store's file: its escape sequences shown, not obeyed (F4)
        out.append(Line(visible(text_of(last["message"])), indent=2, hang=2))
    tally = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    if checks:
        w = f"; worst error/tolerance {ratio:.2g} ({worst.get('name')})" if worst is not None else ""
        out.append(Line(f"checks: {tally}{w}", indent=2, hang=2))
    return out


def _items(title: str, rows: list[Line], cols: int) -> list[Line]:
    if len(rows) > MAX_ITEMS:
        extra = len(rows) - MAX_ITEMS
        rows = rows[:MAX_ITEMS] + [Line(f"… {extra} more (--full lists them)", indent=2)]
    return [Line(title, style="bold"), *rows]


def _one_line(prefix: str, body: str, suffix: str, cols: int, indent: int = 2) -> str:
    room = cols - indent - len(prefix) - len(suffix)
    return prefix + short(body, max(room, 12)) + suffix


def show_summary(e: dict[str, Any], hyps: list[dict[str, Any]], last: dict[str, Any] | None, *, cols: int,
                 unreadable: bool = False, math: Callable[[Any], str] = math_text, store_flag: str = "") -> list[Line]:
    """The default ``show``: what the claim says, how far it is established, and its last result (``store_flag``:
    ``"--store DIR "`` when the store was chosen by --store)."""
    out = [Line(f"{e['id']} — {e['title']}  ({e['kind']})", style="bold", hang=2),
           Line(f"source: {e.get('source') or '–'}", hang=2),
           Line(f"evidence: {evidence_label(e)}", hang=2),
           Line("statement:", style="bold")]
    stmt = math(e.get("statement"))
    st_lines = wrap([Line(stmt, indent=2, hang=2)], cols, unbrace=math is math_text)  # (LaTeX's braces kept: 54b F7)
    if len(st_lines) > 8:
        st_lines = st_lines[:7] + [("  … (--full shows it whole)", Line(""))]
    out.extend(Line(t, pre=True) for t, _ in st_lines)
    if e.get("stated_statement"):
        out.append(Line(f"as stated in the lecture notes (refuted): " + short(math(e["stated_statement"]), cols * 2),
                        hang=2))
    if hyps:
        rows = []
        for h in hyps:
            nec = ("shown necessary" if h.get("necessary") else
                   "not shown necessary" if h.get("necessary") is False else "necessity: see --full")
            rows.append(Line(_one_line(f"{h.get('name')}: ", math(h.get("latex")) or text_of(h.get("text")),
                                       f"  [{nec}]", cols), indent=2, pre=True))
        out += _items(f"hypotheses ({len(hyps)}):", rows, cols)
    elif e.get("no_hypotheses"):
        out.append(Line(f"hypotheses: none ({e['no_hypotheses']})", hang=2))
    clauses = e.get("clauses") or []
    if clauses:
        rows = [Line(_one_line(f"{c.get('name')}: ", math(c.get("latex")), f"  [{clause_labels(c)}]", cols),
                     indent=2, pre=True) for c in clauses]
        out += _items(f"clauses ({len(clauses)}):", rows, cols)
    out.append(Line(""))
    out += _last_result(e, last, unreadable, cols, store_flag)
    out.append(Line(f"(`tverify show {e['id']} --full`: evidence and scope of each clause, derivation, checks, "
                    "mutants)", style="dim", hang=1))
    return out


def show_full(e: dict[str, Any], info: dict[str, Any], how: str, *, math: Callable[[Any], str] = math_text,
              as_latex: bool = False) -> list[Line]:
    """Everything after the summary: each clause's evidence and scope, each hypothesis's
    counterexample, notes, the derivation (steps, assumptions, obligations, provenance, legend),
    the checks and the mutants."""
    out: list[Line] = [Line(""), Line("statement (whole):", style="bold"), Line(math(e.get("statement")), indent=2, hang=2)]
    hyps = info.get("hypotheses") or e.get("hypotheses") or []
    if hyps:
        out.append(Line("hypotheses:", style="bold"))
        for h in hyps:
            words = f" — {h['text']}" if h.get("text") else ""
            out.append(Line(f"{h['name']}: {math(h.get('latex'))}{words}", indent=2))
            cx = h.get("counterexample")
            if h.get("necessary") and cx:
                inst = ", ".join(f"{k} = {v}" for k, v in (cx.get("instance") or {}).items())
                out.append(Line(f"dropped: {inst} breaks {cx.get('clause')}: {text_of(cx.get('shows'))}", indent=6))
            elif h.get("necessary") is None:
                out.append(Line("counterexample: computed by `tverify mutants`", indent=6, style="dim"))
            else:
                why = h.get("why_not_shown") or ""
                out.append(Line("not shown necessary" + (f" ({why})" if why else ""), indent=6, style="yellow"))
    clauses = e.get("clauses") or []
    if clauses:
        out.append(Line("clauses:", style="bold"))
        for c in clauses:
            out.append(Line(f"{c['name']}: {math(c.get('latex'))}", indent=2))
            ev = c.get("evidence_text") or f"{c.get('evidence')} {c.get('scope')}"
            by = f" (by {', '.join(c.get('checks') or [])})" if c.get("checks") else ""
            out.append(Line(text_of(ev) + by, indent=6, hang=2))
    if e.get("evidence_summary"):
        out.append(Line(f"weakest evidence: {text_of(e['evidence_summary'])}", hang=2))
    if e.get("fixed_sizes"):
        out.append(Line(f"derivation at fixed sizes: {text_of(e['fixed_sizes'])}", hang=2))
    if e.get("notes"):
        from proofs_checks.output.html_claim import reader_notes

        out.append(Line(f"notes: {text_of(reader_notes(e['notes']))}", hang=2))
    out += _derivation(info, how, math, as_latex)
    out += [Line(""), Line("checks:", style="bold")]
    out += [Line(f"[{ch['layer']}] {ch['name']}: {text_of(ch['description'])}", indent=2) for ch in e.get("checks") or []]
    out += [Line(""), Line("mutants:", style="bold")]
    for m in e.get("mutants") or []:
        ex = f" — exempt: {text_of(m['exempt'])}" if m.get("exempt") else ""
        out.append(Line(f"{m['name']} ({m['kind']}): {text_of(m['description'])}{ex}", indent=2))
    return out


def _derivation(info: dict[str, Any], how: str, math: Callable[[Any], str], as_latex: bool) -> list[Line]:
    steps = info.get("steps") or []
    how = re.sub(r"(?:[A-Za-z]:)?[/\\\\~][^\s;()]*[/\\\\]([^\s;()/\\\\]+)", r"\1", how)  # a file's name, not its path
    out = [Line(""), Line(f"derivation ({how}):" if how == "computed now" else f"derivation (from {how}):", style="bold")]
    if info.get("timeout"):  # it did not finish: undecided, never "no derivation" (hostile pass 19a F6)
        out.append(Line(f"did not finish: {text_of(info['timeout'])}; undecided (TVERIFY_DERIVATION_BUDGET sets the "
                        "seconds it may take)", indent=2, style="yellow"))
    elif not steps and not info.get("error"):
        out.append(Line("none: no symbolic derivation for this claim", indent=2))
    for i, s in enumerate(steps, 1):
        tag = s.get("how") if s.get("how") in ("assumed", "argued") else "derived"
        label = f"{tag} ({s['key']})" if s.get("key") else tag
        out.append(Line(f"{i}. [{label}] {text_of(s.get('text'))}", indent=2,
                        mark=(label, "green" if tag == "derived" else "yellow")))
        if as_latex and s.get("latex"):
            out.append(Line(str(s["latex"]), indent=7, hang=0))
        elif s.get("pretty"):
            out += [Line(ln, indent=7, pre=True) for ln in str(s["pretty"]).splitlines()]
        elif s.get("latex"):
            out.append(Line(math(s["latex"]), indent=7, hang=2))
    if info.get("error"):
        out.append(Line(f"derivation error: {info['error']}", style="red"))
    assumptions = info.get("assumptions") or []
    out += [Line(""), Line("assumptions (taken, not derived):", style="bold")]
    out += [Line(f"- {text_of(a)}", indent=2) for a in assumptions] or [Line("none", indent=2)]
    obl = info.get("obligations") or []
    out += [Line(""), Line("obligations:", style="bold")]
    if not obl:
        out.append(Line("none", indent=2))
    for o in obl:
        ost = o.get("status") or ("holds" if o.get("passed") else "fails")
        word = {"holds": "holds", "undecided": "UNDECIDED"}.get(ost, "FAILS")
        cx = o.get("counterexample")
        out.append(Line(f"{o.get('name')} ({o.get('kind')}): {word}, residual {_fmt_num(o.get('residual'))}, method "
                        f"{o.get('method')}" + (f" — {text_of(o['description'])}" if o.get("description") else ""),
                        indent=2, mark=(word, {"holds": "green", "UNDECIDED": "yellow"}.get(word, "bold red"))))
        if cx:
            out.append(Line("counterexample: " + ", ".join(f"{k} = {v}" for k, v in cx.items()), indent=6))
    for title, key in (("provenance of the closed form:", "provenance"), ("legend:", "legend")):
        if info.get(key):
            out += [Line(""), Line(title, style="bold")]
            out += [Line(f"{k}: {text_of(v)}", indent=2) for k, v in info[key].items()]
    return out


def last_checks(last: dict[str, Any] | None, where: str) -> list[Line]:
    """``--full``: each check of the last result (error, tolerance, resolution, why), and ``where``
    it was looked for."""
    from proofs_checks.output.report import resolution_text

    out = [Line(""), Line(f"last result's checks ({where}):", style="bold")]
    for ch in (last or {}).get("checks") or []:
        why = ch.get("justification") or ch.get("skip_reason") or ch.get("error_message") or ""
        out.append(Line(visible(f"{ch.get('name')}: {ch.get('status')} error={_fmt_num(ch.get('error'))} "
                                f"tol={_fmt_num(ch.get('tolerance'))} resolution={resolution_text(ch)} — {text_of(why)}"),
                        indent=2))  # read from the store's file (F4)
    return out


# ------------------------------------------------------------------------------------------------
# run


def fmt_duration(seconds: float) -> str:
    """``4 min 12 s``, ``12.3 s``, ``1 h 2 min``.

        >>> fmt_duration(252.4), fmt_duration(12.34), fmt_duration(3725)
        ('4 min 12 s', '12.3 s', '1 h 2 min')
    """
    if seconds < 60:
        return f"{seconds:.1f} s"
    s = int(round(seconds))
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {(s % 3600) // 60} min"


#: the order of the totals line (the rest follow, alphabetically)
_TOTAL_ORDER = ("verified", "evidence", "refuted", "error", "incomplete", "undecided", "inconclusive")


def totals_line(statuses: list[str], seconds: float) -> str:
    """pytest's last line for a run: ``51 claims: 42 verified, 9 evidence, 0 refuted in 4 min 12 s``
    (verified, evidence and refuted always; the other statuses when they occur).

        >>> totals_line(["verified", "verified", "evidence"], 252)
        '3 claims: 2 verified, 1 evidence, 0 refuted in 4 min 12 s'
    """
    counts: dict[str, int] = {}
    for s in statuses:
        counts[s] = counts.get(s, 0) + 1
    keys = [k for k in _TOTAL_ORDER if k in ("verified", "evidence", "refuted") or counts.get(k)]
    keys += sorted(k for k in counts if k not in _TOTAL_ORDER)
    n = len(statuses)
    parts = ", ".join(f"{counts.get(k, 0)} {k}" for k in keys)
    return f"{n} claim{'' if n == 1 else 's'}: {parts} in {fmt_duration(seconds)}"


_PLAIN_STYLES = ("green", "yellow", "red", "bold red", "cyan", "magenta", "bold magenta")


def print_lines(console, lines: list[Line], cols: int, styles: dict[str, str], unbrace: bool = True) -> None:
    """Print logical lines wrapped to ``cols`` on a rich ``console`` (colour only where it has one;
    ``NO_COLOR`` honoured by rich). ``mark`` colours one word; a status word takes ``styles``; ``unbrace``: as
    :func:`wrap`."""
    from rich.text import Text

    for text, ln in wrap(lines, cols, unbrace):
        t = Text(text, style=ln.style or "", no_wrap=True, overflow="ignore")
        if ln.mark:
            word, style = ln.mark
            at = text.find(word)
            style = styles.get(style) or (style if style in _PLAIN_STYLES else "")  # an unknown status: no colour
            if at >= 0 and style:
                t.stylize(style, at, at + len(word))
        console.print(t, soft_wrap=True)
