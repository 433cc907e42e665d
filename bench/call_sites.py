#!/usr/bin/env python3
"""What naming the user's line costs (issue 49.12): `trainrx record` wraps the few calls that sync
(Tensor.item / tolist / __bool__ / __float__ / __int__ / cpu / nonzero / masked_select,
torch.nonzero / masked_select, torch.cuda.synchronize / empty_cache) so each runs inside a
"trainrx::at <file>(<line>): <function>" range. Measured side by side in one recorded process,
round by round, on the cheapest such call (`t.item()` on a 1-element CPU tensor, where the wrapper's
cost is not hidden behind a device wait):
  plain      the original method (torch.Tensor.item.__wrapped__), recorded by trainrx as usual
  call site  the wrapped method: one sys._getframe walk and one record_function per call
  with_stack torch.profiler(with_stack=True) around the plain call: the Python tracer on every call,
             torch.profiler's way to the same line (trainrx paused meanwhile)
  torch's read  the wrapped method called from a loop compiled as code in torch's folder (AdamW
             reading its step counts): a host tensor's read from there gets no range, against the
             plain method from the same loop ("torch, plain")
Prints the median ns per call of each over its rounds, and the ns the call site adds. On a GPU the
call it wraps waits for the device (tens of microseconds to milliseconds): the wrapper's cost is
a small share of it.

Usage: bench/call_sites.py [--rounds 30] [--calls 2000] [--python PY] [--trainrx BIN]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(a):
    import time
    import torch
    item = torch.Tensor.item
    plain = getattr(item, "__wrapped__", None)
    if plain is None:
        sys.exit("call_sites --worker: Tensor.item is not wrapped (run under `trainrx record`, TRAINRX_MARKS=1)")
    t = torch.ones(1)
    m = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(5):  # past the first steps, as in a training loop
        opt.zero_grad()
        m(torch.ones(1, 4)).sum().backward()
        opt.step()

    def batch(fn):
        t0 = time.perf_counter_ns()
        for _ in range(a.calls):
            fn(t)
        return (time.perf_counter_ns() - t0) / a.calls

    # The same loop as code in torch's folder (AdamW reading its step counts): the wrapper lets a
    # host tensor's read from there through without a range.
    scope = {}
    loop = "def loop(fn, t, calls):\n    for _ in range(calls):\n        fn(t)\n"
    exec(compile(loop, os.path.join(os.path.dirname(torch.__file__), "optim", "trainrx_bench_loop.py"), "exec"), scope)

    def inside(fn):
        t0 = time.perf_counter_ns()
        scope["loop"](fn, t, a.calls)
        return (time.perf_counter_ns() - t0) / a.calls

    figures = {"plain": [], "call site": [], "with_stack": [], "torch, plain": [], "torch's read": []}
    for _ in range(a.rounds):
        figures["plain"].append(batch(plain))
        figures["call site"].append(batch(item))
        figures["torch, plain"].append(inside(plain))
        figures["torch's read"].append(inside(item))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True):
            figures["with_stack"].append(batch(plain))
    json.dump({k: statistics.median(v) for k, v in figures.items()}, open(a.out, "w"))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    p.add_argument("--worker", action="store_true")
    p.add_argument("--out", default="")
    a = p.parse_args()
    if a.worker:
        return worker(a)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "figures.json")
        cmd = [a.trainrx, "record", "--steps", "all", "-o", os.path.join(d, "t.json"), "--", a.python, os.path.abspath(__file__),
               "--worker", "--rounds", str(a.rounds), "--calls", str(a.calls), "--out", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        f = json.load(open(out))
    for k, v in f.items():
        print(f"{k:10s} {v:9.0f} ns per t.item()")
    inner = f["torch's read"] - f["torch, plain"]
    print(f"the call site adds {f['call site'] - f['plain']:.0f} ns a call "
          f"({f['call site'] / f['plain']:.2f}x plain); with_stack adds {f['with_stack'] - f['plain']:.0f} ns; "
          f"a host read from torch's own code (no range) {inner:.0f} ns")


if __name__ == "__main__":
    sys.exit(main())
