"""The Python API (python/trainrx) against the trainrx command, on the same traces.

`trainrx.analyze(paths)` must give the document `trainrx analyze --format json` prints (same
findings, same figures: the whole JSON compared), its tables must hold the JSON's rows (pandas
DataFrames when pandas imports, lists of dicts otherwise), the HTML must be the CLI's page, and bad
input must raise TrainrxError with the CLI's message and exit code. Run by ctest (python.api) as
    TRAINRX_BUILD_DIR=build PYTHONPATH=python python tests/python/api_test.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import trainrx

REPO = Path(__file__).resolve().parents[2]
EXE = trainrx.executable()
TRACES = [
    REPO / "examples" / "sample_cpu_training.json.gz",                     # CPU loop, planted problems
    REPO / "tests" / "fixtures" / "h100" / "train_gpu.torch_profiler.json.gz",  # kernels, GPU memory
    REPO / "tests" / "fixtures" / "h100" / "train_gpu.trainrx.json.gz",
    REPO / "tests" / "fixtures" / "rocm_inference.json",
    REPO / "tests" / "fixtures" / "crashed_run.json",
]

try:
    import pandas  # noqa: F401

    HAVE_PANDAS = True
except ImportError:
    HAVE_PANDAS = False


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True)


def rows_of(table) -> list:
    """A table's rows as dicts without missing cells (NaN where a row lacks a column)."""
    if HAVE_PANDAS:
        out = []
        for r in table.to_dict("records"):
            out.append({k: v for k, v in r.items() if not (isinstance(v, float) and v != v)})
        return out
    return table


class AnalyzeTest(unittest.TestCase):
    def test_same_document_as_the_cli_json(self) -> None:
        for path in TRACES:
            with self.subTest(trace=path.name):
                run = cli("analyze", str(path), "--format", "json")
                self.assertEqual(run.returncode, 0, run.stderr)
                expected = json.loads(run.stdout)
                report = trainrx.analyze(path)
                self.assertEqual(report.to_dict(), expected)
                self.assertEqual(report.finding_ids, [f["id"] for f in expected["findings"]])

    def test_planted_problems_are_found(self) -> None:
        report = trainrx.analyze(TRACES[0])
        for fid in ("input.dataloader_bound", "input.workers"):
            self.assertIn(fid, report.finding_ids)
        f = report.findings[0]
        self.assertIsInstance(f["evidence"], dict)
        self.assertIn("python", f["fix"])
        self.assertGreater(f["estimated_saving_ns"], 0)

    def test_tables_hold_the_json_rows(self) -> None:
        for path in TRACES[:3]:
            with self.subTest(trace=path.name):
                report = trainrx.analyze(path)
                d = report.to_dict()
                m = d["metrics"]
                for table, rows in ((report.steps, d["steps"]["rows"]), (report.operators, m["op_table"]["rows"]),
                                    (report.kernels, m["kernel_table"]["rows"]), (report.memory, m["memory"]),
                                    (report.modules, m["module_table"]["rows"])):
                    self.assertEqual(len(table), len(rows))
                    got = rows_of(table)
                    want = [{k: v for k, v in r.items()} for r in rows]
                    # DataFrames flatten nothing: list-valued memory columns stay lists
                    self.assertEqual(got, want)
                if HAVE_PANDAS:
                    self.assertEqual(list(report.steps.columns[:9]), trainrx.report.STEP_COLUMNS[:9])
                    self.assertEqual(list(report.operators.columns), trainrx.report.OPERATOR_COLUMNS)
        gpu = trainrx.analyze(TRACES[1])
        self.assertGreater(len(gpu.kernels), 0, "the H100 trace has kernels")
        # The critical path: one row per interval of the median step's path, the JSON's segments.
        path = gpu.critical_path
        want = [s for p in gpu.data["metrics"]["critical_path"] for s in p["segments"]]
        self.assertGreater(len(want), 0, "the H100 trace has a critical path")
        self.assertEqual(len(path), len(want))
        if HAVE_PANDAS:
            self.assertEqual(list(path.columns), trainrx.report.CRITICAL_PATH_COLUMNS)
            self.assertTrue((path["end_ns"] > path["start_ns"]).all())
        # FLOPs per op (issue 52): the utilization JSON's ops, one row each, on a trace with shapes.
        resnet = trainrx.analyze(REPO / "tests" / "fixtures" / "tb_plugin_workers" / "workers0.pt.trace.json.gz")
        flops = resnet.flops
        want = [dict(o, rank=u["rank"]) for u in resnet.data["metrics"]["utilization"] for o in u["ops"]]
        self.assertGreater(len(want), 0, "the ResNet-50 trace has shapes")
        self.assertEqual(rows_of(flops), [{k: w[k] for k in trainrx.report.FLOPS_COLUMNS} for w in want])
        self.assertEqual(len(trainrx.analyze(TRACES[4]).flops), 0)  # no shapes: empty
        if HAVE_PANDAS:
            self.assertEqual(list(flops.columns), trainrx.report.FLOPS_COLUMNS)
        if HAVE_PANDAS:
            self.assertEqual(list(trainrx.analyze(TRACES[0]).kernels.columns), trainrx.report.KERNEL_COLUMNS)

    def test_html_and_other_renderings_are_the_cli_s(self) -> None:
        report = trainrx.analyze(TRACES[0])
        for fmt, method in (("html", report.html), ("md", report.markdown), ("text", report.text)):
            run = cli("analyze", str(TRACES[0]), "--format", fmt)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(method(), run.stdout, fmt)
        inline = report._repr_html_()
        self.assertTrue(inline.startswith("<iframe") and "trainrx-data" in inline)
        self.assertIn("input.dataloader_bound", repr(report))

    def test_options_are_the_cli_s(self) -> None:
        run = cli("analyze", str(TRACES[0]), "--format", "json", "--threshold", "input.dataloader_bound.share_pct=99")
        want = json.loads(run.stdout)
        got = trainrx.analyze(str(TRACES[0]), thresholds={"input.dataloader_bound.share_pct": 99})
        self.assertEqual(got.to_dict(), want)
        self.assertNotIn("input.dataloader_bound", got.finding_ids)

    def test_bad_input_raises_the_cli_message(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            bad = Path(tmp) / "notes.json"
            bad.write_text("hello, not a trace\n")
            run = cli("analyze", str(bad))
            self.assertEqual(run.returncode, 2)
            with self.assertRaises(trainrx.TrainrxError) as caught:
                trainrx.analyze(bad)
            self.assertEqual(caught.exception.code, 2)
            self.assertIn(str(bad), str(caught.exception))
            self.assertIn(str(caught.exception), run.stderr)
            with self.assertRaises(trainrx.TrainrxError) as caught:
                trainrx.analyze(Path(tmp) / "missing.json")
            self.assertIn("missing.json", str(caught.exception))
        with self.assertRaises(trainrx.TrainrxError) as caught:
            trainrx.analyze(TRACES[0], thresholds={"no.such.threshold": 1})
        self.assertIn("no.such", str(caught.exception))
        with self.assertRaises(trainrx.TrainrxError):
            trainrx.analyze([])


class LoadResultTest(unittest.TestCase):
    def write(self, tmp: str, doc) -> Path:
        p = Path(tmp) / "r.json"
        p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
        return p

    def test_experiment_results(self) -> None:
        fix = {"schema": "trainrx.experiment/1", "kind": "fix", "trials": 4, "workload": "cnn",
               "fixes": [{"finding": "debug.anomaly_detection", "knob": "anomaly=1 -> 0", "speedup": 1.8,
                          "ci_low": 1.6, "ci_high": 2.0, "verdict": "faster",
                          "fixed_trials": {"label": "x", "trial_ms": [1, 2]}}]}
        sweep = {"schema": "trainrx.experiment/1", "kind": "sweep", "trials": 2, "best": 0,
                 "cells": [{"knobs": {"workers": "0"}, "median_ms": 12.5, "trials": {"trial_ms": [12, 13]}},
                           {"knobs": {"workers": "2"}, "median_ms": 8.0, "trials": {"trial_ms": [8, 8]}}]}
        with tempfile.TemporaryDirectory() as tmp:
            r = trainrx.load_result(self.write(tmp, fix))
            self.assertEqual((r.kind, r.schema), ("fix", "trainrx.experiment/1"))
            rows = rows_of(r.table)
            self.assertEqual(rows[0]["finding"], "debug.anomaly_detection")
            self.assertEqual(rows[0]["speedup"], 1.8)
            self.assertNotIn("fixed_trials", rows[0])
            s = trainrx.load_result(self.write(tmp, sweep))
            self.assertEqual([c["workers"] for c in rows_of(s.table)], ["0", "2"])

    def test_analysis_json_of_the_cli(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "a.json"
            self.assertEqual(cli("analyze", str(TRACES[0]), "--format", "json", "-o", str(out)).returncode, 0)
            r = trainrx.load_result(out)
            self.assertEqual(r.kind, "analysis")
            self.assertEqual([row["id"] for row in rows_of(r.table)], trainrx.analyze(TRACES[0]).finding_ids)

    def test_not_a_result(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            for doc, words in (("{oops", "not JSON"), ({"schema": "other/1"}, "not a trainrx result"),
                               ({"schema": "trainrx.experiment/1", "kind": "dance"}, "expected fix, sweep or ab")):
                with self.subTest(words=words):
                    with self.assertRaises(trainrx.TrainrxError) as caught:
                        trainrx.load_result(self.write(tmp, doc))
                    self.assertIn(words, str(caught.exception))
                    self.assertIn("r.json", str(caught.exception))


class CommandTest(unittest.TestCase):
    def test_python_m_trainrx_runs_the_binary(self) -> None:
        run = subprocess.run([sys.executable, "-m", "trainrx", "analyze", "--sample", "--format", "json"],
                             capture_output=True, text=True, env=os.environ)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(json.loads(run.stdout)["schema"], "trainrx.analysis/1")
        bad = subprocess.run([sys.executable, "-m", "trainrx", "analyze", "/nonexistent.json"], capture_output=True,
                             text=True, env=os.environ)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("/nonexistent.json", bad.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
