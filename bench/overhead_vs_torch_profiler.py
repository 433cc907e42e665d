#!/usr/bin/env python3
"""What observing costs, side by side: the same PyTorch script run plain, under `trainrx record`
and under torch.profiler (CPU activities), interleaved in rotating order, in one run.

Each run is tests/python/train_planted.py (a small CNN, 16-sample batches; a step is a few ms on
CPU, so per-op costs show) with --step-times: the script times its own steps; the first WARMUP
steps and the last one (where torch.profiler exports its trace) are dropped, and a run's figure is
its median step. Per mode, the median over runs; ratios are to the plain runs. torch.profiler runs
in two configurations: "plain" (CPU activity only) and "shapes" (record_shapes=True, which is
what trainrx records for the first 3 steps).

--journal adds two modes for the collector's periodic flush (probes/journal.h): `trainrx record`
with no journal (TRAINRX_FLUSH_SECONDS=0) and with a flush every 0.25 s (8x the default rate),
and prints the flusher's own CPU time per second of recording, from the traces' "trainrx" block
(use --steps 600 or more, so that a run lasts several flushes).

Usage: bench/overhead_vs_torch_profiler.py [--rounds 5] [--steps 60] [--journal] [--floor] [--no-shapes] [--python PY] [--trainrx BIN]
"""
import argparse
import json
import os
import random
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
    p.add_argument("--journal", action="store_true")
    p.add_argument("--no-shapes", action="store_true", help="leave out torch.profiler+shapes (faster)")
    p.add_argument("--floor", action="store_true",
                   help="add `trainrx record` with a callback that records nothing (TRAINRX_PROBE_FLOOR=1): "
                        "what LibTorch's RecordFunction itself costs, the floor of any global observer")
    a = p.parse_args()
    script = os.path.join(REPO, "tests", "python", "train_planted.py")
    work = tempfile.mkdtemp(prefix="overhead.")
    base = [a.python, script, "--steps", str(a.steps), "--threads", str(a.threads)]
    sched = f"0,0,{a.steps}"
    modes = {
        "plain": lambda out: base,
        "trainrx record": lambda out: [a.trainrx, "record", "--steps", "all", "-o", os.path.join(work, "t.json"), "--"] + base,
        "torch.profiler": lambda out: base + ["--torch-profiler", os.path.join(work, "tp"),
                                              "--torch-profiler-schedule", sched, "--torch-profiler-mode", "plain"],
        "torch.profiler+shapes": lambda out: base + ["--torch-profiler", os.path.join(work, "tps"),
                                                     "--torch-profiler-schedule", sched, "--torch-profiler-mode", "shapes"],
    }
    env = {n: {} for n in modes}
    if a.journal:
        modes = {"plain": modes["plain"], "trainrx record": modes["trainrx record"]}
        for n, secs in (("record, no journal", "0"), ("record, journal 0.25 s", "0.25")):
            modes[n] = modes["trainrx record"]
            env[n] = {"TRAINRX_FLUSH_SECONDS": secs}
        env["plain"] = env["trainrx record"] = {}
    if a.no_shapes:
        modes.pop("torch.profiler+shapes", None)
    if a.floor:
        modes["record, floor callback"] = modes["trainrx record"]
        env["record, floor callback"] = {"TRAINRX_PROBE_FLOOR": "1"}
    journal_share = {n: [] for n in modes}
    names = list(modes)
    runs = {n: [] for n in names}
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # rotate: each mode in each position
        for n in order:
            out = os.path.join(work, "steps.json")
            cmd = modes[n](out) + ["--step-times", out]
            trace = os.path.join(work, "t.json")
            if os.path.exists(trace):
                os.remove(trace)
            # The floor callback records nothing, so `record` exits 2 (no trace): its steps still count.
            subprocess.run(cmd, check=n != "record, floor callback", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=dict(os.environ, **env.get(n, {})))
            steps = json.load(open(out))[a.warmup:-1]
            if n != "plain" and os.path.exists(trace):
                meta = json.load(open(trace))["trainrx"]
                if meta.get("journal_flushes"):
                    journal_share[n].append((meta["journal_busy_ns"], meta["duration_ns"], meta["journal_flushes"]))
            runs[n].append(statistics.median(steps))
        print(f"round {r + 1}/{a.rounds}: " + ", ".join(f"{n} {runs[n][-1]:.3f} ms" for n in names), file=sys.stderr)
    plain = statistics.median(runs["plain"])
    print(f"| mode | median step (ms) | runs (ms) | vs plain |")
    print(f"|---|---|---|---|")
    for n in names:
        m = statistics.median(runs[n])
        print(f"| {n} | {m:.3f} | {' '.join(f'{v:.2f}' for v in runs[n])} | {m / plain:.3f}x |")
    for n in names:
        if journal_share[n]:
            busy = sum(b for b, _, _ in journal_share[n])
            dur = sum(d for _, d, _ in journal_share[n])
            flushes = sum(f for _, _, f in journal_share[n])
            print(f"\n{n}: the journal's flusher took {busy / 1e6:.1f} ms of CPU in {dur / 1e9:.1f} s of recording "
                  f"({100 * busy / dur:.2f} % of one core; {flushes} flushes, {busy / flushes / 1e3:.0f} us each)")
    if "torch.profiler" not in runs:
        return
    tr = statistics.median(runs["trainrx record"]) - plain
    tp = statistics.median(runs["torch.profiler"]) - plain
    if tp > 0:
        print(f"\nadded per step: trainrx {tr:.3f} ms, torch.profiler {tp:.3f} ms "
              f"(trainrx / torch.profiler = {tr / tp:.2f})")
    # A run's median step moves by more than the effect from run to run, so one figure says little:
    # 95 % intervals from resampling the rounds (each round keeps its modes together: the runs of a
    # round are neighbours in time, which pairs them).
    lo_hi = lambda xs: (xs[int(0.025 * len(xs))], xs[int(0.975 * len(xs)) - 1])
    rng = random.Random(1)
    over, ratio = [], []
    for _ in range(2000):
        pick = [rng.randrange(a.rounds) for _ in range(a.rounds)]
        med = {n: statistics.median(runs[n][i] for i in pick) for n in ("plain", "trainrx record", "torch.profiler")}
        over.append(med["trainrx record"] / med["plain"] - 1)
        d = med["torch.profiler"] - med["plain"]
        ratio.append((med["trainrx record"] - med["plain"]) / d if d > 0 else float("inf"))
    over.sort()
    ratio.sort()
    (o1, o2), (r1, r2) = lo_hi(over), lo_hi(ratio)
    print(f"95 % intervals over {a.rounds} rounds (bootstrap): trainrx adds {100 * o1:+.1f} % to {100 * o2:+.1f} % "
          f"(target <= 3 %); trainrx / torch.profiler {r1:.2f} to {r2:.2f} (target <= 0.20)")


if __name__ == "__main__":
    main()
