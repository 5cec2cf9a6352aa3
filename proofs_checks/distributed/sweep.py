"""``tverify sweep``: a target measured over a grid of configurations, in-process or on a Dask cluster.

A *target* is a claim id with a **sweep adapter** (:mod:`~proofs_checks.distributed.sweep_adapters`), or a sanity check (``check icl``,
``check att-svm``, ``check hopfield``, … any ``tverify check`` subcommand). ``--grid "N=5,10,20
M=5,10,40"`` names parameters and their values; every grid point is run ``--seeds K`` times with
replicate seeds ``0 … K−1``. The result is a table with one row per grid point and replicate,
every measured number in it (:func:`run_sweep`), written as ``results.json``, ``results.csv``
(and ``results.parquet`` when pyarrow is importable) and ``index.html`` (heatmaps over two
parameters, curves along one) by :func:`write_sweep`.

**Seeds.** Row ``(point, replicate r)`` runs with the seed ``RunContext(seed=base).for_check(target,
"sweep").seed_for("replicate", r)``: it depends on the target, the base seed and ``r`` only (not on
the grid point, so the points of one replicate share their random numbers, and never on the worker
or the order), so ``--cluster`` writes the same numbers as an in-process sweep.

**Claim adapters.** A claim's checks are fixed-size declarations; to sweep a claim, register a
:class:`ClaimAdapter` in :data:`ADAPTERS`: its parameters (name, parser, default, help) and a
function ``fn(params, ctx) -> dict`` returning the measured numbers at one grid point, computed
with the public functions of ``theory/`` and ``numerics/`` (the same references the claim's checks
use) and compared with the closed form under the suite's tolerance rule; ``verdict`` is ``pass`` or
``fail``. ``ctx`` is a :class:`~proofs_checks.context.RunContext` bound to the row's seed; draw
every random number from ``ctx.rng(...)`` / ``ctx.seed_for(...)`` with keys naming what it is for::

    def _my_claim(p, ctx):
        x = ctx.rng("data", p["n"]).normal(size=p["n"])
        return {"measured": ..., "closed_form": ..., "verdict": "pass" if ... else "fail"}

    register_adapter(ClaimAdapter("group.my_claim", _my_claim,
                                  (Param("n", _int(2), 1000, "sample size"),), "what one row measures"))

**Sanity adapters.** ``check TOPIC`` runs the sanity command itself, once per row, with each grid
parameter as its option (``N=5`` → ``--N 5``; the accepted names are the command's own options),
``--seed`` the row's seed, ``--quick``/``--full`` and ``--device`` from the sweep, and reads its
JSON; every number in it (outside ``inputs`` and ``resources``) is a column, and the verdict is
its outcome (ok / mismatch / inconclusive). A :class:`SanityAdapter` in :data:`SANITY` only adds
defaults (e.g. a Λ for ``check icl``) and names the headline columns for the page.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from pathlib import Path
from typing import Any

import click

from proofs_checks.options import UsageError
from theory.validation import InputError

from proofs_checks.distributed.sweep_adapters import (ADAPTERS, SANITY, _SANITY_OWN, ClaimAdapter,  # noqa: F401
                                                      Param, SanityAdapter, _choice, _int, _size, register_adapter)
from proofs_checks.distributed.sweep_document import (csv_text, exit_code, render_html, sweep_document,  # noqa: F401
                                                      write_sweep)

__all__ = ["Param", "ClaimAdapter", "SanityAdapter", "ADAPTERS", "SANITY", "register_adapter", "parse_grid",
           "resolve_target", "row_seed", "plan_rows", "plan_tasks", "run_sweep", "sweep_document", "write_sweep", "sweep_row",
           "count_rows", "check_plan", "iter_rows", "PlanEstimate", "RowRefused", "ROW_BYTES"]


# ------------------------------------------------------------------------------------------------
# targets and the grid


@dataclass
class Target:
    """A resolved sweep target: ``name`` as the user wrote it, ``kind`` (claim / check), the
    accepted parameters (name → help), and how to run a row."""

    name: str
    kind: str
    key: str  # claim id, or sanity topic
    accepted: dict[str, str]
    uses_device: bool
    headline: tuple[str, ...]
    curves: tuple[tuple[str, str], ...]


def _sanity_command(topic: str):
    from proofs_checks.console import LazySanityGroup as _LazySanityGroup

    grp = _LazySanityGroup()
    return grp.get_command(None, topic), sorted(grp.list_commands(None))


def _sanity_params(cmd) -> dict[str, str]:
    out = {}
    for p in cmd.params:
        if isinstance(p, click.Option) and p.name not in _SANITY_OWN:
            flag = next((o for o in p.opts if o.startswith("--")), p.opts[0]).lstrip("-")
            out[flag] = _first_sentence(p.help or "")
    return out


def _first_sentence(text: str) -> str:
    """The first sentence of an option's help: up to the first ". " that ends a sentence, not one that ends an
    abbreviation ("e.g. ", "i.e. ", "cf. ": hostile pass 55b F1 cut "… function, e.g")."""
    import re

    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bcf)(?<!\betc)\.\s", text)
    return text[:m.start()] if m else text


def resolve_target(words: tuple[str, ...] | list[str]) -> Target:
    """``("icl.linear_task_risk",)``, ``("check", "icl")`` or ``("check icl",)`` → a :class:`Target`.
    Unknown targets, and claims without a sweep adapter, are usage errors naming what exists."""
    words = " ".join(words).split()
    if not words:
        raise UsageError(f"sweep: give a TARGET: a claim id ({', '.join(sorted(ADAPTERS))}) or `check TOPIC`")
    if words[0] == "check" or words[0].startswith("check:"):
        topic = words[1] if words[0] == "check" and len(words) > 1 else words[0][6:]
        if not topic or len(words) > (2 if words[0] == "check" else 1):
            raise UsageError(f"sweep: write the target as `check TOPIC` (got {' '.join(words)!r})")
        cmd, topics = _sanity_command(topic)
        if cmd is None:
            missing = " (its module is not there yet)" if topic in SANITY else ""
            raise UsageError(f"sweep: no sanity check {topic!r}{missing}; available: "
                             + ", ".join(f"check {t}" for t in topics))
        ad = SANITY.get(topic, SanityAdapter(topic))
        return Target(f"check {topic}", "check", topic, _sanity_params(cmd), True, ad.headline, ad.curves)
    if len(words) != 1:
        raise UsageError(f"sweep: one TARGET (a claim id or `check TOPIC`), got {' '.join(words)!r}")
    cid = words[0]
    ad = ADAPTERS.get(cid)
    if ad is None:
        from proofs_checks.registry import UnknownClaimError, get_claim

        try:
            get_claim(cid)
        except UnknownClaimError:
            raise UsageError(f"sweep: no claim {cid!r}; claims with a sweep adapter: {', '.join(sorted(ADAPTERS))}; "
                             "or `check TOPIC`") from None
        raise UsageError(f"sweep: claim {cid} has no sweep adapter (see proofs_checks/distributed/sweep.py); claims with one: "
                         f"{', '.join(sorted(ADAPTERS))}")
    return Target(cid, "claim", cid, {p.name: p.help for p in ad.params}, ad.uses_device, ad.headline, ad.curves)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def parse_grid(texts: str | list[str] | tuple[str, ...]) -> dict[str, list[str]]:
    """``"N=5,10,20 M=5,10,40"`` → ``{"N": ["5", "10", "20"], "M": [...]}`` (values as text, in
    order). Axes are separated by spaces (``--grid`` may also be repeated); values by commas, or by
    ``|`` when a value itself holds commas (``lambda=1,2|2,0.5;0.5,1``; one such value ends with ``|``:
    ``f=-x,-y|``). An empty grid, a missing
    ``=``, an empty name or value, a repeated axis or value is a :class:`UsageError`."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    grid: dict[str, list[str]] = {}
    for text in texts:
        for part in str(text).split():
            if "=" not in part:
                raise UsageError(f"--grid: {part!r} is not NAME=VALUES (e.g. --grid \"N=5,10 M=5,20\")")
            name, _, vals = part.partition("=")
            if not _NAME.match(name):
                raise UsageError(f"--grid: {name!r} is not a parameter name (in {part!r})")
            if name in grid:
                raise UsageError(f"--grid: {name} is given twice")
            values = vals.split("|") if "|" in vals else vals.split(",")
            if "|" in vals and len(values) > 1 and values[-1] == "":  # "f=-x,-y|": one value holding commas (55b F5)
                values.pop()
            if not vals or any(v == "" for v in values):
                raise UsageError(f"--grid {part}: an empty value (values are separated by commas, or by | when a "
                                 "value holds commas; one value holding commas ends with |: f=-x,-y|)")
            if len(set(values)) != len(values):
                raise UsageError(f"--grid {part}: a value is repeated")
            grid[name] = values
    if not grid:
        raise UsageError('--grid: empty (give NAME=VALUES, e.g. --grid "N=5,10 M=5,20")')
    return grid


def _parse_point_values(target: Target, grid: dict[str, list[str]]) -> dict[str, list[Any]]:
    """Check the grid's names against the target and parse its values (claim targets: each
    parameter's parser; sanity targets: the command's own option types, in :func:`_validate_sanity`)."""
    unknown = [n for n in grid if n not in target.accepted]
    if unknown:
        raise UsageError(f"--grid: unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for "
                         f"{target.name}; accepted: {', '.join(target.accepted)}")
    if target.kind == "check":
        return {k: list(v) for k, v in grid.items()}
    params = {p.name: p for p in ADAPTERS[target.key].params}
    out = {}
    for name, vals in grid.items():
        parsed = []
        for v in vals:
            try:
                parsed.append(params[name].parse(v))
            except ValueError as exc:
                raise UsageError(f"--grid {name}={v}: {exc}") from None
        same = [(a, b) for i, a in enumerate(vals) for b in vals[i + 1:] if parsed[vals.index(a)] == parsed[vals.index(b)]]
        if same:  # 01, 1 and +1 are one value: the same point run again (hostile pass 44b F13)
            raise UsageError(f"--grid {name}: a value is repeated ({same[0][0]} and {same[0][1]} are both "
                             f"{parsed[vals.index(same[0][0])]})")
        out[name] = parsed
    return out


def row_seed(target: str, base_seed: int, replicate: int) -> int:
    """The seed of every row of replicate ``replicate`` (see the module docstring)."""
    from proofs_checks.context import RunContext

    return RunContext(seed=base_seed).for_check(target, "sweep").seed_for("replicate", replicate)


@dataclass(frozen=True)
class RowSpec:
    """One row to run: the target, the grid point (given parameters only), replicate and seed."""

    target: str
    kind: str
    key: str
    point: tuple[tuple[str, Any], ...]
    replicate: int
    seed: int
    mode: str
    device: str
    max_memory: float | None = None


#: Memory one row of results takes until the sweep's files are written (the row, its JSON, CSV and
#: HTML text, the table printed): a generous measured bound, so the plan is refused before it runs.
ROW_BYTES = 16 * 1024


def count_rows(grid: dict[str, list[str]], seeds: int) -> int:
    """Rows of the plan, counted without building it: ``∏ len(values) × seeds``."""
    n = int(seeds)
    for vals in grid.values():
        n *= len(vals)
    return n


@dataclass
class PlanEstimate:
    """What a sweep will take, known before it runs: ``rows``, ``tasks``, peak ``bytes`` (rows kept
    plus the largest row's own peak) and ``seconds`` (``None`` when the target gives no estimate)."""

    rows: int
    bytes: float
    seconds: float | None
    row_peak: float = 0.0


def _largest_point(values: dict[str, list[Any]]) -> dict[str, Any]:
    out = {}
    for k, vs in values.items():
        nums = [v for v in vs if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[k] = max(nums) if len(nums) == len(vs) else vs[0]
    return out


def check_plan(target: Target, grid: dict[str, list[str]], *, seeds: int, mode: str, device: str,
               max_memory: float | None) -> PlanEstimate:
    """Refuse (UsageError, one line, exit 2) a plan whose rows, or whose largest row, would not fit
    in ``max_memory`` GB (default: half the available memory), before a row is built; returns the
    estimate (rows, bytes, seconds) for the progress line."""
    from proofs_checks.context import RunContext
    from proofs_checks.guards import fmt_bytes, require_memory

    if device != "cpu" and not target.uses_device:
        raise UsageError(f"--device {device}: sweep {target.name} computes on the CPU only; use --device cpu")
    n = count_rows(grid, seeds)
    shape = " × ".join(str(len(v)) for v in grid.values())
    require_memory(n * ROW_BYTES, max_memory,
                   f"sweep {target.name}: {n:,} rows ({shape} grid points × {seeds} seed(s)), each kept for "
                   f"results.json, CSV and HTML (about {fmt_bytes(ROW_BYTES)} a row),",
                   "use fewer grid values or --seeds, or split the sweep")
    seconds = None
    peak = 0.0
    ad = ADAPTERS.get(target.key) if target.kind == "claim" else None
    if ad is not None and ad.estimate is not None:
        values = _parse_point_values(target, grid)
        ctx = RunContext(mode=mode, device=device).for_check(target.key, "sweep")
        params = {p.name: (p.default(ctx) if callable(p.default) else p.default) for p in ad.params}
        params.update(_largest_point(values))
        peak, per_row = ad.estimate(params)
        pt = " ".join(f"{k}={params[k]}" for k in values)
        require_memory(peak, max_memory, f"sweep {target.name}: its largest row ({pt})",
                       "use smaller values on the grid")
        seconds = per_row * n
    return PlanEstimate(n, n * ROW_BYTES + peak, seconds, peak)


def iter_rows(target: Target, grid: dict[str, list[str]], *, seeds: int, base_seed: int, mode: str, device: str,
              max_memory: float | None = None):
    """The plan's rows one at a time, in the order of :func:`plan_rows` (nothing materialised)."""
    values = _parse_point_values(target, grid)
    names = list(values)
    rseeds = [row_seed(target.name, base_seed, r) for r in range(seeds)]
    for combo in product(*(values[n] for n in names)):
        point = tuple(zip(names, combo))
        for r in range(seeds):
            yield RowSpec(target.name, target.kind, target.key, point, r, rseeds[r], mode, device, max_memory)


def _dry_run(spec: RowSpec) -> None:
    """Run a check's own input validation for one grid point under :func:`guards.dry_run`: it stops
    at its final memory guard, having read and validated its inputs; any refusal (a value it does
    not accept, sizes over --max-memory) is a :class:`RowRefused` before any row runs. A check
    without a memory guard runs to its end here (its values accepted)."""
    from proofs_checks import guards

    pt = " ".join(f"{k}={v}" for k, v in spec.point)
    with tempfile.TemporaryDirectory(prefix="tverify-dry-") as tmp:
        cmd, _ = _sanity_command(spec.key)
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), guards.dry_run():
                cmd.main(args=_sanity_args(spec, os.path.join(tmp, "dry.json")), prog_name=f"tverify check {spec.key}",
                         standalone_mode=False)
        except guards.DryRunStop:
            return
        except (SystemExit, click.exceptions.Exit):
            return  # the check ran to its end: its values were accepted
        except (click.ClickException, InputError) as exc:
            msg = " ".join((exc.format_message() if isinstance(exc, click.ClickException) else str(exc)).split())
            raise RowRefused(f"--grid ({pt}): check {spec.key} refuses these values: {msg[:400]}; nothing was "
                             "run") from None


def plan_rows(target: Target, grid: dict[str, list[str]], *, seeds: int, base_seed: int, mode: str,
              device: str, max_memory: float | None = None, dry_run: bool = False) -> list[RowSpec]:
    """Every (grid point, replicate) in grid order (the first axis slowest), replicates innermost;
    parameters checked (usage errors before anything runs): each value of each axis once, with the
    other axes at their first value (so the check costs the sum of the axes' lengths, not their
    product). Call :func:`check_plan` first: this builds the whole list."""
    values = _parse_point_values(target, grid)
    if target.kind == "check":
        names = list(values)
        probes, seen = [], set()
        for n in names:
            for v in values[n]:
                point = tuple((k, v if k == n else values[k][0]) for k in names)
                if point not in seen:
                    seen.add(point)
                    probes.append(RowSpec(target.name, target.kind, target.key, point, 0, 0, mode, device,
                                          max_memory))
        _validate_sanity(target, probes)
        if dry_run:  # the check's own validation of each value (a Λ that is not SPD, a bad file)
            for spec in probes:
                _dry_run(spec)
    return list(iter_rows(target, grid, seeds=seeds, base_seed=base_seed, mode=mode, device=device,
                          max_memory=max_memory))


@lru_cache(maxsize=None)
def _flag_names(topic: str) -> frozenset:
    """The check's flags (``--causal``): a grid value true/false sets one or leaves it out; as ``--causal 1`` click
    read the value as an extra argument (hostile pass 45b F6)."""
    cmd, _ = _sanity_command(topic)
    return frozenset(next((o for o in p.opts if o.startswith("--")), p.opts[0]).lstrip("-") for p in cmd.params
                     if isinstance(p, click.Option) and p.is_flag)


_TRUTH = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


def _sanity_args(spec: RowSpec, json_path: str | None) -> list[str]:
    ad = SANITY.get(spec.key, SanityAdapter(spec.key))
    given = dict(spec.point)
    args: list[str] = []
    flags = _flag_names(spec.key)
    for k, v in {**ad.defaults, **given}.items():
        if k in flags:
            if str(v).lower() not in _TRUTH:
                raise UsageError(f"{k} is a flag: give true or false (1/0, yes/no, on/off), got {v!r}")
            args += [f"--{k}"] if _TRUTH[str(v).lower()] else []
            continue
        args += [f"--{k}", str(v)]
    args += ["--seed", str(spec.seed), "--device", spec.device, "--no-progress"]
    if spec.max_memory is not None and "max-memory" not in given:
        args += ["--max-memory", repr(float(spec.max_memory))]
    if spec.mode != "default":
        args.append(f"--{spec.mode}")
    if json_path:
        args += ["--json", json_path]
    return args


_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:/\d+)?")


def _canonical(v: Any) -> Any:
    """A value the check parses itself, in one spelling: numbers as exact fractions (``1.0`` and ``1``, ``0.5`` and
    ``1/2``; the separators kept), a file by its real path; anything else as given (hostile pass 59b F1: the same
    point ran twice)."""
    import fractions

    if not isinstance(v, str):
        return v
    nums = _NUMBER.findall(v)
    shape = _NUMBER.sub("#", v).replace(" ", "")
    if nums and not re.search(r"[A-Za-z_]", shape):
        try:
            return ("numbers", shape, tuple(fractions.Fraction(n) for n in nums))
        except (ValueError, ZeroDivisionError):
            return v
    if os.path.isfile(v.split(":")[0]):
        return ("file", os.path.realpath(v.split(":")[0]), v.partition(":")[2])
    return v


def _validate_sanity(target: Target, rows: list[RowSpec]) -> None:
    """Parse every row's options with the sanity command's own parser (types, ranges, required
    options) without running it: a bad value is a usage error naming the grid parameter."""
    cmd, _ = _sanity_command(target.key)
    seen: set = set()
    parsed: dict[str, tuple] = {}  # the options a point parses to -> the point (5, 05 and +5 are one: 47b F6)
    for spec in rows:
        if spec.point in seen:
            continue
        seen.add(spec.point)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                ctx = cmd.make_context(f"check {target.key}", _sanity_args(spec, None), resilient_parsing=False)
        except click.MissingParameter as exc:
            name = exc.param.opts[0].lstrip("-") if exc.param is not None else "?"
            raise UsageError(f"sweep {target.name}: needs {name}=VALUE in --grid "
                             f"(accepted: {', '.join(target.accepted)})") from None
        except click.ClickException as exc:
            pt = " ".join(f"{k}={v}" for k, v in spec.point)
            raise UsageError(f"--grid ({pt}): {' '.join(exc.format_message().split())}") from None
        except click.exceptions.Exit:
            continue
        key = repr(sorted((k, repr(_canonical(v))) for k, v in ctx.params.items()))
        if key in parsed:
            a, b = (" ".join(f"{k}={v}" for k, v in pt) for pt in (parsed[key], spec.point))
            raise UsageError(f"--grid: ({a}) and ({b}) are the same point (a value is repeated, spelled otherwise): "
                             "it would run twice")
        parsed[key] = spec.point


# ------------------------------------------------------------------------------------------------
# running one row (in-process or on a worker)


def _flatten(doc: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Scalar leaves of a JSON document as ``{"a.b.c": value}`` (lists and long texts left out)."""
    out = {} if out is None else out
    if isinstance(doc, dict):
        for k, v in doc.items():
            _flatten(v, f"{prefix}{k}.", out)
    elif isinstance(doc, bool) or doc is None or isinstance(doc, (int, float)):
        out[prefix[:-1]] = doc
    elif isinstance(doc, str) and len(doc) <= 200:
        out[prefix[:-1]] = doc
    return out


class RowRefused(UsageError):
    """A sanity check refused a row's values (its exit 2): the whole sweep is a usage error."""


def _run_sanity(spec: RowSpec) -> dict[str, Any]:
    from proofs_checks.distributed.cluster import worker_scratch

    cmd, _ = _sanity_command(spec.key)
    # on a worker, inside the cluster's scratch folder: a worker killed by SIGTERM never cleans up (pass 10, F5)
    with tempfile.TemporaryDirectory(prefix="tverify-sweep-", dir=worker_scratch()) as tmp:
        jp = os.path.join(tmp, "row.json")
        code: Any = 0
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            try:
                cmd.main(args=_sanity_args(spec, jp), prog_name=f"tverify check {spec.key}", standalone_mode=False)
            except SystemExit as exc:
                code = exc.code
            except click.exceptions.Exit as exc:
                code = exc.exit_code
            except (click.ClickException, InputError) as exc:  # the check refused this row's values
                msg = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
                pt = " ".join(f"{k}={v}" for k, v in spec.point)
                raise RowRefused(f"--grid ({pt}): check {spec.key} refused these values: "
                                 f"{' '.join(msg.split())[:400]}") from None
        if not os.path.exists(jp):
            text = " ".join(sink.getvalue().split())
            if code == 2:  # the check refused this grid point's values: a usage error of the sweep
                msg = text.split("Error: ", 1)[-1] if "Error: " in text else text
                pt = " ".join(f"{k}={v}" for k, v in spec.point)
                raise RowRefused(f"--grid ({pt}): check {spec.key} refused these values: {msg[-300:]}")
            tail = text[-300:]
            raise RuntimeError(f"check {spec.key} exited {code} without a result" + (f": {tail}" if tail else ""))
        doc = json.loads(Path(jp).read_text(encoding="utf-8"))
    numbers = _flatten({k: v for k, v in doc.items() if k not in ("inputs", "resources", "check")})
    numbers["exit_code"] = code if isinstance(code, int) else 1
    numbers["verdict"] = doc.get("outcome")
    return numbers


def sweep_row(spec: RowSpec) -> dict[str, Any]:
    """Run one row (a module-level function: workers import it by name). Returns the row: the
    grid point's parameters, ``replicate``, ``seed``, ``status`` (ok / error), ``error``,
    ``verdict`` and every measured number; a crash is an ``error`` row, not an exception."""
    from proofs_checks.context import RunContext
    from proofs_checks.runner import _jsonable

    row: dict[str, Any] = {**dict(spec.point), "replicate": spec.replicate, "seed": spec.seed}
    t0 = time.perf_counter()
    try:
        if spec.kind == "claim":
            ad = ADAPTERS[spec.key]
            ctx = RunContext(mode=spec.mode, seed=spec.seed, device=spec.device if ad.uses_device else "cpu")
            ctx = ctx.for_check(spec.key, "sweep")
            params = {p.name: (p.default(ctx) if callable(p.default) else p.default) for p in ad.params}
            params.update(dict(spec.point))
            numbers = ad.fn(params, ctx)
            row.update({k: v for k, v in params.items() if k not in row})
        else:
            numbers = _run_sanity(spec)
        row.update(status="ok", error=None)
        row.update({k: v for k, v in numbers.items() if k not in ("status", "error")})
    except RowRefused as exc:  # reported as a usage error by run_sweep (exit 2, nothing written)
        row.update(status="refused", error=exc.message, verdict=None)
    except Exception as exc:
        row.update(status="error", error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}", verdict=None)
    row["seconds"] = round(time.perf_counter() - t0, 4)
    return _jsonable(row)


def sweep_rows(specs: tuple[RowSpec, ...]) -> list[dict[str, Any]]:
    """Run several rows in one task, in order (see :attr:`ClaimAdapter.group_by`)."""
    return [sweep_row(s) for s in specs]


def plan_tasks(target: Target, rows: list[RowSpec]) -> list[tuple[RowSpec, ...]]:
    """The rows grouped into tasks, in plan order of each group's first row: one row per task, or
    for a claim adapter with ``group_by`` the rows of one replicate agreeing on those parameters
    (grid values, or the defaults when the grid does not name them)."""
    ad = ADAPTERS.get(target.key) if target.kind == "claim" else None
    if ad is None or ad.group_by is None:
        return [(s,) for s in rows]
    groups: dict[tuple, list[RowSpec]] = {}
    for s in rows:
        p = dict(s.point)
        groups.setdefault((s.replicate, *(repr(p.get(k)) for k in ad.group_by)), []).append(s)
    return [tuple(g) for g in groups.values()]


def run_sweep(target: Target, rows: list[RowSpec], *, client=None, progress=None) -> list[dict[str, Any]]:
    """Run ``rows`` in-process (``client`` None) or as tasks on a Dask client (:func:`plan_tasks`);
    rows come back in plan order. ``progress(label, rows of the task)`` after each finished task.
    A task lost to failing workers more often than the scheduler allows gives ``error`` rows."""
    from proofs_checks.distributed.cluster import Task, TaskFailure, run_tasks, run_tasks_local

    def label(g: tuple[RowSpec, ...]) -> str:
        s = g[0]
        return " ".join(f"{k}={v}" for k, v in s.point) + f" #{s.replicate}" + (f" (+{len(g) - 1})" if len(g) > 1 else "")

    cuda = any(s.device.startswith("cuda") for s in rows) and target.uses_device
    groups = plan_tasks(target, rows)
    ship = {s: _shipped(s) if client is not None and target.kind == "check" else s for s in rows}
    tasks = [Task(label(g), sweep_rows, (tuple(ship[s] for s in g),), gpu=cuda) for g in groups]
    def stop_on_refusal(lbl, value):
        for r in value if isinstance(value, list) else []:
            if r.get("status") == "refused":
                raise UsageError(f"{r['error']}; the sweep stopped, nothing was written")
        if progress:
            progress(lbl, value)

    out = run_tasks(client, tasks, stop_on_refusal) if client is not None else run_tasks_local(tasks, stop_on_refusal)
    done: dict[RowSpec, dict[str, Any]] = {}
    for g, v in zip(groups, out):
        for i, s in enumerate(g):
            if isinstance(v, TaskFailure):
                done[s] = {**dict(s.point), "replicate": s.replicate, "seed": s.seed, "status": "error",
                           "error": f"task failed on the cluster: {v.message}", "verdict": None, "seconds": None}
            else:
                done[s] = {**v[i], **dict(s.point)} if ship[s] is not s else v[i]  # the values as the user wrote them
    return [done[s] for s in rows]


#: the grid parameters of the sanity checks that name a file (or ``FILE:NAME``)
FILE_VALUED = frozenset({"lambda", "model", "module", "against", "mapping", "patterns", "data", "weights", "report"})


def _shipped(s: RowSpec) -> RowSpec:
    """``s`` with each grid value that names a file here (``L.txt``, ``m.py:predict``) made absolute: a worker of a
    cluster resolved a relative name in its own folder, and checked its file under the user's label (hostile pass
    24a F12)."""
    import dataclasses
    import os

    from proofs_checks.parsing import names_array_file

    def absolute(k: str, v: Any) -> Any:
        if k not in FILE_VALUED or not isinstance(v, str) or not v or os.path.isabs(v):  # (a file named "5" turned
            return v  # --N 5 into a path: hostile pass 25a F1)
        if k == "lambda" and not names_array_file(v):  # numbers unless the suffix names a file, as check icl reads
            return v  # it (a file named "1,2" turned --lambda 1,2 into a path: 26a F2)
        if os.path.exists(v):
            return os.path.abspath(v)
        head, sep, tail = v.rpartition(":")
        if sep and head and not os.path.isabs(head) and os.path.exists(head):
            return os.path.abspath(head) + ":" + tail
        return v

    return dataclasses.replace(s, point=tuple((k, absolute(k, v)) for k, v in s.point))
