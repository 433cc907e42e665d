# Parameters updated by hand (no torch.optim), as pytorch/examples' word_language_model does;
# evaluation with no backward between epochs. Usage: train_hand_sgd.py [BATCHES an epoch, default 10]
import torch, sys
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
lr = 0.05
batches = int(sys.argv[1]) if len(sys.argv) > 1 else 10
data = [(torch.randn(32, 64), torch.randint(0, 10, (32,))) for _ in range(batches)]
for epoch in range(2):
    for x, y in data:
        model.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    with torch.no_grad():  # evaluation: no backward
        total = sum(torch.nn.functional.cross_entropy(model(x), y).item() for x, y in data)
    print(f"epoch {epoch} eval loss {total / len(data):.4f}")
