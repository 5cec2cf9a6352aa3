"""In-context learning of linear regression by linear self-attention, derived in SymPy (claims ``icl.*``).

Setting (Zhang, Frei, Bartlett, JMLR 2024; lecture notes 000): ``x_i ~ N(0, Λ)``, ``w ~ N(0, I_d)``,
``y_i = ⟨w, x_i⟩``; the prompt is the column-form matrix

    E = [[x_1 … x_N x_q], [y_1 … y_N 0]] ∈ R^{(d+1)×(N+1)}        (tokens are COLUMNS here)

and ``f_LSA(E) = E + W^{PV} E (Eᵀ W^{KQ} E)/ρ``, ``ŷ = f_LSA(E)[d+1, N+1]``.

Convention used throughout: with ``h = (1/N) Σ y_i x_i`` and ``B = w22 · W11^{KQ}`` (the other
blocks zero) the prediction is ``ŷ = hᵀ B x_q``; the global minimiser is ``B = Γ_N^{-1}``,
``Γ_N = (1 + 1/N) Λ + (1/N) tr(Λ) I``.

Every derivation starts from definitions: Gaussian moments come from Isserlis/Wick pairings
(:func:`wick_expectation`), gradients from ``sp.diff``, limits from ``sp.limit``. The public
closed-form functions (:func:`gamma_n`, :func:`lsa_predictor`, :func:`population_loss`,
:func:`loss_minimum`, :func:`linear_task_risk`, :func:`general_target_risk`) accept SymPy or NumPy
inputs and raise :class:`theory.validation.InputError` on bad input.

The module is the namespace of three: :mod:`theory.icl_forms` (Wick/Isserlis moments and the closed forms),
:mod:`theory.icl_derive` (the derivations at fixed sizes) and :mod:`theory.icl_sizes` (the statement's hypotheses
and the derivations for symbolic sizes).
"""

from __future__ import annotations

from theory.icl_derive import (_gamma, derive_gd_one_step, derive_general_target_risk, derive_global_min,  # noqa: F401
                               derive_limits, derive_linear_task_risk, derive_loss_minimum, derive_lsa_prediction_form,
                               derive_moments, derive_nonconvex, derive_population_loss, derive_wishart)
from theory.icl_forms import (LSAPredictor, Msym, Nsym, gamma_n, general_target_risk, linear_task_risk,  # noqa: F401
                              loss_minimum, lsa_predictor, population_loss, stated_general_target_risk, symbolic_spd,
                              wick_expectation)
from theory.icl_sizes import (derive_all_weights_min, derive_global_min_general, derive_linear_task_risk_general,
                              derive_loss_minimum_general, derive_lsa_prediction_form_general,
                              derive_population_loss_general, exact_lsa_loss)

__all__ = [
    "wick_expectation",
    "symbolic_spd",
    "gamma_n",
    "lsa_predictor",
    "LSAPredictor",
    "population_loss",
    "loss_minimum",
    "linear_task_risk",
    "general_target_risk",
    "stated_general_target_risk",
    "derive_lsa_prediction_form",
    "derive_moments",
    "derive_wishart",
    "derive_population_loss",
    "derive_global_min",
    "derive_loss_minimum",
    "derive_linear_task_risk",
    "derive_general_target_risk",
    "derive_limits",
    "derive_gd_one_step",
    "derive_nonconvex",
    "derive_lsa_prediction_form_general",
    "derive_all_weights_min",
    "exact_lsa_loss",
    "derive_population_loss_general",
    "derive_global_min_general",
    "derive_loss_minimum_general",
    "derive_linear_task_risk_general",
]
