"""Pieces shared by the ``tverify check`` subcommands: the ``--json`` option, JSON output and
the text/JSON emission of a result with its :class:`~proofs_checks.sanity._verdict.Verdict`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from proofs_checks.options import UsageError
from proofs_checks.sanity._verdict import Verdict, _jsonable

__all__ = ["json_path_option", "check_options", "check_json_target", "emit", "timeout_option", "finite_timeout",
           "sanity_payload", "sanity_rebuild", "verdict_fields", "VerdictOutcome"]


def _remember_force(ctx, param, value):
    ctx.meta["tverify.force"] = bool(value)
    return value


def json_path_option(f):
    """``--json PATH|-`` as under ``run`` (``PATH`` or ``-`` for stdout); a bare ``--json`` (the
    older flag spelling) also means stdout. With it ``--force``: replace an existing ``--json``
    file that is not a previous tverify JSON output (otherwise refused before any work); it is
    not passed to the command function (read by :func:`check_json_target`)."""
    f = click.option("--force", "json_force", is_flag=True, expose_value=False, callback=_remember_force,
                     help="Replace the --json file even if it is not a previous tverify JSON output.")(f)
    from proofs_checks.options import reserve_stdout

    return click.option("--json", "json_path", metavar="PATH|-", default=None, is_flag=False, flag_value="-",
                        callback=reserve_stdout, help="Write the result as JSON to PATH ('-', or --json alone: stdout).")(f)


def check_json_target(json_path: str | None) -> None:
    """Refuse, before any work, a ``--json`` target that cannot be written as a file (empty, a
    folder, a name ending in '/', a device, read-only, under a file), or ``--json -`` with the standard output closed
    from the start (``>&-``): a usage error, one line."""
    from proofs_checks.options import refuse_closed_stdout_json

    refuse_closed_stdout_json(json_path)
    if json_path is None or json_path == "-":
        return
    from proofs_checks.owned import check_json_file

    ctx = click.get_current_context(silent=True)
    check_json_file(json_path, bool(ctx is not None and ctx.meta.get("tverify.force")), "check")


def _report_message(exc: Exception) -> str:
    """A ``--out`` refusal of :mod:`proofs_checks.output.report` said for ``--report`` (which has no
    ``--force``): complete sentences, nothing cut off."""
    msg = str(exc).replace("--out", "--report")
    msg = msg.replace(", or add --force to replace it", "").replace(" or add --force to replace it", "")
    msg = msg.replace("Choose a new folder", "Choose a new folder (or delete this one yourself)")
    return msg.rstrip(",; ")


def _write_json(path: str, doc: dict) -> None:
    text = json.dumps(_jsonable({"tool": "tverify", **doc} if path != "-" else doc), indent=1, allow_nan=False)
    if path == "-":
        from proofs_checks.options import echo_json

        echo_json(text)
        return
    from proofs_checks.owned import write_json_text

    ctx = click.get_current_context(silent=True)
    try:  # checked again just before (proofs_checks.owned), written, recorded
        write_json_text(path, text + "\n", bool(ctx is not None and ctx.meta.get("tverify.force")), "check")
    except OSError as exc:
        raise UsageError(f"--json: cannot write {path}: {exc.strerror or exc}") from None


def verdict_fields(verdict: Verdict) -> dict:
    """The verdict's keys in a check's JSON document: ``outcome``, ``verdict`` (the summary), ``ok`` and
    ``decision`` (the whole verdict)."""
    return {"outcome": verdict.outcome, "verdict": verdict.summary, "ok": verdict.ok, "decision": verdict.to_json()}


class VerdictOutcome:
    """``ok``, ``outcome`` and ``exit_code`` of a check's result object, read from its ``verdict``
    (:class:`SanityResult`, :class:`proofs_checks.sanity.icl_model.ICLModelResult`)."""

    verdict: Verdict

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def outcome(self) -> str:
        return self.verdict.outcome

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


def emit(doc: dict, verdict: Verdict, text_lines: list[str], json_path: str | None) -> None:
    """Add the verdict to ``doc`` (``outcome``, ``verdict`` = the summary, ``ok``, ``decision`` =
    the whole verdict), print the text (to stderr, reduced to the verdict, when the JSON goes to
    stdout), write the JSON, and exit with the verdict's code (0 ok, 1 mismatch, 3 inconclusive).
    Every line is wrapped to ``COLUMNS`` (else the terminal's width; piped without it, not wrapped) keeping its indentation;
    a table row continues under its last column (:func:`proofs_checks.output.wraptext.wrap_lines`);
    braced scripts read as in statements (``Γ_N^{-1}`` → ``Γ_N^(−1)``)."""
    from proofs_checks.output.wraptext import unbrace_scripts, width, wrap_lines

    doc.update(verdict_fields(verdict))
    shown = verdict.lines() if json_path == "-" else text_lines + verdict.lines()
    stream = sys.stderr if json_path == "-" else sys.stdout
    cols = width(stream, fallback=None)  # piped without COLUMNS: whole lines (for grep)
    if json_path and json_path != "-":  # the file first: a standard output that fails (a full disk, a closed pipe)
        _write_json(json_path, doc)  # lost it, as run, sweep and reproduce never did (hostile pass 54b F10)
    for line in wrap_lines([unbrace_scripts(str(ln)) for ln in shown], cols):  # Γ_N^{-1}: Γ_N^(−1)
        click.echo(line, err=json_path == "-")
    if json_path == "-":
        _write_json(json_path, doc)
    sys.stdout.flush()
    raise SystemExit(verdict.exit_code)


def finite_timeout(value, name: str = "--timeout") -> float | None:
    """``None`` or a positive finite number of seconds (NaN, inf and 1e308-like values that no clock
    reaches are refused: at most 10⁷ s); raises :class:`~proofs_checks.options.UsageError`.

    >>> finite_timeout("2.5"), finite_timeout(None)
    (2.5, None)
    """
    import math

    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name}: expected a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not (math.isfinite(v) and 0 < v <= 1e7):
        raise UsageError(f"{name}: expected seconds > 0 and at most 1e7 (finite), got {value!r}")
    return v


def _timeout(ctx, param, value):
    return finite_timeout(value, "--timeout")


def timeout_option(f):
    """``--timeout SECONDS``: stop the process running the user's code after that long (one line,
    exit 2); see :mod:`proofs_checks.sanity._isolate`."""
    return click.option("--timeout", "timeout", type=float, default=None, metavar="SECONDS", callback=_timeout,
                        help="Stop the check (and your code, which runs in its own process) after SECONDS: one line, "
                             "exit 2. Default: no limit; a line on stderr every few seconds while it runs.")(f)


def check_options(f=None, *, no_sizes: str | None = None):
    """The options every ``tverify check`` subcommand shares: seed, device, sizes, --json,
    --max-memory, --no-progress; ``no_sizes``: why --quick/--full change nothing for this check (its help says so:
    hostile pass 54a F4)."""
    if f is None:
        return lambda g: check_options(g, no_sizes=no_sizes)
    import functools

    from proofs_checks import guards
    from proofs_checks.options import device_option, mode_options, seed_option

    for deco in (guards.no_progress_option, guards.max_memory_option, json_path_option,
                 functools.partial(mode_options, no_sizes=no_sizes), device_option, seed_option):
        f = deco(f)
    return f


# ------------------------------------------------------------------------------------------------
# property tables, result objects and --report (shared by the own-model checks: attention,
# hopfield, att-svm --weights; icl may adopt them)

__all__ += ["precision_named"]
__all__ += ["SanityResult", "properties_verdict", "report_option", "compute_dtype_option", "check_report_dir", "write_check_report",
            "finish"]

_STATUS_MARK = {"pass": "ok", "fail": "FAIL", "skip": "skip", "info": "info"}


def _num(x) -> str:
    if x is None:
        return "—"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    return f"{v:.3g}"


class SanityResult(VerdictOutcome):
    """The result of a ``tverify check`` (CLI and Python API alike): the JSON document ``doc``, the
    :class:`Verdict`, the named ``properties`` (dicts with ``name``, ``status`` pass/fail/skip,
    ``error``, ``tolerance``, ``justification``, ``detail``; ``info`` rows are reported, not judged), the text ``lines`` printed above the
    table, and ``figures`` (callables returning a matplotlib figure, for ``--report``).

    It renders as a text table (``str``), an HTML table in a notebook (``_repr_html_``), Markdown
    (:meth:`to_markdown`) and JSON (:meth:`to_json`).

    >>> v = Verdict("ok", "fine", "all hold")
    >>> r = SanityResult("demo", {}, v, [{"name": "p", "status": "pass", "error": 0.0, "tolerance": 1e-12,
    ...                                   "justification": "exact", "detail": ""}])
    >>> r.ok, r.exit_code, r.to_json()["properties"][0]["name"]
    (True, 0, 'p')
    >>> print(str(r).splitlines()[0])
    tverify check demo: ok: fine
    """

    def __init__(self, check: str, doc: dict, verdict: Verdict, properties: list[dict] | None = None,
                 lines: list[str] | None = None, figures: dict | None = None):
        self.check = check
        self.verdict = verdict
        self.properties = list(properties or [])
        self.lines = list(lines or [])
        self.figures = dict(figures or {})
        self.doc = doc
        doc.setdefault("check", check)
        if self.properties:
            doc["properties"] = self.properties
        doc.update(verdict_fields(verdict))

    @property
    def failed(self) -> list[str]:
        """Names of the properties that failed."""
        return [p["name"] for p in self.properties if p.get("status") == "fail"]

    def to_json(self) -> dict:
        """The JSON document (what ``--json`` writes; NaN/inf become ``null``)."""
        return _jsonable(self.doc)

    def table(self) -> str:
        """The property table as fixed-width text."""
        if not self.properties:
            return ""
        rows = [("property", "status", "error", "tolerance", "detail")]
        rows += [(p["name"], _STATUS_MARK.get(p["status"], p["status"]), _num(p.get("error")), _num(p.get("tolerance")),
                  p.get("detail") or "") for p in self.properties]
        w = [max(len(r[i]) for r in rows) for i in range(4)]
        out = ["  ".join(r[i].ljust(w[i]) for i in range(4)) + "  " + r[4] for r in rows]
        out.insert(1, "  ".join("-" * w[i] for i in range(4)) + "  " + "-" * 6)
        return "\n".join(s.rstrip() for s in out)

    def text_lines(self) -> list[str]:
        tab = self.table()
        return self.lines + (tab.splitlines() if tab else [])

    def __str__(self) -> str:
        head = f"tverify check {self.check}: {self.outcome}: {self.verdict.summary}"
        body = self.text_lines()
        return "\n".join([head] + body + self.verdict.lines()[1:])

    def __repr__(self) -> str:
        return f"<SanityResult check={self.check!r} outcome={self.outcome!r} failed={self.failed!r}>"

    def to_markdown(self) -> str:
        esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
        out = [f"# tverify check {self.check}", "", f"**{self.outcome}**: {esc(self.verdict.summary)}", "",
               f"Criterion: {esc(self.verdict.criterion)}", ""]
        if self.properties:
            out += ["| property | status | error | tolerance | justification | detail |", "|---|---|---|---|---|---|"]
            out += [f"| {esc(p['name'])} | {_STATUS_MARK.get(p['status'], p['status'])} | {_num(p.get('error'))} | "
                    f"{_num(p.get('tolerance'))} | {esc(p.get('justification') or '')} | {esc(p.get('detail') or '')} |"
                    for p in self.properties]
            out.append("")
        if self.lines:
            out += ["```", *self.lines, "```", ""]
        out += [f"![{n}](figures/{n}.png)" for n in self.figures]
        return "\n".join(out) + "\n"

    def _repr_html_(self) -> str:
        import html

        e = html.escape
        color = {"ok": "#1a7f37", "mismatch": "#cf222e", "inconclusive": "#9a6700"}.get(self.outcome, "#000")
        out = [f"<div><b>tverify check {e(self.check)}</b>: <span style='color:{color}'><b>{e(self.outcome)}</b></span>"
               f" — {e(self.verdict.summary)}"]
        if self.properties:
            out.append("<table><tr><th>property</th><th>status</th><th>error</th><th>tolerance</th>"
                       "<th>justification</th><th>detail</th></tr>")
            for p in self.properties:
                c = {"pass": "#1a7f37", "fail": "#cf222e"}.get(p["status"], "#6e7781")
                out.append(f"<tr><td>{e(p['name'])}</td><td style='color:{c}'>{e(p['status'])}</td>"
                           f"<td>{_num(p.get('error'))}</td><td>{_num(p.get('tolerance'))}</td>"
                           f"<td>{e(p.get('justification') or '')}</td><td>{e(p.get('detail') or '')}</td></tr>")
            out.append("</table>")
        if self.lines:
            out.append("<pre>" + e("\n".join(self.lines)) + "</pre>")
        out.append(f"<small>criterion: {e(self.verdict.criterion)}</small></div>")
        return "\n".join(out)


def properties_verdict(properties: list[dict], subject: str) -> Verdict:
    """``ok`` when no property failed, else ``mismatch`` naming the failed ones (a skipped property
    is listed, never counted as passed).

    >>> properties_verdict([{"name": "a", "status": "pass"}, {"name": "b", "status": "fail"}], "x").summary
    'x violates: b'
    """
    failed = [p["name"] for p in properties if p["status"] == "fail"]
    passed = [p["name"] for p in properties if p["status"] == "pass"]
    skipped = [p["name"] for p in properties if p["status"] == "skip"]
    numbers = {"passed": passed, "failed": failed, "skipped": skipped}
    crit = (f"{len(passed)} propert{'y' if len(passed) == 1 else 'ies'} within tolerance, {len(failed)} beyond"
            + (f", {len(skipped)} not applicable ({', '.join(skipped)})" if skipped else "")
            + "; each error is compared with its stated tolerance")
    if failed:
        bad = sorted((p for p in properties if p["status"] == "fail"),
                     key=lambda p: p["name"] != "precision_as_declared")
        fits = [(p.get("numbers") or {})["fits"] for p in bad if (p.get("numbers") or {}).get("fits")]
        sugg = (f"if {fits[0]} is intended, declare --compute-dtype {fits[0]} (the other properties were judged at "
                f"{fits[0]}: " + ("they hold)" if len(bad) == 1 else "the others fail there too)") if fits else None)
        return Verdict("mismatch", f"{subject} violates: {', '.join(precision_named(p) for p in bad)}", crit, numbers,
                       suggestion=sugg)
    return Verdict("ok", f"{subject}: all {len(passed)} checked properties hold", crit, numbers)


def precision_named(p: dict) -> str:
    """A failed property's name in a verdict line; ``precision_as_declared`` with the precision found
    (its ``numbers``: ``fits``, ``declared``).

    >>> precision_named({"name": "precision_as_declared", "numbers": {"fits": "float32", "declared": "float64"}})
    'precision_as_declared (it computes in float32, not float64)'
    """
    fits = (p.get("numbers") or {}).get("fits")
    return p["name"] + (f" (it computes in {fits}, not {p['numbers'].get('declared')})" if fits else "")


def compute_dtype_option(help: str):
    """``--compute-dtype``: the precision the user's code computes in (``help``: what it changes for this check)."""
    return click.option("--compute-dtype", "compute_dtype", default=None, metavar="[float16|bfloat16|float32|float64]",
                        help=help)


def report_option(f):
    """``--report DIR``: write report.html, report.md, report.json (and figures) into DIR."""
    return click.option("--report", "report_dir", metavar="DIR", default=None,
                        help="Also write an HTML/Markdown/JSON report (with figures) into DIR: a new folder or a "
                             "previous check report (replaced atomically); any other non-empty folder is refused.")(f)


def check_report_dir(report_dir: str | None, json_path: str | None = None) -> None:
    """Refuse, before any work, a ``--report`` folder that holds files a report did not write (and
    a ``--json`` file inside it, which the report would replace)."""
    if report_dir is None:
        return
    from proofs_checks.output.report import ReportTargetError, check_report_target

    from proofs_checks.store import name_problem

    problem = name_problem(report_dir)
    if problem:
        raise UsageError(f"--report {report_dir[:60]}: {problem}; nothing was run")
    try:
        out = check_report_target(report_dir, made_by="check")
    except ReportTargetError as exc:
        raise UsageError(_report_message(exc)) from None
    from proofs_checks.output.report import json_inside

    if json_inside(json_path, out):
        raise UsageError(f"--json {json_path}: inside --report {report_dir}, which the report replaces; "
                         "write it elsewhere")


def write_check_report(report_dir: str | Path, result: SanityResult) -> Path:
    """Write ``report.json``, ``report.md``, ``report.html`` and ``figures/*.png`` for ``result`` into
    ``report_dir``: built in a temporary sibling folder and swapped into place, stamped with the
    marker of :mod:`proofs_checks.output.report` (so a later report may replace it, nothing else may)."""
    from proofs_checks.output import report as rp

    def fill(tmp: Path) -> None:
        (tmp / "report.json").write_text(json.dumps(result.to_json(), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        figs = []
        if result.figures:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            (tmp / "figures").mkdir()
            for name, make in result.figures.items():
                if isinstance(make, (str, Path)):  # drawn by the check's own process (proofs_checks.sanity._isolate)
                    import shutil

                    try:
                        shutil.copyfile(make, tmp / "figures" / f"{name}.png")
                        figs.append(name)
                    except OSError as exc:
                        result.lines.append(f"(figure {name} not copied: {exc.strerror or exc})")
                    continue
                try:
                    fig = make()
                    fig.savefig(tmp / "figures" / f"{name}.png", dpi=100, bbox_inches="tight")
                    plt.close(fig)
                    figs.append(name)
                except Exception as exc:  # a figure is decoration: say so in the report, do not fail
                    result.lines.append(f"(figure {name} not drawn: {type(exc).__name__}: {exc})")
        keep = result.figures
        result.figures = {n: keep[n] for n in figs}
        (tmp / "report.md").write_text(result.to_markdown(), encoding="utf-8")
        page = ("<!doctype html><html><head><meta charset='utf-8'><title>tverify check "
                f"{result.check}</title></head><body>{result._repr_html_()}"
                + "".join(f"<p><img src='figures/{n}.png' alt='{n}'></p>" for n in figs) + "</body></html>\n")
        (tmp / "report.html").write_text(page, encoding="utf-8")
        result.figures = keep

    stamp = {"command": f"check {result.check}",
             "note": "written by tverify check --report; the next report may replace this folder if it holds only these files"}
    return rp.build_output(Path(report_dir), fill, stamp, option="--report", made_by="check")


def finish(result: SanityResult, json_path: str | None, report_dir: str | None = None) -> None:
    """Print the result (text and table; only the verdict on stderr when the JSON goes to stdout),
    write ``--json`` and ``--report``, and exit with the verdict's code."""
    if report_dir:
        from proofs_checks.output.report import ReportTargetError

        try:
            path = write_check_report(report_dir, result)
        except ReportTargetError as exc:
            raise UsageError(_report_message(exc)) from None
        except OSError as exc:
            raise UsageError(f"--report: cannot write {report_dir}: {exc.strerror or exc}") from None
        result.doc["report"] = str(path)
    lines = result.text_lines() + ([f"report written to {result.doc['report']}"] if report_dir else [])
    emit(result.doc, result.verdict, lines, json_path)



# ------------------------------------------------------------------------------------------------
# a result across the process boundary (proofs_checks.sanity._isolate)


def sanity_payload(result: SanityResult, req: dict, subject: str) -> dict:
    """In the child: what the parent needs to rebuild ``result`` (JSON-able; figures drawn to PNG
    when the parent asked for them)."""
    from proofs_checks.sanity._isolate import draw_figures

    figs = draw_figures(result.figures, result.lines, req)
    return {"kind": "sanity", "check": result.check, "doc": result.doc, "properties": result.properties,
            "lines": result.lines, "subject": subject, "figures": figs}


def sanity_rebuild(payload: dict, verdict: Verdict) -> SanityResult:
    """In the parent: the :class:`SanityResult` of a payload with ``verdict`` (computed here from its
    rows); ``figures`` are the PNG paths the child drew (``figures_dir``: removed by
    :func:`proofs_checks.sanity._isolate.cleanup`)."""
    res = SanityResult(payload["check"], payload["doc"], verdict, payload["properties"], payload["lines"],
                       {n: Path(p) for n, p in (payload.get("figures") or {}).items()})
    res.figures_dir = payload.get("figures_dir")
    return res
