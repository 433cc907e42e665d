#!/usr/bin/env python3
"""What recording costs per script shape (issue 34.13): plain vs `trainrx record` vs torch.profiler,
and the journal's own cost, interleaved round by round.

Shapes (bench/shapes_train.py): op-heavy loading in the training process with torch's default
threads (intra-op threads on every core) and pinned to 1 thread; the same loading in 2 DataLoader
workers; a model-heavy conv net and a transformer block (issue 63), each at default threads and 1.
torch.profiler runs as users pick it: CPU activity, record_shapes off and on. Modes per shape: plain; `trainrx record --steps all` (journal on,
the default 2 s period); the same with the journal off (TRAINRX_FLUSH_SECONDS=0); torch.profiler
(CPU activity, trace exported after the loop); and with --before DIR, `record` with the probe in DIR
(an older build, `--probe-dir`), journal on and off; `trainrx watch` (its light mode, issue 80). The journal flushes every --flush-seconds
(0.5 s: 4x the default rate, so that a run of a few seconds holds several flushes). Every round runs every (shape, mode) once, in
an order rotated each round.

A run's figure is its median step (the first --warmup steps dropped), in wall time or, with --clock
cpu, in the process's CPU time (every thread's: what the process itself spent, which a shared VM's
other tenants and this machine's other processes move less than they move wall time). Within a round, each mode is
compared with that round's plain run of the same shape (neighbours in time): added = mode / plain
- 1. Per shape and mode the table gives the median over rounds and a 95 % interval from resampling
the rounds (bootstrap, 2000 draws), and record / torch.profiler of the added times (the issue's
goal: <= 0.5 on every shape), and the journal's cost = record - record without journal (goal: <= 1 %
of the step), with the flusher's CPU time per step from the traces (journal_cpu_ns, or busy_ns from
an older probe).

Usage: bench/overhead_shapes.py [--rounds 5] [--before DIR] [--shapes ops,ops1,workers,model,model1,transformer,transformer1]
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
SHAPES = {  # name: (script arguments, steps)
    "ops": (["--shape", "ops"], 1000),
    "ops1": (["--shape", "ops", "--threads", "1"], 1000),
    "workers": (["--shape", "workers"], 1000),
    "model": (["--shape", "model"], 300),
    "model1": (["--shape", "model", "--threads", "1"], 300),
    "transformer": (["--shape", "transformer"], 300),
    "transformer1": (["--shape", "transformer", "--threads", "1"], 300),
}
LABEL = {"ops": "op-heavy, loading in process, default threads", "ops1": "op-heavy, loading in process, 1 thread",
         "workers": "op-heavy loading in 2 workers, default threads", "model": "model-heavy (conv net), default threads",
         "model1": "model-heavy (conv net), 1 thread", "transformer": "transformer block, default threads",
         "transformer1": "transformer block, 1 thread"}


def interval(xs, stat, rng, draws=2000):
    vals = sorted(stat([xs[rng.randrange(len(xs))] for _ in xs]) for _ in range(draws))
    return vals[int(0.025 * draws)], vals[int(0.975 * draws) - 1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="a step's time: wall, or the process's CPU time (every thread's; a shared VM's other "
                        "tenants and its own other processes move wall time, not this)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps-scale", type=float, default=1.0)
    p.add_argument("--shapes", default="ops,ops1,workers,model")
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    p.add_argument("--before", default="", help="a probe directory of an older build (record --probe-dir)")
    p.add_argument("--partial", default="", help="rewrite the tables here after every round")
    p.add_argument("--modes", default="", help="only these modes (';'-separated names as in the tables; plain is "
                   "always run), e.g. 'record;torch.profiler, profile_memory'")
    p.add_argument("--flush-seconds", default="0.5",
                   help="the journal's period in the record modes (TRAINRX_FLUSH_SECONDS; default 0.5, 4x the "
                        "default rate, so a run of a few seconds holds several flushes)")
    a = p.parse_args()
    script = os.path.join(REPO, "bench", "shapes_train.py")
    work = tempfile.mkdtemp(prefix="overhead_shapes.")
    trace = os.path.join(work, "t.json")
    flush = {"TRAINRX_FLUSH_SECONDS": a.flush_seconds}
    modes = {"plain": ([], {}), "record": (["record"], flush), "record, no journal": (["record"], {"TRAINRX_FLUSH_SECONDS": "0"}),
             # the parts (issue 63): module ranges off; the RecordFunction machinery alone (a callback
             # that records nothing, no inputs boxed: what any global observer costs)
             "record, no modules": (["record"], dict(flush, TRAINRX_MODULES="0")),
             "record, floor": (["record"], dict(flush, TRAINRX_PROBE_FLOOR="1")),
             # issue 80: `trainrx watch`'s light mode (step metrics, no per-op events)
             "watch": (["watch"], {}),
             "torch.profiler": (["tp"], {}),
             # issue 63: what a user who wants shapes turns on (our record always has them, in its first steps)
             "torch.profiler, record_shapes": (["tp", "shapes"], {}),
             # issue 36: memory recorded both ways (our heap samples are always on in record)
             "torch.profiler, profile_memory": (["tp", "memory"], {}),
             # record --memory-events: every CPU allocation and free, as profile_memory records them
             "record, memory events": (["record"], dict(flush, TRAINRX_MEMORY_EVENTS="1"))}
    if a.before:
        modes["before: record"] = (["record", a.before], flush)
        modes["before: record, no journal"] = (["record", a.before], {"TRAINRX_FLUSH_SECONDS": "0"})
    if a.modes:
        keep = {"plain"} | {m.strip() for m in a.modes.split(";") if m.strip()}
        modes = {m: v for m, v in modes.items() if m in keep}
    shapes = a.shapes.split(",")
    cells = [(s, m) for s in shapes for m in modes]
    runs = {c: [] for c in cells}
    journal = {c: [] for c in cells}  # (journal cpu ns, steps)
    for r in range(a.rounds):
        k = (r * 5) % len(cells)
        for shape, mode in cells[k:] + cells[:k]:
            args, steps = SHAPES[shape]
            steps = max(a.warmup + 10, int(steps * a.steps_scale))
            out = os.path.join(work, "steps.json")
            cmd = [a.python, script] + args + ["--steps", str(steps), "--step-times", out, "--clock", a.clock]
            how, env = modes[mode]
            if how and how[0] == "record":
                pre = [a.trainrx, "record", "--steps", "all", "-o", trace]
                if len(how) > 1:
                    pre += ["--probe-dir", how[1]]
                cmd = pre + ["--"] + cmd
            elif how and how[0] == "watch":
                cmd = [a.trainrx, "watch", "-o", os.path.join(work, "watch"), "--"] + cmd
            elif how and how[0] == "tp":
                cmd += ["--torch-profiler", os.path.join(work, "tp.json")] + (["--profile-memory"] if "memory" in how else []) \
                    + (["--record-shapes"] if "shapes" in how else [])
            if os.path.exists(trace):
                os.remove(trace)
            # The floor records nothing, so `record` says no trace was written (exit 2): its steps count.
            subprocess.run(cmd, check=mode != "record, floor", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=dict(os.environ, **env))
            runs[(shape, mode)].append(statistics.median(json.load(open(out))[a.warmup:]))
            if how and how[0] == "record" and os.path.exists(trace):
                meta = json.load(open(trace))["trainrx"]
                cpu = meta.get("journal_cpu_ns", meta.get("journal_busy_ns"))
                if cpu is not None:  # journal on, and its statistics written (the flusher was idle at exit)
                    journal[(shape, mode)].append((int(cpu), steps, int(meta.get("journal_flushes", 0)),
                                                   "journal_cpu_ns" in meta, int(meta.get("journal_max_gap_ns", 0))))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
        if a.partial:  # the tables so far, rewritten after every round (a long run stopped early keeps them)
            with open(a.partial, "w") as f:
                report(runs, journal, modes, shapes, r + 1, f, a.clock)
    report(runs, journal, modes, shapes, a.rounds, sys.stdout, a.clock)


def report(runs, journal, modes, shapes, rounds, out, clock="wall"):
    emit = lambda *x: print(*x, file=out)
    runs = {c: v[:rounds] for c, v in runs.items()}
    rng = random.Random(1)
    pct = lambda lo_hi: f"{100 * lo_hi[0]:+.1f} to {100 * lo_hi[1]:+.1f} %"
    emit(f"rounds: {rounds}; a step's time: {'the process CPU time (every thread)' if clock == 'cpu' else 'wall time'}\n")
    for shape in shapes:
        plain = runs[(shape, "plain")]
        emit(f"### {LABEL[shape]} (`{' '.join(SHAPES[shape][0])}`), plain median step {statistics.median(plain):.2f} ms\n")
        emit("| mode | median step (ms) | added (median of rounds) | 95 % interval |")
        emit("|---|---|---|---|")
        added = {}
        for mode in modes:
            if mode == "plain":
                continue
            xs = [m / p_ - 1 for m, p_ in zip(runs[(shape, mode)], plain)]
            added[mode] = xs
            emit(f"| {mode} | {statistics.median(runs[(shape, mode)]):.2f} | {100 * statistics.median(xs):+.1f} % | "
                  f"{pct(interval(xs, statistics.median, rng))} |")
        # Ratios of added times, resampling rounds (a round's modes stay together).
        def ratio(rec, den="torch.profiler"):
            pairs = list(zip(added[rec], added[den]))
            stat = lambda ps: (statistics.median(x for x, _ in ps) / statistics.median(y for _, y in ps)
                               if statistics.median(y for _, y in ps) > 0 else float("inf"))
            lo, hi = interval(pairs, stat, rng)
            return f"{stat(pairs):.2f} ({lo:.2f} to {hi:.2f})"
        emit()
        if "watch" in added:
            xs = added["watch"]
            emit(f"- watch (light mode) added: {100 * statistics.median(xs):+.1f} % of the step "
                 f"({pct(interval(xs, statistics.median, rng))}; goal <= 1 %)")
        for rec in [m for m in ("record", "before: record") if m in added]:
            for den in [d for d in ("torch.profiler", "torch.profiler, record_shapes", "torch.profiler, profile_memory") if d in added]:
                emit(f"- {rec} / {den} added time: {ratio(rec, den)} (goal <= 0.50)")
        if "record, memory events" in added and "torch.profiler, profile_memory" in added:
            emit(f"- record, memory events / torch.profiler, profile_memory added time: "
                 f"{ratio('record, memory events', 'torch.profiler, profile_memory')}")
        # The parts of record's added time (issue 63), each as a share of the plain step with its interval.
        parts = [("the RecordFunction machinery (any global observer: the floor)", lambda r, f: f, "record, floor"),
                 ("our callbacks, records and Python hooks beyond the floor", lambda r, f: r - f, "record, floor"),
                 ("module ranges (record minus record without them)", None, "record, no modules")]
        for label, fn, other in parts:
            if "record" not in added or other not in added:
                continue
            if fn is None:
                xs = [(1 + x) / (1 + y) - 1 for x, y in zip(added["record"], added[other])]
            else:
                xs = [fn(x, y) for x, y in zip(added["record"], added[other])]
            emit(f"- part: {label}: {100 * statistics.median(xs):+.1f} % of the step ({pct(interval(xs, statistics.median, rng))})")
        for rec in [m for m in ("record", "before: record") if m in added and m + ", no journal" in added]:
            nj = rec + ", no journal"
            xs = [(1 + x) / (1 + y) - 1 for x, y in zip(added[rec], added[nj])]
            line = f"- {rec}: journal on vs off {100 * statistics.median(xs):+.1f} % of the step, interval {pct(interval(xs, statistics.median, rng))} (goal <= 1 %)"
            js = journal[(shape, rec)]
            if js:
                cpu_per_step = statistics.median(c / s for c, s, *_ in js) / 1e6
                step = statistics.median(runs[(shape, rec)])
                what = "flusher CPU" if js[0][3] else "flusher busy (wall)"
                line += (f"; {what} {cpu_per_step:.3f} ms a step ({100 * cpu_per_step / step:.2f} % of a step, "
                         f"{statistics.median(x[2] for x in js):.0f} flushes a run")
                if js[0][3]:
                    line += f", longest gap between flushes {max(x[4] for x in js) / 1e9:.1f} s"
                line += ")"
            emit(line)
        emit()


if __name__ == "__main__":
    main()
