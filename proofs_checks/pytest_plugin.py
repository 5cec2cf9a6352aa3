"""pytest plugin: the ``tverify`` fixture (registered through the ``pytest11`` entry point, so it is
available in any test suite once this package is installed; ``-p no:tverify`` turns it off).

    def test_my_attention(tverify):
        tverify.check_attention(MyAttn(), causal=True)

Each method runs the matching :mod:`proofs_checks.api` function and returns its result when it is
``ok``; otherwise the test fails with the property table (``pytest.fail``, no traceback into this
package). ``expect="mismatch"`` (or ``"inconclusive"``) asserts that outcome instead, for tests that
plant a bug on purpose. Bad input (a wrong shape, a module that raises) fails the test with the
one-line message. Nothing heavy is imported until a method is called.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from typing import Any

import pytest

# imported with the plugin, when pytest loads it (before any test folder is on sys.path); it imports only the standard
# library's start-up modules (a click.py beside the tests ran when the fixture imported it later, hostile pass 15a F3)
from proofs_checks.syspath import child_sys_path, without_own

__all__ = ["TverifyFixture", "tverify"]


#: the outcomes a check can have (what ``expect=`` may name)
_OUTCOMES = ("ok", "mismatch", "inconclusive")


@contextlib.contextmanager
def _system_first():
    """``sys.path`` with the standard library's, the installed packages' and tverify's own folders first while tverify
    runs in the test's process, put back after: pytest puts the test's folder first, and a ``multiprocessing.py``
    there was imported by tverify's first use of multiprocessing (hostile pass 14a F3). Your own modules, named
    unlike those, still import (their folders come after)."""
    saved = list(sys.path)
    sys.path[:] = child_sys_path(saved)  # first: without_own imports tverify's packages, from this path (19a F2)
    sys.path[:] = without_own(sys.path)  # not a checkout's examples/ or tests/ before yours (18a F1)
    try:
        yield
    finally:
        sys.path[:] = saved


def _system_path_first(method):
    @functools.wraps(method)
    def wrapped(*args, **kwargs):
        with _system_first():
            return method(*args, **kwargs)

    return wrapped


class TverifyFixture:
    """The object the ``tverify`` fixture yields: ``check_attention``, ``check_hopfield``,
    ``check_att_svm``, ``check_icl_model``, ``check_lyapunov``, ``run_claims`` and ``assert_claim`` (claim authors), each
    failing the test on a result
    that is not ``ok`` (or not the ``expect``-ed outcome)."""

    @_system_path_first
    def _run(self, fn: str, *args, expect: str = "ok", **kwargs) -> Any:
        from proofs_checks import api
        from proofs_checks.errors import UsageError
        from theory.validation import InputError

        if expect not in _OUTCOMES:  # a typo would run the whole check and then fail on "expected fine, got ok"
            pytest.fail(f"tverify.{fn}: expect must be one of {', '.join(_OUTCOMES)}, got {expect!r}", pytrace=False)
        try:
            result = getattr(api, fn)(*args, **kwargs)
        except (InputError, UsageError) as exc:  # UsageError: a bad TVERIFY_* variable (hostile pass 10, F2)
            why = f"tverify.{fn}: bad input: {exc}"
        else:
            why = None
        if why:  # outside the except: the reason once, not twice "during handling of" it
            pytest.fail(why, pytrace=False)
        verdict = getattr(result, "verdict", None)
        outcome = getattr(result, "outcome", None) or getattr(verdict, "outcome", None) or _run_outcome(result)
        if outcome != expect:
            pytest.fail(f"tverify.{fn}: expected {expect}, got {outcome}\n{result}", pytrace=False)
        return result

    def check_attention(self, obj, *, expect: str = "ok", **kwargs):
        """:func:`proofs_checks.api.check_attention`; fails the test with the property table."""
        return self._run("check_attention", obj, expect=expect, **kwargs)

    def check_hopfield(self, patterns, *, expect: str = "ok", **kwargs):
        """:func:`proofs_checks.api.check_hopfield`."""
        return self._run("check_hopfield", patterns, expect=expect, **kwargs)

    def check_att_svm(self, data, *, expect: str = "ok", **kwargs):
        """:func:`proofs_checks.api.check_att_svm`."""
        return self._run("check_att_svm", data, expect=expect, **kwargs)

    def check_icl_model(self, obj, *, expect: str = "ok", **kwargs):
        """:func:`proofs_checks.api.check_icl_model`."""
        return self._run("check_icl_model", obj, expect=expect, **kwargs)

    def check_lyapunov(self, f, V, *, expect: str = "ok", **kwargs):
        """:func:`proofs_checks.api.check_lyapunov` (``ok``: certified)."""
        return self._run("check_lyapunov", f, V, expect=expect, **kwargs)

    @_system_path_first
    def assert_claim(self, claim, **kwargs):
        """:func:`proofs_checks.testkit.assert_claim`: the claim verifies at several seeds and a
        numeric or trained check kills each mutant; otherwise the test fails with the reason."""
        from proofs_checks.testkit import assert_claim

        from proofs_checks.errors import UsageError
        from proofs_checks.registry import RegistryError, UnknownClaimError
        from theory.validation import InputError

        try:
            return assert_claim(claim, **kwargs)
        except AssertionError as exc:
            why = f"tverify.assert_claim: {exc}"
        except (InputError, UnknownClaimError, UsageError) as exc:
            why = f"tverify.assert_claim: bad input: {exc}"
        except RegistryError as exc:  # a claim the registry refuses (a clause naming no check): its line, no traceback
            why = f"tverify.assert_claim: the claim is not well-formed: {exc}"
        pytest.fail(why, pytrace=False)  # outside the except: the reason once, not twice "during handling of" it

    def run_claims(self, patterns=(), *, expect: str = "ok", **kwargs):
        """:func:`proofs_checks.api.run_claims` (``ok``: none refuted, errored or incomplete)."""
        return self._run("run_claims", patterns, expect=expect, **kwargs)


def _run_outcome(result: Any) -> str:
    """A claims run (``run_claims``) as a check's outcome, by its exit code as ``tverify run``: 0 ok,
    3 (undecided, none failed) inconclusive, else mismatch (refuted, errored or incomplete)."""
    code = getattr(result, "exit_code", None)
    if code is None:
        return "ok" if result.ok else "mismatch"
    return {0: "ok", 3: "inconclusive"}.get(code, "mismatch")


@pytest.fixture
def tverify():
    """Run tverify's checks on your own model inside a test; a violation fails the test with the table.
    The torch/BLAS threads are pinned for the test (one per xdist worker) and put back after it, with the
    environment variables that set them (:func:`proofs_checks.threads.pinned`)."""
    with _system_first():
        from proofs_checks.errors import UsageError
        from proofs_checks.threads import pinned

    why = None
    threads = pinned()
    try:
        with _system_first():
            threads.__enter__()
    except UsageError as exc:  # a bad $TVERIFY_THREADS: its one line, no traceback into this package (pass 10, F2)
        why = f"tverify fixture: {exc}"
    if why:
        pytest.fail(why, pytrace=False)
    try:
        yield TverifyFixture()
    finally:
        threads.__exit__(None, None, None)
