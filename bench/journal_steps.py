#!/usr/bin/env python3
"""The journal's cost to the step, read inside each recorded run (issue 34.13: "the journal <= 1 % of
step").

Wall-clock A/B of whole runs (bench/overhead_shapes.py: journal on vs off) cannot resolve 1 % on
these shared 2-core machines: runs of one configuration differ by 5-20 %. Here each run is its own
control. `trainrx record` writes when its journal flushed (the "trainrx.journal_busy" counter: 1
while the flusher worked, 0 after); the steps that overlap a flush are compared with the steps of
the same run that do not, and the journal's cost per step is

    (mean overlapping step / mean clear step - 1) x the share of steps that overlap a flush

(a flush slows only the steps it overlaps), each flush's steps against the --near steps before and
after it that overlap no flush (so the run's slow drift cancels). Steps are the ProfilerStep ranges the start-up hook
writes at optimizer steps; the first --warmup are left out. Each run also gives the flusher's own
CPU per step (journal_cpu_ns). The table gives the median over runs and a 95 % interval from
resampling the runs.

What it does not see: a cost that lasts between flushes (none is expected: between flushes the
flusher sleeps), and effects on a machine whose cores are all busy (there a SCHED_IDLE flusher
waits, and the trace's longest gap says how long).

Usage: bench/journal_steps.py [--runs 5] [--steps 1500] [--shapes ops,ops1] [--flush-seconds 2] [--near 40]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

from overhead_shapes import interval  # the same bootstrap over runs (bench/ is the script's folder)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {"ops": ["--shape", "ops"], "ops1": ["--shape", "ops", "--threads", "1"], "workers": ["--shape", "workers"],
          "model": ["--shape", "model"]}


def read_run(path, warmup, near):
    doc = json.load(open(path))
    steps, busy = [], []
    for e in doc["traceEvents"]:
        name = e.get("name", "")
        if e.get("ph") == "X" and name.startswith("ProfilerStep#"):
            steps.append((float(e["ts"]), float(e["dur"])))
        elif e.get("ph") == "C" and name == "trainrx.journal_busy":
            busy.append((float(e["ts"]), e["args"][name]))
    steps.sort()
    busy.sort()
    spans, start = [], None
    for ts, v in busy:
        if v == 1:
            start = ts
        elif start is not None:
            spans.append((start, ts))
            start = None
    steps = steps[warmup:]
    during = [any(a < ts + d and ts < b for a, b in spans) for ts, d in steps]
    # Each flush against its neighbours in time: the steps it overlaps, and up to `near` steps that
    # overlap no flush on either side of them (so a slow drift of the run cancels).
    over, clear = [], []
    i = 0
    while i < len(steps):
        if not during[i]:
            i += 1
            continue
        j = i
        while j < len(steps) and during[j]:
            j += 1
        before = [steps[k][1] for k in range(max(0, i - near), i) if not during[k]]
        after = [steps[k][1] for k in range(j, min(len(steps), j + near)) if not during[k]]
        if before and after:
            over.append([d for _, d in steps[i:j]])
            clear.append(before + after)
        i = j
    meta = doc.get("trainrx", {})
    return steps, spans, during, over, clear, meta


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--shapes", default="ops,ops1")
    p.add_argument("--flush-seconds", default="2", help="TRAINRX_FLUSH_SECONDS (default 2, trainrx's default)")
    p.add_argument("--near", type=int, default=40, help="steps on either side of a flush that serve as its control")
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    a = p.parse_args()
    shapes = [s for s in a.shapes.split(",") if s]
    for s in shapes:
        if s not in SHAPES:
            sys.exit(f"--shapes: unknown shape '{s}' (one of {', '.join(SHAPES)})")
    work = tempfile.mkdtemp(prefix="journal_steps.")
    trace = os.path.join(work, "t.json")
    results = {s: [] for s in shapes}
    for r in range(a.runs):
        for s in shapes[r % len(shapes):] + shapes[:r % len(shapes)]:
            if os.path.exists(trace):
                os.remove(trace)
            cmd = [a.trainrx, "record", "--steps", "all", "-o", trace, "--", a.python,
                   os.path.join(REPO, "bench", "shapes_train.py")] + SHAPES[s] + ["--steps", str(a.steps)]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=dict(os.environ, TRAINRX_FLUSH_SECONDS=a.flush_seconds))
            steps, spans, during, over, clear, meta = read_run(trace, a.warmup, a.near)
            if not over:  # e.g. a SCHED_IDLE flusher starved by threads on every core: one flush to the end
                print(f"run {r + 1} {s}: {len(spans)} flushes, none with steps outside a flush on both sides: nothing to "
                      f"compare (longest gap between flushes {int(meta.get('journal_max_gap_ns', 0)) / 1e9:.1f} s)", flush=True)
                continue
            # Per flush: its steps' mean over its neighbours' mean; weighted by the steps it overlaps.
            n_over = sum(len(o) for o in over)
            slower = sum(len(o) * (statistics.fmean(o) / statistics.fmean(c) - 1) for o, c in zip(over, clear)) / n_over
            share = sum(during) / len(during)
            cost = slower * share
            cpu = int(meta.get("journal_cpu_ns", 0)) / 1e6 / len(steps)
            results[s].append((cost, slower, share, cpu, statistics.fmean(d for _, d in steps) / 1e3,
                               len(spans), int(meta.get("journal_max_gap_ns", 0)) / 1e9))
            print(f"run {r + 1} {s}: {len(spans)} flushes, {sum(during)} of {len(steps)} steps overlap one, those "
                  f"{100 * slower:+.1f} %: journal {100 * cost:+.2f} % of the step; flusher CPU "
                  f"{cpu:.3f} ms a step", flush=True)
    rng = random.Random(1)
    print(f"\n{a.runs} runs of {a.steps} steps each, journal every {a.flush_seconds} s\n")
    print("| shape | mean step | flushes a run | steps during a flush | those steps slower by | journal's cost, % of the step "
          "(95 % interval) | flusher CPU a step |")
    print("|---|---|---|---|---|---|---|")
    for s in shapes:
        rs = results[s]
        if not rs:
            print(f"| {s} | | | | | no run had a flush with clear steps around it | |")
            continue
        costs = [100 * x[0] for x in rs]
        lo, hi = interval(costs, statistics.median, rng)
        print(f"| {s} | {statistics.median(x[4] for x in rs):.2f} ms | {statistics.median(x[5] for x in rs):.0f} | "
              f"{100 * statistics.median(x[2] for x in rs):.0f} % | {100 * statistics.median(x[1] for x in rs):+.1f} % | "
              f"**{statistics.median(costs):+.2f} %** ({lo:+.2f} to {hi:+.2f}) | {statistics.median(x[3] for x in rs):.3f} ms |")


if __name__ == "__main__":
    main()
