"""Intra-op threads of torch and of the BLAS/OpenMP libraries, set from the cores this process may use.

Every command that computes (``run``, ``mutants``, ``report``, ``reproduce``, ``sweep``, ``survey``,
each ``check`` subcommand), the Python API functions and the pytest fixture call :func:`pin` before any
work. The number of threads is, first that given wins:

1. ``--threads N`` (the commands) or ``threads=`` (:func:`pin`'s argument);
2. the environment variable ``TVERIFY_THREADS``;
3. ``OMP_NUM_THREADS`` when the user exported it (their declaration);
4. the cores this process may run on (``os.sched_getaffinity``, not the machine's count: a container or
   ``taskset`` gives fewer) divided among the worker processes sharing them: one per worker when there
   are as many workers as cores (``pytest -n``'s workers, read from ``PYTEST_XDIST_WORKER_COUNT``;
   the W workers of ``--cluster local:W``: :func:`proofs_checks.distributed.cluster.open_client`).

Why: with torch's own default (one thread per core) a small trained check on a loaded 2-core machine
ran 16× slower than with one thread (the threads wait for each other at every small operation while
another process holds the cores). OpenMP's idle threads are also told to sleep rather than spin
(``OMP_WAIT_POLICY=PASSIVE``) unless the user chose otherwise: set before torch is imported, it is what
keeps two threads from burning a loaded core (benchmarks/RESULTS.md, "Threads").

>>> resolve(3).threads, resolve(3).source
(3, '--threads')
>>> resolve(None, workers=10**6, env={}).threads   # never fewer than one
1
>>> resolve(None, env={"TVERIFY_THREADS": "2"}).source
'TVERIFY_THREADS'
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Mapping

__all__ = ["ENV", "Threads", "available_cores", "resolve", "pin", "pinned", "threads_option"]

#: the environment variable that sets the thread count of every command
ENV = "TVERIFY_THREADS"
#: the most threads per process (OpenMP runtimes refuse far larger counts)
MAX_THREADS = 4096
#: the variables the BLAS and OpenMP runtimes read when they load (set for libraries not yet loaded
#: and for child processes)
_RUNTIME_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True)
class Threads:
    """How many intra-op threads, and what decided it (``--threads``, ``TVERIFY_THREADS``,
    ``OMP_NUM_THREADS`` or ``cores``)."""

    threads: int
    source: str


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _workers(env: Mapping[str, str]) -> int:
    try:
        return max(1, int(env.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return 1


def _parse(value: str, name: str) -> int:
    from proofs_checks.errors import UsageError

    try:
        n = int(str(value).strip()) if "_" not in str(value) and str(value).isascii() else 0  # "1_0", "١٠": 10 (10 F6, 46a F3)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise UsageError(f"{name} must be a whole number from 1 to {MAX_THREADS} (threads per process), got {value!r}")
    return n


def resolve(threads: int | None = None, *, workers: int | None = None, default: int | None = None,
            env: Mapping[str, str] | None = None) -> Threads:
    """The thread count (see the module's docstring for the order). ``workers``: processes sharing
    this machine's cores (default: pytest-xdist's worker count, else 1); ``default``: the count when
    nothing is set (instead of the cores). A bad ``TVERIFY_THREADS`` is a
    :class:`~proofs_checks.errors.UsageError` (one line, exit 2)."""
    omp = (_INHERITED_OMP if env is None else env.get("OMP_NUM_THREADS")) or ""
    env = os.environ if env is None else env
    if threads is not None:
        return Threads(_parse(threads, "--threads"), "--threads")
    if ENV in env:  # set, even to '' or blanks: a value to judge (an empty one was read as unset: hostile pass 58b F2)
        return Threads(_parse(env[ENV], ENV), ENV)
    omp = omp.strip()
    if omp.isascii() and omp.isdigit() and int(omp) >= 1:
        return Threads(int(omp), "OMP_NUM_THREADS")
    if default is not None:
        return Threads(max(1, int(default)), "default")
    n = workers if workers is not None else _workers(env)
    return Threads(max(1, available_cores() // max(1, n)), "cores")


_pinned: dict[str, int] = {}
#: OMP_NUM_THREADS as this process found it (a declaration of the user's or of a parent process): what
#: :func:`pin` writes into the environment later is its own decision, not a declaration to defer to
_INHERITED_OMP = os.environ.get("OMP_NUM_THREADS")


def pin(threads: int | None = None, *, workers: int | None = None, default: int | None = None) -> Threads:
    """Set the thread count (:func:`resolve`) for torch, for the BLAS/OpenMP libraries already loaded
    (threadpoolctl) and, through the environment, for those loaded later and for child processes.
    Cheap to call again: torch is not imported by this function (it reads ``OMP_NUM_THREADS`` when it
    is), and an unchanged count is not set twice."""
    t = resolve(threads, workers=workers, default=default)
    n = t.threads
    if t.source in ("--threads", "default"):  # a decision later calls (and child processes) keep
        os.environ[ENV] = str(n)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for var in _RUNTIME_VARS:
        os.environ[var] = str(n)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads") and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    if "numpy" in sys.modules and _pinned.get("blas") != n:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover (scikit-learn's dependency; the variables above still apply)
            pass
        else:
            threadpool_limits(n)
            _pinned["blas"] = n
    return t


def _blas_threads() -> int | None:
    """The thread count of the BLAS/OpenMP libraries now loaded (the largest), None when none is or
    threadpoolctl is missing."""
    if "numpy" not in sys.modules:
        return None
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover
        return None
    counts = [p.get("num_threads") for p in threadpool_info() if isinstance(p.get("num_threads"), int)]
    return max(counts) if counts else None


@contextmanager
def pinned(threads: int | None = None, *, workers: int | None = None, default: int | None = None):
    """:func:`pin` for the length of a block: what the Python API and the pytest fixture use, in a process
    that is the caller's. Afterwards the caller's environment variables (``TVERIFY_THREADS``,
    ``OMP_WAIT_POLICY``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``) are as they
    were, set or unset, and so are torch's intra-op thread count and the BLAS libraries' limits; torch or a
    BLAS library first loaded inside the block gets the count it would have had loaded by the caller
    (``OMP_NUM_THREADS`` as the caller had it, else the cores this process may use)."""
    names = (ENV, "OMP_WAIT_POLICY", *_RUNTIME_VARS)
    saved_env = {k: os.environ.get(k) for k in names}
    torch = sys.modules.get("torch")
    saved_torch = torch.get_num_threads() if torch is not None and hasattr(torch, "get_num_threads") else None
    saved_blas = _blas_threads()
    try:
        yield pin(threads, workers=workers, default=default)
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        omp = (saved_env["OMP_NUM_THREADS"] or "").strip()
        loaded_default = int(omp) if omp.isascii() and omp.isdigit() and int(omp) >= 1 else available_cores()
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "set_num_threads"):
            want = saved_torch if saved_torch is not None else loaded_default
            if torch.get_num_threads() != want:
                torch.set_num_threads(want)
        _pinned.pop("blas", None)
        if "numpy" in sys.modules and _blas_threads() != (saved_blas or loaded_default):
            try:
                from threadpoolctl import threadpool_limits
            except ImportError:  # pragma: no cover
                pass
            else:
                threadpool_limits(saved_blas or loaded_default)


def _pin_callback(ctx, param, value):
    pin(value)
    return value


def threads_option(f):
    """``--threads N`` on a command: pins the threads (:func:`pin`) as the options are parsed, before
    the command runs; the command does not receive the value."""
    import click

    return click.option(
        "--threads", type=click.IntRange(min=1, max=MAX_THREADS), default=None, expose_value=False, callback=_pin_callback,
        metavar="N", is_eager=True,
        help=f"Intra-op threads for torch and BLAS (env {ENV}; default: OMP_NUM_THREADS if set, else the cores "
             "this process may use, divided among pytest-xdist workers).")(f)
