"""The in-process A/B (TRAINRX_ALT_FIX): the fixes that can switch between steps switched at optimizer
step boundaries, A B B A / B A A B, each step timed with the process's CPU load."""
import os
import sys
from trainrx_hook_common import _NoopContext, _dynamo_compiled, _replace_file, _step_hook_register
from trainrx_hook_fixes import _optimizer_groups


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


def _alt_slowdown(torch, arm, us):
    """slowdown_us=N (`gate self-test --cmd`): each B step busy-waits N µs before its optimizer steps,
    the slowdown the self-test plants in a user's script to measure how often the gate catches it."""
    import time
    on = [False]

    def pre(opt, args, kwargs):
        if on[0]:
            end = time.perf_counter() + us / 1e6
            while time.perf_counter() < end:
                pass

    from torch.optim.optimizer import register_optimizer_step_pre_hook
    register_optimizer_step_pre_hook(pre)
    return f"a planted slowdown of {us} us", lambda: on[0], lambda v: on.__setitem__(0, v), lambda s: True


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
            key, _, value = token.partition("=")
            make = _ALT_SWITCHES.get(token)
            if key == "slowdown_us" and value.isdigit():
                make = lambda torch, arm, us=int(value): _alt_slowdown(torch, arm, us)
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
            _replace_file(self.result, json.dumps(doc))
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
    register = _step_hook_register()
    if register is None:
        alt.stop("this torch has no global optimizer step hook (torch.optim.optimizer.register_optimizer_step_post_hook)")
        return
    if _dynamo_compiled():
        alt.stop("torch.compile compiled code in this process before the first step")
    register(alt.on_step)
    _leave_without_optimizer_steps(torch, alt)


def _leave_without_optimizer_steps(torch, alt):
    """A script that updates its parameters by hand (no torch.optim step) never reaches a boundary: the
    hook would never switch, and the trial would run the whole script (hours of epochs). When as many
    backward passes as the trial's steps (warm-up and timed) have run with no optimizer step, switching
    stops ("stopped" says why: the row is measured across processes instead) and the program leaves as
    TRAINRX_ALT_STEPS does. Gradient accumulation steps its optimizer after a few backward passes, long
    before that."""
    limit = alt.warmup + (alt.steps or 64)
    backward = torch.autograd.backward
    seen = [0]

    def counted_backward(*args, **kwargs):
        if alt.count == 0:
            seen[0] += 1
            if seen[0] > limit:
                alt.stop(f"no torch.optim optimizer stepped in {limit} backward passes (parameters updated by hand): "
                         "the hook switches fixes at optimizer steps")
                sys.stderr.write(f"trainrx: stopping after {limit} backward passes without an optimizer step\n")
                raise SystemExit(0)
        return backward(*args, **kwargs)

    torch.autograd.backward = counted_backward
