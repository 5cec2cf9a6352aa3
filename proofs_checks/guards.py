"""Resource guards for the ``tverify check`` commands: estimate memory and time from the requested
sizes *before* allocating, refuse with one line when the estimate exceeds the limit, and report
progress with an ETA on stderr while a long check runs.

* :func:`memory_limit` — the default limit is half the memory available now (``MemAvailable`` in
  ``/proc/meminfo``, capped by a cgroup ``memory.max``; ``os.sysconf`` elsewhere); ``--max-memory GB``
  overrides it.
* :func:`check_memory` raises :class:`~theory.validation.InputError` (one line, exit 2) naming the
  estimate, what dominates it, the limit and how to change it.
* :class:`Progress` prints ``label: 42% (3.1 s elapsed, about 4.3 s left)`` lines on stderr, the
  first one only once the work has taken ``delay`` seconds (quick checks stay silent), then at most
  one line every ``every`` seconds (or every tenth of the elapsed time, for long runs);
  ``enabled=False`` (``--no-progress``) silences it. Until 0.1 % is done, the time left comes from the
  up-front estimate when one was given.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from proofs_checks.syspath import _is_cwd, _system_folders, child_sys_path  # noqa: F401 (their home: syspath)

__all__ = ["GB", "Estimate", "available_memory", "memory_limit", "check_memory", "require_memory", "dry_run",
           "DryRunStop", "fmt_bytes", "child_sys_path",
           "fmt_seconds", "Progress", "finite_number", "max_memory_option", "no_progress_option"]

GB = 1024**3
#: Fraction of the available memory a check may plan to use by default.
DEFAULT_FRACTION = 0.5
#: the default limit is never below this much (the checks' estimates and the isolated child's watchdog alike: a half of
#: little left, 9 MB, refused a check that needs 0.3 GB: hostile pass 34a F1)
MIN_MEMORY_LIMIT = 256 * 1024**2


@dataclass
class Estimate:
    """Peak memory (bytes) and run time (seconds) of a check, and what dominates each."""

    bytes: float
    seconds: float
    parts: dict[str, float] = field(default_factory=dict)  # name -> bytes of the largest tensors

    @property
    def dominant(self) -> str:
        return max(self.parts, key=self.parts.get) if self.parts else "tensors"

    def to_json(self) -> dict:
        return {"memory_bytes": float(self.bytes), "seconds": float(self.seconds),
                "parts_bytes": {k: float(v) for k, v in self.parts.items()}}


def fmt_bytes(n: float) -> str:
    """
    >>> fmt_bytes(3 * 1024**3)
    '3 GB'
    >>> fmt_bytes(2.5e20)
    '2.3e+11 GB'
    """
    for unit, size in (("GB", GB), ("MB", 1024**2), ("kB", 1024)):
        if n >= size:
            v = n / size
            return f"{v:.3g} {unit}" if v < 1e4 else f"{v:.2g} {unit}"
    return f"{n:.0f} B"


def fmt_seconds(s: float) -> str:
    """
    >>> fmt_seconds(42.0), fmt_seconds(7200.0), fmt_seconds(3e7)
    ('42 s', '2.0 h', '3.5e+02 days')
    """
    if s < 90:
        return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.2g} days"


def _cgroup_limit() -> float | None:
    """The memory this process's cgroups leave it: the least, over its own memory cgroup and each above it (v2:
    ``memory.max`` less ``memory.current``; v1: the group's ``memory.limit_in_bytes`` less its usage), of the limit less
    what the group holds but its file pages (page cache, active or not: hostile pass 34a F1); and the hierarchy's root files as before. A job's own limit (a
    Slurm job, ``systemd-run -p MemoryMax``) was never read, and the default limit let a check outgrow it (hostile
    pass 33a F6). ``None`` where no limit is set."""
    rooms = []
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        raw = _read_int(Path(f))
        if raw is not None and raw < 2**60:
            rooms.append(float(raw))
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    root = Path("/sys/fs/cgroup")
    for line in lines:
        _, ctrls, rel = (line.split(":", 2) + ["", ""])[:3]
        v2 = ctrls == ""
        if not (v2 or "memory" in ctrls.split(",")):
            continue
        top = root if v2 else root / "memory"
        folder = top / rel.strip().lstrip("/")
        while folder != top and top in folder.parents:
            limit = _read_int(folder / ("memory.max" if v2 else "memory.limit_in_bytes"))
            used = _read_int(folder / ("memory.current" if v2 else "memory.usage_in_bytes"))
            if limit is not None and limit < 2**60 and used is not None:
                rooms.append(float(max(limit - used + _file_pages(folder, v2), 0)))
            folder = folder.parent
    return min(rooms) if rooms else None


def _read_int(path: Path) -> int | None:
    try:
        raw = path.read_text().strip()
    except OSError:
        return None
    return int(raw) if raw.isascii() and raw.isdigit() else None


def _file_pages(folder: Path, v2: bool) -> int:
    """The group's page cache, active and inactive (``active_file`` + ``inactive_file``; v1 ``total_``…): memory the
    kernel reclaims before any out-of-memory kill, as the machine's ``MemAvailable`` counts it; only the inactive
    pages were, and a job that had read its 2.5 GB dataset twice was left 9 MB (hostile pass 34a F1). Shared memory
    and tmpfs pages are on the anonymous lists, not these."""
    keys = ("active_file", "inactive_file") if v2 else ("total_active_file", "total_inactive_file")
    total = 0
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            k, _, v = line.partition(" ")
            if k in keys and v.strip().isdigit():
                total += int(v)
    except OSError:
        pass
    return total


def available_memory() -> float:
    """Bytes of memory available to this process now (best effort; 4 GB when unknown)."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = float(line.split()[1]) * 1024
                break
    except OSError:
        pass
    if avail is None:
        try:
            avail = float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            avail = 4.0 * GB
    cg = _cgroup_limit()
    return min(avail, cg) if cg else avail


def memory_limit(max_memory_gb: float | None) -> tuple[float, str]:
    """``(bytes, description)``: ``--max-memory`` when given, else half the available memory."""
    if max_memory_gb is not None:
        return max_memory_gb * GB, f"--max-memory {max_memory_gb:g}"
    avail = available_memory()
    if DEFAULT_FRACTION * avail < MIN_MEMORY_LIMIT:
        return float(MIN_MEMORY_LIMIT), (f"the least default, {fmt_bytes(MIN_MEMORY_LIMIT)}, as only "
                                         f"{fmt_bytes(avail)} is available; set with --max-memory GB")
    return DEFAULT_FRACTION * avail, f"half the {fmt_bytes(avail)} available; raise with --max-memory GB"


def check_memory(est: Estimate, max_memory_gb: float | None, hint: str = "") -> None:
    """Refuse (``InputError``, one line) when ``est.bytes`` exceeds the memory limit."""
    from theory.validation import InputError

    limit, why = memory_limit(max_memory_gb)
    if est.bytes > limit:
        dom = est.dominant
        raise InputError(f"these sizes need about {fmt_bytes(est.bytes)} of memory (largest: {dom}, "
                         f"{fmt_bytes(est.parts.get(dom, est.bytes))}), over the limit of {fmt_bytes(limit)} ({why})"
                         + (f"; {hint}" if hint else ""))


_DRY_RUN = contextvars.ContextVar("tverify_dry_run", default=False)


class DryRunStop(BaseException):
    """Raised by the final memory guard of a check under :func:`dry_run`: its inputs were read and
    validated and its sizes fit; nothing has been computed. (A ``BaseException``, so a check's own
    ``except Exception`` does not turn it into an error.)"""


@contextlib.contextmanager
def dry_run():
    """Inside, a check stops (:class:`DryRunStop`) at its final memory guard (``require_memory``
    with ``final=True``, :func:`check_memory`) once its inputs have been validated and its sizes
    found within the limit; a refusal is raised as usual. ``tverify sweep`` uses it to validate
    every grid value with the check's own rules before any row runs."""
    token = _DRY_RUN.set(True)
    try:
        yield
    finally:
        _DRY_RUN.reset(token)


def require_memory(bytes_needed: float, max_memory: float | None, what: str, hint: str = "",
                   final: bool = True) -> None:
    """Refuse, before allocating, work that needs about ``bytes_needed`` bytes when that exceeds
    the limit (``max_memory`` in GB, ``--max-memory``; ``None``: half the available memory).
    Raises :class:`~proofs_checks.options.UsageError` (one line, exit 2) naming ``what`` (e.g.
    ``"check hopfield: 20000 patterns (pairwise Gram and distance matrices)"``), the estimate, the
    limit and how to change it; a non-finite or negative estimate is refused too.

    >>> require_memory(1e3, 1.0, "a small array")
    >>> require_memory(3 * GB, 1.0, "the pattern Gram matrix")
    Traceback (most recent call last):
    ...
    proofs_checks.errors.UsageError: the pattern Gram matrix needs about 3 GB of memory, over the limit of 1 GB (--max-memory 1)
    """
    from proofs_checks.options import UsageError

    limit, why = memory_limit(max_memory)
    try:
        need = float(bytes_needed)
    except (TypeError, ValueError, OverflowError):
        need = float("inf")
    if not need <= limit:  # NaN and inf refused as well
        size = fmt_bytes(need) if need == need and need != float("inf") else "more than float64 can count"
        raise UsageError(f"{what} needs about {size} of memory, over the limit of {fmt_bytes(limit)} ({why})"
                         + (f"; {hint}" if hint else ""))
    if final and _DRY_RUN.get():
        raise DryRunStop()


class Progress:
    """Line-based progress with an ETA on stderr. Call ``update(fraction)`` (0..1) as work is done;
    nothing is printed before ``delay`` seconds, then at most one line per ``every`` seconds."""

    def __init__(self, label: str, *, enabled: bool = True, delay: float = 2.0, every: float = 5.0,
                 stream=None, clock=time.monotonic, estimate: float | None = None):
        self.label, self.enabled, self.delay, self.every = label, enabled, delay, every
        self.estimate = estimate
        self.stream = stream
        self.clock = clock
        self.t0 = clock()
        self._last = None
        self._phase = ""
        self._span = (0.0, 1.0)
        self.printed = 0
        self.last_fraction = 0.0

    def phase(self, name: str, start: float, end: float) -> "Progress":
        """Subsequent ``update(f)`` calls map ``f ∈ [0, 1]`` into ``[start, end]`` of the whole."""
        self._phase, self._span = name, (start, end)
        return self

    def sub(self, f: float) -> None:
        a, b = self._span
        self.update(a + (b - a) * min(max(f, 0.0), 1.0))

    def update(self, fraction: float) -> None:
        self.last_fraction = fraction  # what a Heartbeat repeats while the work is silent
        if not self.enabled:
            return
        now = self.clock()
        el = now - self.t0
        if el < self.delay or (self._last is not None and now - self._last < max(self.every, 0.1 * el)):
            return
        self._last = now
        f = min(max(fraction, 0.0), 1.0)
        if f > 1e-3:
            left = f"about {fmt_seconds(el * (1 - f) / f)} left"
        elif self.estimate:
            left = f"about {fmt_seconds(max(self.estimate - el, 0.0))} left (up-front estimate)"
        else:
            left = "estimating time left"
        what = f" {self._phase}" if self._phase else ""
        print(f"{self.label}:{what} {100 * f:.0f}% ({fmt_seconds(el)} elapsed, {left})",
              file=self.stream or sys.stderr, flush=True)
        self.printed += 1

    def note(self, text: str) -> None:
        """One line on stderr now (e.g. the up-front estimate), when enabled."""
        if self.enabled:
            print(f"{self.label}: {text}", file=self.stream or sys.stderr, flush=True)
            self.printed += 1

    def done(self) -> None:
        if self.enabled and self.printed:
            print(f"{self.label}: done in {fmt_seconds(self.clock() - self.t0)}", file=self.stream or sys.stderr,
                  flush=True)


def finite_number(ctx, param, value):
    """click callback: refuse NaN and ±inf (``FloatRange`` lets NaN through)."""
    import math

    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", ctx=ctx, param=param)
    return value


def max_memory_option(f):
    return click.option("--max-memory", "max_memory", type=click.FloatRange(min=0, min_open=True), default=None,
                        callback=finite_number,
                        metavar="GB", help="Refuse sizes whose estimated peak memory exceeds GB "
                                           "(default: half the available memory).")(f)


def no_progress_option(f):
    return click.option("--no-progress", is_flag=True, help="No progress lines on stderr.")(f)



class Heartbeat:
    """A background thread calling ``progress.update(fraction())`` every ``tick`` seconds, so a
    long unit of work (one sweep row training for minutes) still shows a line with the time left
    (from the up-front estimate until a first unit finishes). Use as a context manager."""

    def __init__(self, progress: Progress, fraction, tick: float = 1.0):
        import threading

        self.progress, self.fraction, self.tick = progress, fraction, tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tverify-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                self.progress.update(self.fraction())
            except Exception:  # pragma: no cover - a progress line is never worth a crash
                return

    def __enter__(self) -> "Heartbeat":
        if self.progress.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)


__all__ += ["Heartbeat"]
