#!/usr/bin/env python3
"""trainrx.dask's scaling (issue 53): a 256-rank set analyzed on a dask.distributed LocalCluster of
1, 2 and 4 worker processes (one thread each), against `trainrx analyze` of the same set on this
machine (rank by rank on every core), each timed as a whole call after one warm-up, median of
ROUNDS. The reports are compared too (byte for byte).

Usage: TRAINRX_BUILD_DIR=build PYTHONPATH=python .venv/bin/python bench/dask_scaling.py SET_DIR [--rounds 3]
A set: python3 bench/make_rank_set.py ../shared/external-traces/hta/nccl_data.json.gz /tmp/set256 --ranks 256
(7.7 MB a rank, 1.9 GB) or from tests/fixtures/dlrm_8ranks/worker0_*.json.gz (0.7 MB a rank).
"""
import argparse
import os
import statistics
import subprocess
import time

from distributed import Client, LocalCluster

import trainrx.dask
from trainrx._paths import bin_dir


def timed(fn, rounds):
    fn()  # warm-up: page cache, worker imports
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("set")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", default="1,2,4")
    a = ap.parse_args()
    exe = str(bin_dir() / "trainrx")
    local_s, local = timed(lambda: subprocess.run([exe, "analyze", a.set, "--per-rank", "--format", "json"], check=True,
                                                  capture_output=True, text=True).stdout, a.rounds)
    files = len(trainrx.dask.files(a.set))
    print(f"{files} files; this machine: {os.cpu_count()} CPUs")
    print(f"  trainrx analyze --per-rank (all cores)  {local_s:7.2f} s")
    for n in [int(x) for x in a.workers.split(",")]:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            s, report = timed(lambda: trainrx.dask.analyze(a.set, client), a.rounds)
            same = report._analysis.render("json") == local
            print(f"  trainrx.dask, {n} worker process(es)    {s:7.2f} s  ({local_s / s:.2f}x the local run; "
                  f"report {'identical' if same else 'DIFFERENT'})")


if __name__ == "__main__":
    main()
