"""Group E: attention as a graph neural network (lecture notes 001, GNN part; Veličković et al. 2018).
Binds numerics/gnn.py to checks against torch's scaled_dot_product_attention and SciPy's
shortest paths, with tolerances and mutants."""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch

from numerics import gnn as ng
from numerics.torch_utils import resolve_device
from proofs_checks.registry import Check, CheckResult, Clause, Counterexample, Hypothesis, Mutant
from proofs_checks.claims._common import declare, exceeds, setting
from proofs_checks.tolerances import EPS
from proofs_checks.comparisons import largest
from proofs_checks.claims._attention_common import Resolved
from theory import gnn as tg


# form: {"message_passing": (X (N,d), Wq, Wk, Wv, src, dst) -> (N, d_v) edge-list attention,
#        "mask": (src, dst, n, n_graphs, graph) -> bool (G, n, n) SDPA attn_mask,
#        "min_plus": (n_graphs, n, graph, src, dst, w, rounds) -> (G, n, n) distances,
#        "rounds": n -> number of rounds}


def _sdpa(X, Wq, Wk, Wv, mask, device):
    t = [torch.as_tensor(X @ W, device=device) for W in (Wq, Wk, Wv)]
    m = None if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool), device=device)
    return torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=m).cpu().numpy()


def _features(rng, G, n, d):
    X = rng.normal(size=(G, n, d))
    Wq, Wk, Wv = (rng.normal(size=(d, d)) / np.sqrt(d) for _ in range(3))
    return X, Wq, Wk, Wv


def _symbolic(form, ctx) -> CheckResult:
    """Node 1 of a 4-node graph receives from {0, 2} (other edges elsewhere): its output from the
    form's message passing equals Σ_j α_j v_j with α the SymPy limit of the −M-masked softmax."""
    n, nb, d = 4, (0, 2), 3
    der = tg.derive_masked_softmax_limit(n, nb)
    f = sp.lambdify([list(der.facts["logits"])], list(der.result), "numpy")
    rng = ctx.rng()
    src, dst = np.array([0, 2, 3, 1, 2]), np.array([1, 1, 0, 3, 3])
    R = Resolved()
    for _ in range(ctx.size(5, 20)):
        X, Wq, Wk, Wv = _features(rng, 1, n, d)
        X = X[0]
        out = form["message_passing"](X, Wq, Wk, Wv, src, dst)
        q, K, V = X[1] @ Wq, X @ Wk, X @ Wv
        alpha = np.asarray(f(list(K @ q / np.sqrt(d))), dtype=float)
        R.pair("node1_vs_sympy", out[1], alpha @ V, div=largest(1.0, float(np.abs(V).max())))
    return R.result(64 * n * d * EPS, f"float64 rounding of softmax over n={n} and d={d} products (64·n·d·eps, "
                    "relative to max(1, max|V|))", seeds=[ctx.seed_for()], sizes={"n": n, "d": d, "neighbours_of_node_1": list(nb)})


def _masked(form, ctx) -> CheckResult:
    """Random directed graphs with self-loops (so no node has an empty neighbourhood): the form's
    edge-list message passing equals ``scaled_dot_product_attention`` with the form's boolean
    mask, and a NumPy masked softmax with the mask built here from the edge list (M[dst, src])."""
    dev = resolve_device(ctx.device)
    rng = ctx.rng()
    G, n, d = ctx.size(6, 16, 64), 9, 4
    g, s, t, _ = ng.random_digraph_edges(G, n, 0.35, rng, self_loops=True)
    X, Wq, Wk, Wv = _features(rng, G, n, d)
    out = form["message_passing"](X.reshape(G * n, d), Wq, Wk, Wv, s + g * n, t + g * n).reshape(G, n, d)
    M_ref = np.zeros((G, n, n), dtype=bool)
    for gi, si, ti in zip(g, s, t):
        M_ref[gi, ti, si] = True  # receiver row ti attends to sender column si
    M = np.asarray(form["mask"](s, t, n, G, g))
    sd = _sdpa(X, Wq, Wk, Wv, M, dev)
    ref = ng.masked_attention(X, Wq, Wk, Wv, M_ref)
    scale = largest(1.0, float(np.abs(ref).max()))
    R = Resolved()
    R.pair("message_passing_vs_sdpa", out, sd, div=scale)
    R.pair("message_passing_vs_masked_softmax", out, ref, div=scale)
    R.prop("mask_entries_wrong", float(np.count_nonzero(M != M_ref)), "count of wrong mask entries")
    tol = 64 * n * d * EPS
    return R.result(tol, f"float64 rounding of softmax over ≤{n} neighbours and d={d} dot products (64·n·d·eps)",
                    seeds=[ctx.seed_for()], sizes={"graphs": G, "n": n, "d": d, "edges": int(g.size)}, device=str(dev))


def _complete(form, ctx) -> CheckResult:
    """On the complete graph (every ordered pair, self-loops included) the form's message passing
    is dense attention: ``scaled_dot_product_attention`` without a mask; the form's mask is all
    True."""
    dev = resolve_device(ctx.device)
    rng = ctx.rng()
    G, n, d = ctx.size(4, 16), 7, 3
    g, s, t = (a.ravel() for a in np.meshgrid(np.arange(G), np.arange(n), np.arange(n), indexing="ij"))
    X, Wq, Wk, Wv = _features(rng, G, n, d)
    out = form["message_passing"](X.reshape(G * n, d), Wq, Wk, Wv, s + g * n, t + g * n).reshape(G, n, d)
    dense = _sdpa(X, Wq, Wk, Wv, None, dev)
    M = np.asarray(form["mask"](s, t, n, G, g))
    R = Resolved()
    R.pair("vs_dense_sdpa", out, dense, div="ref1")
    R.prop("mask_not_all_true", float(np.count_nonzero(~M)), "count of False mask entries on the complete graph")
    tol = 64 * n * d * EPS
    return R.result(tol, f"float64 rounding of softmax over n={n} and d={d} dot products (64·n·d·eps)",
                    seeds=[ctx.seed_for()], sizes={"graphs": G, "n": n, "d": d}, device=str(dev))


def _potential_shifted(G, n, rng):
    """Digraphs with NEGATIVE edges and no negative cycle: weights w ∈ [0.1, 1] shifted by a random
    potential, w'(u→v) = w + p(u) − p(v), p ∈ [0, 2]: every cycle keeps its (positive) weight."""
    g, s, t, w = ng.random_digraph_edges(G, n, 2.5 / n, rng)
    p = rng.uniform(0.0, 2.0, size=(G, n))
    return g, s, t, w + p[g, s] - p[g, t]


def _bellman_ford(form, ctx) -> CheckResult:
    """A min-aggregation GNN run ``form["rounds"](n)`` rounds from Bellman–Ford's initialisation
    equals all-pairs shortest paths from ``scipy.sparse.csgraph.shortest_path`` on (a) sparse
    random weighted digraphs with positive weights (Bellman–Ford and Dijkstra; unreachable pairs
    must be ``inf`` in both) and a chain whose shortest path 0 → n−1 needs all n−1 hops, and
    (b) digraphs with negative edges but no negative cycle (potential-shifted weights; Bellman–Ford
    and Johnson: Dijkstra does not apply)."""
    import scipy.sparse as sps  # imported here: 0.6 CPU s in every process that loads the registry
    from scipy.sparse.csgraph import shortest_path
    rng = ctx.rng()
    G, n = ctx.size(5, 20, 60), 10
    g, s, t, w = ng.random_digraph_edges(G, n, 1.6 / n, rng)
    cs, ct, cw = ng.chain_with_shortcuts(n)
    g = np.concatenate([g, np.full(cs.size, G)])
    s, t, w = np.concatenate([s, cs]), np.concatenate([t, ct]), np.concatenate([w, cw])
    G += 1
    Gn = ctx.size(4, 12, 40)
    gn, sn, tn, wn = _potential_shifted(Gn, n, rng)
    rounds = form["rounds"](n)
    batches = ((G, g, s, t, w, ("BF", "D"), {}), (Gn, gn, sn, tn, wn, ("BF", "J"), {"allow_negative": True}))
    inf_mismatch, unreachable, mine_fin, ref_fin = 0, 0, [], []
    dmax = 1.0
    for Gb, gb, sb, tb, wb, methods, kw in batches:
        D = np.asarray(form["min_plus"](Gb, n, gb, sb, tb, wb, rounds, **kw))
        for k in range(Gb):
            sel = gb == k
            A = sps.csr_matrix((wb[sel], (sb[sel], tb[sel])), shape=(n, n))
            for method in methods:
                R = shortest_path(A, method=method, directed=True)
                inf_mismatch += int(np.count_nonzero(np.isinf(R) != np.isinf(D[k])))
                fin = np.isfinite(R) & np.isfinite(D[k])
                if fin.any():
                    mine_fin.append(D[k][fin])
                    ref_fin.append(R[fin])
                    dmax = largest(dmax, float(np.abs(R[fin]).max()))
            unreachable += int(np.count_nonzero(np.isinf(R)))
    Rs = Resolved()  # finite distances relative to max(1, the largest |finite shortest-path distance|)
    Rs.pair("finite_distance_error", np.concatenate(mine_fin) if mine_fin else np.zeros(0),
            np.concatenate(ref_fin) if ref_fin else np.zeros(0), div=dmax)
    Rs.prop("inf_pattern_mismatches", float(inf_mismatch), "count of pairs reachable in one and unreachable in the other")
    tol = 8 * n * EPS
    return Rs.result(tol, f"sums of ≤{n - 1} weights in a different order (8·n·eps relative); the "
                     "unreachable (inf) pattern must match exactly; resolution relative to scipy's shortest-path distances",
                     seeds=[ctx.seed_for()], sizes={"graphs_positive": G, "graphs_negative_edges": Gn, "n": n,
                                                    "edges": int(g.size + gn.size)},
                     details={"unreachable_pairs": unreachable, "rounds": int(rounds),
                              "negative_edges": int(np.count_nonzero(wn < 0))})


# ---- statement counterexamples (each drops one hypothesis)

_CYCLE = {"src": [0, 1, 2], "dst": [1, 2, 1], "w": [1.0, -3.0, 1.0]}  # 1 → 2 → 1 has weight −2


def _cx_negative_cycle(ctx) -> Counterexample:
    """Without "no negative cycle": edges 0→1 (1), 1→2 (−3), 2→1 (1); after n − 1 = 2 rounds the
    estimate from 0 is (0, 1, −2), but it is not the distance: it violates the Bellman inequality
    d(1) ≤ d(2) + w(2→1), another round lowers it, and scipy's Bellman–Ford reports a negative
    cycle (the true distances to 1 and 2 are −∞)."""
    import scipy.sparse as sps  # imported here: 0.6 CPU s in every process that loads the registry
    from scipy.sparse.csgraph import NegativeCycleError, shortest_path
    n, z = 3, np.zeros(3, dtype=np.int64)
    src, dst, w = (np.asarray(_CYCLE[k]) for k in ("src", "dst", "w"))
    run = lambda r: ng.min_aggregation_gnn(1, n, z, src, dst, w, r, allow_negative=True)[0, 0]  # noqa: E731
    d, d_next = run(ng.bellman_ford_rounds(n)), run(n)
    slack = float(np.max(d[dst] - (d[src] + w)))  # > 0: some edge still relaxes d
    try:
        shortest_path(sps.csr_matrix((w, (src, dst)), shape=(n, n)), method="BF", directed=True)
        scipy_says = "no negative cycle"
    except NegativeCycleError:
        scipy_says = "NegativeCycleError"
    return Counterexample({"n": n, "edges": "0→1 (1), 1→2 (−3), 2→1 (1)", "source": 0}, "bellman_ford",
                          f"d⁽²⁾ = ({d[0]:g}, {d[1]:g}, {d[2]:g}), d⁽³⁾ = ({d_next[0]:g}, {d_next[1]:g}, {d_next[2]:g}); "
                          f"d(1) − (d(2) + w(2→1)) = {slack:g} > 0; scipy Bellman–Ford: {scipy_says}; dist(0, 1) = −∞",
                          violated=slack > 0 and scipy_says == "NegativeCycleError", error=slack, tolerance=0.0,
                          justification="a distance satisfies d(v) ≤ d(u) + w(u→v) on every edge; exact small-integer sums")


def _cx_initialisation(ctx) -> Counterexample:
    """Without Bellman–Ford's initialisation: starting from d⁽⁰⁾ = 0 at every node, n − 1 rounds
    of min-aggregation keep every estimate 0 on a chain with positive weights."""
    import scipy.sparse as sps  # imported here: 0.6 CPU s in every process that loads the registry
    from scipy.sparse.csgraph import shortest_path
    n = 4
    s, t, w = ng.chain_with_shortcuts(n)
    z = np.zeros_like(s)
    D = ng.min_aggregation_gnn(1, n, z, s, t, w, ng.bellman_ford_rounds(n), D0=np.zeros((1, n, n)))[0]
    R = shortest_path(sps.csr_matrix((w, (s, t)), shape=(n, n)), method="BF", directed=True)
    err = float(np.max(np.abs(D[0] - R[0])))  # source 0 reaches every node of the chain
    return exceeds({"n": n, "graph": "chain_with_shortcuts(4)", "source": 0, "d0": "0 at every node"}, "bellman_ford",
                   f"d⁽³⁾(0 → 3) = {D[0, n - 1]:g} but dist(0, 3) = {R[0, n - 1]:g}",
                   error=err, tolerance=0.0, justification="exact: sums of small integers and halves")


_FORM = {"message_passing": ng.attention_message_passing, "mask": ng.adjacency_mask,
         "min_plus": ng.min_aggregation_gnn, "rounds": ng.bellman_ford_rounds}

declare(
    id="gnn.attention_is_gnn",
    fixed_sizes="the masked-softmax identity is derived on a 3-node graph; a graph of symbolic size needs an adjacency relation over symbolic indices, not written yet (n = 7 is checked)",
    title="Graph-masked attention is GAT-style message passing; min-aggregation GNN from Bellman–Ford's initialisation "
          "= shortest paths (no negative cycle)",
    hypotheses=(
        setting("finite_features", r"X\in\mathbb R^{n\times d},\ W_Q,W_K,W_V \text{ finite},\ d_k\ge1",
                "the scores are not defined otherwise"),
        setting("graph", r"A\in\{0,1\}^{n\times n},\ A_{ij}=1\iff j\in N(i)\ (\text{edge }j\to i)",
                "it defines which scores the mask keeps",
                text="the mask is the adjacency: node i attends exactly to its in-neighbours"),
        Hypothesis("nonempty_neighbourhoods", r"N(i)\neq\emptyset\ \forall i\ (\text{e.g. self-loops})",
                   "every node has an in-neighbour",
                   necessary_note="the clause is undefined without it, not false: at a node with no in-neighbour the "
                                  "sum over N(i) is empty and the softmax is 0/0 (NaN); implementations return 0 by "
                                  "convention (empty scatter-sum; torch SDPA's zero row)"),
        Hypothesis("no_negative_cycle", r"w_{uv}\in\mathbb R,\ \text{no negative cycle reachable from the source } s",
                   "no negative cycle reachable from the source", counterexample=_cx_negative_cycle),
        Hypothesis("bf_initialisation", r"d^{(0)}_s=0,\ d^{(0)}_v=+\infty\ (v\neq s)",
                   "Bellman–Ford's initialisation", counterexample=_cx_initialisation),
    ),
    clauses=(
        Clause("gat_masked_softmax",
               r"h'_i=\sum_{j\in N(i)}\frac{e^{q_i\cdot k_j/\sqrt{d_k}}}{\sum_{l\in N(i)}e^{q_i\cdot k_l/\sqrt{d_k}}}v_j"
               r"=\big[S\big(QK^\top/\sqrt{d_k}+\log \mathbb 1[A]\big)V\big]_i",
               "derived_at", "n = 3, N(i) = {0, 2}, symbolic logits (limit M → ∞ of the −M-masked softmax); n = 4 in the "
               "symbolic check", ("derivation", "neighbourhood_softmax_vs_sympy", "masked_attention_vs_sdpa"),
               also=(("checked", "random digraphs with self-loops, n = 9, d = 4, 6/16/64 graphs (quick/default/full), "
                                 "against torch SDPA with the boolean mask"),)),
        Clause("complete_graph_dense", r"A=\mathbf 1\mathbf 1^\top\Rightarrow\text{dense attention}", "checked",
               "n = 7, d = 3, 4/16 graphs (quick/default), against unmasked torch SDPA", ("complete_graph_dense",)),
        Clause("bellman_ford",
               r"d^{(r+1)}_v=\min\big(d^{(r)}_v,\min_{u\to v}d^{(r)}_u+w_{uv}\big),\ d^{(n-1)}=\operatorname{dist}(s,\cdot)",
               "cited", "Bellman (1958); Cormen et al., Introduction to Algorithms, Lemma 24.2 / Thm 24.4 (Bellman–Ford: no "
               "negative-weight cycle reachable from s, d initialised 0 at s and ∞ elsewhere: after |V| − 1 passes d = δ(s, ·))",
               ("min_gnn_vs_shortest_path",),
               also=(("checked", "n = 10: 5/20/60 sparse positive-weight digraphs + a chain needing n − 1 hops, and "
                                 "4/12/40 digraphs with negative edges and no negative cycle (quick/default/full), against "
                                 "scipy Bellman–Ford, Dijkstra (positive) and Johnson (negative edges)"),)),
    ),
    source="lecture notes 001 (Graph Neural Networks; 'Transformers are in essence fully connected GNNs'; GNNs as dynamic "
           "programmers); Veličković et al. (2018) GAT; Xu et al. (2020) algorithmic alignment",
    kind="theorem",
    form=_FORM,
    derivation=lambda: tg.derive_masked_softmax_limit(3, (0, 2)),
    checks=(
        Check("neighbourhood_softmax_vs_sympy", "symbolic", _symbolic, "one node's output vs the SymPy limit of the masked softmax"),
        Check("masked_attention_vs_sdpa", "numeric", _masked, "edge-list message passing vs SDPA with bool mask", uses_device=False),
        Check("complete_graph_dense", "numeric", _complete, "complete graph vs unmasked SDPA", uses_device=False),
        Check("min_gnn_vs_shortest_path", "numeric", _bellman_ford, "min-aggregation GNN vs scipy shortest_path (BF, Dijkstra)"),
    ),
    mutants=(
        Mutant("mask_transposed", "swapped index", "attention mask M[src, dst] (sender attends to receiver)",
               dict(_FORM, mask=lambda s, t, n, G=None, g=None: np.swapaxes(ng.adjacency_mask(s, t, n, G, g), -1, -2))),
        Mutant("messages_reversed", "swapped index", "messages sent along reversed edges",
               dict(_FORM, message_passing=lambda X, Wq, Wk, Wv, s, t: ng.attention_message_passing(X, Wq, Wk, Wv, t, s))),
        Mutant("scores_unscaled", "dropped term", "scores q_i·k_j without the 1/√d_k scale",
               dict(_FORM, message_passing=lambda X, Wq, Wk, Wv, s, t: ng.attention_message_passing(
                   X, Wq * np.sqrt(np.asarray(Wq).shape[1]), Wk, Wv, s, t))),
        Mutant("rounds_n_minus_2", "wrong constant", "n − 2 rounds of relaxation", dict(_FORM, rounds=lambda n: n - 2)),
        Mutant("sum_aggregation", "wrong formula", "sum instead of min over incoming messages",
               dict(_FORM, min_plus=lambda *a, **k: ng.min_aggregation_gnn(*a, aggregate="sum", **k))),
    ),
    notes="Scores are dot products q_i·k_j/√d_k (the transformer case); GAT's LeakyReLU(aᵀ[Wh_i‖Wh_j]) scores "
          "are another choice of a(h_i, h_j) in the lecture notes' formula. The earlier statement 'd⁽ⁿ⁻¹⁾ = dist' omitted "
          "the initialisation and the no-negative-cycle condition: with edges 0→1 (1), 1→2 (−3), 2→1 (1) two rounds give "
          "(0, 1, −2) while the distances are −∞ (counterexample no_negative_cycle). Zero-weight edges are avoided "
          "because SciPy reads explicit zeros in dense input as missing edges; unreachable pairs are inf in both.",
)
