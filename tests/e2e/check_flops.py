"""Hand count of a Kineto trace's matmul FLOPs from its "Input Dims", independent of trainrx's model
(issue 52), held to what `trainrx analyze --format json` reports.

usage: check_flops.py TRACE(.json|.json.gz) ANALYSIS.json

For each CPU thread, every mm / addmm / bmm / baddbmm / linear / matmul not nested in another of
them (linear's inner addmm is the same multiply) inside a ProfilerStep is counted as 2*batch*M*K*N.
The per-step mean over the steps with such ops must equal trainrx's matmul class FLOPs per costed
step within 1 %. Exits non-zero and says why when it does not.
"""
import gzip
import json
import sys
from collections import defaultdict

MATMULS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul"}


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def matmul_flops(name, dims):
    if name == "aten::mm":
        (m, k), (_, n) = dims[0], dims[1]
        return 2 * m * k * n
    if name == "aten::addmm":
        (m, k), (_, n) = dims[1], dims[2]
        return 2 * m * k * n
    if name == "aten::bmm":
        (b, m, k), (_, _, n) = dims[0], dims[1]
        return 2 * b * m * k * n
    if name == "aten::baddbmm":
        (b, m, k), (_, _, n) = dims[1], dims[2]
        return 2 * b * m * k * n
    if name == "aten::linear":
        x, w = dims[0], dims[1]
        return 2 * prod(x[:-1]) * x[-1] * w[0]
    if name == "aten::matmul":
        a, b = dims[0], dims[1]
        m = a[-2] if len(a) >= 2 else 1
        n = b[-1] if len(b) >= 2 else 1
        batch = max(prod(a[:-2]), prod(b[:-2]))
        return 2 * batch * m * a[-1] * n
    raise ValueError(name)


def main():
    trace_path, analysis_path = sys.argv[1], sys.argv[2]
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        events = json.load(f)["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    threads = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator"):  # "Operator": torch 1.8
            threads[(e.get("pid"), e.get("tid"))].append(e)
    per_step = defaultdict(int)
    for evs in threads.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        covered_until = float("-inf")
        for e in evs:
            if e["name"] not in MATMULS or e["ts"] < covered_until:
                continue
            dims = e.get("args", {}).get("Input Dims")
            if not dims:
                continue
            covered_until = e["ts"] + e["dur"]
            step = next((i for i, (a, b) in enumerate(steps) if a <= e["ts"] < b), None)
            if step is not None:
                per_step[step] += matmul_flops(e["name"], dims)
    if not per_step:
        sys.exit(f"{trace_path}: no matmul with Input Dims inside a ProfilerStep")
    hand = sum(per_step.values()) / len(per_step)
    report = json.load(open(analysis_path))
    util = report["metrics"]["utilization"]
    if not util:
        sys.exit(f"{analysis_path}: no metrics.utilization")
    ours = next((c["flops"] for c in util[0]["classes"] if c["class"] == "matmul"), 0)
    print(f"  {trace_path.split('/')[-1]}: matmul FLOPs a step, by hand from Input Dims {hand:.6g} "
          f"({len(per_step)} steps), trainrx {ours:.6g}")
    if abs(ours - hand) > 0.01 * hand:
        sys.exit(f"matmul FLOPs differ: hand {hand} vs trainrx {ours}")


if __name__ == "__main__":
    main()
