"""The power of a claim's checks, measured on its own form (the power rule for a plugin's or a
notebook's verified theorem or identity; see :func:`proofs_checks.runner.run_claim`).

The form's outputs are perturbed (:func:`proofs_checks.scaling.perturbed_form`): entry ``i``
multiplied by ``(1 + δ)^{s_i}`` with every ``s_i = +1`` (*up*), every ``s_i = −1`` (*down*), and
``s_i = ±1`` drawn from the run's seed (*mixed*: directions change, so a scale-invariant or
normalised check is measured too; a complex entry is turned by ``s_i·ln(1 + δ)`` radians instead, its
modulus kept, so a check of the modulus alone is measured too); an entry 0 stays 0 beside nonzero outputs and, where every output the checks read is 0 everywhere, is moved to ``s_i·δ`` (a relative change of 0 has no
size); at ``δ = 1`` integer entries are doubled or halved (rounded down). A perturbation is *rejected* when one
check fails on it with a finite error above a finite tolerance
(:func:`proofs_checks.resolution.finite_rejection`; cheapest layer first, stopping at the first). A
size ``δ`` is rejected when all three are — for an *identity* (the form equals the truth: a check
that accepts the form halved cannot tell it from half the truth) — and, for a *theorem* (it may be an
inequality, whose one-sided check rejects one side only), when *mixed* and *up* or *down* are, unless the side was
rejected by a two-sided check (:attr:`~proofs_checks.registry.CheckResult.two_sided`: ``close``, ``relative``,
``rounding``, ``exact``, ``z_test``, ``seed_spread``), which must then reject the other side too; the
smallest size at which all three are rejected is kept too (``two_sided``). ``δ = 1`` is tried
first, then the finest size of :data:`LADDER`, then a bisection between them (a monotone reading: a
check that rejects a perturbation rejects a larger one too; at most four sizes):

* ``δ = 1`` not rejected: the checks cannot tell the form from twice or half of itself — an error in
  the claim, whatever its checks say about themselves;
* nothing the rule can perturb in the outputs (strings, booleans, objects of libraries): its power
  cannot be measured — inconclusive;
* otherwise the measured resolution is stated beside the verdict: the smallest ``δ`` rejected and the
  largest accepted below it.

Nothing a check states about itself (its ``resolution``) enters: the power is measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from proofs_checks.resolution import finite_rejection
from proofs_checks.scaling import ScaleCounter, perturbed_form

__all__ = ["LADDER", "Probe", "Power", "measure_power", "percent"]

#: the relative perturbations tried: the first always, then the last, then a bisection between them
LADDER = (1.0, 0.1, 1e-2, 1e-3, 1e-6)


def percent(delta: float) -> str:
    """``δ`` as a percentage.

    >>> percent(1.0), percent(0.1), percent(1e-6)
    ('100 %', '10 %', '0.0001 %')
    """
    return f"{100 * delta:g} %"


@dataclass
class Probe:
    """One perturbed form run against the checks: the check that rejected it (``None``: accepted), the
    checks that crashed on it, what its outputs held (:meth:`proofs_checks.scaling._Counter.snapshot`)."""

    delta: float
    pattern: str
    rejected_by: str | None
    crashed: list[str] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    error: float | None = None
    tolerance: float | None = None
    two_sided: bool = False  # the rejecting check compares a difference's size (CheckResult.two_sided)
    zero_point: bool = False  # every output the checks read was 0, at one input or on the form's zero set: not moved

    def to_json(self) -> dict[str, Any]:
        import math

        def num(v):
            return None if v is None or not math.isfinite(v) else float(v)

        return {"delta": self.delta, "pattern": self.pattern, "rejected_by": self.rejected_by,
                "crashed": self.crashed or None, "error": num(self.error), "tolerance": num(self.tolerance),
                "outputs": self.outputs}


@dataclass
class Power:
    """The measured power of a claim's checks (:func:`measure_power`)."""

    seed: int
    probes: list[Probe]
    rejected: float | None = None  # the smallest size rejected (every size above it too)
    two_sided: float | None = None  # the smallest size every perturbation of which is rejected
    accepted: float | None = None  # the largest size not rejected below ``rejected`` (None: every size tried was)
    floats: int = 0
    ints: int = 0
    kept: list[str] = field(default_factory=list)
    one_sided: bool = False  # a theorem: one side of the uniform perturbation rejected is enough
    both_asked: bool = False  # a theorem whose side rejected at δ = 1 was rejected by a two-sided check

    @property
    def measurable(self) -> bool:
        return bool(self.floats or self.ints)

    @property
    def blind(self) -> bool:
        """The checks accept the form with its outputs doubled or halved (or never read them)."""
        return self.rejected is None and (self.measurable or not self.kept)

    def problem(self) -> str:
        """The one line of a claim whose power is not shown ('' when it is)."""
        if self.rejected is not None:
            return ""
        if not self.measurable and self.kept:
            return (f"the checks' power cannot be measured on outputs of type {', '.join(self.kept[:6])}: nothing in them "
                    "can be perturbed (numbers, arrays, tensors, inside tuples, lists, dicts, dataclasses or plain "
                    "objects), so nothing shows the checks tell the form from a wrong one: neither verified nor refuted")
        if not self.measurable:
            return ("its checks never read the form's outputs (a perturbed form was never called): they cannot tell it "
                    "from any other, so it verifies nothing (an error in the claim)")
        top = [p for p in self.probes if p.delta == LADDER[0]]
        if any(p.zero_point for p in top):
            return ("its checks read the form only where every output is 0 (at one input, or at inputs a little off "
                    "which it is not 0): any form that vanishes there (3x for 2x at x = 0) passes them, so they cannot "
                    "tell the claim from a wrong one and it verifies nothing (an error in the claim; check the form at "
                    "inputs where it is not 0)")
        acc = {p.pattern for p in top if p.rejected_by is None}
        ints = self.ints > 0
        if {"up", "down"} <= acc or ((not self.one_sided or self.both_asked) and acc & {"up", "down"}):
            what = "multiplied by " + " and by ".join((["2"] if "up" in acc else []) + (["1/2"] if "down" in acc else []))
            what += " (integer outputs halved rounded down)" if ints and "down" in acc else ""
            truth = " or ".join((["twice"] if "up" in acc else []) + (["half"] if "down" in acc else []))
        else:
            what = (f"multiplied by 2 or 1/2{' (integers halved rounded down)' if ints else ''} entry by entry, complex entries "
                    f"turned by ±ln 2 radians (signs from seed {self.seed})")
            truth = "a distorted copy of"
        crashed = sorted({c for p in top for c in p.crashed})
        why = f"; {', '.join(crashed[:3])} crashed on it: a crash is not a rejection" if crashed else ""
        if self.one_sided and self.both_asked and len(acc & {"up", "down"}) == 1:
            why += ("; a theorem may be a bound, checked on one side, but the check that rejected the other side "
                    "compares a difference's size (two-sided), so it must reject both")
        return (f"its checks accept the form {what}{why}: they cannot tell the claim from {truth} the truth, so it "
                "verifies nothing, whatever its checks state about themselves or whatever mutants it plants "
                "(an error in the claim)")

    def words(self) -> str:
        """The measured resolution in a few words, for the verdict's line."""
        if self.rejected is None:
            return "resolution not measured"
        if not self.floats:
            return ("resolution (measured): its checks reject the form with its integer outputs doubled and halved "
                    "(integers are not perturbed finer)")
        if self.two_sided == self.rejected:
            side = ""
        elif self.two_sided is not None:
            side = f" on one side (on both from {percent(self.two_sided)})"
        else:
            top = {p.pattern for p in self.probes if p.delta == LADDER[0] and p.rejected_by is None}
            side = (" on one side only (they accept every output " + ("doubled" if "up" in top else "halved")
                    + ": a one-sided check)")
        tail = f", accept {percent(self.accepted)}" if self.accepted is not None else " (the finest tried)"
        return (f"resolution (measured): its checks reject a relative perturbation of {percent(self.rejected)} of the "
                f"form's outputs{side}{tail}")

    def to_json(self) -> dict[str, Any]:
        return {"rule": ("the form's outputs multiplied entry by entry by (1 + δ)^(±1) (an entry 0 moved by ±δ only where every output is 0), "
                         "signs up, down and mixed; " + ("one side of up/down enough (a theorem)" if self.one_sided
                                                        else "every one rejected (an identity)")),
                "ladder": list(LADDER), "seed": self.seed, "rejected": self.rejected, "two_sided": self.two_sided,
                "accepted": self.accepted, "outputs": {"floats": self.floats, "ints": self.ints, "kept": self.kept},
                "words": self.words(), "problem": self.problem() or None,
                "probes": [p.to_json() for p in self.probes]}


def _probe(form: Any, delta: float, pattern: str, seed: int, checks: list, run: Callable,
           ask_two_sided: bool = False) -> Probe:
    """The perturbed form against ``checks`` in their order, stopping at the first that rejects it. Entries 0 stay 0
    where any output the checks read has an entry other than 0 (moved absolutely, by ``±δ``, a 0 is rejected at every
    size by a check's absolute tolerance there, while 3x passed for 2x everywhere else: hostile pass 24b F4); where
    every one is 0 everywhere, they are moved (a relative change of 0 has no size)."""
    p = _probe_once(form, delta, pattern, seed, checks, run, move_zeros=False, ask_two_sided=ask_two_sided)
    if p.rejected_by is None and p.outputs.get("scaled") and not p.outputs.get("nonzero"):
        # every output 0, at one input, or at inputs a little off which the form is not 0: the checks read the form
        # only where 3x and 2x agree (x = 0); moving that 0 measures nothing of the claim (31b F3, 32b F1)
        if len(p.outputs.get("points") or ()) == 1 or p.outputs.get("near"):
            p.zero_point = True
            return p
        p = _probe_once(form, delta, pattern, seed, checks, run, move_zeros=True, ask_two_sided=ask_two_sided)
    return p


def _probe_once(form: Any, delta: float, pattern: str, seed: int, checks: list, run: Callable, *,
                move_zeros: bool, ask_two_sided: bool = False) -> Probe:
    counter = ScaleCounter()
    pform = perturbed_form(form, delta, pattern, seed, counter, move_zeros=move_zeros)
    p = Probe(delta, pattern, None)
    for check in checks:
        o = run(check, pform)
        if finite_rejection(o):
            two = bool(getattr(o.result, "two_sided", False)) if o.result is not None else False
            if p.rejected_by is None:
                p.rejected_by = o.name
                if o.result is not None:
                    p.error, p.tolerance = float(o.result.error), float(o.result.tolerance)
            p.two_sided = p.two_sided or two
            if p.two_sided or not ask_two_sided:
                break
            continue  # a theorem's side rejected by a one-sided check: a two-sided one that rejects it too must reject
            # the other side as well, whatever the order of the checks (hostile pass 24b F9)
        if o.status == "error":
            p.crashed.append(o.name)
    p.outputs = counter.snapshot()
    return p


def measure_power(form: Any, checks: list, run: Callable[[Any, Any], Any], seed: int = 0, *,
                  one_sided: bool = False) -> Power:
    """The power of ``checks`` (in the order to try them) on ``form``: ``run(check, form)`` runs one check
    and returns its :class:`~proofs_checks.runner.CheckOutcome`. ``one_sided``: a theorem (it may be an
    inequality), one side of the uniform perturbation is enough; an identity needs both. ``δ = 1`` first,
    then the finest size, then a bisection of :data:`LADDER` (at most four sizes: a check that resolves
    float64 rounding costs two). See the module docstring."""
    pw = Power(seed=int(seed), probes=[], one_sided=one_sided)
    tried: dict[float, tuple[bool, bool]] = {}  # size -> (rejected, every perturbation rejected)

    def size(delta: float) -> bool | None:
        """Whether the perturbations of this size are rejected (None: nothing perturbed at it)."""
        got: dict[str, Probe] = {}
        for pattern in ("up", "down", "mixed"):
            sides = [got[k].rejected_by for k in ("up", "down") if k in got]
            # one side is enough for a theorem (it may be a bound), unless a two-sided check rejected that side:
            # accepting the other side is then a tolerance that admits half (or twice) the truth (hostile pass 23b F4)
            one = one_sided and not any(got[k].two_sided for k in ("up", "down") if k in got and got[k].rejected_by)
            if pattern == "down" and one and sides[0] and any(not b for d, (_, b) in tried.items() if d > delta):
                continue  # one side is enough, and the two-sided resolution is already coarser
            if pattern == "mixed" and not (all(sides) if not one else any(sides)):
                break  # this size is accepted whatever mixed does
            got[pattern] = p = _probe(form, delta, pattern, seed, checks, run, one_sided and pattern != "mixed")
            pw.probes.append(p)
        if delta == LADDER[0]:
            pw.both_asked = one_sided and any(p.two_sided for p in got.values() if p.pattern != "mixed" and p.rejected_by)
            pw.floats = sum(p.outputs["scaled"] for p in got.values())
            pw.ints = sum(p.outputs["ints"] for p in got.values())
            pw.kept = sorted({k for p in got.values() for k in p.outputs["kept"]})
        elif not any(p.outputs["scaled"] for p in got.values()):
            return None  # integer outputs only: perturbed at δ = 1 alone
        rejected = bool("mixed" in got and got["mixed"].rejected_by)
        tried[delta] = (rejected, rejected and len(got) == 3 and all(p.rejected_by for p in got.values()))
        return rejected

    if not size(LADDER[0]):
        pw.accepted = LADDER[0]
    elif pw.floats:
        lo, hi, i = 0, len(LADDER), len(LADDER) - 1  # LADDER[lo] rejected, LADDER[hi] accepted (len: none yet)
        while True:
            r = size(LADDER[i])
            if r is None:
                break
            lo, hi = (i, hi) if r else (lo, i)
            if hi - lo <= 1:
                break
            i = (lo + hi) // 2
        pw.accepted = LADDER[hi] if hi < len(LADDER) else None
        pw.rejected = LADDER[lo]
    if pw.measurable and tried.get(LADDER[0], (False,))[0]:
        pw.rejected = pw.rejected or LADDER[0]
        for d in sorted(tried, reverse=True):  # the two-sided resolution: all three rejected at this size and above
            if not tried[d][1]:
                break
            pw.two_sided = d if tried[d][0] else pw.two_sided
    return pw
