"""Watch mode's hook (probes/python/trainrx_hook_watch.py): how ranks agree on a capture.

Two ranks of a job that see the same slowdown at once (a busy machine slows both) each ask for a
capture through the shared folder. They must end with one request, from the same step, or each
takes its own into one capture folder (the fresh-clone CI of 2026-11-29 saw rank 0 capture steps
1681-1701 and rank 1 steps 1666-1686 into capture-1). Run by ctest (python.watch_hook) as
    python tests/python/watch_hook_test.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "probes" / "python"))
import trainrx_hook_watch  # noqa: E402


def watcher(directory: str, rank: int, world: int, steps: int, typical: float):
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
    w = trainrx_hook_watch._Watch(None, directory)
    w.steps, w.typical = steps, typical
    return w


class RanksAgreeOnACapture(unittest.TestCase):
    def test_two_ranks_asking_at_once_end_with_the_same_request(self):
        with tempfile.TemporaryDirectory() as d:
            a = watcher(d, 0, 2, 678, 0.0020)
            b = watcher(d, 1, 2, 680, 0.0021)
            a._request("regression", "seen on rank 0")
            b._request("regression", "seen on rank 1")  # written last: the folder holds this one
            self.assertNotEqual(a.pending, b.pending)  # each took its own first
            a._poll_request()
            b._poll_request()
            self.assertEqual(a.pending, b.pending)
            self.assertEqual(a.pending[1], "seen on rank 1")
            self.assertIsNone(a.deferred)
            # Read again: nothing changes (the request is served).
            a._poll_request()
            self.assertEqual(a.pending, b.pending)

    def test_a_process_alone_keeps_its_capture_and_defers_a_later_request(self):
        with tempfile.TemporaryDirectory() as d:
            w = watcher(d, 0, 1, 500, 0.002)
            w._request("regression", "slower")
            mine = w.pending
            other = watcher(d, 0, 1, 10, 0.002)  # stands in for `trainrx capture DIR` writing the folder
            other._request("on demand", "")
            w._poll_request()
            self.assertEqual(w.pending, mine)
            self.assertIsNotNone(w.deferred)
            self.assertEqual(w.deferred["reason"], "on demand")

    def test_a_capture_under_way_is_not_moved(self):
        with tempfile.TemporaryDirectory() as d:
            a = watcher(d, 0, 2, 100, 0.002)
            b = watcher(d, 1, 2, 100, 0.002)
            a.capture = (None, "capture-1", 120, {})  # started: its steps are being recorded
            b._request("regression", "seen on rank 1")
            a._poll_request()
            self.assertIsNone(a.pending)
            self.assertEqual(a.deferred["detail"], "seen on rank 1")  # taken once this capture ends


if __name__ == "__main__":
    unittest.main()
