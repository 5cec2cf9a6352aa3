"""The claim registry: what a claim is, how its checks report, and the one global registry.

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
import decimal
import fnmatch
import fractions
import math
import numbers
import re
import sys
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Callable, Iterable

from theory.derivation import Derivation

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
        proofs_checks.registry.RegistryError: mutant 'm': kind must be one of ('wrong constant', 'dropped term', 'extra term', 'swapped index', 'wrong axis', 'sign flip', 'wrong norm', 'wrong solver output', 'wrong formula', 'erratum as stated', 'hypothesis dropped')
    """


#: how a vacuous check's error message starts (the claim's message: "check NAME cannot reject anything: …")
VACUOUS = "cannot reject anything"


class VacuousCheck(Exception):
    """A check that cannot reject anything: a comparison over no draws, a non-finite tolerance, a
    tolerance beyond any stated resolution, a size 0, a training criterion of infinity. It is an
    *error in the claim*, never a pass: raised by the comparison helpers, :func:`~proofs_checks.trained.train`
    and :func:`~proofs_checks.plugin.matches_derivation`, the check's outcome is ``error`` and the
    claim's verdict ``error`` (exit 1), one line naming the check and why.

    The rule for a tolerance "beyond any stated resolution": a stated tolerance that is at least the
    size of the reference it is compared with on every compared entry (``tol_i ≥ |r_i|``: a relative
    tolerance ≥ 1; for :func:`~proofs_checks.comparisons.rounding` ``c·n·eps ≥ 1``) cannot tell the
    claimed quantity from 0 or from twice itself: every digit may be wrong, so the check resolves
    nothing. A *measured* spread (a Monte Carlo standard error, the seeds' own spread) is evidence,
    not a choice, and is not judged by this rule; a stated floor on it is.

        >>> raise VacuousCheck("close: 0 draws")
        Traceback (most recent call last):
        ...
        proofs_checks.registry.VacuousCheck: close: 0 draws
    """


def vacuity(result: "CheckResult") -> str:
    """Why a hand-built passing result cannot reject anything (``""`` when it can): an infinite
    tolerance, or ``details["draws"] == 0``.

        >>> vacuity(CheckResult(True, error=0.0, tolerance=math.inf)), vacuity(CheckResult(True, 0.0, 1e-12))
        ('its tolerance is inf: no error exceeds it', '')
    """
    if not result.passed:
        return ""
    if math.isinf(result.tolerance) and result.tolerance > 0:
        return "its tolerance is inf: no error exceeds it"
    if (result.details or {}).get("draws") == 0:
        return "it compared 0 draws"
    return ""


class UnknownClaimError(LookupError):
    """A claim id or pattern matches nothing in the registry."""


class SkipCheck(Exception):
    """Raised by a check that cannot run here (e.g. CUDA requested but absent); carries the reason.
    A skipped check is never a pass: the claim is ``incomplete``.

        >>> from proofs_checks.context import RunContext
        >>> def on_gpu(form, ctx):
        ...     if ctx.device != "cuda":
        ...         raise SkipCheck("needs --device cuda")
        >>> try:
        ...     on_gpu(None, RunContext())
        ... except SkipCheck as exc:
        ...     print(exc)
        needs --device cuda
    """


class Inconclusive(SkipCheck):
    """Raised by a check that ran but could not decide: e.g. a trained model that did not reach its
    stated loss criterion (:mod:`proofs_checks.trained`). Neither a pass nor a fail: the claim is
    ``inconclusive`` (``tverify run`` exits 3), with the message saying what was missed.
    ``criterion``, ``final`` and ``curve`` carry the numbers (optional)."""

    def __init__(self, message: str, *, criterion: float = math.nan, final: Any = None, curve: Any = None):
        super().__init__(message)
        self.criterion, self.final, self.curve = criterion, final, curve


@dataclass
class CheckResult:
    """What one check measured.

    ``passed`` is ``error <= tolerance`` for numeric comparisons, or an explicit verdict for
    exact (symbolic) comparisons; ``None`` means skipped. ``justification`` says why the tolerance
    is what it is (float64 rounding scaled by size, k standard errors, a convergence rate, exact).
    ``details`` holds further measured numbers (JSON-serialisable) for reports.
    ``resolution`` is the smallest deviation from the truth the check still rejects, in
    ``resolution_units`` (a relative change of the reference for the comparison kinds of
    :mod:`proofs_checks.comparisons`; see :func:`default_resolution` for the rule otherwise).

        >>> r = CheckResult(True, error=2e-16, tolerance=1.4e-14, justification="float64 rounding of 1 operation")
        >>> r.passed, r.error <= r.tolerance
        (True, True)
    """

    passed: bool | None
    error: float = math.nan
    tolerance: float = math.nan
    justification: str = ""
    seeds: tuple[int, ...] = ()
    sizes: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    skip_reason: str | None = None
    figures: list[str] = field(default_factory=list)
    reason: str = ""
    resolution: float = math.nan
    resolution_units: str = ""
    #: the error is the size of a difference (``|value − reference|``): the comparison rejects a deviation on either
    #: side, so accepting the form halved while rejecting it doubled is a tolerance of half the truth, not a bound
    #: (the power rule asks both sides of such a check; :mod:`proofs_checks.power`). Set by the two-sided helpers of
    #: :mod:`proofs_checks.comparisons`; :func:`compare` itself is one-sided.
    two_sided: bool = False

    @property
    def ratio(self) -> float:
        """error / tolerance (how far inside or outside the tolerance): the *margin* of a rejection.

        ``inf`` for an exact comparison (tolerance 0) that did not match, and for a NaN/inf error
        (a non-finite measurement is as far from passing as it gets)."""
        if math.isnan(self.tolerance):
            return math.nan
        if math.isnan(self.error) or math.isinf(self.error):
            return math.inf
        if self.tolerance == 0:  # exact comparison: 0 when it matched, inf when it did not
            return 0.0 if self.error == 0 else math.inf
        return self.error / self.tolerance


def _all_finite(v: Any) -> bool:
    import numpy as np

    return bool(np.all(np.isfinite(np.asarray(v, dtype=float))))


def negative_tolerance(helper: str, what: str, must: str) -> None:
    """A negative tolerance (or a factor of one) is an error in the claim: it rejects everything, the opposite of a
    vacuous check; every comparison helper raises this one error for it (hostile passes 56b F1, 57b F5; compare()
    and relative() read it as a failed check, a "refuted" without evidence, until pass 58)."""
    raise ValueError(f"{helper}: {what}: must be {must} (a negative tolerance passes nothing: an error in the claim, "
                     "not a measurement)")


def compare(
    error: "float | dict[str, float]",
    tolerance: float,
    justification: str,
    *,
    seeds: Iterable[int] = (),
    sizes: dict[str, Any] | None = None,
    device: str = "cpu",
    details: dict[str, Any] | None = None,
    resolution: float | None = None,
    resolution_units: str = "",
) -> CheckResult:
    """A :class:`CheckResult` that passes iff ``error <= tolerance``: one-sided, as a bound is (a negative error is
    the margin by which it holds); pass a difference's size for a two-sided comparison (:func:`rounding`,
    :func:`relative`, :func:`close` do).

    ``error`` is one number or a dict of named errors, reduced by :func:`worst`. A NaN or inf
    anywhere (in the error, any named error or the tolerance) fails the check, and ``reason`` names
    where it came from: a non-finite measurement is never a pass; nor is an empty dict (nothing measured).

    >>> compare(1e-14, 1e-12, "float64 rounding").passed
    True
    >>> r = compare({"a": 1e-3, "b": float("nan")}, 1.0, "x"); (r.passed, r.reason)
    (False, 'non-finite error: b = nan')
    """
    reason = ""
    for what, v in (("error", error), ("tolerance", tolerance),
                    *((f"error {k!r}", x) for k, x in (error.items() if isinstance(error, dict) else ()))):
        if isinstance(v, (str, bytes)):  # float('1') would read text as a number: never reinterpreted
            raise TypeError(f"compare: {what} must be a number, got text {v[:40]!r}")
    if not isinstance(error, dict):  # (a dict's entries: worst() below refuses them)
        refuse_text([error, tolerance], "compare")  # a number a float64 cannot hold exactly (hostile pass 15b F1)
    else:
        refuse_text([tolerance], "compare")
    if isinstance(error, dict):
        bad = [k for k, v in error.items() if not _all_finite(v)]  # (an array entry: every element, as worst reads it)
        if bad:
            reason = "non-finite error: " + ", ".join(f"{k} = {worst([error[k]])}" for k in bad[:5])
        if not error:  # nothing measured: a check that cannot reject anything is never a pass (hostile pass 9)
            reason = "no error measured: an empty dict of errors compares nothing"
        details = {**dict(error), **dict(details or {})}
        error = worst(error) if error else math.nan
    try:
        error, tolerance = float(error), float(tolerance)
    except (TypeError, ValueError) as exc:  # an array (numpy: "only 0-dimensional arrays…", torch: "only one element
        # tensors…") did not say which call (pass 7 and 10 notes)
        raise TypeError(f"compare: the error and the tolerance are numbers (reduce an array first, e.g. with "
                        f"worst(...)); got {type(error).__name__} and {type(tolerance).__name__}") from exc
    if not reason and not math.isfinite(error):
        reason = f"non-finite error: {error}"
    if tolerance < 0:  # (NaN and inf are not < 0: they fail below, as a non-finite measurement does)
        negative_tolerance("compare", f"tolerance {tolerance:g}", "≥ 0")
    if not math.isfinite(tolerance):
        reason = (reason + "; " if reason else "") + f"invalid tolerance: {tolerance}"
    passed = not reason and error <= tolerance
    if resolution is None:
        resolution, resolution_units = default_resolution(error, tolerance)
    return CheckResult(
        passed=passed,
        error=error,
        tolerance=tolerance,
        justification=justification,
        seeds=tuple(int(s) for s in seeds),
        sizes=dict(sizes or {}),
        device=device,
        details=dict(details or {}),
        reason=reason,
        resolution=float(resolution),
        resolution_units=resolution_units,
    )


#: units of :func:`default_resolution`
EXACT_UNITS = "exact: any change of the compared value is rejected"
ERROR_UNITS = "the check's error units (tolerance + |error|)"


def default_resolution(error: float, tolerance: float) -> tuple[float, str]:
    """The resolution of a bare ``error <= tolerance`` comparison in the error's own units: a
    deviation ``δ`` of the truth moves the error by at least ``δ − |error|`` (triangle inequality),
    so every ``δ > tolerance + |error|`` is rejected. Tolerance 0 (exact comparison of integers,
    booleans or symbolic expressions): 0, any change is rejected. Non-finite: NaN.

    >>> default_resolution(1e-16, 1e-13)[0] == 1e-13 + 1e-16, default_resolution(0.0, 0.0)[0]
    (True, 0.0)
    """
    error, tolerance = float(error), float(tolerance)
    if not (math.isfinite(error) and math.isfinite(tolerance)):
        return math.nan, ""
    if tolerance == 0.0:
        return 0.0, EXACT_UNITS
    return tolerance + abs(error), ERROR_UNITS


def refuse_text(value: Any, where: str) -> None:
    """Raise ``TypeError`` when ``value`` (a number, an array, or lists, tuples and dicts of them) holds
    text: ``float('1')`` and ``np.asarray(['1'], dtype=float)`` read text as numbers, and a comparison
    helper must never reinterpret it (``worst('123')`` was 3.0; hostile pass 10, F1); or a number that is not exactly
    a float64 (:func:`_refuse_rounded`)."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{where}: expected numbers, got text {value[:40]!r} (text is never read as a number)")
    if isinstance(value, complex):
        raise TypeError(f"{where}: expected real numbers, got the complex {value!r} (its imaginary part would be dropped)")
    if _exotic(value):
        _refuse_rounded(value, where)
        return
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for v in value:
            if v is not None and not isinstance(v, (float, bool)) and not (isinstance(v, int) and abs(v) <= _EXACT_INT):
                refuse_text(v, where)
        return
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.is_complex():
            raise TypeError(f"{where}: expected real numbers, got a complex tensor (dtype {value.dtype}; its imaginary "
                            "part would be dropped: compare abs() or the real and imaginary parts)")
        if value.is_floating_point() or value.dtype == torch.bool:
            return
        value = value.detach().cpu().numpy()  # integers, unsigned ones too (torch has no abs() or max() for those)
    elif not hasattr(value, "dtype") and not isinstance(value, (int, float, bool)) and value is not None:
        import numpy as np

        try:  # what NumPy will compute with: an array-like, a buffer, a sequence that is no list
            value = np.asarray(value)
        except Exception:  # noqa: BLE001 — not an array: the helper's own conversion says why
            return
    kind = _kind(value)
    if (kind == "f" and getattr(value.dtype, "itemsize", 8) > 8) or kind in ("i", "u"):  # long double, integers
        _refuse_rounded(value, where)  # (beyond 2⁵³): values a float64 cannot hold exactly
    if kind == "O":
        for v in getattr(value, "flat", ()):
            if isinstance(v, (str, bytes, complex)) or hasattr(v, "dtype") or _exotic(v):
                refuse_text(v, where)
    if kind in ("S", "U"):  # a NumPy array of text
        raise TypeError(f"{where}: expected numbers, got an array of text (dtype {value.dtype}; text is never "
                        "read as a number)")
    if kind in ("m", "M"):  # datetime64 / timedelta64: counts of a unit, read as float64 they are rounded
        raise TypeError(f"{where}: expected real numbers, got {value.dtype} values (compare their integer counts, "
                        "e.g. .astype('int64'), or in their own unit)")
    if kind == "c":  # casting drops the imaginary part
        raise TypeError(f"{where}: expected real numbers, got a complex array (dtype {value.dtype}; its imaginary part "
                        "would be dropped: compare abs() or the real and imaginary parts)")


#: integers up to 2⁵³ are float64 numbers exactly; a larger one may not be (2⁶⁰ + 1 rounds to 2⁶⁰)
_EXACT_INT = 2**53


def _exotic(value: Any) -> bool:
    """A scalar number that may hold more than a float64 does: an integer beyond 2⁵³, any other rational (a Fraction,
    SymPy's Rational and Integer, anything registered as :class:`numbers.Rational`), a Decimal, or a binary
    floating-point number of its own precision (mpmath's mpf, SymPy's Float: they carry ``_mpf_``). Floats, booleans,
    small integers and arrays (``dtype``) are not."""
    if isinstance(value, (float, bool)) or hasattr(value, "dtype"):
        return False
    if isinstance(value, int):
        return abs(value) > _EXACT_INT
    return isinstance(value, (decimal.Decimal, numbers.Rational)) or isinstance(getattr(value, "_mpf_", None), tuple) \
        or type(value).__module__.split(".")[0] in ("sympy", "mpmath")  # pi, sqrt(2), mpc: never exactly a float64


def _exact(value: Any) -> fractions.Fraction | None:
    """The exact value of an :func:`_exotic` scalar as a Fraction (``None``: infinite or NaN, which float() keeps)."""
    mpf = getattr(value, "_mpf_", None)
    if isinstance(mpf, tuple) and len(mpf) == 4:
        sign, man, exp, _ = mpf
        if not man:
            return None if exp else fractions.Fraction(0)  # mpmath's zero is (0, 0, 0, 0); inf and nan have exp != 0
        m = fractions.Fraction(-int(man) if sign else int(man))
        return m * 2**int(exp) if exp >= 0 else m / 2**(-int(exp))
    if isinstance(value, decimal.Decimal):
        return fractions.Fraction(value) if value.is_finite() else None
    if isinstance(value, numbers.Rational):
        return fractions.Fraction(int(value.numerator), int(value.denominator))
    if getattr(value, "is_infinite", None) is True or getattr(value, "is_nan", None) is True:  # SymPy's oo, nan
        return None
    raise ValueError("no exact binary value (an irrational constant or an expression)")


def _refuse_rounded(value: Any, where: str) -> None:
    """``TypeError`` when ``value`` (an :func:`_exotic` scalar: a Decimal, a Fraction or other rational, an mpmath or
    SymPy number, an integer beyond 2⁵³; or a long-double or integer array) is
    not exactly a float64: the helpers compute in float64, and rounding would decide the comparison (a long double
    1 + 2⁻⁶⁰ "equal" to 1 within 2⁻⁷⁰, a Decimal 1e-400 "exactly" 0, 2⁶⁰ + 1 equal to 2⁶⁰; hostile passes 14b F2,
    15b F1–F3; SymPy's Rational(1, 10**400) and mpmath's mpf('1e-400') "exactly" 0, 16b F1)."""
    import numpy as np

    try:
        if _exotic(value):
            exact, f = _exact(value), float(value)
            same = exact is None or (math.isfinite(f) and fractions.Fraction(f) == exact)
        else:
            arr = np.asarray(value)
            if arr.dtype.kind in "iu":
                same = arr.size == 0 or bool(np.all((arr <= _EXACT_INT) & (arr >= -_EXACT_INT)))
            else:
                same = bool(np.array_equal(arr.astype(np.float64).astype(arr.dtype), arr, equal_nan=True))
    except (OverflowError, ValueError, TypeError, ArithmeticError, decimal.InvalidOperation):
        same = False
    if not same:
        what = repr(value)[:60] if not hasattr(value, "dtype") else f"a {value.dtype} value"
        raise TypeError(f"{where}: {what} is not exactly a float64 number, and the comparison is computed in float64 "
                        "(rounding would decide it): round the values yourself, or compare them in their own precision")


def _kind(value: Any) -> str:
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    return kind if isinstance(kind, str) else "-"


def worst(errors: dict[str, float] | Iterable[float]) -> float:
    """The largest of several errors; NaN anywhere gives NaN and ±inf gives inf (so it fails); no
    errors at all is a ``ValueError`` (a check over nothing cannot reject anything: an error in the
    claim, never a pass with error 0).

    Python's ``max`` silently skips a NaN that is not first (``max(1.0, nan) == 1.0``): every
    reduction of errors in the claim modules goes through this function (a test forbids bare
    ``max``/``min`` there). Arrays are flattened.

    >>> worst({"a": 1e-3, "b": float("nan")})
    nan
    >>> worst([1.0, 2.0, float("inf")])
    inf
    >>> worst([1.0, 2.0])
    2.0
    >>> worst([float("-inf"), 0.5])
    inf
    >>> worst([])
    Traceback (most recent call last):
    ValueError: worst: no errors to reduce (a comparison over nothing cannot reject anything)
    """
    import numpy as np

    if isinstance(errors, (str, bytes)) or hasattr(errors, "dtype"):
        refuse_text(errors, "worst")
    items = list(errors.values() if isinstance(errors, dict) else errors)
    refuse_text(items, "worst")  # the items themselves: a generator of Decimals is checked too (hostile pass 16b N1)
    vals = np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in items]) if items else np.zeros(0)
    if vals.size == 0:
        raise ValueError("worst: no errors to reduce (a comparison over nothing cannot reject anything)")
    if np.isnan(vals).any():
        return math.nan
    if np.isneginf(vals).any():  # an error of −inf is no measurement either: it fails, as inf does (26b N7)
        return math.inf
    return float(np.max(vals))


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
    proofs_checks.registry.RegistryError: claim 'demo.two': no derivation (derivation=...) and no symbolic check: an identity needs both, or no_symbolic="why it has none"
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
        group = claim.id.split(".", 1)[0]
        if group in BUILTIN_GROUPS and not is_builtin(claim) and threading.get_ident() not in _LOADING_BUILTIN:
            # what `tverify new-claim` refuses (proofs_checks.scaffold.check_id_free): a plugin's or a notebook's claim
            # in a built-in group would be run, listed and counted as one of this project's claims (hostile pass 46 O1);
            # also before the built-in claims load (`list` and `show` answer without them: 54b F8)
            raise RegistryError(f"claim {claim.id!r}: {group!r} is a built-in group; a plugin's claim needs a group of "
                                f"its own (e.g. my{group}.{claim.id.split('.', 1)[1]})")
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


def register(claim: Claim) -> Claim:
    """Validate and add ``claim`` to the global registry; returns it. An incomplete claim is
    refused with a one-line :class:`RegistryError` (nothing is registered):

        >>> numbers_only = Check("direct", "numeric", lambda form, ctx: None)
        >>> register(Claim(id="demo.bare", title="t", statement="s", source="-", kind="theorem", form=1.0,
        ...                checks=(numbers_only,), mutants=(Mutant("two", "wrong constant", "2", 2.0),)))
        Traceback (most recent call last):
        ...
        proofs_checks.registry.RegistryError: claim 'demo.bare': no derivation (derivation=...) and no symbolic check: a theorem needs both, or no_symbolic="why it has none"
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
