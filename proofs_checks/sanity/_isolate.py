"""Your code in its own process: ``tverify check attention|icl|hopfield`` (and their Python API and
pytest fixture) run the code they are given — ``--module``, ``--model``, ``--mapping``, ``--against``
— in a child process, and compute the verdict in this one.

Why: a module can end the process it runs in (``os._exit(0)``, a signal, a segfault in an
extension), hang, or eat the machine's memory. In-process, ``os._exit(0)`` would end ``tverify``
with exit status 0 and nothing printed: a green CI job. Here the child may die in any way; this
process sees no complete result and says so in one line, exit 2 (an exception from the API, a
failed test under the fixture) — never exit 0.

Design (docs/own-model.md, "Your code runs in its own process"):

* The child is a ``multiprocessing`` **forkserver** child (``spawn`` where there is no forkserver):
  a server process started once per ``tverify`` process, with torch and the checks imported, forks
  one child per check. It never runs the parent's ``__main__`` again (the parent's main module is
  hidden while the child starts), so a script that calls the API at its top level without an
  ``if __name__ == "__main__"`` guard does not recurse.
* What goes to the child: the request (the command's options, JSON: the spec strings
  ``FILE.py:NAME``, numbers, the working folder, ``sys.path`` and the environment), arrays the parent
  read and validated (the Hopfield patterns, Λ) as ``.npz`` bytes read back with
  ``allow_pickle=False``, and — only from the Python API — the caller's own in-memory objects
  (module, mapping hook, ``against``) serialised with cloudpickle in the caller's process. Nothing
  read from a user's *file* is ever unpickled: files are data.
* What comes back: one JSON document (the property rows, the JSON result, the text lines; NaN
  kept), and, for ``--report``, the figures as PNG files the child drew. The parent recomputes the
  verdict from the rows (:func:`proofs_checks.sanity.attention.attention_verdict`,
  :func:`~proofs_checks.sanity._common.properties_verdict`, the ICL identification verdict) and
  alone decides the exit status.
* The child's stdout and stderr (your prints, the progress lines) are forwarded to this process's
  **stderr**, so ``--json -`` on stdout holds the JSON only.
* Limits: ``--timeout SECONDS`` (none by default) ends the child; while it runs, a line on stderr
  every few seconds when the child itself prints nothing (``--no-progress`` silences them). The
  memory of the user's code — resident anonymous memory of the child and of every process below it
  (orphans the server adopted included), plus the shared memory they hold (the larger of what they
  map and what ``/dev/shm`` grew by), beyond the child's start, polled every 0.1 s — may not exceed
  ``--max-memory`` (default: half the memory available, as the checks' own estimates; never below
  256 MB): beyond it the child and its processes are killed. Each is one line, exit 2.
* Nothing the user did not ask for runs: the server (and multiprocessing's resource tracker) start
  with ``-P`` and set ``sys.path`` (:func:`proofs_checks.guards.child_sys_path`: the standard
  library and installed packages first, no working folder) before any import; the child gets the
  same path, and the loader appends the module's folder last.
* A real Ctrl-C (SIGINT in this process) ends the child and exits 130; a ``KeyboardInterrupt``
  that your code raises itself is your code's (exit 2).
* Processes your code starts do not outlive the check: the child starts its own session (its own
  process group), and on Linux the *server* is the child subreaper of everything below it (set in
  :func:`proofs_checks.sanity._procs.server_boot`; the user's code runs in a forked child and
  cannot clear it — it could clear the child's own flag, and a ``setsid`` + double fork then escaped
  to init). When the task ends —
  result received, time limit, memory limit, death, Ctrl-C — this process kills, with SIGKILL, every
  descendant of the child (found through ``/proc``, also those that left the group), the orphans the
  server adopted (its children that are no running check's) and the child's whole process group,
  then the child. Without this a ``fork`` in a ``forward`` left orphans that held the
  multiprocessing server (and through it ``tverify``'s stdout) open: ``tverify check … | tail``
  waited as long as they slept. The child also ends its group when this process disappears
  (``kill -9`` of ``tverify``), and the server, ending then, kills every process below it.
* ``isolate=False`` in the Python API runs everything in the caller's process (for a debugger or
  coverage), without these protections.

The fork server itself (its preloaded modules, its start, the ``Popen`` through it) is
:mod:`proofs_checks.sanity._forkserver`; the child's side is :mod:`proofs_checks.sanity._isolate_child`.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any

from proofs_checks.guards import MIN_MEMORY_LIMIT  # the watchdog never stops a child below this (the default's floor)
from proofs_checks.sanity import _cgroup, _procs
from proofs_checks.sanity._isolate_child import (CLOSED_FDS_EXIT, LOST_CHANNEL_EXIT, NO_END_EXIT,  # noqa: F401
                                                 SEND_FAILED_EXIT, _LOST_FDS, _child_main, _dumps, draw_figures,
                                                 pack_arrays, plain, unpack_arrays)
from proofs_checks.sanity._loader import UserCodeError
from proofs_checks.sanity._forkserver import (_callers_state_kept, _context, _forkserver_popen,  # noqa: F401
                                              _main_hidden, _server_popen, _start_forkserver_quietly, PRELOAD)

__all__ = ["run_isolated", "ChildInternalError", "plain", "MIN_MEMORY_LIMIT", "PRELOAD", "draw_figures", "cleanup"]

POLL = 0.1
#: seconds a child whose result channel is closed may take to exit by itself (its exit status then says why)
CLOSED_GRACE = 2.0
#: seconds of silence from the child before a "still running" line (the first one: 2 s)
HEARTBEAT_FIRST, HEARTBEAT_EVERY = 2.0, 5.0
#: the largest result the parent reads (the checks' results are ≈ 130 kB at most, measured over the test suite's
#: sanity checks): a message the user's code writes into the result channel itself is never read past this, and its
#: token (first, before any parsing) decides whether it is decoded at all (a 500 MB message held tverify at 2.97 GB:
#: hostile pass 31a F7)
MAX_RESULT = 64 << 20


class ChildInternalError(RuntimeError):
    """tverify's own code failed inside the child (a bug, not your code): carries its traceback."""


# ------------------------------------------------------------------------------------------------
# the parent


#: (module name, its ``__file__``) found under :func:`_importable_roots`: importable by name for as long as this
#: process runs (the installation and this project do not move under it)
_UNDER_ROOTS: set[tuple[str, str]] = set()


@functools.lru_cache(maxsize=1)
def _importable_roots() -> tuple[str, ...]:
    """Installed packages, the standard library and this project's packages: importable by name in the child."""
    import sysconfig

    roots = []
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        with contextlib.suppress(KeyError, OSError, ValueError, TypeError):
            roots.append(os.path.realpath(sysconfig.get_paths()[key]))
    top = Path(__file__).resolve().parents[2]
    roots += [os.path.realpath(str(top / pkg)) for pkg in ("proofs_checks", "numerics", "theory")]  # this project
    return tuple(roots)


def _not_importable() -> list:
    """Modules the child could not import by name (loaded from a folder no longer on ``sys.path``, a
    test's ``tests/data``, a notebook's ``%run``): what they define is sent by value."""
    import importlib.machinery

    roots = _importable_roots()
    out = []
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str) or name == "__main__" or not isinstance(mod, types.ModuleType):
            continue
        if (name, f) in _UNDER_ROOTS:  # (each run resolved every module's path again: 0.1 s a check, 15k lstat)
            continue
        real = os.path.realpath(f)
        if any(real.startswith(r + os.sep) for r in roots):
            _UNDER_ROOTS.add((name, f))
            continue
        if not os.path.isfile(real):
            continue
        parent, _, last = name.rpartition(".")
        try:  # a fresh search (importlib.util.find_spec would answer from sys.modules)
            where = getattr(sys.modules.get(parent), "__path__", None) if parent else None
            spec = importlib.machinery.PathFinder.find_spec(last if parent else name, where)
        except (ImportError, ValueError, AttributeError, TypeError):
            spec = None
        if spec is not None and isinstance(spec.origin, str) and os.path.realpath(spec.origin) == real:
            continue
        out.append(mod)
    return out


def _dumps_objects(obj) -> bytes:
    """cloudpickle of the caller's objects, with what modules the child cannot import by value."""
    import cloudpickle

    mods = []
    for mod in _not_importable():
        with contextlib.suppress(Exception):
            cloudpickle.register_pickle_by_value(mod)
            mods.append(mod)
    try:
        return cloudpickle.dumps(obj)
    finally:
        for mod in mods:
            with contextlib.suppress(Exception):
                cloudpickle.unregister_pickle_by_value(mod)


def _signal_name(code: int) -> str:
    try:
        name = signal.Signals(-code).name
    except (ValueError, AttributeError):
        return f"signal {-code}"
    why = {"SIGSEGV": "a segmentation fault", "SIGABRT": "an abort",
           "SIGKILL": "SIGKILL, not sent by tverify (the system's out-of-memory killer, a kill -9, or the code itself)",
           "SIGBUS": "a bus error", "SIGFPE": "a floating-point exception", "SIGILL": "an illegal instruction",
           "SIGXCPU": "the CPU-time limit (ulimit -t)"}.get(name)
    if name == "SIGKILL" and _cpu_limited():
        why += "; or the hard CPU-time limit (ulimit -t), which the kernel enforces with SIGKILL"
    return name if not why else why if name in why else f"{why} ({name})"  # (a name twice: 34a N2, 35a N3)


def _cpu_limited() -> bool:
    import resource

    with contextlib.suppress(Exception):
        return resource.getrlimit(resource.RLIMIT_CPU)[1] != resource.RLIM_INFINITY
    return False


def _forward(data: bytes, stream) -> None:
    """The child's output (and the heartbeat) to ``stream`` through a writer thread (:class:`_Forwarder`): a standard
    error nobody reads (a paused terminal, a full pipe) blocked the supervising loop in its write, and neither
    --max-memory nor --timeout held any more (hostile pass 30a F2)."""
    f = _Forwarder.of(stream)
    text = f.decoder.decode(data)  # incrementally: a character split between two reads is one character (31a note)
    if text:
        f.put(text)


class _Forwarder:
    """One writer thread per stream, fed through a bounded queue: what does not fit while the stream blocks is
    dropped, and said once the stream takes writes again; the supervision never waits on it."""

    _ALL: dict = {}

    def __init__(self, stream):
        import queue
        import threading

        import codecs

        self.stream, self.q, self.dropped = stream, queue.Queue(maxsize=256), 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        threading.Thread(target=self._run, daemon=True, name="tverify-forward").start()

    @classmethod
    def of(cls, stream) -> "_Forwarder":
        f = cls._ALL.get(id(stream))
        if f is None or f.stream is not stream:
            f = cls._ALL[id(stream)] = cls(stream)
        return f

    def put(self, text: str) -> None:
        import queue

        try:
            self.q.put_nowait(text)
        except queue.Full:
            self.dropped += len(text)

    def _run(self) -> None:
        while True:
            text = self.q.get()
            try:
                if self.dropped:
                    n, self.dropped = self.dropped, 0
                    text = (f"tverify: note: {n} characters of the check's output were dropped while standard error "
                            "was not being read\n") + text
                self._write(text)
            except (OSError, ValueError):  # stderr closed: the child's output is dropped, the check goes on
                pass
            finally:
                self.q.task_done()

    def _write(self, text: str) -> None:
        """To the stream's descriptor where it has one (a write blocked there holds no lock of Python's, so the
        interpreter's own flush of standard error at exit does not wait on this thread), else through the stream."""
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd is None:
            self.stream.write(text)
            self.stream.flush()
            return
        data = text.encode(getattr(self.stream, "encoding", None) or "utf-8",
                           errors=getattr(self.stream, "errors", None) or "replace")
        while data:
            data = data[os.write(fd, data):]

    def drain(self, timeout: float = 2.0) -> None:
        """Wait (at most ``timeout`` s) until what was queued is written: the lines after the check's come after it."""
        rest = self.decoder.decode(b"", final=True)  # an incomplete character left at the end: shown replaced
        if rest:
            self.put(rest)
        end = time.monotonic() + timeout
        while self.q.unfinished_tasks and time.monotonic() < end:
            time.sleep(0.005)


class _Outcome:
    def __init__(self):
        self.payload: dict | None = None
        self.problem: str | None = None


def _child_env() -> dict:
    """The environment for the child: this one, with ``COLUMNS`` set to the terminal's width when
    stdout is a terminal (the child's text is laid out for it, :mod:`proofs_checks.output.wraptext`)."""
    from proofs_checks.output.wraptext import width

    env = dict(os.environ)
    cols = width(sys.stdout, fallback=None)
    if cols and "COLUMNS" not in env:
        env["COLUMNS"] = str(cols)
    return env


def run_isolated(task: str, request: dict, *, label: str, what: str, obj: Any = None, arrays: dict | None = None,
                 timeout: float | None = None, max_memory: float | None = None, progress: bool = False,
                 figures: bool = False, stream=None) -> dict:
    """Run ``task`` (``"package.module:function"``, a check module's ``child_task(req, obj, arrays)``
    returning a JSON-able dict) on ``request`` in a child process and return its payload (a dict; the
    figures, when asked for, as PNG paths in a temporary folder named by ``payload["figures_dir"]``,
    which the caller removes). Raises :class:`UserCodeError` (one line, exit 2) when the child ends
    without a result (an exit of any kind, a signal), passes ``timeout`` seconds or the memory
    limit, or reports a usage error; :class:`ChildInternalError` for a failure of tverify's own
    code there. ``label`` names the option (``--module``), ``what`` the check in messages."""
    from proofs_checks import guards
    from proofs_checks.guards import child_sys_path

    stream = stream if stream is not None else sys.stderr
    obj_blob = None if obj is None else _object_blob(obj, label)
    arrays_blob = pack_arrays(**arrays) if arrays else None
    fig_dir = tempfile.mkdtemp(prefix="tverify-figures-") if figures else None
    token = secrets.token_hex(16)
    req = dict(request, task=task, label=label, cwd=os.getcwd(), sys_path=child_sys_path(), env=_child_env(),
               figures_dir=fig_dir, dry_run=bool(guards._DRY_RUN.get()), token=token)
    torch = sys.modules.get("torch")
    if torch is not None:
        with contextlib.suppress(Exception):
            req["threads"] = int(torch.get_num_threads())
    limit, why = guards.memory_limit(max_memory)
    limit = max(limit, MIN_MEMORY_LIMIT) if max_memory is None else limit  # (declared: as given, 46a F6)
    with _callers_state_kept():
        ctx, own_server = _context()  # (the fork server started before the group is made: a signal meanwhile leaves none)
    before = _procs.server_children()  # not the user's code: a caller's own forkserver processes
    segments_before = _procs.segment_ids()  # nor the SysV segments that exist already (32a F3, F4)
    queues_before = _procs.queue_ids()  # (and message queues: 35a F3)
    res_r, res_w = ctx.Pipe(duplex=False)
    out_r, out_w = ctx.Pipe(duplex=False)
    alive_r, alive_w = ctx.Pipe(duplex=False)
    cg = None
    try:
        cg = _cgroup.MemoryCgroup.make() if sys.platform.startswith("linux") else None
        req["cgroup"] = str(cg.folder) if cg is not None else None
        proc = ctx.Process(target=_child_main, args=(_dumps(req), obj_blob, arrays_blob, res_w, out_w, alive_r),
                           name=f"tverify {what}", daemon=False)
        if own_server:
            proc._Popen = _server_popen
        with (contextlib.nullcontext() if own_server else _main_hidden()), _procs.isolated_start(), _callers_state_kept():
            proc.start()
    except BaseException as exc:  # a signal's exit too (SIGTERM while the fork server starts left the group: 33a F7)
        for c in (res_r, res_w, out_r, out_w, alive_r, alive_w):
            c.close()
        if cg is not None:
            cg.close()
        if fig_dir:
            shutil.rmtree(fig_dir, ignore_errors=True)
        if not isinstance(exc, Exception):
            raise
        raise _start_failure(exc, what) from None
    for c in (res_w, out_w, alive_r):
        c.close()
    if proc.pid is not None:
        _procs.ACTIVE[proc.pid] = before
        _procs.SEGMENTS_BEFORE[proc.pid] = segments_before
        _procs.QUEUES_BEFORE[proc.pid] = queues_before
        if cg is not None:
            cg.join(proc.pid)
    proc._tv_cgroup = cg  # (read by _supervise and _stop)
    outcome = _Outcome()
    try:
        _supervise(proc, res_r, out_r, outcome, label=label, what=what, timeout=timeout, limit=limit, why=why,
                   progress=progress, stream=stream, token=token)
    except BaseException:
        _stop(proc)
        if fig_dir:
            shutil.rmtree(fig_dir, ignore_errors=True)
        raise
    finally:
        for c in (res_r, out_r, alive_w):
            with contextlib.suppress(Exception):
                c.close()
        if cg is not None:
            cg.close()
        _Forwarder.of(stream).drain()
    if outcome.problem is not None or outcome.payload is None:
        if fig_dir:
            shutil.rmtree(fig_dir, ignore_errors=True)
        raise UserCodeError(outcome.problem or f"{label}: {what}: the check's process ended without a result")
    payload = outcome.payload
    payload["figures_dir"] = fig_dir
    if "error" in payload or "internal" in payload or payload.get("dry_run_stop"):
        if fig_dir:
            shutil.rmtree(fig_dir, ignore_errors=True)
        if payload.get("dry_run_stop"):
            raise guards.DryRunStop()
        if "error" in payload:
            raise UserCodeError(str(payload["error"]))
        raise ChildInternalError(f"{what}: {payload['internal']}\n{payload.get('traceback', '')}")
    return payload


def _object_blob(obj: Any, label: str) -> bytes:
    """The user's object, serialised for the check's process (cloudpickle: it is tverify's own copy, never read from
    a file); what cannot be copied is a usage error naming the way around it."""
    import cloudpickle  # noqa: F401  (the serialiser: its absence is tverify's installation's fault, said as such)

    from proofs_checks.sanity._loader import user_code

    try:  # the object's own __getstate__/__reduce__ run here: its sys.exit(0) ended the caller's script with exit 0 and
        # no result, its KeyboardInterrupt a whole pytest session (hostile pass 58a F6); an Exception is said below
        with user_code(label, "copying it into the check's own process (its __getstate__ or __reduce__)",
                       exceptions=False):
            return _dumps_objects(obj)
    except Exception as exc:
        if isinstance(exc, UserCodeError):  # (the exit or interrupt said by user_code)
            raise
        from proofs_checks.sanity._loader import describe_exception

        raise UserCodeError(f"{label}: cannot copy it into the check's own process (cloudpickle: "
                            f"{describe_exception(exc)[:200]}); pass isolate=False to run it in this process, "
                            "without protection from os._exit, crashes and hangs") from None


def _start_failure(exc: Exception, what: str) -> Exception:
    """The error to raise where the check's process could not be started."""
    if isinstance(exc, AssertionError) and "daemonic" in str(exc):  # multiprocessing's own rule (33a F10)
        return UserCodeError(f"{what}: cannot start the check's process from a daemonic process (a "
                             "multiprocessing.Pool worker, or a Process(daemon=True)), which may not have children: "
                             "call it from a non-daemonic process (a concurrent.futures.ProcessPoolExecutor "
                             "worker), or pass isolate=False to run it in this process")
    if isinstance(exc, OSError) and "AF_UNIX path too long" in str(exc):  # a traceback, exit 1 (hostile pass 13b F5)
        return UserCodeError(f"{what}: the temporary folder ($TMPDIR, {tempfile.gettempdir()}) is too long for the "
                             "check's process's socket (a path of at most 107 bytes); set TMPDIR to a shorter "
                             "folder")
    return ChildInternalError(f"{what}: cannot start the check's process: {type(exc).__name__}: {exc}")


def _stop(proc) -> None:
    """End the child and everything the user's code started: SIGKILL to each process of
    :func:`proofs_checks.sanity._procs.user_tree` (found again until none is left: a process forking
    meanwhile is found in the
    next pass, an orphan under the fork server too) and to the child's process group, then the
    child; once more after the child is gone (its orphans are adopted by the server)."""
    pid = proc.pid
    if pid is None:
        return
    seen: set[int] = set()
    with contextlib.suppress(Exception):
        for _ in range(20):
            found = _procs.user_tree(pid)
            seen.update(found)
            _procs.kill_group(pid)
            for p in found:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            if not found:
                break
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        _procs.kill_group(pid)
        for _ in range(20):
            found = _procs.user_tree(pid)
            for p in found:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            if not found:
                break
    cg = getattr(proc, "_tv_cgroup", None)
    if cg is not None:  # every process left in the check's cgroup, whatever its parent, session or namespace
        cg.close()
    _procs.remove_segments(pid, seen)
    _procs.ACTIVE.pop(pid, None)


#: seconds this process spent stopped (Ctrl-Z) while a check's child ran: not counted against --timeout
_STOPPED = {"seconds": 0.0}


def _on_stop(proc, signum, frame) -> None:
    """SIGTSTP (Ctrl-Z) while a check's child runs: the child runs in a session of its own, which the terminal's job
    control does not reach, so the code ran on unwatched, past --max-memory and --timeout (hostile pass 43a F10). The
    child and every process below it are stopped, then this process; on SIGCONT (``fg``, ``bg``) they go on."""
    pids = [proc.pid, *_procs.descendants(proc.pid)] if proc.pid else []
    for p in pids:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGSTOP)
    t = time.monotonic()
    os.kill(os.getpid(), signal.SIGSTOP)  # (here until SIGCONT)
    _STOPPED["seconds"] += time.monotonic() - t
    for p in reversed(pids):
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGCONT)


def _supervise(proc, *args, **kwargs) -> None:
    """:func:`_supervise_loop` with Ctrl-Z passed on to the child (:func:`_on_stop`) where this is the main thread."""
    previous = None
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTSTP"):
        with contextlib.suppress(ValueError, OSError, TypeError):
            previous = signal.signal(signal.SIGTSTP, functools.partial(_on_stop, proc))
    try:
        _supervise_loop(proc, *args, **kwargs)
    finally:
        if previous is not None:
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signal.SIGTSTP, previous)


def _supervise_loop(proc, res_r, out_r, outcome: _Outcome, *, label, what, timeout, limit, why, progress, stream,
                    token: str) -> None:
    from multiprocessing.connection import wait

    from proofs_checks.guards import fmt_bytes, fmt_seconds

    t0 = time.monotonic()
    stopped0 = _STOPPED["seconds"]
    last_out = t0
    beat_printed = False
    base = None
    peak = 0.0
    ended = False
    last_poll = t0 - POLL
    shm_start = _procs.machine_held()
    # a channel at its end (every writer closed it) is ready for ever: it leaves the wait list, or this loop spun a
    # core until the child ended (30 s of CPU for code that replaced its descriptors with os.dup2, session 23)
    watched = [res_r, out_r, proc.sentinel]
    res_closed_at = None
    while True:
        ready = wait(watched, timeout=POLL)
        now = time.monotonic()
        if out_r in ready:
            try:
                data = os.read(out_r.fileno(), 65536)
            except OSError:
                data = b""
            if data:
                _forward(data, stream)
                last_out = now
            else:
                watched.remove(out_r)
        if res_r in ready and outcome.payload is None:
            taken = _take_result(res_r, outcome, f"{token}\n".encode(), label, what)
            if taken == "stop":
                _stop(proc)
                return
            if taken == "closed":  # the child closed its end without a result: its exit status says why
                watched.remove(res_r)
                res_closed_at = now
        if outcome.payload is not None:
            _drain(out_r, stream)
            _stop(proc)  # the child waits to be ended, its descendants with it
            return
        if proc.sentinel in ready or not proc.is_alive():
            if ended:  # give the result pipe one more turn after the exit
                outcome.problem = (f"{label}: {what}: the process running your code {_ended_how(proc, out_r, stream)} "
                                   "before the check finished; nothing was checked")
                return
            ended = True
            continue
        if res_closed_at is not None and now - res_closed_at > CLOSED_GRACE:
            # no result can arrive any more, and the child lives on: the code closed or replaced the descriptor the
            # result leaves by (an exit of its own would have come within the grace, and is said by its status)
            _stop(proc)
            outcome.problem = (f"{label}: {what}: the process running your code can no longer send its result: "
                               f"{_LOST_FDS} before the check finished; nothing was checked")
            return
        # the memory read at most every POLL seconds: output arriving wakes this loop far more often (a /proc read of
        # the tree costs ≈ 2 ms, most of the supervisor's time)
        poll = bool(proc.pid) and now - last_poll >= POLL
        if poll:
            _procs.server_orphans_into(getattr(proc, "_tv_cgroup", None), proc.pid)
        rss = _procs.tree_memory(proc.pid, shm_start, getattr(proc, "_tv_cgroup", None) is None) if poll else None
        if rss is not None:
            last_poll = now
            if base is None:  # the child's own memory at its first reading: what it started and the shared
                base = _procs.own_memory(proc.pid) or rss  # memory it holds are the user's code's, however early
            used = max(rss - base, _cgroup_used(proc))
            if used > limit and rss - base <= limit:  # the group's count alone: its reclaimable caches freed, then read
                used = max(rss - base, _cgroup_used(proc, reclaim=True))  # again (lookups' dentries: 34a F6)
            peak = max(peak, used)
            if used > limit:
                _stop(proc)
                outcome.problem = (f"{label}: {what}: the processes running your code used {fmt_bytes(used)} of "
                                   "memory (with every process it started and the shared memory they hold), "
                                   f"over the limit of {fmt_bytes(limit)} ({why}); stopped, nothing was "
                                   "checked (lower the sizes, or raise --max-memory)")
                return
        el = now - t0 - (_STOPPED["seconds"] - stopped0)  # (time stopped with Ctrl-Z not counted)
        if timeout is not None and el > timeout:
            _stop(proc)
            outcome.problem = (f"{label}: {what}: not finished within --timeout {timeout:g} s (the process running "
                               "your code was stopped); nothing was checked")
            return
        if progress and now - last_out >= (HEARTBEAT_EVERY if beat_printed else HEARTBEAT_FIRST):
            lim = f", limit {fmt_seconds(timeout)}" if timeout is not None else ""
            mem = f"; {fmt_bytes(peak)} of memory in use" if peak >= 1024**2 else ""
            # (tverify's own line, past the child's decoder: a character of the child's split across it was shown as
            # two replacement characters, 33a N1)
            _Forwarder.of(stream).put(f"{what}: still running ({fmt_seconds(el)} elapsed{lim}{mem})\n")
            beat_printed = True
            last_out = now


def _take_result(res_r, outcome: _Outcome, head: bytes, label: str, what: str) -> str | None:
    """Read what is ready on the result channel into ``outcome.payload``: ``"closed"`` (every writer closed it, no
    result), ``"stop"`` (``outcome.problem`` says what arrived instead of a result: the child is to be stopped), or
    None (a result, or nothing readable)."""
    try:
        raw = res_r.recv_bytes(MAX_RESULT)
    except EOFError:
        return "closed"
    except OSError as exc:
        if "bad message length" not in str(exc):
            return None
        # longer than any result of the check's: written by the code itself, never read
        outcome.problem = (f"{label}: {what}: a message of more than {MAX_RESULT >> 20} MiB arrived on the "
                           "check's result channel (the code wrote into the check's descriptors itself); "
                           "nothing was checked")
        return "stop"
    if not hmac.compare_digest(raw[:len(head)], head):
        outcome.problem = (f"{label}: {what}: a result not sent by the check arrived on its result channel (the "
                           "code wrote into the check's descriptors itself); nothing was checked")
        return "stop"
    try:
        outcome.payload = json.loads(raw[len(head):].decode("utf-8"))
        if not isinstance(outcome.payload, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError):
        outcome.payload = None
        outcome.problem = f"{label}: {what}: the check's process sent a malformed result; nothing was checked"
        return "stop"
    return None


def _ended_how(proc, out_r, stream) -> str:
    """How the child ended before its result, in words, once its output is drained and what it started is stopped."""
    _drain(out_r, stream)
    proc.join(1)
    code = proc.exitcode
    _stop(proc)  # what it started goes with it
    if code is None:
        code = proc.exitcode
    if code is not None and code < 0:
        return f"was ended by {_signal_name(code)}"
    if code in (CLOSED_FDS_EXIT, LOST_CHANNEL_EXIT, SEND_FAILED_EXIT, NO_END_EXIT):
        return f"ended (exit status {code}) because its result could not reach tverify: {_LOST_FDS}"
    if code == 255 and not _procs.server_alive():  # multiprocessing's status for a child whose server died
        return ("ended, its exit status unknown, when the checks' fork server that started it was killed "
                "(by the code, or from outside)")  # (33a N3: it was "exit status 255 (os._exit …)")
    return f"ended with exit status {code} (os._exit, or an exit the code made)"


def _cgroup_used(proc, reclaim: bool = False) -> float:
    """What the check's memory cgroup holds (:mod:`proofs_checks.sanity._cgroup`; 0 where there is none): the kernel's
    count of every process of the user's code, what the polling of ``/proc`` cannot see included; with ``reclaim``,
    after the kernel has freed what it can of the group's caches."""
    cg = getattr(proc, "_tv_cgroup", None)
    if cg is not None and reclaim:
        cg.reclaim()
    used = cg.used() if cg is not None else None
    return used if used is not None else 0.0


def _drain(out_r, stream) -> None:
    from multiprocessing.connection import wait

    for _ in range(1000):
        if not wait([out_r], timeout=0):
            return
        try:
            data = os.read(out_r.fileno(), 65536)
        except OSError:
            return
        if not data:
            return
        _forward(data, stream)


def cleanup(result) -> None:
    """Remove the temporary figures folder of a rebuilt result."""
    where = getattr(result, "figures_dir", None)
    if where:
        shutil.rmtree(where, ignore_errors=True)


def finish_rebuilt(payload: dict, rebuild, finish, *args) -> None:
    """The parent's end of a check: rebuild the result from the child's ``payload``, ``finish(result,
    *args)`` (print, write, exit), and remove the result's temporary figures whatever happens."""
    result = rebuild(payload)
    try:
        finish(result, *args)
    finally:
        cleanup(result)
