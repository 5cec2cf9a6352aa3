"""The checks' fork server, tverify's own (never the process-wide one): the modules it imports once
(:data:`PRELOAD`), its start with SIGINT ignored, the ``Popen`` that launches a child through it without the caller's
``__main__``, and the caller's multiprocessing state and signal mask kept as they were. Used by
:func:`proofs_checks.sanity._isolate.run_isolated`, which re-exports these names."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import signal
import sys
import threading
import types

from proofs_checks.sanity import _procs


#: modules the forkserver imports once (each child starts with them imported). torch's symbolic shapes (with SymPy):
#: autograd imports them on the first ``torch.autograd.grad`` with ``grad_outputs`` (check attention's gradient
#: properties), 0.13 CPU s in every check's child otherwise (with SymPy loaded already), a fifth of the time the test
#: suite spent in those children (sampled; benchmarks/RESULTS.md, "Fifteenth session")
PRELOAD = ["numpy", "torch", "torch.fx.experimental.symbolic_shapes", "proofs_checks.sanity._isolate",
           "proofs_checks.sanity._isolate_child",
           "proofs_checks.sanity.attention", "proofs_checks.sanity.icl", "proofs_checks.sanity.hopfield",
           "numerics.attention_probe", "numerics.icl_probe", "numerics.hopfield", "numerics.icl",
           "proofs_checks.sanity._server_ready"]


def _context():
    """``(context, whether through tverify's own fork server)``: that server (:func:`proofs_checks.sanity._procs.server`,
    started here with :data:`PRELOAD`), or ``spawn`` where the platform has no fork server."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        server = _procs.server()
        if getattr(server, "_preload_modules", None) != PRELOAD:
            server.set_forkserver_preload(PRELOAD)
        _start_forkserver_quietly(server)
        return mp.get_context("forkserver"), True
    return mp.get_context("spawn"), False


@functools.cache
def _forkserver_popen():
    """multiprocessing's fork-server ``Popen`` through tverify's own server: never the process-wide one, whose other
    children (a caller's own forkserver jobs) were taken for the check's orphans and killed (hostile pass 32a F5); and
    without the caller's ``__main__`` in what the child prepares (it would import the caller's script again), left out
    of that data alone rather than hidden from the whole process while the child starts (32a F6)."""
    from multiprocessing import context, forkserver, popen_forkserver, reduction, spawn, util

    class Popen(popen_forkserver.Popen):
        def _launch(self, process_obj):  # multiprocessing's own, but for the server and the two keys
            prep_data = spawn.get_preparation_data(process_obj._name)
            for key in ("init_main_from_path", "init_main_from_name"):
                prep_data.pop(key, None)
            buf = io.BytesIO()
            context.set_spawning_popen(self)
            try:
                reduction.dump(prep_data, buf)
                reduction.dump(process_obj, buf)
            finally:
                context.set_spawning_popen(None)
            self.sentinel, w = _procs.server().connect_to_new_process(self._fds)
            parent_w = os.dup(w)  # the data pipe's write end: the child's sentinel of this process
            self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))
            with open(w, "wb", closefd=True) as f:
                f.write(buf.getbuffer())
            self.pid = forkserver.read_signed(self.sentinel)

    return Popen


def _server_popen(process_obj):
    """A ``Popen`` of the process through tverify's own fork server (:func:`_forkserver_popen`): set as the process's
    own ``_Popen`` (a subclass of multiprocessing's process, as a class of tverify's modules, would be watched for
    replaced methods in the check's process, where the plugin caches wrap the ``start`` it inherits)."""
    return _forkserver_popen()(process_obj)


def _start_forkserver_quietly(server) -> None:
    """Start the fork server with SIGINT ignored (inherited across its exec): a Ctrl-C at a terminal
    signals the whole foreground group, and the server, still importing its preload modules, printed a
    30-line KeyboardInterrupt traceback beside tverify's one line. The server ignores SIGINT itself
    once started; its children (the checks' processes) restore the default handler. This process's
    own handler is back before the server is used. The server starts isolated
    (:func:`proofs_checks.sanity._procs.isolated_start`)."""
    if getattr(server, "_forkserver_pid", None) is not None:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    # ignored, not blocked: the exec that starts the server resets the blocked mask but keeps an ignored
    # signal ignored. The window is the spawn alone (milliseconds: the server imports its preload
    # modules after ensure_running returns); a Ctrl-C inside it is not seen by this process
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _procs.isolated_start():
            server.ensure_running()
    except Exception:  # the start is retried, with its own error, by the first Process.start()
        pass
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def _callers_state_kept():
    """What the caller's process had, as it was, once a fork server or a process is started (the API runs in the
    caller's process): the process-wide multiprocessing start method left unset where it was (starting reads
    ``multiprocessing.get_start_method()`` for its preparation data, which fixes the default on first call, and a
    program calling the API could not choose its own afterwards: ``set_start_method`` raised "context has already been
    set", hostile pass 41a F1); and this thread's blocked signals (multiprocessing's resource tracker blocks SIGINT and
    SIGTERM while it starts, then *unblocks* them whatever the mask was: a caller's critical section holding them
    blocked was open to them after the call, 41a F2)."""
    import multiprocessing.context as mpc

    dc = mpc._default_context
    unset = getattr(dc, "_actual_context", None) is None
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, ()) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if unset and getattr(dc, "_actual_context", None) is getattr(dc, "_default_context", object()):
            dc._actual_context = None
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@contextlib.contextmanager
def _main_hidden():
    """While a child starts: ``__main__`` without a file or spec, so multiprocessing does not import
    the caller's script again in the child (a script without a main guard would run twice)."""
    saved = sys.modules.get("__main__")
    stub = types.ModuleType("__main__")
    sys.modules["__main__"] = stub
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
