#!/usr/bin/env python3
"""What watch mode's light mode costs a step, in time, measured inside one process (issue 80).

Run beside whole jobs (bench/overhead_shapes.py --modes watch), light mode's cost sits far inside a
2-core VM's noise: two processes' step times differ by several per cent whatever runs in them. Here
each shape runs once under `trainrx watch`, and the script itself (bench/shapes_train.py
--watch-alternate B) takes light mode's hooks out and puts them back every B steps, in the order
off/on, on/off, ... (a drift of the machine's pace cancels within each four blocks). A block's
figure is its mean step (what a job pays: the once-a-second metrics write and hang timer included);
a pair of neighbouring blocks gives log(on / off). Each run gives the mean of its pairs' ratios and
its standard error; the runs are combined as a random-effects mean (DerSimonian-Laird: where runs
disagree by more than their own errors allow, as processes on a busy VM do, the interval widens by
that spread instead of trusting the pooled pairs). The table gives per shape each run's figure, the
combined one with its 95 % interval, and the verdict against the goal (<= 1 % of a step): holds (the
interval's top under 1 %), exceeds (its bottom over 1 %), or undecided (the interval holds 1 %: too
noisy to decide).

What this leaves out, on purpose or not: the process's start (the hook's import, once); with the
hooks out, the watcher still holds its hang timer and metrics thread, which cost nothing per step.
The once-a-second work falls in the first watched step after an unwatched block whenever a second
has passed, so it is charged to the watched blocks of both: at most twice its real share.

Usage: bench/watch_interleaved.py [--shapes ops,model,transformer] [--block 1] [--runs 2] [--steps-scale 1]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead_shapes import LABEL, SHAPES  # noqa: E402  (the shapes' script arguments and names)

STEPS = {"ops": 3000, "ops1": 3000, "workers": 3000, "model": 1200, "model1": 1200, "transformer": 1200,
         "transformer1": 1200}  # steps a run: pairs enough to decide 1 %
GOAL = 0.01


def pair_ratios(ms, watched, block, skip_blocks):
    """log(mean watched block / mean unwatched block) for each pair of neighbouring blocks."""
    blocks = []
    for start in range(0, len(ms) - block + 1, block):
        arms = set(watched[start:start + block])
        if len(arms) != 1:
            raise SystemExit(f"watch_interleaved.py: steps {start}-{start + block - 1} mix arms: the script's blocks are not {block} steps")
        blocks.append((arms.pop(), statistics.fmean(ms[start:start + block])))
    out = []
    for k in range(skip_blocks // 2, len(blocks) // 2):
        (a_on, a), (b_on, b) = blocks[2 * k], blocks[2 * k + 1]
        if a_on == b_on:
            raise SystemExit("watch_interleaved.py: a pair of blocks with one arm")
        on, off = (a, b) if a_on else (b, a)
        out.append(math.log(on / off))
    return out


def mean_se(xs):
    return statistics.fmean(xs), statistics.stdev(xs) / math.sqrt(len(xs))


def combined(runs):
    """Random-effects mean of the runs' (mean, se) (DerSimonian-Laird), its se, and the spread
    between runs beyond their own errors (tau)."""
    w = [1 / se ** 2 for _, se in runs]
    fixed = sum(wi * m for wi, (m, _) in zip(w, runs)) / sum(w)
    q = sum(wi * (m - fixed) ** 2 for wi, (m, _) in zip(w, runs))
    c = sum(w) - sum(wi * wi for wi in w) / sum(w)
    tau2 = max(0.0, (q - (len(runs) - 1)) / c) if len(runs) > 1 else 0.0
    ws = [1 / (se ** 2 + tau2) for _, se in runs]
    return sum(wi * m for wi, (m, _) in zip(ws, runs)) / sum(ws), 1 / math.sqrt(sum(ws)), math.sqrt(tau2)


def pct(x):
    return 100.0 * (math.exp(x) - 1.0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="ops,model,transformer")
    p.add_argument("--block", type=int, default=1, help="steps a block (an arm's run of steps)")
    p.add_argument("--runs", type=int, default=2, help="processes per shape (their pairs pooled)")
    p.add_argument("--steps-scale", type=float, default=1.0)
    p.add_argument("--warmup-blocks", type=int, default=40, help="blocks dropped at each run's start")
    p.add_argument("--clock", choices=["wall", "cpu", "thread"], default="wall",
                   help="a step's time: wall, the process's CPU time, or the training thread's own CPU time "
                        "(where light mode's work runs; a busy VM's other tenants do not move it)")
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    a = p.parse_args()
    script = os.path.join(REPO, "bench", "shapes_train.py")
    work = tempfile.mkdtemp(prefix="watch_interleaved.")
    print(f"clock: {a.clock}; blocks of {a.block} steps, off/on then on/off alternately; a pair's figure log(mean on / mean off); "
          f"{a.runs} run(s) a shape\n")
    print("| shape | mean step, off | pairs a run | each run's added | light mode added [95 %] | spread between runs | verdict (goal <= 1 %) |")
    print("|---|---|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        args = SHAPES[shape][0]
        steps = int(STEPS[shape] * a.steps_scale) // (2 * a.block) * (2 * a.block)
        runs, off_ms = [], []
        for r in range(a.runs):
            out = os.path.join(work, f"{shape}-{r}.json")
            watch_dir = os.path.join(work, f"watch-{shape}-{r}")
            # The regression windows and their looks as by default, but no capture (a capture's steps
            # are torch.profiler's, not light mode's; a busy VM's bursts of slow steps can trigger
            # one): a regression must be 100x slower.
            cmd = [a.trainrx, "watch", "--regression-min-pct", "10000", "-o", watch_dir, "--", a.python, script] + args + [
                "--steps", str(steps), "--watch-alternate", str(a.block), "--step-times", out,
                "--clock", a.clock]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            taken = [e for e in os.listdir(watch_dir) if e.startswith("capture-")]
            if taken:
                raise SystemExit(f"watch_interleaved.py: {watch_dir}: a capture was taken ({', '.join(taken)}): "
                                 "its steps are not light mode's")
            got = json.load(open(out))
            ratios = pair_ratios(got["ms"], got["watched"], a.block, a.warmup_blocks)
            runs.append(mean_se(ratios))
            off_ms += [m for m, w in zip(got["ms"], got["watched"]) if not w]
            print(f"{shape}: run {r + 1}/{a.runs} done", file=sys.stderr)
        mean, se, tau = combined(runs)
        lo, hi = mean - 1.96 * se, mean + 1.96 * se
        verdict = "holds" if pct(hi) <= 100 * GOAL else "exceeds" if pct(lo) > 100 * GOAL else "undecided (too noisy)"
        each = ", ".join(f"{pct(m):+.2f}" for m, _ in runs)
        print(f"| {LABEL[shape]} | {statistics.fmean(off_ms):.2f} ms | {len(ratios)} | {each} % | {pct(mean):+.2f} % "
              f"({pct(lo):+.2f}, {pct(hi):+.2f}) | {100 * tau:.2f} points | {verdict} |", flush=True)


if __name__ == "__main__":
    main()
