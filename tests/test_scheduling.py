"""Longest first on a cluster (issue 46): task cost estimates and the order run_tasks submits in."""

from __future__ import annotations

from proofs_checks.distributed import claim_tasks as pct
from proofs_checks.distributed import cluster as pc
from proofs_checks.registry import get_claim, select


def test_estimates_follow_the_layer_without_a_record():
    est = pct.estimate_seconds(get_claim("svm.gd_direction"))
    layers = {ch.name: ch.layer for ch in get_claim("svm.gd_direction").checks}
    for name, layer in layers.items():
        assert est[name] == pct.LAYER_SECONDS[layer]
    assert est["derivation"] == pct.DERIVATION_SECONDS


def test_estimates_read_the_last_run_at_the_same_mode(monkeypatch):
    import proofs_checks.store as st

    claim = get_claim("attn.softmax_simplex")
    name = claim.checks[0].name
    monkeypatch.setattr(st, "load_last", lambda cid, store: {"id": cid, "mode": "quick",
                                                             "checks": [{"name": name, "seconds": 123.0}]})
    assert pct.estimate_seconds(claim, object(), "quick")[name] == 123.0
    assert pct.estimate_seconds(claim, object(), "default")[name] == pct.LAYER_SECONDS[claim.checks[0].layer]


def test_plan_costs_count_every_form_and_extras_are_long():
    claims = select(["svm.gd_direction", "attn.softmax_simplex"])
    extra = [pc.Task("reproduce x", print, ())]
    plan = pct.plan_claims(claims, mode="quick", seed=0, device="cpu", mutants=True, per="check", extra=extra)
    assert plan.tasks[0].cost == pct.EXTRA_SECONDS
    costs = {t.label: t.cost for t in plan.tasks}
    svm = get_claim("svm.gd_direction")
    trained = next(ch for ch in svm.checks if ch.layer == "trained")
    forms = len(pct._forms(svm, True, True))
    assert costs[f"svm.gd_direction:{trained.name}"] == pct.LAYER_SECONDS["trained"] * forms
    per_module = pct.plan_claims(claims, mode="quick", seed=0, device="cpu", per="module")
    assert all(t.cost > 0 for t in per_module.tasks)


class _Future:
    def __init__(self, key, value):
        self.key, self._value = key, value

    def result(self):
        return self._value

    def release(self):
        pass


class _Client:
    """Records the order and priorities of submissions; every task 'finishes' at once."""

    def __init__(self):
        self.submitted = []

    def submit(self, fn, *args, key, priority, **kw):
        task_args = args[2:] if fn is pc._guarded else args  # (the worker's code fingerprint checked first)
        self.submitted.append((task_args[0], priority))
        return _Future(key, fn(*args))


def test_run_tasks_submits_longest_first_and_returns_in_task_order(monkeypatch):
    import distributed

    monkeypatch.setattr(distributed, "as_completed", lambda fs: list(fs))
    tasks = [pc.Task(f"t{i}", str, (i,), cost=c) for i, c in enumerate([1.0, 50.0, 5.0])]
    client = _Client()
    out = pc.run_tasks(client, tasks)
    assert out == ["0", "1", "2"]
    assert [a for a, _ in client.submitted] == [1, 2, 0]
    prios = [p for _, p in client.submitted]
    assert prios == sorted(prios, reverse=True)
