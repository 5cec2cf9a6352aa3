"""A plugin claim written from docs/extending.md alone (the issue's example): the entropy of
p = softmax(βl) has dH/dβ = −β Var_p(l) ≤ 0. ``build(wrong=True)`` states the false variant
dH/dβ = −Var_p(l). Nothing is registered at import; tests register what they build."""

import numpy as np
import sympy as sp

from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, compare, matches_derivation, numeric, worst

K = 3


def claimed(beta, *l):
    l = np.array(l, dtype=float)
    p = np.exp(beta * l - np.max(beta * l))
    p /= p.sum()
    return -beta * float(p @ (l - p @ l) ** 2)


def _sample(rng):
    return (rng.uniform(0.1, 3), *rng.normal(size=K))


def _derive(wrong: bool):
    def derive():
        b = DerivationBuilder("dH/dβ for p = softmax(βl)")
        beta = sp.Symbol("beta", positive=True)
        l = sp.symbols(f"l1:{K + 1}", real=True)
        b.fact("args", (beta, *l))
        Z = sum(sp.exp(beta * li) for li in l)
        p = [sp.exp(beta * li) / Z for li in l]
        H = b.define("Entropy of p = softmax(βl)", -sum(pi * sp.log(pi) for pi in p))
        dH = b.step("Differentiate in β", sp.diff(H, beta))
        mean = sum(pi * li for pi, li in zip(p, l))
        var = sum(pi * (li - mean) ** 2 for pi, li in zip(p, l))
        stated = -var if wrong else -beta * var
        b.obligation("dH/dβ equals the stated form", dH - stated)
        b.obligation("Var_p(l) ≥ 0", var, "nonnegative")
        return b.done(dH, display=None if wrong else stated)
    return derive


@numeric("central finite difference of the entropy")
def finite_difference(form, ctx):
    rng, h = ctx.rng(), 1e-4
    errs = []
    for _ in range(ctx.size(20, 200)):
        beta, *l = _sample(rng)

        def H(b):
            z = b * np.array(l)
            p = np.exp(z - z.max())
            p /= p.sum()
            return -float(p @ np.log(p))

        errs.append(abs(form(beta, *l) - (H(beta + h) - H(beta - h)) / (2 * h)))
    # truncation h²/6·|H'''| (|H'''| ≤ 10 at these sizes) plus rounding 2·eps·|H|/h, |H| ≤ log K
    return compare(worst(errs), 10 * h ** 2 / 6 + 2 * 2.2e-16 * np.log(K) / h,
                   "h²/6·max|H'''| + 2·eps·log K/h at h = 1e-4", sizes={"points": len(errs)})


def build(wrong: bool = False, claim_id: str = "ent.softmax_entropy_slope") -> Claim:
    derive = _derive(wrong)
    form = (lambda b, *l: claimed(b, *l) / b) if wrong else claimed
    return Claim(
        id=claim_id, title="Entropy of softmax(βl) decreases in β at rate β Var_p(l)",
        statement=r"\frac{dH}{d\beta}=-\mathrm{Var}_p(l)" if wrong else r"\frac{dH}{d\beta}=-\beta\,\mathrm{Var}_p(l)\le 0",
        source="an exercise", kind="identity", form=form, derivation=derive,
        checks=(matches_derivation(derive, _sample), finite_difference),
        mutants=(Mutant("beta_squared", "wrong constant", "−β² Var_p(l)", lambda b, *l: b * form(b, *l)),
                 Mutant("plus", "sign flip", "+β Var_p(l)", lambda b, *l: -form(b, *l))))
