#!/usr/bin/env python3
"""What `trainrx record` costs a step beside torch.profiler, in time, measured inside one process
(issue 82: the ratio of their added times on the model-heavy shapes).

Run as whole processes (bench/overhead_vs_torch_profiler.py, overhead_shapes.py), both profilers'
added time on a conv net or a transformer block sits inside a 2-core VM's noise between processes.
Here each shape runs once under `trainrx record --steps all`, and the script (bench/shapes_train.py
--record-alternate B) switches every B steps between three arms: plain (the trainrx observer
paused: its RecordFunction callback disabled, probes/observer.cc trainrx_probe_pause), trainrx
(recording) and torch.profiler (CPU activity, started for the block and stopped after it, the
observer paused); each cycle of three blocks holds one of each, in the six orders in turn. A block's
figure is the mean of its steps but the first (the step after a switch: a torch.profiler stop
processes its events, a start sets up); a cycle gives log(trainrx / plain) and
log(torch.profiler / plain). A run gives their means, errors and covariance; runs are combined as
random-effects means (DerSimonian-Laird). The ratio of added times, (e^a - 1) / (e^b - 1), gets a
delta-method interval; the verdict is against 0.5 (trainrx adds at most half of torch.profiler's
time): below, above, or undecided when the interval holds 0.5 or torch.profiler's own added time
is not told from zero.

What this leaves out: the process's start and exit (the probe's attach, the trace's writing, the
start-up hook's module ranges of the first steps, dropped as warm-up cycles), and torch.profiler's
export (a trace is not written); with the observer paused RecordFunction still consults its
(disabled) callback: the plain arm is trainrx's floor, not a process without it.

Usage: bench/record_interleaved.py [--shapes model,transformer] [--block 6] [--runs 3] [--steps 1200]
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
from watch_interleaved import combined  # noqa: E402  (the random-effects mean of the runs)

GOAL = 0.5


def cycles(ms, arm, first, block, skip_cycles):
    """Per cycle of three blocks (one of each arm): (log(trainrx / plain), log(torch.profiler / plain))."""
    means = []  # per block: (arm, mean of its steps but the first)
    for start in range(0, len(ms) - block + 1, block):
        arms = set(arm[start:start + block])
        if len(arms) != 1 or not first[start]:
            raise SystemExit(f"record_interleaved.py: steps {start}-{start + block - 1} are not one block of {block}")
        means.append((arms.pop(), statistics.fmean(ms[start + 1:start + block])))
    out = []
    for c in range(skip_cycles, len(means) // 3):
        by = dict(means[3 * c:3 * c + 3])
        if len(by) != 3:
            raise SystemExit("record_interleaved.py: a cycle without one block of each arm")
        out.append((math.log(by["trainrx"] / by["plain"]), math.log(by["torch.profiler"] / by["plain"])))
    return out


def run_figures(pairs):
    """A run's means of a and b, their standard errors and their covariance (of the means)."""
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    n = len(pairs)
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    cov = sum((x - ma) * (y - mb) for x, y in pairs) / (n - 1) / n
    return (ma, statistics.stdev(a) / math.sqrt(n)), (mb, statistics.stdev(b) / math.sqrt(n)), cov


def ratio(a, se_a, b, se_b, cov):
    """(e^a - 1) / (e^b - 1) and its delta-method standard error."""
    da = math.exp(a) / (math.exp(b) - 1)
    db = -(math.exp(a) - 1) * math.exp(b) / (math.exp(b) - 1) ** 2
    r = (math.exp(a) - 1) / (math.exp(b) - 1)
    var = da * da * se_a ** 2 + db * db * se_b ** 2 + 2 * da * db * cov
    return r, math.sqrt(max(var, 0.0))


def pct(x):
    return 100.0 * (math.exp(x) - 1.0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="model,transformer")
    p.add_argument("--block", type=int, default=6, help="steps a block (an arm's run of steps; its first is dropped)")
    p.add_argument("--runs", type=int, default=3, help="processes per shape")
    p.add_argument("--steps", type=int, default=1200, help="steps a run (rounded to whole cycles)")
    p.add_argument("--warmup-cycles", type=int, default=4, help="cycles dropped at each run's start")
    p.add_argument("--clock", choices=["wall", "cpu", "thread"], default="wall")
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    a = p.parse_args()
    script = os.path.join(REPO, "bench", "shapes_train.py")
    work = tempfile.mkdtemp(prefix="record_interleaved.")
    print(f"clock: {a.clock}; blocks of {a.block} steps (the first dropped), cycles of plain / trainrx / torch.profiler "
          f"in rotating order; {a.runs} run(s) a shape; the ratio of added times against {GOAL}\n")
    print("| shape | mean step, plain | cycles a run | trainrx added [95 %] | torch.profiler added [95 %] | "
          "ratio of added times [95 %] | verdict (goal <= 0.5) |")
    print("|---|---|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        args = SHAPES[shape][0]
        steps = a.steps // (3 * a.block) * (3 * a.block)
        runs_a, runs_b, covs, plain_ms = [], [], [], []
        for r in range(a.runs):
            out = os.path.join(work, f"{shape}-{r}.json")
            cmd = [a.trainrx, "record", "--steps", "all", "-o", os.path.join(work, f"{shape}-{r}.trace.json"), "--",
                   a.python, script] + args + ["--steps", str(steps), "--record-alternate", str(a.block),
                                               "--step-times", out, "--clock", a.clock]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            got = json.load(open(out))
            pairs = cycles(got["ms"], got["arm"], got["first"], a.block, a.warmup_cycles)
            fa, fb, cov = run_figures(pairs)
            runs_a.append(fa)
            runs_b.append(fb)
            covs.append(cov)
            plain_ms += [m for m, arm, f in zip(got["ms"], got["arm"], got["first"]) if arm == "plain" and not f]
            os.remove(os.path.join(work, f"{shape}-{r}.trace.json"))
            print(f"{shape}: run {r + 1}/{a.runs}: trainrx {pct(fa[0]):+.2f} %, torch.profiler {pct(fb[0]):+.2f} %",
                  file=sys.stderr)
        ma, se_a, _ = combined(runs_a)
        mb, se_b, _ = combined(runs_b)
        # The covariance of the combined means: each run's, weighted as the means are (inverse variances).
        wa = [1 / s ** 2 for _, s in runs_a]
        wb = [1 / s ** 2 for _, s in runs_b]
        cov = sum(x * y * c for x, y, c in zip(wa, wb, covs)) / (sum(wa) * sum(wb))
        lo_b = mb - 1.96 * se_b
        cell_a = f"{pct(ma):+.2f} % ({pct(ma - 1.96 * se_a):+.2f}, {pct(ma + 1.96 * se_a):+.2f})"
        cell_b = f"{pct(mb):+.2f} % ({pct(lo_b):+.2f}, {pct(mb + 1.96 * se_b):+.2f})"
        if lo_b <= 0:
            cell_r, verdict = "—", "undecided: torch.profiler's added time is not told from zero"
        else:
            r_, se_r = ratio(ma, se_a, mb, se_b, cov)
            lo, hi = r_ - 1.96 * se_r, r_ + 1.96 * se_r
            cell_r = f"{r_:.2f} ({lo:.2f}, {hi:.2f})"
            verdict = "holds" if hi <= GOAL else "exceeds" if lo > GOAL else "undecided (the interval holds 0.5)"
        print(f"| {LABEL[shape]} | {statistics.fmean(plain_ms):.2f} ms | {len(pairs)} | {cell_a} | {cell_b} | {cell_r} | "
              f"{verdict} |", flush=True)


if __name__ == "__main__":
    main()
