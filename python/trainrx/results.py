"""``trainrx.load_result(path)``: the JSON results of ``fix``, ``sweep``, ``ab``, ``gate check``,
``gate record-baseline``, ``run``'s per-rank results, ``diff`` and ``summarize``, loaded with one
call. The experiments stay command-line first (they launch processes); their results are data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from trainrx._native import TrainrxError
from trainrx.report import PathLike, _table

# schema -> (kind, the key of its main rows or None)
SCHEMAS: Dict[str, str] = {
    "trainrx.experiment/1": "experiment",  # kind in the document: fix | sweep | ab
    "trainrx.gate/1": "gate",
    "trainrx.baseline/1": "baseline",
    "trainrx.run/1": "run",
    "trainrx.diff/1": "diff",
    "trainrx.summary/1": "summary",
    "trainrx.analysis/1": "analysis",
}
_ROWS = {"fix": "fixes", "sweep": "cells", "gate": "metrics", "run": "steps", "diff": "ops", "summary": "findings",
         "analysis": "findings"}
_ARMS = ("baseline_trials", "fixed_trials", "trials", "a", "b")


@dataclass
class Result:
    """A trainrx JSON result.

    Attributes:
        path: the file read.
        schema: its ``schema`` ("trainrx.experiment/1", ...).
        kind: fix, sweep, ab, gate, baseline, run, diff, summary or analysis.
        data: the whole document, as dicts and lists (docs/json-schema.md).
    """

    path: Path
    schema: str
    kind: str
    data: Dict[str, Any] = field(repr=False)

    @property
    def verdict(self) -> Optional[str]:
        """``gate``: pass / regression / inconclusive; ``ab``: the comparison's verdict; else None."""
        return self.data.get("verdict")

    @property
    def table(self) -> Any:
        """The result's rows as a DataFrame (a list of dicts without pandas): ``fix``: one row per fix
        (finding, knob, speedup, ci_low, ci_high, p_value, verdict, ...); ``sweep``: one per cell (its
        knobs as columns, median_ms, ci_low, ci_high, samples_per_s, tied_with_best); ``ab``: one row,
        the comparison; ``gate``: one per metric; ``run``: one per step; ``diff``: one per op;
        ``summary`` / ``analysis``: one per finding. Per-trial arrays are left in :attr:`data`."""
        if self.kind == "ab":
            rows: List[Mapping[str, Any]] = [self.data]
        else:
            rows = self.data.get(_ROWS.get(self.kind, ""), [])
        flat = []
        for r in rows:
            row = {k: v for k, v in r.items() if k not in _ARMS and not isinstance(v, (dict, list))}
            for k, v in (r.get("knobs") or {}).items() if isinstance(r.get("knobs"), dict) else []:
                row[k] = v
            flat.append(row)
        return _table(flat, [])


def load_result(path: PathLike) -> Result:
    """Load a trainrx JSON result (``fix/sweep/ab --format json``, ``gate check --format json``, a gate
    baseline, ``run --result``, ``diff --format json``, a summary, ``analyze --format json``).

    Raises:
        TrainrxError: the file is not JSON, or not a trainrx result (says which schema it found).
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise TrainrxError(f"{p}: {e.strerror}") from None
    except ValueError as e:
        raise TrainrxError(f"{p}: not JSON: {e}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema not in SCHEMAS:
        raise TrainrxError(f"{p}: not a trainrx result: \"schema\" is {schema!r}, expected one of "
                           + ", ".join(sorted(SCHEMAS)))
    kind = SCHEMAS[schema]
    if kind == "experiment":
        kind = data.get("kind", "")
        if kind not in ("fix", "sweep", "ab"):
            raise TrainrxError(f"{p}: trainrx.experiment/1 with \"kind\" {kind!r}, expected fix, sweep or ab")
    return Result(path=p, schema=schema, kind=kind, data=data)
