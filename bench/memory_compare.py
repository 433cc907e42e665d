#!/usr/bin/env python3
"""trainrx's memory figures beside torch.profiler's own memory timeline and HTA's memory analysis,
on the same runs (issue 36).

For each run of tests/python/train_planted.py (clean, and --leak) under torch.profiler with
record_shapes, with_stack and profile_memory:
  * trainrx: `trainrx analyze TRACE --format json` -> metrics.memory (peak allocated, median step
    peak, growth per step), from the trace's [memory] events;
  * the trace itself, read here independently: the largest "Total Allocated" of its [memory] events;
  * torch.profiler's memory timeline: prof.export_memory_timeline(raw.json.gz, device="cpu"), read
    by HTA 0.5.0's MemoryAnalysis._process_raw_events (the data behind its plot_memory_timeline),
    summed over categories: its peak, what existed before profiling (parameters, optimizer state:
    the timeline's t=-1 entries), and the peak above that.
What each counts differs by design: on CPU, c10's "Total Allocated" counts only what was allocated
since profiling began (tensors made before it, such as the parameters, are not in it), the timeline
counts every tensor it can see, including those made before. So trainrx's peak is compared with the
trace's own figure (must be equal) and with the timeline's peak above its pre-existing tensors
(close: the timeline sees tensors, the allocator sees allocations, e.g. storage shared by views once).

Usage: bench/memory_compare.py [--steps N]   (about 30 s on a 2-core machine; fills .venv-peers once)
Environment: TRAINRX (default build/trainrx), TRAINRX_PYTHON (torch; default .venv/bin/python, used
to run this file's recording half), PEERS_VENV (HTA; default .venv-peers via scripts/peers-venv).
"""
import argparse
import glob
import gzip
import json
import os
import runpy
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "tests", "python", "train_planted.py")


def record(out_dir, steps, extra):
    """Runs the planted script in this process under torch.profiler (its own --torch-profiler), then
    exports torch.profiler's memory timeline of the same profile."""
    g = runpy.run_path(SCRIPT, run_name="train_planted")
    sys.argv = ["train_planted.py", "--torch-profiler", out_dir, "--steps", str(steps), "--threads", "1"] + extra
    try:
        g["main"]()
    except SystemExit:
        pass
    raw = os.path.join(out_dir, "memory.raw.json.gz")
    g["main"].__globals__["PROFILER"].export_memory_timeline(raw, device="cpu")  # run_path returned a copy
    trace = glob.glob(os.path.join(out_dir, "*.pt.trace.json"))[0]
    return trace, raw


def trace_peak(trace):
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    totals = [e["args"]["Total Allocated"] for e in events
              if e.get("name") == "[memory]" and "Total Allocated" in e.get("args", {})]
    return max(totals), len(totals)


TOLERANCE = 0.05  # of the timeline's figure (measured: 1.000 on both runs, torch 2.13 CPU)

HTA_CODE = r"""
import json, sys
from hta.memory_analysis import MemoryAnalysis
times, sizes = MemoryAnalysis(sys.argv[1])._process_raw_events()
totals = [sum(s) for s in sizes]
print(json.dumps({"peak": max(totals), "before": totals[0], "points": len(totals)}))
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)  # the recording half
    p.add_argument("--name", default="")
    p.add_argument("--out", default="")
    a, extra = p.parse_known_args()
    if a.inner:
        trace, raw = record(a.out, a.steps, extra)
        print(json.dumps({"trace": trace, "raw": raw}))
        return 0

    trainrx = os.environ.get("TRAINRX", os.path.join(REPO, "build", "trainrx"))
    torch_py = os.environ.get("TRAINRX_PYTHON", os.path.join(REPO, ".venv", "bin", "python"))
    peers = subprocess.run([os.path.join(REPO, "scripts", "peers-venv")], check=True, capture_output=True,
                           text=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in (("clean", []), ("leak", ["--leak"])):
            out = os.path.join(tmp, name)
            done = subprocess.run([torch_py, __file__, "--inner", "--out", out, "--steps", str(a.steps)] + flags,
                                  check=True, capture_output=True, text=True)
            paths = json.loads(done.stdout.strip().splitlines()[-1])
            report = os.path.join(tmp, name + ".report.json")
            subprocess.run([trainrx, "analyze", paths["trace"], "--format", "json", "-o", report], check=True,
                           capture_output=True)
            with open(report) as f:
                mem = json.load(f)["metrics"]["memory"][0]
            peak, events = trace_peak(paths["trace"])
            hta = json.loads(subprocess.run([peers, "-c", HTA_CODE, paths["raw"]], check=True, capture_output=True,
                                            text=True).stdout)
            rows.append((name, mem, peak, events, hta))

    mb = lambda b: f"{b / 1e6:.2f} MB"
    print(f"{'run':6} {'trainrx peak':>13} {'trace max':>11} {'timeline peak':>14} {'before':>9} {'above before':>13} "
          f"{'trainrx/above':>13} {'growth/step':>12}")
    same = close = True
    for name, mem, peak, events, hta in rows:
        above = hta["peak"] - hta["before"]
        ratio = mem["peak_allocated_bytes"] / above if above > 0 else float("nan")
        print(f"{name:6} {mb(mem['peak_allocated_bytes']):>13} {mb(peak):>11} {mb(hta['peak']):>14} {mb(hta['before']):>9} "
              f"{mb(above):>13} {ratio:>13.3f} {mem['growth_bytes_per_step'] / 1e6:>9.2f} MB")
        same &= mem["peak_allocated_bytes"] == peak
        close &= abs(ratio - 1) <= TOLERANCE
    print("trainrx's peak equals the trace's largest Total Allocated:", "yes" if same else "NO")
    print(f"trainrx's peak within {TOLERANCE:.0%} of the timeline's peak above its pre-existing tensors:", "yes" if close else "NO")
    return 0 if same and close else 1


if __name__ == "__main__":
    sys.exit(main())
