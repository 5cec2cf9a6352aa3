"""``tverify new-claim ID``: write a plugin package holding one claim that verifies as written.

The package (in ``--dir``, default the current folder)::

    pyproject.toml               entry point  [project.entry-points."tverify.claims"]
    tverify_<group>/__init__.py
    tverify_<group>/claims.py    the claim: vector arguments (q, k in R^d), a SymPy derivation at
                                 symbolic angle, matches_derivation at d = 2, 4, 6, a NumPy check, a
                                 torch comparison, a trained check (convergence guard), two
                                 hypotheses (one with its counterexample), a clause, three mutants
    tests/test_claims.py         uses the ``tverify`` pytest fixture (tverify.assert_claim)
    README.md

The example claim is the RoPE relative-position identity ⟨R_m q, R_n k⟩ = ⟨q, R_{n−m} k⟩ (the worked
example of docs/extending.md): replace the mathematics, keep the shape. Existing files are never overwritten: if any target exists, nothing is written.

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

import contextlib
import errno
import os
from pathlib import Path

from proofs_checks.errors import id_problem

__all__ = ["ScaffoldError", "files_for", "write_scaffold", "check_id_free"]



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

_CLAIMS = r'''import numpy as np
import sympy as sp
from scipy.linalg import block_diag

from proofs_checks.plugin import (Claim, Clause, Counterexample, DerivationBuilder, Hypothesis, Mutant, bind, close,
                                  matches_derivation, numeric, register, scalar, train, trained, vector)

ARGS = (vector("q", "d"), vector("k", "d"), scalar("m"), scalar("n"))  # q, k in R^d (d even); positions m, n


def rotate(x, p, base=10000.0):  # R_p x: plane (2i, 2i+1) turned by p * base^(-2i/d); batched over leading axes
    a = np.asarray(p, float)[..., None] * base ** (-np.arange(0, x.shape[-1], 2) / x.shape[-1])
    x0, x1 = x[..., 0::2], x[..., 1::2]
    a = np.broadcast_to(a, np.broadcast_shapes(a.shape, x0.shape))
    return np.stack([np.cos(a) * x0 - np.sin(a) * x1, np.sin(a) * x0 + np.cos(a) * x1], -1).reshape(*a.shape[:-1], -1)


def score(q, k, p, base=10000.0):  # <q, R_p k>
    return np.sum(q * rotate(k, p, base), -1)


def form(q, k, m, n):  # the claim: the score of positions m, n is <q, R_{n-m} k>
    return score(q, k, np.subtract(n, m))


def derive(d=4):
    """One plane at a symbolic angle theta (so: every even d, any frequencies), then the sum over d/2 planes."""
    b, rot = DerivationBuilder("RoPE scores are relative"), lambda a: sp.Matrix([[sp.cos(a), -sp.sin(a)], [sp.sin(a), sp.cos(a)]])
    q, k, m, n = b.fact("args", bind(ARGS, d=d))
    t, x, y = sp.Symbol("theta", real=True), sp.Matrix(sp.symbols("x:2", real=True)), sp.Matrix(sp.symbols("y:2", real=True))
    one = b.define("One plane: <R(m theta) x, R(n theta) y>", ((rot(m * t) * x).T * rot(n * t) * y)[0])
    rel = b.step("Expand, angle addition", sp.trigsimp(sp.expand(one)))
    b.obligation("the plane's score is <x, R((n - m) theta) y>", rel - (x.T * rot((n - m) * t) * y)[0])
    at = lambda i: {x[0]: q[2 * i], x[1]: q[2 * i + 1], y[0]: k[2 * i], y[1]: k[2 * i + 1], t: 10000 ** sp.Rational(-2 * i, d)}
    return b.done(b.step("Sum over the d/2 planes", sum(rel.xreplace(at(i)) for i in range(d // 2))))


def draws(rng, d, P):  # P draws of q, k in R^d and positions m, n < 4096
    return rng.standard_normal((P, d)), rng.standard_normal((P, d)), *rng.integers(0, 4096, (2, P))


def tol(q, k, m, n, eps):  # rounding of the angles p*theta (|p| eps) and of the d-term sum, at |q||k|
    return 8 * eps * (q.shape[-1] + m + n) * np.linalg.norm(q, axis=-1) * np.linalg.norm(k, axis=-1)


@numeric("<R_m q, R_n k> with dense block-diagonal rotations (float64), d = 2, 8, 64")
def dense_rotations(form, ctx):
    got, ref, tols = [], [], []
    for d in (2, 8, 64):
        q, k, m, n = draws(ctx.rng(d), d, ctx.size(30, 300))
        R = lambda p: block_diag(*(np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
                                   for a in p * 10000.0 ** (-np.arange(0, d, 2) / d)))
        ref += [(R(mi) @ qi) @ (R(ni) @ ki) for qi, ki, mi, ni in zip(q, k, m, n)]
        got, tols = got + list(form(q, k, m, n)), tols + list(tol(q, k, m, n, np.finfo(float).eps))
    return close(got, ref, tols, "float64 rounding of angles and sums per draw")


def rope_torch(x, p):  # LLaMA-style: x as d/2 complex numbers times e^{i p theta}, batched over leading axes
    import torch
    f = 10000.0 ** (-torch.arange(0, x.shape[-1], 2, dtype=x.dtype, device=x.device) / x.shape[-1])
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * torch.polar(torch.ones_like(f), p[..., None].to(x.dtype) * f)).reshape(x.shape)


@numeric("LLaMA-style complex-multiplication RoPE in torch, float32, d = 64")
def torch_complex(form, ctx):
    import torch
    q, k, m, n = draws(ctx.rng(), 64, ctx.size(100, 1000))
    t = lambda a: torch.tensor(a, dtype=torch.float32)
    ref = (rope_torch(t(q), t(m)) * rope_torch(t(k), t(n))).sum(-1).double().numpy()
    return close(form(q, k, m, n), ref, tol(q, k, m, n, np.finfo(np.float32).eps), "float32 rounding per draw")


@trained("a RoPE score trained at positions < 8 to targets at offsets 1, 2, 3 keeps them at positions 1000-3000")
def trained_offsets(form, ctx):
    import torch
    kw = dict(dtype=torch.float64, device=ctx.device)  # --device (CPU by default); train() moves the parameters there
    m, tau = torch.arange(8.0, **kw).repeat(3), torch.tensor([0.5, -0.3, 0.8], **kw)
    n = m + torch.arange(1.0, 4.0, **kw).repeat_interleave(8)
    rope = lambda x, p: rope_torch(x[:, None, :] * torch.ones(len(p), 1, **kw), p)
    run = train(lambda g, S: {v: 0.5 * torch.randn(S, 8, generator=g, dtype=torch.float64) for v in "qk"},
                lambda w: ((rope(w["q"], m) * rope(w["k"], n)).sum(-1) - tau.repeat_interleave(8)).pow(2).mean(-1),
                ctx, seeds=8, steps=600, lr=0.05, criterion=1e-12)  # every seed's mean squared error <= 1e-12
    q, k, far = run.params["q"].numpy(), run.params["k"].numpy(), np.array([1000, 2000, 3000])
    per_seed = np.concatenate([form(q[:, None], k[:, None], far, far + o) for o in (1, 2, 3)], -1)  # (seeds, 9)
    return run.compare(per_seed, np.repeat(tau.tolist(), 3), floor=np.sqrt(24e-12), what="held-out scores")  # floor: residual a converged run allows


def angles_not_linear(ctx):  # without "angles linear in p": angle p^2 theta, d = 2, q = k = e_1, m = 1, n = 2
    lhs, rhs = np.cos(2 ** 2 - 1 ** 2), np.cos((2 - 1) ** 2)
    return Counterexample({"d": 2, "m": 1, "n": 2, "angle": "p^2 theta"}, "relative", f"cos 3 = {lhs:.3f} but cos 1 = {rhs:.3f}",
                          violated=abs(lhs - rhs) > 1e-12, error=abs(lhs - rhs), tolerance=1e-12)


CLAIM = register(Claim(
    id="__CLAIM_ID__", title="RoPE attention scores depend only on the relative position", derivation_pure=True,
    statement="", source="Su et al., RoFormer (2021), section 3.4.2", kind="identity", form=form, derivation=derive,
    hypotheses=(Hypothesis("d_even", r"q, k \in \mathbb{R}^d,\ d \text{ even}", necessary_note="the setting: RoPE turns d/2 planes"),
                Hypothesis("linear_angles", r"R_p \text{ turns plane } i \text{ by } p\,\theta_i", counterexample=angles_not_linear)),
    clauses=(Clause("relative", r"\langle R_m q, R_n k\rangle = \langle q, R_{n-m} k\rangle", "derived",
                    "every even d, any frequencies (one plane at symbolic theta, m, n)", ("derivation", "matches_derivation"),
                    also=(("checked", "d = 2, 8, 64; positions < 4096; torch float32; trained, 8 seeds"),)),),
    checks=(matches_derivation(derive, ARGS, sizes={"d": (2, 4, 6)}), dense_rotations, torch_complex, trained_offsets),
    mutants=(Mutant("sign_flip", "sign flip", "<q, R_(m-n) k>", lambda q, k, m, n: score(q, k, np.subtract(m, n))),
             Mutant("absolute", "dropped term", "<q, R_n k> (m dropped)", lambda q, k, m, n: score(q, k, n)),
             Mutant("base_1000", "wrong constant", "base 1000", lambda q, k, m, n: score(q, k, np.subtract(n, m), 1000.0)))))
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
    problem = id_problem(claim_id)
    if problem:
        raise ScaffoldError(f"claim id {claim_id!r} {problem}")
    group, name = claim_id.split(".", 1)
    package = f"tverify_{group}"
    kw = dict(group=group, name=name, claim_id=claim_id, package=package)
    return {
        "pyproject.toml": _PYPROJECT.format(**kw),
        f"{package}/__init__.py": f'"""tverify claims of group {group}."""\n',
        f"{package}/claims.py": _CLAIMS.replace("__CLAIM_ID__", claim_id),
        "tests/test_claims.py": _TEST.format(**kw),
        "README.md": _README.format(**kw),
    }


def _builtin_groups() -> dict[str, list[str]]:
    """``{group: [claim ids]}`` of the claims this project ships (their checks live in
    ``proofs_checks.claims``)."""
    from proofs_checks.registry import select

    out: dict[str, list[str]] = {}
    for c in select([]):
        mods = {getattr(ch.fn, "__module__", "") or "" for ch in c.checks}
        if any(m.startswith("proofs_checks.claims") for m in mods):
            out.setdefault(c.id.split(".", 1)[0], []).append(c.id)
    return out


def check_id_free(claim_id: str) -> None:
    """Refuse an id a plugin cannot own: a built-in claim's id (the built-in would shadow the
    plugin's claim) or a built-in group (the plugin's claim would silently join it)."""
    files_for(claim_id)  # the format first
    group = claim_id.split(".", 1)[0]
    builtin = _builtin_groups()
    if claim_id in builtin.get(group, []):
        raise ScaffoldError(f"{claim_id} is a built-in claim: a plugin claim with this id would be shadowed by it; "
                            f"choose another id (e.g. mine.{claim_id.split('.', 1)[1]})")
    if group in builtin:
        raise ScaffoldError(f"group {group!r} is a built-in group ({len(builtin[group])} claims, e.g. "
                            f"{builtin[group][0]}): a plugin's claim would join it; choose a group of your own "
                            f"(e.g. my{group}.{claim_id.split('.', 1)[1]})")


def write_scaffold(claim_id: str, folder: Path | str = ".", *, check_builtin: bool = True) -> list[Path]:
    """Write the package into ``folder``; refuse (writing nothing) if any target exists, or (with
    ``check_builtin``) if the id or its group is a built-in one (:func:`check_id_free`)."""
    from proofs_checks.store import OutputPathError, name_problem, refuse_inside_record

    folder = Path(folder)
    files = files_for(claim_id)
    try:  # (hostile pass 58b F5)
        refuse_inside_record(folder.absolute(), "--dir", str(folder))
    except OutputPathError as exc:
        raise ScaffoldError(f"{exc}; nothing was written") from None
    if check_builtin:
        check_id_free(claim_id)
    for rel in files:  # a name the file system cannot hold: one line, not `File name too long` (hostile pass 14a F8)
        problem = name_problem(folder / rel)
        if problem:
            raise ScaffoldError(f"cannot write {folder / rel}: {problem}; nothing was written")
    existing = [rel for rel in files if os.path.lexists(folder / rel)]  # (a dangling link too: 43b F4)
    if existing:
        raise ScaffoldError("refusing to overwrite existing files: " + ", ".join(existing))
    made: list[Path] = []  # what this call created, files and folders, in order: taken back if a write fails
    try:
        for rel, text in files.items():
            p = folder / rel
            _make_folders(p.parent, made)
            with open(p, "x", encoding="utf-8") as fh:  # "x": never overwrite, even in a race
                made.append(p)
                fh.write(text)
    except OSError:  # (a file where a folder of the package goes: the files written before it were left, 43b F4)
        for q in reversed(made):
            with contextlib.suppress(OSError):
                q.rmdir() if q.is_dir() and not q.is_symlink() else q.unlink()
        raise
    return [q for q in made if not q.is_dir()]


def _make_folders(folder: Path, made: list[Path]) -> None:
    """``folder`` and the folders above it that are missing, each created one by one and added to ``made``."""
    missing = []
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():  # a file (or a link to one) where a folder goes: named, as mkdir would
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))
    for d in reversed(missing):
        d.mkdir()
        made.append(d)
