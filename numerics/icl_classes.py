"""In-context learning beyond linear functions (Garg, Tsipras, Liang, Valiant, NeurIPS 2022): prompt
generators for the function classes, a small GPT-2-like transformer on Garg et al.'s token layout,
a batched trainer, and the baselines (scikit-learn Lasso, DecisionTreeRegressor, 3-nearest neighbours
(scikit-learn's KNeighborsRegressor(3), batched in NumPy), least squares, a two-layer ReLU network
trained by GD on the prompt).
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

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from numerics.torch_utils import generator, resolve_device

__all__ = ["garg_tokens", "FUNCTION_CLASSES", "TaskSpec", "sample_tasks", "GPTConfig", "TinyGPT", "TrainedModel",
           "train_icl_model", "train_icl_models", "BASELINES", "least_squares_predict", "averaging_predict", "lasso_predict", "tree_predict",
           "knn_predict", "nn_gd_predict", "error_curves"]


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


# ------------------------------------------------------------------------------------------------
# function classes: prompt generators (torch, seeded generators; float32 or float64)

FUNCTION_CLASSES = ("linear", "sparse_linear", "decision_tree", "relu_net")


@dataclass(frozen=True)
class TaskSpec:
    """A function class and its parameters: ``kind`` in :data:`FUNCTION_CLASSES`, input dimension
    ``d``, ``k`` non-zero coordinates (sparse_linear), ``depth`` (decision_tree), ``hidden`` units
    (relu_net), label ``noise`` σ. ``label_variance`` is ``E y²`` for ``x ~ N(0, I_d)`` (the error
    normaliser: ``d`` linear, ``k`` sparse, 1 tree, ``d`` ReLU net, plus σ²)."""

    kind: str
    d: int
    k: int = 1
    depth: int = 4
    hidden: int = 100
    noise: float = 0.0

    def __post_init__(self):
        if self.kind not in FUNCTION_CLASSES:
            raise ValueError(f"kind must be one of {FUNCTION_CLASSES}, got {self.kind!r}")

    @property
    def label_variance(self) -> float:
        base = {"linear": self.d, "sparse_linear": self.k, "decision_tree": 1.0, "relu_net": self.d}[self.kind]
        return float(base) + self.noise**2


def sample_tasks(spec: TaskSpec, batch: int, n: int, *, g: torch.Generator, device="cpu",
                 dtype=torch.float32, active_dims: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` prompts of ``n`` examples from fresh random functions of the class: ``xs (batch, n, d)``
    with ``x ~ N(0, I_d)``, ``ys (batch, n)``. As in Garg et al. (2022):

    * linear: ``y = ⟨w, x⟩``, ``w ~ N(0, I_d)``;
    * sparse_linear: the same with all but ``k`` uniformly chosen coordinates of ``w`` set to 0;
    * decision_tree: a complete binary tree of depth ``depth``; internal node ``i`` tests
      ``x[c_i] > 0`` with ``c_i`` uniform in ``0..d−1`` (right child on true), leaves ``~ N(0, 1)``;
    * relu_net: ``y = √(2/r) Σ_j a_j relu(⟨w_j, x⟩)``, ``a_j ~ N(0, 1)``, ``w_j ~ N(0, I_d)``, ``r = hidden``;

    then ``+ noise·ε``, ``ε ~ N(0, 1)``. ``active_dims``: coordinates from this index on are set to 0
    before the labels are computed (Garg et al.'s curriculum on the dimension)."""
    dev = resolve_device(device)
    d = spec.d
    kw = dict(generator=g, device=dev, dtype=dtype)
    xs = torch.randn(batch, n, d, **kw)
    if active_dims is not None and active_dims < d:
        xs[..., active_dims:] = 0
    if spec.kind in ("linear", "sparse_linear"):
        w = torch.randn(batch, d, **kw)
        if spec.kind == "sparse_linear":
            keep = torch.rand(batch, d, generator=g, device=dev).argsort(-1)[:, : spec.k]
            mask = torch.zeros(batch, d, device=dev, dtype=dtype).scatter_(1, keep, 1.0)
            w = w * mask
        ys = torch.einsum("bnd,bd->bn", xs, w)
    elif spec.kind == "decision_tree":
        n_int = 2**spec.depth - 1
        coords = torch.randint(0, d, (batch, n_int), generator=g, device=dev)
        leaves = torch.randn(batch, 2**spec.depth, **kw)
        node = torch.zeros(batch, n, dtype=torch.long, device=dev)
        for _ in range(spec.depth):
            c = torch.gather(coords, 1, node)  # (batch, n) coordinate tested at each point's node
            go = (torch.gather(xs, 2, c.unsqueeze(-1)).squeeze(-1) > 0).long()
            node = 2 * node + 1 + go
        ys = torch.gather(leaves, 1, node - n_int)
    else:
        W = torch.randn(batch, spec.hidden, d, **kw)
        a = torch.randn(batch, spec.hidden, **kw)
        ys = math.sqrt(2.0 / spec.hidden) * torch.einsum("bnh,bh->bn", torch.relu(torch.einsum("bnd,bhd->bnh", xs, W)), a)
    if spec.noise:
        ys = ys + spec.noise * torch.randn(ys.shape, **kw)
    return xs, ys


# ------------------------------------------------------------------------------------------------
# the model: a small GPT-2-like transformer on interleaved tokens, G independent copies in one tensor


@dataclass(frozen=True)
class GPTConfig:
    """``d`` input dimension, ``n_max`` most in-context examples (``2·n_max + 1`` positions),
    ``width`` (embedding size), ``layers``, ``heads``."""

    d: int
    n_max: int
    width: int = 32
    layers: int = 2
    heads: int = 4


def _uniform(g: int, fan_in: int, *shape: int) -> torch.nn.Parameter:
    """``nn.Linear``'s default initialisation, U(−1/√fan_in, 1/√fan_in), for ``g`` copies."""
    b = 1.0 / math.sqrt(fan_in)
    return torch.nn.Parameter(torch.empty(g, *shape).uniform_(-b, b))


class TinyGPT(torch.nn.Module):
    """A small GPT-2-like transformer for in-context learning (Garg et al. 2022), ``n_models``
    independent copies held as one batched tensor (every parameter has a leading dimension ``G``;
    the copies never interact, so training them together is training each alone, at the price of one).

    Per copy: read-in ``Linear(d+1, width)`` + learned positions; ``layers`` pre-LayerNorm GPT-2 blocks
    (causal multi-head self-attention through ``scaled_dot_product_attention``, GELU MLP of 4·width,
    residual connections); read-out ``Linear(width, 1)``. Unlike GPT-2 there is no final LayerNorm
    before the read-out: at these small budgets it slowed the emergence of in-context regression
    (measured at d = 2, 600 Adam steps, lr 1e-2: normalised training loss 0.51 with it, 0.37 without).

    ``forward(tokens)``: ``(G, B, T, d+1) -> (G, B, T)`` outputs at every token (:func:`garg_tokens`
    layout, ``T ≤ 2·n_max + 1``); with one copy also ``(B, T, d+1) -> (B, T)``.
    :meth:`predict` ``(xs (…, B, n, d), ys (…, B, n)) -> (…, B, n)``: the prediction of each ``y_k``
    read at the token of ``x_k``; :meth:`query` ``(tokens (…, B, 2n+1, d+1)) -> (…, B)``: the
    prediction at the last token (``tverify check icl --model --layout garg``); :meth:`member`
    ``(i)``: copy ``i`` as a one-copy model. Inputs are cast to the parameters' dtype (float32 as built).
    """

    def __init__(self, cfg: GPTConfig, n_models: int = 1):
        super().__init__()
        G, W, d = int(n_models), cfg.width, cfg.d
        if W % cfg.heads:
            raise ValueError(f"width {W} is not a multiple of heads {cfg.heads}")
        self.cfg, self.n_models = cfg, G
        self.read_in_w, self.read_in_b = _uniform(G, d + 1, d + 1, W), _uniform(G, d + 1, 1, W)
        self.pos = torch.nn.Parameter(0.02 * torch.randn(G, 2 * cfg.n_max + 1, W))
        self.blocks = torch.nn.ModuleList()
        for _ in range(cfg.layers):
            blk = torch.nn.ParameterDict({
                "ln1_w": torch.nn.Parameter(torch.ones(G, 1, W)), "ln1_b": torch.nn.Parameter(torch.zeros(G, 1, W)),
                "qkv_w": _uniform(G, W, W, 3 * W), "qkv_b": _uniform(G, W, 1, 3 * W),
                "proj_w": _uniform(G, W, W, W), "proj_b": _uniform(G, W, 1, W),
                "ln2_w": torch.nn.Parameter(torch.ones(G, 1, W)), "ln2_b": torch.nn.Parameter(torch.zeros(G, 1, W)),
                "fc_w": _uniform(G, W, W, 4 * W), "fc_b": _uniform(G, W, 1, 4 * W),
                "out_w": _uniform(G, 4 * W, 4 * W, W), "out_b": _uniform(G, 4 * W, 1, W),
            })
            self.blocks.append(blk)
        self.read_out_w, self.read_out_b = _uniform(G, W, W, 1), _uniform(G, W, 1, 1)

    def _ln(self, h, w, b):
        return torch.nn.functional.layer_norm(h, h.shape[-1:]) * w + b

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        single = tokens.dim() == 3
        if single:
            if self.n_models != 1:
                raise ValueError(f"tokens (B, T, d+1) need a one-copy model; this one holds {self.n_models}: "
                                 "give (G, B, T, d+1)")
            tokens = tokens.unsqueeze(0)
        G, B, T, _ = tokens.shape
        if T > self.pos.shape[1]:
            raise ValueError(f"{T} tokens exceed the model's {self.pos.shape[1]} positions (n_max = {self.cfg.n_max})")
        W, H = self.cfg.width, self.cfg.heads
        h = torch.baddbmm(self.read_in_b, tokens.to(self.pos.dtype).reshape(G, B * T, -1), self.read_in_w)
        h = h.view(G, B, T, W) + self.pos[:, None, :T]
        h = h.reshape(G, B * T, W)
        for p in self.blocks:
            qkv = torch.baddbmm(p["qkv_b"], self._ln(h, p["ln1_w"], p["ln1_b"]), p["qkv_w"])
            q, k, v = (t.reshape(G * B, T, H, W // H).transpose(1, 2) for t in qkv.split(W, -1))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + torch.baddbmm(p["proj_b"], a.transpose(1, 2).reshape(G, B * T, W), p["proj_w"])
            m = torch.nn.functional.gelu(torch.baddbmm(p["fc_b"], self._ln(h, p["ln2_w"], p["ln2_b"]), p["fc_w"]))
            h = h + torch.baddbmm(p["out_b"], m, p["out_w"])
        out = torch.baddbmm(self.read_out_b, h, self.read_out_w).view(G, B, T)
        return out[0] if single else out

    def predict(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        lead = xs.shape[:-3]
        tok = garg_tokens(xs.reshape(-1, *xs.shape[-2:]), ys.reshape(-1, ys.shape[-1]))
        tok = tok.view(*xs.shape[:-2], *tok.shape[-2:]) if lead else tok
        return self(tok)[..., 0::2]

    def query(self, tokens: torch.Tensor) -> torch.Tensor:
        return self(tokens)[..., -1]

    def member(self, i: int) -> "TinyGPT":
        """Copy ``i`` as a one-copy :class:`TinyGPT` (same dtype and device)."""
        one = TinyGPT(self.cfg, 1).to(self.pos.device, self.pos.dtype)
        with torch.no_grad():
            for (_, src), (_, dst) in zip(self.named_parameters(), one.named_parameters()):
                dst.copy_(src[i:i + 1])
        return one.eval()

    def as_predictor(self) -> Callable:
        """``(X (P, M, d), y (P, M), x_q (P, d)) -> (P,)`` float64 on CPU: a one-copy model read at the
        query (the predictor interface of :func:`numerics.icl_probe.probe_algorithms`)."""
        if self.n_models != 1:
            raise ValueError("as_predictor needs a one-copy model (use member(i))")

        def predict(X, y, x_q):
            with torch.no_grad():
                dev = self.pos.device
                return self.query(garg_tokens(X.to(dev), y.to(dev), x_q.to(dev))).double().cpu()

        return predict


@dataclass
class TrainedModel:
    """A trained one-copy :class:`TinyGPT`, its task, the per-step training loss ``curve`` (normalised
    by the label variance), ``seconds`` (of the whole batch it was trained in), ``steps``, ``seed``,
    ``device``."""

    model: TinyGPT
    spec: TaskSpec
    curve: np.ndarray
    seconds: float
    steps: int
    seed: int
    device: str


def train_icl_models(specs, n_max: int, *, steps: int, batch: int = 64, seed: int = 0, lr: float = 1e-2,
                     width: int = 32, layers: int = 2, heads: int = 4, clip: float = 1.0, warmup: float = 0.1,
                     curriculum: tuple[int, int, int] | None = None, device="cpu") -> list[TrainedModel]:
    """Train one :class:`TinyGPT` per task spec (same ``d``), all as one batched model, each on fresh
    prompts of ``n_max`` examples of its own class at every step. Per copy: Adam with the learning rate
    warmed up linearly over ``warmup`` of the steps then cosine-decayed (one-cycle), gradient norm
    clipped at ``clip`` (per copy), loss the mean squared error of the predictions at every position
    divided by the class's ``label_variance`` (Garg et al.'s objective, without their curriculum).
    Adam is elementwise and the copies do not interact, so each copy trains as it would alone.
    ``curriculum = (d_start, n_start, every)``: Garg et al.'s curriculum, training on the first
    ``min(d, d_start + t // every)`` coordinates (the others 0) and ``min(n_max, n_start + 2·(t // every))``
    examples at step ``t`` (they use (5, 11, 2000) at d = 20, n = 40); None: the full task throughout.
    float32; runs on ``device`` (CPU: one thread). ``steps = 0`` returns the initial networks.
    Copy ``i``'s data seed is ``seed + 1 + i``; the initialisation is seeded by ``seed``."""
    import time

    from numerics.icl import single_thread

    specs = list(specs)
    if not specs or len({s.d for s in specs}) != 1:
        raise ValueError("specs must be non-empty and share d")
    dev = resolve_device(device)
    t0 = time.perf_counter()
    G = len(specs)
    with torch.random.fork_rng(devices=[]):  # seeded initialisation, global RNG untouched
        torch.manual_seed(seed)
        model = TinyGPT(GPTConfig(specs[0].d, n_max, width, layers, heads), G).to(dev)
    gens = [generator(seed + 1 + i, dev) for i in range(G)]
    var = torch.tensor([s.label_variance for s in specs], device=dev)
    curve = []
    with single_thread(device=dev):
        if steps > 0:
            params = list(model.parameters())
            fused = dev.type == "cpu" or dev.type == "cuda"
            opt = torch.optim.Adam(params, lr=lr, fused=fused)  # one kernel per step (same update as the loop)
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=warmup,
                                                        anneal_strategy="cos")
            for t in range(steps):
                n_t, d_t = n_max, None
                if curriculum is not None:
                    d0, n0, every = curriculum
                    d_t, n_t = min(specs[0].d, d0 + t // every), min(n_max, n0 + 2 * (t // every))
                data = [sample_tasks(s, batch, n_t, g=gg, device=dev, active_dims=d_t) for s, gg in zip(specs, gens)]
                xs = torch.stack([x for x, _ in data])
                ys = torch.stack([y for _, y in data])
                per = ((model.predict(xs, ys) - ys) ** 2).mean((1, 2)) / var  # (G,)
                opt.zero_grad(set_to_none=True)
                per.sum().backward()
                if clip > 0:  # per copy: the norm of that copy's gradient over every parameter
                    with torch.no_grad():
                        grads = [p.grad for p in params]
                        norm = torch.cat([g_.reshape(G, -1) for g_ in grads], 1).norm(dim=1)
                        scale = (clip / (norm + 1e-6)).clamp(max=1.0)
                        torch._foreach_mul_(grads, [scale.view(G, *([1] * (g_.dim() - 1))) for g_ in grads])
                opt.step()
                sched.step()
                curve.append(per.detach().cpu().numpy())
    model.eval()
    secs = time.perf_counter() - t0
    C = np.array(curve).reshape(-1, G)
    return [TrainedModel(model.member(i), specs[i], C[:, i], secs, steps, seed, str(dev)) for i in range(G)]


def train_icl_model(spec: TaskSpec, n_max: int, **kw) -> TrainedModel:
    """:func:`train_icl_models` for one task spec (same keyword arguments)."""
    return train_icl_models([spec], n_max, **kw)[0]


# ------------------------------------------------------------------------------------------------
# baselines: each maps context xs (P, n, d), ys (P, n) and queries xq (P, d) to predictions (P,), NumPy float64

BASELINES = ("least_squares", "averaging", "lasso", "decision_tree", "knn3", "nn_gd", "zero")


def least_squares_predict(xs: np.ndarray, ys: np.ndarray, xq: np.ndarray) -> np.ndarray:
    """Min-norm least squares ``x_qᵀ X⁺ y`` (NumPy pseudo-inverse; ``n < d`` allowed; 0 for ``n = 0``)."""
    if xs.shape[1] == 0:
        return np.zeros(xs.shape[0])
    return np.einsum("pd,pdn,pn->p", xq, np.linalg.pinv(xs), ys)


def averaging_predict(xs: np.ndarray, ys: np.ndarray, xq: np.ndarray) -> np.ndarray:
    """``x_qᵀ (1/n) Σ y_i x_i`` (Garg et al.'s averaging baseline; 0 for ``n = 0``)."""
    if xs.shape[1] == 0:
        return np.zeros(xs.shape[0])
    return np.einsum("pd,pn,pnd->p", xq, ys, xs) / xs.shape[1]


def _per_prompt(make, xs, ys, xq, fit_predict=None) -> np.ndarray:
    """One scikit-learn estimator fitted per prompt. The inputs are finite float64 arrays built here and
    the hyper-parameters are constants, so scikit-learn's per-call input and parameter validation (most
    of the time of a fit on ≤ 40 points) is switched off; the fits themselves are unchanged.
    ``fit_predict(estimator, X, y, x_q (1, d)) -> prediction``: how to fit and predict (default
    ``fit(X, y).predict(x_q)``; Lasso and the tree also skip their input checks, with the inputs
    converted as the checks would, so that the predictions are bitwise the same)."""
    import sklearn

    out = np.zeros(xs.shape[0])
    if xs.shape[1] == 0:
        return out
    fp = fit_predict or (lambda est, X, y, q: est.fit(X, y).predict(q)[0])
    with sklearn.config_context(assume_finite=True, skip_parameter_validation=True):
        for p in range(xs.shape[0]):
            out[p] = fp(make(), xs[p], ys[p], xq[p:p + 1])
    return out


def _lasso_fit_predict(est, X, y, q) -> float:
    """``Lasso.fit`` without its input check (it needs X Fortran-ordered float64, which the check makes it), and
    ``predict``'s formula ``x_q @ coef_ᵀ + intercept_`` without its validation."""
    est.fit(np.asfortranarray(X, dtype=np.float64), np.ascontiguousarray(y, dtype=np.float64), check_input=False)
    return float((q @ est.coef_.T + est.intercept_)[0])


def _tree_fit_predict(est, X, y, q) -> float:
    """``DecisionTreeRegressor.fit`` / ``predict`` without their input checks: the checks convert X to C-ordered
    float32 (the tree's split type), done here."""
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    return float(est.fit(f32(X), np.ascontiguousarray(y, dtype=np.float64), check_input=False)
                 .predict(f32(q), check_input=False)[0])


def lasso_predict(xs: np.ndarray, ys: np.ndarray, xq: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    """scikit-learn ``Lasso(alpha, fit_intercept=False)`` fitted on each prompt (objective
    ``(1/2n)‖y − Xw‖² + α‖w‖₁``; Garg et al. report Lasso over a grid of α, small α best without noise)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _per_prompt(lambda: Lasso(alpha=alpha, fit_intercept=False, max_iter=10_000, tol=1e-6), xs, ys, xq,
                           _lasso_fit_predict)


def tree_predict(xs: np.ndarray, ys: np.ndarray, xq: np.ndarray, max_depth: int | None = None) -> np.ndarray:
    """scikit-learn ``DecisionTreeRegressor(max_depth)`` (greedy CART, squared error) fitted on each prompt."""
    from sklearn.tree import DecisionTreeRegressor

    return _per_prompt(lambda: DecisionTreeRegressor(max_depth=max_depth, random_state=0), xs, ys, xq, _tree_fit_predict)


def knn_predict(xs: np.ndarray, ys: np.ndarray, xq: np.ndarray, k: int = 3) -> np.ndarray:
    """Mean label of the ``min(k, n)`` nearest context inputs (Euclidean, uniform weights) of each prompt: what
    scikit-learn's ``KNeighborsRegressor(min(k, n))`` fitted on each prompt predicts, for all prompts at once (0 for
    ``n = 0``). As scikit-learn: the neighbours in order of distance, their labels averaged in that order
    (``np.mean`` over the neighbour axis, as its ``predict``); the squared distances summed over the coordinates in
    order, as its KD-tree does. On inputs without exact distance ties (inputs drawn from a density: every prompt
    here) the prediction is bitwise scikit-learn's, on its KD-tree and brute-force paths alike
    (tests/test_icl_classes.py, against the per-prompt estimator). On an exact tie scikit-learn's choice depends
    on its path (heap order, tree traversal) and is not specified; here the lower index comes first (a stable sort):
    the neighbours are then a valid nearest set, not necessarily scikit-learn's."""
    P, n, d = xs.shape
    if n == 0:
        return np.zeros(P)
    return np.mean(np.take_along_axis(ys, _knn_indices(xs, xq, min(k, n)), 1), axis=1)


def _knn_indices(xs: np.ndarray, xq: np.ndarray, k: int) -> np.ndarray:
    """Indices ``(P, k)`` of each prompt's ``k`` nearest context inputs to its query, nearest first (ties: lower
    index first). The squared distance is accumulated one coordinate at a time (``Σ_j (x_j − q_j)²`` left to
    right), the order of scikit-learn's KD-tree, so that the order is its order up to exact ties."""
    diff = xs - xq[:, None, :]
    dist = diff[..., 0] ** 2
    for j in range(1, xs.shape[2]):
        dist = dist + diff[..., j] ** 2
    return np.argsort(dist, axis=1, kind="stable")[:, :k]


def nn_gd_predict(xs: np.ndarray, ys: np.ndarray, xq: np.ndarray, *, hidden: int = 100, steps: int = 500,
                  lr: float = 0.01, seed: int = 0, mask: np.ndarray | None = None, device="cpu") -> np.ndarray:
    """A two-layer ReLU network ``x ↦ aᵀ relu(W x) / √hidden`` (Garg et al.'s class, no biases) trained
    on each prompt's ``n`` examples by full-batch GD (Adam, ``steps`` steps, learning rate ``lr``) on
    the mean squared error, from ``W ~ N(0, I)``, ``a ~ N(0, 1)``; every prompt is its own network,
    all prompts trained as one batched tensor (float64, on ``device``). ``mask (P, n)`` (0/1) selects each
    prompt's examples (prompts of different lengths in one batch); a prompt with no example predicts 0."""
    P, n, d = xs.shape
    if n == 0:
        return np.zeros(P)
    from numerics.icl import single_thread

    dev = resolve_device(device)
    f64 = dict(dtype=torch.float64, device=dev)
    Mk = torch.ones(P, n, **f64) if mask is None else torch.as_tensor(np.asarray(mask, dtype=np.float64), **f64)
    cnt = Mk.sum(-1).clamp(min=1.0)
    g = generator(seed)  # CPU generator: the same initial networks on every device
    X = torch.as_tensor(xs, **f64)
    Y = torch.as_tensor(ys, **f64)
    W = torch.randn(P, hidden, d, generator=g, dtype=torch.float64).to(dev).requires_grad_()
    a = torch.randn(P, hidden, generator=g, dtype=torch.float64).to(dev).requires_grad_()
    s = 1.0 / math.sqrt(hidden)

    def f(Xb):
        return s * torch.einsum("pnh,ph->pn", torch.relu(torch.einsum("pnd,phd->pnh", Xb, W)), a)

    with single_thread(device=dev):
        opt = torch.optim.Adam([W, a], lr=lr)
        for _ in range(steps):
            loss = (((f(X) - Y) ** 2 * Mk).sum(-1) / cnt).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        with torch.no_grad():
            out = f(torch.as_tensor(xq, **f64).unsqueeze(1))[:, 0].cpu().numpy()
    return np.where(Mk.sum(-1).cpu().numpy() > 0, out, 0.0)


_BASELINE_FN = {"least_squares": least_squares_predict, "averaging": averaging_predict, "lasso": lasso_predict,
                "decision_tree": tree_predict, "knn3": knn_predict, "nn_gd": nn_gd_predict,
                "zero": lambda xs, ys, xq: np.zeros(xs.shape[0])}


#: baseline predictions of :func:`error_curves` by (task spec, lengths, prompts, seed, baseline, options and, for the
#: per-prompt networks, device): the prompts are a function of the spec and the seed, so a mutant or a second claim on
#: the same prompts reuses them
_BASELINE_CACHE: dict = {}


def _baseline_predictions(name: str, xs: np.ndarray, ys: np.ndarray, lengths: list[int], opts: dict,
                          device) -> np.ndarray:
    """Baseline ``name``'s predictions ``(len(lengths), P)`` of ``ys[:, n]`` from the first ``n`` examples of each
    prompt, for each ``n`` in ``lengths``."""
    if name == "nn_gd":  # every length in one batch of networks (masked examples): one training run
        P, nL, nmx = xs.shape[0], len(lengths), max(lengths)
        mask = np.stack([np.broadcast_to(np.arange(nmx) < n, (P, nmx)) for n in lengths]).reshape(-1, nmx)
        q = np.concatenate([xs[:, n] for n in lengths])
        p = nn_gd_predict(np.tile(xs[:, :nmx], (nL, 1, 1)), np.tile(ys[:, :nmx], (nL, 1)), q, mask=mask,
                          **{"device": device, **opts})
        return p.reshape(nL, P)
    fn = _BASELINE_FN[name]
    return np.stack([fn(xs[:, :n], ys[:, :n], xs[:, n], **opts) for n in lengths])


def error_curves(trained: "TinyGPT | None", spec: TaskSpec, lengths, n_prompts: int, *, seed: int,
                 baselines=("least_squares", "averaging", "knn3"), baseline_kw: dict | None = None,
                 device="cpu") -> dict:
    """Squared error at the query divided by ``spec.label_variance`` (mean and SE over ``n_prompts``
    fresh prompts of ``spec``'s class) at each number of in-context examples ``n`` in ``lengths``, for
    the model (key ``"transformer"``, when ``trained`` is given) and each named baseline (see
    :data:`BASELINES`; ``baseline_kw[name]`` extra keyword arguments). The prompts are the same for
    every predictor (paired). Returns ``{"lengths": [...], "n_prompts": P, "seed": seed,
    name: {"mean": [...], "se": [...]}}`` and, per name, the per-prompt errors under ``"_errors"``
    (``(len(lengths), P)`` arrays, for paired comparisons). The prompts are drawn on the CPU (the same on
    every device); the model and the per-prompt networks of ``nn_gd`` run on ``device``."""
    lengths = [int(n) for n in lengths]
    n_all = max(lengths) + 1
    g = generator(seed)
    xs_t, ys_t = sample_tasks(spec, n_prompts, n_all, g=g, dtype=torch.float64)
    xs, ys = xs_t.numpy(), ys_t.numpy()
    preds: dict[str, np.ndarray] = {}
    if trained is not None:
        dev = trained.pos.device
        with torch.no_grad():
            preds["transformer"] = trained.predict(xs_t.to(dev), ys_t.to(dev)).double().cpu().numpy()[:, lengths].T
    kw = baseline_kw or {}
    for name in baselines:
        opts = kw.get(name, {})
        # the per-prompt networks run on the device (its rounding may differ from the CPU's): it keys them too
        key = (repr(spec), tuple(lengths), int(n_prompts), int(seed), name, repr(sorted(opts.items())),
               str(resolve_device(opts.get("device", device))) if name == "nn_gd" else None)
        if key not in _BASELINE_CACHE:  # form-independent: the same prompts (spec, seed) give the same predictions
            if len(_BASELINE_CACHE) >= 256:
                _BASELINE_CACHE.pop(next(iter(_BASELINE_CACHE)))
            _BASELINE_CACHE[key] = _baseline_predictions(name, xs, ys, lengths, opts, device)
        preds[name] = _BASELINE_CACHE[key].copy()
    target = ys[:, lengths].T  # (L, P)
    out: dict = {"lengths": lengths, "n_prompts": int(n_prompts), "seed": int(seed), "_errors": {}}
    for name, p in preds.items():
        e = (p - target) ** 2 / spec.label_variance
        out["_errors"][name] = e
        out[name] = {"mean": e.mean(1).tolist(), "se": (e.std(1, ddof=1) / math.sqrt(n_prompts)).tolist()}
    return out
