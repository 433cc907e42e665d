"""A long CPU training job for `trainrx watch`'s tests (tests/e2e/watch_test.sh).

An MLP (256-512-512-4, batch 32: a few ms a step on one thread) on random data from a map-style Dataset and a DataLoader (num_workers=0), SGD, --steps
steps. Problems planted without a restart:
  --slow-file PATH   while PATH exists, every sample costs --slow-ms more in the dataset's
                     __getitem__ (a loader made slower); the first step that sees it is written to
                     PATH + ".step" (the test's ground truth)
  --dist             torch.distributed (Gloo; under torchrun): an all_reduce of the loss every step
  --hang-at N        on rank --hang-rank, step N never ends (a sleep): the other ranks wait in their
                     all_reduce; --hang-mark PATH: the wall-clock time it stopped, written there
  --own-profiler     the whole loop inside the script's own torch.profiler session (CPU activity)
  --leak-file PATH   while PATH exists, every step keeps a tensor of --leak-kb KB (a leak)
"""
import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self, n, slow_file, slow_ms):
        self.n, self.slow_file, self.slow_ms = n, slow_file, slow_ms
        self.slow = False
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(1024, 256, generator=g), torch.randint(0, 4, (1024,), generator=g)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.slow:
            time.sleep(self.slow_ms / 1e3)
        return self.x[i % 1024], self.y[i % 1024]


def activations(model, x):
    """A forward whose buffer cannot fit: the CPU allocator's out-of-memory error (1 PiB asked)."""
    return model(x).new_empty((1 << 50) // 4)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--slow-file", default="")
    p.add_argument("--slow-ms", type=float, default=0.3)
    p.add_argument("--dist", action="store_true")
    p.add_argument("--hang-at", type=int, default=-1)
    p.add_argument("--hang-rank", type=int, default=1)
    p.add_argument("--hang-mark", default="")
    p.add_argument("--own-profiler", action="store_true")
    p.add_argument("--leak-file", default="")
    p.add_argument("--leak-kb", type=int, default=128)
    p.add_argument("--oom-at", type=int, default=-1, help="at this step, ask for more memory than there is (uncaught)")
    a = p.parse_args()
    torch.set_num_threads(1)
    rank = 0
    if a.dist:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Samples(a.steps * a.batch, a.slow_file, a.slow_ms)
    loader = DataLoader(data, batch_size=a.batch, num_workers=0)
    session = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if a.own_profiler else None
    if session is not None:
        session.__enter__()
    kept, leaking = [], False
    for step, (x, y) in enumerate(loader):
        if a.slow_file and not data.slow and step % 10 == 0 and os.path.exists(a.slow_file):
            data.slow = True
            with open(a.slow_file + ".step", "w") as f:
                f.write(str(step))
        if step == a.hang_at and rank == a.hang_rank:
            if a.hang_mark:
                with open(a.hang_mark, "w") as f:
                    f.write(f"{time.time():.3f}")
            while True:
                time.sleep(1)
        if step == a.oom_at:
            activations(model, x)
        if a.leak_file and step % 10 == 0:
            leaking = os.path.exists(a.leak_file)
        if a.leak_file and leaking:
            kept.append(torch.ones(a.leak_kb * 256))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if a.dist:
            dist.all_reduce(loss.detach())
        opt.step()
        if step + 1 >= a.steps:
            break
    if session is not None:
        session.__exit__(None, None, None)
    if a.dist:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
