"""A Hugging Face `Trainer` run on CPU with random data: a tiny BERT (hidden 64, 2 layers) built from a
config, so nothing is fetched from the hub and no tokenizer is needed. Trainer drives the loop itself
(accelerate's dataloader, its own optimizer and scheduler calls) and evaluates every --eval-steps steps
inside the training loop (no backward there), so a recording of it checks trainrx on code no one here
wrote. Needs `transformers` and `accelerate` in .venv (installed with pinned versions, --no-deps).
Usage: python train_hf_trainer.py [--steps 12] [--eval-steps 4]"""
import argparse, tempfile
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

VOCAB, SEQ, LABELS, BATCH = 1000, 32, 2, 8


class RandomTokens(torch.utils.data.Dataset):
    """n random sequences of token ids, each with a random class label (dicts, as Trainer expects)."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)
        self.labels = torch.randint(0, LABELS, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12, help="optimizer steps (max_steps)")
    ap.add_argument("--eval-steps", type=int, default=4, help="evaluate every N steps")
    a = ap.parse_args()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=SEQ, num_labels=LABELS)
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, max_steps=a.steps, per_device_train_batch_size=BATCH,
            per_device_eval_batch_size=BATCH, learning_rate=1e-3,
            eval_strategy="steps", eval_steps=a.eval_steps,  # evaluation inside the training loop
            save_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0,
            logging_strategy="no", disable_tqdm=True, seed=0)
        # One epoch holds exactly --steps batches; the eval set is 4 batches.
        trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(a.steps * BATCH, 1),
                          eval_dataset=RandomTokens(4 * BATCH, 2))
        result = trainer.train()
    evals = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    print(f"steps {trainer.state.global_step} evaluations {len(evals)}")
    print(f"final train loss {result.training_loss:.4f}")  # mean over the run, as Trainer reports it
