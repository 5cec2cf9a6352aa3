"""The ``tverify`` script's entry point (and ``python -m proofs_checks``'s): ``sys.path`` put in order before the
command imports anything of its own.

Python puts ``$PYTHONPATH``'s folders before the standard library's and the installed packages': a ``json.py`` there
ran inside tverify, and a project's own ``theory/`` package there (an ordinary name for one) was imported in place of
tverify's (hostile pass 21a F4). The standard library's, the installed packages' and tverify's own folders now come
first, and tverify's three packages are bound from its own folder, before the command's modules are imported; the
other folders (``$PYTHONPATH``, the working folder for ``python -m``) stay on the path after them, so a plugin or a
user's module found there still imports. This module imports nothing the interpreter has not loaded at start; what
Python itself imports before it runs (``site``, ``re`` for the script) is Python's start-up, outside any program's
reach (``python -I`` ignores ``$PYTHONPATH`` altogether).
"""

import sys


def main():
    from proofs_checks import syspath

    sys.path[:] = syspath.child_sys_path(sys.path)
    sys.path[:] = syspath.without_own(sys.path)  # (binds the three packages through the path just set)
    from proofs_checks.cli import main as command

    return command()
