"""``python -m proofs_checks`` is ``tverify``."""

import os
import sys

# `python -m` puts the working folder first on sys.path: a random.py, json.py or numerics/ there would
# be what tverify imports next (the `tverify` script never has it there; `python -P -m` neither). This
# comes too late for the package's own __init__ and Python's start-up: `python -m proofs_checks` cannot
# protect its own start (docs/own-model.md), the `tverify` script and `python -P -m` can.
from proofs_checks._console import main, working_folder  # noqa: E402 (it imports nothing but os and sys)

working_folder()  # a deleted working folder: one line, exit 2 (os.getcwd() below raised)
if sys.path and not sys.flags.safe_path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

main()
