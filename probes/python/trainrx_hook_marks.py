"""Module ranges and marks (TRAINRX_MODULES, TRAINRX_MARKS): nn.Module ranges through global forward
hooks, out-of-memory and empty_cache marks, the CUDA allocator's figures after each step, the
DataLoader's batch marks, the CPU's measured matmul peak at exit, the call sites of host syncs,
and torch.compile's compile, graph-break and recompile marks."""
import os
import re
import sys
from trainrx_hook_common import _REMOVE_MODULE_RANGES, _dynamo_compiled, _one_line, _probe_state, _step_hook_register, _tracers


_MODULE_STEPS = 3  # the module ranges' budget lasts at least until this many optimizer steps ended


class _ModuleNames:
    """A module's display name: its attribute path from the outermost module that holds it
    ("AE.encoder.0 (Linear)"), also when it is called as a root (Lightning calls self.encoder(x) from
    training_step, a method: encoder and decoder were both "Sequential"). Weak references only: never
    keeps a module alive."""

    def __init__(self):
        import weakref
        self.weakref = weakref
        self.names = weakref.WeakKeyDictionary()  # module -> display name
        # submodule -> (weak parent, attribute): every `parent.attr = submodule` (a global registration
        # hook, torch >= 2.0; installed when torch is imported, before the program builds its model).
        self.parents = weakref.WeakKeyDictionary()

    def on_child(self, parent, attr, sub):
        try:
            if sub is not None:
                self.parents[sub] = (self.weakref.ref(parent), attr)
        except Exception:
            pass

    def path_of(self, module):
        """(outermost holder's class, "attr.attr") of a module held by another; (class, "") when none."""
        path = []
        seen = set()
        while id(module) not in seen:
            seen.add(id(module))
            got = self.parents.get(module)
            parent = got[0]() if got else None
            if parent is None:
                break
            path.append(got[1])
            module = parent
        return type(module).__name__, ".".join(reversed(path))

    def name_of(self, module, stack):
        names = self.names
        try:
            return names[module]
        except (KeyError, TypeError):
            pass
        if not stack:  # a root call: name the whole tree once, as named_modules() does
            owner, where = self.path_of(module)
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


class _ModuleBudget:
    """How long module ranges are recorded: the first `model_calls` training calls of each root
    model and, where torch.optim's steps run (global hooks, torch >= 2.0), on to the end of the
    third step, so that a step that calls the model many times (LBFGS calls its closure 20 times a
    step) still has ranges in the steps the analysis counts; at most 10x the calls. A loop without
    torch.optim (a hand-written update) keeps the 20 calls."""

    def __init__(self, model_calls):
        self.model_calls = model_calls
        self.calls = {}  # id(root model) -> training calls seen
        self.begun = self.finished = 0

    def on_begin(self, optimizer, args, kwargs):
        self.begun += 1

    def on_end(self, optimizer, args, kwargs):
        self.finished += 1

    def spent_by(self, module):
        """Counts a training call of this root model; True once the budget is spent."""
        n = self.calls[id(module)] = self.calls.get(id(module), 0) + 1
        if n <= self.model_calls:
            return False
        return self.begun == 0 or self.finished >= _MODULE_STEPS or n > 10 * self.model_calls


def _install_module_ranges(torch, model_calls):
    """nn.Module ranges through global forward hooks, for the first `model_calls` training calls of
    each model (a root module with children, called with grad enabled; 0: the whole run), and on to
    the end of the third torch.optim step where that takes more calls (_ModuleBudget), then the
    hooks are removed: a range costs ~8 us of Python per module call, and the model's structure is
    the same every step. Calls with grad off (generation, evaluation) are neither counted nor
    recorded: minGPT's generate() at iteration 0 used the whole budget before training (issue 49.8).
    Modules are named by _ModuleNames."""
    import threading

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
    names = _ModuleNames()
    budget = _ModuleBudget(model_calls)
    local = threading.local()  # per thread: the open (module, range) pairs
    handles = []
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
            if not stack and model_calls and next(module.children(), None) is not None and budget.spent_by(module):
                on[0] = False
                # Removing global hooks after torch.compile traced them would fail its guards and
                # compile the model again: then the hooks stay, as a check that returns at once.
                if not _dynamo_compiled():
                    remove()
                return
            rf = record_function("nn.Module: " + names.name_of(module, stack))
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
    handles += _register_module_hooks(nn_module, names, budget if model_calls else None, pre, post)
    return True


def _register_module_hooks(nn_module, names, budget, pre, post):
    """The global hooks module ranges need, registered; their handles. `budget` None: no optimizer
    step hooks (the whole run is recorded)."""
    handles = []
    register_child = getattr(nn_module, "register_module_module_registration_hook", None)
    if register_child is not None:
        try:
            handles.append(register_child(names.on_child))
        except Exception:
            pass
    register_begin, register_end = _step_hook_register("pre"), _step_hook_register("post")
    if budget is not None and register_begin is not None and register_end is not None:
        try:
            handles.append(register_begin(budget.on_begin))
            handles.append(register_end(budget.on_end))
        except Exception:
            pass
    handles.append(nn_module.register_module_forward_pre_hook(pre))
    try:
        handles.append(nn_module.register_module_forward_hook(post, always_call=True))  # torch >= 2.1: also when forward raises
    except TypeError:
        handles.append(nn_module.register_module_forward_hook(post))
    return handles


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
    device, the size asked, and the op that failed: the last one started before the mark), a CUDA
    one the allocator's figures at that moment too."""
    previous = sys.excepthook

    def excepthook(kind, exc, tb):
        try:
            name = _oom_mark_name(exc)
            if name:
                # A CUDA one: the allocator's figures at the failure first (what was held, the
                # run's peak), as the marks after optimizer steps give them: a run that fails in
                # its first step has no other sample (found on an H200, 2026-11-28).
                figures = _cuda_memory_mark_name(torch, {}) if name.startswith("trainrx::out_of_memory cuda") else None
                for mark in filter(None, (figures, name)):
                    with record_function(mark):
                        pass
        except Exception:
            pass
        return previous(kind, exc, tb)

    sys.excepthook = excepthook


def _cuda_memory_mark_name(torch, state):
    """'trainrx::cuda_memory cuda:<i> allocated=.. reserved=.. peak=.. reserved_peak=.. retries=.. ooms=..
    capacity=..'
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
               ("peak", "allocated_bytes.all.peak"), ("reserved_peak", "reserved_bytes.all.peak"),
               ("retries", "num_alloc_retries"), ("ooms", "num_ooms")]
    return f"trainrx::cuda_memory cuda:{device} " + " ".join(
        f"{k}={int(stats.get(key, 0))}" for k, key in figures) + f" capacity={state['capacity']}"


def _install_cuda_memory_marks(torch, record_function):
    """After every optimizer step (a global post hook: no code change), the CUDA caching allocator's
    figures as a mark (memory.cc reads them as samples of the device): one memory_stats() call a step."""
    register = _step_hook_register()
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


def _install_backward_samples(torch, record_function):
    """A loop with no torch.optim step and no DataLoader (parameters updated by hand, batches sliced
    from a tensor: pytorch/examples' word_language_model) gives the probe no boundary to take its
    samples at: no CPU wait figure, no configuration, one heap sample (issue 81.4). Until an
    optimizer steps, each backward pass (torch.autograd.backward, which Tensor.backward calls) opens
    the range "trainrx::sample", at which the probe takes a boundary's samples and records nothing;
    ~5 us a backward pass, none once an optimizer has stepped. Returns a list that is non-empty once
    the process trained (a backward pass or an optimizer step): a launcher such as torchrun imports
    torch and trains nothing."""
    trained, stepped = [], []
    register = _step_hook_register()
    if register is not None:
        def post_step(opt, args, kwargs):
            if not stepped:
                stepped.append(True)
                trained.append(True)
        register(post_step)
    autograd = getattr(torch, "autograd", None)
    backward = getattr(autograd, "backward", None)
    if backward is None or getattr(backward, "_trainrx_sample", False):
        return trained
    compiling, tracing = _tracers(torch)
    main_pid = os.getpid()

    def sampled_backward(*args, **kwargs):
        if not stepped:
            if not trained:
                trained.append(True)
            try:
                if os.getpid() == main_pid and not compiling() and not tracing():
                    with record_function("trainrx::sample"):
                        pass
            except Exception:
                pass
        return backward(*args, **kwargs)

    sampled_backward.__wrapped__ = backward
    sampled_backward._trainrx_sample = True
    autograd.backward = sampled_backward
    return trained


def _install_cpu_peak(torch, record_function, trained):
    """At the end of a CPU-only recording (issue 52: MFU on a CPU needs the CPU's peak), the rate of
    a short fp32 matmul benchmark with the run's intra-op threads, as the mark
    "trainrx::cpu_peak gflops=G n=N threads=T repeats=R" after a "trainrx::cpu_peak_run" range that
    holds the benchmark's own ops (after the last step: no step counts them). Python's atexit, while
    torch is alive; the main process only; skipped where CUDA was used (the device's peak is the
    one that matters) or with TRAINRX_NO_CPU_PEAK=1. About 0.1 s. Only in a process that trained
    (`trained`: a backward pass or an optimizer step ran, hand-written SGD too, issue 81.4): a
    launcher such as torchrun imports torch and runs no op, and must still write no trace."""
    import atexit
    import time
    main_pid = os.getpid()

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
# __index__: a NumPy array or memmap indexed with a 0-d tensor (nanoGPT's get_batch with the ids of a
# torch.randint) reads it through __index__, which had no call site (issue 81.5: 10 240 reads unnamed).
_SITE_METHODS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu", "nonzero", "masked_select")
_SITE_FUNCTIONS = (("", "nonzero"), ("", "masked_select"), ("cuda", "synchronize"), ("cuda", "empty_cache"))


_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


class _CallSites:
    """The user's line of a call: the first frame outside torch (and NumPy, and this file), as a
    range name "trainrx::at <file>(<line>): <function>", cached by (code, instruction)."""

    def __init__(self, torch, torch_dir, ours):
        self.torch_dir, self.ours = torch_dir, ours
        # Each site's range name by (code, instruction): f_lineno walks the code's line table, ~20 k
        # instructions a call from a long training function (callgrind, bench/step_instructions.py:
        # AdamW reads every parameter's step with .item(), 16 calls a step of a transformer block).
        self.sites = {}
        # A call from torch's own code on a host tensor gets no range: it waits for no device, and its
        # line is not the user's to change (AdamW and Adam read each parameter's step count with
        # .item(), once per parameter a step: on a transformer block that was a third of what record
        # added to the step, callgrind, bench/step_instructions.py). A host tensor read in the user's
        # code keeps its range (a CPU run's per-step reads are named by line), and a device tensor
        # read inside torch too (GradScaler's found_inf check syncs, named by the user's scaler.step line).
        self.Tensor = torch.Tensor
        # NumPy's own frames pass a tensor's value through (np.memmap.__getitem__ indexing with a 0-d
        # tensor calls its __index__): the line to name is the user's that indexed, one frame further
        # (nanoGPT's get_batch was named "numpy/_core/memmap.py(360): __getitem__", issue 81.5).
        # NumPy's folder, once it is imported (it may be after this hook).
        self.numpy_dir = None

    def in_numpy(self, name):
        if self.numpy_dir is None:
            numpy = sys.modules.get("numpy")
            if numpy is None or not getattr(numpy, "__file__", None):
                return False
            self.numpy_dir = os.path.dirname(numpy.__file__) + os.sep
        return name.startswith(self.numpy_dir)

    def site(self, args, f):
        sites = self.sites
        while f is not None:
            code = f.f_code
            name = code.co_filename
            if self.in_numpy(name):
                f = f.f_back
                continue
            if not (name.startswith(self.torch_dir) or name == self.ours):
                key = (code, f.f_lasti)
                where = sites.get(key)
                if where is None:
                    if len(sites) >= 4096:  # code made on the fly (exec, lambdas): bounded
                        sites.clear()
                    # A comprehension runs in a frame of its own ("<listcomp>" before Python 3.12):
                    # named by the function it is written in (nanoGPT's get_batch indexes its
                    # memmap inside one), at the comprehension's line.
                    function, outer = code.co_name, f.f_back
                    while function in _COMPREHENSIONS and outer is not None:
                        function, outer = outer.f_code.co_name, outer.f_back
                    where = sites[key] = f"trainrx::at {name}({f.f_lineno}): {function}"
                return where
            # Reached only through torch's frames, the first of them the caller's.
            if args and isinstance(args[0], self.Tensor) and args[0].is_cpu:
                return None
            f = f.f_back
        return None


def _put_in_place(owner, attr, original, call):
    """`call` in place of `owner.attr` (`original`), looking like it (name, docs, __wrapped__) and
    marked as ours; an attribute that cannot be set is left as it is."""
    call.__name__ = getattr(original, "__name__", attr)
    call.__qualname__ = getattr(original, "__qualname__", attr)
    call.__doc__ = getattr(original, "__doc__", None)
    call.__wrapped__ = original
    call._trainrx_site = True
    try:
        setattr(owner, attr, call)
    except (AttributeError, TypeError):
        pass


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
    # torch.jit.is_tracing() without its two Python frames (its is_scripting() is False outside
    # TorchScript, and a wrapper taking *args is never scripted).
    tracing = getattr(getattr(torch, "_C", None), "_is_tracing", None) or tracing
    torch_dir = os.path.dirname(getattr(torch, "__file__", "") or "") + os.sep
    ours = os.path.abspath(__file__)
    getframe = sys._getframe
    # Forked children (DataLoader workers) are not recorded: there the wrapper only calls through.
    on = [True]
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: on.__setitem__(0, False))

    sites = _CallSites(torch, torch_dir, ours)
    Tensor = torch.Tensor

    def ranged(original, args, kwargs, caller):
        try:
            where = sites.site(args, caller)
        except Exception:
            where = None
        if where is None:
            return original(*args, **kwargs)
        with record_function(where):
            return original(*args, **kwargs)

    def wrap(owner, attr, method):
        original = getattr(owner, attr, None)
        if original is None or getattr(original, "_trainrx_site", False):
            return

        # site()'s first test is made here, before it: torch's own code reading a host tensor
        # (AdamW's step counts, 14 calls a step of a transformer block) calls through at once
        # (bench/call_sites.py: 577 ns a call through site(), ~425 ns now). A Tensor method's self
        # is the tensor (no isinstance test). A test that raises (an odd tensor subclass) calls
        # through: the user's call never fails because of ours.
        if method:
            def call(self, *args, **kwargs):
                try:
                    through = not on[0] or compiling() or tracing() or (
                        self.is_cpu and getframe(1).f_code.co_filename.startswith(torch_dir))
                except Exception:
                    through = True
                if through:
                    return original(self, *args, **kwargs) if args or kwargs else original(self)
                return ranged(original, (self,) + args, kwargs, getframe(1))
        else:
            def call(*args, **kwargs):
                try:
                    through = not on[0] or compiling() or tracing() or bool(
                        args and isinstance(args[0], Tensor) and args[0].is_cpu
                        and getframe(1).f_code.co_filename.startswith(torch_dir))
                except Exception:
                    through = True
                if through:
                    return original(*args, **kwargs)
                return ranged(original, args, kwargs, getframe(1))

        _put_in_place(owner, attr, original, call)

    for attr in _SITE_METHODS:
        wrap(torch.Tensor, attr, True)
    for module, attr in _SITE_FUNCTIONS:
        owner = getattr(torch, module, None) if module else torch
        if owner is not None:
            wrap(owner, attr, False)


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
    trained = _install_backward_samples(torch, record_function)
    _install_cpu_peak(torch, record_function, trained)  # after the loader / call-site hooks: its own ops are not user calls
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
