"""Attention mechanics in NumPy, SciPy and torch (claims ``attn.*``).

Conventions: tokens are rows, ``X ∈ R^{N×D}`` (leading batch dimensions allowed) unless a
function name says ``columns`` (lecture notes 000 / lecture notes 004 form ``X_c = Xᵀ ∈ R^{D×N}``); softmax over the
last axis unless stated; float64 throughout. Weights act on the right in row form
(``Q = X W_Q`` with ``W_Q ∈ R^{D×K}``) and on the left in column form (``q_n = U_q x_n``).
Costs are counted in multiply-adds (MACs); torch's ``FlopCounterMode`` counts FLOPs = 2·MACs
for matrix products.

The module is the namespace of :mod:`numerics.attention_formulas` (softmax, single-head and multi-head attention,
the convex hull, the lecture notes' forms of one layer, LayerNorm, MLP and blocks) and :mod:`numerics.attention_extra`
(the cost count, the sinusoidal positional encoding and the Monte Carlo moments of q·k).
"""

from __future__ import annotations

from numerics.attention_formulas import (attention, attention_weights, block_post_ln, block_pre_ln,  # noqa: F401
                                         block_pre_ln_as_stated, BlockParams, causal_attention, causal_mask,
                                         concat_to_sum, convex_hull_distance, encoder_layer_to_block, hull_certificate,
                                         HullResult, layernorm, mha_to_concat, mhsa_concat, mhsa_sum_columns, mlp,
                                         random_block_params, rename_row_params, sdpa, seed000_attention,
                                         seed000_weights, seed000_weights_as_stated, seed000_weights_plain_as_stated,
                                         seed000_weights_shared_u_as_stated, seed002_attention, seed003_attention,
                                         seed004_attention, softmax, softmax_jacobian)
from numerics.attention_extra import (count_flops, dot_product_moments, dot_product_pair_moments,  # noqa: F401
                                      PairMoments, pe_shift_matrix, score_moments_exact, ScoreMoments,
                                      SharedProjectionScores, sinusoidal_pe, sinusoidal_pe_any_width)

__all__ = [
    "softmax",
    "softmax_jacobian",
    "attention_weights",
    "attention",
    "causal_mask",
    "causal_attention",
    "HullResult",
    "convex_hull_distance",
    "hull_certificate",
    "seed002_attention",
    "seed003_attention",
    "seed004_attention",
    "seed000_weights",
    "seed000_weights_as_stated",
    "seed000_weights_shared_u_as_stated",
    "seed000_weights_plain_as_stated",
    "seed000_attention",
    "rename_row_params",
    "sdpa",
    "mhsa_concat",
    "mhsa_sum_columns",
    "concat_to_sum",
    "mha_to_concat",
    "layernorm",
    "mlp",
    "BlockParams",
    "block_pre_ln",
    "block_post_ln",
    "block_pre_ln_as_stated",
    "encoder_layer_to_block",
    "random_block_params",
    "SharedProjectionScores",
    "count_flops",
    "sinusoidal_pe",
    "pe_shift_matrix",
    "dot_product_moments",
    "ScoreMoments",
    "dot_product_pair_moments",
    "PairMoments",
    "score_moments_exact",
    "sinusoidal_pe_any_width",
]
