#!/usr/bin/env python3
"""What observing adds to one PyTorch op called from Python: trainrx and torch.profiler side by
side, interleaved in one process (whole processes on this machine differ by up to 2x from one
another, far more than the effect).

The worker runs under `trainrx record --steps all` and times batches of `torch.add(a, b, out=c)`
on 1-element CPU tensors (the cheapest op: the observer's cost is not hidden behind the op's work)
in three modes, round by round:
  plain           trainrx paused (trainrx::probes::SetEnabled(false): the callback is unregistered)
  trainrx         trainrx recording
  torch.profiler  trainrx paused, inside torch.profiler.profile(activities=[CPU]) (no shapes, no
                  stack: its default), its events dropped after the batch
The timed calls follow 5 optimizer steps, as in a training loop past its first steps (trainrx boxes
op inputs during its first 3 steps only). A mode's figure is the median ns per call over its
batches; each observed batch's addition is its time less the mean of the plain batches just before
and after it, and a process's figures are medians over its rounds. The bench runs --processes
worker processes and prints each process's figures and their medians, the ns added per call and
the ratio trainrx / torch.profiler (issue 16's target: <= 0.20).

Usage: bench/per_op_python.py [--processes 3] [--rounds 30] [--ops 5000] [--floor] [--python PY] [--trainrx BIN]
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
    import ctypes
    import time
    import torch
    lib = os.environ.get("TRAINRX_PROBE_LIB", "")
    if not lib:
        sys.exit("per_op_python --worker: run it under `trainrx record` (no TRAINRX_PROBE_LIB)")
    # The probe is already loaded in this process; this returns the same library. Its C++ API:
    # trainrx::probes::SetEnabled(bool), Recording().
    probe = ctypes.CDLL(lib)
    set_enabled = probe["_ZN7trainrx6probes10SetEnabledEb"]
    set_enabled.argtypes = [ctypes.c_bool]
    recording = probe["_ZN7trainrx6probes9RecordingEv"]
    recording.restype = ctypes.c_bool
    if not recording():
        sys.exit("per_op_python --worker: the probe is not recording")
    torch.set_num_threads(1)
    x, y, out = torch.ones(1), torch.ones(1), torch.empty(1)
    w = torch.nn.Parameter(torch.ones(1))
    opt = torch.optim.SGD([w], lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        (w * 2).sum().backward()
        opt.step()

    def batch():
        t0 = time.perf_counter_ns()
        for _ in range(a.ops):
            torch.add(x, y, out=out)
        return (time.perf_counter_ns() - t0) / a.ops

    def plain():
        set_enabled(False)
        return batch()

    def trainrx():
        set_enabled(True)
        v = batch()
        set_enabled(False)
        return v

    def profiled():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            return batch()

    # Each observed batch is compared with the plain batches just before and after it: the
    # machine's speed drifts within a process too, and neighbours in time pair best.
    res = {"plain": [], "trainrx": [], "torch.profiler": [], "trainrx added": [], "torch.profiler added": []}
    for r in range(a.rounds + 1):  # round 0 warms every mode and is dropped
        p0 = plain()
        t = trainrx()
        p1 = plain()
        k = profiled()
        p2 = plain()
        if r > 0:
            res["plain"] += [p0, p1, p2]
            res["trainrx"].append(t)
            res["torch.profiler"].append(k)
            res["trainrx added"].append(t - (p0 + p1) / 2)
            res["torch.profiler added"].append(k - (p1 + p2) / 2)
    set_enabled(True)
    with open(a.result, "w") as f:
        json.dump({n: statistics.median(v) for n, v in res.items()}, f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--ops", type=int, default=5000)
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    p.add_argument("--floor", action="store_true",
                   help="also run the processes with TRAINRX_PROBE_FLOOR=1: trainrx's callback records nothing, "
                        "so its column is what LibTorch's RecordFunction costs any global observer")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--result", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a)
    work = tempfile.mkdtemp(prefix="per_op.")
    res, trace = os.path.join(work, "r.json"), os.path.join(work, "t.json")
    cmd = [a.trainrx, "record", "--steps", "all", "-o", trace, "--", a.python, os.path.abspath(__file__),
           "--worker", "--rounds", str(a.rounds), "--ops", str(a.ops), "--result", res]
    for floor in ([False, True] if a.floor else [False]):
        if floor:
            print("\nThe same with a callback that records nothing (TRAINRX_PROBE_FLOOR=1) in trainrx's place:\n")
        figures = []
        print("| process | plain ns/call | trainrx | torch.profiler | trainrx added | torch.profiler added | ratio |")
        print("|---|---|---|---|---|---|---|")
        for i in range(a.processes):
            if os.path.exists(res):
                os.remove(res)
            env = dict(os.environ, TRAINRX_PROBE_FLOOR="1") if floor else None
            proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
            # The floor callback records nothing, so `record` exits 2 (no trace); its timings still count.
            if (proc.returncode != 0 and not floor) or not os.path.exists(res):
                sys.exit(f"per_op_python: the worker failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
            f = json.load(open(res))
            if not floor:
                events = sum(1 for e in json.load(open(trace))["traceEvents"] if e.get("name") == "aten::add")
                if events < a.rounds * a.ops:  # the probe must have seen every timed call
                    sys.exit(f"per_op_python: the trace holds {events} aten::add events, fewer than the "
                             f"{a.rounds * a.ops} timed calls")
            f["ratio"] = f["trainrx added"] / max(1e-9, f["torch.profiler added"])
            figures.append(f)
            print(f"| {i + 1} | {f['plain']:.0f} | {f['trainrx']:.0f} | {f['torch.profiler']:.0f} | "
                  f"{f['trainrx added']:+.0f} | {f['torch.profiler added']:+.0f} | {f['ratio']:.2f} |")
        med = {n: statistics.median(f[n] for f in figures) for n in figures[0]}
        print(f"| median | {med['plain']:.0f} | {med['trainrx']:.0f} | {med['torch.profiler']:.0f} | "
              f"{med['trainrx added']:+.0f} | {med['torch.profiler added']:+.0f} | {med['ratio']:.2f} |")
        lo, hi = min(f["ratio"] for f in figures), max(f["ratio"] for f in figures)
        who = "record-nothing callback" if floor else "trainrx"
        print(f"\n{who} / torch.profiler per call from Python: {med['ratio']:.2f} "
              f"(processes {lo:.2f} to {hi:.2f}; target <= 0.20)")

if __name__ == "__main__":
    main()
