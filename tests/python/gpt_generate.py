"""minGPT's shape (karpathy/minGPT's chargpt): a small GPT trained on random tokens whose trainer
callback samples with generate() (under no_grad) after the first iteration. For
tests/e2e/frameworks_test.sh (issue 49.8): the module ranges must come from training calls, not
from generate()'s 50 calls at iteration 0."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        return x + self.mlp(self.ln(x))


class GPT(nn.Module):
    def __init__(self, vocab=100, d=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.h = nn.ModuleList([Block(d) for _ in range(2)])
        self.head = nn.Linear(d, vocab)

    def forward(self, idx, targets=None):
        x = self.wte(idx)
        for b in self.h:
            x = b(x)
        logits = self.head(x)
        if targets is None:
            return logits, None
        return logits, nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    @torch.no_grad()
    def generate(self, idx, n):
        for _ in range(n):
            logits, _ = self(idx[:, -32:])
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], 1)
        return idx


if __name__ == "__main__":
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for it in range(20):
        x, y = torch.randint(0, 100, (8, 32)), torch.randint(0, 100, (8, 32))
        _, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if it == 0:
            model.eval()
            model.generate(torch.zeros(1, 1, dtype=torch.long), 50)
            model.train()
