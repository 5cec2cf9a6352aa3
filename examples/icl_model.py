"""In-context learners for ``tverify check icl --model`` (called as ``obj(xs, ys, xq)`` with float64
tensors ``xs (B, M, d)``, ``ys (B, M)``, ``xq (B, d)``, returning the predictions ``(B,)``):

    tverify check icl --model examples/icl_model.py:predict --lambda 1,2 --N 10

``predict`` is min-norm least squares on the prompt (identified as ``least_squares``);
``averaging`` predicts with the label-weighted mean of the prompt's inputs, one plain GD step from 0
with step 1 (identified as ``averaging``).
"""

import torch


def predict(xs, ys, xq):
    w = torch.linalg.pinv(xs) @ ys.unsqueeze(-1)  # (B, d, 1), the min-norm least-squares fit
    return (xq.unsqueeze(-2) @ w).reshape(-1)


least_squares = predict


def averaging(xs, ys, xq):
    h = (ys.unsqueeze(-1) * xs).mean(dim=-2)  # (1/M) Σ y_i x_i
    return (xq * h).sum(dim=-1)
