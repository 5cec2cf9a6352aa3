"""Claims plugins behind a process boundary (issue 36).

A plugin is someone else's code: at import or in a check it can end the process it runs in
(``os._exit(0)``, a signal, a segfault in an extension), loop forever or raise
``KeyboardInterrupt`` itself. In-process, ``os._exit(0)`` ended ``tverify run``/``list``/``show``
with exit status 0 and nothing printed (a green CI job), and a loop blocked every claim command
without a word. Here:

* **Import, probed first.** Each plugin entry point is imported once in a fresh Python process
  (:func:`probe`), with a time limit (``$TVERIFY_PLUGIN_IMPORT_TIMEOUT``, default
  :data:`IMPORT_TIMEOUT` s; a note on stderr after :data:`IMPORT_NOTE` s says which plugin is being
  waited for). A plugin whose probe dies, hangs past the limit or raises is skipped with one
  warning line; only a plugin whose probe imported cleanly is imported in this process. The probe
  costs a Python start plus the plugin's own imports, and only when a plugin is installed.
* **Checks, in a child.** Every check of a claim registered by a plugin runs in a child process
  (the forkserver of :mod:`proofs_checks.sanity._isolate`, shared with ``tverify check``), under a
  time limit per check (``$TVERIFY_PLUGIN_CHECK_TIMEOUT``, default :data:`CHECK_TIMEOUT` s), with a
  "still running" line on stderr after 2 s of silence and every 5 s after. The child sends the
  check's result back as JSON; this process computes the check's status and the claim's verdict.
  An exit of any kind, a signal, the time limit, the memory limit or a ``KeyboardInterrupt`` raised
  by the plugin makes that check ``error`` (one line naming the check and the cause), so the claim is
  ``error`` and ``tverify run`` exits 1 — never 0. A real Ctrl-C (SIGINT to this process) still
  stops the run with 130.
* The built-in claims keep running in this process: nothing changes for them.
"""

from __future__ import annotations

import builtins  # max/min of times and lengths (no NaN here); claim modules use worst()/largest()

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

#: seconds a plugin's import may take before it is skipped ($TVERIFY_PLUGIN_IMPORT_TIMEOUT)
IMPORT_TIMEOUT = 20.0
#: seconds after which a note on stderr says which plugin's import is awaited
IMPORT_NOTE = 2.0
IMPORT_REPEAT = 5.0
#: seconds one check of a plugin claim may take in its child process ($TVERIFY_PLUGIN_CHECK_TIMEOUT)
CHECK_TIMEOUT = 600.0
#: set in the processes that run plugin code for this module (no nested probes or children there)
CHILD_ENV = "TVERIFY_PLUGIN_CHILD"
#: longest message of a plugin's failure (a plugin's error can be 50 kB)
MAX_MESSAGE = 300
#: longest message of a failed plugin check (the claim's message adds "check NAME crashed: ")
MESSAGE = 240


from proofs_checks.claims._plugin_cache import _DerivationCache  # noqa: E402 (the tests read it here too)


class PluginImportFailed(Exception):
    """The probe of a plugin's import failed (died, hung past the limit, or raised): the message says how."""


def short(text: Any, n: int = MAX_MESSAGE) -> str:
    """``text`` on one line, at most ``n`` characters.

    >>> short("a\\n  b" + "x" * 400, 10)
    'a bxxxxxx…'
    """
    from proofs_checks.errors import visible

    text = visible(" ".join(str(text).split()))  # a plugin's escape sequences shown, not obeyed (F4)
    return text if len(text) <= n else text[: n - 1] + "…"


def seconds(env: str, default: float) -> float:
    """The seconds ``$env`` sets (``default`` when unset); a bad value is a one-line usage error
    (:func:`proofs_checks.claims.plugin_seconds`, the one reader)."""
    from proofs_checks.claims import plugin_seconds

    return plugin_seconds(env, default)


def in_child() -> bool:
    """Whether this process is one of those that run a plugin's code (the import probe, a check's child): they mark
    themselves with their own process id, so the mark set by hand, or inherited by the user's process or a process
    the plugin starts, is no mark (an inherited "1" ran plugins unprobed in the Python API, where an ``os._exit(0)``
    ended the user's test session with exit 0; hostile passes 7 and 11)."""
    return os.environ.get(CHILD_ENV) == str(os.getpid())


def probed(ep: Any) -> bool:
    """Whether ``ep`` is probed in a child: a real entry point from package metadata (a stand-in object
    that only this process knows, e.g. a test's, cannot be imported elsewhere), outside a child, on a
    POSIX system (the probe waits on a pipe with ``select``); elsewhere the import runs in this
    process under the thread time limit of :func:`proofs_checks.claims._load_one`. An entry point of the
    ``importlib_metadata`` backport is one too: once it is imported (Dask does, in a ``--cluster`` worker), its
    finder answers ``importlib.metadata.entry_points`` with its own class, and a plugin's checks ran unisolated
    there (hostile pass 45b F8)."""
    from importlib.metadata import EntryPoint

    backport = getattr(sys.modules.get("importlib_metadata"), "EntryPoint", None)
    real = isinstance(ep, EntryPoint) or (isinstance(backport, type) and isinstance(ep, backport))
    return real and not in_child() and os.name == "posix" and not _daemonic()


def _daemonic() -> bool:
    """Whether this process is a daemonic multiprocessing process (a ``dask worker`` of a long-lived cluster), which
    may start no child: there the plugin's code runs in this process, as it did before 45b F8's fix (since that fix,
    every check there was an error, "cannot start the check's process from a daemonic process"). The local clusters
    tverify starts have non-daemonic workers, where plugins are isolated."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "daemon", False))


# ------------------------------------------------------------------------------------------------
# the import probe

_PROBE = r"""
import sys
sys.path[:] = @PATH@
from proofs_checks.syspath import without_own  # tverify's packages bound; an editable checkout's examples/, tests/,
sys.path[:] = without_own(sys.path)  # benchmarks/ then never shadow a user's packages (hostile pass 18a F1)
import json, os
os.environ["TVERIFY_PLUGIN_CHILD"] = str(os.getpid())  # this process runs a plugin's code (claims._plugins.in_child)
fd = int(sys.argv[1])
name, value, group = sys.argv[2:5]

def send(doc):
    data = json.dumps(doc).encode("utf-8")
    while data:
        data = data[os.write(fd, data):]
    os.close(fd)

try:
    from importlib.metadata import EntryPoint
    obj = EntryPoint(name, value, group).load()
    if callable(obj):
        obj()
except KeyboardInterrupt:
    send({"error": "KeyboardInterrupt raised by the plugin itself (not a Ctrl-C from the terminal)"})
except SystemExit as exc:
    from theory.validation import printable  # (an exit code or exception whose repr/str raises: <unprintable X>)
    send({"error": "SystemExit: called sys.exit(%s)" % printable(exc.code, repr)})
except BaseException as exc:
    from theory.validation import exception_text
    send({"error": exception_text(exc)[:2100]})
else:
    send({"ok": True})
os._exit(0)
"""


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return f"signal {-code}"


def probe(ep: Any, *, stream=None) -> float:
    """Import the entry point ``ep`` (and call what it names, when callable) in a fresh Python process
    with this one's working folder and environment and its ``sys.path`` reordered, set before any
    import (:func:`proofs_checks.guards.child_sys_path`; ``python -P``); the seconds it took. Raises
    :class:`PluginImportFailed` (a short reason) when that process ends without reporting a clean
    import (``os._exit``, a signal), does not finish within ``$TVERIFY_PLUGIN_IMPORT_TIMEOUT`` s, or
    reports an exception (``KeyboardInterrupt`` and ``sys.exit`` included). The plugin's own output
    there is discarded (the import in this process shows it). A real Ctrl-C here ends the probe and
    is raised."""
    from proofs_checks.guards import child_sys_path

    stream = stream if stream is not None else sys.stderr
    limit = seconds("TVERIFY_PLUGIN_IMPORT_TIMEOUT", IMPORT_TIMEOUT)
    env = {k: v for k, v in os.environ.items() if k != CHILD_ENV}  # the probe marks itself (_PROBE)
    r, w = os.pipe()
    t0 = time.monotonic()
    try:
        # -P and the path set first: nothing in the working folder runs (a json.py there ran, and the
        # plugin was blamed)
        source = _PROBE.replace("@PATH@", repr(child_sys_path()))
        from proofs_checks.lifetime import dies_with_this_process

        proc = subprocess.Popen([sys.executable, "-P", "-c", source, str(w), str(ep.name), str(ep.value),
                                 str(ep.group)], pass_fds=(w,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                                preexec_fn=dies_with_this_process())
    except OSError as exc:
        os.close(r)
        os.close(w)
        raise PluginImportFailed(f"its import could not be tried in a separate process ({short(exc, 120)})") from None
    os.close(w)
    chunks: list[bytes] = []
    # a note after IMPORT_NOTE seconds, then every IMPORT_REPEAT seconds: never a silent stretch
    next_note = IMPORT_NOTE if limit > IMPORT_NOTE else float("inf")
    try:
        while True:
            left = limit - (time.monotonic() - t0)
            if left <= 0:
                _kill(proc)
                raise PluginImportFailed(f"its import did not finish within {limit:g} s "
                                         "($TVERIFY_PLUGIN_IMPORT_TIMEOUT)")
            wait = builtins.min(left, next_note - (time.monotonic() - t0))
            ready, _, _ = select.select([r], [], [], builtins.max(wait, 0.0))
            if not ready:
                so_far = time.monotonic() - t0
                if so_far >= next_note:
                    next_note += IMPORT_REPEAT
                    _write(stream, f"tverify: waiting for claims plugin {short(repr(ep.name), 60)} to import "
                                   f"({so_far:.0f} s so far; skipped after {limit:g} s)\n")
                continue
            data = os.read(r, 65536)
            if not data:
                break
            if sum(map(len, chunks)) < 1 << 20:
                chunks.append(data)
            if _report(chunks) is not None:  # complete (a process the plugin started may hold the pipe open)
                break
        try:
            code = proc.wait(timeout=builtins.max(1.0, limit - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:  # reported, then stuck on exit: the report stands
            _kill(proc)
            code = 0
    except BaseException:  # a real Ctrl-C (or the time limit): the probe goes with it
        _kill(proc)
        raise
    finally:
        os.close(r)
        try:  # whatever the plugin started while importing (its own session: the group is the probe's)
            os.killpg(proc.pid, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    doc = _report(chunks)
    if isinstance(doc, dict) and doc.get("ok"):
        return time.monotonic() - t0
    if isinstance(doc, dict) and doc.get("error"):
        raise PluginImportFailed(short(doc["error"]))
    how = (f"was ended by {_signal_name(code)}" if code is not None and code < 0 else
           f"ended the process with exit status {code} (os._exit, or a crash)")
    raise PluginImportFailed(f"its import {how} before it finished")


def _report(chunks: list) -> dict | None:
    """The probe's report, once complete (a JSON object), else ``None``."""
    try:
        doc = json.loads(b"".join(chunks).decode("utf-8")) if chunks else None
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: what it started goes too
    except (OSError, AttributeError):
        try:
            proc.kill()
        except OSError:
            pass
    try:
        proc.wait(timeout=5)
    except Exception:  # noqa: BLE001 - best effort
        pass


def _write(stream, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


# ------------------------------------------------------------------------------------------------
# checks of plugin claims, in a child


def isolate(ep: Any, claim_ids) -> None:
    """Run every check of these claims (registered by the entry point ``ep``) in a child process
    from now on (:func:`run_check`)."""
    from proofs_checks import runner
    from proofs_checks.registry import registry

    spec = (str(ep.name), str(ep.value), str(ep.group))
    for cid in claim_ids:
        if cid in registry:
            runner.ISOLATED[cid] = (registry.get(cid), lambda check, form, claim, ctx, _s=spec: run_check(_s, check, form, claim, ctx))
            runner.ISOLATED_DERIVATION[cid] = (registry.get(cid),
                                               lambda claim, obligations, _s=spec: run_derivation(_s, claim, obligations))


def run_derivation(spec: tuple, claim: Any, obligations: bool) -> dict:
    """A plugin claim's derivation (and its obligations) built in a child process, as its checks
    run: an exit, a signal, a hang past the derivation budget or a ``KeyboardInterrupt`` there is the
    derivation's ``error`` (so the claim is ``error``, never verified), one line."""
    import importlib

    runner = _runner()
    iso = importlib.import_module("proofs_checks.sanity._isolate")
    empty = {"steps": [], "obligations": [], "provenance": {}, "legend": {}, "assumptions": [], "error": None,
             "timeout": None}
    from proofs_checks.claims import PLUGIN_SOURCES

    # kept only where the claim declares its derivation depends on its code alone (claims/_plugin_cache.py)
    cache = _DerivationCache(claim.id, PLUGIN_SOURCES if getattr(claim, "derivation_pure", False) else None)
    hit = cache.read(obligations)
    if hit is not None:
        return {**empty, **hit, "cached": True}
    label, what = f"claims plugin {short(repr(spec[0]), 60)}", f"derivation of {short(claim.id, 80)}"
    req = {"ep": list(spec), "claim": claim.id, "obligations": bool(obligations)}
    try:
        payload = iso.run_isolated("proofs_checks.claims._plugins:derivation_task", req, label=label, what=what,
                                   timeout=runner.derivation_budget() + 60.0, progress=_runner().PROGRESS_LINES)
    except iso.UserCodeError as exc:
        msg = str(exc)
        for a, b in ((f"{label}: {what}: ", ""), (f"{label}: ", ""), ("the process running your code", "its process"),
                     (" (the process running your code was stopped)", ""), ("--timeout", "the derivation budget"),
                     ("before the check finished", "before it finished")):
            msg = msg.replace(a, b)
        return {**empty, "error": short(f"plugin {short(repr(spec[0]), 40)}: the derivation: {msg}", MESSAGE)}
    except iso.ChildInternalError as exc:
        return {**empty, "error": short(str(exc).partition("\n")[0], MESSAGE)}
    if payload.get("load_error"):
        return {**empty, "error": short(payload["load_error"], MESSAGE)}
    info = payload.get("info")
    if not isinstance(info, dict):
        return {**empty, "error": "the derivation's process sent no result"}
    cache.write(info, obligations, payload.get("reads"))
    return {**empty, **info}


def derivation_task(req: dict, obj: Any, arrays: dict) -> dict:  # pragma: no cover - runs in the child
    """In the child: import the plugin, find the claim, build its derivation as the runner does."""
    from proofs_checks.runner import derivation_info_here

    from proofs_checks.claims._plugin_cache import Reads

    with Reads() as reads:  # what it read while it ran: kept beside a declared-pure derivation (25a F3, 26a F1/F3)
        claim, problem = _claim_in_child(req, "derivation")
        if problem is not None:
            return problem
        info = derivation_info_here(claim, obligations=bool(req.get("obligations", True)))
    return {"info": json.loads(json.dumps(info, default=str)), "reads": reads.result()}


def _role(claim: Any, form: Any) -> list | None:
    """How the child finds ``form`` on its own copy of the claim (``None``: sent by value)."""
    if form is claim.form:
        return ["form"]
    if getattr(claim, "stated", None) is not None and form is claim.stated:
        return ["stated"]
    for m in claim.all_mutants():
        if m.form is form:
            return ["mutant", m.name]
    return None


def run_check(spec: tuple, check: Any, form: Any, claim: Any, ctx: Any):
    """One check of a plugin claim in a child process; the :class:`~proofs_checks.runner.CheckOutcome`
    rebuilt here (its status recomputed from the measured result), or an ``error`` outcome of one line
    when the child ends without a result."""
    import importlib

    from proofs_checks.runner import CheckOutcome

    iso = importlib.import_module("proofs_checks.sanity._isolate")  # a layer above: by name, as its tasks are
    role = _role(claim, form)
    index = next((i for i, c in enumerate(claim.checks) if c is check), None)
    if index is None:  # not one of the claim's own checks: nothing the child could find
        from proofs_checks.runner import run_check_here

        return run_check_here(check, form, claim, ctx)
    req = {"ep": list(spec), "claim": claim.id, "check": index, "role": role, "mode": ctx.mode, "seed": ctx.seed,
           "device": ctx.device, "figure_dir": str(ctx.figure_dir) if ctx.figure_dir is not None else None}
    label, what = f"claims plugin {short(repr(spec[0]), 60)}", f"check {short(claim.id, 80)}:{short(check.name, 60)}"
    try:
        payload = iso.run_isolated("proofs_checks.claims._plugins:check_task", req, label=label, what=what,
                                   obj=None if role is not None else ("form", form),
                                   timeout=seconds("TVERIFY_PLUGIN_CHECK_TIMEOUT", CHECK_TIMEOUT),
                                   progress=_runner().PROGRESS_LINES)
    except iso.UserCodeError as exc:  # the child ended without a result, or the plugin raised KeyboardInterrupt
        msg = str(exc)
        for a, b in ((f"{label}: {what}: ", ""), (f"{label}: ", ""), (" (the process running your code was stopped)", ""),
                     (" (lower the sizes, or raise --max-memory)", ""), ("the process running your code", "its process"),
                     ("--timeout", "$TVERIFY_PLUGIN_CHECK_TIMEOUT")):
            msg = msg.replace(a, b)
        return CheckOutcome(check.name, check.layer, "error", None,
                            error_message=short(f"plugin {short(repr(spec[0]), 40)}: {msg}", MESSAGE))
    except iso.ChildInternalError as exc:
        first, _, rest = str(exc).partition("\n")
        return CheckOutcome(check.name, check.layer, "error", None, error_message=short(first, MESSAGE),
                            traceback=rest or None)
    if payload.get("load_error"):
        return CheckOutcome(check.name, check.layer, "error", None, error_message=short(payload["load_error"], MESSAGE))
    _add_scaled(form, payload.get("scaled"))
    return _rebuild(payload.get("outcome") or {}, check)


def _scale_counter(form: Any):
    """The counter of a scaled or perturbed form (continuous mutants, the power rule; ``None`` otherwise)."""
    if not (callable(form) or isinstance(form, dict)):
        return None
    from proofs_checks.scaling import scale_counter

    return scale_counter(form)


def _add_scaled(form: Any, n: Any) -> None:
    """Carry what a scaled or perturbed form changed in the child (floats, integers, the types it left) back
    to its counter here (kept there, the count read 0 and every plugin claim was "not scalable")."""
    counter = _scale_counter(form) if isinstance(n, (int, dict)) and n else None
    if counter is not None:
        counter.add(n)


def _rebuild(d: dict, check: Any):
    """The outcome from the child's JSON; the status follows from the result, computed here."""
    import math as _m

    from proofs_checks.registry import CheckResult, visible
    from proofs_checks.runner import CheckOutcome

    r = d.get("result")
    if not isinstance(r, dict):
        return CheckOutcome(d.get("name") or check.name, d.get("layer") or check.layer, "error", None,
                            error_message=short(d.get("error_message") or "the check's process sent no result", MESSAGE),
                            traceback=d.get("traceback"))
    fields = {k: r[k] for k in CheckResult.__dataclass_fields__ if k in r}
    for k in ("error", "tolerance", "seconds", "resolution"):
        if k in fields:
            fields[k] = _m.nan if fields[k] is None else float(fields[k])
    fields["seeds"] = tuple(fields.get("seeds") or ())
    fields["two_sided"] = fields.get("two_sided") is True
    for k in ("justification", "skip_reason", "reason", "resolution_units", "device"):  # printed by run/show (F4)
        if isinstance(fields.get(k), str):
            fields[k] = visible(fields[k])
    res = CheckResult(**fields)
    if res.passed is None:
        status = "inconclusive" if (res.details or {}).get("inconclusive") else "skipped"
    else:
        if res.passed and (_m.isinf(res.error) or (_m.isnan(res.error) and not _m.isnan(res.tolerance))):
            res.passed, res.reason = False, res.reason or f"non-finite error: {res.error}"
        status = "passed" if res.passed else "failed"
    return CheckOutcome(d.get("name") or check.name, d.get("layer") or check.layer, status, res)


def _claim_in_child(req: dict, what: str) -> tuple[Any, dict | None]:  # pragma: no cover - runs in the child
    """In the child: import the plugin of ``req["ep"]`` and find ``req["claim"]``; ``(claim, None)``, or
    ``(None, {"load_error": …})`` when its import fails there."""
    from importlib.metadata import EntryPoint

    from proofs_checks.registry import registry

    os.environ[CHILD_ENV] = str(os.getpid())
    name, value, group = req["ep"]
    try:
        if req["claim"] not in registry:
            loaded = EntryPoint(name, value, group).load()
            if callable(loaded):
                loaded()
        return registry.get(req["claim"]), None
    except (Exception, SystemExit) as exc:
        return None, {"load_error": f"plugin {name!r}: its import failed in the {what}'s process: "
                                    f"{type(exc).__name__}: {short(exc, 160)}"}


def check_task(req: dict, obj: Any, arrays: dict) -> dict:  # pragma: no cover - runs in the child
    """In the child: import the plugin, find the claim and its check, run it as the runner does."""
    from dataclasses import asdict
    from pathlib import Path

    from proofs_checks.context import RunContext
    from proofs_checks.runner import run_check_here

    claim, problem = _claim_in_child(req, "check")
    if problem is not None:
        return problem
    check = claim.checks[int(req["check"])]
    role = req.get("role")
    if role is None:
        form = obj[1]
    elif role[0] == "form":
        form = claim.form
    elif role[0] == "stated":
        form = claim.stated
    else:
        form = next(m.form for m in claim.all_mutants() if m.name == role[1])
    ctx = RunContext(mode=req["mode"], seed=int(req["seed"]), device=req["device"],
                     figure_dir=Path(req["figure_dir"]) if req.get("figure_dir") else None)
    counter = _scale_counter(form) if role is None else None
    before = counter.snapshot() if counter is not None else None
    o = run_check_here(check, form, claim, ctx)
    out = {"name": o.name, "layer": o.layer, "status": o.status, "error_message": o.error_message,
           "traceback": o.traceback}
    if o.result is not None:
        r = asdict(o.result)
        r["seeds"] = [int(s) for s in r["seeds"]]
        out["result"] = r
    return {"outcome": out, "scaled": counter.since(before) if counter is not None else 0}


def _runner():
    from proofs_checks import runner

    return runner
