"""The fixes TRAINRX_FIX applies from outside an unmodified script (sitecustomize.py lists them):
DataLoader workers and pinning, anomaly mode off, zero_grad(set_to_none), eval under no_grad,
cuDNN and TF32 switches, foreach / fused optimizers, channels_last, torch.compile off or its mode."""
import importlib
import sys
import importlib.util
from trainrx_hook_common import _NoopContext, _REMOVE_MODULE_RANGES, _say


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
