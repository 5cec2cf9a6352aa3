"""Attention as message passing on graphs, and min-aggregation GNNs as Bellman–Ford (claim
``gnn.attention_is_gnn``).

Conventions: node features are rows, ``X ∈ R^{n×d}`` (or ``(G, n, d)`` for a batch of graphs).
An edge ``(src, dst)`` carries a message from ``src`` to ``dst``: node ``dst`` *attends to*
``src``. The attention mask is ``M[i, j] = True`` iff ``j → i`` is an edge (row = receiving
query ``i``, column = sending key ``j``), the convention of
``torch.nn.functional.scaled_dot_product_attention``'s boolean ``attn_mask`` (True = attend).
Scores are ``q_i·k_j/√d_k`` with ``Q = X W_q``, ``K = X W_k``, ``V = X W_v``; the softmax runs
over a node's in-neighbours (the last axis of the dense form). float64 throughout.
"""

from __future__ import annotations

import numpy as np

from theory.validation import as_finite_array, require

__all__ = ["adjacency_mask", "attention_message_passing", "masked_attention", "random_digraph_edges",
           "chain_with_shortcuts", "min_aggregation_gnn", "bellman_ford_rounds", "dense_weights"]


def adjacency_mask(src, dst, n: int, n_graphs: int | None = None, graph=None) -> np.ndarray:
    """Boolean attention mask ``M[..., dst, src] = True`` (shape ``(n, n)`` or ``(G, n, n)``)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if n_graphs is None:
        M = np.zeros((n, n), dtype=bool)
        M[dst, src] = True
    else:
        M = np.zeros((n_graphs, n, n), dtype=bool)
        M[np.asarray(graph, dtype=np.int64), dst, src] = True
    return M


def attention_message_passing(X, Wq, Wk, Wv, src, dst) -> np.ndarray:
    """GAT-style message passing with dot-product scores, written on the edge list:
    ``e_{ij} = q_i·k_j/√d_k`` for each edge ``j → i``; ``α_{ij}`` = softmax of ``e_{i·}`` over
    the in-edges of ``i`` (scatter-max, scatter-sum by destination); ``h'_i = Σ_{j→i} α_{ij} v_j``
    (scatter-sum). ``X`` is (N, d) — a batch of graphs is passed as their disjoint union with
    node ids offset. Nodes without in-edges get 0. Returns (N, d_v)."""
    X = as_finite_array(X, "X", ndim=2)
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    require(src.shape == dst.shape and src.ndim == 1, "src and dst must be 1-D arrays of equal length")
    N = X.shape[0]
    require(src.size == 0 or (min(src.min(), dst.min()) >= 0 and max(src.max(), dst.max()) < N),
            f"edge endpoints must be node ids in [0, {N})")
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    e = np.einsum("ed,ed->e", Q[dst], K[src]) / np.sqrt(Q.shape[1])
    mx = np.full(N, -np.inf)
    np.maximum.at(mx, dst, e)
    ex = np.exp(e - mx[dst])
    den = np.zeros(N)
    np.add.at(den, dst, ex)
    out = np.zeros((N, V.shape[1]))
    np.add.at(out, dst, (ex / den[dst])[:, None] * V[src])
    return out


def masked_attention(X, Wq, Wk, Wv, mask) -> np.ndarray:
    """Dense softmax attention with a boolean mask (True = attend), ``X`` (..., n, d), ``mask``
    (..., n, n); masked logits are −∞, a fully masked row gives 0. Returns (..., n, d_v)."""
    X = np.asarray(X, dtype=np.float64)
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    S = np.where(mask, S, -np.inf)
    mx = np.max(S, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    E = np.where(mask, np.exp(S - mx), 0.0)
    den = E.sum(-1, keepdims=True)
    return np.divide(E, den, out=np.zeros_like(E), where=den > 0) @ V


def random_digraph_edges(n_graphs: int, n: int, p: float, rng: np.random.Generator, *, self_loops: bool = False,
                         w_range: tuple[float, float] = (0.1, 1.0)):
    """Independent Erdős–Rényi digraphs ``G(n, p)``: returns ``(graph, src, dst, w)`` arrays
    (one entry per edge, no duplicate edges, weights uniform in ``w_range``; self-loops added to
    every node when ``self_loops``)."""
    require(n >= 1 and 0 <= p <= 1, f"need n ≥ 1 and p in [0, 1], got n={n}, p={p}")
    A = rng.random((n_graphs, n, n)) < p
    idx = np.arange(n)
    A[:, idx, idx] = self_loops
    g, s, d = np.nonzero(A)
    return g, s, d, rng.uniform(*w_range, size=g.size)


def chain_with_shortcuts(n: int):
    """A digraph whose shortest path ``0 → n−1`` needs all ``n−1`` hops: edges ``i → i+1`` of
    weight 1 and shortcuts ``i → j`` (``j ≥ i+2``) of weight ``(j − i) + 0.5``. Returns
    ``(src, dst, w)``."""
    i, j = np.triu_indices(n, k=1)
    return i, j, np.where(j == i + 1, 1.0, (j - i) + 0.5)


def dense_weights(n: int, src, dst, w, n_graphs: int | None = None, graph=None) -> np.ndarray:
    """Weight matrix ``W[..., src, dst] = w`` with ``inf`` where there is no edge."""
    shape = (n, n) if n_graphs is None else (n_graphs, n, n)
    W = np.full(shape, np.inf)
    if n_graphs is None:
        W[src, dst] = w
    else:
        W[graph, src, dst] = w
    return W


def bellman_ford_rounds(n: int) -> int:
    """Rounds of relaxation that suffice on ``n`` nodes: ``n − 1`` (without a negative cycle
    reachable from the source, some shortest path is simple: at most ``n − 1`` edges)."""
    return max(n - 1, 0)


def min_aggregation_gnn(n_graphs: int, n: int, graph, src, dst, w, rounds: int, *, aggregate: str = "min",
                        allow_negative: bool = False, D0=None) -> np.ndarray:
    """All-pairs distances by a min-aggregation GNN on a batch of graphs (edge lists):
    state ``D[g, s, v]`` (distance estimate from source ``s`` to node ``v``) starts at 0 on the
    diagonal and ``inf`` elsewhere (Bellman–Ford's initialisation; ``D0`` (G, n, n) replaces it);
    each round node ``v`` receives the messages ``D[g, s, u] + w`` over its in-edges ``u → v`` and
    keeps ``min(D[g, s, v], min of messages)`` (scatter-min). Weights must be non-negative unless
    ``allow_negative`` (then the result is the distance only without a negative cycle reachable
    from the source). ``aggregate="sum"`` replaces the min over messages by their sum (wrong; for
    a mutant). Returns ``D`` of shape (G, n, n); unreachable pairs stay ``inf``."""
    graph, src, dst = (np.asarray(a, dtype=np.int64) for a in (graph, src, dst))
    w = as_finite_array(w, "w", ndim=1)
    require(allow_negative or np.all(w >= 0), "edge weights must be non-negative (or allow_negative=True)")
    require(rounds >= 0, f"rounds must be ≥ 0, got {rounds}")
    D = np.full((n_graphs, n, n), np.inf)
    D[:, np.arange(n), np.arange(n)] = 0.0
    if D0 is not None:
        D = np.array(D0, dtype=np.float64).reshape(n_graphs, n, n)
    flat_dst = graph * n + dst
    for _ in range(rounds):
        msgs = D[graph, :, src] + w[:, None]  # (E, n_sources): D[g, s, u] + w(u→v)
        agg = np.full((n_graphs * n, n), np.inf)  # rows: (graph, receiving node), cols: source
        if aggregate == "min":
            np.minimum.at(agg, flat_dst, msgs)
        else:
            agg[:] = 0.0
            np.add.at(agg, flat_dst, msgs)
        D = np.minimum(D, np.swapaxes(agg.reshape(n_graphs, n, n), 1, 2))
    return D
