"""``tverify new-claim ID``: write a plugin package holding one claim that verifies as written.

The package (in ``--dir``, default the current folder)::

    pyproject.toml               entry point  [project.entry-points."tverify.claims"]
    tverify_<group>/__init__.py
    tverify_<group>/claims.py    the claim: a derivation, a symbolic, a numeric and a second
                                 (torch autograd) numeric check, two mutants
    tests/test_claims.py         uses the ``tverify`` pytest fixture (tverify.assert_claim)
    README.md

The example claim is d/dx log(1 + eˣ) = σ(x) (softplus' = sigmoid): replace the mathematics, keep
the shape. Existing files are never overwritten: if any target exists, nothing is written.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> [p.relative_to(d).as_posix() for p in write_scaffold("mine.example", d)][:2]
['pyproject.toml', 'tverify_mine/__init__.py']
>>> write_scaffold("mine.example", d)
Traceback (most recent call last):
...
proofs_checks.scaffold.ScaffoldError: refusing to overwrite existing files: pyproject.toml, tverify_mine/__init__.py, tverify_mine/claims.py, tests/test_claims.py, README.md
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["ScaffoldError", "files_for", "write_scaffold"]

_ID = re.compile(r"^[a-z][a-z0-9]*\.[a-z0-9_]+$")


class ScaffoldError(ValueError):
    """The id is malformed or a target file exists (one line; the CLI exits 2)."""


_PYPROJECT = '''[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "tverify-{group}"
version = "0.1.0"
description = "tverify claims of group {group}"
requires-python = ">=3.11"
dependencies = ["transformer-theory-verify"]

# tverify imports this module (it registers its claims at import): `tverify list {group}`
[project.entry-points."tverify.claims"]
{group} = "{package}.claims"

[tool.setuptools]
packages = ["{package}"]
'''

_CLAIMS = '''"""Claims of group {group} (written by `tverify new-claim {claim_id}`; edit the mathematics).

The example: d/dx log(1 + e^x) = sigma(x), the derivative of softplus is the logistic sigmoid.
See docs/extending.md of transformer-theory-verify for every name used here.
"""

import numpy as np
import sympy as sp

from proofs_checks.plugin import (Claim, Clause, DerivationBuilder, Hypothesis, Mutant, compare, matches_derivation,
                                  numeric, register, rounding, worst)

EPS = float(np.finfo(float).eps)


# --- the mathematics -------------------------------------------------------------------------

def derive():
    """The SymPy derivation: definition (assumed), differentiation (derived), a simpler equal
    display form (its equality is an obligation), and the obligation 0 < sigma < 1."""
    b = DerivationBuilder("derivative of softplus")
    x = b.fact("args", (sp.Symbol("x", real=True),))[0]
    f = b.define("Softplus", sp.log(1 + sp.exp(x)))
    df = b.step("Differentiate", sp.diff(f, x))
    sigma = 1 / (1 + sp.exp(-x))
    b.obligation("sigma(x) > 0", sigma, "positive")
    b.obligation("1 - sigma(x) > 0", 1 - sigma, "positive")
    b.symbols(x="a real input")
    return b.done(df, display=sigma)


def form(x):
    """The claimed closed form, as a function of the derivation's arguments."""
    return 1.0 / (1.0 + np.exp(-x))


def sample(rng):
    """One point of the arguments, for the symbolic check."""
    return (rng.uniform(-8, 8),)


@numeric("central finite difference of np.logaddexp(0, x)")
def finite_difference(form, ctx):
    h = 1e-5
    x = ctx.rng().uniform(-8, 8, ctx.size(200, 2000))
    fd = (np.logaddexp(0, x + h) - np.logaddexp(0, x - h)) / (2 * h)
    # truncation h^2/6 max|sigma''| (<= 0.1) plus rounding of the difference: 2 eps max|f|/h (|f| <= 8.1)
    tol = 4 * (h ** 2 / 6 * 0.1 + 2 * EPS * 8.1 / h)
    return compare(worst(np.abs(form(x) - fd)), tol,
                   "central differences: 4 (h^2/6 max|sigma''| + 2 eps max|f|/h) at h = 1e-5", sizes={{"points": x.size}})


@numeric("torch autograd of torch.nn.functional.softplus")
def autograd(form, ctx):
    import torch

    x = torch.tensor(ctx.rng().uniform(-8, 8, ctx.size(200, 2000)), dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(torch.nn.functional.softplus(x).sum(), x)
    err = worst(np.abs(form(x.detach().numpy()) - g.numpy()))
    return rounding(err, 8, what="a few float64 operations per value", sizes={{"points": x.numel()}})


# --- the declarations ------------------------------------------------------------------------

CLAIM = register(Claim(
    id="{claim_id}",
    title="The derivative of softplus is the logistic sigmoid",
    statement="",  # rendered from the hypotheses and clauses (docs/statements.md of transformer-theory-verify)
    hypotheses=(
        Hypothesis("x_real", r"x \\in \\mathbb{{R}}", necessary_note="the setting: both sides are defined for real x"),
    ),
    clauses=(
        Clause("derivative", r"\\frac{{d}}{{dx}}\\log(1+e^x)=\\sigma(x)=\\frac{{1}}{{1+e^{{-x}}}}", "derived",
               "every real x (x stays a symbol)", ("derivation", "finite_difference", "autograd"),
               also=(("checked", "x uniform in [-8, 8], 2000 points"),)),
    ),
    source="calculus (replace with your paper / notes)",
    kind="identity",
    form=form,
    derivation=derive,
    checks=(matches_derivation(derive, sample), finite_difference, autograd),
    mutants=(
        Mutant("sign_flip", "sign flip", "sigma(-x)", lambda x: 1.0 / (1.0 + np.exp(x))),
        Mutant("dropped_one", "dropped term", "e^x (the 1 in the denominator dropped)", lambda x: 1.0 / np.exp(-x)),
    ),
))
'''

_TEST = '''"""The claim verifies at several seeds, and numbers (not only SymPy) kill each mutant."""

from {package}.claims import CLAIM


def test_{name}(tverify):
    tverify.assert_claim(CLAIM)


def test_{name}_registered(tverify):
    tverify.assert_claim("{claim_id}", seeds=(0,))
'''

_README = '''# tverify-{group}

Claims of group `{group}` for `tverify` (written by `tverify new-claim {claim_id}`).

    pip install -e .
    tverify run {claim_id} --quick
    tverify mutants {claim_id} --quick
    pytest tests

Edit `{package}/claims.py`: the derivation, the claimed form, the checks and the mutants.
'''


def files_for(claim_id: str) -> dict[str, str]:
    """Relative path -> content of the package for ``claim_id`` (``group.name``)."""
    if not _ID.match(claim_id):
        raise ScaffoldError(f"claim id {claim_id!r} must look like 'group.name' (lowercase letters, digits, _)")
    group, name = claim_id.split(".", 1)
    package = f"tverify_{group}"
    kw = dict(group=group, name=name, claim_id=claim_id, package=package)
    return {
        "pyproject.toml": _PYPROJECT.format(**kw),
        f"{package}/__init__.py": f'"""tverify claims of group {group}."""\n',
        f"{package}/claims.py": _CLAIMS.format(**kw),
        "tests/test_claims.py": _TEST.format(**kw),
        "README.md": _README.format(**kw),
    }


def write_scaffold(claim_id: str, folder: Path | str = ".") -> list[Path]:
    """Write the package into ``folder``; refuse (writing nothing) if any target exists."""
    folder = Path(folder)
    files = files_for(claim_id)
    existing = [rel for rel in files if (folder / rel).exists()]
    if existing:
        raise ScaffoldError("refusing to overwrite existing files: " + ", ".join(existing))
    out = []
    for rel, text in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "x", encoding="utf-8") as fh:  # "x": never overwrite, even in a race
            fh.write(text)
        out.append(p)
    return out
