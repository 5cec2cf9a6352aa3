"""Attention mechanics derived in SymPy (claims ``attn.*``).

Conventions: tokens are rows (``X ∈ R^{T×d}``) unless a function says "column form";
``S(·)`` is the softmax over the last axis.

The module is the namespace of four: :mod:`theory.attention_derive` (the derivations at fixed sizes),
:mod:`theory.attention_cost` (attn.complexity), :mod:`theory.attention_pe` (attn.sinusoidal_pe) and
:mod:`theory.attention_sizes` (symbolic sizes).
"""

from __future__ import annotations

from theory.attention_derive import (derive_block_recipe, derive_causal_mask, derive_convex_combination,  # noqa: F401
                                     derive_forms_agree, derive_layernorm, derive_mhsa_sum_concat,
                                     derive_permutation_equivariance, derive_score_variance, derive_softmax_simplex)
from theory.attention_cost import count_attention_macs, derive_complexity  # noqa: F401
from theory.attention_pe import derive_sinusoidal_pe  # noqa: F401
from theory.attention_sizes import (causal_mask_at, convex_combination_at, derive_causal_mask_general,  # noqa: F401
                                    derive_convex_combination_general, derive_mhsa_sum_concat_general,
                                    derive_softmax_simplex_general, mhsa_sum_concat_at, softmax_simplex_at)

__all__ = [
    "derive_softmax_simplex",
    "derive_convex_combination",
    "derive_causal_mask",
    "derive_score_variance",
    "derive_forms_agree",
    "derive_mhsa_sum_concat",
    "derive_permutation_equivariance",
    "derive_layernorm",
    "derive_block_recipe",
    "derive_complexity",
    "count_attention_macs",
    "derive_sinusoidal_pe",
    "derive_softmax_simplex_general",
    "softmax_simplex_at",
    "derive_convex_combination_general",
    "convex_combination_at",
    "derive_causal_mask_general",
    "causal_mask_at",
    "derive_mhsa_sum_concat_general",
    "mhsa_sum_concat_at",
]
