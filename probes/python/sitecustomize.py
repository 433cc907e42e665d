"""trainrx: fixes applied from outside an unmodified PyTorch script.

`trainrx record` puts this folder first on PYTHONPATH when TRAINRX_FIX is set (by `trainrx fix
--cmd`), so Python imports this file at start-up. TRAINRX_FIX is a comma-separated list:

  anomaly_off        torch.autograd.set_detect_anomaly / detect_anomaly become no-ops
  zero_grad_none     Optimizer.zero_grad(set_to_none=False) becomes set_to_none=True
  workers=N          DataLoader(num_workers=0) gets N workers (persistent, prefetch 2)
  pin_memory         DataLoader(pin_memory=True) when CUDA is available
  eval_no_grad       model.eval() on a top-level module turns autograd off until model.train()
  cudnn_benchmark    torch.backends.cudnn.benchmark = True (and kept: later sets are ignored)
  deterministic_off  torch.use_deterministic_algorithms / cudnn.deterministic stay off
  tf32               float32 matmuls and convolutions may use TF32 (Ampere and newer)

Each patch is applied when torch is imported (an import hook), never imports torch itself, and
writes one line to stderr only with TRAINRX_FIX_VERBOSE=1. The user's own sitecustomize (if any)
still runs: it is found further along sys.path and executed first.
"""
import importlib.abc
import importlib.util
import os
import sys


def _chain_original_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_trainrx_original_sitecustomize", candidate)
            if spec and spec.loader:
                try:
                    spec.loader.exec_module(importlib.util.module_from_spec(spec))
                except Exception as e:  # never break the user's program
                    sys.stderr.write(f"trainrx: the original sitecustomize failed: {e}\n")
            return


def _fixes():
    out = {}
    for item in os.environ.get("TRAINRX_FIX", "").split(","):
        item = item.strip()
        if item:
            key, _, value = item.partition("=")
            out[key] = value
    return out


def _say(msg):
    if os.environ.get("TRAINRX_FIX_VERBOSE") == "1":
        sys.stderr.write(f"trainrx fix: {msg}\n")


def _apply(torch, fixes):
    if "anomaly_off" in fixes:
        torch.autograd.set_detect_anomaly(False)
        torch.autograd.set_detect_anomaly = lambda *a, **k: _NoopContext()
        torch.autograd.detect_anomaly = lambda *a, **k: _NoopContext()
        torch.autograd.anomaly_mode.set_detect_anomaly = torch.autograd.set_detect_anomaly
        torch.autograd.anomaly_mode.detect_anomaly = torch.autograd.detect_anomaly
        _say("anomaly detection stays off")
    if "zero_grad_none" in fixes:
        original = torch.optim.Optimizer.zero_grad

        def zero_grad(self, set_to_none=True):
            return original(self, set_to_none=True)

        torch.optim.Optimizer.zero_grad = zero_grad
        _say("zero_grad(set_to_none=True)")
    if "workers" in fixes or "pin_memory" in fixes:
        import torch.utils.data as data

        loader_init = data.DataLoader.__init__
        workers = int(fixes.get("workers") or 0)
        pin = "pin_memory" in fixes and torch.cuda.is_available()

        def init(self, dataset, *args, **kwargs):
            # Positional batch_size/shuffle/... stay as given; num_workers is the 6th parameter.
            if workers and len(args) < 5 and not kwargs.get("num_workers"):
                kwargs["num_workers"] = workers
                kwargs.setdefault("persistent_workers", True)
                kwargs.setdefault("prefetch_factor", 2)
            if pin:
                kwargs["pin_memory"] = True
            loader_init(self, dataset, *args, **kwargs)

        data.DataLoader.__init__ = init
        _say(f"DataLoader workers={workers} pin_memory={pin}")
    if "eval_no_grad" in fixes:
        module_train = torch.nn.Module.train
        depth = [0]
        saved = []

        def train(self, mode=True):
            depth[0] += 1
            try:
                result = module_train(self, mode)
            finally:
                depth[0] -= 1
            if depth[0] == 0:  # the user's own call, not the recursion into children
                if not mode and not saved:
                    saved.append(torch.is_grad_enabled())
                    torch.set_grad_enabled(False)
                elif mode and saved:
                    torch.set_grad_enabled(saved.pop())
            return result

        torch.nn.Module.train = train
        _say("eval() runs without autograd until train()")
    if "cudnn_benchmark" in fixes:
        torch.backends.cudnn.benchmark = True
        _say("cudnn.benchmark = True")
    if "deterministic_off" in fixes:
        torch.use_deterministic_algorithms = lambda *a, **k: None
        torch.backends.cudnn.deterministic = False
        _say("deterministic algorithms stay off")
    if "tf32" in fixes:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        _say("TF32 on")


class _NoopContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


class _TorchHook(importlib.abc.MetaPathFinder):
    """Applies the fixes right after `import torch` finishes."""

    def __init__(self, fixes):
        self.fixes = fixes
        self.done = False

    def find_spec(self, name, path, target=None):
        if name != "torch" or self.done:
            return None
        self.done = True
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        fixes = self.fixes

        class Loader(importlib.abc.Loader):
            def create_module(self, s):
                return loader.create_module(s)

            def exec_module(self, module):
                loader.exec_module(module)
                try:
                    _apply(module, fixes)
                except Exception as e:  # a fix that cannot apply is said, never fatal
                    sys.stderr.write(f"trainrx fix: could not apply {sorted(fixes)}: {e}\n")

        spec.loader = Loader()
        return spec


_chain_original_sitecustomize()
_FIXES = _fixes()
if _FIXES:
    sys.meta_path.insert(0, _TorchHook(_FIXES))
