"""Hostile pass 19's findings, fixed: the lead's tests (the testers' reproducers are in test_hostile_round25a/b.py)."""

from __future__ import annotations

import json
import os

import pytest


def _doc(fp: str) -> dict:
    return {"schema": 1, "tool": "tverify", "fingerprint": fp, "claims": []}


def test_the_cache_cleanup_removes_only_tverifys_own_caches(tmp_path):
    """19a F4: writing a catalogue cache removed every ``catalogue-*.json`` (``plugins-*.json``) of the store's
    ``cache/``, a user's files of such names included, also through a link to a folder of theirs."""
    from proofs_checks.output.catalogue import _replace_cached

    cache = tmp_path / "cache"
    cache.mkdir()
    old = cache / f"catalogue-{'a' * 20}.json"
    old.write_text(json.dumps(_doc("a" * 64)))
    mine = {cache / "catalogue-2025.json": '{"mine": 1}', cache / "plugins-list.json": "mine",
            cache / f"catalogue-{'b' * 20}.json": '{"not": "a catalogue"}', cache / "data.csv": "keep"}
    for p, text in mine.items():
        p.write_text(text)
    os.symlink(old, cache / f"catalogue-{'c' * 20}.json")  # a link, even to a cache: not removed
    new = cache / f"catalogue-{'d' * 20}.json"
    assert _replace_cached(_doc("d" * 64), new, cache, "catalogue-*.json") == new
    assert not old.exists()  # tverify's older cache is gone
    assert all(p.read_text() == text for p, text in mine.items())
    assert (cache / f"catalogue-{'c' * 20}.json").is_symlink()

    user = tmp_path / "ucache"
    user.mkdir()
    theirs = user / f"catalogue-{'e' * 20}.json"
    theirs.write_text(json.dumps(_doc("e" * 64)))
    link = tmp_path / "store_cache"
    link.symlink_to(user)
    _replace_cached(_doc("f" * 64), link / f"catalogue-{'f' * 20}.json", link, "catalogue-*.json")
    assert theirs.exists()  # nothing removed in a folder reached through a link


@pytest.mark.parametrize("before", ["absent", "report"])
def test_force_never_replaces_a_folder_made_or_changed_at_out_during_the_run(tmp_path, capsys, before):
    """19a F5: ``--force`` consents to replacing what was at ``--out`` when the command started; a folder of the
    user's made there during the run (or a file added to the folder that was there) was replaced and deleted. It is
    now left as it is and the output written beside it, said in one warning line."""
    from proofs_checks.output.report import build_output

    out = tmp_path / "rf"
    if before == "report":
        build_output(out, lambda tmp: (tmp / "index.html").write_text("first"), {"command": "test"})

    def fill(tmp):
        (tmp / "index.html").write_text("new")
        out.mkdir(exist_ok=True)
        (out / "mine.txt").write_text("user data")  # the user's, made while the run goes on

    where = build_output(out, fill, {"command": "test"}, force=True)
    assert (out / "mine.txt").read_text() == "user data"
    assert where != out and (where / "index.html").read_text() == "new"
    assert "changed during the run" in capsys.readouterr().err


def test_force_still_replaces_what_was_there_unchanged(tmp_path):
    from proofs_checks.output.report import build_output

    out = tmp_path / "rf"
    out.mkdir()
    (out / "old.txt").write_text("the user's, replaced with --force as asked")
    where = build_output(out, lambda tmp: (tmp / "index.html").write_text("new"), {"command": "test"}, force=True)
    assert where == out and (out / "index.html").read_text() == "new" and not (out / "old.txt").exists()


def test_show_takes_no_plugin_derivation_and_nothing_cached_with_the_cache_off(monkeypatch):
    """19a F1: ``show`` answered a plugin's derivation from the store's catalogue after an input it read changed
    (even with TVERIFY_DERIVATION_CACHE=0): a plugin's entry is marked, its derivation never taken from nor put into
    a catalogue (its own cache checks its inputs); with the caches off no cached derivation answers."""
    from proofs_checks import cli
    from proofs_checks.output import catalogue

    stale = {"steps": [], "obligations": [{"name": "constant is two", "holds": True}]}
    entries = [{"id": "hz.dbl", "group": "hz", "plugin": True, "derivation": stale},
               {"id": "attn.softmax_simplex", "group": "attn", "derivation": stale}]
    monkeypatch.setattr("proofs_checks.cli_select._catalogue", lambda store, refresh=False, patterns=(): (entries, "the store's cache", {}, True))
    monkeypatch.setattr("proofs_checks.cli_select._select", lambda ids: [object()])
    fresh = {"steps": [], "obligations": [{"name": "constant is two", "holds": False}]}
    monkeypatch.setattr(catalogue, "derivation_and_origin", lambda claim: (fresh, False))
    cached = []
    monkeypatch.setattr(catalogue, "cache_derivation", lambda *a: cached.append(a))
    monkeypatch.delenv("TVERIFY_DERIVATION_CACHE", raising=False)
    assert cli._show_data("hz.dbl", None)[1] is fresh and not cached
    assert cli._show_data("attn.softmax_simplex", None)[1] is stale  # a built-in's, while its sources match
    monkeypatch.setenv("TVERIFY_DERIVATION_CACHE", "0")
    assert cli._show_data("attn.softmax_simplex", None)[1] is fresh and not cached


def test_a_derivation_that_did_not_finish_is_never_shown_as_none():
    """19a F6: a derivation past TVERIFY_DERIVATION_BUDGET was shown as "none: no symbolic derivation for this claim"
    (and cached so): it is shown as not finished, undecided, and ``show`` caches only a derivation that ended."""
    from proofs_checks.output.terminal import _derivation

    lines = [ln.text for ln in _derivation({"steps": [], "obligations": [], "timeout": "building the derivation "
                                            "(budget 0.001 s)"}, "computed now", str, False)]
    assert not any("none: no symbolic derivation" in t for t in lines)
    assert any("did not finish" in t and "undecided" in t for t in lines), lines


def test_a_probe_beyond_the_input_precisions_range_is_not_run():
    """19b F3's variant: a correct float32 causal module at ``--scale 1e-36``: the huge-logit probe needs ``q·kᵀ``
    of ~1e39, beyond float32 for any implementation forming it; the NaN was blamed on the module (a leak, an exp
    overflow). Such a probe is now not run, and said so."""
    import math

    import torch
    from torch import nn

    import proofs_checks as pc

    class S36(nn.Module):
        def __init__(self, dim=32, heads=4):
            super().__init__()
            self.h, self.qkv, self.proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4).unbind(0)
            s = torch.einsum("bhtd,bhsd->bhts", q, k) * 1e-36
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -math.inf)
            return self.proj(torch.einsum("bhts,bhsd->bhtd", s.softmax(-1), v).transpose(1, 2).reshape(b, t, d))

    torch.manual_seed(0)
    r = pc.check_attention(S36(), causal=True, scale=1e-36, dtype="float32", mode="quick", isolate=False,
                           progress=False)
    by = {p["name"]: p for p in (p if isinstance(p, dict) else p.to_json() for p in r.properties)}
    assert r.outcome == "ok", str(r)
    assert by["causal_no_future_leak"]["status"] == "pass" and "not probed: huge" in by["causal_no_future_leak"]["detail"]
    assert by["stable_at_extreme_logits"]["status"] == "skip" and "float32's range" in by["stable_at_extreme_logits"]["detail"]
