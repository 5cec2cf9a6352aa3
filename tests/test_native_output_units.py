"""A solver's native code printing to file descriptor 1 while ``--json -`` owns standard output: the context
that points descriptor 1 at the standard error while a solver runs, in the test's process (the end-to-end run
of a fresh ``tverify`` process is
``tests/test_hostile_round5.py::test_a_solver_printing_to_descriptor_1_never_breaks_json_on_stdout``)."""

from __future__ import annotations

import os

from numerics.lyapunov import _native_output_to_stderr


def test_descriptor_1_is_the_standard_error_while_a_solver_runs(capfd):
    os.write(1, b"before\n")
    with _native_output_to_stderr():
        os.write(1, b"NATIVE: could not determine problem status.\n")  # as SCS/Clarabel's C code does
    os.write(1, b"after\n")
    cap = capfd.readouterr()
    assert cap.out == "before\nafter\n" and "NATIVE" in cap.err, cap
