"""What a check reports and how it compares: :class:`CheckResult`, :func:`compare` (an error against a stated
tolerance), :func:`worst`, :func:`default_resolution`, :func:`refuse_text`, and the exceptions a check raises to say
it could not run (:class:`SkipCheck`), could not decide (:class:`Inconclusive`) or could not reject anything
(:class:`VacuousCheck`). Split out of :mod:`proofs_checks.registry`, which re-exports all of it."""

from __future__ import annotations

import decimal
import fractions
import math
import numbers
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable



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
        proofs_checks.check_result.VacuousCheck: close: 0 draws
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


#: the start of the message of a hand-built result that contradicts its own numbers (an error in the claim)
CONTRADICTS = "contradicts itself"


def contradiction(result: "CheckResult") -> str:
    """Why a result contradicts its own numbers (``""`` when it does not): a negative tolerance (a tolerance is a size),
    or a hand-built result (not made by :func:`compare` and its kind) that says passed with a finite error above its
    finite tolerance. A result whose flag and numbers disagree is an error in the claim, never a pass.

        >>> contradiction(CheckResult(True, error=5.0, tolerance=1.0)), contradiction(CheckResult(True, 0.5, 1.0))
        ('it says passed with an error of 5 above its own tolerance 1', '')
        >>> contradiction(CheckResult(True, error=0.0, tolerance=-1.0))
        'its tolerance is negative (-1): a tolerance is the size of a difference'
    """
    if result.passed is None:
        return ""
    e, t = result.error, result.tolerance
    if isinstance(t, (int, float)) and t < 0:
        return f"its tolerance is negative ({t:g}): a tolerance is the size of a difference"
    if result.passed and not result.resolution_units and isinstance(e, (int, float)) and isinstance(t, (int, float)) \
            and math.isfinite(e) and math.isfinite(t) and e > t:
        return f"it says passed with an error of {e:.3g} above its own tolerance {t:.3g}"
    if result.passed and not result.resolution_units and isinstance(e, float) and math.isnan(e):
        return "it says passed with no measured error (error NaN): a pass is an error within a tolerance"  # 61b F3
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
