"""An ordinary PyTorch training script with switchable, planted performance problems.

Used by tests/e2e/record_test.sh: `trainrx record -- python3 train_planted.py --all-problems` must
flag each planted problem, the clean run (no flags) none of them, and the script's output and exit
code must be the same with and without recording. Nothing here knows about trainrx.

  --costly-data      num_workers=0 with a dataset whose __getitem__ costs CPU time
  --item             loss.item() every step (host-device sync)
  --anomaly          torch.autograd.set_detect_anomaly(True)
  --conv-bias        Conv2d(bias=True) followed by BatchNorm2d
  --eval-grad        evaluation without torch.no_grad()
  --threads N        torch.set_num_threads(N)
  --workers N        DataLoader workers (forked children)
  --exit-code N      exit with this code at the end
  --signal NAME      send this signal to itself after training (SIGTERM, SIGSEGV, SIGKILL)
  --linger S         sleep S seconds after training (before the signal, if any)
  --os-exit          leave through os._exit (no exit handler runs)
  --accum K          gradient accumulation: K micro-batches of --batch, each a forward and a
                     backward, before each optimizer step (nanoGPT's gradient_accumulation_steps)

Extra problems, off by default and not part of --all-problems (bench/torchtidy_compare.py plants
them to compare with torch.profiler's TorchTidy matcher, torch/profiler/_pattern_matcher.py):
  --zero-grad-zeros  optimizer.zero_grad(set_to_none=False): gradients zeroed, not freed
  --no-foreach       SGD(foreach=False): per-parameter optimizer loop (already the default for CPU
                     parameters; foreach is the default only on CUDA)
  --foreach          SGD/AdamW(foreach=True): the multi-tensor step, the clean counterpart
  --adamw            AdamW instead of SGD (more ops per parameter: where foreach pays on CPU)
  --extra-copy       class weights filled on the host every step, then copied
                     (torch.ones(10).to(device, copy=True): on a GPU, torch.ones(10).to("cuda"))
  --bf16             torch.autocast("cpu", torch.bfloat16): the 10-class head's matmuls run in
                     bfloat16 with a dimension that is not a multiple of 8
  --empty-cache      torch.cuda.empty_cache() after every optimizer step (a no-op on CPU, still called)
  --loop-index       per-sample brightness jitter in a Python loop (x[i].mul_(g)) instead of one
                     broadcast multiply
  --loader-sync      the DataLoader's collate checks every batch for NaN/inf with
                     torch.isfinite(x).all().item(): a host-device sync in the loader (on a GPU
                     batch; on CPU the same three ops every step)
Profiling with torch.profiler (off by default; the output is the same with and without it):
  --torch-profiler DIR            torch.profiler.profile(CPU, record_shapes, with_stack,
                                  profile_memory) around the training loop, prof.step() once per
                                  step, trace written by tensorboard_trace_handler(DIR); the
                                  profiler object is left in the module's PROFILER
  --torch-profiler-schedule W,U,A wait, warmup, active steps (default 1,1,steps-2; 0,0,steps
                                  records from before the loader's first batch)
  --torch-profiler-mode MODE      full (default: record_shapes, with_stack, profile_memory) or
                                  shapes (record_shapes only: small traces, no Python frames)
"""
import argparse
import json
import contextlib
import os
import signal
import sys
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

PROFILER = None  # the torch.profiler.profile of the last --torch-profiler run


class Images(Dataset):
    def __init__(self, n, costly):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 3, 16, 16, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.costly = costly

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        if self.costly:  # decode/augment stand-in: pure-Python CPU work
            t = time.perf_counter()
            while time.perf_counter() - t < 0.0015:
                # Bytecode only: torch.profiler's with_stack records every C call (one per
                # perf_counter()); a bare spin made 300 MB traces, this inner loop ~100x less.
                for _ in range(200):
                    pass
        return x, self.y[i]


def checked_collate(samples):
    """--loader-sync: the default collate, then a NaN/inf check of the batch that reads a bool
    back to the host (.item()): on a GPU batch a device sync in every step's loading."""
    x, y = torch.utils.data.default_collate(samples)
    if not torch.isfinite(x).all().item():
        raise ValueError("non-finite input batch")
    return x, y


def make_model(bias):
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1, bias=bias), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1, bias=bias), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--costly-data", action="store_true")
    p.add_argument("--item", action="store_true")
    p.add_argument("--anomaly", action="store_true")
    p.add_argument("--conv-bias", action="store_true")
    p.add_argument("--eval-grad", action="store_true")
    p.add_argument("--all-problems", action="store_true")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--signal", default="")
    p.add_argument("--linger", type=float, default=0)
    p.add_argument("--os-exit", action="store_true")
    p.add_argument("--zero-grad-zeros", action="store_true")
    p.add_argument("--no-foreach", action="store_true")
    p.add_argument("--foreach", action="store_true")
    p.add_argument("--adamw", action="store_true")
    p.add_argument("--extra-copy", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--loop-index", action="store_true")
    p.add_argument("--loader-sync", action="store_true")
    p.add_argument("--torch-profiler", default="")
    p.add_argument("--torch-profiler-schedule", default="")
    p.add_argument("--torch-profiler-mode", choices=["full", "shapes", "plain"], default="full")
    p.add_argument("--slowdown-ms", type=float, default=0, help="busy work added to every step (gate tests)")
    p.add_argument("--batch", type=int, default=16, help="samples per micro-batch (sweep tests)")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step (gradient accumulation)")
    p.add_argument("--mark", default="", help="a record_function range of this name around each micro-batch's forward "
                   "and backward (the step as a user names it: record/analyze --step NAME)")
    p.add_argument("--empty-cache", action="store_true",
                   help="torch.cuda.empty_cache() every step (a no-op without CUDA: the call is still made)")
    p.add_argument("--leak", action="store_true",
                   help="keep each step's predictions 'for later' with their graph (memory.growth)")
    p.add_argument("--step-times", default="", help="write each step's wall time (ms) as a JSON list here")
    p.add_argument("--generate", action="store_true",
                   help="before each training forward, 'sample' from the model: 4 no-grad forwards of one sample "
                        "(minGPT's chargpt generates with batch 1 in its first iteration; sweep's batch read, issue 51.4)")
    a = p.parse_args()
    if a.all_problems:
        a.costly_data = a.item = a.anomaly = a.conv_bias = a.eval_grad = True
    torch.manual_seed(0)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.anomaly:
        torch.autograd.set_detect_anomaly(True)

    batch = a.batch
    train = DataLoader(Images(batch * a.steps * a.accum, a.costly_data), batch_size=batch, num_workers=a.workers,
                       collate_fn=checked_collate if a.loader_sync else None)
    val = DataLoader(Images(batch * 3, False), batch_size=batch)
    model = make_model(a.conv_bias)
    foreach = {"foreach": False} if a.no_foreach else {"foreach": True} if a.foreach else {}
    if a.adamw:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **foreach)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05, **foreach)
    loss_fn = nn.CrossEntropyLoss()

    prof = None
    if a.torch_profiler:
        global PROFILER
        wait, warmup, active = (int(v) for v in a.torch_profiler_schedule.split(",")) \
            if a.torch_profiler_schedule else (1, 1, max(1, a.steps - 2))
        prof = PROFILER = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=a.torch_profiler_mode != "plain",
            with_stack=a.torch_profiler_mode == "full", profile_memory=a.torch_profiler_mode == "full", schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(a.torch_profiler))
        prof.start()
    model.train()
    running = torch.zeros(())
    kept = []  # --leak: predictions kept for a later report, graph and activations with them
    step_ms = []
    last = time.perf_counter()
    for micro, (x, y) in enumerate(train):
        if micro % a.accum == 0:
            opt.zero_grad(set_to_none=not a.zero_grad_zeros)
        mark = torch.autograd.profiler.record_function(a.mark) if a.mark else contextlib.nullcontext()
        mark.__enter__()
        if a.loop_index:  # per-sample jitter, one indexing op per sample: x.mul_(gains.view(-1, 1, 1, 1))
            for i in range(x.shape[0]):
                x[i].mul_(1.0 + 0.01 * (i % 3))
        if a.generate:
            with torch.no_grad():
                for _ in range(4):
                    model(x[:1])
        with torch.autocast("cpu", dtype=torch.bfloat16) if a.bf16 else contextlib.nullcontext():
            out = model(x)
            if a.extra_copy:  # class weights rebuilt on the host and copied every step (all ones: same loss)
                weight = torch.ones(10).to(x.device, copy=True)
                loss = nn.functional.cross_entropy(out, y, weight=weight)
            else:
                loss = loss_fn(out, y)
        if a.accum > 1:
            (loss / a.accum).backward()
            mark.__exit__(None, None, None)
            if (micro + 1) % a.accum != 0:
                continue
        else:
            loss.backward()
            mark.__exit__(None, None, None)
        if a.leak:  # a second forward "to log the predictions later", never detached
            kept.append(model(x))
        if a.slowdown_ms:
            t = time.perf_counter()
            while time.perf_counter() - t < a.slowdown_ms / 1000:
                pass
        opt.step()
        if a.empty_cache:  # "free memory" every step, as some guides advise
            torch.cuda.empty_cache()
        if a.item:
            running += loss.item()
        else:
            running += loss.detach()
        if prof is not None:
            prof.step()
        now = time.perf_counter()
        step_ms.append((now - last) * 1e3)
        last = now
    if prof is not None:
        prof.stop()
    if a.step_times:
        with open(a.step_times, "w") as f:
            json.dump(step_ms, f)

    model.eval()
    correct = 0
    if a.eval_grad:
        for x, y in val:
            correct += (model(x).argmax(1) == y).sum()
    else:
        with torch.no_grad():
            for x, y in val:
                correct += (model(x).argmax(1) == y).sum()

    print(f"mean loss {float(running) / a.steps:.6f}")
    print(f"val correct {int(correct)}")
    sys.stdout.flush()
    time.sleep(a.linger)
    if a.os_exit:
        os._exit(a.exit_code)
    if a.signal:
        os.kill(os.getpid(), getattr(signal, a.signal))
        time.sleep(5)
    sys.exit(a.exit_code)


if __name__ == "__main__":
    main()
