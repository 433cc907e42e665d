#!/usr/bin/env python3
"""Synthetic stand-ins for the data files the corpus's scripts read (corpus.tsv's setup column).

The scripts are vendored unmodified; what they would download (wikitext-2, tiny shakespeare, MNIST)
cannot be fetched at run time here, and the performance of a step depends on the data's shapes
(vocabulary, sequence lengths, tensor sizes), not on its text. Each kind writes files in the
format the script's own preparation step writes, seeded, so every machine gets the same bytes:

  words DIR         DIR/{train,valid,test}.txt: lines of words, Zipf-distributed over a 4 000-word
                    vocabulary (pytorch/examples word_language_model's --data; wikitext-2 has 33 278)
  wikitext FILE     one such file (lightning.pytorch.demos.WikiText2's data/wikitext-2.txt)
  chars FILE        random text over tiny shakespeare's 65 characters (minGPT chargpt's input.txt)
  nanogpt DIR       DIR/{train,val}.bin (uint16 ids) and meta.pkl over the same 65 characters, as
                    nanoGPT's data/shakespeare_char/prepare.py writes them
  mnist DIR         DIR/MNIST/complete/{training,test}.pt: (uint8 [N, 28, 28], int64 [N]) noise
                    images with MNIST's sizes (60 000 / 10 000), as lightning.pytorch.demos'
                    mocked MNIST reads them (PL_USE_MOCKED_MNIST=1)

Existing files are kept (--force rewrites them). Needs numpy and torch (the project's venv).
"""
import argparse
import os
import pickle

import numpy as np

SHAKESPEARE_CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # 65, as prepare.py prints


def _fresh(paths, force):
    if force:
        return True
    return not all(os.path.exists(p) for p in paths)


def _vocabulary(rng, size):
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words, seen = [], set()
    while len(words) < size:
        w = "".join(rng.choice(letters, size=int(rng.integers(2, 10))))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def _word_lines(rng, vocab, tokens):
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    p = 1.0 / (ranks + 2.7)  # Zipf-Mandelbrot, roughly natural text's rank-frequency curve
    p /= p.sum()
    ids = rng.choice(len(vocab), size=tokens, p=p)
    lines, i = [], 0
    while i < tokens:
        n = int(rng.integers(8, 32))
        lines.append(" " + " ".join(vocab[j] for j in ids[i:i + n]) + " \n")
        i += n
    return "".join(lines)


def words(out_dir, force, train_tokens=200_000, eval_tokens=20_000, vocab_size=4_000):
    files = {name: os.path.join(out_dir, name + ".txt") for name in ("train", "valid", "test")}
    if not _fresh(files.values(), force):
        return
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(1)
    vocab = _vocabulary(rng, vocab_size)
    for name, tokens in (("train", train_tokens), ("valid", eval_tokens), ("test", eval_tokens)):
        with open(files[name], "w") as f:
            f.write(_word_lines(rng, vocab, tokens))


def wikitext(path, force, tokens=320_000, vocab_size=4_000):
    if not _fresh([path], force):
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    rng = np.random.default_rng(2)
    vocab = _vocabulary(rng, vocab_size)
    with open(path, "w") as f:
        f.write(_word_lines(rng, vocab, tokens))


def chars(path, force, n=300_000):
    if not _fresh([path], force):
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    rng = np.random.default_rng(3)
    alphabet = np.array(list(SHAKESPEARE_CHARS))
    with open(path, "w") as f:
        f.write("".join(rng.choice(alphabet, size=n)))


def nanogpt(out_dir, force, train=1_000_000, val=100_000):
    files = [os.path.join(out_dir, n) for n in ("train.bin", "val.bin", "meta.pkl")]
    if not _fresh(files, force):
        return
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(4)
    v = len(SHAKESPEARE_CHARS)
    rng.integers(0, v, size=train, dtype=np.uint16).tofile(files[0])
    rng.integers(0, v, size=val, dtype=np.uint16).tofile(files[1])
    meta = {"vocab_size": v, "itos": dict(enumerate(SHAKESPEARE_CHARS)),
            "stoi": {c: i for i, c in enumerate(SHAKESPEARE_CHARS)}}
    with open(files[2], "wb") as f:
        pickle.dump(meta, f)


def mnist(root, force):
    import torch

    folder = os.path.join(root, "MNIST", "complete")
    files = {"training.pt": 60_000, "test.pt": 10_000}
    if not _fresh([os.path.join(folder, n) for n in files], force):
        return
    os.makedirs(folder, exist_ok=True)
    g = torch.Generator().manual_seed(5)
    for name, n in files.items():
        images = torch.randint(0, 256, (n, 28, 28), generator=g, dtype=torch.uint8)
        targets = torch.randint(0, 10, (n,), generator=g, dtype=torch.int64)
        torch.save((images, targets), os.path.join(folder, name))


def main():
    kinds = {"words": words, "wikitext": wikitext, "chars": chars, "nanogpt": nanogpt, "mnist": mnist}
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=sorted(kinds))
    ap.add_argument("path")
    ap.add_argument("--force", action="store_true", help="rewrite existing files")
    a = ap.parse_args()
    kinds[a.kind](a.path, a.force)


if __name__ == "__main__":
    main()
