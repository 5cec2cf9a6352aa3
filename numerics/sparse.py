"""Sparse attention patterns and the Yun et al. (2020) connectivity conditions (claim
``sparse.connectivity``).

Conventions
-----------
A *pattern* is a boolean ``(n, n)`` NumPy mask; ``mask[i, j]`` is True when query token ``i``
attends key token ``j`` (row = query, as in ``scaled_dot_product_attention``'s ``attn_mask``).
A sparse transformer cycles through ``p`` patterns ``A_1, …, A_p`` (layer ``t`` uses
``A_{(t−1) mod p + 1}``); a builder returns that list. Yun et al. (2020), Assumption 1:

1. every token attends itself in every pattern (``diag(A_k)`` all True);
2. a Hamiltonian path ``γ`` through the union ``U = A_1 ∨ … ∨ A_p`` in which each token attends
   its predecessor: ``U[γ(i+1), γ(i)]`` for all ``i``;
3. finitely many layers make every token depend on every token: with ``R_1 = A_1`` and
   ``R_t = A_t R_{t−1}`` (boolean product), ``R_s`` is all True for some ``s``.

Tokens are 0-based here.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import torch

from numerics.torch_utils import resolve_device
from theory.validation import require

__all__ = [
    "band", "strided", "fixed", "star", "longformer", "bigbird", "BUILDERS",
    "union", "has_self_loops", "is_hamiltonian_path", "hamiltonian_path", "layers_to_full",
    "conditions", "sparse_attention", "masked_dense_attention",
    "hamiltonian_path_exists_bruteforce", "layers_to_full_sets", "layers_to_full_distance",
]


def _check_n(n: int) -> int:
    require(isinstance(n, (int, np.integer)) and n >= 1, f"n must be a positive integer, got {n!r}")
    return int(n)


def _ij(n):
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    return i, j


def band(n: int, w: int = 1) -> list[np.ndarray]:
    """One pattern: ``|i − j| ≤ w`` (a sliding window of half-width ``w``).

    >>> band(3, 1)[0].astype(int)
    array([[1, 1, 0],
           [1, 1, 1],
           [0, 1, 1]])
    """
    n = _check_n(n)
    require(w >= 1, f"band half-width w must be ≥ 1, got {w}")
    i, j = _ij(n)
    return [np.abs(i - j) <= w]


def strided(n: int, stride: int = 2) -> list[np.ndarray]:
    """Child et al. (2019) strided pattern, bidirectional as in Yun et al. (2020): two patterns,
    local ``|i − j| < stride`` and strided ``(i − j) mod stride = 0``."""
    n = _check_n(n)
    require(stride >= 2, f"stride must be ≥ 2, got {stride}")
    i, j = _ij(n)
    return [np.abs(i - j) < stride, (i - j) % stride == 0]


def fixed(n: int, block: int = 2, summary: int = 1) -> list[np.ndarray]:
    """Child et al. (2019) fixed pattern, bidirectional: ``i`` attends its block
    ``⌊i/ℓ⌋ = ⌊j/ℓ⌋``, then the last ``c`` positions of every block (``j mod ℓ ≥ ℓ − c``);
    the self-loop is added to the second pattern (Yun et al.'s condition 1). ``n`` must be a
    multiple of ``ℓ`` (a partial last block would have no summary position)."""
    n = _check_n(n)
    require(block >= 1 and 1 <= summary <= block, f"need block ≥ 1 and 1 ≤ summary ≤ block, got {block}, {summary}")
    require(n % block == 0, f"fixed pattern: n = {n} must be a multiple of the block length {block}")
    i, j = _ij(n)
    return [i // block == j // block, ((j % block) >= block - summary) | (i == j)]


def star(n: int) -> list[np.ndarray]:
    """Star-Transformer (Guo et al. 2019): token 0 is the relay, attending and attended by all;
    satellites ``1..n−1`` attend their ring neighbours ``i ± 1`` (not wrapping) and themselves."""
    n = _check_n(n)
    i, j = _ij(n)
    m = (np.abs(i - j) <= 1) & (i >= 1) & (j >= 1)
    m |= (i == 0) | (j == 0)
    return [m]


def longformer(n: int, w: int = 1, global_tokens: Sequence[int] = (0,)) -> list[np.ndarray]:
    """Longformer (Beltagy et al. 2020): window ``|i − j| ≤ w`` plus global tokens whose rows and
    columns are full."""
    m = band(n, w)[0].copy()
    g = np.asarray(list(global_tokens), dtype=int)
    require(g.size == 0 or (g.min() >= 0 and g.max() < n), f"global tokens must lie in [0, {n})")
    m[g, :] = True
    m[:, g] = True
    return [m]


def bigbird(n: int, w: int = 1, n_global: int = 1, n_random: int = 1, seed: int = 0) -> list[np.ndarray]:
    """BigBird (Zaheer et al. 2020): window ``|i − j| ≤ w``, the first ``n_global`` tokens global,
    and ``n_random`` keys per query drawn uniformly (seeded)."""
    m = longformer(n, w, range(min(n_global, n)))[0]
    rng = np.random.default_rng(seed)
    if n_random > 0:
        keys = np.argsort(rng.random((n, n)), axis=1)[:, :n_random]
        m[np.arange(n)[:, None], keys] = True
    return [m]


BUILDERS = {"band": band, "strided": strided, "fixed": fixed, "star": star, "longformer": longformer, "bigbird": bigbird}


def _as_masks(masks) -> list[np.ndarray]:
    if isinstance(masks, np.ndarray) and masks.ndim == 2:
        masks = [masks]
    out = [np.asarray(m, dtype=bool) for m in masks]
    require(len(out) >= 1, "need at least one pattern")
    n = out[0].shape[0]
    for m in out:
        require(m.ndim == 2 and m.shape == (n, n), f"patterns must all be square (n, n), got {m.shape}")
    return out


def union(masks) -> np.ndarray:
    """``A_1 ∨ … ∨ A_p``."""
    return np.logical_or.reduce(_as_masks(masks))


def has_self_loops(masks) -> bool:
    """Condition 1: every token attends itself in every pattern."""
    return all(bool(np.all(np.diag(m))) for m in _as_masks(masks))


def is_hamiltonian_path(masks, path: Sequence[int]) -> bool:
    """Whether ``path`` visits every token once and each token attends its predecessor in the union."""
    U = union(masks)
    n = U.shape[0]
    p = list(path)
    if sorted(p) != list(range(n)):
        return False
    return all(bool(U[p[t + 1], p[t]]) for t in range(n - 1))


def hamiltonian_path(masks, max_exact_n: int = 16) -> list[int] | None:
    """Condition 2: a Hamiltonian path in the union (each token attends its predecessor).

    First the constructive witnesses ``0 → 1 → … → n−1`` (token ``i+1`` attends ``i``) and its
    reverse; otherwise the Held–Karp bitmask DP (exact, ``O(2ⁿ n²)``, for ``n ≤ max_exact_n``).
    Returns the path, or ``None`` when none exists. Raises :class:`InputError` when no witness
    applies and ``n`` is too large for the DP.
    """
    U = union(masks)
    n = U.shape[0]
    if n == 1:
        return [0]
    idx = np.arange(n - 1)
    if np.all(U[idx + 1, idx]):
        return list(range(n))
    if np.all(U[idx, idx + 1]):
        return list(range(n - 1, -1, -1))
    require(n <= max_exact_n, f"no constructive witness and n = {n} > {max_exact_n}: exact search too costly")
    # reach[S][v]: a path through exactly the set S ending at v exists; parent for reconstruction
    full = (1 << n) - 1
    reach = np.zeros((1 << n, n), dtype=bool)
    parent = np.full((1 << n, n), -1, dtype=np.int64)
    for v in range(n):
        reach[1 << v, v] = True
    for S in range(1, full + 1):
        ends = np.flatnonzero(reach[S])
        for v in ends:
            # next token u (not in S) must attend v
            for u in np.flatnonzero(U[:, v]):
                if not (S >> u) & 1:
                    T = S | (1 << u)
                    if not reach[T, u]:
                        reach[T, u] = True
                        parent[T, u] = v
    ends = np.flatnonzero(reach[full])
    if ends.size == 0:
        return None
    path, S, v = [], full, int(ends[0])
    while v != -1:
        path.append(v)
        pv = int(parent[S, v])
        S &= ~(1 << v)
        v = pv
    return path[::-1]


def layers_to_full(masks, max_layers: int | None = None) -> int | None:
    """Condition 3: the least ``s`` with ``R_s = A_s ⋯ A_1`` all True (boolean products, patterns
    cycled), or ``None`` if none within ``max_layers`` (default ``p·n``, enough whenever the
    union is strongly connected and every pattern has self-loops)."""
    A = _as_masks(masks)
    n, p = A[0].shape[0], len(A)
    cap = max_layers if max_layers is not None else p * n
    R = A[0].astype(np.int64)
    for s in range(1, cap + 1):
        if np.all(R > 0):
            return s
        R = ((A[s % p].astype(np.int64) @ R) > 0).astype(np.int64)
    return None


def conditions(masks) -> dict:
    """The three conditions and the layer count: ``{"self_loops", "hamiltonian_path", "layers_to_full"}``."""
    return {"self_loops": has_self_loops(masks), "hamiltonian_path": hamiltonian_path(masks),
            "layers_to_full": layers_to_full(masks)}


# ----------------------------------------------------------------------------------------------
# independent references (brute force / graph algorithms), used by the checks


def hamiltonian_path_exists_bruteforce(masks) -> bool:
    """Try every permutation (``n! ``, for ``n ≤ 8``): some γ with ``U[γ(t+1), γ(t)]`` for all t."""
    U = union(masks)
    n = U.shape[0]
    require(n <= 8, f"brute force over {n}! permutations is too costly")
    return any(all(U[g[t + 1], g[t]] for t in range(n - 1)) for g in itertools.permutations(range(n)))


def layers_to_full_sets(masks, max_layers: int | None = None) -> int | None:
    """Yun et al.'s set recursion, literally: ``S¹_i = A_1^i``, ``S^t_i = ∪_{j ∈ A_t^i} S^{t−1}_j``."""
    A = _as_masks(masks)
    n, p = A[0].shape[0], len(A)
    nbrs = [[set(np.flatnonzero(a[i]).tolist()) for i in range(n)] for a in A]
    S = [set(nbrs[0][i]) for i in range(n)]
    cap = max_layers if max_layers is not None else p * n
    everyone = set(range(n))
    for t in range(1, cap + 1):
        if all(s == everyone for s in S):
            return t
        S = [set().union(*(S[j] for j in nbrs[t % p][i])) for i in range(n)]
    return None


def layers_to_full_distance(mask: np.ndarray) -> int | None:
    """One pattern with self-loops: ``s`` = the largest shortest-path distance (the diameter of the
    directed graph, edge ``j → i`` when ``i`` attends ``j``), by ``scipy.sparse.csgraph``; at least 1."""
    from scipy.sparse.csgraph import shortest_path

    A = np.asarray(mask, dtype=bool)
    dist = shortest_path(A.astype(float), method="D", directed=True, unweighted=True)
    if not np.all(np.isfinite(dist)):
        return None
    return max(1, int(dist.max()))


# ----------------------------------------------------------------------------------------------
# attention


def _neighbour_lists(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query the attended keys, padded: ``idx (n, deg)`` and ``valid (n, deg)``."""
    deg = mask.sum(1)
    require(bool(np.all(deg >= 1)), "every query must attend at least one key (empty row in the pattern)")
    D = int(deg.max())
    order = np.argsort(~mask, axis=1, kind="stable")[:, :D]  # attended keys first, in index order
    valid = np.arange(D)[None, :] < deg[:, None]
    return np.where(valid, order, 0), valid


def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: np.ndarray) -> torch.Tensor:
    """Attention computed only over the attended keys (gather, O(n · deg) work).

    ``q, k``: ``(..., n, d)``; ``v``: ``(..., n, d_v)``; ``mask``: ``(n, n)`` bool (row = query).
    Scores ``q·k / √d``, softmax over each query's attended keys. Returns ``(..., n, d_v)``.
    """
    mask = _as_masks(mask)[0]
    n = q.shape[-2]
    require(mask.shape == (n, n), f"mask must be ({n}, {n}), got {mask.shape}")
    idx, valid = _neighbour_lists(mask)
    idx_t = torch.as_tensor(idx, device=q.device)
    valid_t = torch.as_tensor(valid, device=q.device)
    kg = k[..., idx_t, :]  # (..., n, deg, d)
    vg = v[..., idx_t, :]
    logits = torch.einsum("...nd,...nkd->...nk", q, kg) / math.sqrt(q.shape[-1])
    logits = logits.masked_fill(~valid_t, float("-inf"))
    w = torch.softmax(logits, dim=-1)
    return torch.einsum("...nk,...nkd->...nd", w, vg)


def masked_dense_attention(q, k, v, mask, device="cpu") -> torch.Tensor:
    """The reference: ``torch.nn.functional.scaled_dot_product_attention`` with ``attn_mask``
    (True = attend) on ``device``; same shapes as :func:`sparse_attention`."""
    dev = resolve_device(device)
    m = torch.as_tensor(np.asarray(mask, dtype=bool), device=dev)
    return torch.nn.functional.scaled_dot_product_attention(q.to(dev), k.to(dev), v.to(dev), attn_mask=m)

