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
import dataclasses
import logging
import re
import shutil
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from proofs_checks.errors import UsageError

__all__ = ["CONNECT_TIMEOUT_S", "RETRIES", "Task", "TaskFailure", "parse_cluster", "check_cluster", "open_client", "run_tasks",
           "run_tasks_local", "run_claims_on", "plan_claims", "granularity", "ClaimPlan", "ClusterRun", "claim_task", "module_task",
           "gpu_workers", "interrupt_once"]

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


# ------------------------------------------------------------------------------------------------
# claims and mutants as tasks


def _claim(module: str, claim_id: str):
    """The registered claim ``claim_id``, the catalogue loaded as in the caller's process (every claim module
    through ``claims.load_all``, then the plugins: about 3 CPU s once per worker process). Importing only the
    claim's own module left this project's claims unknown as such (``registry.is_builtin``): the power rule
    for plugins' claims then ran on built-in ones and their derivations were not taken from the catalogue."""
    from proofs_checks.registry import get_claim

    return get_claim(claim_id)


def _claim_module(claim) -> str:
    return getattr(claim.checks[0].fn, "__module__", "") or "proofs_checks.claims"


def derivation_task(module: str, claim_id: str) -> tuple[dict[str, Any], float]:
    """Worker side: the claim's :func:`~proofs_checks.runner.derivation_info` and its seconds."""
    from proofs_checks.runner import derivation_info

    t0 = time.perf_counter()
    info = derivation_info(_claim(module, claim_id))
    return info, time.perf_counter() - t0


def check_task(module: str, claim_id: str, check_name: str, mode: str, seed: int, device: str,
               forms: tuple[str, ...], figures: bool) -> dict[str, Any]:
    """Worker side: one check of one claim on each of ``forms`` (``"claim"``, ``"stated"``,
    ``"mutant:NAME"``), in that order, in one process, so the check's reference is computed once.
    The claim's and stated forms run with figures on (when ``figures``) in a folder of the worker,
    whose files come back as bytes; mutants run without figures, as in-process."""
    from proofs_checks.context import RunContext
    from proofs_checks.runner import run_check

    claim = _claim(module, claim_id)
    check = next(c for c in claim.checks if c.name == check_name)
    mutants = {m.name: m for m in claim.all_mutants()}
    fig_dir = Path(tempfile.mkdtemp(prefix="tverify-task-fig-", dir=worker_scratch())) if figures else None
    try:
        ctx = RunContext(mode=mode, seed=seed, device=device, figure_dir=fig_dir)
        plain = RunContext(mode=mode, seed=seed, device=device)
        out: dict[str, Any] = {"outcomes": {}, "figures": {}}
        for which in forms:
            if which == "claim":
                o = run_check(claim, check, claim.form, ctx)
            elif which == "stated":
                o = run_check(claim, check, claim.stated, ctx)
            else:
                o = run_check(claim, check, mutants[which.split(":", 1)[1]].form, plain)
            out["outcomes"][which] = o
        if fig_dir is not None:
            out["figures"] = {p.name: p.read_bytes() for p in sorted(fig_dir.iterdir()) if p.is_file()}
        return out
    finally:
        if fig_dir is not None:
            shutil.rmtree(fig_dir, ignore_errors=True)


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


def _failed_outcome(check, message: str):
    from proofs_checks.runner import CheckOutcome

    return CheckOutcome(check.name, check.layer, "error", None, error_message=f"task failed on the cluster: {message}")


#: a run whose claims come from at least this many claim modules per worker is cut into one task per
#: module (see :func:`plan_claims`, :func:`granularity`)
MODULES_PER_WORKER = 4


def _forms(claim, claims_run: bool, mutants: bool) -> tuple[str, ...]:
    forms: list[str] = []
    if claims_run:
        forms += ["claim"] + (["stated"] if claim.kind == "erratum" else [])
    if mutants:
        forms += [f"mutant:{m.name}" for m in claim.all_mutants()]
    return tuple(forms)


def claim_task(module: str, claim_id: str, mode: str, seed: int, device: str, claims_run: bool, mutants: bool,
               figures: bool, continuous: bool) -> dict[str, Any]:
    """Worker side: a whole claim in one process: its derivation (when ``claims_run``), every check on
    the claim's form (and stated form) and, with ``mutants``, on every mutant's form, and, with
    ``continuous``, the claim's continuous-mutant row (:func:`~proofs_checks.continuous.continuous_probe`,
    its best check only, as `tverify report` in-process). The checks of one claim share references
    the claim caches in-process (trained models, Monte Carlo samples): here they are computed once."""
    claim = _claim(module, claim_id)
    forms = _forms(claim, claims_run, mutants)
    out: dict[str, Any] = {"derivation": derivation_task(module, claim_id) if claims_run else None,
                           "checks": {ch.name: check_task(module, claim_id, ch.name, mode, seed, device, forms, figures)
                                      for ch in claim.checks},
                           "continuous": None, "statement": None}
    if not claims_run:
        return out
    from proofs_checks.context import RunContext

    ctx = RunContext(mode=mode, seed=seed, device=device)
    # the statement (its hypotheses' counterexamples) computed here, on the worker, once: the command's process
    # reuses it (it ran them again, one after the other, after every task had ended)
    if continuous:
        from proofs_checks.continuous import continuous_probe

        result = _assemble_claim(claim, mode, seed, device, out["derivation"],
                                 lambda ch, which: out["checks"][ch.name]["outcomes"][which])
        out["statement"] = result.statement
        out["continuous"] = continuous_probe(claim, result, ctx, only_best=True)
    else:
        from proofs_checks.runner import statement_json

        out["statement"] = statement_json(claim, ctx, out["derivation"][0])
    return out


def module_task(module: str, claim_ids: tuple[str, ...], mode: str, seed: int, device: str, claims_run: bool,
                mutants: bool, figures: bool, continuous: bool) -> dict[str, dict[str, Any]]:
    """Worker side: the claims of one claim module, one after the other in one process (each as
    :func:`claim_task`): references that claims of a module share (``icl.algorithm_probe`` reads the
    models ``icl.function_classes`` trained) are computed once, as in-process."""
    return {cid: claim_task(module, cid, mode, seed, device, claims_run, mutants, figures, continuous) for cid in claim_ids}


def _secs(outcomes) -> float:
    """Worker seconds of a list of check outcomes."""
    return sum(o.result.seconds for o in outcomes if o.result is not None)


def _assemble_claim(c, mode, seed, device, derivation, outcome, statement=None):
    from proofs_checks.context import RunContext
    from proofs_checks.runner import claim_result, own_power

    outs = [outcome(ch, "claim") for ch in c.checks]
    stated = [outcome(ch, "stated") for ch in c.checks] if c.kind == "erratum" else []
    d_info, d_secs = derivation
    ctx = RunContext(mode=mode, seed=seed, device=device)
    result = claim_result(c, ctx, d_info, outs, stated, d_secs + _secs(outs) + _secs(stated), statement)
    own_power(c, result, ctx)  # a plugin's or notebook's claim: its power measured here, as run_claim does
    return result


@dataclass
class ClusterRun:
    """What :meth:`ClaimPlan.assemble` gives: the claims' results (``None`` when only mutants ran),
    the mutants' results (``None`` without the kill matrix), the continuous-mutant rows by claim id
    (``None`` unless the run was cut per module with ``continuous``), and the extra tasks' results."""

    claims: list | None
    mutants: list | None
    continuous: dict[str, Any] | None
    extra: list[Any]


@dataclass
class ClaimPlan:
    """The tasks of a run of claims (:func:`plan_claims`) and how their results become a :class:`ClusterRun`."""

    tasks: list[Task]
    per: str
    claims: list
    mode: str
    seed: int
    device: str
    claims_run: bool
    mutants: bool
    continuous: bool
    figure_dir: Path | None
    n_extra: int
    where: list = field(default_factory=list)

    def assemble(self, results: list[Any]) -> ClusterRun:
        extra, results = results[:self.n_extra], results[self.n_extra:]
        info: dict[str, tuple[dict[str, Any], float]] = {}
        statements: dict[str, dict[str, Any]] = {}  # computed on the workers with the claim's derivation
        per_check: dict[tuple[str, str], dict[str, Any]] = {}
        cont: dict[str, Any] | None = {} if (self.per == "module" and self.continuous and self.claims_run) else None

        def failed_derivation(msg):
            return ({"steps": [], "obligations": [], "provenance": {}, "legend": {}, "assumptions": [],
                     "error": f"task failed on the cluster: {msg}"}, 0.0)

        def keep_check(c, ch, value):
            if isinstance(value, TaskFailure):
                value = {"failure": value.message, "outcomes": {}, "figures": {}}
            per_check[(c.id, ch.name)] = value
            if self.figure_dir is not None and value["figures"]:
                self.figure_dir.mkdir(parents=True, exist_ok=True)
                for name, data in value["figures"].items():
                    (self.figure_dir / Path(name).name).write_bytes(data)

        for (what, c, ch), value in zip(self.where, results):
            if what == "module":
                for claim in c:
                    if isinstance(value, TaskFailure):
                        if self.claims_run:
                            info[claim.id] = failed_derivation(value.message)
                        for chk in claim.checks:
                            keep_check(claim, chk, value)
                        if cont is not None:
                            cont[claim.id] = {"skipped": f"task failed on the cluster: {value.message}"}
                        continue
                    got = value[claim.id]
                    if self.claims_run:
                        info[claim.id] = got["derivation"]
                        if got.get("statement") is not None:
                            statements[claim.id] = got["statement"]
                    for chk in claim.checks:
                        keep_check(claim, chk, got["checks"][chk.name])
                    if cont is not None:
                        cont[claim.id] = got["continuous"]
            elif what == "derivation":
                info[c.id] = failed_derivation(value.message) if isinstance(value, TaskFailure) else value
            else:
                keep_check(c, ch, value)

        def outcome(c, ch, which):
            v = per_check[(c.id, ch.name)]
            if "failure" in v:
                return _failed_outcome(ch, v["failure"])
            return v["outcomes"][which]

        from proofs_checks.runner import mutant_result

        claim_results = None
        if self.claims_run:
            claim_results = [_assemble_claim(c, self.mode, self.seed, self.device, info[c.id],
                                             lambda ch, which, c=c: outcome(c, ch, which), statements.get(c.id))
                             for c in self.claims]
        mutant_results = None
        if self.mutants:
            mutant_results = []
            for c in self.claims:
                for m in c.all_mutants():
                    outs = [outcome(c, ch, f"mutant:{m.name}") for ch in c.checks]
                    mutant_results.append(mutant_result(c, m, outs, _secs(outs), self.mode))
        return ClusterRun(claim_results, mutant_results, cont, extra)


def _workers(client) -> int:
    info = client.scheduler_info(n_workers=-1) if _takes_n_workers(client) else client.scheduler_info()
    return max(1, len(info.get("workers", {})))


#: seconds assumed for a check of each layer, and for a derivation, when no earlier run of it is on
#: record (rough: a trained check trains a model, a numeric one samples or solves, a symbolic one and a
#: derivation run SymPy); only their order matters (:func:`run_tasks` starts the longest first)
LAYER_SECONDS = {"trained": 10.0, "numeric": 2.0, "symbolic": 1.0}
DERIVATION_SECONDS = 2.0
#: a task given by the caller (a reproduction of a report): among the longest pieces of a report
EXTRA_SECONDS = 60.0


def estimate_seconds(claim, store=None, mode: str = "default") -> dict[str, float]:
    """Estimated seconds of each check of ``claim`` (by name; ``"derivation"`` for its derivation): the
    seconds of its last run at the same size mode when the results store ``store`` has one, else
    :data:`LAYER_SECONDS` by the check's layer.

    >>> from proofs_checks.registry import get_claim
    >>> est = estimate_seconds(get_claim("attn.softmax_simplex"))
    >>> est["derivation"], min(est.values()) > 0
    (2.0, True)
    """
    est = {ch.name: LAYER_SECONDS.get(ch.layer, 2.0) for ch in claim.checks}
    est["derivation"] = DERIVATION_SECONDS
    if store is None:
        return est
    from proofs_checks.store import load_last

    try:
        last = load_last(claim.id, store)
    except Exception:  # an unreadable entry: the defaults (the store says so when it is read for `show`)
        last = None
    if last and last.get("mode") == mode:
        for c in last.get("checks") or []:
            secs = c.get("seconds") if isinstance(c, dict) else None
            if c.get("name") in est and isinstance(secs, (int, float)) and secs >= 0:
                est[c["name"]] = float(secs)
    return est


def plan_claims(claims: list, *, mode: str, seed: int, device: str, claims_run: bool = True, mutants: bool = False,
                figure_dir: Path | None = None, continuous: bool = False, per: str = "check",
                extra: list[Task] | tuple = (), store=None) -> ClaimPlan:
    """Cut a run of claims into tasks. ``per="check"``: one task for each claim's derivation and one
    per check (each running the check on the claim's form and every mutant's: the check's reference
    is computed once); the work spreads over many workers, but checks of one claim that share a
    cached reference (a trained model) each compute it. ``per="module"``: one task per claim module
    (:func:`module_task`): its claims in one process, each with its continuous-mutant row. ``extra`` tasks (e.g. the
    reproductions of a report) come first. Every task carries its estimated seconds
    (:func:`estimate_seconds`, from ``store``'s last results where it has them; a task with mutants
    runs each check once per form), and :func:`run_tasks` starts the longest first."""
    cuda = str(device).startswith("cuda")
    plan = ClaimPlan([t if t.cost else dataclasses.replace(t, cost=EXTRA_SECONDS) for t in extra], per, list(claims),
                     mode, seed, device, claims_run, mutants, continuous, figure_dir, len(extra))
    est = {c.id: estimate_seconds(c, store, mode) for c in claims}

    def check_cost(c, ch) -> float:
        return est[c.id][ch.name] * len(_forms(c, claims_run, mutants))
    if per == "module":
        groups: dict[str, list] = {}
        for c in claims:
            groups.setdefault(_claim_module(c), []).append(c)
        for module, cs in groups.items():
            cost = sum(check_cost(c, ch) for c in cs for ch in c.checks) + claims_run * sum(est[c.id]["derivation"] for c in cs)
            plan.tasks.append(Task(module.rpartition(".")[2] + ": " + ", ".join(c.id for c in cs), module_task,
                                   (module, tuple(c.id for c in cs), mode, seed, device, claims_run, mutants,
                                    figure_dir is not None, continuous),
                                   gpu=bool(cuda and any(ch.uses_device for c in cs for ch in c.checks)), cost=cost))
            plan.where.append(("module", cs, None))
        return plan
    for c in claims:
        module = _claim_module(c)
        if claims_run:
            plan.tasks.append(Task(f"{c.id}:derivation", derivation_task, (module, c.id), cost=est[c.id]["derivation"]))
            plan.where.append(("derivation", c, None))
        forms = _forms(c, claims_run, mutants)
        for ch in c.checks:
            plan.tasks.append(Task(f"{c.id}:{ch.name}", check_task,
                                   (module, c.id, ch.name, mode, seed, device, forms, figure_dir is not None),
                                   gpu=bool(ch.uses_device and cuda), cost=check_cost(c, ch)))
            plan.where.append(("check", c, ch))
    return plan


def granularity(client, claims: list) -> str:
    """``"module"`` when the claims come from at least :data:`MODULES_PER_WORKER` claim modules per
    worker (then whole modules balance the workers, and what a module's claims and checks share is
    computed once), else ``"check"`` (a few claims spread over many workers)."""
    modules = {_claim_module(c) for c in claims}
    return "module" if len(modules) >= MODULES_PER_WORKER * _workers(client) else "check"


def run_claims_on(client, claims: list, *, mode: str, seed: int, device: str, claims_run: bool = True,
                  mutants: bool = False, figure_dir: Path | None = None, allow_skip: bool = False,
                  progress: ProgressFn | None = None, per: str | None = None) -> tuple[list | None, list | None]:
    """Run ``claims`` (and, with ``mutants``, their kill matrix) as tasks on ``client``; returns
    ``(claim results or None, mutant results or None)``, assembled by the runner's own
    :func:`~proofs_checks.runner.claim_result` / :func:`~proofs_checks.runner.mutant_result` in the
    order an in-process run gives. Figures of the claims' checks are written into ``figure_dir``.
    A claim's ``seconds`` is the sum of its derivation's and its checks' seconds (worker time).
    ``per``: the task granularity (default: :func:`granularity`)."""
    plan = plan_claims(claims, mode=mode, seed=seed, device=device, claims_run=claims_run, mutants=mutants,
                       figure_dir=figure_dir, per=per or granularity(client, claims))
    run = plan.assemble(run_tasks(client, plan.tasks, progress, allow_no_gpu=allow_skip))
    return run.claims, run.mutants


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
