"""trainrx.dask (issue 53): a 256-rank set analyzed on a dask.distributed LocalCluster of worker
processes gives the report `trainrx analyze` gives on one machine, byte for byte; a file no worker
can read is an error naming it. Run by ctest (python.dask) as
    TRAINRX_BUILD_DIR=build PYTHONPATH=python .venv/bin/python tests/python/dask_test.py

The set: 256 ranks made from one rank of HTA's 8-rank DLRM sample with a planted straggler
(bench/make_rank_set.py, 0.7 MB a rank). Skips (77) when dask.distributed is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

try:
    from distributed import Client, LocalCluster, get_task_stream
except ImportError as e:
    print(f"skipped: {e} (pip install 'trainrx[dask]')")
    sys.exit(77)

import trainrx
import trainrx.dask
from trainrx._paths import bin_dir

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "fixtures" / "dlrm_8ranks" / "worker0_step_12.1694128201545.pt.trace.json.gz"


def cli(*args: str) -> str:
    return subprocess.run([str(bin_dir() / "trainrx"), *args], check=True, capture_output=True, text=True).stdout


class DaskSet(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp(prefix="trainrx-dask-"))
        cls.set = cls.tmp / "set256"
        subprocess.run([sys.executable, str(REPO / "bench" / "make_rank_set.py"), str(SOURCE), str(cls.set),
                        "--ranks", "256", "--straggler", "17"], check=True, capture_output=True)
        # Worker processes, as on a cluster: each imports trainrx and calls the C++ analyzer itself.
        cls.cluster = LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None)
        cls.client = Client(cls.cluster)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        cls.cluster.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_report_is_the_local_one_byte_for_byte(self) -> None:
        with get_task_stream(self.client) as stream:
            report = trainrx.dask.analyze(self.set, self.client)
        local = cli("analyze", str(self.set), "--format", "json")
        self.assertEqual(report._analysis.render("json"), local)
        self.assertEqual(report.text(), cli("analyze", str(self.set)))
        self.assertIn("256 ranks from 256 files", local)  # the local path read it rank by rank too
        straggler = next(f for f in report.findings if f["id"] == "dist.straggler")
        self.assertEqual(straggler["rank"], 17)
        # Every file was one task on a worker, and the work was spread over the workers.
        tasks = [t for t in stream.data if "_file_sides" in str(t["key"])]
        self.assertEqual(len(tasks), 256)
        self.assertGreaterEqual(len({t["worker"] for t in tasks}), 2)

    def test_options_travel_to_the_workers(self) -> None:
        overrides = {"dist.straggler.wait_pct": 99}
        report = trainrx.dask.analyze(self.set, self.client, thresholds=overrides)
        local = cli("analyze", str(self.set), "--format", "json", "--threshold", "dist.straggler.wait_pct=99")
        self.assertEqual(report._analysis.render("json"), local)
        self.assertNotIn("dist.straggler", report.finding_ids)

    def test_a_file_no_worker_can_read_is_named(self) -> None:
        broken = self.tmp / "broken"
        shutil.copytree(self.set, broken)
        (broken / "rank-100.json").write_text("not a trace\n")
        with self.assertRaises(trainrx.TrainrxError) as e:
            trainrx.dask.analyze(broken, self.client)
        self.assertIn("rank-100.json", str(e.exception))
        self.assertEqual(e.exception.code, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
