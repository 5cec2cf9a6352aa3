"""In-context learning beyond linear functions (Garg, Tsipras, Liang, Valiant, NeurIPS 2022): prompt
generators for the function classes, a small GPT-2-like transformer on Garg et al.'s token layout,
a batched trainer, and the baselines (scikit-learn Lasso, DecisionTreeRegressor,
KNeighborsRegressor(3), least squares, a two-layer ReLU network trained by GD on the prompt).
Used by the claims ``icl.function_classes`` and ``icl.algorithm_probe`` and by ``tverify check icl
--model --layout garg``; public so that a reproduction of Garg et al. can reuse them.

Conventions
-----------
* A prompt is ``xs (…, n, d)`` (examples are ROWS), ``ys (…, n)``; the query is the next example.
* Token layout (:func:`garg_tokens`): ``x_1, y_1, x_2, y_2, …`` interleaved, each token a
  ``(d+1)``-vector: ``(x, 0)`` for an input, ``(0, …, 0, y)`` for a label ("y padded into a
  vector"; Garg et al.'s code pads ``y`` into the first coordinate of a ``d``-vector, the extra
  coordinate here keeps the two kinds of token apart). The model's prediction of ``y_k`` is read at
  the token of ``x_k``, from the ``k − 1`` pairs before it (causal attention).
* Models train in float32 (evidence, not verification); evaluation converts to float64.
"""

from __future__ import annotations

import torch

__all__ = ["garg_tokens"]


def garg_tokens(xs: torch.Tensor, ys: torch.Tensor, x_q: torch.Tensor | None = None) -> torch.Tensor:
    """Interleave ``xs (B, n, d)`` and ``ys (B, n)`` into tokens ``(B, 2n, d+1)``: ``(x_i, 0)`` at
    even positions, ``(0…0, y_i)`` at odd ones; with a query ``x_q (B, d)`` a last token ``(x_q, 0)``
    is appended, giving ``(B, 2n+1, d+1)``.

    >>> t = garg_tokens(torch.ones(1, 2, 3), torch.tensor([[5.0, 6.0]]), torch.zeros(1, 3))
    >>> tuple(t.shape), t[0, 1].tolist(), t[0, 2].tolist()
    ((1, 5, 4), [0.0, 0.0, 0.0, 5.0], [1.0, 1.0, 1.0, 0.0])
    """
    B, n, d = xs.shape
    tx = torch.cat([xs, xs.new_zeros(B, n, 1)], -1)
    ty = torch.cat([xs.new_zeros(B, n, d), ys.unsqueeze(-1).to(xs.dtype)], -1)
    seq = torch.stack([tx, ty], 2).reshape(B, 2 * n, d + 1)
    if x_q is not None:
        seq = torch.cat([seq, torch.cat([x_q, x_q.new_zeros(B, 1)], -1).unsqueeze(1)], 1)
    return seq
