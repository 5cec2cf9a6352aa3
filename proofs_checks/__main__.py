"""``python -m proofs_checks`` is ``tverify``."""

from proofs_checks.cli import main

main()
