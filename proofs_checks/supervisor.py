"""The console command in two processes: the command runs in a child, whose end its parent reports.

Why: a plugin's code is imported into tverify's own process (after the import probe, which runs it in
a child first). Code that behaves differently the second time — ``os._exit(0)``, an ``exec`` of
``/bin/true``, an exit callback calling ``os._exit`` — ended ``tverify run`` with exit 0 and nothing
printed (hostile pass 11, F8): no guard inside a process can stop that process from ending itself.
So on Linux the console command (``tverify``, ``python -m proofs_checks``; not ``cli.main()`` called
with arguments in a caller's process) forks first: the child does the command; the parent, which
imports and runs nothing else, waits for it and exits with its status — unless the child ended without
passing through Python's normal exit (its last exit callback writes one byte to a pipe), which is one
line and exit 1, whatever status the child's code chose.

Signals: the parent blocks the signals tverify answers (SIGTERM, SIGHUP, SIGINT, SIGUSR1/2, SIGQUIT)
and passes on to the child each one sent to it alone (``kill PID``). A signal sent to the process
group (Ctrl-C in a terminal, ``timeout``, ``kill -- -PGID``) reaches the child directly as well: the
child's signal wake-up descriptor tells the parent which signals reached it (written by the C-level
handler at delivery), and the parent passes on only one the child did not get within 0.3 s, so a
group signal is delivered once. SIGTSTP is passed on the same way (unless the child is stopped already) and then
stops the parent too; SIGCONT sent to the parent continues the child. ``kill -9`` of the parent kills the child
(``PR_SET_PDEATHSIG``). Both
processes are child subreapers; after the child ends, the parent kills whatever is still below it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["supervise", "ABNORMAL_EXIT"]

#: the parent's exit status when the child ended without finishing (not tverify's own exit)
ABNORMAL_EXIT = 1
#: how long the parent waits to see whether a signal sent to it reached the child directly too
_DIRECT_WINDOW_S = 0.3
_PR_SET_PDEATHSIG = 1
#: the longest scratch folder whose multiprocessing sockets (``pymp-XXXXXXXX/listener-XXXXXXXX``) still fit in
#: an AF_UNIX path (107 bytes on Linux)
_SOCKET_ROOM = 107 - 36
_PR_SET_CHILD_SUBREAPER = 36
#: the job-control signals passed on as well (Linux's numbers; SIGTSTP's default stops, SIGCONT's continues: not in
#: _forwarded)
_TSTP, _CONT = 20, 18


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - no prctl: the guarantees that need it do not hold (docs/extending.md)
        return False


def _forwarded(signal) -> list:
    """Every signal whose default action ends a process and that can be caught, but the faults this process's own
    code would raise (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT): the parent is transparent, a
    signal sent to it is one sent to the command (a ``kill -XCPU`` killed the parent by its default action)."""
    names = ("SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGXCPU", "SIGXFSZ", "SIGALRM",
             "SIGVTALRM", "SIGPROF", "SIGPWR", "SIGIO", "SIGSTKFLT")
    found = [getattr(signal, n) for n in names if hasattr(signal, n)]
    if hasattr(signal, "SIGRTMIN"):
        found += list(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))
    return sorted(set(found))


def supervise() -> bool:
    """Fork, on Linux; return True in the child (which then does the command); in the parent, wait for it
    and end this process with its status (never returns there). Elsewhere, or where the fork fails,
    return False at once: the command runs in this one process, as before."""
    if not sys.platform.startswith("linux"):
        return False
    import signal

    if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        # ignored SIGCHLD inherited through exec (a caller's `signal(SIGCHLD, SIG_IGN)`): the kernel then reaps every
        # child at its end, and no wait (this one's, subprocess's, multiprocessing's) gets a status — the wait below
        # found no child and the command hung (hostile pass 41a, F6); tverify waits for its children: the default
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Ctrl-Z and `kill -TSTP PID` stop the command with this process, and SIGCONT sent here continues it (hostile
    # pass 44a F7: a SIGTSTP to this process alone stopped it, the command and the code it runs went on)
    watched = _forwarded(signal) + [signal.SIGCHLD, _TSTP, _CONT]
    scratch = _scratch()
    done_r, done_w = os.pipe()
    sig_r, sig_w = os.pipe()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, watched)  # no signal lost between the fork and the wait
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for fd in (done_r, done_w, sig_r, sig_w):
            os.close(fd)
        _remove(scratch)
        return False
    if pid == 0:
        if scratch:  # everything the command and the code it runs put in $TMPDIR: removed however the child ends
            import tempfile

            os.environ["TMPDIR"] = scratch
            tempfile.tempdir = None
        _in_child(parent, old_mask, done_r, done_w, sig_r, sig_w)
        return True
    os.close(done_w)
    os.close(sig_w)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    status = _wait(pid, watched, sig_r)
    _end(status, done_r, scratch)


def _scratch() -> str | None:
    """The command's own temporary folder, the child's ``$TMPDIR`` (a process killed by SIGKILL, SIGSEGV or
    SIGQUIT left its ``pymp-*``, ``tverify-figures-*`` and Dask folders in $TMPDIR; hostile pass 12)."""
    import tempfile

    try:
        path = tempfile.mkdtemp(prefix="tv-")
    except OSError:
        return None
    if len(os.fsencode(path)) > _SOCKET_ROOM:  # multiprocessing's sockets there would not fit: $TMPDIR as it is
        _remove(path)
        return None
    return path


def _remove(path: str | None) -> None:
    if path:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


#: the child's "finished" mark (its last exit callback), for an exit that ends the process itself (cli's bounded exit)
_FINISHED: list = []


def mark_finished() -> None:
    """Tell the parent the command finished (what the last exit callback does), before an ``os._exit`` of tverify's."""
    for finished in _FINISHED:
        finished()


def _in_child(parent: int, old_mask, done_r: int, done_w: int, sig_r: int, sig_w: int) -> None:
    import atexit
    import signal

    os.close(done_r)
    os.close(sig_r)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above: nobody would report this command
        os._exit(ABNORMAL_EXIT)
    me = os.getpid()

    def finished() -> None:  # the last exit callback registered from here: it runs after every later one
        if os.getpid() == me:  # not in a process forked from this one that exits through Python
            try:
                os.write(done_w, b"1")
            except OSError:
                pass

    atexit.register(finished)
    _FINISHED[:] = [finished]
    os.set_blocking(sig_w, False)
    try:
        signal.set_wakeup_fd(sig_w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        pass
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _drain(fd: int, got: dict[int, float]) -> None:
    import time

    while True:
        try:
            data = os.read(fd, 512)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
        if not data:
            return
        now = time.monotonic()
        for b in data:
            got[b] = now


def _wait(pid: int, watched: list, sig_r: int) -> int:
    """The child's wait status; every signal in ``watched`` is blocked here and taken by
    ``sigtimedwait``: one sent to this process alone is passed on to the child."""
    import select
    import signal
    import time

    os.set_blocking(sig_r, False)
    got: dict[int, float] = {}
    while True:
        status = _reap(pid)
        if status is not None:
            return status
        info = signal.sigtimedwait(watched, 1.0)
        if info is None or info.si_signo == signal.SIGCHLD:
            continue
        signum, since = info.si_signo, time.monotonic() - _DIRECT_WINDOW_S
        if signum == _CONT:  # (this process went on already; the command goes on with it, once more is harmless)
            _send(pid, signum)
            continue
        deadline = since + 2 * _DIRECT_WINDOW_S
        _drain(sig_r, got)
        while got.get(signum, -1.0) < since and time.monotonic() < deadline:
            select.select([sig_r], [], [], max(0.0, deadline - time.monotonic()))
            _drain(sig_r, got)
            if _reap(pid, peek=True) is not None or (signum == _TSTP and _stopped(pid)):
                break
        if got.get(signum, -1.0) < since and not (signum == _TSTP and _stopped(pid)):
            _send(pid, signum)
        if signum == _TSTP:  # stopped as the command is (the shell's job control sees this process)
            os.kill(os.getpid(), signal.SIGSTOP)


def _send(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (state T in ``/proc/PID/stat``): a SIGTSTP it took by the default action."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


_ENDED: dict[int, int] = {}


def _reap(pid: int, *, peek: bool = False) -> int | None:
    """The child's status once it ended (orphans this subreaper adopted are reaped on the way)."""
    while pid not in _ENDED:
        try:
            who, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left, and the command's status never read: it cannot be known
            _ENDED.setdefault(pid, _LOST)
            break
        if who == 0:
            break
        _ENDED[who] = status
    return _ENDED.get(pid)


#: the status recorded for a child that ended without its status reaching this process (reaped elsewhere)
_LOST = -1


def _end(status: int, done_r: int, scratch: str | None) -> None:
    import signal

    os.set_blocking(done_r, False)  # a process forked from the child may hold the pipe's other end
    try:
        done = os.read(done_r, 1) == b"1"
    except OSError:
        done = False
    _kill_below()
    _remove(scratch)
    if status == _LOST:
        _line("tverify: error: the command's process ended and its exit status could not be read; the verdict is unknown")
        os._exit(ABNORMAL_EXIT)
    if os.WIFEXITED(status) and done:
        os._exit(os.WEXITSTATUS(status))
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig != signal.SIGINT:
            why = {"SIGKILL": " (out of memory, or kill -9)", "SIGSEGV": " (a crash in compiled code)",
                   "SIGABRT": " (an abort in compiled code)", "SIGBUS": " (a crash in compiled code)"}
            _line(f"tverify: error: the command's process was killed by {name}{why.get(name, '')}; "
                  "outputs written before are complete, nothing after")
        os._exit(128 + sig)
    code = os.WEXITSTATUS(status)
    _line(f"tverify: error: the command's process ended with exit status {code} before tverify finished — "
          "code it ran (a plugin's import, an exit callback) called os._exit or exec; the verdict is unknown")
    os._exit(ABNORMAL_EXIT)


def _kill_below() -> None:
    """Kill what is still below this process once the child ended (its fork server, a resource tracker, what code it
    ran left running). The child does not kill its own descendants at its end: it did so before its interpreter's
    last clean-ups, which then wrote to a killed resource tracker (tracebacks after a Ctrl-C during a local
    cluster's start; hostile pass 12); once the child has ended, nothing of it can write any more."""
    try:
        from proofs_checks.sanity._procs import kill_below
    except Exception:  # noqa: BLE001 - nothing to find them with
        return
    kill_below(os.getpid())
    _reap_any()


def _reap_any() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _line(text: str) -> None:
    try:
        os.write(2, (text + "\n").encode(errors="replace"))
    except OSError:
        pass
