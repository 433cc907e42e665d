"""When the native probe did not attach: torch.profiler as the recorder (TRAINRX_FALLBACK), written
where the probe would have; and the stop after N optimizer steps (TRAINRX_STOP_AFTER_STEPS)."""
import os
import sys
from trainrx_hook_common import _step_hook_register


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
    register = _step_hook_register()
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

    register = _step_hook_register()
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
