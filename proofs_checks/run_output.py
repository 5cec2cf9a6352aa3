"""What ``run``, ``mutants`` and ``report`` show on the terminal: the progress of a run (a rich bar on a terminal, one
line per item in a log), the results table and its totals line, the mutants' kill-matrix table, and the mutants'
JSON document. Formatting only: the commands (:mod:`proofs_checks.cli`) decide what runs and the exit code."""

from __future__ import annotations

from typing import Any

import click

from proofs_checks.console import command_line as _command_line
from proofs_checks.console import console as _console
from proofs_checks.console import esc as _esc
from proofs_checks.console import table as _table

STATUS_STYLE = {
    "verified": "green",
    "evidence": "cyan",
    "incomplete": "yellow",
    "refuted": "bold red",
    "error": "bold magenta",
    "undecided": "yellow",
    "inconclusive": "yellow",
}
LAYERS = ("symbolic", "numeric", "trained")


class _Progress:
    """A rich progress bar on a terminal; one line per item otherwise (CI logs)."""

    def __init__(self, total: int, label: str, enabled: bool = True):
        self.total, self.label, self.done = total, label, 0
        err = _console(stderr=True)
        self.tty = err.is_terminal and enabled
        self.enabled = enabled
        self._p = None
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                               console=err, transient=True)
            self._task = self._p.add_task(label, total=total)

    #: without a terminal: a "still running" line after this many seconds of silence, then every
    #: HEARTBEAT_EVERY (a claim of a minute is never a minute of silence in a CI log)
    HEARTBEAT_FIRST, HEARTBEAT_EVERY = 2.0, 5.0

    def __enter__(self):
        if self._p:
            self._p.__enter__()
        elif self.enabled:
            import threading

            self._current, self._since, self._beats = None, 0.0, 0
            self._stop = threading.Event()
            self._beat = threading.Thread(target=self._heartbeat, name="tverify-progress", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc):
        if self._p:
            self._p.__exit__(*exc)
        elif self.enabled:
            self._stop.set()

    def _heartbeat(self):
        import time

        while not self._stop.wait(0.5):
            name, since = self._current, self._since
            if name is None:
                continue
            el = time.monotonic() - since
            if el >= self.HEARTBEAT_FIRST + self.HEARTBEAT_EVERY * self._beats:
                self._beats += 1
                try:
                    click.echo(f"[{self.done + 1}/{self.total}] {name}: still running ({el:.0f} s)", err=True)
                except (OSError, ValueError):  # stderr closed: the run goes on
                    return

    def start(self, name: str):
        if self._p:
            self._p.update(self._task, description=f"{self.label}: {name}")
        elif self.enabled:
            import time

            self._since, self._beats, self._current = time.monotonic(), 0, name

    def advance(self, name: str, status: str = "", seconds: float | None = None):
        if not self._p and self.enabled:
            self._current = None
        self.done += 1
        if self._p:
            self._p.advance(self._task)
        elif self.enabled:
            extra = f" {status}" if status else ""
            extra += f" ({seconds:.1f}s)" if seconds is not None else ""
            click.echo(f"[{self.done}/{self.total}] {name}{extra}", err=True)


def _summary_table(results):
    """One row per claim: status, evidence in a word or two (``tverify show ID --full`` has its
    scope), the worst error/tolerance, seconds, the message cut at a word."""
    from proofs_checks.output.evidence import evidence_label
    from proofs_checks.output.terminal import short, text_of

    # the id and the badge ("derived ∀ sizes") never cut mid-word; the note folds to make room
    t = _table("tverify results", ("claim", "kind", "status", "evidence", "max err/tol", "s", "note"),
               no_wrap=("claim", "status", "evidence"))
    for r in results:
        ratio = r.max_error_ratio
        ev = evidence_label({"kind": r.kind, "clauses": r.statement.get("clauses") or []})
        t.add_row(r.id, r.kind, f"[{STATUS_STYLE.get(r.status, '')}]{r.status}[/]", _esc(ev),
                  "–" if ratio != ratio else f"{ratio:.2g}", f"{r.seconds:.2f}", _esc(short(text_of(r.message), 160)))
    return t


def _totals(results, seconds: float) -> str:
    """pytest's last line: ``51 claims: 42 verified, 9 evidence, 0 refuted in 4 min 12 s``."""
    from proofs_checks.output.terminal import totals_line

    line = totals_line([r.status for r in results], seconds)
    worst = next((s for s in ("refuted", "error", "incomplete", "undecided", "inconclusive")
                  if any(r.status == s for r in results)), "verified")
    return f"[{STATUS_STYLE.get(worst, '')}]{_esc(line)}[/]"


def _layer_cell(m, layer: str) -> str:
    """One kill-matrix cell of the mutants table: the best margin among the layer's rejecting
    checks (green ≥ 3), else what its checks did."""
    from proofs_checks.output.report import margin_text

    outs = [o for o in m.outcomes if o.layer == layer]
    if not outs:
        return ""
    best = m.rejected_by_layer().get(layer)
    if best is not None:
        return f"[{'green' if best >= 3 else 'yellow'}]{margin_text(best)}[/]"
    states = {o.status for o in outs}
    if "error" in states:
        return "[magenta]crashed[/]"
    if states == {"skipped"}:
        return "[dim]skipped[/]"
    return "[dim]no[/]"


def _mutant_table(res, summary: dict[str, Any] | None, mode: str):
    killed = sum(r.killed for r in res)
    title = f"mutants ({mode} sizes): {killed}/{len(res)} killed"
    if summary:
        ov = summary.get("overall") or {}
        title += f"; {ov.get('non_symbolic_margin_ge_3', 0)} rejected by a numeric or trained check with margin ≥ 3"
    one = len({r.claim for r in res}) == 1  # one claim: named in the title; several: a bold row each
    if one:
        title = f"{res[0].claim}: {title}"
    # a mutant's name never cut mid-word, nor the check that killed it where the row leaves room for
    # it (kind ≤ 12, margins 8; rich would otherwise truncate): the other columns fold
    names = [len(r.mutant) + (0 if one else 2) for r in res] or [0]
    killers = [len(str(r.killed_by or "")) for r in res] or [0]
    room = max(names) + max(killers) + 10 + 8 * len(LAYERS) + 3 * (len(LAYERS) + 3) + 1 <= _console().width
    t = _table(title, ("mutant", "kind", *LAYERS, "killed by"), no_wrap=("mutant", "killed by") if room else ("mutant",))
    t.columns[1].max_width = 12  # "hypothesis dropped" on two lines: the names keep their room
    claim = None
    for r in res:
        if not one and r.claim != claim:
            claim = r.claim
            t.add_row(f"[bold]{_esc(claim)}[/]", *[""] * (len(LAYERS) + 2))
        refused = getattr(r, "refused", "")
        t.add_row(("" if one else "  ") + r.mutant, r.kind, *(_layer_cell(r, L) for L in LAYERS),
                  "[bold red]not counted: claim not verified[/]" if refused else
                  (_esc(r.killed_by) if r.killed else "[bold red]SURVIVED[/]"))
    return t


#: printed under the mutants table (wrapped with a hanging indent: a rich caption is centred)
MUTANT_CELLS = "cells: best margin error/tolerance among the layer's checks that rejected the mutant (∞: exact mismatch)"


def _mutants_document(res, claims, *, mode: str, seed: int, device: str) -> dict[str, Any]:
    from proofs_checks.output.report import mutant_kill_summary

    return {"tool": "tverify", "command": _command_line(), "mode": mode, "seed": seed, "device": device,
            "total": len(res), "killed": sum(r.killed for r in res),
            "survived": [f"{r.claim}:{r.mutant}" for r in res if not r.killed],
            "summary": mutant_kill_summary(res, {c.id: c.kind for c in claims}),
            "mutants": [r.to_json() for r in res]}
