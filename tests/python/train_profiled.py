"""An ordinary PyTorch CPU training loop, profiled with torch.autograd.profiler and exported
with export_chrome_trace: the kind of trace a user hands to `trainrx analyze`.

Problems are planted by flags; --clean turns every one of them off:
  --workers 0        data loaded in the training process (input.workers, when loading costs time)
  --data-cost N      CPU work per sample (with workers=0: input.dataloader_bound)
  --item             loss.item() every step (sync.host_device)
  --zero-grad-zeros  optimizer.zero_grad(set_to_none=False) (optim.zero_grad)
  --bias             Conv2d(bias=True) before BatchNorm2d (model.bias_before_norm; needs --record-shapes
                     and a Kineto build of torch: the legacy exporter drops shapes)
"""
import argparse
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class CostlyImages(Dataset):
    """Synthetic images whose 'decode + augment' burns real CPU time per sample."""

    def __init__(self, n, cost):
        self.n, self.cost = n, cost

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(3, 32, 32, generator=g)
        acc = 0  # stand-in for JPEG decode + augmentation: CPU time that is not an ATen op
        for k in range(self.cost * 1000):
            acc += k * k
        return x, i % 10


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--data-cost", type=int, default=40)
    p.add_argument("--item", action="store_true")
    p.add_argument("--zero-grad-zeros", action="store_true")
    p.add_argument("--bias", action="store_true")
    p.add_argument("--record-shapes", action="store_true")
    p.add_argument("--clean", action="store_true",
                   help="no planted problem: cheap data loaded in-process (workers would cost more than they save), "
                        "no per-step sync, zero_grad(set_to_none=True)")
    a = p.parse_args()
    if a.clean:
        a.workers, a.data_cost, a.item, a.zero_grad_zeros, a.bias = 0, 0, False, False, False

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=a.bias), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, bias=a.bias), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(CostlyImages(a.steps * a.batch, a.data_cost), batch_size=a.batch,
                        num_workers=a.workers, persistent_workers=a.workers > 0)
    losses = []
    with torch.autograd.profiler.profile(record_shapes=a.record_shapes) as prof:
        for x, y in loader:
            opt.zero_grad(set_to_none=not a.zero_grad_zeros)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if a.item:
                losses.append(loss.item())
            else:
                losses.append(loss.detach())
    prof.export_chrome_trace(a.output)
    print(f"steps={len(losses)} final_loss={float(losses[-1]):.4f} trace={a.output}")


if __name__ == "__main__":
    sys.exit(main())
