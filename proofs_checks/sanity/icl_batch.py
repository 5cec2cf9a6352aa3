"""``check icl --model``'s ``batch_independence`` property: a prompt's prediction may depend on that prompt only
(:func:`numerics.icl_probe._batch_alone` measures it; hostile pass 24b F10)."""

from __future__ import annotations

import math

from proofs_checks.sanity._verdict import Verdict

__all__ = ["batch_row", "with_batch"]


def batch_row(pr: dict) -> dict | None:
    """The property as a row (``None``: a probe without it, or no prediction judged)."""
    b = pr.get("batch_independence")
    if not b:
        return None
    err, tol = b.get("error"), b.get("tolerance")
    lengths = b.get("lengths") or [b["M"]]
    among = (f" (in a batch of {b['among'] + 1}, against another batch of {b['among'] + 1} with the same prompt and "
             f"against the whole batch)"
             if b.get("among") else "")
    if b.get("among") and b["among"] + 1 == pr.get("prompts"):
        among = f" (in the batch of {b['among'] + 1} against a batch of {b['among'] + 1} whose other prompts are redrawn)"
    where = (f"one prompt alone (a batch of one) at each length M = {', '.join(map(str, lengths))}, against its "
             f"prediction within the batch, within two small batches whose other prompts differ, and within a "
             f"batch of the same size whose other prompts are redrawn; worst: prompt "
             f"{b.get('prompt', 0)} at M = {b['M']}{among}")
    if err is None:
        return {"name": "batch_independence", "status": "skip", "error": None, "tolerance": tol,
                "justification": b.get("justification", ""), "detail": f"{where}: not judged ({b['why']})"}
    ok = math.isfinite(err) and err <= tol
    noise = b.get("noise")
    random = noise is not None and math.isfinite(noise) and noise > tol  # the same call twice differs
    cause = (f": the model's predictions differ between two identical calls (by {noise:.3g}: randomness in its forward, "
             "a dropout left on?), so a change with the batch cannot be told from that noise; a model whose prediction "
             "is random is no in-context algorithm of the prompt" if random else
             ": a prediction depends on the other prompts of its batch (batch statistics, a BatchNorm in training mode?), "
             "so no in-context algorithm of the prompt alone is what the model computes")  # (noise was called the batch's: 46a F13)
    return {"name": "batch_independence", "status": "pass" if ok else "fail", "error": err, "tolerance": tol,
            "justification": b.get("justification", ""),
            "detail": f"{where}: largest change {err:.3g}" + ("" if ok else cause)}


def with_batch(v: Verdict, pr: dict, name: str) -> Verdict:
    """``v`` as it is where ``batch_independence`` holds (or was not judged); else a mismatch naming it first."""
    row = batch_row(pr)
    if row is None:
        return v
    v.numbers["batch_independence"] = {k: row[k] for k in ("status", "error", "tolerance")}
    if row["status"] == "skip" and v.outcome == "ok":  # not run is not a pass (25b F4)
        return Verdict("inconclusive", f"{name}: {v.summary}; batch_independence not judged",
                       f"batch_independence: {row['detail']}; {v.criterion}", v.numbers,
                       list(v.reasons) + [f"batch_independence not judged: {row['detail']}"],
                       "a model that predicts one prompt alone (a batch of one) decides it")
    if row["status"] != "fail":
        return v
    return Verdict("mismatch", f"{name} violates: batch_independence; {v.outcome} otherwise: {v.summary}",
                   f"batch_independence: {row['detail']} (tolerance {row['tolerance']:.3g}: {row['justification']}); "
                   f"{v.criterion}", v.numbers, list(v.reasons), v.suggestion)
