#!/usr/bin/env python3
"""Peak memory at the collector's event cap (TRAINRX_MAX_EVENTS), measured: the same script run
plain and under `trainrx record` with caps of 50 k, 200 k and 4 M (the default) records, at two
run lengths. With a cap, the recorded process's peak RSS must not grow with the run's length
(records past the cap are dropped and counted, never buffered); the trace says how many.

Each run is tests/python/train_planted.py (a small CNN; ~440 records per step). Peak RSS is the
largest ru_maxrss among the processes of a run (the script; `trainrx record` itself is small).

Usage: bench/event_cap_rss.py [--steps 300,1200] [--python PY] [--trainrx BIN]
"""
import argparse
import json
import os
import resource
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peak_rss_mb(cmd, env):
    # A fresh interpreter per run, so ru_maxrss of "children" is this run's alone.
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
             "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run(["python3", "-c", probe] + cmd, env=env, check=True, capture_output=True, text=True)
    return int(out.stdout.strip()) / 1024


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", default="300,1200")
    p.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--trainrx", default=os.path.join(REPO, "build", "trainrx"))
    a = p.parse_args()
    script = os.path.join(REPO, "tests", "python", "train_planted.py")
    work = tempfile.mkdtemp(prefix="capbench.")
    trace = os.path.join(work, "t.json")
    print("| mode | steps | peak RSS (MB) | records kept | records dropped |")
    print("|---|---|---|---|---|")
    for steps in [int(s) for s in a.steps.split(",")]:
        base = [a.python, script, "--steps", str(steps), "--threads", "1"]
        print(f"| plain | {steps} | {peak_rss_mb(base, dict(os.environ)):.0f} | | |", flush=True)
        for cap in (50_000, 200_000, 4_000_000):
            env = dict(os.environ, TRAINRX_MAX_EVENTS=str(cap))
            rss = peak_rss_mb([a.trainrx, "record", "--steps", "all", "-o", trace, "--"] + base, env)
            t = json.load(open(trace))
            kept = sum(1 for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"))
            print(f"| record, cap {cap:,} | {steps} | {rss:.0f} | {kept:,} | {int(t['trainrx']['dropped_records']):,} |", flush=True)


if __name__ == "__main__":
    main()
