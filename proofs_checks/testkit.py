"""A test kit for claim authors: one call asserts what a claim must do.

:func:`assert_claim` checks, for a claim object or a registered id, that

1. the claim verifies (every obligation holds, every check ran and passed) at every seed given,
   so the result does not hinge on one random draw;
2. every planted mutant is killed by a *non-symbolic* (numeric or trained) check at the first seed
   (a mutant only the derivation can see is a mutant the numbers do not test), unless the mutant
   is ``exempt`` with a written reason; a statement mutant (a hypothesis dropped) is killed by its
   counterexample, of whatever layer (``Hypothesis(layer="symbolic")`` included), as in
   ``tverify mutants``.

It raises ``AssertionError`` with the reason (and the result table) otherwise. The pytest fixture
``tverify`` exposes it as ``tverify.assert_claim(...)``.

    >>> from proofs_checks.plugin import Claim, Check, Mutant, compare
    >>> import sympy as sp
    >>> from theory.derivation import DerivationBuilder
    >>> def derive():
    ...     b = DerivationBuilder("two"); return b.done(b.step("1 + 1", sp.Integer(1) + 1))
    >>> ok = lambda form, ctx: compare(abs(form - float(derive().result)), 0.0, "exact small integers")
    >>> c = Claim("demo.two", "Two", "1+1=2", "arithmetic", "identity", 2.0,
    ...           (Check("sym", "symbolic", ok), Check("num", "numeric", ok)),
    ...           (Mutant("three", "wrong constant", "1+1=3", 3.0),), derivation=derive)
    >>> assert_claim(c).status
    'verified'
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["assert_claim"]


def assert_claim(claim: Any, *, mode: str = "quick", seeds: Iterable[int] = (0, 1, 2), device: str = "cpu"):
    """Assert that ``claim`` (a :class:`~proofs_checks.registry.Claim` or a registered id)
    verifies at every seed in ``seeds`` and that each of its mutants is killed by a numeric or
    trained check; returns the first seed's :class:`~proofs_checks.plugin.ClaimCheck`.

        >>> from proofs_checks.plugin import example_claim  # (x+1)^2 = x^2+2x+1, one planted mutant
        >>> c = example_claim()
        >>> assert_claim(c, seeds=(0,)).status
        'verified'
    """
    from proofs_checks.plugin import check_claim, run_mutants
    from proofs_checks.registry import get_claim

    if isinstance(claim, str):
        claim = get_claim(claim)
    seeds = list(seeds) or [0]
    first = None
    for seed in seeds:
        res = check_claim(claim, mode=mode, seed=seed, device=device)
        if not res.ok:
            raise AssertionError(f"{claim.id} is {res.status} at seed {seed} ({mode} sizes): {res.message}\n{res}")
        first = first or res
    mres = run_mutants(claim, mode=mode, seed=seeds[0], device=device)
    problems = []
    for row in mres.rows:
        if row.exempt:
            continue
        layers = row.rejected_by_layer()
        if not row.killed:
            problems.append(f"mutant {row.mutant} survived")
        elif row.kind != "hypothesis dropped" and not set(layers) - {"symbolic"}:
            # a statement mutant is refuted by its counterexample, whatever its layer (an exact, SymPy one
            # is the strongest): what `tverify mutants` counts; the numbers rule is for the planted forms
            problems.append(f"mutant {row.mutant} is rejected only by the symbolic layer (no numeric or trained check sees it)")
    if problems:
        raise AssertionError(f"{claim.id}: " + "; ".join(problems) + f"\n{mres}")
    return first
