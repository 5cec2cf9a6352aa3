"""Running the suite's work on a Dask cluster (``--cluster ADDRESS|local:W``).

Everything Dask-specific lives here: creating the client (:func:`open_client`), submitting tasks
and gathering their results with a progress callback, retries and cancellation
(:func:`run_tasks`), and cutting a run of claims and mutants into tasks (:func:`run_claims_on`).
Without ``--cluster`` nothing here is imported and the runner works in-process as before.

* ``local:W`` starts a :class:`dask.distributed.LocalCluster` of ``W`` worker processes with one
  thread each (and no dashboard); with ``--device cuda`` each of them offers the resource ``GPU=1``.
* any other value is the address of a running scheduler (``tcp://host:8786``): it is probed with
  a connect timeout of :data:`CONNECT_TIMEOUT_S` seconds, so a wrong address is one line and
  exit 2 within seconds, never a hang.

**Tasks.** A run with few claim modules per worker is cut into one task for each claim's derivation
(obligations) and one task per check; a check's task runs the check on the claim's form (and an
erratum's stated form) and, for the kill matrix, on every mutant's form, so the check's
form-independent reference (a trained model, a Monte Carlo sample) is computed once per task, as
in-process. A run whose claims come from at least :data:`MODULES_PER_WORKER` claim modules per worker
(``tverify report`` of all 50 claims on ``local:2``) is cut into one task per claim module instead:
references that checks and claims of a module share (``icl.function_classes`` trains its models once
for its three checks and for ``icl.algorithm_probe``) are then computed once, and each claim also
gets its continuous-mutant row there. A report's reproductions are tasks beside them (first). A
check that runs on the device (``Check.uses_device``) under ``--device cuda`` carries the Dask
resource ``GPU=1`` (a module task: when any of its checks does): only workers started with
``--resources GPU=1`` take it.

**Same answers.** A task is a pure function of (claim id, check name, form, mode, base seed,
device): every seed comes from :meth:`RunContext.seed_for` (SHA-256 of the base seed, the claim and
the check), never from which worker runs it or when, so a cluster run writes the same numbers as
an in-process run (given the same BLAS/torch thread count: Dask's workers run one thread each, and
a float reduction split over more threads may round differently in its last bits).

**Failures.** A worker that dies mid-task: the scheduler hands its tasks to another worker (and a
task that raised is retried :data:`RETRIES` times); a task that still fails becomes an ``error``
outcome of its check (the claim's status is ``error``), never a hung run. Ctrl-C cancels every
task and re-raises: the caller writes nothing.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import re
import shutil
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import click

from proofs_checks.errors import UsageError

__all__ = ["CONNECT_TIMEOUT_S", "RETRIES", "Task", "TaskFailure", "parse_cluster", "check_cluster", "open_client", "run_tasks",
           "run_tasks_local", "gpu_workers", "interrupt_once", "worker_scratch"]

#: seconds allowed to reach a scheduler (probe and client), so a wrong address fails fast
CONNECT_TIMEOUT_S = 5.0
#: how many times a task that raised is resubmitted (a dead worker's tasks are rescheduled anyway)
RETRIES = 2
#: ``local:W`` accepts 1 ≤ W ≤ this
MAX_LOCAL_WORKERS = 256

_LOCAL = re.compile(r"^local(?::([0-9]+))?$")  # ASCII digits: local:１ read as 1 worker (48b F1)


def parse_cluster(spec: str | None) -> tuple[str, Any] | None:
    """``None`` → ``None`` (in-process); ``"local:W"`` → ``("local", W)`` (``"local"`` alone: one
    worker per CPU); anything else → ``("address", spec)``. A malformed ``local:`` value or an
    empty address raises :class:`UsageError` (one line, exit 2). Imports nothing from Dask.

    >>> parse_cluster("local:2"), parse_cluster("tcp://host:8786")
    (('local', 2), ('address', 'tcp://host:8786'))
    """
    if spec is None:
        return None
    s = str(spec).strip()
    if not s:
        raise UsageError("--cluster: empty value (give a scheduler address like tcp://host:8786, or local:W)")
    m = _LOCAL.match(s)
    if m:
        import os

        w = int(m.group(1)) if m.group(1) else (os.cpu_count() or 1)
        if not 1 <= w <= MAX_LOCAL_WORKERS:
            raise UsageError(f"--cluster {s}: the number of local workers must be 1 … {MAX_LOCAL_WORKERS}")
        return ("local", w)
    if s.lower().startswith("local") and not s.startswith("local"):  # LOCAL:1 was tried as a host's address
        raise UsageError(f"--cluster {s}: write local:W in lower case (a scheduler address names its scheme, "
                         "e.g. tcp://host:8786)")
    if s.startswith("local"):
        raise UsageError(f"--cluster {s}: write local:W with W a whole number of workers, e.g. local:2")
    if any(ch.isspace() for ch in s):
        raise UsageError(f"--cluster {s!r}: an address has no spaces (e.g. tcp://host:8786)")
    _check_port(s)
    return ("address", s)


def _check_port(address: str) -> None:
    """A port outside 1 … 65535 (or not a number) is refused at once, not tried for seconds.

    >>> _check_port("tcp://host:99999")
    Traceback (most recent call last):
    ...
    proofs_checks.errors.UsageError: --cluster tcp://host:99999: port 99999 is outside 1 … 65535
    """
    rest = address.split("://", 1)[1] if "://" in address else address
    rest = rest.split("/", 1)[0]
    if rest.startswith("["):  # [IPv6]:port
        port = rest.rpartition("]")[2].lstrip(":")
    else:
        port = rest.rpartition(":")[2] if ":" in rest else ""
    if port == "":
        return
    if not (port.isascii() and port.isdigit()):
        raise UsageError(f"--cluster {address}: port {port!r} is not a number (e.g. tcp://host:8786)")
    if not 1 <= int(port) <= 65535:
        raise UsageError(f"--cluster {address}: port {int(port)} is outside 1 … 65535")


def _quiet_dask() -> None:
    """Dask logs worker restarts, reconnections and retries at WARNING/INFO on stderr: a CLI keeps
    stderr for its own lines, so only errors from Dask itself are shown."""
    for name in ("distributed", "distributed.nanny", "distributed.scheduler", "distributed.worker",
                 "distributed.core", "distributed.client", "distributed.comm", "distributed.batched",
                 "distributed.worker_memory", "distributed.diskutils", "distributed.http.proxy"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's message on one line, at most ``limit`` characters (its type's name when empty)."""
    return " ".join(str(exc).split())[:limit] or type(exc).__name__


def _probe(address: str, timeout: float) -> None:
    """Open and close one connection to ``address`` (Dask's handshake included) within ``timeout``
    seconds; raises :class:`UsageError` naming the address and why."""
    from distributed.comm import connect

    async def go():
        comm = await connect(address, timeout=timeout)
        await comm.close()

    try:
        asyncio.run(asyncio.wait_for(go(), timeout + 1.0))
    except (asyncio.TimeoutError, TimeoutError):
        raise UsageError(f"--cluster {address}: no Dask scheduler answered within {timeout:g} s "
                         "(is `dask scheduler` running there, and the port open?)") from None
    except ValueError as exc:
        raise UsageError(f"--cluster {address}: not a scheduler address ({' '.join(str(exc).split())}); "
                         "write tcp://host:8786 or local:W") from None
    except MemoryError:  # a frame header read from a server that does not speak Dask's protocol
        raise UsageError(f"--cluster {address}: something answered there, but not a Dask scheduler") from None
    except Exception as exc:  # refused, unknown host, garbage from a server that is not Dask
        msg = _one_line(exc)
        raise UsageError(f"--cluster {address}: cannot connect to a Dask scheduler ({msg})") from None


def check_cluster(spec: str) -> None:
    """Check ``--cluster spec`` before any work: its syntax, and for an address that a scheduler
    answers there within :data:`CONNECT_TIMEOUT_S` seconds. Raises :class:`UsageError`."""
    kind, value = parse_cluster(spec)
    if kind == "address":
        _quiet_dask()
        _probe(value, CONNECT_TIMEOUT_S)


def _start_local(spec: str, value: int, device: str) -> tuple[Any, Any, str]:
    """A LocalCluster of ``value`` worker processes, its client and its own scratch folder. Whatever stops the start
    (a worker that cannot start, a signal, a Ctrl-C delivered when :func:`_sigint_deferred` ends) closes what was
    started and removes the folder (a signal in those seconds left it, hostile pass 11, F3)."""
    from distributed import Client, LocalCluster

    resources = {"GPU": 1} if str(device).startswith("cuda") else None
    # The worker processes start with SIGINT blocked (inherited through exec, _sigint_deferred): a Ctrl-C
    # at the terminal reaches the whole process group, and only this process should act on it (cancel
    # the tasks, shut the cluster down) instead of every worker printing its traceback.
    # Dask's nanny spawns workers with MALLOC_TRIM_THRESHOLD_=65536 (return freed memory to the OS at
    # once): with the large short-lived arrays of the trained and Monte Carlo checks every allocation
    # then faults its pages in anew, and a report on local:2 spent 279 s of system time (in-process:
    # 37 s) and ran slower than in-process. The variable is dropped (a value the user exported is
    # still inherited); the thread caps (OMP/MKL/OpenBLAS = 1) stay.
    import dask

    from proofs_checks.threads import resolve as resolve_threads

    # each worker's torch/BLAS threads: --threads / TVERIFY_THREADS / OMP_NUM_THREADS when given, else the
    # cores divided among the W workers (Dask's own cap is one each, whatever the cores)
    per = str(resolve_threads(None, workers=value).threads)
    caps = {f"distributed.nanny.pre-spawn-environ.{v}": per
            for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    # the scratch folder (scheduler and workers) is this run's own, removed with the cluster: Dask's
    # default, $TMPDIR/dask-scratch-space, stayed behind after every run (hostile pass 8, F5)
    import multiprocessing

    scratch = tempfile.mkdtemp(prefix="tverify-dask-")
    # and at exit again: a start cut short by a signal leaves Dask's threads, which write there a moment longer
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    before = set(multiprocessing.active_children())
    cluster = None
    try:
        # non-daemonic workers: a daemonic process may start no child, and the checks that run the user's code (a
        # sweep of `check attention --module`, a plugin's checks) run it in one (hostile pass 24a F11)
        with _sigint_deferred(), dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
                                                 "distributed.worker.daemon": False,
                                                 "temporary-directory": scratch, **caps}), \
                warnings.catch_warnings():
            # the scheduler's HTTP server (health routes; no dashboard) falls back to a free port when
            # another Dask cluster holds 8787, and says so: not this command's business
            warnings.filterwarnings("ignore", message="Port 8787 is already in use")
            try:
                with _safe_path(), _workers_ignore_sigint():
                    _quiet_resource_tracker()
                    cluster = LocalCluster(n_workers=value, threads_per_worker=1, processes=True,
                                           dashboard_address=None, resources=resources, silence_logs=logging.CRITICAL,
                                           local_directory=scratch)
            except Exception as exc:  # no sockets, no /dev/shm, a worker that cannot start: one line, not a traceback
                raise UsageError(f"--cluster {spec}: could not start {value} local Dask worker(s) ({_one_line(exc)}); "
                                 "leave out --cluster to run in this process (make report REPORT_CLUSTER=)") from None
        try:
            client = Client(cluster, timeout=max(CONNECT_TIMEOUT_S, 30))
        except Exception as exc:
            raise UsageError(f"--cluster {spec}: could not connect to the local Dask workers ({_one_line(exc)}); leave "
                             "out --cluster to run in this process (make report REPORT_CLUSTER=)") from None
        return cluster, client, scratch
    except BaseException:
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close(timeout=10)
        # a start cut short (no cluster object to close): the worker processes it spawned, which would create their
        # lock files in the folder after it is removed
        for proc in set(multiprocessing.active_children()) - before:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.join(5)
        shutil.rmtree(scratch, ignore_errors=True)
        raise


@contextlib.contextmanager
def open_client(spec: str, *, device: str = "cpu") -> Iterator[Any]:
    """A :class:`distributed.Client` for ``--cluster spec``, closed (and a local cluster shut down)
    on exit, also on Ctrl-C. ``local:W``: W worker processes, one thread each, no dashboard, each
    offering ``GPU=1`` when ``device`` is cuda. An address is probed first (see :func:`_probe`)."""
    kind, value = parse_cluster(spec)
    _quiet_dask()
    from distributed import Client

    cluster = scratch = None
    if kind == "local":
        cluster, client, scratch = _start_local(spec, value, device)
    else:
        _probe(value, CONNECT_TIMEOUT_S)
        try:
            client = Client(value, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:
            msg = _one_line(exc)
            raise UsageError(f"--cluster {value}: cannot connect to a Dask scheduler ({msg})") from None
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=10)
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close(timeout=10)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def _safe_path():
    """``PYTHONSAFEPATH=1`` and no ``$PYTHONPATH`` while the local cluster starts: its worker processes (multiprocessing's spawn, and
    its resource tracker) start as ``python -c …``, which put the working folder first on ``sys.path``
    before any import, so a ``struct.py`` or ``threading.py`` there ran in each of them and the workers died
    (hostile pass 7, F9). Restored after: processes the user's own code starts later keep the usual path."""
    import os

    import dask

    old = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    # and no $PYTHONPATH: its folders come before the standard library's in a new interpreter, so a signal.py there
    # ran in each worker (multiprocessing imports signal before anything of tverify's; hostile pass 28a F3). A spawned
    # worker's path is this process's (multiprocessing's preparation data), which holds those folders after the
    # system ones; the variable itself is set again in the worker once it runs (Dask's nanny.environ)
    user_path = os.environ.pop("PYTHONPATH", None)
    back = {"distributed.nanny.environ.PYTHONPATH": user_path} if user_path is not None else {}
    # the path the workers are given: tverify's own folder after the system ones and before the user's (this process
    # binds its three packages and leaves that folder out: a worker then imported a theory/ package of $PYTHONPATH)
    import sys

    from proofs_checks.syspath import child_sys_path

    saved = sys.path[:]
    sys.path[:] = child_sys_path(saved)
    try:
        with dask.config.set(back):
            yield
    finally:
        sys.path[:] = saved
        if old is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = old
        if user_path is not None:
            os.environ["PYTHONPATH"] = user_path


def _quiet_resource_tracker() -> None:
    """multiprocessing's resource tracker started now, its standard error the null device: it outlives a worker killed
    by a signal to the whole group (SIGHUP, SIGUSR1) and printed its warnings and a ``KeyError`` traceback about the
    semaphores that worker held, below tverify's one line (hostile pass 24a F10b). Nothing it says concerns the run."""
    import os
    import sys
    from multiprocessing import resource_tracker

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        return
    import signal

    # the signals a whole group gets (a closed terminal's SIGHUP, a user's SIGUSR1) held in the tracker for good: it
    # died by them, and this process started another, which printed its traceback (the mask is inherited through exec)
    held = {signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM}
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            os.dup2(null, 2)
            resource_tracker.ensure_running()
        finally:
            os.dup2(saved, 2)
            os.close(null)
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    except Exception:  # noqa: BLE001 - the tracker then starts as multiprocessing starts it
        pass
    finally:
        os.close(saved)


@contextlib.contextmanager
def _workers_ignore_sigint():
    """While the local workers start: each process multiprocessing spawns (the workers) ignores SIGINT from its first
    instruction (``signal.SIG_IGN``, which Python keeps when it starts with it, and which what those processes spawn
    inherit): a Ctrl-C at the terminal reaches the whole foreground group, and the blocked mask of
    :func:`_sigint_deferred` did not reach the spawned interpreters, whose tracebacks filled the terminal above
    tverify's one line (hostile pass 24a F10). This process shuts them down."""
    from proofs_checks.lifetime import spawns_rewritten

    def rewrite(args, i):
        args[i + 1] = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); " + args[i + 1]

    with spawns_rewritten(rewrite):
        yield


@contextlib.contextmanager
def _sigint_deferred():
    """SIGINT blocked in this thread while the local workers start: the threads and processes started meanwhile
    (Dask's event loop, its workers, spawned from it) inherit the blocked signal, so a Ctrl-C at the terminal, which
    reaches the whole process group, is acted on by this process alone (instead of every worker printing its
    traceback), and one that comes during the start is delivered here when it ends: it was ignored, and the run
    went on to its end with exit 0 (hostile pass 11, F4)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def interrupt_once():
    """While inside: the first Ctrl-C raises ``KeyboardInterrupt`` (and sets ``state["hit"]``);
    later ones are ignored, so the shutdown that follows (cancelling tasks, closing the cluster)
    finishes quietly. The caller checks ``state["hit"]`` before writing anything, so nothing is
    written after the signal even if a library swallowed the exception."""
    import signal
    import threading

    state = {"hit": False}
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def handler(signum, frame):
        if state["hit"]:
            return
        state["hit"] = True
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield state
    finally:
        if state["hit"]:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # main() prints one line and exits 130
        else:
            signal.signal(signal.SIGINT, previous)


def gpu_workers(client) -> int:
    """How many of the cluster's workers offer the resource ``GPU``."""
    workers = client.scheduler_info(n_workers=-1).get("workers", {}) if _takes_n_workers(client) else \
        client.scheduler_info().get("workers", {})
    return sum(1 for w in workers.values() if (w.get("resources") or {}).get("GPU", 0) > 0)


def _takes_n_workers(client) -> bool:
    import inspect

    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


# ------------------------------------------------------------------------------------------------
# tasks


@dataclass
class Task:
    """One unit of work: ``fn(*args)`` (a module-level function: workers import it by name),
    ``label`` for the progress line, ``gpu``: needs a worker offering the resource ``GPU``."""

    label: str
    fn: Callable[..., Any]
    args: tuple = ()
    gpu: bool = False
    #: estimated seconds (:func:`estimate_seconds`): the scheduler starts the longest tasks first
    cost: float = 0.0


@dataclass
class TaskFailure:
    """What :func:`run_tasks` returns for a task that raised (after its retries) or whose workers
    kept dying: the exception's type and message."""

    label: str
    message: str
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


ProgressFn = Callable[[str, Any], None]


def _failure_text(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())[:500]
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def run_tasks_local(tasks: list[Task], progress: ProgressFn | None = None) -> list[Any]:
    """Run ``tasks`` one after the other in this process (the same interface as :func:`run_tasks`):
    a task that raises gives a :class:`TaskFailure`; Ctrl-C propagates."""
    out = []
    for t in tasks:
        t0 = time.perf_counter()
        try:
            value = t.fn(*t.args)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            value = TaskFailure(t.label, _failure_text(exc), time.perf_counter() - t0)
        out.append(value)
        if progress:
            progress(t.label, value)
    return out


#: the code fingerprint of what this worker process imported (:func:`_worker_code`)
_LOADED_CODE: str | None = None


def _worker_code() -> str:
    """Worker side: :func:`proofs_checks.fingerprint.code_fingerprint` taken the first time this process is asked,
    before it runs any task (what it imports then is what it keeps: a long-lived worker answered later commands
    with a plugin's old code, a stale "verified": hostile pass 24a F4)."""
    global _LOADED_CODE
    if _LOADED_CODE is None:
        from proofs_checks.fingerprint import code_fingerprint

        _LOADED_CODE = code_fingerprint()
    return _LOADED_CODE


def _stale_text(where: str) -> str:
    return (f"{where} imported other code than this command runs (tverify's or a plugin's sources changed since it "
            "started): a worker keeps what it imported, so its answers would be about the old code; restart the "
            "cluster's workers")


def _guarded(code: str, fn: Callable, *args: Any) -> Any:
    """Worker side: ``fn(*args)`` where this worker imported the command's code (``code``), else an error."""
    if _worker_code() != code:
        raise RuntimeError(_stale_text("this worker"))
    return fn(*args)


def _refuse_stale_workers(client, code: str) -> None:
    """Every worker of ``client`` imported the command's code, or a one-line error before anything runs."""
    try:
        got = client.run(_worker_code)
    except Exception:  # noqa: BLE001 - workers that cannot answer: each task checks for itself (_guarded)
        return
    stale = sorted(addr for addr, fp in got.items() if fp != code)
    if stale:
        raise UsageError(_stale_text(f"--cluster: {len(stale)} of {len(got)} worker(s) ({stale[0]}"
                                     f"{', …' if len(stale) > 1 else ''})") + "; nothing was run")


def run_tasks(client, tasks: list[Task], progress: ProgressFn | None = None, *, retries: int = RETRIES,
              allow_no_gpu: bool = False) -> list[Any]:
    """Submit ``tasks`` to ``client`` and return their results in the order of ``tasks``.

    ``progress(label, result)`` is called in this process as each task finishes (any order). A task
    that raised ``retries + 1`` times, or that lost its workers more often than the scheduler allows
    (``KilledWorker``), gives a :class:`TaskFailure`. A task with ``gpu`` carries ``resources={"GPU":
    1}``; if no worker offers that resource, :class:`UsageError` is raised before anything is
    submitted (with ``allow_no_gpu`` the tag is dropped instead: workers without CUDA skip such
    checks, which makes the claim ``incomplete``). Ctrl-C cancels every task and re-raises."""
    from distributed import as_completed

    if any(t.gpu for t in tasks) and gpu_workers(client) == 0:
        if not allow_no_gpu:
            raise UsageError("--device cuda: no worker of the cluster offers the resource GPU (start GPU workers with "
                             "`dask worker ADDRESS --resources GPU=1`, or use --allow-skip)")
        tasks = [Task(t.label, t.fn, t.args, False, t.cost) for t in tasks]
    from proofs_checks.fingerprint import code_fingerprint

    code = code_fingerprint()
    _refuse_stale_workers(client, code)
    token = uuid.uuid4().hex[:12]
    futures, index = [], {}
    # longest first (issue 46): submitted in order of decreasing estimated cost, each with that rank as
    # its Dask priority, so the two workers of `make report` are not left with one long task at the end
    order = sorted(range(len(tasks)), key=lambda j: -tasks[j].cost)
    try:
        for rank, i in enumerate(order):
            t = tasks[i]
            key = f"tverify-{re.sub(r'[^A-Za-z0-9_.:-]', '_', t.label)[:120]}-{token}-{i}"
            f = client.submit(_guarded, code, t.fn, *t.args, key=key, pure=False, retries=retries,
                              priority=len(tasks) - rank,
                              resources={"GPU": 1} if t.gpu else None)
            futures.append(f)
            index[f.key] = i
        results: list[Any] = [None] * len(tasks)
        for f in as_completed(futures):
            i = index[f.key]
            try:
                value = f.result()
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # the task raised (after retries), or KilledWorker, or cancelled
                value = TaskFailure(tasks[i].label, _failure_text(exc))
            results[i] = value
            f.release()
            if progress:
                progress(tasks[i].label, value)
        return results
    except BaseException:  # Ctrl-C (or anything else): nothing keeps running on the cluster
        with contextlib.suppress(Exception):
            client.cancel(futures, force=True)
        raise


def worker_scratch() -> str | None:
    """The cluster's scratch folder as this worker got it (Dask's ``temporary-directory``: for ``local:W`` the
    command's own ``tverify-dask-*``, removed with the cluster), else ``None`` ($TMPDIR). A worker killed with the
    command (SIGTERM) never runs its ``finally``: its task folders in $TMPDIR stayed behind (hostile pass 10, F5)."""
    import os
    import sys

    dask = sys.modules.get("dask")  # loaded on a worker; in-process (no --cluster) not imported for this
    try:
        base = dask.config.get("temporary-directory", None) if dask is not None else None
    except Exception:  # pragma: no cover (a dask without its config)
        return None
    return str(base) if base and os.path.isdir(str(base)) else None


def _cluster_value(ctx, param, value):
    """A malformed value, or an address where no scheduler answers within the connect timeout, is a
    usage error before anything runs (before the claim modules are even imported)."""
    if value is not None:
        check_cluster(value)
    return value


def cluster_option(f):
    """``--cluster ADDRESS|local:W``: run the work as tasks on a Dask cluster (see
    :mod:`proofs_checks.distributed.cluster`); absent, it runs in this process. The function receives ``cluster``
    (the string, or ``None``)."""
    return click.option("--cluster", metavar="ADDRESS|local:W", default=None, callback=_cluster_value,
                        help="Run the work as tasks on a Dask cluster: local:W starts W local worker processes; "
                             "an address (tcp://host:8786) uses a running `dask scheduler`. Same numbers as "
                             "in-process (seeds come from each task's identity).")(f)
