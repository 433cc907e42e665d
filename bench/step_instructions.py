"""Instructions per training step added by `trainrx record` and by torch.profiler (issue 63), counted
by callgrind instead of timed: a count does not move with the machine's load, so the ratio can be
read on a busy or noisy machine where the added time of a model-heavy step is inside the noise
(bench/overhead_shapes.py measures time; docs/benchmarks.md has both).

Each run is bench/shapes_train.py under `valgrind --tool=callgrind --instr-atstart=no`: start-up
(torch's import) and the first --warmup steps run uninstrumented (our record's shapes and values are
taken in the first 3 steps), then --count steps are counted (every thread: the collector's journal
flusher included), through build/bench/libtrainrx_callgrind_toggle.so. Modes: plain; `trainrx record
--steps all` (journal period TRAINRX_FLUSH_SECONDS, 0.5 s: under valgrind's slowdown several flushes
fall inside the counted steps); torch.profiler (CPU activity; record_shapes off), exported after the
loop (not counted). Intra-op threads: 1 by default; with --threads 0 (torch's default) idle OpenMP
threads would spin and count, so OMP_WAIT_POLICY=PASSIVE is set.

An instruction is not a cycle: a cache miss or a locked store counts once, a system call's kernel
side not at all (valgrind runs without the vDSO, so every clock read is a system call here).

Usage: bench/step_instructions.py [--shapes model,transformer,ops] [--warmup 6] [--count 4]
                                  [--threads 1] [--modes plain,record,torch.profiler]
About 4 minutes a run on a 2-core VM (valgrind translating libtorch is most of it).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(a, shape, mode, work):
    out = os.path.join(work, f"{shape}.{mode}.cg")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
           a.python, os.path.join(REPO, "bench", "shapes_train.py"), "--shape", shape, "--threads", str(a.threads),
           "--steps", str(a.warmup + a.count), "--count-from", str(a.warmup), "--callgrind-toggle", a.toggle]
    env = dict(os.environ)
    if a.threads != 1:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    if mode == "record":
        cmd = [a.trainrx, "record", "--steps", "all", "-o", os.path.join(work, "t.json"), "--"] + cmd
        env["TRAINRX_FLUSH_SECONDS"] = "0.5"
    elif mode == "torch.profiler":
        cmd += ["--torch-profiler", os.path.join(work, "tp.json")]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Several processes may report (trainrx itself is not run under valgrind; python is): the
    # counted one is the process whose callgrind output file was written.
    counts = [int(c.replace(",", "")) for c in re.findall(r"Collected : ([\d,]+)", p.stdout)]
    if p.returncode != 0 or not counts:
        sys.exit(f"step_instructions: {shape} {mode} failed (exit {p.returncode}):\n{p.stdout[-3000:]}")
    return max(counts) / a.count


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="model,transformer,ops")
    p.add_argument("--modes", default="plain,record,torch.profiler")
    p.add_argument("--warmup", type=int, default=6)
    p.add_argument("--count", type=int, default=4)
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
    work = tempfile.mkdtemp(prefix="step_instructions.")
    per_step = {}
    for shape in a.shapes.split(","):
        for mode in modes:
            per_step[(shape, mode)] = run(a, shape, mode, work)
            print(f"{shape} {mode}: {per_step[(shape, mode)] / 1e6:.2f} M instructions a step", file=sys.stderr)
    print(f"Instructions per step, callgrind, {a.count} steps after {a.warmup}, {a.threads or 'default'} intra-op "
          f"thread(s) (bench/step_instructions.py)\n")
    print("| shape | plain (M a step) | record added | torch.profiler added | record / torch.profiler |")
    print("|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        base = per_step.get((shape, "plain"))
        cells = [shape, f"{base / 1e6:.1f}" if base else "-"]
        added = {}
        for mode in ("record", "torch.profiler"):
            if base and (shape, mode) in per_step:
                added[mode] = per_step[(shape, mode)] - base
                cells.append(f"+{added[mode] / 1e6:.2f} M (+{100 * added[mode] / base:.1f} %)")
            else:
                cells.append("-")
        cells.append(f"{added['record'] / added['torch.profiler']:.2f}"
                     if len(added) == 2 and added["torch.profiler"] > 0 else "-")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
