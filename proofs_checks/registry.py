"""The claim registry: what a claim is (:mod:`proofs_checks.claim_model`), how its checks report
(:mod:`proofs_checks.check_result`), and the one global registry (here); this module re-exports all three.

A claim module (``proofs_checks/claims/<group>.py``) builds :class:`Claim` objects and passes them
to :func:`register`. A claim has

* ``form``: the object its checks test (a function, a closed-form expression, a dict of them).
  For an erratum it is the *corrected* form; ``stated`` holds the form as the lecture notes state it.
* ``checks``: functions ``fn(form, ctx) -> CheckResult``. Each compares ``form`` with an
  independently computed reference (derivation, numeric reference, trained model), so the same
  function run on a mutant's form must fail.
* ``mutants``: wrong variants of ``form`` (wrong constant, dropped term, swapped index, ...).

The registry refuses a claim without statement, source, checks or mutant, and (theorems,
identities, errata) one without a derivation, a symbolic check and a non-symbolic (numeric or
trained) check, unless the claim says why it has none: ``no_symbolic="..."`` (e.g. an empirical
table, a combinatorial property checked by brute force) or ``no_numeric="..."``. Evidence and
conjecture claims report numbers only and need neither.
"""

from __future__ import annotations

import contextlib
import fnmatch
from typing import Any, Iterable

from proofs_checks.check_result import (EXACT_UNITS, ERROR_UNITS, VACUOUS, CheckResult,  # noqa: F401
                                         Inconclusive, SkipCheck, UnknownClaimError, VacuousCheck, _all_finite,
                                         compare, default_resolution, negative_tolerance, refuse_text, vacuity,
                                         worst)
from proofs_checks.claim_model import (EVIDENCE, KINDS, LAYERS, MAX_TITLE, MUTANT_KINDS, _CONTROL,  # noqa: F401
                                        _NAME, Check, Claim, Clause, Counterexample, DroppedHypothesis, Hypothesis, Mutant,
                                        RegistryError,
                                        evidence_summary, evidence_words, id_problem, render_statement, visible)

__all__ = [
    "BUILTIN",
    "BUILTIN_GROUPS",
    "loading_builtin",
    "is_builtin",
    "EVIDENCE",
    "Clause",
    "Counterexample",
    "Hypothesis",
    "Inconclusive",
    "evidence_summary",
    "render_statement",
    "KINDS",
    "LAYERS",
    "MUTANT_KINDS",
    "Check",
    "CheckResult",
    "Claim",
    "Mutant",
    "RegistryError",
    "SkipCheck",
    "UnknownClaimError",
    "VacuousCheck",
    "VACUOUS",
    "vacuity",
    "compare",
    "default_resolution",
    "worst",
    "get_claim",
    "register",
    "registry",
    "select",
]

class DuplicateClaim(RegistryError):
    """A claim id registered a second time (by another claim object)."""

    def __init__(self, claim_id: str):
        super().__init__(f"claim {claim_id!r} registered twice")
        self.claim_id = claim_id


class Registry:
    """Ordered mapping id -> Claim, filled by the claim modules at import."""

    def __init__(self):
        self._claims: dict[str, Claim] = {}
        #: the threads of plugins skipped while importing (a time-out): what they register later is refused
        self._refused_threads: set[int] = set()
        #: ids two plugins registered: taken back from the first, refused to every later registration (neither runs)
        self.contested: set[str] = set()

    def add(self, claim: Claim) -> Claim:
        import threading

        if threading.get_ident() in self._refused_threads:
            raise RegistryError(f"claim {getattr(claim, 'id', '?')!r}: its plugin was skipped (its import did not "
                                "finish in time); not registered")
        claim.validate()
        if claim.id in self.contested or claim.id in self._claims and self._claims[claim.id] is not claim:
            raise DuplicateClaim(claim.id)
        if threading.get_ident() not in _LOADING_BUILTIN:
            refuse_builtin_group(claim)
        self._claims[claim.id] = claim
        return claim

    def __contains__(self, claim_id: str) -> bool:
        return claim_id in self._claims

    def withdraw(self, claim_ids, thread: int | None = None) -> None:
        """Take back the claims a plugin registered before it failed to load, and refuse what its import ``thread``
        (still running after a time-out) registers later: a skipped plugin's claims match nothing (they ran in
        tverify's own process, unisolated: hostile pass 43b F9)."""
        if thread is not None:
            self._refused_threads.add(thread)
        for i in claim_ids:
            self._claims.pop(i, None)

    def __iter__(self):
        return iter(self._claims.values())

    def __len__(self) -> int:
        return len(self._claims)

    def ids(self) -> list[str]:
        return list(self._claims)

    def get(self, claim_id: str) -> Claim:
        try:
            return self._claims[claim_id]
        except KeyError:
            raise UnknownClaimError(f"no claim {claim_id!r} (see `tverify list`)") from None


registry = Registry()

#: the claims this project ships, by id, as its own claim modules registered them
#: (:func:`proofs_checks.claims.load_all` fills it)
BUILTIN: dict[str, Claim] = {}
#: the groups of this project's own claims (tests/test_registry.py pins them against :data:`BUILTIN` once loaded)
BUILTIN_GROUPS = frozenset({"approx", "attn", "gnn", "hop", "icl", "lora", "lyap", "opt", "perf", "rnn", "scale",
                            "sparse", "svm"})
#: the threads importing this project's claim modules now (:func:`loading_builtin`): their claims are the built-in ones
_LOADING_BUILTIN: set[int] = set()


@contextlib.contextmanager
def loading_builtin():
    """While this project's claim modules are imported (``proofs_checks.claims.load_all``): what this thread registers
    is a built-in claim, in a built-in group."""
    import threading

    me = threading.get_ident()
    _LOADING_BUILTIN.add(me)
    try:
        yield
    finally:
        _LOADING_BUILTIN.discard(me)


def is_builtin(claim: Any) -> bool:
    """``claim`` is the very object one of this project's claim modules registered (a plugin's or a
    notebook's claim never is, whatever its id or its functions' ``__module__`` say)."""
    found = BUILTIN.get(getattr(claim, "id", None))
    return found is not None and found is claim


def refuse_builtin_group(claim: Claim) -> None:
    """What `tverify new-claim` refuses (:func:`proofs_checks.scaffold.check_id_free`), for ``register`` and for
    ``check_claim`` / ``run_mutants`` alike (hostile pass 60b, a note): a plugin's or a notebook's claim in a built-in
    group would be run, listed and counted as one of this project's claims (hostile pass 46 O1); also before the
    built-in claims load (`list` and `show` answer without them: 54b F8)."""
    group = claim.id.split(".", 1)[0]
    if group in BUILTIN_GROUPS and not is_builtin(claim):
        raise RegistryError(f"claim {claim.id!r}: {group!r} is a built-in group; a plugin's claim needs a group of "
                            f"its own (e.g. my{group}.{claim.id.split('.', 1)[1]})")


def register(claim: Claim) -> Claim:
    """Validate and add ``claim`` to the global registry; returns it. An incomplete claim is
    refused with a one-line :class:`RegistryError` (nothing is registered):

        >>> numbers_only = Check("direct", "numeric", lambda form, ctx: None)
        >>> register(Claim(id="demo.bare", title="t", statement="s", source="-", kind="theorem", form=1.0,
        ...                checks=(numbers_only,), mutants=(Mutant("two", "wrong constant", "2", 2.0),)))
        Traceback (most recent call last):
        ...
        proofs_checks.claim_model.RegistryError: claim 'demo.bare': no derivation (derivation=...) and no symbolic check: a theorem needs both, or no_symbolic="why it has none"
    """
    if not isinstance(claim, Claim):
        raise RegistryError(f"register() takes a Claim, got {type(claim).__name__} {claim!r:.60}")
    return registry.add(claim)


_LOADER = None
#: the entry point under which this project declares its own claim modules
BUILTIN_ENTRY_POINT = "proofs_checks.claims:load_all"


def _ensure_loaded() -> None:
    """Discover the claims: the built-in ones through the ``tverify.claims`` entry point that this
    project declares (``builtin = proofs_checks.claims:load_all``, the group plugins use too), which
    then loads the plugins. The registry never imports the claim package by name (it is a layer
    below it); from a source tree that is not installed the same loader is found by its dotted
    name."""
    global _LOADER
    if _LOADER is not None:
        _LOADER()  # idempotent; it loads plugins registered since (tests reset its flag)
        return
    import importlib
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="tverify.claims") if ep.value == BUILTIN_ENTRY_POINT]
    if eps:
        loader = eps[0].load()
    else:
        mod, _, fn = BUILTIN_ENTRY_POINT.partition(":")
        loader = getattr(importlib.import_module(mod), fn)
    _LOADER = loader
    loader()


def get_claim(claim_id: str) -> Claim:
    """The registered claim with this id (loads every claim module first).

        >>> get_claim("attn.convex_combination").kind
        'theorem'
    """
    _ensure_loaded()
    return registry.get(claim_id)


def select(patterns: Iterable[str] = ()) -> list[Claim]:
    """Claims matching any pattern, in registry order.

    A pattern is an exact id, a glob (``icl.*``, ``*.gamma*``) or a bare group name (``icl``).
    No pattern selects everything. A pattern that matches nothing raises :class:`UnknownClaimError`.
    """
    _ensure_loaded()
    patterns = list(patterns)
    if not patterns:
        return list(registry)
    chosen: dict[str, Claim] = {}
    for pat in patterns:
        hits = [c for c in registry if fnmatch.fnmatchcase(c.id, pat) or c.group == pat]
        if not hits:
            raise UnknownClaimError(f"no claim matches {pat!r} (see `tverify list`)")
        for c in hits:
            chosen[c.id] = c
    return [c for c in registry if c.id in chosen]
