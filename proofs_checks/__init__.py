"""Claim registry, runner, CLI (``tverify``) and report writers.

A *claim* binds a derivation (``theory/``) to numeric and trained evidence (``numerics/``) through
*checks* that each compare two independently computed things under a justified tolerance. Every
claim carries *mutants*: wrong variants of what it states, which its checks must refute.

The names below are imported on first use (PEP 562), so that ``tverify list`` / ``show`` / ``--help``
do not pay for SymPy and NumPy when they read the generated catalogue.
"""

# No import here, `from __future__` included: this package is imported by the ``tverify`` script before
# ``proofs_checks._console`` puts the system folders before $PYTHONPATH, and a module not loaded at the interpreter's
# start (``__future__``, ``importlib`` in a plain install) would be looked up there first (hostile pass 24a F9).

_WHERE = {
    "RunContext": "proofs_checks.context",
    "Check": "proofs_checks.registry",
    "CheckResult": "proofs_checks.registry",
    "Claim": "proofs_checks.registry",
    "Mutant": "proofs_checks.registry",
    "SkipCheck": "proofs_checks.registry",
    "compare": "proofs_checks.registry",
    "worst": "proofs_checks.registry",
    "get_claim": "proofs_checks.registry",
    "register": "proofs_checks.registry",
    "check_attention": "proofs_checks.api",
    "check_icl_model": "proofs_checks.api",
    "check_hopfield": "proofs_checks.api",
    "check_att_svm": "proofs_checks.api",
    "check_lyapunov": "proofs_checks.api",
    "run_claims": "proofs_checks.api",
    "check_claim": "proofs_checks.plugin",
    "run_mutants": "proofs_checks.plugin",
    "DerivationBuilder": "proofs_checks.plugin",
    "assert_claim": "proofs_checks.testkit",
    "SanityResult": "proofs_checks.sanity._common",
}
# ``proofs_checks.registry`` is the module (the global Registry object is
# ``proofs_checks.registry.registry``): a lazy package attribute of the same name as a submodule
# would be the module or the object depending on import order.

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'proofs_checks' has no attribute {name!r}")
    value = getattr(__import__(mod, fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
