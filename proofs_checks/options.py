"""Command-line options shared by every ``tverify`` command, so that each is spelled and
behaves the same in ``run``, ``report``, ``mutants`` and every ``check`` subcommand.

* ``--quick`` / ``--full``: size mode, mutually exclusive (giving both is a usage error);
  neither means the default sizes. The decorated function receives ``mode``.
* ``--device {cpu,cuda}`` and ``--allow-skip``: see :func:`require_device`.
* ``--seed N``: a base seed, 0 … 2**32 − 1.
* ``--json PATH|-``: write the machine-readable result to PATH, or to stdout with ``-``.
* ``--cluster ADDRESS|local:W``: :func:`proofs_checks.distributed.cluster.cluster_option`.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import click

__all__ = ["UsageError", "claim_run_options", "mode_options", "device_option", "allow_skip_option", "seed_option", "json_option",
           "require_device", "require_cpu_only"]


from proofs_checks.errors import UsageError  # noqa: E402 (re-exported: the historical home)
from proofs_checks.threads import threads_option  # noqa: E402

#: set by :func:`proofs_checks.console.guard_closed_streams` when tverify started with ``>&-``
_CLOSED = {"stdout": False}


def stdout_was_closed() -> bool:
    """Whether this ``tverify`` started with its standard output closed (click may have wrapped the
    closed stream since)."""
    return _CLOSED["stdout"]


def refuse_closed_stdout_json(json_path: str | None) -> None:
    """``--json -`` with the standard output closed from the start (``>&-``): a usage error before
    any work (every command that takes ``--json``, ``tverify check`` included), not after it."""
    if json_path == "-" and stdout_was_closed():
        raise UsageError("--json -: the standard output is closed (started with >&-): nothing could be "
                         "written to it; give --json a file, or leave the standard output open")


def mode_options(f, no_sizes: str | None = None):
    """``--quick`` / ``--full`` (mutually exclusive) folded into one ``mode`` argument; ``no_sizes``: why they change
    nothing for this command (they are still accepted: ``sweep`` passes its mode to every check), said in the help."""
    same = f"Accepted, and changes nothing here: {no_sizes}." if no_sizes else None

    @click.option("--quick", is_flag=True, help=same or "Small sizes (what the tests use).")
    @click.option("--full", is_flag=True, help=same or "Larger sizes, more seeds.")
    @threads_option  # every command that computes takes sizes, and so --threads (proofs_checks.threads)
    @functools.wraps(f)
    def wrapper(*args, quick: bool, full: bool, **kwargs):
        if quick and full:
            raise UsageError("--quick and --full are mutually exclusive")
        return f(*args, mode="quick" if quick else ("full" if full else "default"), **kwargs)

    return wrapper


def device_option(f):
    return click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
                        help="Device for trained models and simulations (checks against CPU reference modules "
                             "always run on CPU). --device cuda without CUDA is a usage error.")(f)


def allow_skip_option(f):
    return click.option("--allow-skip", is_flag=True,
                        help="Run what can run when --device cuda has no CUDA: checks that need the device are "
                             "skipped and their claims reported 'incomplete' (exit 1), never verified.")(f)


#: the largest --seed (the seeds checks derive from it are 32-bit too)
MAX_SEED = 2**32 - 1


def seed_option(f):
    # at most 2**32 - 1: larger seeds overflowed torch/NumPy's 64-bit seed arithmetic inside the
    # reproductions and checks ("Overflow when unpacking long long": an error, not a usage refusal)
    return click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), default=0, show_default=True,
                        help="Base seed (0 … 4294967295); every check derives its seeds from it, so a report's "
                             "numbers are reproduced with the seed it records.")(f)


#: ``--json -`` in the console command (a process of tverify's own): the descriptor the JSON goes to, a copy of the
#: standard output taken when the option was read; descriptor 1 then points at standard error for everything else
_JSON_STDOUT: dict[str, Any] = {"own": False, "fd": None}


def own_standard_output() -> None:
    """Called by the console command (not by ``cli.main([...])`` in a caller's process, whose descriptors are its
    own): ``--json -`` may then reserve the standard output for the JSON."""
    _JSON_STDOUT["own"] = True


def reserve_stdout(ctx, param, value):
    """``--json -``: the JSON is the only thing written to the standard output. Anything else written there by
    code tverify runs in its process — a plugin's thread or exit callback, ``print`` or ``os.write(1, …)``, at
    import or later — goes to standard error (hostile pass 12: after or before the JSON, it broke ``--json -``)."""
    import os

    if value == "-" and _JSON_STDOUT["own"] and _JSON_STDOUT["fd"] is None and not stdout_was_closed():
        try:
            sys.stdout.flush()
            fd = os.dup(1)
            os.dup2(2, 1)
        except (OSError, ValueError):
            return value
        _JSON_STDOUT["fd"] = fd
        if not isinstance(sys.stderr, HumanLines):
            sys.stderr = HumanLines(sys.stderr)
    return value


class HumanLines:
    """The console command's standard error, which carries human lines only (progress, warnings, the one-line error):
    a write or flush that fails there (a full disk, a descriptor opened read-only) loses those lines only. Descriptor
    2 — and descriptor 1 while ``--json -`` points it there (:func:`reserve_stdout`) — then goes to /dev/null, so that
    nothing later fails on it, and the outputs (``--json``, ``--out``, the table on standard output) are still written,
    with the run's own exit code (it was lost, exit 2: hostile pass 35a F2 under ``--json -``, 43b F5 everywhere)."""

    def __init__(self, stream):
        self.tverify_stream = stream

    def write(self, text: str) -> int:
        try:
            return self.tverify_stream.write(text)
        except (OSError, ValueError):
            self._lost()
            return len(text)

    def flush(self) -> None:
        try:
            self.tverify_stream.flush()
        except (OSError, ValueError):
            self._lost()

    def _lost(self) -> None:
        import contextlib
        import os

        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            if _JSON_STDOUT["fd"] is not None:  # descriptor 1 is a copy of standard error (reserve_stdout)
                os.dup2(null, 1)
            os.close(null)
        for stream in (self.tverify_stream, *((sys.stdout,) if _JSON_STDOUT["fd"] is not None else ())):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()  # what they still hold, to /dev/null

    def __getattr__(self, name: str):
        return getattr(self.tverify_stream, name)


def echo_json(text: str) -> None:
    """``--json -``'s JSON on the standard output: on the descriptor :func:`reserve_stdout` kept for it, else
    through ``click.echo`` (``cli.main([...])`` in a caller's process, whose standard output is its own)."""
    fd = _JSON_STDOUT["fd"]
    if fd is None:
        click.echo(text)
        return
    view = memoryview((text + "\n").encode("utf-8"))
    while view:
        view = view[write_waiting(fd, view):]


def write_waiting(fd: int, data) -> int:
    """``os.write(fd, data)``, waiting while the descriptor is non-blocking and full (hostile pass 38a F9)."""
    import os
    import select

    while True:
        try:
            return os.write(fd, data)
        except BlockingIOError:
            select.select([], [fd], [], 1.0)


def json_option(f, help_text: str = "Write the result as JSON to PATH ('-' for stdout)."):
    return click.option("--json", "json_path", metavar="PATH|-", default=None, help=help_text,
                        callback=reserve_stdout)(f)


def require_device(device: str, allow_skip: bool, *, skip_option: bool = True) -> None:
    """Refuse ``--device cuda`` on a machine without CUDA (a usage error), unless ``allow_skip``.
    ``skip_option``: whether the command has ``--allow-skip`` (the message suggests it only then)."""
    if device == "cuda" and not allow_skip:
        from numerics.torch_utils import cuda_available

        if not cuda_available():
            raise UsageError("--device cuda: torch sees no CUDA device on this machine "
                             + ("(use --device cpu, or --allow-skip to run the rest and report 'incomplete')"
                                if skip_option else "(use --device cpu)"))


def require_cpu_only(device: str, what: str) -> None:
    """For a command whose computations run on the CPU only: ``--device cuda`` is refused (a usage
    error, one line) rather than ignored, whether or not this machine has CUDA."""
    if device != "cpu":
        from numerics.torch_utils import cuda_available

        why = "" if cuda_available() else " (and torch sees no CUDA device on this machine)"
        raise UsageError(f"--device {device}: {what} runs on the CPU only (float64 reference computations){why}; "
                         "use --device cpu")


def claim_run_options(f):
    """The options ``run``, ``mutants`` and ``report`` share: sizes, device (and --allow-skip),
    seed, --json PATH|-."""
    for deco in (json_option, seed_option, allow_skip_option, device_option, mode_options):
        f = deco(f)
    return f
