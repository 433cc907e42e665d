"""An ordinary PyTorch training script for a GPU, with switchable planted problems (issue 14).

Nothing here knows about trainrx: `trainrx record -- python3 train_gpu.py ...` attaches to it unmodified.
A ResNet-like CNN on synthetic 3x64x64 images, SGD, cross-entropy.

  --steps N            training steps (default 30)
  --batch N            batch size (default 64)
  --workers N          DataLoader workers (default 2)
  --pin-memory 0|1     DataLoader(pin_memory=...) and .to(non_blocking=...) (default 1)
  --item               loss.item() every step (host-device sync)
  --amp off|bf16|fp16  torch.autocast (default bf16)
  --tf32 0|1           allow TF32 matmuls/convolutions (default 1)
  --channels-last      model and inputs in channels_last
  --cudnn-benchmark 0|1  torch.backends.cudnn.benchmark (default 1)
  --costly-data        a __getitem__ that costs ~2 ms of CPU per sample (starves the GPU with few workers)
  --data-on-device     no DataLoader: one batch made on the device at the start and trained on every step
                       (the step is the model's alone: GPU-bound at a large --batch, where AMP, TF32 and
                       compile's fusion show)
  --anomaly            torch.autograd.set_detect_anomaly(True)
  --compile            model = torch.compile(model) (inductor, default mode: fusion, no CUDA graphs)
  --cuda-graph         capture forward, backward and the optimizer step once as a CUDA graph and replay
                       it every step (PyTorch's "whole network capture": warm-up on a side stream, static
                       input tensors); each step is marked ProfilerStep#N, as no optimizer step runs in Python
  --device cuda|cpu    (default cuda)
  --leak               keep each step's predictions with their graph (memory.growth)
  --empty-cache        torch.cuda.empty_cache() every step (memory.empty_cache)
  --profile-memory     with --torch-profiler: profile_memory=True, record_shapes=True (memory events,
                       input shapes for the batch)
  --torch-profiler F   torch.profiler (CPU+CUDA activities) around the loop, prof.step() per step,
                       chrome trace exported to F
  --step-times F       each step's wall time (ms, after torch.cuda.synchronize) as a JSON list
  --pace F             the loop's pace as JSON {"steps", "ms_per_step", "from_step"}: the device
                       synchronized once before step `from_step` (a quarter of the steps: warm-up
                       left out) and once after the last, the wall time between over the steps
                       between. Unlike the steps' host times it counts the device's work where the
                       device runs behind the loop (no sync in it), and adds only those two syncs
"""
import argparse
import json
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, n, costly):
        self.n, self.costly = n, costly

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(3, 64, 64, generator=g)
        if self.costly:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.002:
                x = x * 1.0001
        return x, i % 10


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--pin-memory", type=int, default=1)
    p.add_argument("--item", action="store_true")
    p.add_argument("--amp", choices=["off", "bf16", "fp16"], default="bf16")
    p.add_argument("--tf32", type=int, default=1)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--cudnn-benchmark", type=int, default=1)
    p.add_argument("--costly-data", action="store_true")
    p.add_argument("--data-on-device", action="store_true")
    p.add_argument("--anomaly", action="store_true")
    p.add_argument("--cuda-graph", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--device", default="cuda")
    p.add_argument("--torch-profiler", default="")
    p.add_argument("--step-times", default="")
    p.add_argument("--pace", default="")
    p.add_argument("--leak", action="store_true")
    p.add_argument("--oom-at", type=int, default=-1, help="at this step, ask the device for 16 TiB (watch's capture)")
    p.add_argument("--oom-caught", action="store_true", help="... in a try/except: the run goes on")
    p.add_argument("--empty-cache", action="store_true")
    p.add_argument("--profile-memory", action="store_true")
    # mlp: GEMMs, GELU and LayerNorm, no convolution or BatchNorm (a model the GPU transforms were not
    # calibrated on; with --data-on-device --batch 4096 its step is bound by the device's GEMMs)
    # resnet18: torchvision's ResNet-18 (weights=None, 10 classes) on the 3x64x64 images (added
    # 2026-11-28: a public model none of the GPU transforms was fitted on)
    # vit: timm's ViT-S (vit_small_patch16_224 at img_size 64, patch 8: 64 tokens, 12 blocks; added
    # 2026-11-28: a transformer, attention and LayerNorm, none of the transforms fitted on it)
    p.add_argument("--model", choices=["cnn", "mlp", "resnet18", "vit"], default="cnn")
    a = p.parse_args()

    dev = torch.device(a.device)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = bool(a.cudnn_benchmark)
    torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32)
    torch.backends.cudnn.allow_tf32 = bool(a.tf32)
    if a.anomaly:
        torch.autograd.set_detect_anomaly(True)
    if a.model == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 4096), nn.GELU(), nn.LayerNorm(4096),
                              nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 10)).to(dev)
    elif a.model == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(weights=None, num_classes=10).to(dev)
    elif a.model == "vit":
        import timm
        model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=10, img_size=64,
                                  patch_size=8).to(dev)
    else:
        model = nn.Sequential(block(3, 32), block(32, 64), nn.MaxPool2d(2), block(64, 128), nn.MaxPool2d(2),
                              block(128, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).to(dev)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if a.compile:
        model = torch.compile(model)
    scaler = torch.amp.GradScaler("cuda", enabled=a.amp == "fp16")
    loader = DataLoader(Images(a.batch * (a.steps + 2), a.costly_data), batch_size=a.batch, shuffle=False,
                        num_workers=a.workers, pin_memory=bool(a.pin_memory) and dev.type == "cuda",
                        persistent_workers=a.workers > 0, drop_last=True)
    loss_fn = nn.CrossEntropyLoss()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.amp)

    prof = None
    if a.torch_profiler:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if dev.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        # A schedule makes prof.step() mark ProfilerStep#N; one cycle longer than the run keeps every step.
        prof = torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=0, warmup=0, active=a.steps + 1),
                                      profile_memory=a.profile_memory, record_shapes=a.profile_memory)
        prof.start()
    graph = None
    if a.cuda_graph:
        if dev.type != "cuda" or a.amp == "fp16" or a.anomaly or a.leak:
            raise SystemExit("--cuda-graph needs --device cuda, and no --amp fp16, --anomaly or --leak")
        fmt = torch.channels_last if a.channels_last else torch.contiguous_format
        static_x = torch.zeros(a.batch, 3, 64, 64, device=dev).contiguous(memory_format=fmt)
        static_y = torch.zeros(a.batch, dtype=torch.long, device=dev)

        def train_step():
            with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None, cache_enabled=False):
                out = loss_fn(model(static_x), static_y)
            out.backward()
            opt.step()
            return out

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the graph (optimizer state, cuDNN's choice)
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                train_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = train_step()
    times, losses, kept = [], [], []
    if a.data_on_device:
        g = torch.Generator(device=dev).manual_seed(0)
        fixed = (torch.randn(a.batch, 3, 64, 64, device=dev, generator=g),
                 torch.randint(0, 10, (a.batch,), device=dev, generator=g))
        it = iter(lambda: fixed, None)
    else:
        it = iter(loader)
    pace_from, pace_t0 = max(1, a.steps // 4), None
    for step in range(a.steps):
        if a.pace and step == pace_from:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            pace_t0 = time.perf_counter()
        t0 = time.perf_counter()
        if graph is not None:
            with torch.profiler.record_function(f"ProfilerStep#{step}"):
                x, y = next(it)
                static_x.copy_(x, non_blocking=bool(a.pin_memory))
                static_y.copy_(y, non_blocking=bool(a.pin_memory))
                graph.replay()
                loss = static_loss
                if a.item:
                    losses.append(loss.item())
            times.append((time.perf_counter() - t0) * 1e3)
            continue
        x, y = next(it)
        nb = bool(a.pin_memory)
        x, y = x.to(dev, non_blocking=nb), y.to(dev, non_blocking=nb)
        if a.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if a.leak:  # "log the predictions later": a second forward, never detached
            with torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                kept.append(model(x))
        if step == a.oom_at:
            try:
                torch.empty(1 << 44, dtype=torch.uint8, device=dev)
            except (RuntimeError, MemoryError):  # torch.OutOfMemoryError is a RuntimeError
                if not a.oom_caught:
                    raise
        if a.empty_cache and dev.type == "cuda":
            torch.cuda.empty_cache()
        if a.item:
            losses.append(loss.item())
        if prof:
            prof.step()
        if a.step_times and dev.type == "cuda":
            torch.cuda.synchronize()  # a step's time includes its GPU work (only when timing steps)
        times.append((time.perf_counter() - t0) * 1e3)
    if a.pace and pace_t0 is not None:
        if dev.type == "cuda":
            torch.cuda.synchronize()
        n = a.steps - pace_from
        with open(a.pace, "w") as f:
            json.dump({"steps": n, "from_step": pace_from,
                       "ms_per_step": (time.perf_counter() - pace_t0) * 1e3 / n}, f)
    if prof:
        prof.stop()
        prof.export_chrome_trace(a.torch_profiler)
    if a.step_times:
        with open(a.step_times, "w") as f:
            json.dump(times, f)
    print(f"steps {a.steps} median step {sorted(times)[len(times) // 2]:.2f} ms final loss {loss.item():.4f}")
    if dev.type == "cuda":
        print(f"max memory allocated {torch.cuda.max_memory_allocated()} reserved {torch.cuda.max_memory_reserved()}")


if __name__ == "__main__":
    main()
