"""An ordinary training script that uses torch.compile, with switchable planted compile problems
(issue 39). Nothing here knows about trainrx.

  --backend NAME     torch.compile backend (default aot_eager: dynamo and autograd as inductor
                     sees them, no code generation, seconds to compile; inductor for the real one)
  --no-compile       run the model eagerly
  --graph-break KIND a graph break inside forward: print (logging a tensor's shape) or item (a
                     data-dependent branch on loss-like value .item())
  --recompile KIND   recompiles during training: scalar (a Python int module attribute that changes
                     every step: dynamo guards on its value) or batch (the batch size changes once)
  --steps N, --batch N
  --device D         cpu (default) or cuda
  --torch-profiler F torch.profiler (CPU) around the loop, prof.step() per step, trace exported to F
The output (losses) is the same with and without recording.
"""
import argparse
import sys

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, graph_break):
        super().__init__()
        self.fc1 = nn.Linear(32, 256)
        self.fc2 = nn.Linear(256, 256)
        self.head = nn.Linear(256, 10)
        self.graph_break = graph_break
        self.scale = 1  # --recompile scalar: set to the step number before each call

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.graph_break == "print":
            print("hidden", tuple(h.shape), file=sys.stderr)
        elif self.graph_break == "item":
            if h.mean().item() > 1e9:  # never true: only the branch on a tensor's value matters
                h = h * 0
        h = torch.relu(self.fc2(h)) * (1.0 + 0.0 * self.scale)
        return self.head(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="aot_eager")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--graph-break", choices=["none", "print", "item"], default="none")
    p.add_argument("--recompile", choices=["none", "scalar", "batch"], default="none")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--torch-profiler", default="")
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = Net(a.graph_break).to(a.device)
    model = net if a.no_compile else torch.compile(net, backend=a.backend)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(1)
    losses = []
    prof = None
    if a.torch_profiler:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                      schedule=torch.profiler.schedule(wait=0, warmup=0, active=a.steps + 1))
        prof.start()
    for step in range(a.steps):
        batch = a.batch + (16 if a.recompile == "batch" and step >= a.steps // 2 else 0)
        x = torch.randn(batch, 32, generator=g).to(a.device)
        y = torch.randint(0, 10, (batch,), generator=g).to(a.device)
        if a.recompile == "scalar":
            net.scale = step
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if prof:
            prof.step()
    if prof:
        prof.stop()
        prof.export_chrome_trace(a.torch_profiler)
    print("losses", " ".join(f"{float(v):.4f}" for v in losses[-3:]))


if __name__ == "__main__":
    main()
