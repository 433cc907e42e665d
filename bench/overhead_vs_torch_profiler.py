#!/usr/bin/env python3
"""What observing costs, side by side: the same PyTorch script run plain, under `trainrx record`
and under torch.profiler (CPU activities), interleaved in rotating order, in one run.

Each run is tests/python/train_planted.py (a small CNN, 16-sample batches; a step is a few ms on
CPU, so per-op costs show) with --step-times: the script times its own steps; the first WARMUP
steps and the last one (where torch.profiler exports its trace) are dropped, and a run's figure is
its median step. Per mode, the median over runs; ratios are to the plain runs. torch.profiler runs
in two configurations: "plain" (CPU activity only) and "shapes" (record_shapes=True, which is
what trainrx records for the first 3 steps).

Usage: bench/overhead_vs_torch_profiler.py [--rounds 5] [--steps 60] [--python PY] [--trainrx BIN]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    script = os.path.join(REPO, "tests", "python", "train_planted.py")
    work = tempfile.mkdtemp(prefix="overhead.")
    base = [a.python, script, "--steps", str(a.steps), "--threads", str(a.threads)]
    sched = f"0,0,{a.steps}"
    modes = {
        "plain": lambda out: base,
        "trainrx record": lambda out: [a.trainrx, "record", "-o", os.path.join(work, "t.json"), "--"] + base,
        "torch.profiler": lambda out: base + ["--torch-profiler", os.path.join(work, "tp"),
                                              "--torch-profiler-schedule", sched, "--torch-profiler-mode", "plain"],
        "torch.profiler+shapes": lambda out: base + ["--torch-profiler", os.path.join(work, "tps"),
                                                     "--torch-profiler-schedule", sched, "--torch-profiler-mode", "shapes"],
    }
    names = list(modes)
    runs = {n: [] for n in names}
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # rotate: each mode in each position
        for n in order:
            out = os.path.join(work, "steps.json")
            cmd = modes[n](out) + ["--step-times", out]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            steps = json.load(open(out))[a.warmup:-1]
            runs[n].append(statistics.median(steps))
        print(f"round {r + 1}/{a.rounds}: " + ", ".join(f"{n} {runs[n][-1]:.3f} ms" for n in names), file=sys.stderr)
    plain = statistics.median(runs["plain"])
    print(f"| mode | median step (ms) | runs (ms) | vs plain |")
    print(f"|---|---|---|---|")
    for n in names:
        m = statistics.median(runs[n])
        print(f"| {n} | {m:.3f} | {' '.join(f'{v:.2f}' for v in runs[n])} | {m / plain:.3f}x |")
    tr = statistics.median(runs["trainrx record"]) - plain
    tp = statistics.median(runs["torch.profiler"]) - plain
    if tp > 0:
        print(f"\nadded per step: trainrx {tr:.3f} ms, torch.profiler {tp:.3f} ms "
              f"(trainrx / torch.profiler = {tr / tp:.2f})")


if __name__ == "__main__":
    main()
