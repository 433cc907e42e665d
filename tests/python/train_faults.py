"""A training script that meets one fault a real job meets, for `trainrx record` tests
(tests/e2e/faults_test.sh). Nothing here knows about trainrx; it runs on torch 1.13 and 2.x.

  --fault none               a plain run
  --fault os_fork            at step 2 the script forks a child (os.fork) that runs torch ops and
                             leaves with sys.exit(0); the parent waits for it and trains on
  --fault threads            every step starts a thread that runs torch ops, and joins it
  --fault forward_caught     forward raises at step 3; the script catches it and trains on
  --fault forward_uncaught   forward raises at step 3 and nothing catches it (exit code 1)
  --fault worker_exit        a DataLoader worker (fork) calls sys.exit(3) on sample 1, inside the
                             first batch, so no step can run before PyTorch turns that into an
                             error in the main process (exit code 1). (On sample 9, the second
                             worker's batch, the first batch sometimes arrived first and one step
                             ran: seen once in CI on a loaded machine.)
Prints deterministic lines only (the step count, the last loss rounded), so a run with and
without recording can be compared byte for byte.
"""
import argparse
import os
import sys
import threading

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, n, exit_at=-1):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 3, 8, 8, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)
        self.exit_at = exit_at

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if i == self.exit_at:
            sys.exit(3)
        return self.x[i] * 1.0, self.y[i]


class Net(nn.Module):
    def __init__(self, raise_at):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 64, 4))
        self.calls = 0
        self.raise_at = raise_at

    def forward(self, x):
        self.calls += 1
        if self.calls == self.raise_at:
            raise ValueError("a bad batch (planted)")
        return self.body(x)


def side_work():
    a = torch.randn(32, 32)
    for _ in range(5):
        a = torch.tanh(a @ a)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fault", default="none",
                   choices=["none", "os_fork", "threads", "forward_caught", "forward_uncaught", "worker_exit"])
    p.add_argument("--steps", type=int, default=8)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    batch = 8
    forward_fault = a.fault in ("forward_caught", "forward_uncaught")
    data = Images(batch * a.steps, exit_at=1 if a.fault == "worker_exit" else -1)
    loader = DataLoader(data, batch_size=batch, num_workers=2 if a.fault == "worker_exit" else 0,
                        multiprocessing_context="fork" if a.fault == "worker_exit" else None)
    model = Net(raise_at=3 if forward_fault else -1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    loss = torch.zeros(())
    for i, (x, y) in enumerate(loader):
        if a.fault == "os_fork" and i == 2:
            pid = os.fork()
            if pid == 0:
                side_work()
                sys.exit(0)
            _, status = os.waitpid(pid, 0)
            print(f"child exit status {status}")
        helper = None
        if a.fault == "threads":
            helper = threading.Thread(target=side_work)
            helper.start()
        opt.zero_grad()
        try:
            out = model(x)
        except ValueError as e:
            if a.fault == "forward_uncaught":
                raise
            print(f"step {i}: {e}; skipped")
            continue
        finally:
            if helper is not None:
                helper.join()
        loss = nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        steps += 1
    print(f"steps {steps} last loss {float(loss.detach()):.3f}")


if __name__ == "__main__":
    main()
