"""What a claim is: a :class:`Claim` with its checks (:class:`Check`), mutants (:class:`Mutant`), hypotheses
(:class:`Hypothesis`, each with a :class:`Counterexample` where dropping it breaks the conclusion) and clauses
(:class:`Clause`), the words a statement is rendered in, and :class:`RegistryError`, the one-line refusal of an
incomplete or inconsistent entry. Split out of :mod:`proofs_checks.registry` (the one global registry), which re-exports
all of it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, Iterable

from theory.derivation import Derivation

from proofs_checks.check_result import CheckResult


KINDS = ("theorem", "identity", "erratum", "evidence", "conjecture")
LAYERS = ("symbolic", "numeric", "trained")
MUTANT_KINDS = (
    "wrong constant",
    "dropped term",
    "extra term",
    "swapped index",
    "wrong axis",
    "sign flip",
    "wrong norm",
    "wrong solver output",
    "wrong formula",
    "erratum as stated",
    "hypothesis dropped",
)
#: what establishes a clause, strongest first (see :class:`Clause`)
EVIDENCE = ("derived", "derived_at", "checked", "cited", "argued", "assumed")

#: control characters a claim's text may not hold (all of C0 but tab and newline, DEL, C1, bidirectional overrides)
from proofs_checks.errors import CONTROL as _CONTROL, id_problem, visible  # noqa: E402,F401 (shown escaped; no heavy import)


#: the longest claim title (characters; the built-in claims' longest is 204): a title is one line of `tverify
#: list`, the report's table and the head of `show` (a 5000-character plugin title made `show` 74 lines)
MAX_TITLE = 300


class RegistryError(ValueError):
    """A claim entry is incomplete or inconsistent (raised at registration); one line.

        >>> Mutant("m", "typo kind", "2x", 2.0)
        Traceback (most recent call last):
        ...
        proofs_checks.claim_model.RegistryError: mutant 'm': kind must be one of ('wrong constant', 'dropped term', 'extra term', 'swapped index', 'wrong axis', 'sign flip', 'wrong norm', 'wrong solver output', 'wrong formula', 'erratum as stated', 'hypothesis dropped')
    """


@dataclass(frozen=True)
class Check:
    """One check of a claim: ``fn(form, ctx) -> CheckResult``.

    layer        "symbolic" (compares with the SymPy derivation), "numeric" (NumPy/SciPy/cvxpy
                 reference) or "trained" (a torch model trained by an optimiser).
    uses_device  the check runs its own computation on ``ctx.device`` (trained models, batched
                 simulations). Checks against CPU reference modules (torch.optim.Adam, sdpa,
                 MultiheadAttention, ...) never do: they compare on CPU whatever the device flag.

        >>> from proofs_checks.comparisons import exact
        >>> c = Check("counts", "numeric", lambda form, ctx: exact(form - 3, "count of 3"))
        >>> c.uses_device, c.fn(3, None).passed, c.fn(4, None).passed
        (False, True, False)
        >>> Check("sgd", "trained", c.fn).uses_device
        True
    """

    name: str
    layer: str
    fn: Callable[[Any, Any], CheckResult]
    description: str = ""
    uses_device: bool | None = None

    def __post_init__(self):
        if self.layer not in LAYERS:
            raise RegistryError(f"check {self.name!r}: layer must be one of {LAYERS}")
        if self.uses_device is None:
            object.__setattr__(self, "uses_device", self.layer == "trained")


@dataclass(frozen=True)
class Mutant:
    """A planted wrong variant of a claim's ``form`` that the claim's checks must refute.

    ``exempt`` is a written reason why no numeric or trained computation can tell this mutant
    apart (it changes only a presentation); the report shows it. Empty for ordinary mutants.

        >>> m = Mutant("sign", "sign flip", "σ(−x) instead of σ(x)", lambda x: 1 / (1 + 2.718281828 ** x))
        >>> m.kind, round(m.form(0.0), 3)
        ('sign flip', 0.5)
    """

    name: str
    kind: str
    description: str
    form: Any
    exempt: str = ""
    hypothesis: str = ""  # a statement mutant: the name of the hypothesis it drops (form unused)

    def __post_init__(self):
        if self.kind not in MUTANT_KINDS:
            raise RegistryError(f"mutant {self.name!r}: kind must be one of {MUTANT_KINDS}")


@dataclass(frozen=True)
class Counterexample:
    """A concrete instance on which a claim's statement *with one hypothesis dropped* is false.

    ``instance`` names the instance (JSON-able values: numbers, short strings); ``clause`` the
    clause it violates; ``shows`` what was computed on it, in words ("S₁ stays 0.525 while
    ‖l‖ → ∞"); ``violated`` whether the computation found the clause false there (computed, never
    typed in: a counterexample function that cannot show the violation returns ``False`` and the
    hypothesis is reported "not shown necessary"); ``error``/``tolerance`` the measured violation
    and the threshold it must exceed (``error > tolerance`` is the violation), with
    ``justification`` saying why the threshold is what it is.

        >>> cx = Counterexample({"T": 1}, "open_interval", "S = 1 at T = 1, not in (0, 1)", violated=True,
        ...                     error=1.0, tolerance=0.0)
        >>> cx.to_json()["clause"], cx.violated
        ('open_interval', True)
    """

    instance: dict[str, Any]
    clause: str
    shows: str
    violated: bool
    error: float = math.nan
    tolerance: float = math.nan
    justification: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        def num(v):
            v = float(v)
            return v if math.isfinite(v) else (None if math.isnan(v) else ("inf" if v > 0 else "-inf"))
        return {"instance": {str(k): (v if isinstance(v, (str, int, bool)) or v is None else
                                      (num(v) if isinstance(v, float) else str(v))) for k, v in self.instance.items()},
                "clause": self.clause, "shows": self.shows, "violated": bool(self.violated),
                "error": num(self.error), "tolerance": num(self.tolerance), "justification": self.justification}


@dataclass(frozen=True)
class Hypothesis:
    """A named hypothesis of a claim's statement.

    latex           the hypothesis in LaTeX (rendered in HTML, JSON, and in the terminal as Unicode).
    text            optional plain words for the terminal (else the LaTeX rendered as Unicode).
    counterexample  ``fn(ctx) -> Counterexample``: builds an instance that satisfies the other
                    hypotheses but not this one and computes that a clause fails there: the
                    *statement mutant* "the claim without this hypothesis", which the suite must
                    refute. ``None`` where no such instance is shown: then ``necessary_note`` says
                    why (e.g. "part of the setting: the clauses are not defined without it"), and
                    every view says "not shown necessary".
    layer           the layer of the counterexample's computation (exact/SymPy: "symbolic").

        >>> h = Hypothesis("T_ge_2", r"T \\ge 2", necessary_note="boundary of the setting")
        >>> h.name, h.counterexample is None
        ('T_ge_2', True)
    """

    name: str
    latex: str
    text: str = ""
    counterexample: Callable[[Any], Counterexample] | None = None
    necessary_note: str = ""
    layer: str = "numeric"

    def __post_init__(self):
        if not _NAME.match(self.name or ""):
            raise RegistryError(f"hypothesis {self.name!r}: a name is letters, digits and _ (a letter first)")
        if not str(self.latex or "").strip():
            raise RegistryError(f"hypothesis {self.name!r}: missing latex")
        if self.layer not in LAYERS:
            raise RegistryError(f"hypothesis {self.name!r}: layer must be one of {LAYERS}")


@dataclass(frozen=True)
class Clause:
    """A named conclusion of a claim's statement and what establishes it.

    evidence  one of :data:`EVIDENCE`:
              ``derived`` (SymPy, for symbolic sizes: every size the hypotheses allow),
              ``derived_at`` (SymPy at the fixed sizes ``scope`` lists),
              ``checked`` (numeric or trained checks over the ranges ``scope`` lists),
              ``cited`` (a named theorem: ``scope`` gives the reference and what is taken from it),
              ``argued`` (an argument in words, possibly over SymPy-computed pieces: ``scope`` says
              which steps are computed and which are argued),
              ``assumed`` (taken as a premise, neither derived nor checked nor cited).
    scope     the sizes, ranges or reference, in words ("every T ≥ 2", "T = 3, d = 2",
              "d ≤ 8, 3 seeds", "Zhang–Frei–Bartlett (JMLR 2024) Thm 4.1: gradient flow converges").
    checks    names of the claim's checks (or ``"derivation"``) that establish it.
    also      further evidence of the same clause, as ``((evidence, scope), ...)`` (a clause derived
              at T = 3 and checked for T ≤ 257 says both; its weakest is shown in summaries).
    rests_on  the keys of the derivation's premises and argued steps (steps that are not computations,
              :meth:`theory.derivation.DerivationBuilder.argue` / ``assume(key=...)``) this clause
              rests on: shown with its derived evidence, and required by a test for every premise the
              clause's derivation uses (:func:`theory.derivation.premise_gaps`).

        >>> c = Clause("sums_to_one", r"\\sum_t S_t = 1", "derived", "every T ≥ 1", ("derivation",))
        >>> c.evidence_text()
        'derived every T ≥ 1'
        >>> Clause("b", "x", "derived", "every K", ("derivation",), rests_on=("γ choice",)).evidence_text()
        'derived every K (resting on: γ choice)'
    """

    name: str
    latex: str
    evidence: str
    scope: str
    checks: tuple[str, ...] = ()
    text: str = ""
    also: tuple[tuple[str, str], ...] = ()
    rests_on: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "rests_on", tuple(self.rests_on))
        if not _NAME.match(self.name or ""):
            raise RegistryError(f"clause {self.name!r}: a name is letters, digits and _ (a letter first)")
        if not str(self.latex or "").strip():
            raise RegistryError(f"clause {self.name!r}: missing latex")
        for ev, sc in ((self.evidence, self.scope),) + tuple(self.also):
            if ev not in EVIDENCE:
                raise RegistryError(f"clause {self.name!r}: evidence must be one of {EVIDENCE}, got {ev!r}")
            if not str(sc or "").strip():
                raise RegistryError(f"clause {self.name!r}: evidence {ev!r} needs a scope (sizes, ranges or reference)")
        object.__setattr__(self, "checks", tuple(self.checks))
        object.__setattr__(self, "also", tuple(tuple(a) for a in self.also))

    def evidences(self) -> list[tuple[str, str]]:
        """``[(evidence, scope)]``: the main one first, then ``also``."""
        return [(self.evidence, self.scope)] + [tuple(a) for a in self.also]

    def best(self) -> tuple[str, str]:
        """The strongest evidence this clause has (a clause derived in general and also checked is
        general): the clause is as strong as its best support."""
        return min(self.evidences(), key=lambda e: EVIDENCE.index(e[0]))

    def evidence_text(self) -> str:
        words = evidence_words(self.evidences()[:1])
        if self.rests_on and self.evidence in ("derived", "derived_at", "argued"):
            words += f" (resting on: {', '.join(self.rests_on)})"
        rest = evidence_words(self.evidences()[1:])
        return words + (", " + rest if rest else "")

    def to_json(self) -> dict[str, Any]:
        best = self.best()
        return {"name": self.name, "latex": self.latex, "text": self.text or None, "evidence": best[0],
                "scope": best[1], "checks": list(self.checks), "evidence_text": self.evidence_text(),
                "rests_on": list(self.rests_on),
                "all_evidence": [{"evidence": e, "scope": s} for e, s in self.evidences()]}


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def evidence_summary(clauses: Iterable[Clause]) -> str:
    """One line: each claim's weakest evidence. ``derived ∀ sizes`` when every clause is derived for
    every size; otherwise the clauses' non-general evidence, weakest kind first, with their scopes.

        >>> evidence_summary([Clause("a", "x", "derived", "every T")])
        'derived ∀ sizes'
        >>> evidence_summary([Clause("a", "x", "derived", "every T"), Clause("b", "y", "derived_at", "d = 2"),
        ...                   Clause("c", "z", "cited", "ZFB Thm 4.1")])
        'cited from ZFB Thm 4.1 (c) · derived at d = 2 (b)'
        >>> evidence_summary([Clause("a", "x", "derived_at", "T = 3", also=(("checked", "T ≤ 257"),))])
        'derived at T = 3, checked T ≤ 257 (a)'
    """
    clauses = list(clauses)
    if not clauses:
        return "scope not declared"
    weak = [c for c in clauses if c.best()[0] != "derived"]
    resting = sorted({k for c in clauses if c.best()[0] == "derived" for k in c.rests_on})
    general = "derived ∀ sizes" + (f" (resting on: {', '.join(resting)})" if resting else "")
    if not weak:
        return general
    weak.sort(key=lambda c: -EVIDENCE.index(c.best()[0]))
    groups: dict[str, list[str]] = {}
    for c in weak:  # clauses with the same evidence are named together
        groups.setdefault(c.evidence_text(), []).append(c.name)
    return " · ".join(f"{text} ({', '.join(names)})" for text, names in groups.items())


def evidence_words(evidences: Iterable[tuple[str, str]]) -> str:
    """``[("derived_at", "T = 3"), ("checked", "T ≤ 8")]`` → ``'derived at T = 3, checked T ≤ 8'``."""
    words = {"derived": "derived", "cited": "cited from", "assumed": "assumed:", "checked": "checked",
             "derived_at": "derived at", "argued": "argued"}
    return ", ".join(f"{words[e]} {s}" for e, s in evidences)


def render_statement(hypotheses: Iterable[Hypothesis], clauses: Iterable[Clause]) -> str:
    r"""The displayed statement in LaTeX, rendered from the hypotheses and clauses: every
    hypothesis and every conclusion is in the text the user reads.

        >>> render_statement([Hypothesis("t", r"T \ge 2")], [Clause("c", r"S_t \in (0,1)", "derived", "all T")])
        '\\text{If } T \\ge 2\\text{, then } S_t \\in (0,1)'
    """
    hyps = [h.latex for h in hypotheses]
    cls = [c.latex for c in clauses]
    body = r";\ ".join(cls)
    if not hyps:
        return body
    return r"\text{If } " + r",\ ".join(hyps) + r"\text{, then } " + body


@dataclass(frozen=True)
class Claim:
    """A registered claim. See the module docstring for the roles of ``form``/``checks``/``mutants``.

    statement         LaTeX of the (corrected) statement.
    source            seed file(s) and paper(s), e.g. "seed 000; Zhang, Frei, Bartlett (JMLR 2024)".
    kind              one of :data:`KINDS`.
    derivation        zero-argument callable from ``theory/`` returning a :class:`Derivation`
                      (``None`` where nothing is symbolic).
    stated            erratum only: the form as the lecture notes state it (must be refuted).
    stated_statement  erratum only: LaTeX of the statement as the lecture notes state it.
    no_symbolic       why this claim has no derivation and symbolic check ('' when it has both).
    no_numeric        why this claim has no numeric or trained check ('' when it has one).
    hypotheses        the statement's hypotheses (:class:`Hypothesis`), each with the counterexample
                      that shows it necessary (a *statement mutant*) or why none is shown.
    clauses           the statement's conclusions (:class:`Clause`), each with its evidence and scope.
                      With clauses, the displayed ``statement`` is rendered from hypotheses and
                      clauses (:func:`render_statement`); pass ``statement=""``.
    no_hypotheses     why the statement has no hypothesis ('' when it has some).
    fixed_sizes       one line: why the derivation stays at fixed sizes ('' when some clause is
                      derived for symbolic sizes, or there is no derivation).
    derivation_pure   a plugin's declaration that its derivation's result depends on nothing but the code (its
                      package and tverify's): no file, link, folder, environment variable or other state read. Then
                      the result is kept in the store's cache by the sources' fingerprint; otherwise (the default)
                      it is computed every time. The declaration decides: a derivation that reads anything else
                      must leave it False.

    >>> from theory.derivation import DerivationBuilder
    >>> ok = lambda form, ctx: compare(0.0, 0.0, "exact")
    >>> def derive():
    ...     b = DerivationBuilder("two"); return b.done(b.step("1 + 1", 2))
    >>> c = Claim("demo.two", "Two", "1+1=2", "arithmetic", "identity", 2,
    ...           (Check("sym", "symbolic", ok), Check("num", "numeric", ok)),
    ...           (Mutant("three", "wrong constant", "1+1=3", 3),), derivation=derive)
    >>> c.validate()
    >>> Claim("demo.two", "Two", "1+1=2", "arithmetic", "identity", 2, (Check("num", "numeric", ok),),
    ...       (Mutant("three", "wrong constant", "1+1=3", 3),)).validate()
    Traceback (most recent call last):
    ...
    proofs_checks.claim_model.RegistryError: claim 'demo.two': no derivation (derivation=...) and no symbolic check: an identity needs both, or no_symbolic="why it has none"
    """

    id: str
    title: str
    statement: str
    source: str
    kind: str
    form: Any
    checks: tuple[Check, ...]
    mutants: tuple[Mutant, ...]
    derivation: Callable[[], Derivation] | None = None
    stated: Any = None
    stated_statement: str = ""
    notes: str = ""
    no_symbolic: str = ""
    no_numeric: str = ""
    hypotheses: tuple[Hypothesis, ...] = ()
    clauses: tuple[Clause, ...] = ()
    no_hypotheses: str = ""
    fixed_sizes: str = ""
    derivation_pure: bool = False

    def __post_init__(self):
        object.__setattr__(self, "hypotheses", tuple(self.hypotheses))
        object.__setattr__(self, "clauses", tuple(self.clauses))
        if self.clauses:
            object.__setattr__(self, "statement", render_statement(self.hypotheses, self.clauses))

    @property
    def declared(self) -> bool:
        """The claim declares its clauses (else one clause ``statement`` stands for the whole text)."""
        return bool(self.clauses)

    def statement_clauses(self) -> tuple[Clause, ...]:
        """The declared clauses, or for a claim that declares none (an older plugin) one clause
        ``statement`` whose scope says that nothing was declared."""
        if self.clauses:
            return self.clauses
        layers = {c.layer for c in self.checks}
        ev = "checked" if layers - {"symbolic"} else "derived_at"
        return (Clause("statement", self.statement or "?", ev, "not declared by the claim (sizes and ranges are "
                       "those of its checks)", tuple(c.name for c in self.checks)),)

    def evidence_summary(self) -> str:
        """One line of the claim's weakest evidence (see :func:`evidence_summary`)."""
        return evidence_summary(self.clauses) if self.clauses else "scope not declared"

    def statement_mutants(self) -> tuple[Mutant, ...]:
        """One *statement mutant* per hypothesis that carries a counterexample: the statement with
        that hypothesis dropped, refuted by the counterexample's computation."""
        return tuple(Mutant(f"without_{h.name}", "hypothesis dropped",
                            f"the statement without the hypothesis {h.name}: {h.text or h.latex}",
                            DroppedHypothesis(h.name), hypothesis=h.name)
                     for h in self.hypotheses if h.counterexample is not None)

    def hypothesis(self, name: str) -> Hypothesis:
        return next(h for h in self.hypotheses if h.name == name)

    @property
    def group(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def is_evidence(self) -> bool:
        return self.kind in ("evidence", "conjecture")

    def all_mutants(self) -> tuple[Mutant, ...]:
        """The planted mutants plus, for an erratum, the seed's stated form, plus one statement
        mutant per hypothesis with a counterexample (:meth:`statement_mutants`)."""
        extra: tuple[Mutant, ...] = ()
        if self.kind == "erratum":
            extra = (Mutant("as-stated-in-notes", "erratum as stated", self.stated_statement or "the form as stated in the lecture notes", self.stated),)
        return tuple(self.mutants) + extra + self.statement_mutants()

    def validate(self) -> None:
        """Raise :class:`RegistryError` naming what is missing."""
        where = f"claim {self.id!r}"
        problem = id_problem(self.id)
        if problem:
            raise RegistryError(f"{where}: id {problem}")
        for attr in ("title", "statement", "source"):
            if not str(getattr(self, attr) or "").strip():
                raise RegistryError(f"{where}: missing {attr}")
        if not isinstance(self.derivation_pure, bool):
            raise RegistryError(f"{where}: derivation_pure must be True or False, got {self.derivation_pure!r}")
        title = str(self.title)
        broken = len(title.splitlines()) > 1 or title[-1:] in ("\n", "\r", "\u2028", "\u2029", "\x85")
        if len(title) > MAX_TITLE or broken:  # a title is a line of the list, the table and `show`'s head; a line
            # break is any that str.splitlines() breaks at (U+2028 and U+2029 passed: hostile pass 56b F2)
            raise RegistryError(f"{where}: title must be one line of at most {MAX_TITLE} characters, got "
                                f"{len(title)} characters{' with a line break' if broken else ''} "
                                "(the statement and notes hold the rest)")
        for attr in ("title", "statement", "source", "notes", "no_symbolic", "no_numeric"):
            bad = _CONTROL.search(str(getattr(self, attr, "") or ""))
            if bad:  # printed as they are by list/show, they recolour, clear or reorder the terminal (hostile pass 5, M6)
                raise RegistryError(f"{where}: {attr} holds the character U+{ord(bad.group()):04X} at position "
                                    f"{bad.start()} (control characters, bidirectional overrides and lone surrogates "
                                    "are refused)")
        for part, items in (("check", self.checks), ("mutant", self.mutants), ("hypothesis", self.hypotheses),
                            ("clause", self.clauses)):  # their texts are printed by show/report too (hostile pass 7, F4)
            for item in items:
                for f in fields(item) if is_dataclass(item) else ():
                    bad = _CONTROL.search(v) if isinstance(v := getattr(item, f.name, None), str) else None
                    if bad:
                        raise RegistryError(f"{where}: {part} {getattr(item, 'name', '')!r}: {f.name} holds the "
                                            f"character U+{ord(bad.group()):04X} at position {bad.start()} (control "
                                            "characters, bidirectional overrides and lone surrogates are refused)")
        if self.kind not in KINDS:
            raise RegistryError(f"{where}: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.checks:
            raise RegistryError(f"{where}: no checks")
        if not self.mutants:
            raise RegistryError(f"{where}: no mutant (every claim needs a wrong variant its checks reject)")
        names = [c.name for c in self.checks]
        if len(set(names)) != len(names):
            raise RegistryError(f"{where}: duplicate check names {names}")
        mnames = [m.name for m in self.all_mutants()]
        if len(set(mnames)) != len(mnames):
            raise RegistryError(f"{where}: duplicate mutant names {mnames}")
        if self.kind == "erratum" and (self.stated is None or not self.stated_statement.strip()):
            raise RegistryError(f"{where}: an erratum needs the seed's stated form and stated_statement")
        if self.kind != "erratum" and self.stated is not None:
            raise RegistryError(f"{where}: only an erratum has a stated form")
        for c in self.checks:
            if not isinstance(c, Check):
                raise RegistryError(f"{where}: checks must be Check objects, got {type(c).__name__}")
        self._validate_statement(where, set(names))
        if not self.is_evidence:
            layers = {c.layer for c in self.checks}
            a_kind = ("an " if self.kind[:1] in "aeiou" else "a ") + self.kind
            if not self.no_symbolic.strip():
                missing = [w for w, gone in (("no derivation (derivation=...)", self.derivation is None),
                                             ("no symbolic check", "symbolic" not in layers)) if gone]
                if missing:
                    raise RegistryError(f"{where}: {' and '.join(missing)}: {a_kind} needs both, "
                                        'or no_symbolic="why it has none"')
            if not self.no_numeric.strip() and not (layers - {"symbolic"}):
                raise RegistryError(f"{where}: no numeric or trained check: {a_kind} needs one independent of "
                                    'SymPy, or no_numeric="why it has none"')


    def _validate_statement(self, where: str, check_names: set[str]) -> None:
        for h in self.hypotheses:
            if not isinstance(h, Hypothesis):
                raise RegistryError(f"{where}: hypotheses must be Hypothesis objects, got {type(h).__name__}")
            if h.counterexample is None and not h.necessary_note.strip():
                raise RegistryError(f"{where}: hypothesis {h.name!r} has no counterexample: give one "
                                    "(counterexample=fn) or say why none is shown (necessary_note=...)")
        for c in self.clauses:
            if not isinstance(c, Clause):
                raise RegistryError(f"{where}: clauses must be Clause objects, got {type(c).__name__}")
            unknown = [n for n in c.checks if n not in check_names and n != "derivation"]
            if unknown:
                raise RegistryError(f"{where}: clause {c.name!r} names unknown checks {unknown} "
                                    f"(the claim's checks: {sorted(check_names)}, or 'derivation')")
            if "derivation" in c.checks and self.derivation is None:
                raise RegistryError(f"{where}: clause {c.name!r} names 'derivation' but the claim has none")
            if any(ev == "checked" for ev, _ in c.evidences()) and not [n for n in c.checks if n != "derivation"]:
                # "checked every real x" with no check: a scope nothing ran (hostile pass 46b F11)
                raise RegistryError(f"{where}: clause {c.name!r} says 'checked' but names none of the claim's checks "
                                    f"({sorted(check_names)}): name those that establish it")
            symbolic = {ch.name for ch in self.checks if ch.layer == "symbolic"} | {"derivation"}
            # its main evidence and each further one (also=): "derived" there read "derived ∀ sizes" too (46b F9)
            for ev in dict.fromkeys([c.evidence] + [e for e, *_ in (c.also or ())]):
                if ev in ("derived", "derived_at") and self.derivation is None:
                    # a derived clause is a chain of SymPy steps shown; a symbolic check alone showed none and read
                    # "derived ∀ sizes" (hostile pass 46b F3b)
                    raise RegistryError(f"{where}: clause {c.name!r} says {ev!r} but the claim has no derivation (a "
                                        "chain of SymPy steps it rests on): say 'checked' with the ranges its checks cover")
                if ev in ("derived", "derived_at") and not symbolic & set(c.checks):
                    # shown as "derived ∀ sizes" while only numeric draws checked it (hostile pass 24b F12)
                    raise RegistryError(f"{where}: clause {c.name!r} says {ev!r} but names no derivation and no "
                                        f"symbolic check ({list(c.checks)}): name 'derivation' or a symbolic check, or "
                                        "say 'checked' (with the draws' range in scope)")
        evs = {ev for c in self.clauses for ev, _ in c.evidences()}
        if "derived_at" in evs and "derived" not in evs and self.derivation is not None and not self.fixed_sizes.strip():
            # (held to built-in claims by a test only: hostile pass 46b F10)
            raise RegistryError(f"{where}: its clauses are derived at fixed sizes only: say why the derivation stays "
                                'there (fixed_sizes="...")')
        for what, items in (("hypothesis", self.hypotheses), ("clause", self.clauses)):
            n = [x.name for x in items]
            if len(set(n)) != len(n):
                raise RegistryError(f"{where}: duplicate {what} names {n}")
        if self.hypotheses and self.no_hypotheses.strip():
            raise RegistryError(f"{where}: hypotheses and no_hypotheses both given")
        if self.clauses and not self.hypotheses and not self.no_hypotheses.strip():
            raise RegistryError(f"{where}: clauses but no hypotheses: name them, or say why there are none "
                                '(no_hypotheses="...")')


@dataclass(frozen=True)
class DroppedHypothesis:
    """The ``form`` of a statement mutant: it names the hypothesis dropped; the runner runs that
    hypothesis's counterexample instead of the claim's checks."""

    name: str
