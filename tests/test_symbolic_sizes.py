"""The symbolic-size layer (theory.sizes, theory.gaussian) against brute force at explicit sizes.

(a) exact: every symbolic-size result is instantiated at explicit sizes and compared, entry by
entry and with symbolic entries, with a computation that does not use the symbolic derivation:
explicit softmax differentiation, explicit block products, ranks of explicit matrices, and for
Gaussian moments two brute forces at d = 1..4: a sum over all pairings of explicit indices (with
symbolic Λ entries ``l_ij``) and, independently of Isserlis, polynomial Gaussian integration
after ``Λ = C Cᵀ`` (``x = C z``, monomial moments ``E z^α = Π (α_k − 1)!!`` of independent
standard normals, ``C`` lower-triangular symbols).

(b) Monte Carlo (NumPy, fixed seed, 200 000 samples, d = 3, random SPD Λ and random A, B):
every entry within 4 standard errors estimated from the samples.
"""

from __future__ import annotations

import itertools
from collections import Counter
from functools import lru_cache

import numpy as np
import pytest
import sympy as sp

from theory import gaussian as g
from theory import sizes as z

DIMS = (1, 2, 3, 4)


# ------------------------------------------------------------------------------------------------
# brute-force machinery (independent of theory.gaussian)


def sym_cov(dim):
    """Symmetric matrix of symbols l_ij."""
    return sp.Matrix(dim, dim, lambda i, j: sp.Symbol(f"l_{min(i, j)}{max(i, j)}"))


def sym_mat(name, rows, cols=None):
    cols = rows if cols is None else cols
    return sp.Matrix(rows, cols, lambda i, j: sp.Symbol(f"{name}_{i}{j}"))


def chol_sym(dim):
    return sp.Matrix(dim, dim, lambda i, j: sp.Symbol(f"c_{i}{j}") if j <= i else 0)


def brute_pairings(idx):
    """Every perfect pairing of a tuple of explicit positions (written out, not theory.gaussian)."""
    if not idx:
        yield ()
        return
    first, rest = idx[0], idx[1:]
    for k in range(len(rest)):
        for p in brute_pairings(rest[:k] + rest[k + 1:]):
            yield ((first, rest[k]),) + p


def wick_explicit(indices, cov):
    if len(indices) % 2:
        return sp.Integer(0)
    return sp.Add(*[sp.Mul(*[cov[u, v] for u, v in P]) for P in brute_pairings(tuple(indices))])


def _double_factorial_moment(k):
    return 0 if k % 2 else sp.factorial2(k - 1)


@lru_cache(maxsize=None)
def std_normal_moment(indices):
    """E[z_{i1}⋯z_{ik}] for independent standard normals: Π over distinct indices of (m − 1)!!."""
    out = sp.Integer(1)
    for m in Counter(indices).values():
        out *= _double_factorial_moment(m)
    return out


def std_moment_table(dim, order):
    """Nonzero E[z_i z_j …] of the given order, as {index tuple: value}."""
    return {ix: std_normal_moment(ix) for ix in itertools.product(range(dim), repeat=order)
            if std_normal_moment(ix) != 0}


def lam(dim):
    return sp.MatrixSymbol("Lambda", dim, dim)


D_, N_ = sp.symbols("d N", integer=True, positive=True)
L_ = sp.MatrixSymbol("Lambda", D_, D_)
A_ = sp.MatrixSymbol("A", D_, D_)
B_ = sp.MatrixSymbol("B", D_, D_)


def inst(expr, dim, n=None, **vals):
    sizes = {D_: dim}
    if n is not None:
        sizes[N_] = n
    return z.instantiate(expr, sizes, vals)


def is_zero(M):
    M = sp.Matrix(M) if isinstance(M, sp.MatrixBase) else sp.Matrix([M])
    return all(sp.expand(e) == 0 for e in M)


# ------------------------------------------------------------------------------------------------
# (a) theory.sizes at explicit sizes


@pytest.mark.parametrize("T", [1, 2, 3, 4])
def test_softmax_jacobian_symbolic_T_matches_explicit(T):
    D = z.derive_softmax_jacobian()
    S, t, s, Tsym = (D.facts[k] for k in ("S", "t", "s", "T"))
    l = sp.symbols(f"l_1:{T + 1}", real=True)
    p = [sp.exp(li) / sum(sp.exp(lj) for lj in l) for li in l]
    for tv, sv in itertools.product(range(1, T + 1), repeat=2):
        sym = D.result.subs({t: tv, s: sv}).subs({S[tv]: p[tv - 1], S[sv]: p[sv - 1]})
        assert sp.simplify(sym - sp.diff(p[tv - 1], l[sv - 1])) == 0
    assert z.derive_softmax_sum().result == 1
    assert sp.simplify(sum(p) - 1) == 0


def test_convex_combination_symbolic_T_matches_explicit():
    D = z.derive_convex_combination()
    T = 3
    l = sp.symbols(f"l_1:{T + 1}", real=True)
    v = sp.symbols(f"v_1:{T + 1}", real=True)
    p = [sp.exp(li) / sum(sp.exp(lj) for lj in l) for li in l]
    o = sum(pi * vi for pi, vi in zip(p, v))
    S, vb = sp.IndexedBase("S", positive=True), sp.IndexedBase("v", real=True)
    s, Tsym = sp.Symbol("s", integer=True), sp.Symbol("T", integer=True, positive=True)
    for sv in range(1, T + 1):
        sym = D.result.subs({s: sv, Tsym: T}).doit()
        sym = sym.subs({S[k + 1]: p[k] for k in range(T)}).subs({vb[k + 1]: v[k] for k in range(T)})
        assert sp.simplify(sym - sp.diff(o, l[sv - 1])) == 0
    assert D.facts["shift"] == 0
    assert all(r.passed for r in D.check_obligations())


def test_index_sum_helpers():
    N = sp.Symbol("N", integer=True, positive=True)
    i, j = sp.symbols("i j", integer=True)
    f = sp.IndexedBase("f")
    assert z.eval_index_sums(sp.Sum(sp.KroneckerDelta(i, j) * f[i], (i, 1, N)), {j: (1, N)}) == f[j]
    # out of range: j ∈ [N + 1, 2N] never meets i ∈ [1, N]
    assert z.eval_index_sums(sp.Sum(sp.KroneckerDelta(i, j) * f[i], (i, 1, N)), {j: (N + 1, 2 * N)}) == 0
    # undecidable without a range: the Piecewise stays
    assert z.eval_index_sums(sp.Sum(sp.KroneckerDelta(i, j) * f[i], (i, 1, N))).has(sp.Piecewise)
    for n in (1, 2, 5):
        assert sp.factor(z.eval_index_sums(sp.Sum(1 - sp.KroneckerDelta(i, j), (i, 1, N), (j, 1, N)))).subs(N, n) \
            == sum(1 for a in range(n) for b in range(n) if a != b)


@pytest.mark.parametrize("sizes", [(2, 2, (1, 2, 3)), (1, 3, (2, 1, 1)), (3, 1, (1, 1, 2))])
def test_multihead_concat_at_explicit_widths(sizes):
    n, m, ks = sizes
    D = z.derive_multihead_concat(3)
    sym = D.facts["sizes"]
    sub = dict(zip(sym, (n, m) + ks))
    cat = D.facts["concat"].subs(sub).as_explicit()
    WO = D.facts["W_O"].subs(sub).as_explicit()
    assert cat.shape == (n, sum(ks)) and WO.shape == (sum(ks), m)
    assert is_zero(z.instantiate(D.result, sub) - cat * WO)
    assert all(r.passed for r in D.check_obligations())


@pytest.mark.parametrize("m,n,r", [(4, 5, 1), (4, 5, 2), (6, 3, 2), (3, 3, 3), (2, 5, 4)])
def test_lora_rank_bound_at_explicit_sizes(m, n, r):
    D = z.derive_lora_rank_bound()
    ms, ns, rs = D.facts["sizes"]
    bound = D.result.subs({ms: m, ns: n, rs: r})
    rng = np.random.default_rng(m * 100 + n * 10 + r)
    B = sp.Matrix(rng.integers(-3, 4, (m, r)))
    A = sp.Matrix(rng.integers(-3, 4, (r, n)))
    W0 = sp.Matrix(rng.integers(-3, 4, (m, n)))
    assert (B * A).rank() <= bound <= r
    assert (W0 + B * A).rank() <= min(W0.rank() + r, m, n)
    assert all(o.passed for o in D.check_obligations())


@pytest.mark.parametrize("d,N", [(1, 1), (2, 3), (3, 2), (4, 4)])
def test_gd_step_matrix_expression_at_explicit_sizes(d, N):
    D = z.derive_gd_step()
    ds, Ns = D.facts["sizes"]
    eta = D.facts["eta"]
    w, X, y = sym_mat("w", 1, d), sym_mat("X", d, N), sym_mat("y", 1, N)
    loss = sum((sum(w[0, k] * X[k, i] for k in range(d)) - y[0, i]) ** 2 for i in range(N)) / (2 * N)
    brute = sp.Matrix(1, d, lambda _, j: -eta * sp.diff(loss, w[0, j]))
    for expr in (D.result, D.facts["matrix_route"], D.facts["target"]):
        got = z.instantiate(expr, {ds: d, Ns: N}, {"w": w, "X": X, "y": y})
        assert is_zero(got - brute)
    sum_form = -eta / N * sum((((w * X[:, i])[0, 0] - y[0, i]) * X[:, i].T for i in range(N)), sp.zeros(1, d))
    assert is_zero(brute - sum_form)


# ------------------------------------------------------------------------------------------------
# (a) Gaussian moments: pairing brute force (d = 1..4) and Λ = C Cᵀ integration (d = 1..4)


@pytest.mark.parametrize("dim", DIMS)
def test_moments_against_explicit_pairings(dim):
    Lm, A, B = sym_cov(dim), sym_mat("a", dim), sym_mat("b", dim)
    vals = {"Lambda": Lm, "A": A, "B": B}
    assert is_zero(inst(g.second_moment(L_), dim, Lambda=Lm) - sp.Matrix(dim, dim, lambda i, j: wick_explicit((i, j), Lm)))
    four = sp.Matrix(dim, dim, lambda a, b: sum(A[p, q] * wick_explicit((a, p, q, b), Lm)
                                                 for p in range(dim) for q in range(dim)))
    assert is_zero(inst(g.fourth_moment_sandwich(L_, A_), dim, **vals) - four)
    qf = sum(A[a, b] * B[c, e] * wick_explicit((a, b, c, e), Lm) for a, b, c, e in itertools.product(range(dim), repeat=4))
    assert is_zero(inst(g.quadratic_forms_moment(L_, A_, B_), dim, **vals) - qf)


@pytest.mark.parametrize("dim", DIMS)
def test_moments_by_gaussian_integration(dim):
    """x = C z with z standard normal: every moment from E z^α = Π (α_k − 1)!!, no pairings."""
    C = chol_sym(dim)
    Lm = C * C.T
    A, B = sym_mat("a", dim), sym_mat("b", dim)
    if dim == 4:  # symbolic Λ entries throughout; A, B symbolic at d ≤ 3 (and at d = 4 in the pairing test)
        rng = np.random.default_rng(4)
        A, B = sp.Matrix(rng.integers(-3, 4, (4, 4))), sp.Matrix(rng.integers(-3, 4, (4, 4)))
    vals = {"Lambda": Lm, "A": A, "B": B}
    m2 = std_moment_table(dim, 2)
    m4 = std_moment_table(dim, 4)
    second = sp.zeros(dim, dim)
    for (i, j), v in m2.items():
        second += v * C[:, i] * C[:, j].T
    assert is_zero(inst(g.second_moment(L_), dim, Lambda=Lm) - second)
    # x xᵀ A x xᵀ = C z zᵀ (CᵀAC) z zᵀ Cᵀ
    P = C.T * A * C
    inner = sp.zeros(dim, dim)
    for (i, j, k, l), v in m4.items():
        inner[i, l] += v * P[j, k]
    assert is_zero(inst(g.fourth_moment_sandwich(L_, A_), dim, **vals) - C * inner * C.T)
    Q = C.T * B * C
    qf = sum(v * P[i, j] * Q[k, l] for (i, j, k, l), v in m4.items())
    assert is_zero(inst(g.quadratic_forms_moment(L_, A_, B_), dim, **vals) - qf)


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_wishart_against_brute_force(dim, n):
    """E[Λ̂AΛ̂] by a sum over every sample pair (i, j): pairings within a sample when i = j,
    product of second moments (independence) when i ≠ j."""
    Lm, A = sym_cov(dim), sym_mat("a", dim)
    terms = {(a, b): [] for a, b in itertools.product(range(dim), repeat=2)}
    for i, j in itertools.product(range(n), repeat=2):
        for a, b in itertools.product(range(dim), repeat=2):
            for p, q in itertools.product(range(dim), repeat=2):
                e = wick_explicit((a, p, q, b), Lm) if i == j else Lm[a, p] * Lm[q, b]
                terms[a, b].append(A[p, q] * e)
    brute = sp.Matrix(dim, dim, lambda a, b: sp.Add(*terms[a, b])) / n**2
    got = inst(g.wishart_sandwich(L_, A_, N_), dim, n, Lambda=Lm, A=A)
    assert is_zero(got - brute)
    assert is_zero(got - (Lm * A * Lm + (Lm * A.T * Lm + (A * Lm).trace() * Lm) / n))


def test_wishart_derivation_counts_and_obligations():
    D = g.derive_wishart_sandwich()
    d, N = D.facts["sizes"]
    assert D.facts["n_same"] == N and sp.expand(D.facts["n_cross"] - N * (N - 1)) == 0
    assert all(r.passed for r in D.check_obligations())
    assert any(s.how == "assumed" for s in D.steps) and D.result_derived


def test_tidy_does_not_hide_wrong_forms():
    """The residuals the obligations use are not trivially zero: each wrong form leaves a term."""
    assert g.tidy(g.wishart_sandwich(L_, A_, N_) - (L_ * A_ * L_ + L_ * A_.T * L_ / N_), [L_]) != sp.ZeroMatrix(D_, D_)
    assert g.tidy(g.fourth_moment_sandwich(L_, A_) - (2 * L_ * A_ * L_ + sp.Trace(A_ * L_) * L_), [L_]) \
        != sp.ZeroMatrix(D_, D_)
    qf = g.quadratic_forms_moment(L_, A_, B_)
    assert g.tidy(qf - sp.Trace(A_ * L_) * sp.Trace(B_ * L_) - 2 * sp.Trace(A_ * L_ * B_ * L_), [L_]) != 0
    # tr(AΛBᵀΛ) = tr(ΛBΛAᵀ) (transpose) = tr(BΛAᵀΛ) (rotation): one representative
    assert g.tidy(sp.Trace(A_ * L_ * B_.T * L_) - sp.Trace(B_ * L_ * A_.T * L_), [L_]) == 0
    grad = g.zfb_loss_gradient(L_, B_, N_)
    assert g.tidy(grad - (L_ * L_ * B_ * L_ - L_ * L_), [L_]) != sp.ZeroMatrix(D_, D_)


# ------------------------------------------------------------------------------------------------
# (a) ZFB ingredients at d = 1..3 against brute-force expectations over (w, x_1..x_N, x_q)


def zfb_brute(dim, n, Lm, B):
    """½E(ŷ − wᵀx_q)², E[hhᵀ], E[hwᵀ] with ŷ = hᵀBx_q, h = (1/N)Σ_i (wᵀx_i) x_i, written out
    over every explicit index; w, each x_i and x_q independent (Isserlis within each)."""
    Iw = sp.eye(dim)
    r = range(dim)

    def ex4(i, j, k1, a1, k2, a2):  # E[x_i,k1 x_i,a1 x_j,k2 x_j,a2]
        return wick_explicit((k1, a1, k2, a2), Lm) if i == j else Lm[k1, a1] * Lm[k2, a2]

    hh_terms = {(a1, a2): [] for a1, a2 in itertools.product(r, r)}
    yy_terms = []
    for i, j in itertools.product(range(n), repeat=2):
        for k1, k2 in itertools.product(r, r):
            if Iw[k1, k2] == 0:
                continue
            for a1, a2 in itertools.product(r, r):
                m = Iw[k1, k2] * ex4(i, j, k1, a1, k2, a2)
                hh_terms[a1, a2].append(m)
                bl = sum(B[a1, c1] * B[a2, c2] * Lm[c1, c2] for c1, c2 in itertools.product(r, r))
                yy_terms.append(m * bl)
    hh = sp.Matrix(dim, dim, lambda a1, a2: sp.Add(*hh_terms[a1, a2])) / n**2
    yy = sp.Add(*yy_terms) / n**2
    hw = sp.zeros(dim, dim)
    for i in range(n):
        for k, a, m_ in itertools.product(r, r, r):
            hw[a, m_] += Iw[k, m_] * Lm[k, a]
    hw = hw / n
    cross = sum(B[a, c] * hw[a, m_] * Lm[c, m_] for a, c, m_ in itertools.product(r, r, r))  # E[ŷ wᵀx_q]
    tt = sum(Iw[m1, m2] * Lm[m1, m2] for m1, m2 in itertools.product(r, r))  # E[(wᵀx_q)²]
    return sp.expand((yy - 2 * cross + tt) / 2), hh, hw


@pytest.mark.parametrize("dim,n", [(1, 1), (1, 3), (2, 2), (3, 2)])
def test_zfb_loss_and_moments_against_brute_force(dim, n):
    Lm, B = sym_cov(dim), sym_mat("b", dim)
    loss, hh, hw = zfb_brute(dim, n, Lm, B)
    mom = g.zfb_moments(L_, N_)
    assert is_zero(inst(mom["hh"], dim, n, Lambda=Lm) - hh)
    assert is_zero(inst(mom["hw"], dim, n, Lambda=Lm) - hw)
    Gam = inst(g.zfb_gamma(L_, N_), dim, n, Lambda=Lm)
    assert is_zero(hh - Lm * Gam)
    got = inst(g.zfb_population_loss(L_, B_, N_), dim, n, Lambda=Lm, B=B)
    assert sp.expand(got - loss) == 0
    grad = inst(g.zfb_loss_gradient(L_, B_, N_), dim, n, Lambda=Lm, B=B)
    assert is_zero(grad - sp.Matrix(dim, dim, lambda i, j: sp.diff(loss, B[i, j])))
    assert is_zero(grad - (Lm * Gam * B * Lm - Lm * Lm))
    assert sp.Poly(loss, *B).total_degree() == 2


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_zfb_stationary_point_is_gamma_inverse(dim):
    rng = np.random.default_rng(dim)
    M = sp.Matrix(rng.integers(-2, 3, (dim, dim)))
    Lm = M * M.T + sp.eye(dim)  # rational SPD
    n = 3
    Gam = inst(g.zfb_gamma(L_, N_), dim, n, Lambda=Lm)
    grad = inst(g.zfb_loss_gradient(L_, B_, N_), dim, n, Lambda=Lm, B=Gam.inv())
    assert is_zero(grad)
    B = sym_mat("b", dim)
    loss, _, _ = zfb_brute(dim, n, Lm, B)
    sol = sp.solve([sp.diff(loss, x) for x in B], list(B), dict=True)
    assert len(sol) == 1 and is_zero(B.subs(sol[0]) - Gam.inv())
    D = g.derive_zfb_loss()
    assert D.result["B_star"] == D.facts["G"].I and D.facts["degree_in_B"] == 2
    assert all(r.passed for r in D.check_obligations())


# ------------------------------------------------------------------------------------------------
# (b) Monte Carlo, d = 3, 200 000 samples


NS = 200_000
SE_BOUND = 4.0


def _within(samples, exact):
    """Mean of ``samples`` (axis 0) within SE_BOUND standard errors (from the samples) of ``exact``."""
    mean = samples.mean(axis=0)
    se = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    dev = np.abs(mean - exact) / np.maximum(se, 1e-300)
    assert np.all(dev <= SE_BOUND), f"max deviation {dev.max():.2f} SE\nmean {mean}\nexact {exact}"
    return dev.max()


def _num(expr, n=None, **vals):
    return np.array(sp.Matrix(inst(expr, 3, n, **{k: sp.Matrix(v) for k, v in vals.items()})).evalf(), dtype=float) \
        if isinstance(expr, sp.MatrixExpr) else float(inst(expr, 3, n, **{k: sp.Matrix(v) for k, v in vals.items()}))


@pytest.fixture(scope="module")
def mc():
    rng = np.random.default_rng(20240534)
    M = rng.normal(size=(3, 3))
    Lam = M @ M.T / 3 + 0.5 * np.eye(3)
    A, B = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    C = np.linalg.cholesky(Lam)
    return rng, Lam, C, A, B


def test_monte_carlo_single_sample_moments(mc):
    rng, Lam, C, A, B = mc
    x = rng.standard_normal((NS, 3)) @ C.T
    xx = x[:, :, None] * x[:, None, :]
    _within(xx, _num(g.second_moment(L_), Lambda=Lam))
    qa = np.einsum("ni,ij,nj->n", x, A, x)
    qb = np.einsum("ni,ij,nj->n", x, B, x)
    _within(xx * qa[:, None, None], _num(g.fourth_moment_sandwich(L_, A_), Lambda=Lam, A=A))
    _within(qa * qb, _num(g.quadratic_forms_moment(L_, A_, B_), Lambda=Lam, A=A, B=B))


def test_monte_carlo_wishart_and_zfb(mc):
    rng, Lam, C, A, B = mc
    n = 3
    X = np.einsum("ij,snj->sni", C, rng.standard_normal((NS, n, 3)))  # (samples, N, d)
    Lh = np.einsum("sna,snb->sab", X, X) / n
    _within(Lh @ A @ Lh, _num(g.wishart_sandwich(L_, A_, N_), n, Lambda=Lam, A=A))
    w = rng.standard_normal((NS, 3))
    xq = rng.standard_normal((NS, 3)) @ C.T
    h = np.einsum("sab,sb->sa", Lh, w)  # h = Λ̂ w = (1/N) Σ_i (wᵀx_i) x_i
    assert np.allclose(h[0], sum((w[0] @ X[0, i]) * X[0, i] for i in range(n)) / n)
    mom = g.zfb_moments(L_, N_)
    _within(h[:, :, None] * h[:, None, :], _num(mom["hh"], n, Lambda=Lam))
    _within(h[:, :, None] * w[:, None, :], _num(mom["hw"], n, Lambda=Lam))
    resid = np.einsum("sa,ab,sb->s", h, B, xq) - np.einsum("sa,sa->s", w, xq)
    _within(0.5 * resid**2, _num(g.zfb_population_loss(L_, B_, N_), n, Lambda=Lam, B=B))
    # per-sample gradient of ½(hᵀBx_q − wᵀx_q)² in B is (ŷ − wᵀx_q) h x_qᵀ
    _within(resid[:, None, None] * h[:, :, None] * xq[:, None, :],
            _num(g.zfb_loss_gradient(L_, B_, N_), n, Lambda=Lam, B=B))
