"""What the start-up hook's parts share (sitecustomize.py loads the parts when torch is imported):
the verbose line, whether dynamo is tracing, the global optimizer step hook, the probe's state, the
removers of the module-range hooks, a file replaced whole."""
import importlib
import os
import sys
import importlib.util


def _replace_file(path, text, tmp=".tmp"):
    """`path` holds `text`, written beside it (PATH + tmp) and renamed over it, so that a reader never
    sees half of it; on an OSError the partial file is removed and the error raised."""
    try:
        with open(path + tmp, "w") as f:
            f.write(text)
        os.replace(path + tmp, path)
    except OSError:
        try:
            os.remove(path + tmp)
        except OSError:
            pass
        raise


def _say(msg):
    if os.environ.get("TRAINRX_FIX_VERBOSE") == "1":
        sys.stderr.write(f"trainrx fix: {msg}\n")


def _tracers(torch):
    """(is_compiling, is_tracing): whether torch.compile or torch.jit.trace is tracing the caller,
    where our hooks must do nothing (they would become part of the traced graph)."""
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
    tracing = getattr(torch.jit, "is_tracing", None) or (lambda: False)
    return compiling, tracing


class _NoopContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


def _step_hook_register(when="post"):
    """torch.optim.optimizer.register_optimizer_step_{when}_hook (a global hook before ("pre") or after
    ("post") every optimizer step; torch >= 2.0), or None. The submodule is not an attribute of
    torch.optim: imported by name."""
    try:
        import importlib
        return getattr(importlib.import_module("torch.optim.optimizer"), f"register_optimizer_step_{when}_hook", None)
    except Exception:
        return None


def _one_line(text, limit=240):
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _probe_state():
    """What the preloaded shim decided (probes/preload.cc trainrx_probe_state): 1 attached, 2 this
    libtorch is not the probe's, 3 the probe could not load; -1 not under `trainrx record`."""
    try:
        import ctypes
        return ctypes.c_int.in_dll(ctypes.CDLL(None), "trainrx_probe_state").value
    except Exception:
        return -1


def _dynamo_compiled():
    """Whether torch.compile (dynamo) has looked at any frame in this process: then a switched flag its
    graphs are guarded on would recompile them at every switch, so no switching."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return False
    try:
        return bool(utils.counters["frames"]["total"])
    except Exception:
        return True


# Removers of the module-range hooks. A program that calls torch.compile gets none from then on:
# called from the compiled wrapper's eager _call_impl, each global hook became a compiled frame of
# its own ("Torch-Compiled Region" and guards on every call: 3 compiled frames for a model that
# compiles to 1), and removing them after dynamo traced them would fail its guards and recompile.
# Removed when torch.compile is called, before anything is traced.
_REMOVE_MODULE_RANGES = []
