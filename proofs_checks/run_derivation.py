"""A claim's derivation as a run reports it: its steps (text, LaTeX, MathML, how each was obtained), its obligations
decided within the derivation budget (``TVERIFY_DERIVATION_BUDGET``), and the premises it names. Split out of
:mod:`proofs_checks.runner`, which re-exports :func:`derivation_info`."""

from __future__ import annotations

import contextlib
import math
import signal
import time
from typing import Any, Callable

from proofs_checks.fingerprint import derivation_budget
from proofs_checks.registry import Claim
from theory.validation import printable

def _step_dicts(d: Any) -> list[dict[str, str]]:
    """Steps as ``[{"text", "latex", "mathml", "how", "role", "compact", "pretty", "key"}]`` (``how``:
    derived, assumed or argued; ``key``: the name clauses cite a premise by); printing never raises."""
    try:
        from proofs_checks.mathml import expr_mathml
    except Exception:  # pragma: no cover - latex2mathml missing: steps keep text and LaTeX
        expr_mathml = None
    steps = []
    for s in getattr(d, "steps", ()) or ():
        expr = getattr(s, "expr", None)
        try:
            latex = s.latex() if hasattr(s, "latex") else ("" if expr is None else str(expr))
            latex = latex if isinstance(latex, str) else str(latex)
        except Exception:
            try:
                latex = "" if expr is None else str(expr)
            except Exception:
                latex = ""
        mathml = ""
        if expr_mathml is not None and (latex or expr is not None):
            try:
                mathml = expr_mathml(expr, latex)
            except Exception:  # pragma: no cover - expr_mathml already never raises
                mathml = ""
        try:
            compact = s.compact_latex() if hasattr(s, "compact_latex") else ""
        except Exception:
            compact = ""
        try:
            text = str(getattr(s, "text", s))
        except Exception:
            text = "(step text could not be printed)"
        try:
            pretty = s.pretty() if hasattr(s, "pretty") else ""
        except Exception:
            pretty = ""
        steps.append({"text": text, "latex": latex, "mathml": mathml, "how": getattr(s, "how", "derived"),
                      "role": getattr(s, "role", ""), "compact": compact, "pretty": pretty,
                      "key": str(getattr(s, "key", "") or "")})
    return steps


def derivation_info(claim: Claim, *, obligations: bool = True) -> dict[str, Any]:
    """The claim's derivation for reports and ``tverify show``: ``steps`` (each marked ``how``:
    derived, assumed or argued), ``obligations`` (each evaluated: ``passed``, ``residual``, ``method``),
    ``provenance`` of the closed form, ``legend`` of symbols, ``assumptions`` (the texts of the
    assumed steps) and ``error`` (the derivation crashed: its message, else ``None``)."""
    iso = ISOLATED_DERIVATION.get(getattr(claim, "id", None))
    if iso is not None and iso[0] is claim and claim.derivation is not None:  # a plugin's: in a child process
        return iso[1](claim, obligations)
    return derivation_info_here(claim, obligations=obligations)


#: claim id -> (the registered claim, how its derivation is built): a plugin claim's derivation runs in
#: a child process as its checks do (``proofs_checks.claims._plugins``): ``os._exit(0)`` in a plugin's
#: derivation ended ``tverify run`` with exit 0 and nothing printed
ISOLATED_DERIVATION: dict[str, tuple[Claim, Callable[..., dict]]] = {}


def derivation_info_here(claim: Claim, *, obligations: bool = True) -> dict[str, Any]:
    """:func:`derivation_info` computed in this process (a plugin claim's child process calls it)."""
    info: dict[str, Any] = {"steps": [], "obligations": [], "provenance": {}, "legend": {}, "assumptions": [], "error": None,
                            "timeout": None}
    if claim.derivation is None:
        return info
    if _builtin(claim):  # computed once per source version (docs/catalogue.json, by source fingerprint)
        from proofs_checks.fingerprint import cached_derivation

        cached = cached_derivation(claim.id)
        if cached is not None:
            cached.pop("hypotheses", None)
            try:  # the catalogue keeps no MathML (pages need it): from each step's LaTeX
                from proofs_checks.mathml import expr_mathml

                for s in cached.get("steps") or []:
                    s.setdefault("mathml", expr_mathml(None, s.get("latex") or "") if s.get("latex") else "")
            except Exception:  # pragma: no cover - latex2mathml missing: steps keep text and LaTeX
                pass
            return {**info, **cached, "cached": True}
    from theory.derivation import reset_progress

    reset_progress()
    budget = _budget(derivation_budget())  # bound before the timer starts: it may ring inside __enter__
    try:
        with budget:
            d = claim.derivation()
            budget.phase = "the obligations"
            if obligations:
                info["obligations"] = [r.to_json() for r in d.check_obligations()]
    except _OutOfTime:
        info["timeout"] = budget.stopped["where"]
        info["obligations"] = []
        return info
    except Exception as exc:
        if "d" in locals():  # the derivation was built; its obligations could not be evaluated
            info["error"] = f"obligations could not be evaluated: {type(exc).__name__}: {exc}"
        else:
            info["error"] = f"{type(exc).__name__}: {exc}"
            return info
    except SystemExit as exc:  # never the process's exit status (sys.exit(0) would read as success)
        info["error"] = f"the derivation called sys.exit({printable(exc.code, repr)})"
        return info
    info["steps"] = _step_dicts(d)
    gaps = [] if _builtin(claim) else _unnamed_premises(claim, d)  # (built-in claims: tests/test_derived_steps.py)
    if gaps:
        info["error"] = gaps[0]
    info["provenance"] = dict(getattr(d, "provenance", {}) or {})
    info["legend"] = dict(getattr(d, "legend", {}) or {})
    texts = getattr(d, "assumption_texts", None)
    info["assumptions"] = (list(texts()) if callable(texts) else
                           [s["text"] for s in info["steps"] if s["how"] != "derived"])
    if not _builtin(claim):  # a plugin's texts, made as it ran: escape sequences shown, never obeyed (46b F13)
        from proofs_checks.errors import visible_all

        info = visible_all(info)
    return info


def _unnamed_premises(claim: Claim, d: Any) -> list[str]:
    """One line per clause labelled derived (or derived at sizes) that rests on a typed-in premise or argued step of
    the derivation without naming it in ``rests_on``: it read "derived ∀ sizes" while SymPy derived nothing
    (hostile pass 46b F3); the claim is then an error, as a crashed derivation is."""
    from theory.derivation import premise_gaps

    out = []
    clauses = getattr(claim, "statement_clauses", None)  # (a stand-in claim of a caller's may have none)
    for cl in clauses() if callable(clauses) else ():
        if cl.evidence in ("derived", "derived_at"):
            gaps = premise_gaps(d, cl.name, tuple(cl.rests_on))
            if gaps:
                out.append(f"clause {cl.name!r} is labelled {cl.evidence} but rests on {gaps[0]}"
                           + (f" and {len(gaps) - 1} more" if len(gaps) > 1 else "")
                           + ", which it does not name (Clause(rests_on=(key, ...)), a key given with assume(key=...))")
    return out


def _builtin(claim: Claim) -> bool:
    """A claim of this project's own catalogue: the very object its claim modules registered
    (:func:`proofs_checks.registry.is_builtin`) — never a plugin's claim whose check functions say
    ``__module__ = "proofs_checks.claims.…"`` (hostile pass 4, N12: that exempted a false ``3x = 2x``
    from the power rule, verified)."""
    from proofs_checks.registry import is_builtin

    return is_builtin(claim)


class _OutOfTime(BaseException):
    """Raised by the timer of :func:`_budget` inside a derivation that ran past its budget."""


class _budget:
    """``with _budget(seconds) as stopped:`` raises :class:`_OutOfTime` in the block after ``seconds``, with
    ``stopped["where"]`` saying which step the derivation had reached. A timer thread raises it in the block's thread
    (asynchronously, at its next instruction), not a ``SIGALRM``: an alarm sent from outside was taken for the budget's
    own and the claim reported undecided, and a caller's own real-time timer (pytest-timeout, ``signal.alarm``) was
    replaced and cancelled for good (hostile pass 40a F1, F2). A block in the main thread blocked in a system call (a
    sleep, a wait on a process or a lock) is also sent ``SIGURG``, whose default is to be ignored, with a handler of the
    block's own for its length (only where the process has none of its own): the call is interrupted and the
    exception raised there; the budget of 1 s waited for a 15 s sleep to end (41b F2). In another thread (a Dask
    worker's), or where the process handles ``SIGURG`` itself, a blocking call ends first."""

    def __init__(self, seconds: float):
        import threading

        self.seconds, self.stopped = seconds, {"where": ""}
        # what the block is doing when no derivation builder is open (set to "the obligations" once it is built): a
        # derivation stopped in its own code before its first step was said to be "in the obligations" (45b F3)
        self.phase = "the derivation's own code, before any builder's first step"
        self._timer, self._lock, self._open, self._fired, self._tid = None, threading.Lock(), False, False, None

    @staticmethod
    def _raise_in():
        import ctypes

        return getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)

    def __enter__(self):
        import ctypes
        import threading

        raise_in = self._raise_in()
        if raise_in is None or not math.isfinite(self.seconds):  # inf: no limit
            return self.stopped
        self._tid = threading.get_ident()

        def ring() -> None:
            with self._lock:
                if not self._open:
                    return
                self._say()
                self._fired = True
                raise_in(ctypes.c_ulong(self._tid), ctypes.py_object(_OutOfTime))
                if self._nudge is not None:  # out of a blocking system call (41b F2): its handler runs, the exception
                    with contextlib.suppress(OSError):  # is raised there
                        signal.pthread_kill(self._tid, self._nudge)

        self._nudge, self._handler = None, None
        nudge = getattr(signal, "SIGURG", None)  # (ignored by default: nothing else of the process's reads it)
        if nudge is not None and threading.current_thread() is threading.main_thread() \
                and signal.getsignal(nudge) == signal.SIG_DFL:
            self._handler = signal.signal(nudge, lambda *_: None)
            self._nudge = nudge
        self._t0 = time.monotonic()
        self._open = True
        self._timer = threading.Timer(self.seconds, ring)
        self._timer.daemon = True
        self._timer.start()
        return self.stopped

    def _say(self) -> None:
        from theory.derivation import progress

        self.stopped["where"] = (f"did not finish in {self.seconds:g} s (TVERIFY_DERIVATION_BUDGET); stopped in "
                                 + (progress() or self.phase))

    def __exit__(self, *exc):
        if self._timer is not None:
            import ctypes

            with self._lock:
                self._open = False
                self._timer.cancel()
                if self._nudge is not None:
                    signal.signal(self._nudge, self._handler)
                if self._fired and exc[0] is not _OutOfTime:  # rung as the block ended: not raised after it
                    self._raise_in()(ctypes.c_ulong(self._tid), None)
                late = exc[0] is None and time.monotonic() - self._t0 > self.seconds
            if late:  # past the budget before the timer's thread ran (a budget of a microsecond): the same verdict
                self._say()
                raise _OutOfTime()
        return False


def _derivation_steps(claim: Claim) -> tuple[list[dict[str, str]], str | None]:
    """Backwards-compatible: the steps and the derivation error (see :func:`derivation_info`)."""
    info = derivation_info(claim, obligations=False)
    return info["steps"], info["error"]
