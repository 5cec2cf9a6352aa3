"""Shared pytest set-up: hypothesis profiles and CUDA skipping.

Profiles: ``dev`` (default, 25 examples), ``ci`` (deadline off; selected by HYPOTHESIS_PROFILE=ci in
.ci/run), ``thorough`` (200 fresh random examples, opt-in exploration).

``dev`` and ``ci`` are derandomized (issue 29): the draws are a fixed function of each test, so
``make test`` runs exactly the configurations CI ran, and a statistical test with a random element
(e.g. tests/test_trained_properties.py, 6 SE bounds, Bonferroni ≈ 1.5e-2 per fresh draw) has no
per-run false-failure probability: it passed or failed once, for every user alike. Fresh draws are
for ``HYPOTHESIS_PROFILE=thorough``, where a statistical failure must be read against its stated
false-alarm rate.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=25, derandomize=True, **_common)
settings.register_profile("ci", max_examples=25, derandomize=True, print_blob=True, **_common)
settings.register_profile("thorough", max_examples=200, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _hangup_caught_not_ignored() -> None:
    """Under ``nohup`` SIGHUP arrives ignored, and an ignored signal stays ignored in every process the tests
    start: tverify then rightly keeps ignoring it, and the tests of its SIGHUP handling fail (seen with
    ``nohup make profile-tests``). A handler that does nothing protects this process as ``nohup`` meant to,
    and is reset to the default action by ``exec`` in the processes the tests start."""
    import signal

    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, lambda signum, frame: None)


_hangup_caught_not_ignored()


def pytest_configure(config):
    # pytest -n 2 on a 2-core machine: one torch thread per worker avoids oversubscription, which
    # made small tensor ops 5-20x slower (measured) when both workers used torch's default threads.
    # proofs_checks.threads.pin sets torch's and the BLAS libraries' threads alike: one, unless
    # TVERIFY_THREADS or OMP_NUM_THREADS says otherwise (the suite's expected numbers and timings are
    # single-threaded ones; the tverify fixture and the API pin again, to the same count).
    import torch  # noqa: F401 (imported first: pin sets its thread count)

    from proofs_checks.threads import pin

    pin(default=1)


#: claim modules whose checks share process-wide caches across modules, each mapped to one test group: the
#: LSA trained once per (mode, seed, device) (proofs_checks.claims._icl_common._trained) and the lru-cached ICL
#: derivations (theory.icl.derive_moments, derive_population_loss, the symbolic-size ones) that their symbolic
#: checks and their derivations' obligations both build (issue 46: the tests of icl.gamma_n_global_min,
#: icl.linear_task_risk and icl.population_loss measured 48.4 CPU s in six groups, 26.9 s in one).
SHARED_GROUPS = {f"proofs_checks.claims.{m}": "proofs_checks.claims.icl-lsa"
                 for m in ("icl", "icl_minimum", "icl_risk", "icl_gd", "icl_further")}
#: theory modules whose doctests call those lru-cached derivations (theory.icl's docstring example builds
#: derive_linear_task_risk_general, 6.7 CPU s, again on the other worker when it ran outside the group)
SHARED_GROUPS["theory.icl"] = "proofs_checks.claims.icl-lsa"


def claim_group(claim) -> str | None:
    """The xdist group of the tests that run ``claim``: its declaring module (or the module's shared group)."""
    checks = getattr(claim, "checks", None)
    if not checks:
        return None
    mod = getattr(checks[0].fn, "__module__", None) or getattr(claim, "id", None)
    return SHARED_GROUPS.get(mod, mod)


def _claim_param_group(item) -> str | None:
    """The group of the claim a parametrised test runs, given as a ``claim`` object or a ``cid`` id (None for
    other tests, and for an id the registry does not know): see :func:`claim_group`."""
    params = getattr(getattr(item, "callspec", None), "params", {}) or {}
    claim, cid = params.get("claim"), params.get("cid")
    if claim is None and isinstance(cid, str):
        from proofs_checks.registry import RegistryError, get_claim

        try:
            claim = get_claim(cid)
        except (KeyError, RegistryError):
            return None
    return claim_group(claim) if getattr(claim, "checks", None) else None


def _check_tier(item) -> None:
    """Every test outside ``make test`` says why (issue 46: the tiers keep their meaning): its ``integration`` mark
    carries ``reason=`` (and a test moved out of ``make test`` for its time, ``pinned_by=``: the faster tests of
    ``make test`` that pin what it re-verifies; tests/test_tiers.py checks that they exist and stay in the tier)."""
    mark = item.get_closest_marker("integration")
    if mark is None:
        return
    reason = mark.kwargs.get("reason")
    if not (isinstance(reason, str) and reason.strip()):
        raise pytest.UsageError(f"{item.nodeid}: an integration test says why it is outside `make test`: "
                                "@pytest.mark.integration(reason=...)")


def pytest_itemcollected(item):
    _check_tier(item)
    # Under `pytest -n 2 --dist loadgroup` (make test), every test of tests/test_registry.py that runs
    # one claim (the claim, its mutants, its checks with a poisoned form) goes to one worker, together
    # with the claims declared in the same module: the form-independent references (Monte Carlo
    # samples, trained models, solver outputs; RunContext.reference and module caches such as the
    # shared group-G training) are then computed once per worker instead of once in each.
    # Likewise the tests of tests/test_derivations.py that read one claim's derivation (built once per
    # process there), in the same group as the claim's checks, which build the same lru-cached derivation.
    # The mark is set as each item is collected: xdist turns the marks into node ids in its own
    # pytest_collection_modifyitems, which runs before a conftest's (marks added there were silently
    # ignored, and the groups split across workers).
    # The same for every other test parametrised by one claim (a `claim` object or a `cid` id: the derivation's
    # steps, its symbolic-size form, its statement): the claim's derivation is lru-cached per process, so in
    # the claim's group it is built once per `make test` (icl.linear_task_risk's alone is 7 CPU s; the 100
    # derivations 33 s), not again on the other worker.
    # (A test that uses a module-scoped fixture stays with that fixture's group, below: the fixture is the dearer.)
    if item.get_closest_marker("xdist_group"):
        return
    modname = getattr(getattr(item, "module", None), "__name__", "")
    fixture = _uses_module_fixture(item) and not modname.endswith(("test_registry", "test_derivations"))
    group = None if fixture else _claim_param_group(item)
    if group:
        item.add_marker(pytest.mark.xdist_group(group))
    elif _uses_module_fixture(item):
        # A module-scoped fixture (a tverify run with broken plugins, a real report, a trained model, a
        # Dask cluster) is built once per worker that runs one of its tests: the tests that use it go
        # to one worker, so it is built once (two builds of test_plugin_isolation's run cost 20.7 s and
        # 19.1 s; issue 46).
        item.add_marker(pytest.mark.xdist_group("module-fixture:" + item.nodeid.split("::")[0]))


def _uses_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    for defs in (getattr(info, "name2fixturedefs", None) or {}).values():
        for d in defs:
            if str(getattr(d, "scope", "")).rpartition(".")[2].lower() == "module":
                return True
    return False


def pytest_collection_finish(session):
    # pytest 9.2 stores node ids structurally and pytest-xdist 3.8's loadgroup still writes the old
    # `_nodeid` field, so the groups are silently dropped (pytest-dev/pytest-xdist#1386; pyproject pins
    # pytest<9.2 for that reason). Say so loudly rather than run every group's references twice.
    if not session.config.getoption("loadgroup", default=False):
        return
    marked = [it for it in session.items if it.get_closest_marker("xdist_group")]
    if marked and not any("@" in it.nodeid for it in marked):
        import warnings

        warnings.warn(f"--dist loadgroup has no effect with pytest {pytest.__version__} and this pytest-xdist "
                      "(pytest-dev/pytest-xdist#1386): the claim groups run on several workers; install "
                      "pytest<9.2", stacklevel=1)


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups (this conftest's item hooks see tests/ only)
def pytest_collection_modifyitems(config, items):
    for item in items:
        doctest_of = item.nodeid.split("::")[-1].rpartition(".")[0] if type(item).__name__ == "DoctestItem" else ""
        if doctest_of in SHARED_GROUPS and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(SHARED_GROUPS[doctest_of]))
    _skip_needs_cuda(items)


def _skip_needs_cuda(items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA: torch sees no CUDA device on this machine")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def cluster():
    """A two-worker Dask LocalCluster (processes, one thread each) started as ``--cluster local:2``
    starts it (:func:`open_client`), one per test module that asks: ``(scheduler_address, client)``."""
    from proofs_checks.distributed.cluster import open_client

    with open_client("local:2") as client:
        yield client.scheduler.address, client


@pytest.fixture(scope="session", autouse=True)
def _warm_cli():
    """``tverify`` commands the tests start are forked from a warm server where the interpreter's own start cannot
    matter (tests/warm_cli.py: which are, and which stay fresh); ``TVERIFY_TEST_FRESH=1`` starts every one fresh."""
    import warm_cli

    warm_cli.install()
    yield
    warm_cli.uninstall()


@pytest.fixture(autouse=True)
def _fresh_process_marker(request):
    """A test marked ``fresh_process`` starts every command in a fresh interpreter."""
    import warm_cli

    warm_cli._TEST_FRESH[0] = request.node.get_closest_marker("fresh_process") is not None
    yield
    warm_cli._TEST_FRESH[0] = False


@pytest.fixture(scope="session", autouse=True)
def _private_results_store(tmp_path_factory):
    """Runs inside the tests (in-process CLI calls, reports) keep their results in a store of the
    test session, never in the user's ~/.cache/tverify; a test that sets TVERIFY_STORE itself wins."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TVERIFY_STORE", str(tmp_path_factory.mktemp("store")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _no_inherited_columns():
    """pytest-xdist's workers start with COLUMNS=80 (a plain ``pytest`` run has none): the ``check``
    views wrap to COLUMNS, so the same test would see wrapped text under ``make test`` and whole lines
    alone. Every test starts as a pipe without COLUMNS does; a test that sets COLUMNS itself wins."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("COLUMNS", raising=False)
        yield
