"""Issue 44, the seventh (independent) hostile pass: each finding fixed here reproduced as a test.

* P3: the own-mutant rule's doubled form (``proofs_checks.scaling``) multiplied the form's output with
  the output's own ``*``: an ``np.ndarray`` subclass whose ``*`` returned 1e305 times the value made the
  doubled form "rejected" by ``compare(err, 1e300)``, and a plugin claim ``3x = 2x`` was verified. Outputs
  in a named tuple or complex were not scaled at all (counted as "no float output"), and verified too.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections import namedtuple

import numpy as np
import pytest
import torch

from proofs_checks.plugin import check_claim
from proofs_checks.registry import registry
from proofs_checks.scaffold import write_scaffold
from proofs_checks.scaling import scale_counter, scaled_form


class _Lie(np.ndarray):
    """An array whose multiplication by anything returns 1e305 times its value."""

    def __mul__(self, other):
        return np.asarray(self) * 1e305

    __rmul__ = __mul__

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        inputs = tuple(np.asarray(i) if isinstance(i, _Lie) else i for i in inputs)
        out = getattr(ufunc, method)(*inputs, **kw)
        return np.asarray(out) * 1e305 if ufunc is np.multiply else out


class _TLie(torch.Tensor):
    def __mul__(self, other):
        return self.as_subclass(torch.Tensor) * 1e305

    __rmul__ = __mul__


_NT = namedtuple("_NT", "y label")


@pytest.mark.parametrize("make, get", [
    (lambda v: v.view(_Lie), lambda o: o),
    (lambda v: torch.as_tensor(v).as_subclass(_TLie), lambda o: o.numpy()),
    (lambda v: _NT(v, "lbl"), lambda o: o.y),
    (lambda v: v + 0j, lambda o: o.real),
    (lambda v: np.float64(v[0]), lambda o: np.atleast_1d(o)),
    (lambda v: complex(v[0]), lambda o: np.atleast_1d(o.real)),
])
def test_the_doubled_form_is_twice_the_plain_value_whatever_the_output_class_says(make, get):
    v = np.array([1.5, -2.0, 3.0])
    f = scaled_form(lambda: make(v.copy()), 2.0)
    out = f()
    assert scale_counter(f).scaled == 1
    want = 2 * v if np.ndim(get(out)) and get(out).size == 3 else 2 * v[:1]
    assert np.allclose(np.asarray(get(out), dtype=float), want, rtol=0, atol=0)


#: the plugin's own copy of :class:`_Lie`, named ``Lie``
LIE_SOURCE = inspect.getsource(_Lie).replace("_Lie", "Lie")

CLAIMS = '''
from collections import namedtuple

import numpy as np

from proofs_checks.plugin import Claim, DerivationBuilder, Mutant, bind, compare, numeric, register, scalar

ARGS = (scalar("x"),)


{lie_class}


NT = namedtuple("NT", "y")
WRAP = {{"lie": lambda y: y.view(Lie), "nt": NT, "cx": lambda y: y + 0j}}
UNWRAP = {{"lie": lambda o: o, "nt": lambda o: o.y, "cx": lambda o: o}}


def form(x):  # false: 3x = 2x, its output wrapped
    return WRAP["{how}"](3 * np.asarray(x, dtype=float))


def derive():
    b = DerivationBuilder("2x")
    (x,) = b.fact("args", bind(ARGS))
    return b.done(b.step("2x", 2 * x))


@numeric("compare with 1e300")
def CHECK(form, ctx):
    x = ctx.rng().standard_normal(20)
    return compare(float(np.max(np.abs(UNWRAP["{how}"](form(x)) - 2 * x))), 1e300, "generous")


CLAIM = register(Claim(
    id="{cid}", title="3x = 2x", statement="3x = 2x", source="a false claim", kind="identity", form=form,
    derivation=derive, checks=(CHECK,), no_symbolic="hostile: numeric alone",
    mutants=(Mutant("huge", "wrong constant", "1e305 x",
                    lambda x: WRAP["{how}"](1e305 * np.asarray(x, dtype=float))),)))
'''


@pytest.mark.parametrize("how", ["lie", "nt", "cx"])
def test_three_x_equals_two_x_behind_a_lying_or_wrapped_output_is_an_error(tmp_path, how):
    group = f"zzhr7{how}"
    write_scaffold(f"{group}.three", tmp_path)
    path = tmp_path / f"tverify_{group}" / "claims.py"
    path.write_text(CLAIMS.format(how=how, cid=f"{group}.three", lie_class=LIE_SOURCE))
    spec = importlib.util.spec_from_file_location(f"tverify_{group}.claims", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
        res = check_claim(mod.CLAIM)
        assert res.status == "error", (how, res.status, res.message)
        assert "accept the form multiplied by 2" in res.message, res.message
    finally:
        registry._claims.pop(f"{group}.three", None)
