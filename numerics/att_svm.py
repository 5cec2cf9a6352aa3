"""Implicit bias of attention (claims ``svm.*``): data, certified Att-SVM solutions, trainers.

Model (Tarzanagh, Li, Thrampoulidis, Oymak 2023; reference code ``umich-sota/TF-as-SVM``)::

    f(X) = vᵀ Xᵀ S(X W z),     X ∈ R^{T×d} (tokens are ROWS),  z ∈ R^d,  v ∈ R^d fixed, ‖v‖ = 1
    logits l_t = x_tᵀ W z,    S = softmax over the token axis (last axis of the (…, T) logits)
    L(W) = (1/n) Σ_i ℓ(y_i f(X_i)),   ℓ(u) = log(1 + e^{−u}) (softplus(−u))
    token scores γ_{it} = y_i vᵀ x_{it};   opt_i = argmax_t γ_{it}

Att-SVM::

    W^mm = argmin ‖W‖  s.t.  (x_{i,opt_i} − x_{i,t})ᵀ W z_i ≥ 1   ∀ t ≠ opt_i, ∀ i

with ‖·‖ the Frobenius norm (W-parameterisation) or the nuclear norm ((K,Q)-parameterisation,
``W = K Qᵀ``). Everything is float64. Arrays: ``X`` is ``(n, T, d)``, ``z`` ``(n, d)``, ``y``
``(n,)``, ``v`` ``(d,)``; torch trainers carry a leading batch (seed) axis ``B``.
"""

# The definitions live in four modules of one concern each; this module is their one namespace (claims, tests and
# the reproduction import ``numerics.att_svm``).

from numerics.att_svm_data import (  # noqa: F401
    AttSVMError, TiedTokens, InfeasibleAttSVM, SolverFailure, AttSVMInstance, token_scores, optimal_tokens,
    second_best_tokens, _unit, _tokens_with_scores, reference_instance, MIN_LOG10_SCALE,
    validate_instance,
)
from numerics.att_svm_solve import (  # noqa: F401
    _LazyModule, cp, constraint_matrix, AttSVMProblem, build_att_svm_problem, AttSVMResult, kkt_residuals,
    certified_gap, certify, SOLVER_OPTS, SOLVER_OPTS_RELAXED, CERT_TOL, _CHAIN, FARKAS_ROUNDING,
    _infeasibility_certificate, solve_att_svm, _extract, solve_problem, _polished_fro, _cert_error,
    fro_distance_bound, polish_fro, solve_att_svm_dual_scipy, is_locally_optimal, make_instance,
)
from numerics.att_svm_train import (  # noqa: F401
    correlation, _as_batch, softmax_mass, _head, loss_and_grad, loss_and_scaled_grad, infimum_loss, _excess_loss,
    _scaled_excess_loss, TrainResult, _init, train, _train_loop, selected_sets, selected_sets_by_gap,
    RegPathResult, _switch_moves, _projected_descent, _path_options, regularization_path, saturation_limit,
    make_token_set_instance,
)
from numerics.att_svm_batch import (  # noqa: F401
    reference_notebook_inits, BatchNGDResult, train_ngd_batch, _autograd_like_grad, CompiledAttSVM,
)
from theory.validation import InputError  # noqa: F401  (the base of the errors above: ``ns.InputError``)


__all__ = [
    "AttSVMError",
    "InfeasibleAttSVM",
    "TiedTokens",
    "SolverFailure",
    "AttSVMInstance",
    "AttSVMResult",
    "token_scores",
    "optimal_tokens",
    "second_best_tokens",
    "make_instance",
    "reference_instance",
    "validate_instance",
    "constraint_matrix",
    "build_att_svm_problem",
    "solve_att_svm",
    "certify",
    "certified_gap",
    "fro_distance_bound",
    "polish_fro",
    "kkt_residuals",
    "solve_att_svm_dual_scipy",
    "correlation",
    "softmax_mass",
    "loss_and_grad",
    "loss_and_scaled_grad",
    "infimum_loss",
    "TrainResult",
    "train",
    "RegPathResult",
    "regularization_path",
    "selected_sets",
    "selected_sets_by_gap",
    "reference_notebook_inits",
    "BatchNGDResult",
    "train_ngd_batch",
    "CompiledAttSVM",
]
