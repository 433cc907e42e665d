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
writes one line to stderr only with TRAINRX_FIX_VERBOSE=1. The user's own sitecustomize (if any)
still runs: it is found further along sys.path and executed first.
"""
import importlib.abc
import importlib.util
import os
import re
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


def _install_channels_last(torch):
    """TRAINRX_FIX=channels_last (issue 60.4, model.channels_last): a model is converted to channels-last
    the first time it runs as the outermost module (global forward hooks keep the depth), and the
    4-D floating-point tensors it is called with are converted at every call. Its 4-D parameters and
    buffers are converted in place (param.data, as Module.to(memory_format=) does, which refuses a model
    with lazy modules not yet initialized): an optimizer made before keeps them."""
    from torch.nn.modules import module as nn_module
    depth, converted = [0], set()

    def to_channels_last(x):
        if isinstance(x, torch.Tensor) and x.dim() == 4 and x.is_floating_point():
            return x.contiguous(memory_format=torch.channels_last)
        return x

    def before(module, args):
        depth[0] += 1
        if depth[0] != 1:
            return None
        if id(module) not in converted:
            converted.add(id(module))
            lazy = getattr(torch.nn.parameter, "UninitializedTensorMixin", ())
            for t in list(module.parameters()) + list(module.buffers()):
                if not isinstance(t, lazy) and t.dim() == 4 and t.is_floating_point():
                    t.data = t.data.contiguous(memory_format=torch.channels_last)
        return tuple(to_channels_last(a) for a in args)

    def after(module, args, output):
        depth[0] -= 1

    nn_module.register_module_forward_pre_hook(before)
    nn_module.register_module_forward_hook(after, always_call=True)


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
    if "channels_last" in fixes:
        _install_channels_last(torch)
        _say("models and their 4-D inputs in channels_last")
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
    for key in ("foreach", "fused"):
        if key in fixes and _optimizer_groups(torch, key, lambda: True):
            _say(f"optimizers step with {key}=True")


def _optimizer_groups(torch, key, on):
    """A global optimizer step pre hook (torch >= 2.0) that sets each param group's `key` ("foreach"
    or "fused") before every step: True while on(), else the group's own value (kept per optimizer
    and group). Groups without the option (LBFGS; no `fused` in RMSprop), differentiable ones, and for
    foreach the fused ones, are left as they are; a fused group steps with foreach off (the two
    exclude each other). False when this torch has no global pre hook (Debian's 1.13): nothing applied."""
    import importlib
    import weakref
    register = getattr(importlib.import_module("torch.optim.optimizer"), "register_optimizer_step_pre_hook", None)
    if register is None:
        sys.stderr.write(f"trainrx fix: {key} not applied: this torch has no global optimizer step pre hook\n")
        return False
    own = weakref.WeakKeyDictionary()  # optimizer -> {group index: the script's own foreach and fused}

    def pre(opt, args, kwargs):
        saved = own.setdefault(opt, {})
        for i, group in enumerate(opt.param_groups):
            if key not in group or group.get("differentiable") or (key == "foreach" and group.get("fused")):
                continue
            if i not in saved:
                saved[i] = {k: group[k] for k in ("foreach", "fused") if k in group}
            if not on():
                group.update(saved[i])
            elif key == "foreach":
                group["foreach"] = True
            else:
                group["fused"], group["foreach"] = True, False

    register(pre)
    return True


def _tracers(torch):
    """(is_compiling, is_tracing): whether torch.compile or torch.jit.trace is tracing the caller,
    where our hooks must do nothing (they would become part of the traced graph)."""
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
    tracing = getattr(torch.jit, "is_tracing", None) or (lambda: False)
    return compiling, tracing


def _install_module_ranges(torch, model_calls):
    """nn.Module ranges through global forward hooks, for the first `model_calls` training calls of
    each model (a root module with children, called with grad enabled; 0: the whole run), then the
    hooks are removed: a range costs ~8 us of Python per module call, and the model's structure is
    the same every step. Calls with grad off (generation, evaluation) are neither counted nor
    recorded: minGPT's generate() at iteration 0 used the whole budget before training (issue 49.8).
    A module is named by its attribute path from the outermost module that holds it
    ("AE.encoder.0 (Linear)"), also when it is called as a root (Lightning calls self.encoder(x) from
    training_step, a method: encoder and decoder were both "Sequential")."""
    import threading
    import weakref

    from torch.nn.modules import module as nn_module

    register_pre = getattr(nn_module, "register_module_forward_pre_hook", None)
    register_post = getattr(nn_module, "register_module_forward_hook", None)
    record_function = getattr(torch.autograd.profiler, "record_function", None)
    if register_pre is None or register_post is None or record_function is None:
        return False
    # torch.compile(module) warns about global module hooks; these are ours, not the program's
    # (its stderr must read as it does unobserved), and they return at once while compiling.
    import warnings
    warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks")
    # Never inside torch.compile (dynamo inlines global hooks into the graph it traces) or
    # torch.jit.trace (the range would become part of the traced graph): return first thing.
    compiling, tracing = _tracers(torch)
    names = weakref.WeakKeyDictionary()  # module -> display name; never keeps a module alive
    # submodule -> (weak parent, attribute): every `parent.attr = submodule` (a global registration
    # hook, torch >= 2.0; installed when torch is imported, before the program builds its model).
    parents = weakref.WeakKeyDictionary()
    register_child = getattr(nn_module, "register_module_module_registration_hook", None)
    local = threading.local()  # per thread: the open (module, range) pairs

    def on_child(parent, attr, sub):
        try:
            if sub is not None:
                parents[sub] = (weakref.ref(parent), attr)
        except Exception:
            pass

    def path_of(module):
        """(outermost holder's class, "attr.attr") of a module held by another; (class, "") when none."""
        path = []
        seen = set()
        while id(module) not in seen:
            seen.add(id(module))
            got = parents.get(module)
            parent = got[0]() if got else None
            if parent is None:
                break
            path.append(got[1])
            module = parent
        return type(module).__name__, ".".join(reversed(path))

    def name_of(module, stack):
        try:
            return names[module]
        except (KeyError, TypeError):
            pass
        if not stack:  # a root call: name the whole tree once, as named_modules() does
            owner, where = path_of(module)
            root = f"{owner}.{where} ({type(module).__name__})" if where else owner
            prefix = f"{owner}.{where}." if where else f"{owner}."
            for qual, sub in module.named_modules():
                if sub not in names:
                    names[sub] = f"{prefix}{qual} ({type(sub).__name__})" if qual else root
            if module in names:
                return names[module]
        # A module made on the fly inside another's forward: its parent's name and its class.
        parent = names.get(stack[-1][0], "?") if stack else "?"
        return f"{parent}/{type(module).__name__}"

    handles = []
    calls = {}  # id(root model) -> training calls seen
    on = [True]
    grad_enabled = torch.is_grad_enabled

    def pre(module, args):
        if compiling() or tracing() or not on[0]:
            return
        try:
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = []
            if not stack and model_calls and not grad_enabled():
                return  # generation, evaluation: not a training call, not recorded
            if not stack and model_calls and next(module.children(), None) is not None:
                n = calls[id(module)] = calls.get(id(module), 0) + 1
                if n > model_calls:
                    on[0] = False
                    # Removing global hooks after torch.compile traced them would fail its guards and
                    # compile the model again: then the hooks stay, as a check that returns at once.
                    if not _dynamo_compiled():
                        for h in handles:
                            h.remove()
                        handles.clear()
                    return
            rf = record_function("nn.Module: " + name_of(module, stack))
            rf.__enter__()
            stack.append((module, rf))
        except Exception:  # never break the user's forward
            pass

    def post(module, args, output):
        if compiling() or tracing():
            return
        try:
            stack = getattr(local, "stack", None)
            if not stack or not any(m is module for m, _ in stack):
                return
            while stack:  # ranges a raised forward left open close with it
                m, rf = stack.pop()
                rf.__exit__(None, None, None)
                if m is module:
                    break
        except Exception:
            pass

    def remove():
        on[0] = False
        for h in handles:
            h.remove()
        handles.clear()

    _REMOVE_MODULE_RANGES.append(remove)
    if register_child is not None:
        try:
            handles.append(register_child(on_child))
        except Exception:
            pass
    handles.append(register_pre(pre))
    try:
        handles.append(register_post(post, always_call=True))  # torch >= 2.1: also when forward raises
    except TypeError:
        handles.append(register_post(post))
    return True


class _NoopContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


_OOM_SIZE = re.compile(r"(?:tried to allocate|Tried to allocate)\s+([0-9.]+)\s*(bytes|B|KiB|MiB|GiB|TiB)")
_OOM_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_OOM_GPU = re.compile(r"GPU (\d+)")


def _oom_mark_name(exc):
    """'trainrx::out_of_memory <device> <bytes asked>' for an out-of-memory exception, else None:
    torch.OutOfMemoryError (CUDA: 'Tried to allocate 2.00 GiB. GPU 0 ...'), the CPU allocator's
    RuntimeError ('can't allocate memory: you tried to allocate 655360000 bytes'), MemoryError."""
    text = str(exc)
    cuda = type(exc).__name__ == "OutOfMemoryError" or "CUDA out of memory" in text
    if not (cuda or isinstance(exc, MemoryError) or "can't allocate memory" in text):
        return None
    size = _OOM_SIZE.search(text)
    asked = int(float(size.group(1)) * _OOM_UNITS[size.group(2)]) if size else 0
    gpu = _OOM_GPU.search(text) if cuda else None
    device = f"cuda:{gpu.group(1) if gpu else 0}" if cuda else "cpu"
    return f"trainrx::out_of_memory {device} {asked}"


def _install_oom_mark(torch, record_function):
    """A run that dies of an out-of-memory error leaves a mark in its trace (memory.cc reads it: the
    device, the size asked, and the op that failed: the last one started before the mark)."""
    previous = sys.excepthook

    def excepthook(kind, exc, tb):
        try:
            name = _oom_mark_name(exc)
            if name:
                with record_function(name):
                    pass
        except Exception:
            pass
        return previous(kind, exc, tb)

    sys.excepthook = excepthook


def _step_post_hook_register():
    """torch.optim.optimizer.register_optimizer_step_post_hook (a global hook after every optimizer
    step; torch >= 2.0), or None. The submodule is not an attribute of torch.optim: imported by name."""
    try:
        import importlib
        return getattr(importlib.import_module("torch.optim.optimizer"), "register_optimizer_step_post_hook", None)
    except Exception:
        return None


def _cuda_memory_mark_name(torch, state):
    """'trainrx::cuda_memory cuda:<i> allocated=.. reserved=.. peak=.. retries=.. ooms=.. capacity=..'
    from the CUDA caching allocator's statistics of the current device, or None (no CUDA, or CUDA
    not initialized yet: asking would initialize it). `state` keeps the device's capacity (asked
    once). The run-wide peak is read, never reset (the program's own max_memory_allocated stays)."""
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():  # initialized implies available; a cheap flag
        return None
    device = cuda.current_device()
    stats = cuda.memory_stats(device)
    if "capacity" not in state:
        state["capacity"] = int(getattr(cuda.get_device_properties(device), "total_memory", 0))
    figures = [("allocated", "allocated_bytes.all.current"), ("reserved", "reserved_bytes.all.current"),
               ("peak", "allocated_bytes.all.peak"), ("retries", "num_alloc_retries"), ("ooms", "num_ooms")]
    return f"trainrx::cuda_memory cuda:{device} " + " ".join(
        f"{k}={int(stats.get(key, 0))}" for k, key in figures) + f" capacity={state['capacity']}"


def _install_cuda_memory_marks(torch, record_function):
    """After every optimizer step (a global post hook: no code change), the CUDA caching allocator's
    figures as a mark (memory.cc reads them as samples of the device): one memory_stats() call a step."""
    register = _step_post_hook_register()
    if register is None:
        return
    state = {}
    compiling, _ = _tracers(torch)

    def post_step(opt, args, kwargs):
        if compiling():  # a compiled optimizer step: nothing of ours in its graph
            return
        try:
            name = _cuda_memory_mark_name(torch, state)
            if name:
                with record_function(name):
                    pass
        except Exception:
            pass

    register(post_step)


def _install_loader_mark(torch, record_function):
    """Each time a DataLoader starts an iterator (an epoch; once with persistent workers), its worker
    processes as "trainrx::loader workers=N": worker processes are not recorded, and
    threads.oversubscribed counts them with the training threads (issue 49.11)."""
    data = getattr(getattr(torch, "utils", None), "data", None)
    loader = getattr(data, "DataLoader", None)
    original = getattr(loader, "_get_iterator", None)
    if original is None or getattr(original, "_trainrx_mark", False):
        return

    def _get_iterator(self, *args, **kwargs):
        try:
            with record_function(f"trainrx::loader workers={int(getattr(self, 'num_workers', 0) or 0)}"):
                pass
        except Exception:
            pass
        return original(self, *args, **kwargs)

    _get_iterator._trainrx_mark = True
    _get_iterator.__wrapped__ = original
    loader._get_iterator = _get_iterator


def _install_cpu_peak(torch, record_function):
    """At the end of a CPU-only recording (issue 52: MFU on a CPU needs the CPU's peak), the rate of
    a short fp32 matmul benchmark with the run's intra-op threads, as the mark
    "trainrx::cpu_peak gflops=G n=N threads=T repeats=R" after a "trainrx::cpu_peak_run" range that
    holds the benchmark's own ops (after the last step: no step counts them). Python's atexit, while
    torch is alive; the main process only; skipped where CUDA was used (the device's peak is the
    one that matters) or with TRAINRX_NO_CPU_PEAK=1. About 0.1 s. Only in a process that trained
    (an optimizer step ran): a launcher such as torchrun imports torch and runs no op, and must
    still write no trace."""
    import atexit
    import time
    main_pid = os.getpid()
    trained = []
    register = _step_post_hook_register()
    if register is None:
        return

    def post_step(opt, args, kwargs):
        if not trained:
            trained.append(True)

    register(post_step)

    def measure():
        try:
            if not trained or os.getpid() != main_pid or os.environ.get("TRAINRX_NO_CPU_PEAK") == "1":
                return
            cuda = getattr(torch, "cuda", None)
            if cuda is not None and getattr(cuda, "is_initialized", lambda: False)():
                return
            n = 512
            with record_function("trainrx::cpu_peak_run"), torch.no_grad():
                a, b = torch.randn(n, n), torch.randn(n, n)
                torch.mm(a, b)  # warm: the library's first call picks its kernels
                best, repeats, start = 0.0, 0, time.perf_counter()
                while repeats < 3 or (time.perf_counter() - start < 0.08 and repeats < 64):
                    t0 = time.perf_counter()
                    torch.mm(a, b)
                    dt = time.perf_counter() - t0
                    if dt > 0:
                        best = max(best, 2.0 * n * n * n / dt / 1e9)
                    repeats += 1
            with record_function(f"trainrx::cpu_peak gflops={best:.2f} n={n} threads={torch.get_num_threads()} "
                                 f"repeats={repeats}"):
                pass
            # The mark is lost when the step window closed before the end (a run longer than
            # `record --steps`, 200 by default): the probe's trace block keeps the figures whatever
            # the window (issue 60).
            if _probe_state() == 1:
                import ctypes
                set_config = ctypes.CDLL(None).trainrx_set_config  # the preload shim's, to the probe
                set_config.argtypes, set_config.restype = [ctypes.c_char_p, ctypes.c_double], ctypes.c_int
                for key, value in (("cpu_peak_gflops", round(best, 2)), ("cpu_peak_n", n),
                                   ("cpu_peak_threads", torch.get_num_threads()), ("cpu_peak_repeats", repeats)):
                    set_config(key.encode(), float(value))
        except Exception:
            pass

    atexit.register(measure)


# The calls that make the host wait for the device (or read a tensor's value on the host), whose
# caller the findings name (issue 49.12): methods of torch.Tensor, functions of torch / torch.cuda.
_SITE_METHODS = ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "nonzero", "masked_select")
_SITE_FUNCTIONS = (("", "nonzero"), ("", "masked_select"), ("cuda", "synchronize"), ("cuda", "empty_cache"))


def _install_call_sites(torch, record_function):
    """The user's line around the few calls that sync (scalar reads, copies to the host, nonzero /
    masked_select, torch.cuda.synchronize / empty_cache): each call runs inside a range
    "trainrx::at <file>(<line>): <function>", the first frame outside torch (the same text as
    torch.profiler's with_stack frames), so the op it runs (aten::item, aten::_local_scalar_dense,
    ...) nests in its caller's line. Only these calls, never a tracer on every call: one
    sys._getframe walk and one record_function per call (bench/call_sites.py: ~7.5 us a call on
    this 2-core machine, where a GPU sync it names waits tens of microseconds or more). Nothing
    while torch.compile or torch.jit traces, nor in forked children (DataLoader workers, not
    recorded): the wrapper calls the original at once."""
    compiling, tracing = _tracers(torch)
    torch_dir = os.path.dirname(getattr(torch, "__file__", "") or "") + os.sep
    ours = os.path.abspath(__file__)
    getframe = sys._getframe
    # Forked children (DataLoader workers) are not recorded: there the wrapper only calls through.
    on = [True]
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: on.__setitem__(0, False))

    def site():
        f = getframe(2)
        while f is not None:
            name = f.f_code.co_filename
            if not (name.startswith(torch_dir) or name == ours):
                return f"trainrx::at {name}({f.f_lineno}): {f.f_code.co_name}"
            f = f.f_back
        return None

    def wrap(owner, attr):
        original = getattr(owner, attr, None)
        if original is None or getattr(original, "_trainrx_site", False):
            return

        def call(*args, **kwargs):
            if not on[0] or compiling() or tracing():
                return original(*args, **kwargs)
            try:
                where = site()
            except Exception:
                where = None
            if where is None:
                return original(*args, **kwargs)
            with record_function(where):
                return original(*args, **kwargs)

        call.__name__ = getattr(original, "__name__", attr)
        call.__qualname__ = getattr(original, "__qualname__", attr)
        call.__doc__ = getattr(original, "__doc__", None)
        call.__wrapped__ = original
        call._trainrx_site = True
        try:
            setattr(owner, attr, call)
        except (AttributeError, TypeError):
            pass

    for attr in _SITE_METHODS:
        wrap(torch.Tensor, attr)
    for module, attr in _SITE_FUNCTIONS:
        owner = getattr(torch, module, None) if module else torch
        if owner is not None:
            wrap(owner, attr)


def _one_line(text, limit=240):
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _install_compile_marks(torch, dynamo, record_function):
    """torch.compile as the trace sees it (issue 39), at compile time only, nothing per step: each
    compilation as a range "trainrx::compile <compile id>" (its length is the compile time), then
    the graph breaks it found as "trainrx::graph_break <file>:<line> <reason>" (the user's frame
    where dynamo stopped tracing) and the guards that failed before it as
    "trainrx::recompile <file>:<line> <function> <reason>" (a recompile of that function)."""
    handler = getattr(getattr(dynamo, "callback", None), "callback_handler", None)
    reasons = getattr(dynamo, "graph_break_reasons", None)
    failures = getattr(getattr(dynamo, "utils", None), "guard_failures", None)
    if handler is None:
        return
    state = {"open": [], "breaks": 0, "failures": {}}

    def mark(name):
        with record_function(name):
            pass

    def start(args):
        try:
            if failures is not None:  # guards that failed since the last compile: this one recompiles
                for code, got in list(failures.items()):
                    # A cache lookup appends the failure of every cached entry, the newest last.
                    seen = state["failures"].get(code, 0)
                    if len(got) > seen:
                        where = f"{getattr(code, 'co_filename', '?')}:{getattr(code, 'co_firstlineno', 0)}"
                        guard = re.sub(r"^\d+/\d+: ", "", str(got[-1]))  # "1/3: self.scale == 3 ..."
                        mark(f"trainrx::recompile {where} {getattr(code, 'co_name', '?')} {_one_line(guard)}")
                    state["failures"][code] = len(got)
            r = record_function(f"trainrx::compile {getattr(args, 'compile_id', '')}")
            r.__enter__()
            state["open"].append(r)
        except Exception:
            pass

    def end(args):
        try:
            if state["open"]:
                state["open"].pop().__exit__(None, None, None)
            if reasons is not None:
                if state["breaks"] > len(reasons):  # torch._dynamo.reset() cleared them
                    state["breaks"] = 0
                for r in reasons[state["breaks"]:]:
                    stack = getattr(r, "user_stack", None) or []
                    where = f"{stack[-1].filename}:{stack[-1].lineno}" if stack else "?:0"
                    mark(f"trainrx::graph_break {where} {_one_line(getattr(r, 'reason', ''))}")
                state["breaks"] = len(reasons)
        except Exception:
            pass

    handler.register_start_callback(start)
    handler.register_end_callback(end)


def _install_marks(torch):
    """TRAINRX_MARKS=1: calls a trace cannot otherwise see become record_function ranges. Now:
    torch.cuda.empty_cache() as "torch.cuda.empty_cache" (memory.empty_cache counts it per step; on
    a CPU run the call does nothing and is still counted), an uncaught out-of-memory error as
    "trainrx::out_of_memory <device> <bytes>", and, after each optimizer step of a CUDA run, the
    caching allocator's figures as "trainrx::cuda_memory cuda:<i> allocated=.. reserved=.. ...", and a
    DataLoader's worker count as "trainrx::loader workers=N" at each iterator. Same result, same exceptions; never
    inside torch.compile or torch.jit tracing."""
    record_function = getattr(torch.autograd.profiler, "record_function", None)
    cuda = getattr(torch, "cuda", None)
    original = getattr(cuda, "empty_cache", None)
    if record_function is None or getattr(original, "_trainrx_mark", False):
        return
    _install_oom_mark(torch, record_function)
    _install_cuda_memory_marks(torch, record_function)
    _install_loader_mark(torch, record_function)
    _install_call_sites(torch, record_function)
    _install_cpu_peak(torch, record_function)  # after the loader / call-site hooks: its own ops are not user calls
    if original is None:
        return
    compiling, tracing = _tracers(torch)

    def empty_cache(*args, **kwargs):
        if compiling() or tracing():
            return original(*args, **kwargs)
        with record_function("torch.cuda.empty_cache"):
            return original(*args, **kwargs)

    empty_cache.__doc__ = original.__doc__
    empty_cache.__wrapped__ = original
    empty_cache._trainrx_mark = True
    cuda.empty_cache = empty_cache
    memory = getattr(cuda, "memory", None)
    if memory is not None and getattr(memory, "empty_cache", None) is original:
        memory.empty_cache = empty_cache
    _install_call_sites(torch, record_function)  # after: empty_cache's line outside its range


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


def _probe_state():
    """What the preloaded shim decided (probes/preload.cc trainrx_probe_state): 1 attached, 2 this
    libtorch is not the probe's, 3 the probe could not load; -1 not under `trainrx record`."""
    try:
        import ctypes
        return ctypes.c_int.in_dll(ctypes.CDLL(None), "trainrx_probe_state").value
    except Exception:
        return -1


def _add_block(path, key, value):
    """A top-level key added to a written Kineto JSON object ({..."traceName": ...}) in place: the
    text before its last '}' gets ',"key": value'. A list (torch 1.x writes one) is left as it is."""
    import json
    with open(path, "r+b") as f:
        f.seek(0)
        if not f.read(64).lstrip().startswith(b"{"):
            return
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 4096))
        tail = f.read()
        end = tail.rfind(b"}")
        if end < 0:
            return
        f.seek(size - len(tail) + end)
        f.write((f', "{key}": ' + json.dumps(value) + "}\n").encode())
        f.truncate()


def _start_fallback(torch, state):
    """The probe did not attach (built for another torch): record with torch.profiler instead, over
    the same step window (TRAINRX_SKIP_STEPS, TRAINRX_STEPS; a step is an optimizer step, through a
    global step post hook), writing the Kineto trace where the probe would have (TRAINRX_OUTPUT;
    the root process only). It sees what torch.profiler sees: ops, shapes, record_function ranges
    (our marks and module ranges among them), not the probe's config snapshots or dataflow."""
    output = os.environ.get("TRAINRX_OUTPUT")
    if not output or os.environ.get("TRAINRX_ROOT_PID") != str(os.getpid()):
        return
    import atexit

    profiler = torch.profiler
    activities = [profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(profiler.ProfilerActivity.CUDA)
    steps = os.environ.get("TRAINRX_STEPS", "200")
    skip = int(os.environ.get("TRAINRX_SKIP_STEPS", "0") or 0)
    register = _step_post_hook_register()
    written = []

    block = {"recorder": "torch.profiler, trainrx record's fallback (the probe " +
                         ("was built for another torch" if state == 2 else "could not be loaded") +
                         "): no config snapshots, no dataflow, no heap samples",
             "command": " ".join(sys.argv), "pid": os.getpid()}

    def export(prof):
        if written:
            return
        written.append(True)
        prof.export_chrome_trace(output)
        _add_block(output, "trainrx", block)

    kwargs = dict(activities=activities, record_shapes=True)
    windowed = register is not None and steps != "all"
    if windowed:
        # warmup 1 (torch.profiler warns without): the step before the window is its warm-up.
        kwargs.update(schedule=profiler.schedule(wait=max(0, skip - 1), warmup=1, active=int(steps), repeat=1),
                      on_trace_ready=export)
    prof = profiler.profile(**kwargs)
    prof.start()
    if windowed:
        register(lambda opt, args, kwargs: prof.step())

    def stop():
        try:
            prof.stop()
            export(prof)
        except Exception as e:
            sys.stderr.write(f"trainrx: the torch.profiler fallback could not write {output}: {e}\n")

    atexit.register(stop)
    sys.stderr.write(f"trainrx: recording with torch.profiler (fallback) into {output}\n")


def _install_step_stop(torch, steps):
    """TRAINRX_STOP_AFTER_STEPS=N (set by fix/sweep/ab/gate --cmd trials and fix --cmd's analysis run,
    issue 40): after the N-th optimizer step the program leaves as if it had finished: SystemExit(0)
    raised from a global step hook, so its finally blocks and exit handlers run (the trace is
    written); what the script would have done after its loop (evaluation, saving a checkpoint) does
    not run. A script that never creates a torch.optim optimizer (parameters updated by hand) counts
    backward passes instead, as the analyzer's steps do: it stops as its (N+1)-th backward starts,
    after N whole steps. A script that creates an optimizer is never stopped by its backward passes
    (gradient accumulation runs many per step)."""
    if steps <= 0:
        return
    state = {"steps": 0, "backwards": 0, "optimizers": 0}

    def stop_now():
        sys.stderr.write(f"trainrx: stopping after {steps} steps (TRAINRX_STOP_AFTER_STEPS)\n")
        raise SystemExit(0)

    register = _step_post_hook_register()
    if register is not None:
        def stop(opt, args, kwargs):
            state["steps"] += 1
            if state["steps"] == steps:
                stop_now()

        register(stop)
    optimizer_init = torch.optim.Optimizer.__init__

    def init(self, *args, **kwargs):
        state["optimizers"] += 1
        return optimizer_init(self, *args, **kwargs)

    torch.optim.Optimizer.__init__ = init
    backward = torch.autograd.backward

    def counted_backward(*args, **kwargs):
        if not state["optimizers"]:
            state["backwards"] += 1
            if state["backwards"] == steps + 1:
                stop_now()
        return backward(*args, **kwargs)

    torch.autograd.backward = counted_backward


# In-process A/B of fixes in the user's own script (TRAINRX_ALT_FIX, issue 40): `trainrx fix --cmd`
# measures a fix that only flips a flag read at every use as the workloads' switchable knobs are
# measured (workloads/train.cc AltArm): after the warm-up steps, steps alternate between the script
# as it is (A) and the script with the fixes (B) in blocks of four, A B B A then B A A B, so both
# arms share every position; each block gives one paired ratio (experiments' BlockLogRatios).
_ALT_PATTERN = "ABBABAAB"


def _alt_anomaly(torch, arm):
    """anomaly_off: anomaly detection off during B steps. The script's set_detect_anomaly(...) and
    `with detect_anomaly():` act in A steps and are no-ops in B steps (as TRAINRX_FIX's anomaly_off
    makes them for a whole run), so a script that enters detect_anomaly() every step still switches."""
    enable = torch.set_anomaly_enabled  # the flag itself; detect_anomaly's own calls look it up here too
    for name in ("set_detect_anomaly", "detect_anomaly"):
        real = getattr(torch.autograd, name)

        def arm_aware(*args, _real=real, **kwargs):
            return _NoopContext() if arm[0] == "B" else _real(*args, **kwargs)

        setattr(torch.autograd, name, arm_aware)
        setattr(torch.autograd.anomaly_mode, name, arm_aware)
    return ("anomaly detection (torch.set_anomaly_enabled)",
            lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
            lambda s: enable(*s), lambda s: (False, s[1]))


def _alt_zero_grad(torch, arm):
    """zero_grad_none: Optimizer.zero_grad(set_to_none=True) during B steps; the flag is the hook's own,
    read at every call. Gradients stay what each arm's backward makes them: a B step's zero_grad frees
    them, the next A step's zero_grad (at its start) finds them allocated again and zeroes them."""
    on = [False]
    original = torch.optim.Optimizer.zero_grad

    def zero_grad(self, set_to_none=True):
        return original(self, set_to_none=True if on[0] else set_to_none)

    zero_grad.__doc__ = original.__doc__
    torch.optim.Optimizer.zero_grad = zero_grad

    def write(s):
        on[0] = s

    return ("zero_grad's set_to_none", lambda: on[0], write, lambda s: True)


def _alt_tf32(torch, arm):
    """tf32: float32 matmuls at "high" precision (TF32) and cuDNN's TF32 during B steps. A's matmul
    precision is kept as the script set it ("medium" already allows bf16: left as it is)."""
    cudnn = torch.backends.cudnn

    def write(s):
        torch.set_float32_matmul_precision(s[0])
        cudnn.allow_tf32 = s[1]

    return ("TF32 (torch.set_float32_matmul_precision, torch.backends.cudnn.allow_tf32)",
            lambda: (torch.get_float32_matmul_precision(), bool(cudnn.allow_tf32)), write,
            lambda s: ("high" if s[0] == "highest" else s[0], True))


def _alt_cudnn_benchmark(torch, arm):
    """cudnn_benchmark: torch.backends.cudnn.benchmark = True during B steps."""
    cudnn = torch.backends.cudnn

    def write(s):
        cudnn.benchmark = s

    return ("torch.backends.cudnn.benchmark", lambda: bool(cudnn.benchmark), write, lambda s: True)


def _alt_deterministic(torch, arm):
    """deterministic_off: deterministic algorithms and cudnn.deterministic off during B steps; the
    script's torch.use_deterministic_algorithms(...) acts in A steps and is a no-op in B steps."""
    real = torch.use_deterministic_algorithms
    cudnn = torch.backends.cudnn

    def use_deterministic_algorithms(*args, **kwargs):
        return None if arm[0] == "B" else real(*args, **kwargs)

    torch.use_deterministic_algorithms = use_deterministic_algorithms

    def write(s):
        real(s[0], warn_only=s[1])
        cudnn.deterministic = s[2]

    return ("deterministic algorithms (torch.use_deterministic_algorithms, torch.backends.cudnn.deterministic)",
            lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
                     bool(cudnn.deterministic)),
            write, lambda s: (False, False, False))


def _alt_optimizer(key):
    def make(torch, arm):
        """foreach / fused: optimizers step with that option during B steps (_optimizer_groups' pre hook
        reads the flag before every step; A steps get each group's own values back)."""
        on = [False]
        if not _optimizer_groups(torch, key, lambda: on[0]):
            raise RuntimeError("no global optimizer step pre hook")

        def write(s):
            on[0] = s

        return (f"the optimizers' {key}", lambda: on[0], write, lambda s: True)
    return make


# The tokens that switch between steps (analyzers' OutsideFixSwitches lists the same; tested): each
# makes (what, read, write, fixed): read() the flags as they are, write(state) sets them, fixed(a)
# is B's state given A's. The others (workers=N, pin_memory, eval_no_grad, compile_off) need a new
# process: a DataLoader is built once, compile_off acts before tracing, evaluation is not a step.
_ALT_SWITCHES = {"anomaly_off": _alt_anomaly, "zero_grad_none": _alt_zero_grad, "tf32": _alt_tf32,
                 "cudnn_benchmark": _alt_cudnn_benchmark, "deterministic_off": _alt_deterministic,
                 "foreach": _alt_optimizer("foreach"), "fused": _alt_optimizer("fused")}


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


def _cpu_sample():
    """(wall, run, wait, involuntary, cpus busy, cpus, children) now, in ns (issue 60.5: a busy machine),
    as the collector's profiler/cpu_wait.cc reads them: the process's threads' schedstat, the allowed
    CPUs' busy time from /proc/stat, the CPU time of its children (DataLoader workers: a scan of /proc
    for its pid as parent; twice a run); None where Linux's schedstat is missing."""
    import time
    import resource
    try:
        run = wait = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    r, w = f.read().split()[:2]
                run, wait = run + int(r), wait + int(w)
            except (OSError, ValueError):
                pass  # a thread that just ended
        allowed = os.sched_getaffinity(0)
        tick = 1e9 / os.sysconf("SC_CLK_TCK")
        busy = 0
        with open("/proc/stat") as f:
            for line in f:
                if not line.startswith("cpu"):
                    break
                name, *v = line.split()
                if name != "cpu" and int(name[3:]) in allowed:
                    v = [int(x) for x in v[:8]]
                    busy += (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * tick
        children, me = 0, os.getpid()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == me:
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == me:  # ppid; utime and stime are fields 14 and 15
                    children += (int(fields[11]) + int(fields[12])) * tick
            except (OSError, ValueError, IndexError):
                pass
        done = resource.getrusage(resource.RUSAGE_CHILDREN)  # children that ended and were waited for
        children += (done.ru_utime + done.ru_stime) * 1e9
        return (time.perf_counter_ns(), run, wait, resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw, busy, len(allowed),
                children)
    except Exception:
        return None


def _cpu_load(first, last):
    """The "cpu" object of a run between two _cpu_sample()s (experiments' ParseCpuLoad), or None."""
    if first is None or last is None or last[0] <= first[0]:
        return None
    run, wait = max(0, last[1] - first[1]), max(0, last[2] - first[2])
    children = max(0.0, last[6] - first[6])
    return {"wall_ns": last[0] - first[0], "run_ns": run, "wait_ns": wait, "involuntary": max(0, last[3] - first[3]),
            "children_ns": children, "others_ns": max(0.0, last[4] - first[4] - run - children), "cpus": last[5]}


class _Alternation:
    """TRAINRX_ALT_FIX=<tokens>: from a global optimizer step post hook (the first optimizer that steps;
    others are not steps of their own), after TRAINRX_ALT_WARMUP steps each step's arm follows
    _ALT_PATTERN; each timed step is the time between two boundaries (time.perf_counter, after
    torch.cuda.synchronize() when CUDA is initialized: kernels of one arm must not spill into the
    other's step), the hook's own switching outside both. After TRAINRX_ALT_STEPS timed steps (0:
    never) the program leaves as TRAINRX_STOP_AFTER_STEPS does (SystemExit(0)). At exit the steps go
    to TRAINRX_ALT_RESULT as {"schema": "trainrx.alt/1", "steps": [{"arm", "ms"}], "stopped",
    "token"}. Switching stops for good (the script runs on as A) when the script set a switched flag
    itself during a B step (read back at the next boundary: B was not the fix), when torch.compile
    compiled anything, or when switching fails; "stopped" says why, "token" which fix."""

    def __init__(self, torch, tokens, warmup, steps, result):
        self.torch, self.tokens, self.warmup, self.steps, self.result = torch, tokens, warmup, steps, result
        self.arm = ["A"]
        self.pid = os.getpid()
        self.times = []  # (arm, ms) of each timed step
        self.stopped, self.stopped_token = "", ""
        self.switches = []  # (token, what, read, write, fixed)
        self.saved, self.expected = {}, {}  # token -> A's state when B began, the state the hook left for B
        self.count = 0
        self.started = None
        self.optimizer = None
        self.cpu_first = self.cpu_last = None  # _cpu_sample() at the first timed step and after the last
        for token in tokens:
            make = _ALT_SWITCHES.get(token)
            if make is None:
                return self.stop(f"{token} cannot be switched between steps (only {', '.join(_ALT_SWITCHES)})", token)
            try:
                self.switches.append((token,) + make(torch, self.arm))
            except Exception as e:  # a torch without one of the flags
                return self.stop(f"{token} cannot be switched on this torch: {type(e).__name__}: {e}", token)

    def clock(self):
        import time
        cuda = getattr(self.torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():
            cuda.synchronize()
        return time.perf_counter()

    def set_arm(self, arm):
        if arm == self.arm[0]:
            return
        for token, _, read, write, fixed in self.switches:
            if arm == "B":
                self.saved[token] = read()
                write(fixed(self.saved[token]))
                self.expected[token] = read()
            elif token in self.saved:
                write(self.saved[token])
        self.arm[0] = arm

    def stop(self, why, token=""):
        if self.stopped:
            return
        self.stopped, self.stopped_token = why, token
        sys.stderr.write(f"trainrx: in-process switching stopped: {why}\n")
        try:
            self.set_arm("A")
        except Exception:
            self.arm[0] = "A"

    def boundary(self):
        if self.arm[0] == "B":  # the step just timed ran with the fixes: did they stay?
            for token, what, read, _, _ in self.switches:
                got = read()
                if got != self.expected[token]:
                    return self.stop(f"the script sets {what} itself: after a step with {token} applied it was "
                                     f"{got!r} where the hook had set {self.expected[token]!r}", token)
        if _dynamo_compiled():
            return self.stop("torch.compile compiled code in this process: each switch of a flag its graphs are "
                             "guarded on would recompile them")
        if self.count >= self.warmup:
            self.set_arm(_ALT_PATTERN[(self.count - self.warmup) % len(_ALT_PATTERN)])

    def on_step(self, opt, args, kwargs):
        try:
            leave = self.step(opt)
        except Exception as e:  # never the script's failure: it runs on as A
            self.stop(f"the start-up hook could not switch: {type(e).__name__}: {e}")
            leave = False
        if leave:
            sys.stderr.write(f"trainrx: stopping after {self.count} steps ({self.warmup} warm-up, {self.steps} "
                             "switched; TRAINRX_ALT_STEPS)\n")
            raise SystemExit(0)

    def step(self, opt):
        """One boundary; True when the program should now leave (the timed steps are done)."""
        now = self.clock()
        if self.optimizer is None:
            self.optimizer = opt
        elif opt is not self.optimizer:
            return False
        self.count += 1
        if self.started is not None and not self.stopped:
            self.times.append((self.arm[0], (now - self.started) * 1e3))
        self.started = None
        if not self.stopped:
            self.boundary()
        if self.steps and self.count >= self.warmup + self.steps:
            self.cpu_last = _cpu_sample()
            return True
        if not self.stopped and self.count >= self.warmup:
            if self.cpu_first is None:
                self.cpu_first = _cpu_sample()
            self.started = self.clock()
        return False

    def write(self):
        if not self.result or os.getpid() != self.pid:  # a forked child that exits normally: not ours
            return
        import json
        doc = {"schema": "trainrx.alt/1", "tokens": self.tokens, "warmup": self.warmup,
               "steps": [{"arm": a, "ms": ms} for a, ms in self.times], "stopped": self.stopped,
               "token": self.stopped_token}
        cpu = _cpu_load(self.cpu_first, self.cpu_last or _cpu_sample())
        if cpu is not None:
            doc["cpu"] = cpu
        try:
            with open(self.result + ".tmp", "w") as f:
                json.dump(doc, f)
            os.replace(self.result + ".tmp", self.result)
        except Exception as e:
            sys.stderr.write(f"trainrx: could not write {self.result}: {e}\n")


def _install_alternation(torch):
    """TRAINRX_ALT_FIX in the root process of the launch only (the one `trainrx record` started; every
    process when not under record): DataLoader workers and spawned helpers do not step, and ranks of a
    distributed job could not switch on the same steps together."""
    root = os.environ.get("TRAINRX_ROOT_PID")
    if root and root != str(os.getpid()):
        return
    import atexit
    tokens = [t.strip() for t in os.environ.get("TRAINRX_ALT_FIX", "").split(",") if t.strip()]
    number = lambda key, default: int(os.environ.get(key, "") or default)
    alt = _Alternation(torch, tokens, number("TRAINRX_ALT_WARMUP", 5), number("TRAINRX_ALT_STEPS", 64),
                       os.environ.get("TRAINRX_ALT_RESULT", ""))
    atexit.register(alt.write)  # runs on the SystemExit of a step stop too
    register = _step_post_hook_register()
    if register is None:
        alt.stop("this torch has no global optimizer step hook (torch.optim.optimizer.register_optimizer_step_post_hook)")
        return
    if _dynamo_compiled():
        alt.stop("torch.compile compiled code in this process before the first step")
    register(alt.on_step)


def _on_torch(module):
    """After `import torch`: the fallback recorder if the probe did not attach, the fixes, the marks,
    the module ranges, the stop after N steps."""
    if os.environ.get("TRAINRX_ALT_FIX"):  # first: its step hook times a step before the stop's hook ends the run
        try:
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


# Removers of the module-range hooks. A program that calls torch.compile gets none from then on:
# called from the compiled wrapper's eager _call_impl, each global hook became a compiled frame of
# its own ("Torch-Compiled Region" and guards on every call: 3 compiled frames for a model that
# compiles to 1), and removing them after dynamo traced them would fail its guards and recompile.
# Removed when torch.compile is called, before anything is traced.
_REMOVE_MODULE_RANGES = []


def _wrap_compile(torch, fixes):
    """torch.compile through us: the module ranges removed first; TRAINRX_FIX's compile_off (the
    model or function comes back as it is) and compile_mode=M (that mode, whatever was asked)."""
    original = getattr(torch, "compile", None)
    if original is None or getattr(original, "_trainrx", False):
        return
    mode = fixes.get("compile_mode")
    off = "compile_off" in fixes
    if off:
        _say("torch.compile returns the model unchanged")
    elif mode:
        _say(f"torch.compile(mode={mode})")

    def compile(model=None, *args, **kwargs):
        while _REMOVE_MODULE_RANGES and not off:  # an eager model keeps its module ranges
            try:
                _REMOVE_MODULE_RANGES.pop()()
            except Exception:
                pass
        if off:
            return model if model is not None else (lambda fn: fn)
        if mode:
            kwargs["mode"] = None if mode == "default" else mode
            kwargs.pop("options", None)  # torch.compile takes a mode or options, not both
        return original(model, *args, **kwargs)

    compile.__doc__ = original.__doc__
    compile.__wrapped__ = original
    compile._trainrx = True
    torch.compile = compile


def _on_dynamo(torch, dynamo):
    """After `import torch._dynamo` (torch.compile's first use): the compile marks."""
    if os.environ.get("TRAINRX_MARKS", "0") not in ("", "0"):
        record_function = getattr(torch.autograd.profiler, "record_function", None)
        if record_function is not None:
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
if _FIXES or any(os.environ.get(k, "0") not in ("", "0") for k in ("TRAINRX_MODULES", "TRAINRX_MARKS", "TRAINRX_STOP_AFTER_STEPS", "TRAINRX_ALT_FIX")):
    sys.meta_path.insert(0, _AfterImport("torch", _on_torch))
