"""One survey entry in its own process: ``python -m proofs_checks.survey.worker SPEC.json RESULT.json``.

SPEC: {"name", "paths": [folders put first on sys.path], "package", "version", "module", "adapter",
"declare", "mode", "seed"}. RESULT: {"status": "checked" | "import-failed" | "version-mismatch" |
"adapter-failed" | "check-failed", "outcome", "properties", ...}. Never raises: every failure is a
status with a one-line ``why``."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:400]


def run(spec: dict) -> dict:
    for p in reversed(spec.get("paths") or []):
        sys.path.insert(0, p)
    out: dict = {"name": spec["name"]}
    t0 = time.perf_counter()
    try:
        import importlib
        import importlib.metadata as md

        importlib.import_module(spec["module"])
        if spec.get("version"):
            got = md.version(spec["package"])
            out["installed"] = got
            if got != spec["version"]:
                out.update(status="version-mismatch", why=f"{spec['package']} {got} imported, {spec['version']} pinned")
                return out
        else:
            import torch

            out["installed"] = torch.__version__
    except BaseException as exc:  # noqa: BLE001 — a library that cannot be imported is a row
        out.update(status="import-failed", why=_one_line(exc))
        return out
    try:
        from proofs_checks.survey.catalogue import HELPERS, _PRE

        import types

        # a real module in sys.modules: torch.compile/dynamo (FlexAttention's score_mods) resolves globals through it
        mod = types.ModuleType(f"tverify_survey_{spec['name'].replace('-', '_').replace('.', '_')}")
        sys.modules[mod.__name__] = mod
        ns: dict = mod.__dict__
        exec(compile(_PRE + HELPERS + spec["adapter"], f"<adapter {spec['name']}>", "exec"), ns)
        make = ns["make"]
    except BaseException as exc:  # noqa: BLE001
        out.update(status="adapter-failed", why=_one_line(exc))
        return out
    try:
        from proofs_checks.sanity.attention import run_attention

        declare = dict(spec.get("declare") or {})
        if isinstance(declare.get("window"), list):
            declare["window"] = tuple(declare["window"])
        res = run_attention(make, mode=spec.get("mode", "quick"), seed=spec.get("seed", 0), name=spec["name"], **declare)
        j = res.to_json()
        if isinstance(j.get("config_read"), list):  # what the checker read from the module (its config)
            out["config_read"] = [str(c) for c in j["config_read"]]
        out.update(status="checked", outcome=res.outcome,
                   suggestion=getattr(res.verdict, "suggestion", None) if res.verdict else None,
                   summary=j.get("verdict") if isinstance(j.get("verdict"), str) else None,
                   properties=[{k: p.get(k) for k in ("name", "status", "error", "tolerance", "central", "justification",
                                                      "detail")} for p in res.properties])
    except BaseException as exc:  # noqa: BLE001
        from proofs_checks.options import UsageError

        kind = "adapter-failed" if isinstance(exc, UsageError) else "check-failed"
        out.update(status=kind, why=_one_line(exc))
        if kind == "check-failed":
            out["traceback"] = traceback.format_exc()[-3000:]
    finally:
        out["check_seconds"] = round(time.perf_counter() - t0, 2)
    return out


def main() -> None:
    spec_path, result_path = sys.argv[1], sys.argv[2]
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    res = run(spec)
    tmp = result_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(res, f, default=str)
    os.replace(tmp, result_path)


if __name__ == "__main__":
    main()
