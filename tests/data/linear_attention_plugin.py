"""A vector-valued plugin claim written from docs/extending.md alone: causal linear attention equals
its RNN recurrence (Katharopoulos et al., "Transformers are RNNs", 2020, section 3.4).

With positive feature maps φ(q_t), φ(k_s) ∈ R^d (here the rows of Q, K) and values v_s ∈ R^{d_v},
causal linear attention is o_t = Σ_{s≤t} (φ(q_t)·φ(k_s)) v_s / Σ_{s≤t} φ(q_t)·φ(k_s); the claim is
that the recurrence S_t = S_{t−1} + φ(k_t) v_tᵀ, z_t = z_{t−1} + φ(k_t), o_t = S_tᵀφ(q_t) / z_tᵀφ(q_t)
computes it. The form is the recurrence; the derivation runs it symbolically at fixed sizes and
shows it equals the masked quadratic form (an obligation). ``tests/test_plugins_features.py``
installs this module as a plugin and runs it; ``build()`` gives the claim object."""

import numpy as np
import sympy as sp

from proofs_checks.plugin import (Claim, Clause, Counterexample, DerivationBuilder, Hypothesis, Mutant, bind, close,
                                  matches_derivation, matrix, numeric, register)

positive = lambda rng, shape: rng.uniform(0.1, 2.0, shape)  # noqa: E731 - features after a positive map
ARGS = (matrix("Q", "T", "d", positive=True, draw=positive), matrix("K", "T", "d", positive=True, draw=positive),
        matrix("V", "T", "dv"))
SIZES = {"T": (1, 3), "d": (1, 2), "dv": (1, 3)}  # d = 1 and d_v = 1 included


def recurrence(Q, K, V, *, normalise=True, causal=True, lag=0, ones=False):  # the claim's form: o_t from S_t, z_t
    S, z, out = np.zeros((Q.shape[1], V.shape[1])), np.zeros(Q.shape[1]), []
    T = len(Q)
    for t in range(T):
        if not causal:  # the mutant "not causal": every key from the start
            S, z = (K.T @ V, K.sum(0)) if t == 0 else (S, z)
        elif t - lag >= 0:
            S, z = S + np.outer(K[t - lag], V[t - lag]), z + K[t - lag]
        num, den = S.T @ Q[t], (z.sum() if ones else z @ Q[t])
        with np.errstate(divide="ignore", invalid="ignore"):  # a mutant's 0/0 is NaN, which fails every check
            out.append(num / den if normalise else num)
    return np.array(out)


def form(Q, K, V):
    return recurrence(Q, K, V)


def derive(T=3, d=2, dv=2):
    """The recurrence run symbolically at fixed T, d, d_v; it equals the masked quadratic form."""
    b = DerivationBuilder("causal linear attention is an RNN")
    Q, K, V = b.fact("args", bind(ARGS, T=T, d=d, dv=dv))
    S, z, rows = sp.zeros(d, dv), sp.zeros(d, 1), []
    for t in range(T):
        S, z = S + K[t, :].T * V[t, :], z + K[t, :].T
        rows.append((Q[t, :] * S) / (Q[t, :] * z)[0, 0])
    rec = b.step("The recurrence: S_t = S_{t-1} + φ(k_t) v_tᵀ, z_t = z_{t-1} + φ(k_t), o_t = S_tᵀφ(q_t) / z_tᵀφ(q_t)",
                 sp.Matrix.vstack(*rows))
    A = b.define("Causal scores: A_ts = φ(q_t)·φ(k_s) for s ≤ t, else 0",
                 sp.Matrix(T, T, lambda t, s: (Q[t, :] * K[s, :].T)[0, 0] if s <= t else 0))
    quad = b.step("Masked quadratic form: (A V)_t / (A 1)_t",
                  sp.Matrix.vstack(*[(A[t, :] * V) / sum(A[t, :]) for t in range(T)]))
    b.obligation("the recurrence equals the masked quadratic form", rec - quad)  # a matrix: zero entry by entry
    b.symbols(T="sequence length", d="feature dimension", dv="value dimension")
    return b.done(rec)


def quadratic_torch(Q, K, V):  # an independent reference: masked quadratic linear attention in torch, float64
    import torch

    q, k, v = (torch.tensor(a, dtype=torch.float64) for a in (Q, K, V))
    A = torch.tril(q @ k.T)
    return ((A @ v) / A.sum(-1, keepdim=True)).numpy()


@numeric("masked quadratic linear attention in torch (float64), T = 1, 7, 64; d, d_v = 1, 4, 16")
def quadratic(form, ctx):
    got, ref, tols = [], [], []
    for T, d, dv in ((1, 1, 1), (7, 4, 1), (64, 16, 4), (64, 1, 16)):
        rng = ctx.rng(T, d, dv)
        Q, K, V = rng.uniform(0.1, 2.0, (T, d)), rng.uniform(0.1, 2.0, (T, d)), rng.standard_normal((T, dv))
        r = quadratic_torch(Q, K, V)
        got.append(np.ravel(form(Q, K, V)))
        ref.append(np.ravel(r))
        # rounding of the running sums (t·d terms) and the division, at the row's largest |v|
        scale = np.abs(V).max() * np.ones_like(r)
        tols.append(np.ravel(64 * (T * d + 2) * np.finfo(float).eps * scale))
    return close(np.concatenate(got), np.concatenate(ref), np.concatenate(tols), "float64 rounding of T·d-term sums per entry")


def mixed_signs(ctx):  # without positive features: T = 2, d = 1, k = (1, -1), q_2 = 1: z_2·q_2 = 0
    q, k = sp.Integer(1), [sp.Integer(1), sp.Integer(-1)]
    den = q * (k[0] + k[1])
    return Counterexample({"T": 2, "d": 1, "k": "(1, -1)", "q_2": 1}, "recurrence",
                          f"z_2ᵀφ(q_2) = {den}: o_2 is 0/0, not an average of the values", violated=den == 0,
                          error=float("inf") if den == 0 else 0.0, tolerance=0.0)


def build(claim_id="zzlin.causal"):
    return Claim(
        id=claim_id, title="Causal linear attention is an RNN", statement="",
        source="Katharopoulos et al., Transformers are RNNs (ICML 2020), section 3.4", kind="identity", form=form,
        derivation=derive, derivation_pure=True,  # SymPy on its own symbols: kept by the sources' fingerprint
        hypotheses=(Hypothesis("positive", r"\phi(q_t), \phi(k_s) \in \mathbb{R}^d_{>0}", counterexample=mixed_signs,
                               layer="symbolic"),),
        clauses=(Clause("recurrence", r"o_t = \frac{S_t^\top \phi(q_t)}{z_t^\top \phi(q_t)} = "
                        r"\frac{\sum_{s \le t} \phi(q_t)^\top \phi(k_s)\, v_s}{\sum_{s \le t} \phi(q_t)^\top \phi(k_s)}",
                        "derived_at", "T = 3, d = 2, d_v = 2 (the obligation); T = 1, 3 and d, d_v = 1, 2, 3 (matches_derivation)",
                        ("derivation", "matches_derivation"), also=(("checked", "T ≤ 64, d, d_v ≤ 16, torch float64"),)),),
        fixed_sizes="the recurrence is unrolled over T steps; SymPy has no symbolic-length sum of outer products here",
        checks=(matches_derivation(derive, ARGS, sizes=SIZES), quadratic),
        mutants=(Mutant("not_causal", "wrong axis", "every key from the start (no mask)",
                        lambda Q, K, V: recurrence(Q, K, V, causal=False)),
                 Mutant("no_normaliser", "dropped term", "S_tᵀφ(q_t) without / z_tᵀφ(q_t)",
                        lambda Q, K, V: recurrence(Q, K, V, normalise=False)),
                 Mutant("one_step_late", "swapped index", "S_t from keys s < t (the update after the output)",
                        lambda Q, K, V: recurrence(Q, K, V, lag=1)),
                 Mutant("sum_normaliser", "wrong formula", "Σ_i z_t,i (not z_tᵀφ(q_t)) as the normaliser",
                        lambda Q, K, V: recurrence(Q, K, V, ones=True)),
                 Mutant("values_doubled", "wrong constant", "2 v_s", lambda Q, K, V: recurrence(Q, K, 2 * V))))


CLAIM = register(build())
