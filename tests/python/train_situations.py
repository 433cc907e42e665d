"""A PyTorch 2.x training script that runs the way real scripts do, for `trainrx record` tests.

Nothing here knows about trainrx. Each flag switches on one situation the collector must survive
and observe (tests/e2e/situations_test.sh):
  --workers N --start fork|spawn   DataLoader worker processes started by fork or spawn
  --persistent                     persistent_workers=True (2 epochs: the workers outlive epoch 1)
  --compile                        torch.compile(model) (eager fallback where no compiler works)
  --inference                      evaluation under torch.inference_mode()
  --bf16                           torch.autocast("cpu", dtype=torch.bfloat16) around the forward
  --eval-grad                      evaluation without no_grad (a planted problem)
  --item                           loss.item() every step (a planted problem)
  --ddp                            DistributedDataParallel with Gloo (run under torchrun)
  --worker-report FILE             each DataLoader worker appends "pid hasGlobalCallbacks" to FILE:
                                   whether a RecordFunction observer is registered in the worker
Prints one line per epoch with the last loss.
"""
import argparse
import ctypes
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

WORKER_REPORT = None


class Images(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 3, 16, 16, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i] * 1.0, self.y[i]


def observer_registered():
    """at::hasGlobalCallbacks() of the libtorch_cpu this process runs."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    fn = lib._ZN2at18hasGlobalCallbacksEv
    fn.restype = ctypes.c_bool
    return bool(fn())


def worker_init(worker_id):
    path = os.environ.get("SITUATIONS_WORKER_REPORT")
    if path:
        # A tensor op first: a spawned worker must have loaded (and, if attached, registered) by now.
        torch.ones(1).add_(1)
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {int(observer_registered())}\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--start", default="fork", choices=["fork", "spawn"])
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--inference", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--eval-grad", action="store_true")
    p.add_argument("--item", action="store_true")
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--worker-report", default="")
    a = p.parse_args()
    if a.worker_report:
        os.environ["SITUATIONS_WORKER_REPORT"] = a.worker_report  # inherited by fork and spawn
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rank = 0
    if a.ddp:
        torch.distributed.init_process_group("gloo")
        rank = torch.distributed.get_rank()
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    if a.ddp:
        model = nn.parallel.DistributedDataParallel(model)
    run = model
    if a.compile:
        run = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    kw = {}
    if a.workers > 0:
        kw = dict(num_workers=a.workers, multiprocessing_context=a.start, persistent_workers=a.persistent,
                  worker_init_fn=worker_init)
    loader = DataLoader(Images(a.samples), batch_size=32, shuffle=False, **kw)
    val = DataLoader(Images(64), batch_size=32)
    for epoch in range(a.epochs):
        model.train()
        for x, y in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
                out = run(x)
                loss = loss_fn(out.float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if a.item:
                loss.item()
        model.eval()
        ctx = torch.inference_mode() if a.inference else (torch.enable_grad() if a.eval_grad else torch.no_grad())
        correct = 0
        with ctx:
            for x, y in val:
                correct += int((run(x).argmax(1) == y).sum())
        print(f"rank {rank} epoch {epoch} loss {float(loss):.4f} val correct {correct}", flush=True)
    if a.ddp:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
