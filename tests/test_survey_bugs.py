"""The survey's known-bug pairs (proofs_checks/survey/catalogue_bugs.py and the first ones in catalogue.py):
each bug release has its fixed release beside it, pointing back, with the same adapter and declaration,
and a reference into the library's tracker. One integration test runs a pair from the install cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bugs():
    from proofs_checks.survey.catalogue import CATALOGUE

    return [e for e in CATALOGUE if e.known and "bug" in e.known]


def test_at_least_seven_known_bug_pairs_from_at_least_four_libraries():
    bugs = _bugs()
    assert len(bugs) >= 7, [e.name for e in bugs]
    assert len({e.package for e in bugs}) >= 4


def test_every_bug_entry_has_its_fix_pointing_back_with_the_same_adapter():
    from proofs_checks.survey.catalogue import get

    for bug in _bugs():
        k = bug.known
        assert k["bug"] and all(isinstance(p, str) for p in k["bug"]), bug.name
        assert k.get("what") and k.get("title"), bug.name
        assert str(k.get("ref", "")).startswith("https://github.com/"), bug.name
        fix = get(k["fixed_in"])
        assert fix.known and fix.known.get("fix_of") == bug.name, (bug.name, fix.name)
        assert str(fix.known.get("ref", "")).startswith("https://github.com/"), fix.name
        assert (fix.adapter, fix.declare, fix.package, fix.module, fix.extra) == \
            (bug.adapter, bug.declare, bug.package, bug.module, bug.extra), (bug.name, fix.name)
        assert fix.version != bug.version and fix.on_pypi and bug.on_pypi, (bug.name, fix.name)
        assert bug.adapter_lines <= 10, bug.name


def test_fix_entries_name_an_existing_bug_entry():
    from proofs_checks.survey.catalogue import CATALOGUE, get

    for fix in (e for e in CATALOGUE if e.known and "fix_of" in e.known):
        bug = get(fix.known["fix_of"])
        assert bug.known and bug.known.get("fixed_in") == fix.name, (fix.name, bug.name)


def test_bug_properties_are_properties_the_check_reports():
    files = sorted((ROOT / "numerics").glob("attention*.py")) + sorted((ROOT / "proofs_checks/sanity").glob("attention*.py"))
    src = "".join(p.read_text(encoding="utf-8") for p in files)
    for bug in _bugs():
        for prop in bug.known["bug"]:
            assert f'"{prop}"' in src, (bug.name, prop)


def test_new_pairs_compile():
    from proofs_checks.survey.catalogue_bugs import ENTRIES
    from proofs_checks.survey.entry import _PRE, HELPERS

    assert len(ENTRIES) >= 6
    for e in ENTRIES:
        compile(_PRE + HELPERS + e.adapter, e.name, "exec")


# the pair the integration test runs: fast (about 15 s for both on one core), torch + einops only
_PAIR = ("xt-1.31.4-softclamp", "xt-1.31.5-softclamp")


def _cache() -> Path:
    from proofs_checks.survey.runner import default_cache

    c = default_cache()
    return c if c.is_absolute() else ROOT / c


@pytest.mark.integration(reason="a survey pair run from the release install cache")
def test_one_new_pair_runs_from_the_cache_as_documented(tmp_path):
    from proofs_checks.survey import runner
    from proofs_checks.survey.catalogue import get

    cache = _cache()
    entries = [get(n) for n in _PAIR]
    missing = [e.spec for e in entries if not runner._in_env(e.spec)
               and not (cache / e.spec.replace("==", "-") / runner.MARKER).exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not in the survey cache {cache} (run `tverify survey {' '.join(_PAIR)}` "
                    "once to install them)")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows = [runner.row_verdict(e, runner.run_entry(e, cache=cache, mode="quick", seed=0, timeout=60, install=False))
            for e in entries]
    for e, row in zip(entries, rows):
        assert row["status"] == "checked", (e.name, row.get("why"))
        assert row["expected"] == "as documented", (e.name, row.get("failed"))
    assert "causal_no_future_leak" in rows[0]["failed"] and not rows[1]["findings"]
