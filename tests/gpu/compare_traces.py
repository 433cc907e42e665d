#!/usr/bin/env python3
"""Collector vs torch.profiler on the same configuration (issue 14, matrix 1).

Reads two Kineto-format traces (ours from `trainrx record`, torch.profiler's export_chrome_trace or
tensorboard_trace_handler output; .json or .json.gz) and compares, per training step:
  kernels          count of GPU kernels ("cat": "kernel")
  kernel_ms        summed kernel duration
  memcpy <kind>    count and bytes of each memcpy kind, e.g. "HtoD (Pageable -> Device)"
  syncs            host-side synchronizing runtime calls (cuda*Synchronize, cudaMemcpy without Async)
Only the steady-state steps count: events are assigned to a step by the CPU launch time (the runtime
call with the same correlation id), steps are ProfilerStep#N ranges, and the first --skip steps of each
trace are left out (cudnn autotuning, allocator growth), and the last (it can be partial). The two
traces may cut steps at different points of the loop (torch.profiler at prof.step(), trainrx at the
optimizer step): steady-state means per step are compared, not step numbers.

Usage: compare_traces.py OURS THEIRS [--skip 3] [--tolerance 5] [--json OUT]
Exit 0 when every figure agrees within the tolerance (percent), 1 when one does not, 2 on bad input.
"""
import argparse
import bisect
import gzip
import json
import re
import sys

SYNC_CALLS = re.compile(r"^cuda(Stream|Device|Event)Synchronize$|^cudaMemcpy$|^cudaStreamWaitEvent$")


def load(path):
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"compare_traces: {path}: {e}")
    ev = d.get("traceEvents") if isinstance(d, dict) else None
    if not isinstance(ev, list):
        sys.exit(f"compare_traces: {path}: no traceEvents list")
    return ev


def per_step(events, skip):
    steps = []
    for e in events:
        n = e.get("name", "")
        # (torch.profiler also writes each step as a gpu_user_annotation on the GPU's track: not a CPU step)
        if e.get("ph") == "X" and isinstance(n, str) and n.startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation":
            try:
                steps.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), int(n.split("#")[1])))
            except (KeyError, ValueError):
                pass
    steps.sort()
    # The last range can be partial (torch.profiler's last one runs from the last prof.step() to stop).
    if len(steps) <= skip + 1:
        return None, f"{len(steps)} ProfilerStep ranges (need more than --skip {skip} + 1)"
    steps = steps[skip:-1]
    launch = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch[e["args"]["correlation"]] = float(e["ts"])

    starts = [lo for lo, _, _ in steps]

    def step_of(ts):  # steps are sorted and do not overlap: binary search
        i = bisect.bisect_right(starts, ts) - 1
        return steps[i][2] if i >= 0 and ts < steps[i][1] else None

    out = {n: {"kernels": 0, "kernel_ms": 0.0, "syncs": 0, "memcpy": {}} for _, _, n in steps}
    for e in events:
        cat = e.get("cat")
        if e.get("ph") != "X":
            continue
        if cat in ("kernel", "gpu_memcpy"):
            corr = e.get("args", {}).get("correlation")
            n = step_of(launch.get(corr, float(e["ts"])))
            if n is None:
                continue
            if cat == "kernel":
                out[n]["kernels"] += 1
                out[n]["kernel_ms"] += float(e.get("dur", 0)) / 1e3
            else:
                kind = e.get("name", "").replace("Memcpy ", "")
                c = out[n]["memcpy"].setdefault(kind, [0, 0])
                c[0] += 1
                c[1] += int(e.get("args", {}).get("bytes", 0))
        elif cat == "cuda_runtime" and SYNC_CALLS.match(e.get("name", "")):
            n = step_of(float(e["ts"]))
            if n is not None:
                out[n]["syncs"] += 1
    return out, ""


def summarize(steps):
    k = len(steps)
    s = {"steps": k, "kernels": 0.0, "kernel_ms": 0.0, "syncs": 0.0}
    for st in steps.values():
        s["kernels"] += st["kernels"] / k
        s["kernel_ms"] += st["kernel_ms"] / k
        s["syncs"] += st["syncs"] / k
        for kind, (c, b) in st["memcpy"].items():
            s.setdefault(f"memcpy {kind} count", 0.0)
            s.setdefault(f"memcpy {kind} bytes", 0.0)
            s[f"memcpy {kind} count"] += c / k
            s[f"memcpy {kind} bytes"] += b / k
    return s


def compare(ours, theirs, tolerance):
    rows, ok = [], True
    for key in sorted(set(ours) | set(theirs), key=lambda x: (x != "steps", x)):
        a, b = ours.get(key, 0.0), theirs.get(key, 0.0)
        diff = 0.0 if a == b else (abs(a - b) / max(abs(a), abs(b)) * 100)
        agree = key == "steps" or diff <= tolerance
        ok &= agree
        rows.append({"figure": key, "trainrx": a, "torch.profiler": b, "diff_pct": diff, "agree": agree})
    return rows, ok


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ours")
    p.add_argument("theirs")
    p.add_argument("--skip", type=int, default=3)
    p.add_argument("--tolerance", type=float, default=5.0)
    p.add_argument("--json", default="")
    a = p.parse_args()
    res = {}
    for label, path in (("trainrx", a.ours), ("torch.profiler", a.theirs)):
        steps, why = per_step(load(path), a.skip)
        if steps is None:
            print(f"compare_traces: {path}: {why}", file=sys.stderr)
            return 2
        res[label] = summarize(steps)
    rows, ok = compare(res["trainrx"], res["torch.profiler"], a.tolerance)
    print(f"{'figure (per step)':44} {'trainrx':>12} {'torch.prof':>12} {'diff %':>7}")
    for r in rows:
        print(f"{r['figure']:44} {r['trainrx']:12.3f} {r['torch.profiler']:12.3f} {r['diff_pct']:7.2f}{'' if r['agree'] else '  <- differs'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "agree": ok, "tolerance_pct": a.tolerance}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
