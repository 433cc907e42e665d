"""A small CNN + transformer block trained on random data, for the FLOP model's end-to-end check
(issue 52, tests/e2e/flops_test.sh): the same training step counted three ways.

  --count           torch.utils.flop_counter.FlopCounterMode over one training step (forward +
                    backward), printed as JSON {"total": ..., "by_op": {...}}.
  --profile PATH    torch.profiler with record_shapes over steps 2..4, exported as a Kineto trace.
  (neither)         plain training, for `trainrx record`.

--checkpoint reentrant|nonreentrant recomputes the transformer block in the backward
(torch.utils.checkpoint): the recomputed FLOPs are hardware FLOPs, not model FLOPs.
The model uses strided and padded convolutions (and with --depthwise a grouped one), linear layers, non-causal scaled
dot-product attention (torch.utils.flop_counter does not halve causal attention), layer norm and
cross-entropy. CPU only, a few seconds.
"""
import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=False)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self, depthwise, checkpoint=""):
        super().__init__()
        self.checkpoint = checkpoint
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16) if depthwise else nn.Identity()
        self.pointwise = nn.Conv2d(16, 32, 1)
        self.block = Block(32, 4)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = F.relu(self.pointwise(self.depthwise(x)))  # [B, 32, 16, 16]
        x = x.flatten(2).transpose(1, 2)  # [B, 256, 32] tokens
        if self.checkpoint:  # activation checkpointing: the block's forward runs again in the backward
            from torch.utils.checkpoint import checkpoint

            return self.head(checkpoint(self.block, x, use_reentrant=self.checkpoint == "reentrant").mean(1))
        return self.head(self.block(x).mean(1))


class TokenNet(nn.Module):
    """--lm: a one-block language model (embedding, attention block, head) for the 6*N*tokens check."""

    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.block = Block(dim, 4)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        return self.head(self.block(self.emb(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", action="store_true")
    ap.add_argument("--profile")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", default="cpu", help="cpu (the tests) or cuda (scripts/gpu-validate --part flops)")
    ap.add_argument("--amp", action="store_true", help="bf16 autocast")
    ap.add_argument("--lm", action="store_true", help="the one-block language model on 8 x 64 tokens instead")
    ap.add_argument("--checkpoint", choices=["", "reentrant", "nonreentrant"], default="",
                    help="activation checkpointing of the transformer block (torch.utils.checkpoint)")
    ap.add_argument("--depthwise", action="store_true",
                    help="a grouped (depthwise) convolution too: torch.utils.flop_counter counts its weight gradient "
                         "groups times over, so the comparison leaves it out")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = (TokenNet() if args.lm else Net(args.depthwise, args.checkpoint)).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if args.lm:
        x, y = torch.randint(0, 64, (8, 64), device=args.device), torch.randint(0, 64, (8, 64), device=args.device)
    else:
        x, y = torch.randn(8, 3, 32, 32, device=args.device), torch.randint(0, 10, (8,), device=args.device)

    def loss():
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.amp):
            out = model(x)
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    def step():
        opt.zero_grad()
        loss().backward()
        opt.step()

    if args.count:
        from torch.utils.flop_counter import FlopCounterMode

        step()  # warm: the counted step is like the others
        with FlopCounterMode(display=False) as counter:
            opt.zero_grad()
            loss().backward()
        by_op = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
        params = sum(p.numel() for p in model.parameters())
        print(json.dumps({"total": counter.get_total_flops(), "by_op": by_op, "params": params, "tokens": x.numel() if args.lm else 0}))
        return
    if args.profile:
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
        with profile(activities=activities, record_shapes=True,
                     schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(args.profile)) as prof:
            for _ in range(args.steps):
                step()
                prof.step()
        return
    for _ in range(args.steps):
        step()


if __name__ == "__main__":
    main()
