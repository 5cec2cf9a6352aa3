"""Group F (approximation): the one-layer rank-1 contextual mapping on a grid, connection counts of
the sparse patterns, and tiny batched transformers for the universal-approximation evidence.

Contextual mapping (claim ``approx.contextual_mapping``; the construction and the margin are
derived in ``theory/approx.py``, whose docstring states every constant). Tokens are ROWS:
``X (n, d)``; the grid is ``{δ, 2δ, …, 1}^d``, ``δ = 1/b``; token ``z ∈ {0..K−1}`` (``K = b^d``) has
base-b digits ``m_i − 1`` and coordinates ``x_i = m_i δ``. One attention layer, one head:
``Y = X + softmax((X W_Qᵀ)(X W_Kᵀ)ᵀ) (X W_Vᵀ) W_Oᵀ``, scores NOT divided by √d_k
(``scaled_dot_product_attention(..., scale=1)``), float64.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from numerics import sparse as nsp
from theory.validation import require

__all__ = [
    "grid_tokens", "construction_weights", "margin_bound", "attention_layer", "all_sequences", "separations",
    "tight_pair_separation", "uniform_attention_weights", "random_full_rank_weights",
    "CONNECTION_COUNTS", "mask_counts",
    "equivariant_target", "shift_target", "shift_floor", "BatchedTransformer", "train_batched",
]

RHO = 1.0 / 8.0


def _check_grid(d: int, b: int) -> None:
    require(isinstance(d, (int, np.integer)) and d >= 1, f"d must be a positive integer, got {d!r}")
    require(isinstance(b, (int, np.integer)) and b >= 2, f"b = 1/δ must be an integer ≥ 2, got {b!r}")


def grid_tokens(d: int, b: int) -> np.ndarray:
    """The ``K = b^d`` grid tokens ``{δ, …, 1}^d`` as rows ``(K, d)`` float64, row ``z`` = the token
    whose base-b digits (least significant first, coordinate 1 first) are ``m_i − 1``.

    >>> grid_tokens(2, 2)
    array([[0.5, 0.5],
           [1. , 0.5],
           [0.5, 1. ],
           [1. , 1. ]])
    """
    _check_grid(d, b)
    z = np.arange(b**d)
    digits = (z[:, None] // b ** np.arange(d)[None, :]) % b
    return (digits + 1) / b


def construction_weights(d: int, b: int, rho: float = RHO) -> dict[str, np.ndarray]:
    """The construction's weights: ``W_Q = W_K = √λ uᵀ``, ``W_V = uᵀ`` (each ``(1, d)``, rank 1),
    ``W_O = γ e₁`` (``(d, 1)``), with ``u = (1, b, …, b^{d−1})``, ``λ = ln(1/ρ)/(δ² c₀)``,
    ``c₀ = (b^d − 1)/(b − 1)``, ``γ = 1/(2(K − 1))``. Also returns ``lam``, ``gamma``, ``u``."""
    _check_grid(d, b)
    require(0 < rho <= 0.5, f"rho must lie in (0, 1/2], got {rho}")
    delta, K = 1.0 / b, b**d
    u = b ** np.arange(d, dtype=float)
    c0 = (K - 1) / (b - 1)
    lam = math.log(1 / rho) / (delta**2 * c0)
    gamma = 1.0 / (2 * (K - 1))
    WO = np.zeros((d, 1))
    WO[0, 0] = gamma
    return {"W_Q": math.sqrt(lam) * u[None], "W_K": math.sqrt(lam) * u[None], "W_V": u[None], "W_O": WO,
            "lam": lam, "gamma": gamma, "u": u}


def margin_bound(d: int, b: int, rho: float = RHO) -> dict:
    """The construction's guaranteed separations (NumPy, float64): ``{"same_token": (K,)`` lower
    bounds ``B(x_z)`` on ``‖y − y′‖`` between outputs of token ``z`` in two different context sets,
    ``"distinct_tokens": δ/2}``. ``x_z = e^{−λ δ a_z} = ρ^{a_z/a_min}``,
    ``B(x) = δ/(2(K−1)) min(1 − x/(1−x)², (K−2) x^{K−2}(1−x)² φ(x))``,
    ``φ(x) = 1 − x/(1−x) − x/(1−x)³ − x²/(1−x)² − 2x⁴/((1−x²)(1−x)²)``."""
    _check_grid(d, b)
    delta, K = 1.0 / b, b**d
    c0 = (K - 1) / (b - 1)
    a = delta * (c0 + np.arange(K))
    x = rho ** (a / a[0])
    phi = 1 - x / (1 - x) - x / (1 - x) ** 3 - x**2 / (1 - x) ** 2 - 2 * x**4 / ((1 - x**2) * (1 - x) ** 2)
    case_a = 1 - x / (1 - x) ** 2
    case_b = (K - 2) * x ** (K - 2) * (1 - x) ** 2 * phi
    return {"same_token": delta / (2 * (K - 1)) * np.minimum(case_a, case_b), "distinct_tokens": delta / 2}


def attention_layer(X: torch.Tensor, W: dict) -> torch.Tensor:
    """``X + sdpa(X W_Qᵀ, X W_Kᵀ, X W_Vᵀ, scale=1) W_Oᵀ`` for ``X (..., n, d)`` float64, using
    ``torch.nn.functional.scaled_dot_product_attention``; ``W`` holds NumPy or torch arrays
    ``W_Q, W_K (h, d)``, ``W_V (h_v, d)``, ``W_O (d, h_v)``."""
    t = {k: torch.as_tensor(np.asarray(W[k]), dtype=X.dtype) for k in ("W_Q", "W_K", "W_V", "W_O")}
    Q, Kt, V = X @ t["W_Q"].T, X @ t["W_K"].T, X @ t["W_V"].T
    att = torch.nn.functional.scaled_dot_product_attention(Q, Kt, V, scale=1.0)
    return X + att @ t["W_O"].T


def all_sequences(K: int, n: int) -> np.ndarray:
    """Every ordered sequence of ``n`` distinct token indices out of ``K``: ``(K!/(K−n)!, n)`` int."""
    require(2 <= n <= K, f"need 2 ≤ n ≤ K, got n = {n}, K = {K}")
    return np.asarray(list(itertools.permutations(range(K), n)), dtype=np.int64)


@dataclass(frozen=True)
class Separations:
    """What :func:`separations` measured.

    same_token       (K,) smallest ``‖y − y′‖`` between outputs of token z in two different sets
    distinct_tokens  smallest ``‖y − y′‖`` between outputs of two different tokens (any sets)
    equivariance     largest ``‖y − y′‖`` between outputs of the same token and the same set in two
                     orders (permutation equivariance; rounding level)
    sequences        number of ordered sequences enumerated; ``outputs`` unique (token, set) outputs
    closest          for the smallest same-token separation: (token, set A, set B) as index lists
    """

    same_token: np.ndarray
    distinct_tokens: float
    equivariance: float
    sequences: int
    outputs: int
    closest: tuple


def _unique_outputs(d, b, n, W):
    toks = torch.from_numpy(grid_tokens(d, b))
    K = toks.shape[0]
    seq = all_sequences(K, n)
    Y = attention_layer(toks[torch.from_numpy(seq)], W).numpy()  # (P, n, d)
    masks = (1 << seq).sum(1)  # (P,) the set as a bitmask
    tok = seq.reshape(-1)
    key = tok * (1 << K) + np.repeat(masks, n)
    Yf = Y.reshape(-1, d)
    uk, first, inv = np.unique(key, return_index=True, return_inverse=True)
    rep = Yf[first]
    equi = float(np.max(np.linalg.norm(Yf - rep[inv], axis=1)))
    return K, seq, rep, uk // (1 << K), uk % (1 << K), equi


def separations(d: int, b: int, n: int, W: dict) -> Separations:
    """Enumerate every ordered grid sequence of ``n`` distinct tokens, apply the layer (batched,
    float64) and measure the separations of the outputs (differences formed directly, no Gram
    trick, so separations far below 1 keep their relative precision)."""
    K, seq, U, utok, umask, equi = _unique_outputs(d, b, n, W)
    same = np.full(K, np.inf)
    closest, best = (), np.inf
    for z in range(K):
        rows = np.flatnonzero(utok == z)
        if rows.size < 2:
            continue
        D = np.linalg.norm(U[rows, None, :] - U[None, rows, :], axis=-1)
        D[np.arange(rows.size), np.arange(rows.size)] = np.inf
        same[z] = float(D.min())
        if same[z] < best:
            best = same[z]
            p, q = np.unravel_index(np.argmin(D), D.shape)
            closest = (z, _members(umask[rows[p]], K), _members(umask[rows[q]], K))
    diff = np.linalg.norm(U[:, None, :] - U[None, :, :], axis=-1)
    diff[utok[:, None] == utok[None, :]] = np.inf
    return Separations(same, float(diff.min()), equi, int(seq.shape[0]), int(U.shape[0]), closest)


def _members(mask, K):
    return [int(i) for i in range(K) if (int(mask) >> i) & 1]


def tight_pair_separation(d: int, b: int, n: int, W: dict) -> float:
    """``‖y − y′‖`` for the top token ``K−1`` in the sets ``{K−1, K−2, …, K−n+1, 1}`` and
    ``{K−1, …, K−n+1, 0}`` (gap sets ``{1..n−2, K−2}`` vs ``{1..n−2, K−1}``: the pair on which the
    construction's bound is nearly attained). Needs ``n ≤ K − 1``."""
    K = b**d
    require(2 <= n <= K - 1, f"the tight pair needs 2 ≤ n ≤ K − 1, got n = {n}, K = {K}")
    toks = torch.from_numpy(grid_tokens(d, b))
    common = [K - 1 - c for c in range(n - 1)]
    X = toks[torch.tensor([common + [1], common + [0]])]
    Y = attention_layer(X, W)
    return float(torch.linalg.vector_norm(Y[0, 0] - Y[1, 0]))


def _layer_mp(Xs, W, mp):
    """The layer of :func:`attention_layer` on one set of tokens (rows of ``Xs``, mpmath vectors),
    in mpmath at the working precision: the output of the first token (permutation equivariance:
    it depends on the set only). The float64 weights are taken exactly."""
    WQ, WK, WV, WO = (mp.matrix(np.asarray(W[k], dtype=float).tolist()) for k in ("W_Q", "W_K", "W_V", "W_O"))
    q = WQ * Xs[0]
    ks, vs = [WK * x for x in Xs], [WV * x for x in Xs]
    logits = [sum(q[i] * k[i] for i in range(q.rows)) for k in ks]
    top = max(logits)
    e = [mp.exp(t - top) for t in logits]
    Z = sum(e)
    att = sum((vs[j] * (e[j] / Z) for j in range(1, len(vs))), vs[0] * (e[0] / Z))
    return Xs[0] + WO * att


def same_token_separations_mp(d: int, b: int, n: int, W: dict, dps: int) -> np.ndarray:
    """``(K,)`` smallest ``‖y − y′‖`` between outputs of token ``z`` in two different sets of ``n``
    distinct grid tokens, the layer evaluated in mpmath at ``dps`` digits (for grids whose
    separations fall below float64 rounding of outputs of size ~1: ``K ≳ 5``). Returned as float64
    (the separations themselves are representable; only their computation in float64 is not)."""
    import mpmath

    K = b**d
    require(2 <= n <= K, f"need 2 ≤ n ≤ K, got n = {n}, K = {K}")
    with mpmath.workdps(int(dps)):
        toks = [mpmath.matrix([mpmath.mpf(int(m)) / b for m in row]) for row in np.rint(grid_tokens(d, b) * b).astype(int)]
        out = np.full(K, np.inf)
        for z in range(K):
            others = [t for t in range(K) if t != z]
            ys = [_layer_mp([toks[z]] + [toks[t] for t in rest], W, mpmath)
                  for rest in itertools.combinations(others, n - 1)]
            best = mpmath.inf
            for i in range(len(ys)):
                for j in range(i + 1, len(ys)):
                    best = min(best, mpmath.norm(ys[i] - ys[j]))
            out[z] = float(best)
    return out


def tight_pair_separation_mp(d: int, b: int, n: int, W: dict, dps: int) -> float:
    """:func:`tight_pair_separation` evaluated in mpmath at ``dps`` digits."""
    import mpmath

    K = b**d
    require(2 <= n <= K - 1, f"the tight pair needs 2 ≤ n ≤ K − 1, got n = {n}, K = {K}")
    with mpmath.workdps(int(dps)):
        toks = [mpmath.matrix([mpmath.mpf(int(m)) / b for m in row]) for row in np.rint(grid_tokens(d, b) * b).astype(int)]
        common = [K - 1 - c for c in range(n - 1)]
        ya = _layer_mp([toks[i] for i in common + [1]], W, mpmath)
        yb = _layer_mp([toks[i] for i in common + [0]], W, mpmath)
        return float(mpmath.norm(ya - yb))


def uniform_attention_weights(d: int, b: int, rho: float = RHO, seed: int = 0) -> dict:
    """Zero query/key weights (uniform attention: mean pooling) with random full-rank ``W_V, W_O``
    (``d×d``, Gaussian, ``W_O`` scaled by γ): a permutation-equivariant layer that is NOT a
    contextual mapping, since two sets with equal sums collide."""
    W = construction_weights(d, b, rho)
    g = np.random.default_rng(seed)
    return {"W_Q": np.zeros((1, d)), "W_K": np.zeros((1, d)), "W_V": g.normal(size=(d, d)),
            "W_O": W["gamma"] * g.normal(size=(d, d))}


def random_full_rank_weights(d: int, b: int, rho: float = RHO, seed: int = 0) -> dict:
    """Random full-rank ``d×d`` Gaussian weights with the construction's norms (``‖W_Q‖_F = ‖W_K‖_F
    = √λ‖u‖``, ``‖W_V‖_F = ‖u‖``, ``‖W_O‖_F = γ``): a diagnostic (generic attention is injective on a
    finite set; see the claim's notes)."""
    W = construction_weights(d, b, rho)
    g = np.random.default_rng(seed)
    out = {}
    for k in ("W_Q", "W_K", "W_V", "W_O"):
        M = g.normal(size=(d, d))
        out[k] = M * np.linalg.norm(W[k]) / np.linalg.norm(M)
    return out


# ------------------------------------------------------------------------------------------------
# connection counts (claim approx.sparse_connections)


def _isqrt(T: int) -> int:
    s = math.isqrt(int(T))
    require(s * s == int(T), f"T = {T} must be a perfect square (stride/block √T)")
    return s


#: closed-form per-layer counts (True entries of each mask); strided/fixed use s = √T (T a perfect
#: square), fixed has c summary positions per block, Longformer/BigBird a half-width-w window and
#: global tokens 0..g−1; the Longformer count holds for every T ≥ 1, g ≥ 0, w ≥ 0 (see _longformer_count)


def _longformer_count(T: int, w: int, g: int) -> int:
    """Longformer/BigBird structural count for every configuration: ``g' = min(g, T)`` global rows
    and columns (``g'(2T − g')``) plus the band ``|i − j| ≤ w`` on the ``n = T − g'`` other tokens,
    ``n² − m(m + 1)`` with ``m = max(n − w − 1, 0)`` (the pairs farther apart than ``w``). For
    ``T − g ≥ w`` it is the polynomial ``(2w+1)T + 2gT − g² − 2gw − g − w² − w``.

    >>> _longformer_count(10, 1, 1), _longformer_count(3, 5, 1), _longformer_count(2, 1, 4)
    (44, 9, 4)
    """
    g = min(int(g), int(T))
    n = int(T) - g
    m = max(n - int(w) - 1, 0)
    return g * (2 * int(T) - g) + n * n - m * (m + 1)


CONNECTION_COUNTS = {
    "strided_local": lambda T: 2 * T * _isqrt(T) - 2 * T + _isqrt(T),
    "strided_stride": lambda T: T * _isqrt(T),
    "fixed_block": lambda T: T * _isqrt(T),
    "fixed_summary": lambda T, c: c * T * _isqrt(T) + T - c * _isqrt(T),
    "star": lambda T: 5 * T - 6,
    "longformer": _longformer_count,
}


def mask_counts(name: str, T: int, **params) -> int:
    """The count of True entries of the built mask (``numerics.sparse`` builders) of one pattern:
    ``strided_local``/``strided_stride`` (layer 1/2 of ``strided(T, √T)``), ``fixed_block``/
    ``fixed_summary`` (layer 1/2 of ``fixed(T, √T, c)``), ``star``, ``longformer`` (``w``, ``g``:
    globals ``0..g−1``), ``bigbird`` (``w``, ``g``, ``r``, ``seed``)."""
    if name.startswith("strided"):
        masks = nsp.strided(T, _isqrt(T))
        return int(masks[0 if name == "strided_local" else 1].sum())
    if name.startswith("fixed"):
        masks = nsp.fixed(T, _isqrt(T), params.get("c", 1))
        return int(masks[0 if name == "fixed_block" else 1].sum())
    if name == "star":
        return int(nsp.star(T)[0].sum())
    if name == "longformer":
        return int(nsp.longformer(T, params["w"], range(min(params["g"], T)))[0].sum())
    if name == "bigbird":
        return int(nsp.bigbird(T, params["w"], params["g"], params["r"], params.get("seed", 0))[0].sum())
    raise KeyError(name)


# ------------------------------------------------------------------------------------------------
# evidence: tiny batched transformers (claim approx.universal_equivariant)


def equivariant_target(seed: int, d: int = 2, hidden: int = 8):
    """A random continuous permutation-equivariant map ``X (..., n, d) -> (..., n, d)``:
    ``t(X)_k = (1/n) Σ_l tanh(x_k P + x_l Q + c) R`` with Gaussian ``P, Q (d, h)``, ``c (h,)``,
    ``R (h, d)/√h`` (a pairwise interaction averaged over the sequence), float64."""
    g = np.random.default_rng(seed)
    P, Q, c = (torch.from_numpy(g.normal(size=s)) for s in ((d, hidden), (d, hidden), (hidden,)))
    R = torch.from_numpy(g.normal(size=(hidden, d)) / math.sqrt(hidden))

    def t(X: torch.Tensor) -> torch.Tensor:
        X = X.double()
        H = torch.tanh((X @ P)[..., :, None, :] + (X @ Q)[..., None, :, :] + c)  # (..., n, n, h)
        return H.mean(-2) @ R
    return t


def shift_target(X: torch.Tensor) -> torch.Tensor:
    """The non-equivariant target ``t(X)_k = x_{(k+1) mod n}`` (a cyclic shift of the rows)."""
    return torch.roll(X, shifts=-1, dims=-2)


def shift_floor(n: int) -> float:
    """The smallest mean squared error (per coordinate) of ANY permutation-equivariant predictor of
    :func:`shift_target` for i.i.d. N(0, 1) tokens: for a uniformly random relabelling, ``x_{k+1}`` is
    a uniformly random other token, so the best equivariant prediction is the mean of the other
    ``n − 1`` tokens, with error ``(n − 2)/(n − 1)``."""
    require(n >= 2, "n must be ≥ 2")
    return (n - 2) / (n - 1)


class BatchedTransformer(torch.nn.Module):
    """``M`` independent pre-LayerNorm transformers trained as one batch (leading model axis).

    Model ``i`` has width ``w``, one head, ``depths[i]`` blocks (attention + MLP of width 2w, both
    residual; the blocks beyond its depth are gated off), optional learned positional encodings
    (``use_pe[i]``). Input ``X (M, B, n, d_in)`` -> ``(M, B, n, d_out)``."""

    def __init__(self, depths, use_pe, n, d_in, d_out, width=16, seed=0, dtype=torch.float32):
        super().__init__()
        M, L = len(depths), int(np.max(depths))
        g = torch.Generator().manual_seed(int(seed))

        def p(*shape, scale):
            return torch.nn.Parameter(torch.randn(M, *shape, generator=g, dtype=dtype) * scale)
        w = width
        self.W_in, self.pe = p(d_in, w, scale=1 / math.sqrt(d_in)), p(n, w, scale=0.5)
        self.Wq, self.Wk, self.Wv, self.Wo = (p(L, w, w, scale=1 / math.sqrt(w)) for _ in range(4))
        self.W1, self.W2 = p(L, w, 2 * w, scale=1 / math.sqrt(w)), p(L, 2 * w, w, scale=1 / math.sqrt(2 * w))
        self.W_out = p(w, d_out, scale=1 / math.sqrt(w))
        self.register_buffer("gate", (torch.arange(L)[None, :] < torch.as_tensor(depths)[:, None]).to(dtype))
        self.register_buffer("pe_on", torch.as_tensor(use_pe, dtype=dtype))
        self.L = L

    def forward(self, X):
        ln = lambda h: torch.nn.functional.layer_norm(h, h.shape[-1:])  # noqa: E731
        h = torch.einsum("mbnd,mdw->mbnw", X, self.W_in) + self.pe_on[:, None, None, None] * self.pe[:, None]
        for l in range(self.L):
            gl = self.gate[:, l][:, None, None, None]
            z = ln(h)
            q, k, v = (torch.einsum("mbnw,mwv->mbnv", z, W[:, l]) for W in (self.Wq, self.Wk, self.Wv))
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v
            h = h + gl * torch.einsum("mbnw,mwv->mbnv", att, self.Wo[:, l])
            z = ln(h)
            h = h + gl * torch.einsum("mbnh,mhw->mbnw", torch.relu(torch.einsum("mbnw,mwh->mbnh", z, self.W1[:, l])), self.W2[:, l])
        return torch.einsum("mbnw,mwd->mbnd", h, self.W_out)


def train_batched(target, depths, use_pe, *, n=4, d=2, width=16, steps=300, batch=64, lr=3e-3, seed=0,
                  n_eval=2048, eval_seed=1):
    """Train :class:`BatchedTransformer` models (float32, Adam, fresh N(0, I) tokens every step,
    loss = mean squared error) on ``target``; evaluate in FLOAT64 on ``n_eval`` fresh sequences.

    Returns ``(per-model MSE per coordinate (M,), its standard error over the evaluation
    sequences (M,), final training losses (M,))``."""
    M = len(depths)
    model = BatchedTransformer(depths, use_pe, n, d, d, width, seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(int(seed) + 1)
    last = None
    for _ in range(int(steps)):
        X = torch.randn(M, batch, n, d, generator=g)
        loss_m = ((model(X) - target(X).float()) ** 2).mean((1, 2, 3))
        opt.zero_grad()
        loss_m.sum().backward()
        opt.step()
        last = loss_m.detach()
    model = model.double()
    ge = torch.Generator().manual_seed(int(eval_seed))
    with torch.no_grad():
        X = torch.randn(M, n_eval, n, d, generator=ge, dtype=torch.float64)
        err = ((model(X) - target(X)) ** 2).mean((2, 3))  # (M, n_eval) per-sequence MSE
    mse = err.mean(1).numpy()
    se = (err.std(1, unbiased=True) / math.sqrt(n_eval)).numpy()
    return mse, se, (last.numpy() if last is not None else np.full(M, np.nan))
