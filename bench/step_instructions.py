"""Instructions per training step added by `trainrx record` and by torch.profiler (issue 63), counted
by callgrind instead of timed: a count does not move with the machine's load, so the ratio can be
read on a busy or noisy machine where the added time of a model-heavy step is inside the noise
(bench/overhead_shapes.py measures time; docs/benchmarks.md has both).

Each run is bench/shapes_train.py under `valgrind --tool=callgrind --instr-atstart=no`: start-up
(torch's import) and the first --warmup steps run uninstrumented, then --count steps are counted
(every thread: the collector's journal flusher included), through
build/bench/libtrainrx_callgrind_toggle.so. What our record does only at a run's start is left out,
so that the count is the steady step a long job pays for: inputs and shapes (the first 3 steps)
by the warm-up, module ranges (the first 20 model calls, then their hooks are removed) by
TRAINRX_MODULES=0 (under valgrind a conv step takes ~30 s, so 20 more warm-up steps would cost ten
minutes a run); --with-modules counts them (the price of the module window). Modes: plain;
`trainrx record --steps all` (journal period TRAINRX_FLUSH_SECONDS, 0.5 s: under valgrind's
slowdown several flushes fall inside the counted steps; the flusher at normal priority);
torch.profiler (CPU activity; record_shapes off), exported after the loop (not counted). Intra-op
threads: 1 by default; with --threads 0 (torch's default) idle OpenMP threads would spin and count,
so OMP_WAIT_POLICY=PASSIVE is set.

An instruction is not a cycle: a cache miss or a locked store counts once, a system call's kernel
side not at all (valgrind runs without the vDSO, so every clock read is a system call here).

Usage: bench/step_instructions.py [--shapes model,transformer,ops] [--warmup 5] [--count 3] [--with-modules]
                                  [--threads 1] [--modes plain,record,torch.profiler[,floor,hooks,watch,watch-periodic]]
Modes floor and hooks split record's cost: `floor` is record with a callback that records nothing
and our Python hooks off (TRAINRX_PROBE_FLOOR=1 TRAINRX_MARKS=0: LibTorch's machinery, which any
observer of every op pays), `hooks` the same with our Python hooks on (the call-site wrappers); with
plain, floor, hooks and record all run, the split is printed.
About 4 minutes a run on a 2-core VM (valgrind running libtorch's vector code is most of it).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(a, shape, mode, work):
    out = os.path.join(work, f"{shape}.{mode}.cg")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes", f"--callgrind-out-file={out}",
           a.python, os.path.join(REPO, "bench", "shapes_train.py"), "--shape", shape, "--threads", str(a.threads),
           "--steps", str(a.warmup + a.count), "--count-from", str(a.warmup), "--callgrind-toggle", a.toggle]
    env = dict(os.environ)
    if a.threads != 1:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    if mode in ("record", "floor", "hooks"):
        cmd = [a.trainrx, "record", "--steps", "all", "-o", os.path.join(work, "t.json"), "--"] + cmd
        if mode != "record":  # a callback that records nothing: LibTorch's machinery (and our Python hooks)
            env["TRAINRX_PROBE_FLOOR"] = "1"
        if mode == "floor":
            env["TRAINRX_MARKS"] = "0"
        env["TRAINRX_FLUSH_SECONDS"] = "0.5"
        # At its default SCHED_IDLE the flusher gets no CPU under valgrind while another process
        # keeps the cores busy, and its share would be missing from the count.
        env["TRAINRX_JOURNAL_PRIORITY"] = "normal"
        if not a.with_modules:
            env["TRAINRX_MODULES"] = "0"
    elif mode == "torch.profiler":
        cmd += ["--torch-profiler", os.path.join(work, "tp.json")]
    elif mode in ("watch", "watch-periodic"):  # issue 80: `trainrx watch`'s light mode. Under callgrind a
        # step runs ~50x slower and the once-a-second work would fall in every few steps: counted apart,
        # `watch` without it, `watch-periodic` with it at every step (main() weighs it by the real pace).
        cmd = [a.trainrx, "watch", "-o", os.path.join(work, "watch"), "--"] + cmd
        env["TRAINRX_WATCH_PERIOD_STEPS"] = "1" if mode == "watch-periodic" else str(10**9)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Per thread (callgrind's files OUT-01, OUT-02, ...: 01 is the main thread, which runs the steps;
    # the others are the collector's journal flusher, on another core in a real run, and whatever
    # else the program runs).
    threads = {}
    for f in glob.glob(out + "-*"):
        for line in open(f, errors="replace"):
            if line.startswith("totals:"):
                threads[int(f.rsplit("-", 1)[1])] = int(line.split()[1])
                break
    # floor and hooks record nothing, so record ends saying no trace was written (exit 1): the
    # count is what they are for.
    if (p.returncode != 0 and mode not in ("floor", "hooks")) or 1 not in threads:
        sys.exit(f"step_instructions: {shape} {mode} failed (exit {p.returncode}):\n{p.stdout[-3000:]}")
    main_thread = threads.pop(1)
    if main_thread == 0:
        sys.exit(f"step_instructions: {shape} {mode}: no instruction counted on the main thread (did {a.toggle} "
                 "switch callgrind's instrumentation on?)")
    return main_thread / a.count, sum(threads.values()) / a.count


def native_step_seconds(a, shape, work):
    """The shape's median step at full speed (20 steps after 10), as the counted runs' threads."""
    times = os.path.join(work, f"{shape}.times.json")
    subprocess.run([a.python, os.path.join(REPO, "bench", "shapes_train.py"), "--shape", shape, "--threads", str(a.threads),
                    "--steps", "30", "--step-times", times], check=True, stdout=subprocess.DEVNULL)
    return statistics.median(json.load(open(times))[10:]) / 1e3  # the script writes ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="model,transformer,ops")
    p.add_argument("--modes", default="plain,record,torch.profiler")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--count", type=int, default=3)
    p.add_argument("--with-modules", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    p.add_argument("--toggle", default=os.path.join(REPO, "build", "bench", "libtrainrx_callgrind_toggle.so"))
    a = p.parse_args()
    for f in (a.python, a.trainrx, a.toggle):
        if not os.path.exists(f):
            sys.exit(f"step_instructions: {f} not found (scripts/setup; cmake --build build --target trainrx_callgrind_toggle)")
    if subprocess.run(["valgrind", "--version"], stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit("step_instructions: valgrind not found")
    modes = a.modes.split(",")
    if any(m.startswith("watch") for m in modes) and a.count < 8:
        # watch's light mode keeps a step's time and counts every 8 steps: 8 steps hold one such pass
        print(f"step_instructions: --count {a.count} -> 8 (watch counts its steps every 8)", file=sys.stderr)
        a.count = 8
    work = tempfile.mkdtemp(prefix="step_instructions.")
    per_step = {}  # (shape, mode) -> (main thread, other threads) a step
    for shape in a.shapes.split(","):
        for mode in modes:
            per_step[(shape, mode)] = run(a, shape, mode, work)
            main, other = per_step[(shape, mode)]
            print(f"{shape} {mode}: {main / 1e6:.3f} M instructions a step on the main thread, {other / 1e6:.2f} M on others",
                  file=sys.stderr)
    print(f"Instructions per step, callgrind, {a.count} steps after {a.warmup}, {a.threads or 'default'} intra-op "
          f"thread(s), module ranges {'on' if a.with_modules else 'off (the steady step)'} (bench/step_instructions.py). "
          "Added: on the training (main) thread; in brackets, on other threads (our journal's flusher)\n")
    print("| shape | plain (M a step) | record added | torch.profiler added | record / torch.profiler (main thread) |")
    print("|---|---|---|---|---|")
    # The split of record's cost (modes floor and hooks): LibTorch's machinery, our Python hooks, our
    # callbacks.
    for shape in a.shapes.split(","):
        got = [per_step.get((shape, m)) for m in ("plain", "floor", "hooks", "record")]
        if all(got):
            plain, floor, hooks, record = (g[0] for g in got)
            print(f"{shape}: of record's +{(record - plain) / 1e6:.3f} M, LibTorch's machinery (a callback that records "
                  f"nothing, our Python hooks off) +{(floor - plain) / 1e6:.3f} M, our Python hooks "
                  f"+{(hooks - floor) / 1e6:.3f} M, our callbacks +{(record - hooks) / 1e6:.3f} M", file=sys.stderr)
    for shape in a.shapes.split(","):
        base = per_step.get((shape, "plain"))
        cells = [shape, f"{base[0] / 1e6:.1f}" if base else "-"]
        added = {}
        for mode in ("record", "torch.profiler"):
            if base and (shape, mode) in per_step:
                main, other = per_step[(shape, mode)]
                added[mode] = main - base[0]
                cells.append(f"+{added[mode] / 1e6:.2f} M (+{100 * added[mode] / base[0]:.2f} %) [+{(other - base[1]) / 1e6:.2f} M]")
            else:
                cells.append("-")
        cells.append(f"{added['record'] / added['torch.profiler']:.2f}"
                     if len(added) == 2 and added["torch.profiler"] > 0 else "-")
        print("| " + " | ".join(cells) + " |")


    for shape in a.shapes.split(","):
        base, watch = per_step.get((shape, "plain")), per_step.get((shape, "watch"))
        periodic = per_step.get((shape, "watch-periodic"))
        if not (base and watch):
            continue
        added = watch[0] - base[0]
        line = (f"- {shape}: watch's light mode, its per-step work: {added / 1e6:+.3f} M instructions a step "
                f"({100 * added / base[0]:+.3f} %) on the main thread, {(watch[1] - base[1]) / 1e6:+.2f} M on others")
        if periodic:
            # The once-a-second work (metrics file, request poll, hang timer) at the shape's real pace:
            # its instructions once per second of steps, i.e. times the step's seconds.
            step_s = native_step_seconds(a, shape, work)
            once = periodic[0] - watch[0]
            total = added + once * step_s
            line += (f"; the once-a-second work {once / 1e6:.3f} M a pass, at {step_s * 1e3:.2f} ms a step (uninstrumented) "
                     f"{once * step_s / 1e6:+.4f} M a step; in all {total / 1e6:+.3f} M ({100 * total / base[0]:+.3f} %)")
        print(line)


if __name__ == "__main__":
    main()
