"""A closure optimizer's loop (torch.optim.LBFGS, as pytorch/examples' time_sequence_prediction):
each optimizer step calls the closure (forward, loss, backward) up to --max-iter times. Nothing here
knows about trainrx.

  --steps N     optimizer steps (default 4)
  --max-iter N  closure calls a step at most (LBFGS's max_iter, default 20)
"""
import argparse

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--max-iter", type=int, default=20)
    a = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=a.max_iter, tolerance_grad=0, tolerance_change=0)
    loss_fn = nn.MSELoss()
    calls = [0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss

    for _ in range(a.steps):
        loss = opt.step(closure)
    print(f"steps {a.steps} closure calls {calls[0]} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
