"""The extension API: everything a claim needs, from one import.

A claim binds a SymPy derivation to checks that compare a *form* (the claimed closed form, usually
a Python function) with independently computed references, and carries *mutants* (wrong forms
its checks must reject). This module is the documented, stable surface for writing one, in this
project or in a plugin package (entry-point group ``tverify.claims``; ``tverify new-claim ID``
writes a complete package). ``docs/extending.md`` is its reference page.

Declarations
    :class:`Claim`, :class:`Check`, :class:`Mutant`, :func:`register`, and the decorators
    :func:`symbolic`, :func:`numeric`, :func:`trained` that turn a function ``fn(form, ctx)`` into a
    :class:`Check`; :func:`matches_derivation` builds the usual symbolic check (the form against the
    derivation's closed form, lambdified, at sampled points).
Derivations
    :class:`DerivationBuilder` (``define``/``assume``/``step``/``obligation``/``fact``/``done``).
Comparisons (each returns a :class:`CheckResult` whose tolerance carries its reason)
    :func:`exact` (tolerance 0), :func:`rounding` (``c·n·eps·scale``), :func:`z_test` (k standard
    errors of a Monte Carlo estimate), :func:`seed_spread` (k standard errors across seeds),
    :func:`compare` (any error against any tolerance with a stated justification);
    :func:`worst` / :func:`largest` / :func:`smallest` reduce errors propagating NaN.
Arguments with shapes (:mod:`theory.shapes`)
    :func:`scalar`, :func:`vector`, :func:`matrix` declare arguments (sizes symbolic or sampled);
    :func:`bind` gives their SymPy objects (symbol arrays at a size, ``MatrixSymbol`` at symbolic size);
    ``matches_derivation(derive, ARGS, sizes={"d": (2, 4, 8)})`` samples them.
Resolution
    every comparison helper states the smallest relative change of the reference it rejects;
    :func:`close` does so for per-draw tolerances (``tverify mutants --continuous`` confirms it).
Trained checks (:mod:`proofs_checks.trained`)
    :func:`train` (seeds as one batched tensor, optimiser, schedule, convergence guard raising
    :class:`Inconclusive`), :class:`TrainRun` (``compare``: seed spread, false-failure probability,
    resolution; loss-curve figure).
Statements
    :class:`Hypothesis` (with a :class:`Counterexample` function), :class:`Clause` (evidence, scope).
Running (notebooks, tests; the claim need not be registered)
    :func:`check_claim`, :func:`run_mutants`; :func:`proofs_checks.testkit.assert_claim` for tests.

    >>> import numpy as np, sympy as sp
    >>> def derive():
    ...     b = DerivationBuilder("softplus derivative")
    ...     x = b.fact("args", (sp.Symbol("x", real=True),))[0]
    ...     f = b.define("Softplus", sp.log(1 + sp.exp(x)))
    ...     return b.done(b.step("Differentiate", sp.diff(f, x)), display=1 / (1 + sp.exp(-x)))
    >>> @numeric("central finite difference of np.logaddexp(0, x)")
    ... def finite_difference(form, ctx):
    ...     x, h = ctx.rng().uniform(-5, 5, 50), 1e-5
    ...     fd = (np.logaddexp(0, x + h) - np.logaddexp(0, x - h)) / (2 * h)
    ...     return compare(worst(abs(form(x) - fd)), 1e-9, "h²/6·max|σ''| + 2·eps·6/h at h = 1e-5, with margin")
    >>> c = Claim(id="demo.softplus", title="softplus' = sigmoid", statement=r"\\frac{d}{dx}\\log(1+e^x)=\\sigma(x)",
    ...           source="calculus", kind="identity", form=lambda x: 1 / (1 + np.exp(-x)), derivation=derive,
    ...           checks=(matches_derivation(derive, lambda rng: (rng.uniform(-5, 5),)), finite_difference),
    ...           mutants=(Mutant("sign", "sign flip", "σ(−x)", lambda x: 1 / (1 + np.exp(x))),))
    >>> check_claim(c).status
    'verified'
    >>> run_mutants(c).all_killed
    True
"""

from __future__ import annotations

import html
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from proofs_checks.comparisons import REL_UNITS, close, exact, largest, relative, rounding, seed_spread, smallest, z_test
from proofs_checks.context import RunContext, identity_token
from proofs_checks.registry import (KINDS, LAYERS, MUTANT_KINDS, Check, CheckResult, Claim, Clause, Counterexample, Hypothesis,
                                    Mutant, RegistryError, SkipCheck, VacuousCheck, compare, register, worst)
from proofs_checks.trained import Inconclusive, TrainRun, train
from theory.derivation import Derivation, DerivationBuilder, Obligation
from theory.shapes import Arg, bind, matrix, scalar, vector

__all__ = [
    "Claim", "Check", "Mutant", "CheckResult", "SkipCheck", "RegistryError", "VacuousCheck", "RunContext", "register",
    "Hypothesis", "Clause", "Counterexample",
    "KINDS", "LAYERS", "MUTANT_KINDS",
    "Derivation", "DerivationBuilder", "Obligation",
    "compare", "exact", "rounding", "close", "relative", "z_test", "seed_spread", "worst", "largest", "smallest",
    "REL_UNITS", "symbolic", "numeric", "trained", "matches_derivation",
    "Arg", "scalar", "vector", "matrix", "bind",
    "train", "TrainRun", "Inconclusive",
    "check_claim", "run_mutants", "ClaimCheck", "MutantsRun", "example_claim",
]


def _check(layer: str, description: str, name: str | None, uses_device: bool | None) -> Callable[[Callable], Check]:
    def wrap(fn: Callable[[Any, RunContext], CheckResult]) -> Check:
        doc = (fn.__doc__ or "").strip().splitlines()
        return Check(name or fn.__name__.lstrip("_"), layer, fn, description or (doc[0] if doc else ""), uses_device)

    return wrap


def symbolic(description: str = "", *, name: str | None = None) -> Callable[[Callable], Check]:
    """Decorator: ``fn(form, ctx) -> CheckResult`` becomes a symbolic :class:`Check` (it compares
    the form with the SymPy derivation). The name defaults to the function's, the description to
    the first line of its docstring.

        >>> @symbolic("form equals the derived value at 0")
        ... def at_zero(form, ctx):
        ...     return exact(float(form(0) != 1), "value at 0")
        >>> at_zero.name, at_zero.layer
        ('at_zero', 'symbolic')
    """
    return _check("symbolic", description, name, None)


def numeric(description: str = "", *, name: str | None = None) -> Callable[[Callable], Check]:
    """Decorator: a numeric :class:`Check` (NumPy / SciPy / cvxpy / torch reference, independent
    of SymPy).

        >>> @numeric()
        ... def finite_difference(form, ctx):
        ...     '''central differences of the definition'''
        ...     return compare(0.0, 1e-9, "h² truncation + eps/h rounding")
        >>> finite_difference.layer, finite_difference.description
        ('numeric', 'central differences of the definition')
    """
    return _check("numeric", description, name, None)


def trained(description: str = "", *, name: str | None = None, uses_device: bool = True) -> Callable[[Callable], Check]:
    """Decorator: a trained :class:`Check` (a torch model trained by an optimiser; it runs on
    ``ctx.device`` unless ``uses_device=False``).

        >>> @trained("SGD on the loss reaches the closed-form minimiser")
        ... def sgd(form, ctx):
        ...     return compare(0.0, 0.1, "optimiser tolerance")
        >>> sgd.layer, sgd.uses_device
        ('trained', True)
    """
    return _check("trained", description, name, uses_device)


def matches_derivation(derive: Callable[..., Derivation], sample: Any, *, args: str = "args",
                       key: str | None = None, points: tuple[int, int, int] = (20, 200, 2000),
                       sizes: "dict[str, Any] | list[dict[str, int]] | None" = None, name: str = "matches_derivation",
                       description: str = "") -> Check:
    """The usual symbolic check: the form against the derivation's closed form lambdified with NumPy
    (SciPy for special functions such as ``LambertW``, ``gamma``, ``besselj``) at sampled points.

    derive       the derivation: ``derive()``, or ``derive(**size)`` when it takes the size names of
                 ``sizes`` as keywords (a derivation built at each fixed size, e.g. ``bind(ARGS, d=d)``).
    sample       ``sample(rng)`` → a tuple of argument values; with ``sizes``, ``sample(rng, **size)``;
                 or the argument declarations themselves (``(vector("q", "d"), scalar("m"))``, see
                 :mod:`theory.shapes`), each drawn by its ``draw`` (default standard normal).
    args         the name of the derivation fact holding the arguments, in the form's order:
                 ``Symbol``s, ``Matrix``es of symbols (at a fixed size) or ``MatrixSymbol``s (at
                 symbolic size: made explicit at each sampled size by :func:`theory.shapes.explicit`).
    key          the entry of a dict-valued result (``b.done({"grad": g, "hess": h})``) to compare.
    points       number of points per quick / default / full mode, spread over the sizes.
    sizes        sampled sizes: ``{"d": (2, 4, 8)}`` (every combination of the names' values) or a
                 list of dicts; ``None``: no named sizes.
    name, description   the check's name and description.

    A vector argument is passed to the form as a ``(n,)`` array, a matrix as ``(r, c)``; a vector or
    matrix result is compared entrywise (its number of entries must match). Tolerance: float64
    rounding (:func:`rounding`) of the closed form's operation count at the largest magnitude met.

        >>> import sympy as sp
        >>> def derive():
        ...     b = DerivationBuilder("square"); x = b.fact("args", (sp.Symbol("x"),))[0]
        ...     return b.done(b.step("Expand", sp.expand((x + 1) ** 2)))
        >>> chk = matches_derivation(derive, lambda rng: (rng.normal(),))
        >>> chk.fn(lambda x: x * x + 2 * x + 1, RunContext(mode="quick")).passed
        True
        >>> chk.fn(lambda x: x * x + 1, RunContext(mode="quick")).passed
        False

    Vectors at symbolic size (``MatrixSymbol``), sampled at d = 2, 3, 5:

        >>> from theory.shapes import bind, vector
        >>> ARGS = (vector("q", "d"), vector("k", "d"))
        >>> def dot():
        ...     b = DerivationBuilder("dot"); q, k = b.fact("args", bind(ARGS))
        ...     return b.done(b.step("qᵀk", (q.T * k)[0, 0]))
        >>> chk = matches_derivation(dot, ARGS, sizes={"d": (2, 3, 5)})
        >>> chk.fn(lambda q, k: q @ k, RunContext(mode="quick")).passed, chk.fn(lambda q, k: q @ k[::-1], RunContext(mode="quick")).passed
        (True, False)
    """
    import inspect

    import numpy as np

    from theory import shapes

    combos = _size_combos(sizes)
    _refuse_vacuous(name, points, combos)
    try:
        params = inspect.signature(derive).parameters
    except (TypeError, ValueError):
        params = {}
    per_size = bool(combos[0]) and all(n in params for n in combos[0])
    declared = isinstance(sample, (tuple, list)) and all(isinstance(a, shapes.Arg) for a in sample)

    def draw(rng: Any, size: dict[str, int]) -> tuple:
        if declared:
            return shapes.sample(sample, rng, **size)
        return tuple(sample(rng, **size) if size else sample(rng))

    def fn(form: Any, ctx: RunContext) -> CheckResult:
        n = ctx.size(*points)
        each = -(-n // len(combos))
        errs, ops_max, count, bad = [], 1, 0, []
        for ci, size in enumerate(combos):
            f, ops, g = _lambdified(identity_token(derive), key, args, tuple(sorted(size.items())),
                                    lambda: _closed_form(derive(**size) if per_size else derive(), size, key, args))
            ops_max = largest(ops_max, ops)
            pts = ctx.reference("points", lambda: [draw(ctx.rng("points", ci, i), size) for i in range(each)],
                                identity_token(sample), points, tuple(sorted(size.items())))
            for p in pts:
                ref = _real(np.asarray(f(*(_float64(v) for v in p))), ops)
                got = _real(np.asarray(form(*p)), ops)
                if ref.size != got.size:
                    bad.append(f"{got.shape} entries where the derivation has {ref.shape} at {size or 'its size'}")
                    errs.append(np.inf)
                    continue
                # each point's error against its own magnitude: the largest value over all points as every point's
                # scale let a form wrong by 2x wherever it is small (exp(40x) for x < 0) pass beside e^80 (41b F1)
                at = largest(1.0, float(np.max(np.abs(ref))) if ref.size else 0.0, _intermediates(g, p))
                errs.append(np.abs(np.ravel(got) - np.ravel(ref)) / at)
            count += len(pts)
        if count == 0:
            raise VacuousCheck(f"{name}: 0 points compared ({n} asked at {len(combos)} sizes)")
        where = f" at {len(combos)} sizes ({', '.join(str(s) for s in combos)})" if combos[0] else ""
        r = rounding(worst(errs), ops_max, what=f"the closed form ({ops_max} operations) at {count} points{where}, each "
                     "relative to max(1, its largest |value|)",
                     seeds=[ctx.seed_for("points")], sizes={"points": count, **({"sizes": combos} if combos[0] else {})})
        if bad:
            r.reason = "shape mismatch: " + bad[0]
        return r

    return Check(name, "symbolic", fn, description or "the form against the derivation's closed form at sampled points")


def _size_combos(sizes: "dict[str, Any] | list[dict[str, int]] | None") -> list[dict[str, int]]:
    """The sampled sizes of :func:`matches_derivation`: every combination of a dict's values, a list as given, or the
    one size without names."""
    import itertools

    if sizes is None:
        return [{}]
    if isinstance(sizes, dict):
        names = list(sizes)
        return [dict(zip(names, vals)) for vals in itertools.product(*(tuple(sizes[n]) for n in names))]
    return [dict(c) for c in sizes]


def _closed_form(d: Derivation, size: dict[str, int], key: str | None, args: str) -> tuple[Callable, int, Any]:
    """The derivation's closed form at ``size`` lambdified (NumPy, SciPy), its operation count, and the bound of the
    magnitudes met on the way (None where it cannot be built)."""
    import numpy as np
    import sympy as sp

    from theory import shapes

    expr = d.result[key] if key is not None else d.result
    expr, objs = shapes.explicit(expr, d.facts[args], **size)
    ops = int(sp.count_ops(expr)) + 1
    f = sp.lambdify(shapes.lambdify_args(objs), expr, ["scipy", "numpy"])
    # lambdify_args passes an (r, 1) matrix (a size-1 column: d_v = 1) as a flat list of r entries: its value
    # goes in flat too, else each entry gets a (1,) array and constant entries make a ragged array
    flat = [isinstance(o, sp.MatrixBase) and o.shape[1] == 1 for o in objs]
    try:  # the size of the values float64 rounds at on the way (47b F5: (x+1000)² − (x−1000)² cancels 10⁶)
        g = sp.lambdify(shapes.lambdify_args(objs), _magnitude(expr), ["scipy", "numpy"])
    except Exception:  # noqa: BLE001 - no bound of the intermediates: the result's own size, as before
        g = None
    return ((lambda *p: f(*(np.ravel(v) if fl else v for v, fl in zip(p, flat)))), ops,
            None if g is None else (lambda *p: g(*(np.ravel(v) if fl else v for v, fl in zip(p, flat)))))


def _float64(v: Any) -> Any:
    """A NumPy integer (or boolean) or lower-precision float sample value as float64 (complex64 as complex128) for the
    lambdified closed form: evaluated in int64, ``n*n*n`` wrapped around silently at n = 3·10⁶, and in float32 the
    reference rounded at 10⁻⁸; each refuted a correct form (hostile pass 47b F3): the tolerance is float64 rounding of
    the closed form's operations. Python ints, floats and complex values pass as they are."""
    import numpy as np

    if isinstance(v, (np.integer, np.bool_)) or (isinstance(v, np.ndarray) and v.dtype.kind in "biu"):
        return np.asarray(v, dtype=np.float64) if isinstance(v, np.ndarray) else np.float64(v)
    if isinstance(v, (np.floating, np.complexfloating, np.ndarray)) and np.asarray(v).dtype.itemsize < 8 + \
            8 * (np.asarray(v).dtype.kind == "c"):  # float16/32, complex64: the reference in float32 (47b F3)
        w = np.asarray(v, dtype=np.complex128 if np.asarray(v).dtype.kind == "c" else np.float64)
        return w if isinstance(v, np.ndarray) else w[()]
    return v


#: The derivation lambdified at one size, per (derivation function, result key, arguments, size): a SymPy
#: derivation is the same whatever the seed, mode, device or check that asks, so it is computed once per
#: process, not once per seed (``assert_claim(seeds=(0, 1))`` derived the scaffold's claim at every seed).
_LAMBDIFIED: "OrderedDict[tuple, tuple[Callable, int]]" = OrderedDict()
_LAMBDIFIED_MAX = 64


def _magnitude(e: Any) -> Any:
    """A bound of the size of the values met evaluating ``e`` in floating point: every sum's terms by absolute value,
    products and integer powers of those bounds, any other function by its absolute value (its argument's own
    cancellation is not followed). Float64 rounding of the closed form is relative to this, not to its result: the
    closed form (x + 1000)² − (x − 1000)² = 4000x rounds at 10⁶ (hostile pass 47b F5)."""
    import sympy as sp

    if isinstance(e, sp.MatrixBase):
        return e.applyfunc(_magnitude)
    if not isinstance(e, sp.Basic) or e.is_Atom:
        return sp.Abs(e)
    if e.is_Add:
        return sp.Add(*[_magnitude(a) for a in e.args])
    if e.is_Mul:
        return sp.Mul(*[_magnitude(a) for a in e.args])
    if e.is_Pow and e.exp.is_Integer and e.exp > 0:
        return _magnitude(e.base) ** e.exp
    if e.is_Pow and e.exp.is_Integer:  # 1/d: relative error of d, eps·M(d)/|d|, carried to |1/d|
        return sp.Abs(e) * (_magnitude(e.base) / sp.Abs(e.base)) ** (-e.exp)
    return sp.Abs(e)


def _intermediates(g: Callable | None, p: tuple) -> float:
    """The largest finite bound of the intermediate values at the point ``p`` (0 where there is none)."""
    import numpy as np

    if g is None:
        return 0.0
    try:
        with np.errstate(all="ignore"):
            m = np.abs(np.asarray(g(*(_float64(v) for v in p)), dtype=complex))
    except Exception:  # noqa: BLE001
        return 0.0
    m = m[np.isfinite(m)] if m.ndim else (m[None] if np.isfinite(m) else np.array([]))
    return float(np.max(m)) if m.size else 0.0


def _lambdified(*key_and_compute: Any) -> tuple[Callable, int, Callable | None]:
    *key, compute = key_and_compute
    k = tuple(map(repr, key))
    if k in _LAMBDIFIED:
        _LAMBDIFIED.move_to_end(k)
        return _LAMBDIFIED[k]
    value = _LAMBDIFIED[k] = compute()
    while len(_LAMBDIFIED) > _LAMBDIFIED_MAX:
        _LAMBDIFIED.popitem(last=False)
    return value


def _refuse_vacuous(name: str, points: Any, combos: list[dict[str, int]]) -> None:
    """At registration: a ``matches_derivation`` that cannot compare anything is an error in the claim
    (:class:`RegistryError`, one line): a number of points that is not a positive integer in some mode,
    or a size that is not a positive integer (a size 0 compares empty arrays; a size 1 is valid)."""
    try:
        pts = tuple(points)
    except TypeError:
        pts = ()
    def positive(v: Any) -> bool:
        import operator

        try:
            return not isinstance(v, bool) and operator.index(v) > 0
        except TypeError:
            return False

    if len(pts) != 3 or not all(positive(p) for p in pts):
        raise RegistryError(f"check {name!r}: points={points!r}: the points per quick / default / full mode must be "
                            "three positive integers (a comparison over 0 points cannot reject anything)")
    if not combos:  # ({"d": ()}, []: no size to compare at; combos[0] was a raw IndexError, 39b N2)
        raise RegistryError(f"check {name!r}: sizes gives no size to compare at (an empty list of values or of sizes): "
                            "a comparison at no size cannot reject anything")
    for size in combos:
        for k, v in size.items():
            if not positive(v):
                raise RegistryError(f"check {name!r}: size {k} = {v!r}: a size must be a positive integer (at size 0 "
                                    "every compared array is empty, so nothing can be rejected)")


def _real(a: Any, ops: int) -> Any:
    """A real float array from ``a``; a complex value (SciPy's ``lambertw`` returns one) keeps its
    real part only when its imaginary part is float64 rounding of ``ops`` operations, else NaN (so the
    comparison fails instead of silently dropping the imaginary part)."""
    import numpy as np

    if not np.iscomplexobj(a):
        return np.asarray(a, dtype=float)
    re_, im = np.real(a).astype(float), np.abs(np.imag(a))
    return np.where(im <= 64 * ops * np.finfo(float).eps * np.maximum(1.0, np.abs(re_)), re_, np.nan)


# ------------------------------------------------------------------------------------------------
# notebooks: run a claim object (registered or not)


def example_claim(form: Any = None) -> Claim:
    """The small identity the examples here use, (x+1)^2 = x^2+2x+1 (the one :class:`ClaimCheck`'s example
    builds step by step): a derivation, a ``matches_derivation`` check and a direct numeric one, one planted
    mutant; ``form`` replaces the claimed form (a wrong one makes the claim refuted).

        >>> check_claim(example_claim()).status, check_claim(example_claim(lambda x: x * x + 1)).status
        ('verified', 'refuted')
    """
    import sympy as sp

    def derive():
        b = DerivationBuilder("square")
        x = b.fact("args", (sp.Symbol("x"),))[0]
        return b.done(b.step("Expand", sp.expand((x + 1) ** 2)))

    @numeric("direct evaluation")
    def direct(form, ctx):
        return rounding(abs(form(3.0) - 16.0), 4, scale=16)

    return Claim(id="demo.square", title="(x+1)^2", statement="(x+1)^2 = x^2+2x+1", source="algebra", kind="identity",
                 form=form if form is not None else (lambda x: x * x + 2 * x + 1), derivation=derive,
                 checks=(matches_derivation(derive, lambda r: (r.normal(),)), direct),
                 mutants=(Mutant("one", "wrong constant", "x^2+x+1", lambda x: x * x + x + 1),))


@dataclass
class ClaimCheck:
    """What :func:`check_claim` found: ``status`` (verified / refuted / undecided / error /
    incomplete / evidence), ``message``, ``ok``, the runner's ``result``; prints as a table
    (``str``) and renders as HTML in a notebook.

        >>> import sympy as sp
        >>> def derive():
        ...     b = DerivationBuilder("square"); x = b.fact("args", (sp.Symbol("x"),))[0]
        ...     return b.done(b.step("Expand", sp.expand((x + 1) ** 2)))
        >>> @numeric("direct evaluation")
        ... def direct(form, ctx):
        ...     return rounding(abs(form(3.0) - 16.0), 4, scale=16)
        >>> c = Claim(id="demo.square", title="(x+1)^2", statement="(x+1)^2 = x^2+2x+1", source="algebra",
        ...           kind="identity", form=lambda x: x * x + 2 * x + 1, derivation=derive,
        ...           checks=(matches_derivation(derive, lambda rng: (rng.normal(),)), direct),
        ...           mutants=(Mutant("one", "wrong constant", "x^2+x+1", lambda x: x * x + x + 1),))
        >>> res = check_claim(c)
        >>> res.status, res.ok, "<table>" in res._repr_html_()
        ('verified', True, True)
    """

    result: Any

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def ok(self) -> bool:
        return self.status == "verified" or (self.status == "evidence" and bool(self.result.supports))

    @property
    def message(self) -> str:
        return self.result.message

    def to_json(self) -> dict[str, Any]:
        return self.result.to_json()

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        rows = []
        for o in self.result.obligations:
            cx = o.get("counterexample")
            rows.append(("obligation", str(o.get("name")), str(o.get("status") or ("holds" if o.get("passed") else "fails")),
                         str(o.get("method")), ", ".join(f"{k} = {v}" for k, v in cx.items()) if cx else ""))
        for c in self.result.checks:
            r = c.result
            err = "" if r is None else f"{r.error:.3g} ≤ {r.tolerance:.3g}?" if not math.isnan(r.tolerance) else ""
            why = (r.justification or r.reason or r.skip_reason or "") if r is not None else (c.error_message or "")
            rows.append((c.layer, c.name, c.status, err, why))
        return rows

    def __str__(self) -> str:
        return _text_table(f"{self.result.id}: {self.status}" + (f" ({self.message})" if self.message else ""), self._rows())

    def __repr__(self) -> str:
        return f"<ClaimCheck {self.result.id} {self.status}>"

    def _repr_html_(self) -> str:
        e = html.escape
        return _html_table(f"<b>{e(self.result.id)}</b>: <b>{e(self.status)}</b> {e(self.message)}",
                           ("layer", "name", "status", "measured", "why"), self._rows())


@dataclass
class MutantsRun:
    """What :func:`run_mutants` found: ``claim`` (the unmutated claim's :class:`ClaimCheck`),
    ``rows`` (the runner's kill-matrix rows), ``all_killed``, ``refused`` (why no kill counts, when
    the unmutated claim is not verified); table and HTML like :class:`ClaimCheck`.

        >>> claim = example_claim  # (x+1)^2 = x^2+2x+1 with one planted mutant, as in ClaimCheck's example
        >>> m = run_mutants(claim(lambda x: x * x + 2 * x + 1))
        >>> m.all_killed, [r.killed_by for r in m.rows]
        (True, ['matches_derivation'])
        >>> wrong = run_mutants(claim(lambda x: x * x + 1))  # the claim itself is refuted: nothing counts
        >>> wrong.all_killed, bool(wrong.refused), [r.killed for r in wrong.rows]
        (False, True, [False])
    """

    claim: ClaimCheck
    rows: list[Any] = field(default_factory=list)
    refused: str = ""

    @property
    def all_killed(self) -> bool:
        return not self.refused and all(r.killed for r in self.rows)

    def _table(self) -> list[tuple[str, str, str, str]]:
        out = []
        for r in self.rows:
            who = "not counted: claim not verified" if r.refused else (r.killed_by if r.killed else "SURVIVED")
            margin = "" if not r.killed else ("∞" if math.isinf(r.error / r.tolerance if r.tolerance else math.inf)
                                              else f"{r.error / r.tolerance:.3g}")
            out.append((r.mutant, r.kind, who, margin))
        return out

    def _head(self) -> str:
        return self.refused or f"{sum(r.killed for r in self.rows)}/{len(self.rows)} killed"

    def __str__(self) -> str:
        return _text_table(f"{self.claim.result.id}: {self._head()}", self._table())

    def __repr__(self) -> str:
        return f"<MutantsRun {self.claim.result.id} all_killed={self.all_killed}>"

    def _repr_html_(self) -> str:
        e = html.escape
        return _html_table(f"<b>{e(self.claim.result.id)}</b>: {e(self._head())}", ("mutant", "kind", "killed by", "margin"),
                           self._table())


def _text_table(head: str, rows: list[tuple[str, ...]]) -> str:
    """The plain-text view of :class:`ClaimCheck` and :class:`MutantsRun`: ``head``, then one line a row."""
    return "\n".join([head] + ["  " + " | ".join(r) for r in rows])


def _html_table(head: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Their notebook view: ``head`` (HTML, escaped by the caller) above a table of ``rows`` under ``columns``."""
    e = html.escape
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<p>{head}</p><table><tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>" + body + "</table>"


def _require_claim(claim: Any, fn: str) -> Claim:
    """``claim`` itself when it is a :class:`Claim`; anything else (an id, ``None``) is one
    ``InputError`` line in ``fn``'s words, not an ``AttributeError`` from inside."""
    if isinstance(claim, Claim):
        return claim
    from theory.validation import InputError

    hint = ": for a registered id use get_claim(id) or run_claims(id)" if isinstance(claim, str) else ""
    raise InputError(f"{fn}: claim must be a Claim object, got {claim!r:.80} ({type(claim).__name__}){hint}")


def _ctx(mode: str, seed: int, device: str) -> RunContext:
    """The run's context, once the plugins' time limits are read: a bad ``$TVERIFY_PLUGIN_*_TIMEOUT``
    raises :class:`~theory.validation.InputError` with the command's one line."""
    from proofs_checks.claims import plugin_timeouts
    from proofs_checks.errors import UsageError
    from theory.validation import InputError

    try:
        plugin_timeouts()
    except UsageError as exc:
        raise InputError(" ".join(exc.format_message().split())) from None
    from proofs_checks.context import MODES

    if not isinstance(mode, str) or mode not in MODES:  # one line, not a ValueError from RunContext (hostile pass 5, M5)
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r:.60}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**32 - 1:
        raise InputError(f"seed must be a whole number in 0 … 4294967295, got {seed!r:.60}")
    if device not in ("cpu", "cuda"):  # "cudax", "meta", "CPU" were run as given (hostile pass 12a N4)
        raise InputError(f"device must be 'cpu' or 'cuda', got {device!r:.60}")
    if device == "cuda":  # as `tverify run --device cuda` and run_claims: never the CPU in its place (12b F6)
        from numerics.torch_utils import cuda_available

        if not cuda_available():
            raise InputError("device='cuda': torch sees no CUDA device on this machine (use device=\"cpu\")")
    return RunContext(mode=mode, seed=seed, device=device)


def check_claim(claim: Claim, *, mode: str = "quick", seed: int = 0, device: str = "cpu") -> ClaimCheck:
    """Validate and run a claim object (it need not be registered): its derivation's obligations
    and every check, exactly as ``tverify run`` does. Raises :class:`RegistryError` when the
    claim is incomplete. See the module docstring and :class:`ClaimCheck` for a verified claim.

        >>> bare = Claim(id="demo.bare", title="t", statement="s", source="-", kind="identity", form=1.0,
        ...              checks=(Check("direct", "numeric", lambda form, ctx: exact(form - 1.0, "x")),),
        ...              mutants=(Mutant("two", "wrong constant", "2", 2.0),))
        >>> check_claim(bare)
        Traceback (most recent call last):
        ...
        proofs_checks.claim_model.RegistryError: claim 'demo.bare': no derivation (derivation=...) and no symbolic check: an identity needs both, or no_symbolic="why it has none"
        >>> check_claim(Claim(**{**bare.__dict__, "no_symbolic": "a table of counts"})).status
        'verified'
    """
    from proofs_checks.registry import refuse_builtin_group
    from proofs_checks.runner import run_claim

    _require_claim(claim, "check_claim").validate()
    refuse_builtin_group(claim)
    return ClaimCheck(run_claim(claim, _ctx(mode, seed, device)))


def run_mutants(claim: Claim, *, mode: str = "quick", seed: int = 0, device: str = "cpu") -> MutantsRun:
    """The kill matrix of a claim object, as ``tverify mutants``: the claim runs first; when it is
    not verified, no mutant runs and none is called killed (``refused`` says why); see
    :class:`MutantsRun` for both cases.

        >>> c = Claim(id="demo.three", title="t", statement="3", source="-", kind="identity", form=3.0,
        ...           no_symbolic="a count", checks=(Check("count", "numeric", lambda f, ctx: exact(f - 3, "3")),),
        ...           mutants=(Mutant("four", "wrong constant", "4", 4.0),))
        >>> [(r.mutant, r.killed) for r in run_mutants(c).rows]
        [('four', True)]
    """
    from proofs_checks.registry import refuse_builtin_group
    from proofs_checks.runner import refusal_reason, refused_mutant, run_claim, run_mutant

    _require_claim(claim, "run_mutants").validate()
    refuse_builtin_group(claim)
    ctx = _ctx(mode, seed, device)
    base = run_claim(claim, ctx)
    why = refusal_reason(base)
    if why:
        return MutantsRun(ClaimCheck(base), [refused_mutant(claim, m, why, mode) for m in claim.all_mutants()], why)
    return MutantsRun(ClaimCheck(base), [run_mutant(claim, m, ctx) for m in claim.all_mutants()])
