"""`with trainrx.record(path):` — a block recorded in-process by the probe (python/trainrx/recording.py).

A small CPU training loop with anomaly detection on (a problem only the probe's config snapshot
sees: torch.profiler's trace does not say it) runs inside the block: the trace must be the probe's,
hold the block's steps and ops, and its report flag debug.anomaly_detection; nothing outside the
block is recorded; a second recording in the same process is refused with a clear error. Run by
ctest (python.record_in_process) with the repository's torch:
    TRAINRX_BUILD_DIR=build PYTHONPATH=python .venv/bin/python tests/python/record_in_process_test.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

import trainrx


def train(steps: int) -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 14 * 14, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def main() -> int:
    failures, passed = [], []

    def check(ok: bool, what: str) -> None:
        print(("ok: " if ok else "FAIL: ") + what)
        (passed if ok else failures).append(what)

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "block.json"
        train(2)  # before the block: not recorded
        with torch.autograd.set_detect_anomaly(True):
            with trainrx.record(out) as r:
                train(8)
                # The benchmarks' pause (bench/record_interleaved.py): what runs paused is not recorded.
                import ctypes
                pause = trainrx.recording._probe.trainrx_probe_pause
                pause.argtypes = [ctypes.c_int]
                paused_rc = pause(1)
                with torch.profiler.record_function("trainrx_test_while_paused"):
                    torch.ones(4).sum()
                resumed_rc = pause(0)
                with torch.profiler.record_function("trainrx_test_after_resume"):
                    torch.ones(4).sum()
        check(r.path == out and out.exists(), f"the trace is written at the block's end ({r.path})")
        doc = json.loads(out.read_text())
        check(doc.get("trainrx", {}).get("collector") == "trainrx probes", "the probe's trace (collector block)")
        names = {e.get("name") for e in doc.get("traceEvents", [])}
        check(paused_rc == 0 and resumed_rc == 0, f"the observer paused and resumed ({paused_rc}, {resumed_rc})")
        check("trainrx_test_after_resume" in names and "trainrx_test_while_paused" not in names,
              "a range run while paused is not recorded, one after resuming is")
        report = r.report
        # Steps are inferred from Optimizer.step: 8 inside the block give 7 or 8 (warm-up ones included),
        # the 2 trained before the block would make 9 or 10.
        s = report.data["steps"]
        steps = len(s["rows"]) + len(s.get("warmup", []))
        check(6 <= steps <= 8, f"the block's steps only ({steps}: 8 trained inside, 2 before)")
        names = {row["name"] for row in report.data["metrics"]["op_table"]["rows"]}
        check(any(n.startswith("aten::") for n in names), "ATen ops observed")
        check("debug.anomaly_detection" in report.finding_ids,
              f"anomaly detection flagged from the config snapshot ({report.finding_ids})")
        try:
            with trainrx.record(Path(tmp) / "again.json"):
                train(1)
            check(False, "a second recording is refused")
        except trainrx.TrainrxError as e:
            check("already recorded" in str(e), f"a second recording is refused: {e}")
    print(f"{len(passed)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
