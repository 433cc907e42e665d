"""trainrx's Python start-up hook: module names, and fixes applied from outside an unmodified script.

`trainrx record` puts this folder first on PYTHONPATH, so Python imports this file at start-up.
It acts only when the program imports torch. TRAINRX_FIX (set by `trainrx fix --cmd`) is a
comma-separated list of fixes:

  anomaly_off        torch.autograd.set_detect_anomaly / detect_anomaly become no-ops
  zero_grad_none     Optimizer.zero_grad(set_to_none=False) becomes set_to_none=True
  workers=N          DataLoader(num_workers=0) gets N workers (persistent, prefetch 2)
  pin_memory         DataLoader(pin_memory=True) when CUDA is available
  eval_no_grad       model.eval() on a top-level module turns autograd off until model.train()
  cudnn_benchmark    torch.backends.cudnn.benchmark = True (and kept: later sets are ignored)
  deterministic_off  torch.use_deterministic_algorithms / cudnn.deterministic stay off
  tf32               float32 matmuls and convolutions may use TF32 (Ampere and newer)
  foreach            every optimizer param group with a `foreach` option (Adam, AdamW, SGD, ...) steps
                     with foreach=True, unless it is fused or differentiable (a group the script set to
                     foreach=False too: that is the fix measured)
  fused              every param group with a `fused` option (Adam, AdamW, SGD, Adagrad; CUDA, and the
                     CPU since torch 2.4) steps with fused=True (foreach off), unless differentiable
  channels_last      a model is converted to channels_last the first time it runs (its 4-D parameters and
                     buffers) and its 4-D floating-point inputs at every call
  compile_off        torch.compile(x, ...) returns x (the model runs eagerly; also as a decorator
                     and through nn.Module.compile)
  compile_mode=M     torch.compile(..., mode=M) whatever mode the script asked for
                     (default, reduce-overhead, max-autotune)

With TRAINRX_MODULES=1 (set by `trainrx record` unless the user set it; "all" for the whole run,
"0" for none) the first 20 calls of the model, and every nn.Module call inside them,
run inside a record_function range "nn.Module: <Root>.<name> (<Class>)", <name> as in the
root module's named_modules() ("Net.features.0 (Conv2d)"; the root is named by its class), so findings can
name the user's modules instead of aten::conv2d[[32, 3, 32, 32], ...]. Global forward hooks (one
pre, one post hook for all modules; the post hook also runs when forward raises on torch >= 2.1).

With TRAINRX_MARKS=1 (set by `trainrx record` unless the user set it; "0" for none),
torch.cuda.empty_cache() runs inside a record_function range "torch.cuda.empty_cache" (the
memory.empty_cache finding counts the calls per step).

With TRAINRX_ALT_FIX=<tokens> (set by `trainrx fix --cmd` for its in-process rows) the fixes that
can switch between steps (anomaly_off, zero_grad_none, tf32, cudnn_benchmark, deterministic_off, foreach, fused) are
switched on and off at optimizer-step boundaries, A B B A / B A A B, and each step is timed
(_Alternation below; TRAINRX_ALT_RESULT, TRAINRX_ALT_WARMUP, TRAINRX_ALT_STEPS).

Each patch is applied when torch is imported (an import hook), never imports torch itself, and
writes one line to stderr only with TRAINRX_FIX_VERBOSE=1. This file stays small (it runs in every
Python process `trainrx record` starts): the parts live beside it and are loaded only once torch is
imported: trainrx_hook_fixes.py (TRAINRX_FIX), trainrx_hook_marks.py (module ranges and marks),
trainrx_hook_fallback.py (torch.profiler when the probe did not attach; the stop after N steps),
trainrx_hook_alternation.py (TRAINRX_ALT_FIX), trainrx_hook_watch.py (TRAINRX_WATCH=DIR: `trainrx watch`),
trainrx_hook_common.py (what they share). The user's own sitecustomize (if any)
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


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `action(module)` right after `import <name>` finishes (once; never fatal)."""

    def __init__(self, name, action):
        self.name = name
        self.action = action
        self.done = False

    def find_spec(self, name, path, target=None):
        if name != self.name or self.done:
            return None
        self.done = True
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        action = self.action

        class Loader(importlib.abc.Loader):
            def create_module(self, s):
                return loader.create_module(s)

            def exec_module(self, module):
                loader.exec_module(module)
                try:
                    action(module)
                except Exception as e:  # ours is a nicety: the program's import goes on
                    sys.stderr.write(f"trainrx: after import {module.__name__}: {e}\n")

        spec.loader = Loader()
        return spec


def _on_torch(module):
    """After `import torch`: the fallback recorder if the probe did not attach, the fixes, the marks,
    the module ranges, the stop after N steps (each part a module beside this file, loaded now)."""
    from trainrx_hook_common import _REMOVE_MODULE_RANGES, _probe_state
    from trainrx_hook_fallback import _install_step_stop, _start_fallback
    from trainrx_hook_fixes import _apply, _wrap_compile
    from trainrx_hook_marks import _install_marks, _install_module_ranges

    if os.environ.get("TRAINRX_WATCH"):  # `trainrx watch`: light metrics, captures on a trigger, hangs
        try:
            from trainrx_hook_watch import _install_watch
            _install_watch(module)
        except Exception as e:
            sys.stderr.write(f"trainrx watch: not watched: {e}\n")
    if os.environ.get("TRAINRX_ALT_FIX"):  # first: its step hook times a step before the stop's hook ends the run
        try:
            from trainrx_hook_alternation import _install_alternation
            _install_alternation(module)
        except Exception as e:
            sys.stderr.write(f"trainrx: TRAINRX_ALT_FIX not applied: {e}\n")
    stop_after = os.environ.get("TRAINRX_STOP_AFTER_STEPS", "")
    if stop_after.isdigit():
        try:
            _install_step_stop(module, int(stop_after))
        except Exception as e:
            sys.stderr.write(f"trainrx: TRAINRX_STOP_AFTER_STEPS not applied: {e}\n")
    state = _probe_state()
    if state in (2, 3) and os.environ.get("TRAINRX_FALLBACK", "1") != "0":
        try:
            _start_fallback(module, state)
        except Exception as e:  # never fatal: the program runs unobserved, as without it
            sys.stderr.write(f"trainrx: no torch.profiler fallback: {e}\n")
    if _FIXES:
        try:
            _apply(module, _FIXES)
        except Exception as e:  # a fix that cannot apply is said, never fatal
            sys.stderr.write(f"trainrx fix: could not apply {sorted(_FIXES)}: {e}\n")
    if os.environ.get("TRAINRX_MARKS", "0") not in ("", "0"):
        try:
            _install_marks(module)
        except Exception as e:  # marks are a nicety: never fatal
            sys.stderr.write(f"trainrx: no marks: {e}\n")
    modules = os.environ.get("TRAINRX_MODULES", "0")
    if modules not in ("", "0"):
        try:
            _install_module_ranges(module, 0 if modules == "all" else _MODULE_CALLS)
        except Exception as e:  # module names are a nicety: never fatal
            sys.stderr.write(f"trainrx: no nn.Module ranges: {e}\n")
    _after_import("torch._dynamo", lambda dynamo: _on_dynamo(module, dynamo))
    if _REMOVE_MODULE_RANGES or "compile_off" in _FIXES or "compile_mode" in _FIXES:
        _wrap_compile(module, _FIXES)


def _on_dynamo(torch, dynamo):
    """After `import torch._dynamo` (torch.compile's first use): the compile marks."""
    if os.environ.get("TRAINRX_MARKS", "0") not in ("", "0"):
        record_function = getattr(torch.autograd.profiler, "record_function", None)
        if record_function is not None:
            from trainrx_hook_marks import _install_compile_marks
            _install_compile_marks(torch, dynamo, record_function)


def _after_import(name, action):
    """action(module) now if `name` is imported, else right after its import."""
    if name in sys.modules:
        action(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, action))


_chain_original_sitecustomize()
_MODULE_CALLS = 20  # model calls with module ranges (TRAINRX_MODULES=1); "all": the whole run
_FIXES = _fixes()
if _FIXES or any(os.environ.get(k, "0") not in ("", "0") for k in ("TRAINRX_MODULES", "TRAINRX_MARKS", "TRAINRX_STOP_AFTER_STEPS", "TRAINRX_ALT_FIX", "TRAINRX_WATCH")):
    sys.meta_path.insert(0, _AfterImport("torch", _on_torch))
