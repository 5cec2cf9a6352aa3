"""Claim registry, runner, CLI (``tverify``) and report writers.

A *claim* binds a derivation (``theory/``) to numeric and trained evidence (``numerics/``) through
*checks* that each compare two independently computed things under a justified tolerance. Every
claim carries *mutants*: wrong variants of what it states, which its checks must refute.
"""

from proofs_checks.context import RunContext
from proofs_checks.registry import (
    Check,
    CheckResult,
    Claim,
    Mutant,
    SkipCheck,
    compare,
    worst,
    get_claim,
    register,
    registry,
)

__all__ = [
    "Check",
    "CheckResult",
    "Claim",
    "Mutant",
    "RunContext",
    "SkipCheck",
    "compare",
    "worst",
    "get_claim",
    "register",
    "registry",
]
