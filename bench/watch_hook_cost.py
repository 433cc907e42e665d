#!/usr/bin/env python3
"""What `trainrx watch`'s light mode costs a step, measured on its own (issue 80): the hook's work at
an optimizer step (probes/python/trainrx_hook_watch.py, _Watch.on_step: the step's time, the
histogram, the regression windows and their looks, the once-a-second metrics file and hang timer),
timed over many calls in one process without torch (a stand-in object), the hook's clock made to
advance one step's pace per call so that its windows, looks and once-a-second writes run as at that
pace; the real clock times it. The share of the step is that time over the pace.

Usage: bench/watch_hook_cost.py [--calls 100000]
"""
import argparse
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "probes", "python"))
import trainrx_hook_watch as w  # noqa: E402


class _Cuda:
    @staticmethod
    def is_initialized():
        return False


class _Torch:
    cuda = _Cuda()


class _Clock:
    """The module's clock as the hook sees it: `pace` seconds a step, so its windows, looks and
    once-a-second writes run as they do at that pace; the real clock times the hook."""

    def __init__(self, pace):
        self.t, self.pace = 0.0, pace

    def perf_counter(self):
        self.t += self.pace
        return self.t

    def time(self):
        return 1.8e9 + self.t


def cost(pace, calls):
    d = tempfile.mkdtemp(prefix="watch_cost.")
    os.environ["TRAINRX_WATCH_HANG_MIN_SECONDS"] = "3600"
    clock = _Clock(pace)
    real = w.time
    w.time = clock
    try:
        watch = w._Watch(_Torch(), d)
        t0 = real.perf_counter()
        for _ in range(calls):
            watch.data_in_step += 1e-6
            watch.on_step()
        per_call = (real.perf_counter() - t0) / calls
    finally:
        w.time = real
        import faulthandler
        faulthandler.cancel_dump_traceback_later()
    return per_call


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=100000)
    a = p.parse_args()
    print("| step | light mode per step | share of the step |")
    print("|---|---|---|")
    for label, pace in (("0.5 ms", 0.5e-3), ("2.4 ms (op-heavy)", 2.4e-3), ("9 ms (conv net, transformer)", 9e-3),
                        ("100 ms", 0.1)):
        per = cost(pace, a.calls)
        print(f"| {label} | {per * 1e6:.2f} us | {100 * per / pace:.3f} % |")
    print("(plus two clock reads per batch in the DataLoader wrapper, ~0.1 us each)")


if __name__ == "__main__":
    main()
