"""`trainrx export` + DuckDB (issue 53): the tables of real traces queried with SQL give the figures
`trainrx analyze` gives (step times, kernel totals, late ranks), the example queries answer the same
from the DuckDB command line and from the notebook, and bad input is an error. Run by ctest
(python.tables) as
    TRAINRX_BUILD_DIR=build PYTHONPATH=python .venv/bin/python tests/python/tables_test.py

The dataset: the two public ResNet-50 runs of the TensorBoard plugin as three nightly runs (a copy of
the 4-worker run with its times moved one day later, and the 0-worker run, the slow one, three days
later: the same job recorded on other days), the 8-rank DLRM job of HTA's samples, and 256 ranks made
from one of its ranks with a planted straggler (bench/make_rank_set.py; rank by rank).
Skips (77) when pyarrow, DuckDB or the Parquet plugin are missing.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

try:
    import duckdb  # noqa: F401
    import pandas as pd
except ImportError as e:
    print(f"skipped: {e} (pip install 'trainrx[sql]')")
    sys.exit(77)

import trainrx
from trainrx._paths import bin_dir

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures"
SQL = REPO / "examples" / "sql"
DUCKDB_CLI = Path(sys.executable).parent / "duckdb"
DAY_US = 86_400 * 1_000_000
SINCE = "2021-06-10 12:00:00+00"
JOB = "nightly-%"  # the runs of one job the date questions compare


def shifted(src: Path, days: int, out: Path) -> Path:
    """`src` with every timestamp moved `days` later: the same job as if recorded on another day."""
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] += days * DAY_US
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    return out


def analyze_json(*paths: Path, per_rank: bool = False) -> dict:
    args = [str(bin_dir() / "trainrx"), "analyze", *map(str, paths), "--format", "json"]
    if per_rank:
        args.append("--per-rank")
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


class Tables(unittest.TestCase):
    tmp: Path
    dataset: Path
    runs: dict

    @classmethod
    def setUpClass(cls) -> None:
        if not (bin_dir() / "libtrainrx_parquet.so").exists():
            raise unittest.SkipTest("this build has no Parquet plugin (pyarrow 26.0.1 missing at configure time)")
        cls.tmp = Path(tempfile.mkdtemp(prefix="trainrx-tables-"))
        cls.dataset = cls.tmp / "dataset"
        w0, w4 = FIX / "tb_plugin_workers" / "workers0.pt.trace.json.gz", FIX / "tb_plugin_workers" / "workers4.pt.trace.json.gz"
        subprocess.run([sys.executable, str(REPO / "bench" / "make_rank_set.py"),
                        str(FIX / "dlrm_8ranks" / "worker0_step_12.1694128201545.pt.trace.json.gz"), str(cls.tmp / "set256"),
                        "--ranks", "256", "--straggler", "17"], check=True, capture_output=True)
        cls.runs = {
            "nightly-0609": w4,
            "nightly-0610": shifted(w4, 1, cls.tmp / "w4_plus1.json.gz"),
            "nightly-0611": shifted(w0, 3, cls.tmp / "w0_plus3.json.gz"),
            "dlrm-8ranks": FIX / "dlrm_8ranks",
            "dlrm-256ranks": cls.tmp / "set256",
        }
        cls.written = {run: trainrx.export(path, cls.dataset, run=run) for run, path in cls.runs.items()}
        cls.con = trainrx.connect(cls.dataset)
        cls.set_vars = f"SET VARIABLE since = '{SINCE}'; SET VARIABLE runs = '{JOB}'"

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def q(self, sql: str) -> pd.DataFrame:
        return trainrx.sql(sql, self.dataset, self.con, since=SINCE, runs=JOB)

    def test_strategies_and_partitions(self) -> None:
        self.assertEqual(self.written["dlrm-8ranks"]["strategy"], "merged")
        self.assertEqual(self.written["dlrm-256ranks"]["strategy"], "rank by rank")
        self.assertEqual(self.written["dlrm-256ranks"]["ranks"], 256)
        ranks = self.q("SELECT run, count(DISTINCT rank) AS n FROM kernels GROUP BY run ORDER BY run")
        self.assertEqual(dict(zip(ranks.run, ranks.n)),
                         {"dlrm-256ranks": 256, "dlrm-8ranks": 8, "nightly-0609": 1, "nightly-0610": 1, "nightly-0611": 1})
        for run, w in self.written.items():
            n = self.q(f"SELECT count(*) AS n FROM ops WHERE run = '{run}'").n[0]
            self.assertEqual(n, w["rows"]["ops"], run)

    def test_step_times_equal_analyze(self) -> None:
        for run, path in self.runs.items():
            doc = analyze_json(path)
            expected = sorted((r["rank"], r["start_ns"], r["wall_ns"]) for r in doc["steps"]["rows"] + doc["steps"]["warmup"])
            got = self.q(f"SELECT rank, start_ns, wall_ns FROM steps WHERE run = '{run}' ORDER BY rank, start_ns")
            got_rows = sorted(zip(got["rank"].tolist(), got.start_ns.tolist(), got.wall_ns.tolist()))
            if doc["ingest"]["issues"] and any(i["kind"] == "analyzed_rank_by_rank" for i in doc["ingest"]["issues"]):
                # Rank by rank the report keeps each rank's own clock; the tables are on the reference's.
                shift = dict(zip(*[self.q(f"SELECT rank, clock_shift_ns FROM ranks WHERE run = '{run}'")[c].tolist()
                                   for c in ("rank", "clock_shift_ns")]))
                expected = sorted((r, s + shift[r], w) for r, s, w in expected)
            self.assertEqual(got_rows, expected, run)
            median = self.q(f"SELECT median_step_ns FROM runs WHERE run = '{run}'").median_step_ns[0]
            self.assertEqual(median, doc["steps"]["median_ns"], run)

    def test_kernel_totals_equal_analyze(self) -> None:
        for run in ("nightly-0609", "nightly-0611", "dlrm-8ranks"):
            doc = analyze_json(self.runs[run])
            table = doc["metrics"]["kernel_table"]
            got = self.q(f"""SELECT name, count(*) AS count, sum(dur_ns) AS total_ns FROM kernels
                             WHERE run = '{run}' AND step >= 0 GROUP BY name""")
            by_name = {n: (c, t) for n, c, t in zip(got.name, got["count"], got.total_ns)}
            self.assertGreater(len(table["rows"]), 5, run)
            for row in table["rows"]:
                self.assertEqual(by_name.get(row["name"]), (row["count"], row["total_ns"]), (run, row["name"]))
            self.assertEqual(sum(t for _, t in by_name.values()), table["basis_ns"], run)

    def test_late_ranks_equal_the_straggler(self) -> None:
        late = self.q((SQL / "late_ranks.sql").read_text())
        for run in ("dlrm-8ranks", "dlrm-256ranks"):
            doc = analyze_json(self.runs[run])
            straggler = next(f for f in doc["findings"] if f["id"] == "dist.straggler")
            top = late[late.run == run].iloc[0]
            self.assertEqual(top["rank"], straggler["rank"], run)
            self.assertIn(f"arrived last at {top.times_last} of {top.collectives} collectives", straggler["title"])
        self.assertEqual(late[late.run == "dlrm-256ranks"].iloc[0]["rank"], 17)  # the planted one

    def test_slower_runs_and_kernels_grew(self) -> None:
        slower = self.q((SQL / "slower_runs.sql").read_text())
        self.assertEqual(slower.run.tolist(), ["nightly-0611"])
        before = analyze_json(self.runs["nightly-0609"])["steps"]["median_ns"]
        after = analyze_json(self.runs["nightly-0611"])["steps"]["median_ns"]
        self.assertAlmostEqual(slower.slower_pct[0], round(100 * (after / before - 1), 1), places=1)
        grew = self.q((SQL / "kernels_grew.sql").read_text())
        self.assertGreater(len(grew), 0)
        self.assertTrue((grew.grew_ms_per_step.diff().dropna() <= 0).all())  # largest growth first

    def test_duckdb_cli_gives_the_same_answers(self) -> None:
        if not DUCKDB_CLI.exists():
            self.skipTest(f"{DUCKDB_CLI}: no DuckDB command line (pip install duckdb-cli==1.5.6)")

        def normal(df: pd.DataFrame) -> pd.DataFrame:
            for c in df.columns:
                if c.endswith("_at"):
                    df[c] = pd.to_datetime(df[c], utc=True)
            return df.reset_index(drop=True)

        for name in ("slower_runs.sql", "late_ranks.sql", "kernels_grew.sql"):
            with open(SQL / name) as stdin:
                out = subprocess.run([str(DUCKDB_CLI), "-init", "views.sql", "-cmd", self.set_vars, "-csv"], stdin=stdin,
                                     cwd=self.dataset, capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            csv = "\n".join(l for l in out.stdout.splitlines() if l and "\x1b" not in l and not l.startswith("-- "))
            theirs = normal(pd.read_csv(io.StringIO(csv)))
            ours = normal(pd.read_csv(io.StringIO(self.q((SQL / name).read_text()).to_csv(index=False))))
            self.assertGreater(len(ours), 0, name)
            pd.testing.assert_frame_equal(theirs, ours, check_dtype=False, obj=name)

    def test_notebook_answers_alike(self) -> None:
        nb = json.loads((REPO / "examples" / "notebooks" / "platform_queries.ipynb").read_text())
        env = {"TRAINRX_DATASET": str(self.dataset), "TRAINRX_SINCE": SINCE, "TRAINRX_RUNS": JOB, "TRAINRX_REPO": str(REPO)}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            scope: dict = {}
            for cell in nb["cells"]:
                if cell["cell_type"] == "code":
                    exec(compile("".join(cell["source"]), "platform_queries.ipynb", "exec"), scope)
        finally:
            for k, v in old.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        pd.testing.assert_frame_equal(scope["slower"], self.q((SQL / "slower_runs.sql").read_text()))
        pd.testing.assert_frame_equal(scope["late"], self.q((SQL / "late_ranks.sql").read_text()))
        pd.testing.assert_frame_equal(scope["grew"], self.q((SQL / "kernels_grew.sql").read_text()))

    def test_bad_input(self) -> None:
        bad = self.tmp / "bad.json"
        bad.write_text('{"traceEvents": [')
        with self.assertRaises(trainrx.TrainrxError) as e:
            trainrx.export(bad, self.tmp / "other")
        self.assertIn(str(bad), str(e.exception))
        self.assertEqual(e.exception.code, 2)
        with self.assertRaises(trainrx.TrainrxError) as e:
            trainrx.export(FIX / "dlrm_8ranks", self.tmp / "other", run="../escape")
        self.assertIn("--run '../escape'", str(e.exception))
        with self.assertRaises(FileNotFoundError):
            trainrx.sql("SELECT 1", self.tmp)
        cli = subprocess.run([str(bin_dir() / "trainrx"), "export", str(bad), "-o", str(self.tmp / "other")],
                             capture_output=True, text=True)
        self.assertEqual(cli.returncode, 2)
        self.assertIn(str(bad), cli.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
