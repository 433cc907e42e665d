"""A PyTorch Lightning autoencoder on random data (CPU), for tests/e2e/frameworks_test.sh (issue 49.7,
49.8): Lightning runs training_step and backward inside Optimizer.step's closure, and calls
self.encoder / self.decoder from a method, not through a root module's forward. Needs `lightning`
(scripts/setup installs the pinned version into .venv)."""
import torch
import torch.nn as nn
import lightning as L
from torch.utils.data import DataLoader, TensorDataset


class AE(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 32))
        self.decoder = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 256))

    def training_step(self, batch, i):
        (x,) = batch
        return nn.functional.mse_loss(self.decoder(self.encoder(x)), x)

    def validation_step(self, batch, i):
        (x,) = batch
        self.log("val_loss", nn.functional.mse_loss(self.decoder(self.encoder(x)), x))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    torch.manual_seed(0)
    train = DataLoader(TensorDataset(torch.randn(64 * 40, 256)), batch_size=64)
    val = DataLoader(TensorDataset(torch.randn(64 * 4, 256)), batch_size=64)
    trainer = L.Trainer(max_steps=20, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, val_check_interval=10,
                        num_sanity_val_steps=0)
    trainer.fit(AE(), train, val)
