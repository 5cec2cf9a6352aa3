"""Regenerates the example data files beside it (deterministic; run from the repository root:
``python examples/make_examples.py``):

* ``P.npy``: 12 Hopfield patterns of dimension 16 (rows), entries ±1;
* ``data.npz``: an Att-SVM instance with ``X (n, T, d)`` tokens, ``z (n, d)`` query tokens,
  ``y (n,)`` labels ±1 and ``v (d,)`` the head (n = 3 sequences of T = 4 tokens, d = 6), where the
  optimal token of each sequence has the largest score y_i vᵀx_it;
* ``W.pt``: a trained attention weight ``{"W": tensor (d, d)}`` (``torch.save`` of a dict of tensors;
  ``W.npz`` holds the same under the key ``W``): normalised GD on the logistic loss, run long
  enough that W / ‖W‖ is along the Att-SVM solution W^mm (corr ≥ 0.99), which is what
  ``check att-svm --weights`` compares it with.
"""

from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent


def main() -> None:
    from numerics.att_svm import make_instance, optimal_tokens, solve_att_svm

    rng = np.random.default_rng(0)
    np.save(HERE / "P.npy", np.sign(rng.normal(size=(12, 16))))
    inst = make_instance(3, 4, 6, seed=5, setting="global")
    np.savez(HERE / "data.npz", X=inst.X, z=inst.z, y=inst.y, v=inst.v)
    W = _ngd(inst, solve_att_svm(inst.X, inst.z, optimal_tokens(inst.X, inst.y, inst.v)).W)
    torch.save({"W": torch.from_numpy(W)}, HERE / "W.pt")
    np.savez(HERE / "W.npz", W=W)


def _ngd(inst, w_mm, iters: int = 5000) -> np.ndarray:
    """Normalised GD on the logistic loss from a small random W (the project's batched trainer,
    with the stable scaled gradient that keeps turning W once the softmax saturates)."""
    from numerics.att_svm import train

    W = train(inst, method="ngd", lr=0.1, iters=iters, B=1, init=0.01, seed=0).W[0]
    corr = float((W * w_mm).sum() / np.linalg.norm(W) / np.linalg.norm(w_mm))
    print(f"W.pt: corr(W, W^mm) = {corr:.4f} after {iters} normalised GD steps")
    return W


if __name__ == "__main__":
    main()
