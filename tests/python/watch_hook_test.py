"""Watch mode's hook (probes/python/trainrx_hook_watch.py): how ranks agree on a capture, and what
light mode does on the training thread.

Two ranks of a job that see the same slowdown at once (a busy machine slows both) each ask for a
capture through the shared folder. They must end with one request, from the same step, or each
takes its own into one capture folder (the fresh-clone CI of 2026-11-29 saw rank 0 capture steps
1681-1701 and rank 1 steps 1666-1686 into capture-1). Run by ctest (python.watch_hook) as
    python tests/python/watch_hook_test.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
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


class _Handle:
    def __init__(self, hooks, fn):
        self.hooks, self.fn = hooks, fn

    def remove(self):
        self.hooks.remove(self.fn)


class _Optimizers:
    """Stands in for torch's global optimizer step post hooks."""

    def __init__(self):
        self.hooks = []

    def register(self, fn):
        self.hooks.append(fn)
        return _Handle(self.hooks, fn)

    def step(self, opt):
        for fn in list(self.hooks):
            fn(opt, (), {})


class _Torch:
    class compiler:
        @staticmethod
        def is_compiling():
            return False

    class jit:
        @staticmethod
        def is_tracing():
            return False


class LightModeOnTheTrainingThread(unittest.TestCase):
    def test_a_step_keeps_its_time_and_the_steps_are_counted_every_batch(self):
        with tempfile.TemporaryDirectory() as d:
            w = trainrx_hook_watch._Watch(None, d)
            w.on_step()  # the clock starts
            w.on_step()  # the once-a-second work is due at once: counted
            self.assertEqual((w.steps, len(w.dts)), (1, 0))
            for k in range(1, w.BATCH):
                w.on_step()
                self.assertEqual((w.steps, len(w.dts)), (1, k))  # kept, not counted
            w.on_step()
            self.assertEqual((w.steps, len(w.dts)), (1 + w.BATCH, 0))
            self.assertEqual(sum(w.buckets), w.steps)
            self.assertEqual(w.early_arms, [20, 50])  # set again after step 5, counted late
            w.pending = ("on demand", "", w.steps + 1, 5)  # a capture asked: each step counted at once
            w._steps(time.perf_counter())
            self.assertTrue(w.eager)
            w.writer.flush()
            import faulthandler
            faulthandler.cancel_dump_traceback_later()
            w.hang_file.close()


    def test_suspended_hooks_see_no_step_and_resume_without_counting_the_gap(self):
        with tempfile.TemporaryDirectory() as d:
            os.environ["RANK"], os.environ["WORLD_SIZE"] = "0", "1"
            w = trainrx_hook_watch._Watch(None, d)
            opts = _Optimizers()
            hooks = trainrx_hook_watch._Hooks(_Torch, w, opts.register)
            hooks.resume()
            opt = object()
            for _ in range(3):
                opts.step(opt)
            self.assertEqual(w.steps + len(w.dts), 2)  # the first step starts the clock
            hooks.suspend()
            self.assertEqual(opts.hooks, [])
            opts.step(opt)
            import time
            time.sleep(0.2)  # steps the watcher does not see
            self.assertEqual(w.steps + len(w.dts), 2)
            hooks.resume()
            opts.step(opt)
            w._count()
            self.assertEqual(w.steps, 3)
            self.assertLess(w.sum, 0.1)  # the suspended stretch is no step of the job's
            hooks.suspend()
            w.writer.flush()

    def test_the_metrics_file_is_written_off_the_training_thread_and_ends_with_the_last_text(self):
        with tempfile.TemporaryDirectory() as d:
            w = trainrx_hook_watch._FileWriter(os.path.join(d, "rank0.prom"))
            import threading
            written_by = []
            real = w._write

            def spy(seq, text):
                written_by.append(threading.current_thread().name)
                real(seq, text)
            w._write = spy
            for k in range(50):
                w.put(f"text {k}\n")
            self.assertTrue(w.flush())
            self.assertEqual(open(os.path.join(d, "rank0.prom")).read(), "text 49\n")
            self.assertNotIn(threading.current_thread().name, written_by)
            # An older text taken by the thread never lands after the final one.
            w._write = real
            w.put("older\n")
            w.write_now("final\n")
            w._write(1, "stale\n")
            self.assertTrue(w.flush())
            self.assertEqual(open(os.path.join(d, "rank0.prom")).read(), "final\n")

    def test_the_hang_timer_is_armed_rarely_and_fires_after_the_wait(self):
        with tempfile.TemporaryDirectory() as d:
            os.environ["TRAINRX_WATCH_HANG_MIN_SECONDS"] = "60"
            try:
                w = trainrx_hook_watch._Watch(None, d)
            finally:
                del os.environ["TRAINRX_WATCH_HANG_MIN_SECONDS"]
            w.reference = [0.01] * 50  # x 20 = 0.2 s: the floor, 60 s, rules
            w._arm_hang(1000.0)
            import faulthandler
            faulthandler.cancel_dump_traceback_later()
            self.assertAlmostEqual(w.next_arm, 1000.0 + 7.5)
            with open(os.path.join(d, "hang-rank0.txt")) as f:
                header = f.read()
            self.assertIn("no optimizer step for 67.5 s", header)
            w.hang_file.close()


def read_json(folder, name):
    with open(os.path.join(folder, name)) as f:
        return json.load(f)


class _FakeCudaTorch:
    """CUDA as the hook sees it, up, with one caching allocator observer slot."""

    def __init__(self):
        self.observers = []
        outer = self

        class cuda:
            @staticmethod
            def is_initialized():
                return True

            @staticmethod
            def memory_allocated():
                return 7 << 30

            @staticmethod
            def memory_reserved():
                return 8 << 30

            @staticmethod
            def current_device():
                return 0

            @staticmethod
            def memory_stats(device):
                return {"allocated_bytes.all.current": 7 << 30, "reserved_bytes.all.current": 8 << 30}

            @staticmethod
            def get_device_properties(device):
                return type("P", (), {"total_memory": 80 << 30})()

            class memory:
                @staticmethod
                def _snapshot():
                    return {"segments": [{"device": 0, "total_size": 8 << 30}]}

        class _C:
            @staticmethod
            def _cuda_attach_out_of_memory_observer(fn):
                outer.observers.append(fn)

        self.cuda, self._C = cuda, _C


class OutOfMemoryCapture(unittest.TestCase):
    def test_the_cuda_allocator_observer_writes_the_moment_and_a_caught_error_is_said(self):
        with tempfile.TemporaryDirectory() as d:
            os.environ["RANK"], os.environ["WORLD_SIZE"] = "0", "1"
            torch = _FakeCudaTorch()
            w = trainrx_hook_watch._Watch(torch, d)
            self.assertEqual(torch.observers, [])
            w.write_metrics()  # CUDA seen up: the observer attached, once
            w.write_metrics()
            self.assertEqual(len(torch.observers), 1)
            w.steps = 41
            torch.observers[0](0, 3 << 30, 7 << 30, 1 << 30)
            torch.observers[0](0, 1 << 30, 7 << 30, 1 << 30)  # a retry: one capture a process
            folder = os.path.join(d, "capture-1")
            info = read_json(folder, "reason-rank0.json")
            self.assertEqual(info["reason"], "out of memory")
            self.assertIn("cuda:0 could not allocate 3.2 GB at ", info["detail"])
            self.assertIn("watch_hook_test.py", info["detail"])  # the innermost frame outside torch and the hook
            self.assertTrue(os.path.exists(os.path.join(folder, ".done-rank0")))
            names = [e["name"] for e in read_json(folder, "trace-rank0.json")["traceEvents"]]
            self.assertEqual(names[1], f"trainrx::out_of_memory cuda:0 {3 << 30}")
            self.assertTrue(names[0].startswith("trainrx::cuda_memory cuda:0 allocated=7516192768 reserved=8589934592"))
            self.assertTrue(os.path.exists(os.path.join(folder, info["snapshot"])))
            self.assertFalse(os.path.exists(os.path.join(d, "capture-2")))
            # The program caught it and stepped on: said in the reason.
            w.last = 0.0
            w.on_step()
            info = read_json(folder, "reason-rank0.json")
            self.assertTrue(info["caught"])
            self.assertIn("the job went on (step 42): the program caught the error", info["detail"])
            w.writer.flush()


if __name__ == "__main__":
    unittest.main()
