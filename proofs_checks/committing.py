"""An output's commit that a signal does not cut (hostile pass 41a F4, F5).

The file or folder put in place, tverify's record of it written, a previous report removed: SIGTERM, SIGHUP (the
signals :func:`proofs_checks.console.terminate_cleanly` handles) and Ctrl-C that arrive inside
:func:`outputs_committing` wait until it is complete, then end the command as always, saying so. A signal between the
replace and the record left tverify's own file refused by the next run as "not written by tverify", and the previous
report hidden beside the new one. A second signal ends the process at once, as always. No import of tverify's own
here: the console's handler and the outputs' writers both use it.
"""

from __future__ import annotations

import contextlib
import signal
import threading

#: the depth of the commits under way, the signals that arrived meanwhile, and how a pending signal is raised (the
#: console's ``Terminated``, set by :mod:`proofs_checks.console`)
HOLD: dict = {"depth": 0, "pending": [], "raise": None}


@contextlib.contextmanager
def outputs_committing():
    """The block is an output's commit: a signal arriving inside is raised once it is complete."""
    old_int = None
    if threading.current_thread() is threading.main_thread() and HOLD["depth"] == 0 \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        old_int = signal.signal(signal.SIGINT, lambda s, f: HOLD["pending"].append(int(s)))
    HOLD["depth"] += 1
    try:
        yield
    finally:
        HOLD["depth"] -= 1
        if old_int is not None:
            signal.signal(signal.SIGINT, old_int)
        if HOLD["depth"] == 0 and HOLD["pending"]:
            signum = HOLD["pending"][0]
            HOLD["pending"].clear()
            if signum == int(signal.SIGINT) or HOLD["raise"] is None:
                raise KeyboardInterrupt
            exc = HOLD["raise"](signum)
            exc.completed = True  # the output being committed when it came is complete
            raise exc
