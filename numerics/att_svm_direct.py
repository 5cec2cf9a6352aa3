"""Att-SVM solves without a modelling layer: many instances of one shape, each point certified.

:class:`DirectAttSVM` solves the Att-SVM of :mod:`numerics.att_svm` for many instances (or token
selections) of one shape (n, T, d), at the cost of the numerical method alone (issue 46: the
reference notebook's ``local_converge`` asks for 270 of them):

* Frobenius norm: the least-distance problem ``min ½‖m‖² s.t. Ãm ≥ 1`` by Lawson and Hanson's
  reduction to non-negative least squares (``min ‖E u − f‖, u ≥ 0`` with ``E = [Ãᵀ; 1ᵀ]``,
  ``f = e_last``; then ``m = −r_{1:p}/r_last`` and the multipliers ``α = −u/r_last`` for the residual
  ``r = E u − f``), solved by SciPy's active-set ``nnls``: exact up to rounding, no iteration
  tolerance; then polished on its support as the solver chain does (:func:`numerics.att_svm._polished_fro`).
* nuclear norm: its dual SDP ``max 1ᵀα s.t. α ≥ 0, ‖Σ α_k Ã_k‖_2 ≤ 1`` handed to Clarabel directly
  (variables α only; the spectral-norm bound as ``[[I, G],[Gᵀ, I]] ⪰ 0``); the primal point is
  read from the PSD block's multiplier ``Z``: ``M = −2 Z_12`` (stationarity of the dual makes
  ``⟨Ã_k, M⟩ = 1 + λ_k ≥ 1``, and ``‖M‖_* ≤ tr Z``, the dual objective, at the optimum).

Both work in the span of the queries (``W = M Bᵀ``, B an orthonormal basis of span{z_i}; see
:class:`numerics.att_svm.CompiledAttSVM`). Every returned ``W`` passes the same certificate as the
solver chain (:func:`numerics.att_svm.certify` on the full (d, d) problem: KKT residuals and the
rigorous gap ≤ ``CERT_TOL``); an instance whose point does not certify, or whose solve fails, falls
back to :func:`numerics.att_svm.solve_att_svm` (the full solver chain, which raises on
infeasibility) and is counted in ``fallbacks``. Clarabel offers no warm start, so each nuclear-norm
solve starts afresh; the problem data are built once per instance in NumPy. (SciPy's optimize
package costs ≈ 0.5 CPU s to import: this module is imported only where Att-SVMs are solved.)
"""

from __future__ import annotations

import math

import clarabel
import numpy as np
import scipy.optimize
import scipy.sparse as sp

from numerics import att_svm as ns
from theory.validation import InputError

__all__ = ["DirectAttSVM", "reduced_rows"]


def reduced_rows(X: np.ndarray, z: np.ndarray, opt) -> tuple[np.ndarray, np.ndarray | None]:
    """The Att-SVM rows ``A`` (K, d, d) of tokens ``opt`` and a basis ``B`` (d, r) of span{z_i}
    (``None`` when the queries are numerically rank-deficient: then no reduction is made)."""
    A = ns.constraint_matrix(X, z, opt)[0]
    n, _, d = X.shape
    if n >= d:
        return A, np.eye(d)
    U, sv, _ = np.linalg.svd(z.T, full_matrices=False)  # (d, n): basis of span{z_i}
    return A, (U if sv[-1] > 1e-12 * sv[0] else None)


class DirectAttSVM:
    """Certified Att-SVM solutions ``W`` for many instances of shape (n, T, d) in one norm
    (``"fro"`` or ``"nuc"``), by the methods of this module; ``fallbacks`` counts the instances that
    went through the full solver chain instead."""

    def __init__(self, n: int, T: int, d: int, norm: str = "fro"):
        if norm not in ("fro", "nuc"):
            raise InputError(f"norm must be 'fro' or 'nuc', got {norm!r}")
        self.norm, self.shape = norm, (n, T, d)
        self.r = min(n, d)
        self.fallbacks = 0
        if norm == "nuc":
            N = d + self.r
            cols = np.array([j for j in range(N) for i in range(j + 1)])
            rows = np.array([i for j in range(N) for i in range(j + 1)])
            # Clarabel's PSD triangle: the upper triangle column by column, off-diagonals times √2
            self._tri = (rows, cols, np.where(rows == cols, 1.0, math.sqrt(2.0)))
            self._eye = np.where(rows == cols, 1.0, 0.0)
            self._off = (rows < d) & (cols >= d)  # the entries of the block (1, 2): rows of M, columns of Mᵀ

    def solve(self, X, z, opt) -> np.ndarray:
        """The certified Att-SVM solution ``W`` (d, d) for tokens ``opt`` of instance ``(X, z)``."""
        X, z, opt = ns.validate_instance(X, z, opt)
        if X.shape != self.shape:
            raise InputError(f"compiled for shape {self.shape}, got {X.shape}")
        A, Bz = reduced_rows(X, z, opt)
        if Bz is not None:
            Ar = A @ Bz  # A_k Bz = (x_o − x_t)(Bzᵀ z_i)ᵀ: (K, d, r)
            with np.errstate(all="ignore"):
                got = self._fro(A, Ar, Bz) if self.norm == "fro" else self._nuc(A, Ar, Bz)
            if got is not None:
                return got
        self.fallbacks += 1
        return ns.solve_att_svm(X, z, opt, norm=self.norm).W

    def _fro(self, A: np.ndarray, Ar: np.ndarray, Bz: np.ndarray) -> np.ndarray | None:
        K = len(Ar)
        E = np.vstack([Ar.reshape(K, -1).T, np.ones((1, K))])
        f = np.zeros(E.shape[0])
        f[-1] = 1.0
        try:
            u, _ = scipy.optimize.nnls(E, f)
        except (RuntimeError, ValueError):  # iteration limit, non-finite data
            return None
        res = E @ u - f
        if not res[-1] < 0:  # r_last = 0: the rows admit no separating W (infeasible); the chain names them
            return None
        duals = -u / res[-1]
        W = (-res[:-1] / res[-1]).reshape(Ar.shape[1:]) @ Bz.T
        cert = ns.certify(W, A, duals, "fro")
        if not cert["passed"]:
            return None
        return ns._polished_fro(A, W, duals, cert, 1e-6, ns.CERT_TOL)[0]

    def _nuc(self, A: np.ndarray, Ar: np.ndarray, Bz: np.ndarray) -> np.ndarray | None:
        K, d, r = Ar.shape
        rows, cols, scale = self._tri
        Bk = np.zeros((K, d + r, d + r))
        Bk[:, :d, d:] = Ar
        Bk[:, d:, :d] = Ar.transpose(0, 2, 1)
        Acon = sp.csc_matrix(np.vstack([-np.eye(K), -(Bk[:, rows, cols] * scale).T]))
        b = np.concatenate([np.zeros(K), self._eye])
        st = clarabel.DefaultSettings()
        st.verbose = False
        for key, val in ns.SOLVER_OPTS["CLARABEL"].items():
            setattr(st, key, val)
        if hasattr(st, "max_threads"):
            st.max_threads = 1  # the callers parallelise over instances
        try:
            sol = clarabel.DefaultSolver(sp.csc_matrix((K, K)), -np.ones(K), Acon, b,
                                         [clarabel.NonnegativeConeT(K), clarabel.PSDTriangleConeT(d + r)], st).solve()
        except Exception:  # noqa: BLE001 - a solver panic or bad data: the full chain decides
            return None
        if str(sol.status) not in ("Solved", "AlmostSolved"):
            return None
        zpsd = np.asarray(sol.z, dtype=np.float64)[K:]
        M = np.zeros((d, r))
        M[rows[self._off], cols[self._off] - d] = -2.0 * zpsd[self._off] / scale[self._off]
        W = M @ Bz.T
        duals = np.asarray(sol.x, dtype=np.float64)
        return W if ns.certify(W, A, duals, "nuc")["passed"] else None
