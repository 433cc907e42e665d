"""The Python API's report: ``trainrx.analyze(paths)`` -> :class:`Report`.

A Report is the document ``trainrx analyze --format json`` prints (schema ``trainrx.analysis/1``,
docs/json-schema.md), parsed: findings are plain dicts, the step / operator / kernel / module /
memory tables are pandas DataFrames when pandas is installed (lists of dicts otherwise), and in
Jupyter the object renders as the HTML report.
"""

from __future__ import annotations

import html as _html
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from trainrx import _native

PathLike = Union[str, "os.PathLike[str]"]

# The documented columns of each table, in order (docs/python.md). A DataFrame has these first,
# then any field a later trainrx adds; an empty table still has them.
# The steps table's columns in a report that does not declare its figures (steps.fields, written
# since 2026-11-29: the library's one list of per-step figures, whose order the table follows).
STEP_COLUMNS = ["rank", "name", "start_ns", "wall_ns", "data_wait_ns", "forward_ns", "backward_ns", "optimizer_ns",
                "other_ns", "gpu_kernel_ns", "gpu_memcpy_ns", "gpu_idle_ns"]
OPERATOR_COLUMNS = ["name", "count", "total_ns", "self_ns", "mean_ns", "share", "self_share"]
KERNEL_COLUMNS = ["name", "count", "total_ns", "mean_ns", "share"]
MEMORY_COLUMNS = ["rank", "device", "samples", "peak_allocated_bytes", "peak_reserved_bytes", "capacity_bytes",
                  "capacity_source", "median_step_peak_bytes", "growth_bytes_per_step", "growth_steps",
                  "increasing_steps", "oom_events", "oom_request_bytes", "oom_op", "alloc_retries"]
CRITICAL_PATH_COLUMNS = ["rank", "start_ns", "end_ns", "class", "what", "slack_ns"]
FLOPS_COLUMNS = ["rank", "name", "class", "dtype", "calls", "flops", "bytes", "time_ns", "tflops", "gbps", "intensity",
                 "bound"]
FINDING_COLUMNS = ["id", "severity", "confidence", "title", "rank", "measured", "threshold", "unit",
                   "predicted_saving_pct", "predicted_low_pct", "predicted_high_pct", "estimated_saving_pct",
                   "estimated_saving_ns", "steps"]


def _table(rows: Sequence[Mapping[str, Any]], columns: List[str]) -> Any:
    """``rows`` as a DataFrame (documented columns first) when pandas imports, else a list of dicts."""
    try:
        import pandas as pd
    except ImportError:
        return [dict(r) for r in rows]
    extra = [k for r in rows for k in r if k not in columns]
    order = [c for c in columns if any(c in r for r in rows)] if rows else list(columns)
    order += list(dict.fromkeys(extra))
    return pd.DataFrame.from_records(list(rows), columns=order)


class Report:
    """One analysis of a set of traces, as ``trainrx analyze`` makes it.

    Attributes:
        data: the whole JSON document (``trainrx.analysis/1``), as dicts and lists.
    """

    def __init__(self, analysis: "_native.Analysis") -> None:
        self._analysis = analysis
        self.data: Dict[str, Any] = json.loads(analysis.render("json"))
        self._html: Optional[str] = None

    # Plain data -----------------------------------------------------------------------------
    @property
    def findings(self) -> List[Dict[str, Any]]:
        """The findings, ranked by estimated saving: dicts with ``id``, ``severity``, ``confidence``,
        ``title``, ``measured``, ``threshold``, ``unit``, ``evidence``, ``estimated_saving_pct`` /
        ``_ns``, ``fix`` (``python``, ``cpp``, ``knob``), ... (docs/json-schema.md)."""
        return self.data["findings"]

    @property
    def finding_ids(self) -> List[str]:
        """The ids of the findings, in rank order (``["input.dataloader_bound", ...]``)."""
        return [f["id"] for f in self.findings]

    @property
    def inputs(self) -> List[str]:
        """The paths analyzed."""
        return self.data["inputs"]

    @property
    def step_breakdown(self) -> Dict[str, Any]:
        """Shares (0..1) of the summed step time: data_wait, forward, backward, optimizer, other, ..."""
        return self.data["metrics"]["step_breakdown"]

    def to_dict(self) -> Dict[str, Any]:
        """The JSON document, as ``trainrx analyze --format json`` prints it, parsed."""
        return self.data

    # Tables ---------------------------------------------------------------------------------
    @property
    def steps(self) -> Any:
        """One row per step: ``rank, name`` and the report's declared figures (``steps.fields``:
        ``start_ns, wall_ns, data_wait_ns, forward_ns, backward_ns, optimizer_ns, other_ns``, +
        ``gpu_kernel_ns, gpu_memcpy_ns, gpu_idle_ns, data_wait_gpu_idle_ns`` on GPU traces)."""
        steps = self.data["steps"]
        declared = [f["name"] for f in steps.get("fields", [])]
        return _table(steps["rows"], ["rank", "name"] + declared if declared else STEP_COLUMNS)

    @property
    def operators(self) -> Any:
        """Top CPU operators by self time: ``name, count, total_ns, self_ns, mean_ns, share, self_share``
        (shares 0..1 of the summed step time)."""
        return _table(self.data["metrics"]["op_table"]["rows"], OPERATOR_COLUMNS)

    @property
    def kernels(self) -> Any:
        """Top GPU kernels: ``name, count, total_ns, mean_ns, share`` (of all kernel time); empty on CPU."""
        return _table(self.data["metrics"]["kernel_table"]["rows"], KERNEL_COLUMNS)

    @property
    def modules(self) -> Any:
        """nn.Module forward ranges by name, the operator table's columns; empty without module ranges."""
        return _table(self.data["metrics"]["module_table"]["rows"], OPERATOR_COLUMNS)

    @property
    def memory(self) -> Any:
        """One row per (rank, device) with allocator samples: ``rank, device, samples,
        peak_allocated_bytes, peak_reserved_bytes, capacity_bytes, capacity_source, ...``."""
        return _table(self.data["metrics"]["memory"], MEMORY_COLUMNS)

    @property
    def critical_path(self) -> Any:
        """The median step's critical path of each rank with device work, one interval a row: ``rank,
        start_ns, end_ns, class, what, slack_ns`` (class: cpu, launch, allocator, sync_wait, gpu_compute,
        gpu_comm, gpu_copy, kernel_gap, dependency_wait, other, rank_wait); the shares are in
        ``data["metrics"]["critical_path"]``. Empty on CPU-only traces."""
        rows = [dict(s, rank=p["rank"]) for p in self.data["metrics"].get("critical_path", []) for s in p["segments"]]
        return _table(rows, CRITICAL_PATH_COLUMNS)

    @property
    def flops(self) -> Any:
        """FLOPs, bytes, time and achieved throughput per op (issue 52), the costliest ops of each rank
        whose shapes were recorded: ``rank, name, class, dtype, calls, flops, bytes, time_ns, tflops,
        gbps, intensity, bound`` (per costed step; time is the op's kernels' on a GPU, its own on a
        CPU; bound "compute" / "memory" against the device's roofline, "" without a peak). MFU, the
        peak and its source are in ``data["metrics"]["utilization"]``. Empty without recorded shapes."""
        rows = [dict(o, rank=u["rank"]) for u in self.data["metrics"].get("utilization", []) for o in u["ops"]]
        return _table(rows, FLOPS_COLUMNS)

    @property
    def findings_table(self) -> Any:
        """The findings, one row each (``id, severity, confidence, title, rank, measured, threshold, unit,
        predicted_saving_pct, predicted_low_pct, predicted_high_pct`` (the what-if replay's, docs/what-if.md;
        empty where none was made), ``estimated_saving_pct, estimated_saving_ns, steps``; evidence, fix and
        the prediction's assumptions stay in :attr:`findings`)."""
        rows = []
        for f in self.findings:
            row = {k: v for k, v in f.items() if not isinstance(v, (dict, list))}
            p = f.get("predicted") or {}
            if p.get("method") == "replay":
                row.update(predicted_saving_pct=p["saving_pct"], predicted_low_pct=p["low_pct"],
                           predicted_high_pct=p["high_pct"])
            rows.append(row)
        return _table(rows, FINDING_COLUMNS)

    # Renderings -----------------------------------------------------------------------------
    def html(self) -> str:
        """The self-contained HTML page ``trainrx analyze --format html`` writes."""
        if self._html is None:
            self._html = self._analysis.render("html")
        return self._html

    def text(self) -> str:
        """The terminal report (no colors)."""
        return self._analysis.render("text")

    def markdown(self) -> str:
        """The Markdown report (a pull-request comment)."""
        return self._analysis.render("md")

    def save(self, path: PathLike, format: Optional[str] = None) -> Path:
        """Write the report to ``path`` as ``format`` (json, html, md, text; default from the suffix)."""
        p = Path(path)
        fmt = format or {".json": "json", ".html": "html", ".htm": "html", ".md": "md"}.get(p.suffix, "text")
        p.write_text(self._analysis.render(fmt), encoding="utf-8")
        return p

    def _repr_html_(self) -> str:
        # The page in an iframe: its stylesheet and script stay out of the notebook's own page.
        return ('<iframe style="width:100%;height:720px;border:1px solid #ddd" sandbox="allow-scripts" '
                f'srcdoc="{_html.escape(self.html(), quote=True)}"></iframe>')

    def __repr__(self) -> str:
        steps = self.data["steps"]
        found = ", ".join(self.finding_ids) or "no finding"
        return (f"<trainrx.Report {len(self.inputs)} input(s), {steps['count']} steps "
                f"(median {steps['median_ns'] / 1e6:.1f} ms): {found}>")


def analyze(paths: Union[PathLike, Iterable[PathLike]], *, thresholds: Optional[Mapping[str, float]] = None,
            strict: bool = False, keep_clocks: bool = False, per_rank: bool = False,
            step: Optional[str] = None) -> Report:
    """Analyze traces as ``trainrx analyze`` does and return the :class:`Report`.

    Args:
        paths: a trace (``.json``, ``.json.gz``: ``trainrx record`` or torch.profiler / Kineto), a
            folder of rank traces, per-rank summaries, or a list of them.
        thresholds: overrides, ``{"input.dataloader_bound.share_pct": 10}`` (``--threshold id.key=value``).
        strict: traces of different jobs or cut-off traces are an error (``--strict``).
        keep_clocks: leave each rank's clock as its file has it (``--keep-clocks``).
        per_rank: analyze each rank's trace on its own (``--per-rank``).
        step: the training step's name (``--step NAME``).

    Raises:
        TrainrxError: the message ``trainrx analyze`` would print (which file, what was wrong).
    """
    names, overrides, flags = _set_options(paths, thresholds, strict, keep_clocks, per_rank)
    return Report(_native.Analysis(names, overrides, step, flags))


def _set_options(paths: Union[PathLike, Iterable[PathLike]], thresholds: Optional[Mapping[str, float]], strict: bool,
                 keep_clocks: bool, per_rank: bool) -> "tuple[List[str], List[str], int]":
    """``analyze``'s arguments as the C API takes them: path names, ``id.key=value`` overrides, flags."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    names = [os.fspath(p) for p in paths]
    overrides = [f"{k}={v}" for k, v in (thresholds or {}).items()]
    flags = ((_native.STRICT if strict else 0) | (_native.KEEP_CLOCKS if keep_clocks else 0)
             | (_native.PER_RANK if per_rank else 0))
    return names, overrides, flags
