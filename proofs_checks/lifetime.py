"""The lifetime of the processes tverify starts: each dies with the process that started it (``PR_SET_PDEATHSIG``)."""

import contextlib
import os

#: prctl's option: the signal this process gets when its parent dies
_PR_SET_PDEATHSIG = 1


def dies_with_this_process():
    """A ``preexec_fn`` for a process this one starts: it is killed (SIGKILL) when this process dies, ``kill -9``
    included (``PR_SET_PDEATHSIG``; a plugin's import probe and a survey worker outlived ``kill -9`` of tverify:
    hostile pass 24a F6). ``None`` where there is no ``prctl``. The function is looked up here, before the fork: the
    child imports nothing."""
    import signal

    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except Exception:  # noqa: BLE001 - no prctl (not Linux)
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # this process died before the line above
            os._exit(1)

    return preexec


@contextlib.contextmanager
def spawns_rewritten(rewrite):
    """While inside: each interpreter multiprocessing spawns (``util.spawnv_passfds``, a ``python … -c PROGRAM``) has
    its argument list passed through ``rewrite(args, i)`` first, ``i`` the index of ``-c`` (its program ``args[i + 1]``):
    what the new process does before anything else (the checks' fork server's path, a local Dask worker's SIGINT)."""
    from multiprocessing import util

    original = util.spawnv_passfds

    def spawn(path, args, passfds):
        args = list(args)
        if "-c" in args[:-1]:
            rewrite(args, args.index("-c"))
        return original(path, args, passfds)

    util.spawnv_passfds = spawn
    try:
        yield
    finally:
        util.spawnv_passfds = original
