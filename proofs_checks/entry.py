"""The ``tverify`` console command as a process: its start (streams, the supervised child, the libraries bound from
the system folders), its argument checks before click, the mapping of what ends it to one line and an exit code
(0 ok, 1 refuted/error, 2 usage or a failed write, 3 undecided, 128 + N a signal), and its exit within bounds.

The commands themselves are :mod:`proofs_checks.cli` (click), whose ``main`` (the console entry point, through
``proofs_checks._console``) is :func:`run_command` around the click group.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click


_WRITE_ERRNOS = ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EPIPE", "EROFS", "EBADF")


def _write_failure(exc: OSError) -> str | None:
    """One line for a failed write (a full disk, a closed pipe); ``None`` for other OS errors."""
    import errno

    from proofs_checks.console import stdout_was_closed

    codes = {getattr(errno, n) for n in _WRITE_ERRNOS if hasattr(errno, n)}
    if not isinstance(exc, BrokenPipeError) and exc.errno not in codes:
        return None
    if stdout_was_closed():
        return "the standard output is closed (started with >&-); nothing was written to it"
    if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:
        return "the output was closed before everything was written (broken pipe); the output is incomplete"
    if exc.errno == errno.EBADF and _read_only(1):  # (38a F8: 1</dev/null)
        return "the standard output is open for reading only (1</dev/null?); nothing could be written to it"
    where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
    return f"cannot write{where}: {exc.strerror or exc}; the output is incomplete"


def _read_only(fd: int) -> bool:
    import fcntl
    import os

    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    except OSError:
        return False


def _quiet_stdout(descriptor: int = 1) -> None:
    """After a failed write to stdout (or ``descriptor``): point it at /dev/null so the interpreter's last flush of
    what is still buffered cannot print 'Exception ignored' on the way out."""
    import os

    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, descriptor)
        os.close(fd)
    except OSError:  # pragma: no cover
        pass


#: the commands that compute (and import tverify's libraries): the console command imports those first
#: (:func:`proofs_checks.syspath.import_system_only`); list, show, new-claim and --help answer without them
_COMPUTING = frozenset({"check", "run", "report", "mutants", "sweep", "reproduce", "survey"})


def _preload(args: list[str]) -> tuple[str, ...]:
    """What the command line's command imports of tverify's libraries (:data:`proofs_checks.syspath.LIBRARY_IMPORTS`;
    ``check lyapunov`` no torch: 1.2 CPU s more); nothing for a command that computes nothing (its first word that is
    not an option or an option's value)."""
    from proofs_checks.syspath import LIBRARY_IMPORTS

    words = [a for a in args[:4] if not a.startswith("-")]
    if args and args[-1] in ("--help", "-h") and not (len(args) > 1 and args[-2].startswith("-")):
        return ()  # a command's help computes nothing either (2.3 CPU s of imports; after an option it may be its value)
    if not (words and (words[0] in _COMPUTING or len(words) > 1 and words[1] in _COMPUTING)):
        return ()
    if "lyapunov" in words[:3]:
        return tuple(n for n in LIBRARY_IMPORTS if not n.startswith("torch"))
    return LIBRARY_IMPORTS


def run_command(argv: list[str] | None, command) -> None:
    """Run ``command(argv)`` (:func:`proofs_checks.cli._main`: the click group) as the console command
    (``argv`` None: ``sys.argv``, the process is the command's own) or in the caller's process. User mistakes: one
    line on stderr, exit 2. A failed write (a full disk, a closed pipe, a standard output closed from the start): one
    line, exit 2. A signal: one line, exit 128 + N."""
    import os

    from proofs_checks.console import (COMMANDS, DELIVERED, RECEIVED, Terminated, guard_closed_streams, settle_signals,
                                       terminate_cleanly)

    guard_closed_streams()
    supervised = argv is None and _console_start()
    # the mark of the processes that run a plugin's code (claims._plugins.CHILD_ENV): this command is never one;
    # inherited or set by hand, it ran plugins in this process unprobed, where an os._exit(0) ended `run` with
    # exit 0 and nothing printed (hostile pass 7, F5)
    os.environ.pop("TVERIFY_PLUGIN_CHILD", None)
    torch_named = "TORCHINDUCTOR_CACHE_DIR" in os.environ
    torch_cache, reaper = None, False
    COMMANDS[0] += 1  # (main() called again in one process: nothing kept from an earlier command)
    RECEIVED.clear(), DELIVERED.clear()
    terminate_cleanly(watch=True)
    try:  # (from here on: a signal a finalizer swallowed is sent again, and can land before the command's work)
        try:
            torch_cache = _own_torch_cache()
            # the console command only, not main() called in a caller's process; under the supervisor its parent is
            # the subreaper, and kills what is left below it after this process has ended (proofs_checks.supervisor)
            reaper = argv is None and not supervised and _become_subreaper()
            try:
                command(argv)
            except SystemExit as done:
                _not_swallowed(done.code)
                raise
            _not_swallowed(0)
        finally:
            DELIVERED.append(0)  # (the command's own handler is next: nothing is sent again from here on)
            settle_signals()  # a signal while Python exits: one line, not a traceback from an atexit callback
            if reaper:
                from proofs_checks.sanity._procs import kill_below

                kill_below(os.getpid())
            if torch_cache:
                import shutil

                shutil.rmtree(torch_cache, ignore_errors=True)
            if not torch_named:  # (main() called in a process of the caller's: its environment as it was)
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    except Terminated as exc:
        DELIVERED.append(exc.signum)
        if getattr(exc, "completed", False):  # it came as an output was being committed (console.outputs_committing)
            _stderr_line(f"tverify: terminated ({exc.name}); it came as an output was being put in place, which was "
                         "completed first; nothing was written after it")
        else:
            _stderr_line(f"tverify: terminated ({exc.name}); nothing was written after it (earlier outputs are as they "
                         "were)")
        if argv is None:  # (a plugin's thread held the exit after a SIGTERM as after the work's end: 41a F3)
            _exit_within_bounds(128 + exc.signum)
        sys.exit(128 + exc.signum)
    except SystemExit as exc:
        code = exc.code
        if type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper":  # click met EPIPE on stdout (its own exit 1)
            _stderr_line("tverify: error: " + _write_failure(BrokenPipeError(32, "Broken pipe")))
            _quiet_stdout()
            sys.exit(2)
        try:
            sys.stdout.flush()
        except OSError as err:
            msg = _write_failure(err)
            if msg is None:
                raise
            _stderr_line(f"tverify: error: {msg}")
            _quiet_stdout()
            sys.exit(2)
        if not _flush_stderr():  # stderr full or broken: its line is lost, and the interpreter's own last flush of it
            sys.exit(2)  # made a usage error exit 1 (hostile pass 14a F1); a failed write is exit 2
        if argv is None:
            _exit_within_bounds(code)
        raise SystemExit(code) from None


def _console_start() -> bool:
    """The console command's start, before its signal handlers: its work moved into a supervised child (True where it
    was), its standard streams wrapped, the libraries' optional imports bound from the system folders. A Ctrl-C in
    these imports (seconds, SymPy's and NumPy's among them) is one line and exit 130, as in the script's own imports
    (:mod:`proofs_checks._console`): it was a traceback of ``import_system_only`` (CI of ec250a1). An extension's
    initialisation turns the ``KeyboardInterrupt`` into another error (NumPy's an ``AttributeError``, SymPy's a
    ``RecursionError``) or one swallowed as an absent optional import: the SIGINT itself is what is looked at."""
    import signal

    hit = []

    def on_sigint(signum, frame):
        hit.append(signum)
        raise KeyboardInterrupt

    default = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if default:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        from proofs_checks.console import tolerant_encoding, wait_when_full

        wait_when_full()
        tolerant_encoding()
        from proofs_checks.options import HumanLines, own_standard_output
        from proofs_checks.supervisor import supervise

        supervised = supervise()
        own_standard_output()
        sys.stderr = HumanLines(sys.stderr)  # a full standard error loses its lines only, not the outputs (43b F5)
        preload = _preload(sys.argv[1:])
        if preload:  # the libraries' optional imports found absent, not in $PYTHONPATH (55a F7)
            from proofs_checks.syspath import import_system_only

            import_system_only(preload)
    except BaseException as exc:
        if not (hit or isinstance(exc, KeyboardInterrupt)):
            raise
        hit.append(signal.SIGINT)
    finally:
        if default:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if hit:
        _stderr_line("tverify: interrupted while starting; nothing was run or written")
        raise SystemExit(130) from None
    return supervised


def _terminated_in(exc: BaseException):
    """The :class:`~proofs_checks.console.Terminated` behind ``exc`` (its cause or context, at any depth), if any: a
    signal raised inside a C extension's initialisation comes out as that module's ``ImportError`` (hostile pass 39a
    N2: a traceback, exit 1)."""
    from proofs_checks.console import Terminated

    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, Terminated):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _not_swallowed(code) -> None:
    """A signal the command's handler raised as ``Terminated`` that a library swallowed (it ran on to its end): the
    command's exit is the signal's, 128 + N, with one line saying its outputs are complete (hostile pass 39a F4)."""
    from proofs_checks.console import swallowed_signal

    signum = swallowed_signal(code)
    if signum is not None:
        import signal

        _stderr_line(f"tverify: {signal.Signals(signum).name} was swallowed by code the command ran (a library's "
                     "`except`), which went on to its end: it exits as terminated")
        raise SystemExit(128 + signum)


#: seconds the console command's exit may take once its work is done, before it ends regardless
EXIT_GRACE = 5.0


def _exit_within_bounds(code) -> None:
    """The console command's end, whatever code it loaded left running (hostile pass 40a F3, F4): the processes a
    plugin's import started with ``multiprocessing`` are killed (Python's exit would join them: extending.md promises
    they end with the command), and an exit that a thread or an exit callback of such code holds up (Python joins
    every non-daemon thread) ends after :data:`EXIT_GRACE` seconds with the command's own status."""
    import os
    import threading

    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        for child in mp.active_children():
            with contextlib.suppress(Exception):
                child.kill()
                child.join(1)
    status = code if isinstance(code, int) else (0 if code is None else 1)

    def end() -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        from proofs_checks.supervisor import mark_finished

        mark_finished()
        os._exit(status)

    with contextlib.suppress(RuntimeError):
        timer = threading.Timer(EXIT_GRACE, end)
        timer.daemon = True
        timer.start()


def _flush_stderr() -> bool:
    """Flush stderr; when that fails, point descriptor 2 at /dev/null (nothing more can be said there, and the
    interpreter's last flush must not fail again) and return ``False``."""
    try:
        sys.stderr.flush()
        return True
    except (OSError, ValueError, AttributeError):
        _quiet_stdout(2)
    return False


def _become_subreaper() -> bool:
    """On Linux, this command adopts the orphans of the processes it starts (``PR_SET_CHILD_SUBREAPER``), and kills
    whatever is still below it when it ends: a plugin whose import (in the import probe, then in this process)
    double-forks a ``setsid`` daemon left it running after tverify exited (hostile pass 11, F1)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except Exception:
        return False


def _own_torch_cache() -> str | None:
    """Importing ``torch._dynamo`` (torch.optim does) creates ``$TMPDIR/torchinductor_$USER``, left
    behind after tverify exits (hostile pass 9). Unless the user names one (TORCHINDUCTOR_CACHE_DIR), torch's
    cache lives in tverify's per-user cache folder (``~/.cache/tverify/torch``: a cache, kept, nothing in
    $TMPDIR even after a ``kill -9``); where that folder cannot be written, in a temporary folder of this
    command's own, returned here and removed when it ends. Child processes inherit the setting."""
    import os
    import tempfile

    from proofs_checks.store import default_store_dir, own_installation

    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return None
    kept = default_store_dir() / "torch"
    try:
        if own_installation(Path(os.path.realpath(kept)), holding=False):  # never inside tverify's own code
            raise OSError("inside tverify's installation")
        kept.mkdir(parents=True, exist_ok=True)
        if os.access(kept, os.W_OK | os.X_OK):
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(kept)
            return None
    except OSError:
        pass
    try:
        path = tempfile.mkdtemp(prefix="tverify-torch-")
    except OSError:  # no writable temporary folder: torch says so itself if it needs one
        return None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    return path


def _stderr_line(text: str) -> None:
    try:
        click.echo(text, err=True)
    except (OSError, ValueError):  # stderr closed too: nothing more to say
        pass


def _unrepresentable_number(argv: list[str]) -> tuple[str, str] | None:
    """The first argument (or ``--opt=VALUE`` value) written as a number a float64 cannot hold, named with its option,
    and ``"over"`` (``1e400``, read as ``inf``: it was reported as "got inf") or ``"under"`` (a non-zero ``1e-400``,
    read as 0.0: it was refused as "got 0.0", a number the user never wrote)."""
    import math
    import re

    prev = ""
    for tok in argv:
        text = tok.split("=", 1)[1] if tok.startswith("--") and "=" in tok else tok
        try:
            v = float(text)
        except ValueError:
            prev = tok
            continue
        kind = ("over" if math.isinf(v) and "inf" not in text.lower() else
                "under" if v == 0.0 and re.search(r"[1-9]", re.split(r"[eE]", text)[0]) else None)
        if kind is not None:  # named with its option (hostile pass 5, M2)
            return (f"{prev} {tok}" if prev.startswith("--") and "=" not in prev and tok == text else tok), kind
        prev = tok
    return None


def _underscored_number(argv: list[str]) -> str | None:
    """The first argument written as a number with ``_`` in it (``--seeds 1_0``), or with digits other than ASCII's
    (``--heads ٢``, ``--seq-len １７``): Python's ``int``/``float`` read them as 10, 2 and 17, a number the user may
    never have meant taken silently (hostile passes 10 F6, 46a F3)."""
    import re

    prev = ""
    for tok in argv:
        text = tok.split("=", 1)[1] if tok.startswith("--") and "=" in tok else tok
        named, prev = (f"{prev} {tok}" if prev.startswith("--") and "=" not in prev and tok == text else tok), tok
        if "_" not in text and text.isascii():
            continue
        # each value of a sweep's --grid "N=1_0,20 lambda=1|1_0" and of a list "--seq-len 1,١٧" too
        for piece in re.split(r"[=,|; ]", text):
            try:
                float(piece)
            except ValueError:
                continue
            if "_" in piece or not piece.isascii():
                return named
    return None
