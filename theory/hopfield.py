"""Hopfield networks derived in SymPy (claims ``hop.*``).

Conventions follow lecture notes 002: stored patterns are the *columns* of ``X = [x_1, ..., x_N] ∈ R^{d×N}``,
a state is a column ``ξ ∈ R^d``; ``S(·)`` is the softmax over the stored-pattern index;
``lse(β, z) = β^{-1} log Σ_l exp(β z_l)``; ``sgn(0) = +1``.

Every function returns a :class:`~theory.derivation.Derivation` whose ``facts`` carry the symbols
needed to ``lambdify`` the results, so that checks compare numerics with what SymPy derived.

The module is the namespace of :mod:`theory.hopfield_classical` (the classical network and dense associative
memories: energy change of a flip, capacity) and :mod:`theory.hopfield_modern` (the modern continuous network, its
retrieval bound, and attention as its update).
"""

from __future__ import annotations

from theory.hopfield_classical import (AGS_ALPHA_C, derive_capacity_formulas, derive_classical_capacity,  # noqa: F401
                                       derive_classical_flip, derive_classical_flip_general, derive_dense_update,
                                       derive_exp_all_fixed_scaling, derive_finite_size_capacity)
from theory.hopfield_modern import derive_attention_identity, derive_modern_energy, derive_retrieval_bound  # noqa: F401

__all__ = [
    "AGS_ALPHA_C",
    "derive_classical_flip",
    "derive_classical_flip_general",
    "derive_dense_update",
    "derive_capacity_formulas",
    "derive_classical_capacity",
    "derive_modern_energy",
    "derive_retrieval_bound",
    "derive_attention_identity",
]
