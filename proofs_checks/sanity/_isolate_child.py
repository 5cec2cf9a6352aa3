"""The check's own process, its side (:mod:`proofs_checks.sanity._isolate` is the parent's, and says why the user's
code runs here): the values that cross the process boundary (JSON with NaN kept, ``.npz`` arrays read without pickle),
the child's start (its own session, standard streams into the parent's channel, the request's environment, working
folder and ``sys.path``), the task run under the guard that names replaced functions, the result sent with the
parent's token, and the child's own exit statuses when no result can reach the parent."""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import json
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from proofs_checks.sanity import _procs
from theory.validation import exception_text, printable


# ------------------------------------------------------------------------------------------------
# values that cross the process boundary


def plain(x: Any) -> Any:
    """``x`` as JSON-able Python values (NumPy and torch arrays as lists, tuples as lists), NaN and
    ±inf kept (``json.dumps(allow_nan=True)`` writes them; ``json.loads`` reads them back).

    >>> import numpy as np
    >>> plain({"a": np.float64("nan"), "b": (1, np.arange(2))})
    {'a': nan, 'b': [1, [0, 1]]}
    """
    if x is None or isinstance(x, (str, bool)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    if isinstance(x, dict):
        return {printable(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [plain(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(x, np.ndarray):
            return plain(x.tolist())
        if isinstance(x, np.generic):
            return plain(x.item())
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(x, torch.Tensor):
            return plain(x.detach().cpu().tolist())
        if isinstance(x, torch.dtype):
            return str(x).replace("torch.", "")
    return printable(x)  # (an object whose __str__ raises: <unprintable X>, not a dead child, hostile pass 43b F7)


def _dumps(doc: Any) -> bytes:
    return _encode(json.dumps, plain, doc)


def _encode(dumps, to_plain, doc: Any) -> bytes:
    return dumps(to_plain(doc), allow_nan=True).encode("utf-8")


def _send_raw(write, fd: int, data: bytes) -> None:
    """``data`` in the framing of ``Connection.send_bytes`` (a 4-byte big-endian length, then the bytes; the parent
    reads it with ``recv_bytes``), written with the ``os.write`` taken when the child started."""
    view = memoryview(len(data).to_bytes(4, "big", signed=True) + data)
    while view:
        view = view[write(fd, view):]


def pack_arrays(**arrays) -> bytes:
    """``.npz`` bytes of float arrays (read back by :func:`unpack_arrays` without pickle)."""
    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def unpack_arrays(blob: bytes | None) -> dict:
    import numpy as np

    if not blob:
        return {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


# ------------------------------------------------------------------------------------------------
# the child


def _end_own_group(code: int) -> None:  # pragma: no cover - runs in the child
    """End what the user's code started (every process below the child: its group's and the orphans it adopted as
    the subreaper), then the child itself with ``code``: a SIGKILL of its own group ended the child too, and the
    parent read that as the out-of-memory killer (hostile pass 43a F15)."""
    with contextlib.suppress(Exception):
        _procs.kill_below(os.getpid())
    os._exit(code)


#: the child's exit statuses of its own: the parent's end of the liveness channel read closed while the parent lives
#: (the code closed or replaced that descriptor), the result could not be sent, no end came after the result was sent
LOST_CHANNEL_EXIT, SEND_FAILED_EXIT, NO_END_EXIT = 70, 71, 72


#: the child's exit status when the user's code closed the descriptors it talks to this process through
CLOSED_FDS_EXIT = 73

#: what the user's code did when no result can reach this process
_LOST_FDS = ("the code closed the file descriptors it talks to tverify through, or replaced them (os.closerange, "
             "os.dup2 over them)")


def _watch_parent(alive) -> None:
    """Daemon thread of the child: when the parent is gone (its end of ``alive`` closed), end, with
    everything the user's code started. When the code closed the child's own descriptors
    (``os.closerange``), exit with :data:`CLOSED_FDS_EXIT` (the parent ends what it started): no
    result can reach the parent any more, and a SIGKILL of the group, this process included, read
    as "out of memory?"."""
    try:
        alive.recv_bytes()
    except EOFError:
        pass
    except OSError:
        os._exit(CLOSED_FDS_EXIT)
    _end_own_group(LOST_CHANNEL_EXIT)


def _own_session() -> None:  # pragma: no cover - runs in the child
    """Make the child the leader of a new session and process group (the parent kills the group
    when the task ends) and, on Linux, the reaper of its descendants' orphans (so a process that
    leaves the group is still found below the child). Best effort."""
    if hasattr(os, "setsid"):
        with contextlib.suppress(OSError):
            os.setsid()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _child_main(req_bytes: bytes, obj_blob: bytes | None, arrays_blob: bytes | None, result_conn, out_conn,
                alive) -> None:  # pragma: no cover - runs in the child (tests run it through the CLI)
    # the result's way out, taken before any code of the user's runs: a module that replaced
    # multiprocessing's Connection.send_bytes rewrote a leak's result into "ok" (hostile pass 12)
    send = functools.partial(_send_raw, os.write, result_conn.fileno())
    # and what encodes it, bound here too: a thread of the user's code replaced ``_isolate.json`` after the guard had
    # compared, and the leak's result was encoded as "ok" (hostile pass 14b F1)
    encode = functools.partial(_encode, json.dumps, plain)
    guard = _replaced
    _own_session()
    _procs.drop_server_client_fd()
    fd = out_conn.fileno()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace",
                                  line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace",
                                  line_buffering=True)
    # an `async def` model returns a coroutine, which the check refuses in one line ("got coroutine"); Python's
    # "coroutine … was never awaited" warning, with tverify's source lines, is not for the user (hostile pass 45a F10)
    warnings.filterwarnings("ignore", message="coroutine .* was never awaited", category=RuntimeWarning)
    threading.Thread(target=_watch_parent, args=(alive,), daemon=True).start()
    threading.excepthook = _thread_exception  # a thread the user's code started: one line, not its traceback
    req = json.loads(req_bytes.decode("utf-8"))
    if req.get("cgroup"):  # the check's memory cgroup, before any code of the user's runs (the parent moves it too)
        with contextlib.suppress(OSError):
            with open(os.path.join(req["cgroup"], "cgroup.procs"), "w") as fh:
                fh.write("0")
    # the parent's token for this task, out of the request the task reads: the result carries it, so a message the
    # user's code writes into the result pipe itself (an honest run's result, replayed) is not taken (hostile pass 13b F2)
    token = req.pop("token", None)
    os.environ.clear()
    os.environ.update(req.get("env") or {})
    with contextlib.suppress(OSError):
        os.chdir(req["cwd"])
    sys.path[:] = req.get("sys_path") or sys.path
    from proofs_checks.syspath import without_own

    sys.path[:] = without_own(sys.path)  # a checkout's benchmarks/ or examples/ never shadows the user's (17b F1)
    if req.get("threads"):
        import torch

        with contextlib.suppress(Exception):
            torch.set_num_threads(int(req["threads"]))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(AttributeError, OSError, ValueError):  # the fork server's blocked SIGINT, inherited
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    import builtins
    from json import encoder as json_encoder

    # what encodes the result: a built-in the user's code rebinds (builtins.float) broke it, a replaced json.dumps
    # rewrote a leak's result into "ok" (hostile pass 11; the guard names the replacement, and the reply saying so is
    # encoded by the originals, put back here)
    encoders = (builtins, json, json_encoder, json_encoder.JSONEncoder)
    saved = [(ns, dict(vars(ns))) for ns in encoders]
    from proofs_checks.sanity import _loader

    hooks = _loader.hooks()
    payload, functions = _run_task(req, obj_blob, arrays_blob)
    _loader.clear_hooks(hooks)  # (a hook left set is named by the task's guard; none sees the result being encoded)
    for ns, attrs in saved:
        for k, v in attrs.items():
            if vars(ns).get(k) is not v:
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(ns, k, v)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        head = f"{token}\n".encode()  # the token first: the parent reads nothing further of a message without it
        data = head + encode(payload)
        # the guard once more, after the encoding: what a thread of the code's replaced meanwhile (and left so)
        late = guard(functions, req.get("label", "--module")) if functions is not None and "error" not in payload \
            else None
        send(head + encode(late) if late else data)
    except OSError as exc:
        if exc.errno == errno.EBADF:  # the code closed the descriptor (os.closerange): say so, not a SIGKILL
            os._exit(CLOSED_FDS_EXIT)
        _end_own_group(SEND_FAILED_EXIT)
    except Exception as exc:  # the result could not be encoded: said, not read as a SIGKILL of the child (43b F7)
        with contextlib.suppress(Exception):
            send(head + encode({"internal": f"the check's result could not be encoded: {exception_text(exc)}",
                                "traceback": ""}))
        _end_own_group(SEND_FAILED_EXIT)
    # the parent, on receiving the result, kills this process with every descendant it can find (the
    # tree is intact while this process lives and adopts orphans); should it not, end the group here
    time.sleep(30)
    _end_own_group(NO_END_EXIT)


_THREAD_ERRORS = {"n": 0}


def _thread_exception(args) -> None:  # pragma: no cover - runs in the child
    """``threading.excepthook`` in the child: the first exception of a thread the user's code started
    is one line on stderr, later ones are counted, never a traceback each (a module whose worker
    threads raise printed 650 lines)."""
    from proofs_checks.sanity._loader import describe_exception

    _THREAD_ERRORS["n"] += 1
    if _THREAD_ERRORS["n"] == 1:
        name = getattr(args.thread, "name", "a thread")
        with contextlib.suppress(Exception):
            sys.stderr.write(f"tverify: note: a thread the code started ({name}) raised "
                             f"{describe_exception(args.exc_value or args.exc_type())}; later ones are not shown\n")


def _run_task(req: dict, obj_blob: bytes | None, arrays_blob: bytes | None) -> tuple[dict, dict | None]:
    """The task's payload, and the guard's snapshot taken before the user's code ran (``None`` if none was)."""
    held: dict = {}
    payload = _task_payload(req, obj_blob, arrays_blob, held)
    return payload, held.get("functions")


def _task_payload(req: dict, obj_blob: bytes | None, arrays_blob: bytes | None, held: dict) -> dict:
    from proofs_checks import guards
    from proofs_checks.options import UsageError
    from proofs_checks.sanity._loader import describe_exception
    from theory.validation import InputError

    label = req.get("label", "--module")
    import importlib

    from proofs_checks.sanity._loader import function_snapshot

    mod, _, fn = req["task"].partition(":")
    task = getattr(importlib.import_module(mod), fn)  # a check module's child_task (by name: no import circle)
    # before any of the user's code runs here (their objects are unpickled below); the check's own modules are
    # loaded by now, so their functions are in it too
    functions = held["functions"] = function_snapshot()
    try:
        obj = None
        if obj_blob is not None:
            import pickle

            import cloudpickle  # noqa: F401  (its reducers: classes and functions by value)

            try:
                obj = pickle.loads(obj_blob)  # the caller's own objects, serialised by the caller's process
            except Exception as exc:
                return {"error": f"{label}: the object could not be rebuilt in the check's own process: "
                                 f"{describe_exception(exc)} (isolate=False runs it in your process)"}
        arrays = unpack_arrays(arrays_blob)
        ctx = guards.dry_run() if req.get("dry_run") else contextlib.nullcontext()
        with ctx:
            payload = task(req, obj, arrays)
        return _replaced(functions, label) or {"ok": True, **payload}
    except guards.DryRunStop:
        return {"dry_run_stop": True}
    except UsageError as exc:
        return {"error": " ".join(exc.format_message().split())}
    except InputError as exc:
        return {"error": " ".join(str(exc).split())}
    except KeyboardInterrupt:
        return {"error": f"{label}: the code raised KeyboardInterrupt (not a Ctrl-C: this process was not "
                         "interrupted); nothing was checked"}
    except SystemExit as exc:
        return {"error": f"{label}: the code called sys.exit({printable(exc.code, repr)}); nothing was checked"}
    except BaseException as exc:  # tverify's own code, or user code outside a boundary: the traceback
        replaced = _replaced(functions, label)  # tverify's code broken by a replaced built-in: that, not its traceback
        if replaced:
            return replaced
        where = _user_frame(exc)
        if where is not None:  # raised inside the user's own file: the user's exception, one line
            return {"error": f"{label}: the code raised {describe_exception(exc)} (at {where}) while it was being "
                             "checked; nothing was checked"}
        if isinstance(exc, RuntimeError) and "modified inplace" in str(exc):
            # autograd's version check on a view of the module's own parameters (a fused q/k/v weight split into the
            # reference's weights) that one of its calls wrote in place (hostile pass 24b F13): the user's doing
            return {"error": f"{label}: a call of the module wrote into its own parameters in place (torch: "
                             f"{' '.join(str(exc).split())[:160]}), and the reference reads them as views of those "
                             "parameters, so nothing could be checked: update them out of place (param.data = ...), "
                             "or return the weights from the module's tverify_mapping()"}
        return {"internal": describe_exception(exc), "traceback": traceback.format_exc()}


def _replaced(functions: dict, label: str) -> dict | None:
    """The error when the user's code replaced a function tverify's comparisons call in this process
    (:func:`proofs_checks.sanity._loader.replaced_functions`): every number measured here used it (N7)."""
    from proofs_checks.sanity._loader import replaced_functions

    replaced = replaced_functions(functions)
    if not replaced:
        return None
    shown = ", ".join(replaced[:4]) + (f" and {len(replaced) - 4} more" if len(replaced) > 4 else "")
    return {"error": f"{label}: the code replaced {shown} in the check's process (functions tverify's own "
                     "comparisons call there): the errors it measured cannot be trusted; nothing was checked"}


def _user_frame(exc: BaseException) -> str | None:
    """``FILE:LINE`` of the innermost frame of ``exc``'s traceback that is the user's own code (a file
    outside this project, the standard library and installed packages); ``None`` when no frame is."""
    import sysconfig

    roots = []
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        with contextlib.suppress(KeyError, OSError, ValueError, TypeError):
            roots.append(os.path.realpath(sysconfig.get_paths()[key]))
    top = Path(__file__).resolve().parents[2]
    roots += [os.path.realpath(str(top / pkg)) for pkg in ("proofs_checks", "numerics", "theory")]
    found = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        f = frame.f_code.co_filename
        if not f or f.startswith("<"):
            continue
        real = os.path.realpath(f)
        if not any(real.startswith(r + os.sep) for r in roots):
            found = f"{os.path.basename(f)}:{line}"
    return found


def draw_figures(figures: dict, lines: list, req: dict) -> dict:
    """In the child: draw ``figures`` (name -> callable returning a matplotlib figure) as PNG files
    into ``req["figures_dir"]`` when the parent asked for them (``--report``); ``{name: path}``. A
    figure that fails is a line in ``lines``, not a failure."""
    out = {}
    where = req.get("figures_dir")
    if not where or not figures:
        return out
    from proofs_checks.syspath import system_only

    with system_only():  # not an mpl_toolkits.py beside the user's module (hostile pass 16b F4)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

    from proofs_checks.options import UsageError
    from proofs_checks.sanity._loader import describe_exception

    for name, make in figures.items():
        path = Path(where) / f"{name}.png"
        try:
            fig = make()
            fig.savefig(path, dpi=100, bbox_inches="tight")
            plt.close(fig)
            out[name] = str(path)
        except (Exception, UsageError) as exc:  # a figure is decoration: say so, do not fail
            lines.append(f"(figure {name} not drawn: {describe_exception(exc)})")
    return out
