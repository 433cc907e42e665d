"""Training loops of the shapes bench/overhead_shapes.py compares (issue 34.13). Nothing here knows
about trainrx; the script times its own steps (--step-times FILE: a JSON list of ms).

  --shape ops      op-heavy, loading in the training process: each sample's __getitem__ runs ~25
                   small tensor ops (crop, flip, normalize, jitter, noise), 64 samples a step
                   (~3 000 ATen ops a step, nested ones counted), num_workers=0
  --shape workers  the same loading in 2 forked DataLoader workers (they are not recorded)
  --shape model    model-heavy: a conv net on 32x32 images, batch 16: few ops, long kernels
  --shape transformer  a transformer block (nn.TransformerEncoderLayer, d_model 128, 4 heads, MLP 512)
                   on 8 sequences of 64 tokens, AdamW: matmul-bound, ~300 ops a step (issue 63)
  --threads N      torch.set_num_threads(N) (0: torch's default, every core)
  --torch-profiler FILE   torch.profiler.profile(activities=[CPU]) around the loop, trace
                   exported after it (not timed)
  --record-shapes  with --torch-profiler: record_shapes=True (what a user after shapes turns on)
  --watch-alternate B   under `trainrx watch`: its light mode's hooks taken out and put back every B
                   steps (blocks off/on, on/off, ... so a drift cancels); --step-times then writes
                   {"ms": [...], "watched": [...]} (bench/watch_interleaved.py)
  --record-alternate B   under `trainrx record --steps all`: blocks of B steps in three arms, the
                   trainrx observer paused (plain), trainrx recording, torch.profiler (CPU activity)
                   recording with the observer paused, in a rotating order (every order of the three
                   in turn); --step-times then writes {"ms": [...], "arm": [...], "first": [...]}
                   (first: a block's first step, after the switch; bench/record_interleaved.py)
  --count-from K --callgrind-toggle SO   under `valgrind --tool=callgrind --instr-atstart=no`: the
                   steps from the K-th on are counted (SO: build/bench/libtrainrx_callgrind_toggle.so,
                   whose calls do nothing outside valgrind; bench/step_instructions.py)
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Augmented(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 3, 20, 20, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.mean = torch.tensor([0.5, 0.4, 0.3]).view(3, 1, 1)
        self.std = torch.tensor([0.2, 0.25, 0.3]).view(3, 1, 1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        o = i % 4
        x = x[:, o:o + 16, o:o + 16]
        if i % 2:
            x = torch.flip(x, dims=[2])
        x = (x - self.mean) / self.std
        for _ in range(2):  # colour jitter, a few ops each
            x = x * 1.01 + 0.01
            x = torch.clamp(x, -3, 3)
        x = x + 0.01 * torch.sin(x)
        x = x.contiguous().view(-1)
        return x, self.y[i]


class RecordArms:
    """--record-alternate: blocks of `block` steps in the arms "plain" (the trainrx observer paused),
    "trainrx" (recording) and "torch.profiler" (CPU activity, the observer paused), each cycle of
    three blocks one of each, in the six orders in turn (a drift of the machine's pace cancels)."""
    ORDERS = [(0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 2, 1), (2, 1, 0), (1, 0, 2)]
    NAMES = ("plain", "trainrx", "torch.profiler")

    def __init__(self, block):
        import ctypes
        import os
        path = None
        with open("/proc/self/maps") as maps:
            for line in maps:
                if line.rstrip().endswith("/libtrainrx_probe.so"):
                    path = line.split(None, 5)[5].strip()
                    break
        if path is None:
            sys.exit("shapes_train.py: --record-alternate needs the job under `trainrx record` (no probe in this process)")
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # the probe the shim loaded, RTLD_LOCAL
        self.pause = lib.trainrx_probe_pause
        self.pause.argtypes = [ctypes.c_int]
        self.block = block
        self.prof = None
        self.current = None
        self.switch(0)

    def arm(self, step):
        b = step // self.block
        return self.NAMES[self.ORDERS[(b // 3) % 6][b % 3]]

    def switch(self, step):
        arm = self.arm(step)
        if arm == self.current:
            return
        if self.prof is not None:
            self.prof.__exit__(None, None, None)
            self.prof = None
        if self.pause(0 if arm == "trainrx" else 1) != 0:
            sys.exit("shapes_train.py: the probe has no observer to pause")
        if arm == "torch.profiler":
            self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            self.prof.__enter__()
        self.current = arm

    def close(self):
        if self.prof is not None:
            self.prof.__exit__(None, None, None)
        self.pause(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", choices=["ops", "workers", "model", "transformer"], default="ops")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--torch-profiler", default="")
    p.add_argument("--profile-memory", action="store_true", help="with --torch-profiler: profile_memory=True")
    p.add_argument("--record-shapes", action="store_true", help="with --torch-profiler: record_shapes=True")
    p.add_argument("--step-times", default="")
    p.add_argument("--clock", choices=["wall", "cpu", "thread"], default="wall",
                   help="--step-times in wall time, in the process's CPU time (every thread's, time.process_time), "
                        "or in the training thread's own (time.thread_time)")
    p.add_argument("--watch-alternate", type=int, default=0)
    p.add_argument("--record-alternate", type=int, default=0)
    p.add_argument("--count-from", type=int, default=-1)
    p.add_argument("--callgrind-toggle", default="")
    a = p.parse_args()
    toggle = None
    if a.callgrind_toggle:
        import ctypes
        toggle = ctypes.CDLL(a.callgrind_toggle)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.shape == "model":
        model = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
        data = torch.randn(16 * 8, 3, 32, 32)
        labels = torch.randint(0, 10, (16 * 8,))
        batches = lambda: ((data[i:i + 16], labels[i:i + 16]) for i in range(0, len(data), 16))
    elif a.shape == "transformer":
        layer = nn.TransformerEncoderLayer(128, 4, dim_feedforward=512, dropout=0.1, batch_first=True)
        model = nn.Sequential(layer, nn.Flatten(), nn.Linear(64 * 128, 10))
        data = torch.randn(8 * 8, 64, 128)
        labels = torch.randint(0, 10, (8 * 8,))
        batches = lambda: ((data[i:i + 8], labels[i:i + 8]) for i in range(0, len(data), 8))
    else:
        model = nn.Sequential(nn.Linear(768, 256), nn.ReLU(), nn.Linear(256, 10))
        loader = DataLoader(Augmented(64 * 16), batch_size=64, shuffle=True,
                            num_workers=2 if a.shape == "workers" else 0,
                            persistent_workers=a.shape == "workers")
        batches = lambda: iter(loader)
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-3) if a.shape == "transformer"
           else torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    loss_fn = nn.CrossEntropyLoss()
    times = []
    watched = []
    hooks = sys.modules.get("trainrx_hook_watch") if a.watch_alternate > 0 else None
    if a.watch_alternate > 0 and (hooks is None or hooks._HOOKS is None):
        sys.exit("shapes_train.py: --watch-alternate needs the job under `trainrx watch` (its hook is not loaded)")

    def watch_on(step):  # blocks of B steps: pair k is (off, on) for even k, (on, off) for odd k
        block = step // a.watch_alternate
        return (block % 2 == 1) == ((block // 2) % 2 == 0)
    if hooks is not None and not watch_on(0):
        hooks.suspend()
    arms = RecordArms(a.record_alternate) if a.record_alternate > 0 else None
    arm_of, first_of = [], []
    prof = None
    if a.torch_profiler:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=a.profile_memory,
                                      record_shapes=a.record_shapes)
        prof.__enter__()
    done = 0
    clock = {"cpu": time.process_time, "thread": time.thread_time}.get(a.clock, time.perf_counter)
    while done < a.steps:
        it = batches()
        t0 = clock()
        for x, y in it:
            if toggle is not None and done == a.count_from:
                toggle.trainrx_bench_instr_on()
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            t1 = clock()
            times.append((t1 - t0) * 1e3)
            t0 = t1
            if hooks is not None:
                watched.append(watch_on(done))
                if watch_on(done + 1) != watch_on(done):
                    hooks.resume() if watch_on(done + 1) else hooks.suspend()
                t0 = clock()  # the switch itself in neither arm
            if arms is not None:
                arm_of.append(arms.arm(done))
                first_of.append(done % a.record_alternate == 0)
                if (done + 1) % a.record_alternate == 0:
                    arms.switch(done + 1)
                t0 = clock()  # the switch itself (torch.profiler's stop processes its events) in no arm
            done += 1
            if done == a.steps:
                break
    if toggle is not None:
        toggle.trainrx_bench_instr_off()
    if arms is not None:
        arms.close()
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.torch_profiler)
    if a.step_times:
        json.dump({"ms": times, "watched": watched} if hooks is not None else
                  {"ms": times, "arm": arm_of, "first": first_of} if arms is not None else times, open(a.step_times, "w"))


if __name__ == "__main__":
    main()
