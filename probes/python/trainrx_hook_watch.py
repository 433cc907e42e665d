"""Watch mode (`trainrx watch`, docs/watch.md): a long job observed cheaply, deep captures on a trigger.

Light mode, at every optimizer step (a global step post hook; no per-op events, no CUPTI): the step's
time, the data loader's wait inside it, the process's resident memory and, once CUDA is up, the
caching allocator's; written as Prometheus text to DIR/metrics/rank<R>.prom about once a second (the
node exporter's textfile collector reads such files; `--metrics-port` serves them over HTTP too).

Deep captures: torch.profiler over the next N steps (CPU ops with shapes, CUDA kernels when there is
a device), written to DIR/capture-<K>/ with why it was taken; `trainrx watch` analyzes each at once.
Triggers:
  - on demand: DIR/capture-request.json (`trainrx capture DIR`), taken by every rank from the step it
    names (ranks in lockstep take the same steps);
  - a step-time regression: the median of the last steps (20, and an eighth of a second at least)
    over the median of 200 steps before them (spread over 10 s or more), more than 20 % slower and a
    rank test (Mann-Whitney) at p < 0.001, at two looks in a row;
    then no second one for 200 steps (the new pace becomes the reference); the rank that saw it asks
    every rank (the request); ranks that ask at once end with the last request written;
  - memory rising over steps (once a second: resident memory, or CUDA's allocated bytes once CUDA
    is up, higher than the second before in 80 % of the last 20 seconds, and up 64 MB and 10 %):
    a capture that records allocations (profile_memory), whose analysis names what grows;
  - out of memory: an uncaught out-of-memory error, or, once CUDA is up, the caching allocator's
    observer (where an allocation fails, before the error is raised, caught or not): the moment
    written at once, the process may die next (_Watch.on_oom);
  - none while another torch.profiler session is running (ours would disturb it): said in the
    capture's reason.
A hang: no step for K times the median step (at least a floor of seconds): faulthandler writes every
thread's Python stack to DIR/hang-rank<R>.txt without stopping the job (`trainrx watch` reads them
into DIR/hang-report.txt: where each rank waits, which ranks are not in the collective).

Never fatal: a part that fails is said once on stderr and the job goes on unobserved by it.
"""
import atexit
import bisect
import collections
import faulthandler
import json
import os
import sys
import threading
import time
import traceback

from trainrx_hook_common import _replace_file

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _median(values):
    s = sorted(values)
    n = len(s)
    return 0.0 if n == 0 else (s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2]))


def _mann_whitney_p(a, b):
    """One-sided p that `a` is stochastically larger than `b` (normal approximation, ties averaged)."""
    import math
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(pooled)
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2.0 + 1.0
        i = j + 1
    n1, n2 = len(a), len(b)
    r1 = sum(r for r, (_, side) in zip(ranks, pooled) if side == 0)
    u = r1 - n1 * (n1 + 1) / 2.0
    mean = n1 * n2 / 2.0
    sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
    if sd == 0:
        return 1.0
    z = (u - mean - 0.5) / sd
    return 0.5 * math.erfc(z / math.sqrt(2.0))


class _FileWriter:
    """A file's latest text written off the training thread: the step hands the text over and goes
    on; a thread of ours waits on the disk (a slow or network filesystem held the step for up to
    0.8 ms a second, the metrics file's open, write and rename). The last text given is the one the
    file ends with; write_now (at the job's end) writes on the caller's thread."""

    def __init__(self, path):
        self.path = path
        self.cond = threading.Condition()
        self.write_lock = threading.Lock()
        self.pending = None  # (sequence, text) not yet taken by the thread
        self.given = 0       # texts given so far
        self.written = 0     # the sequence of the text in the file
        self.thread = None
        self.said = False

    def put(self, text):
        with self.cond:
            self.given += 1
            self.pending = (self.given, text)
            self.cond.notify()
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="trainrx-watch-writer", daemon=True)
            self.thread.start()

    def write_now(self, text):
        with self.cond:
            self.given += 1
            seq, self.pending = self.given, None
        self._write(seq, text)

    def flush(self, timeout=5.0):
        """Waits until the last text given is in the file (tests)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.cond:
                if self.pending is None and self.written == self.given:
                    return True
            time.sleep(0.005)
        return False

    def _run(self):
        while True:
            with self.cond:
                while self.pending is None:
                    self.cond.wait()
                seq, text = self.pending
                self.pending = None
            self._write(seq, text)

    def _write(self, seq, text):
        with self.write_lock:
            if seq <= self.written:  # a later text is in the file already
                return
            try:
                _replace_file(self.path, text)
            except OSError as e:  # skipped this time; the job goes on, the endpoint serves the text
                if not self.said:
                    self.said = True
                    sys.stderr.write(f"trainrx watch: {self.path}: cannot write the metrics: {e}\n")
            self.written = seq


class _Watch:
    RECENT = 20
    REFERENCE = 200
    COOLDOWN = 200
    ALPHA = 1e-3

    def __init__(self, torch, directory):
        self.torch = torch
        self.dir = directory
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.capture_steps = max(1, int(os.environ.get("TRAINRX_WATCH_CAPTURE_STEPS", "20")))
        self.hang_factor = float(os.environ.get("TRAINRX_WATCH_HANG_FACTOR", "20"))
        self.hang_floor = float(os.environ.get("TRAINRX_WATCH_HANG_MIN_SECONDS", "60"))
        self.max_captures = int(os.environ.get("TRAINRX_WATCH_MAX_CAPTURES", "5"))
        # capture-<K> from this K on (an earlier job's captures in the same folder keep theirs)
        self.first_capture = max(1, int(os.environ.get("TRAINRX_WATCH_FIRST_CAPTURE", "1") or 1))
        self.regression = os.environ.get("TRAINRX_WATCH_REGRESSION", "1") != "0"
        self.min_slower = float(os.environ.get("TRAINRX_WATCH_MIN_SLOWER_PCT", "20")) / 100.0
        self.steps = 0
        self.last = None
        self.dts = []  # the steps' times not yet counted (on_step)
        self.eager = False  # count each step at once (on_step)
        self.early_arms = [5, 20, 50]  # steps after which the hang timer is set again (the median changes most)
        self.next_due = 0.0
        self.first = None
        self.sum = 0.0
        self.buckets = [0] * len(_BUCKETS)
        self.data_wait = 0.0
        self.data_in_step = 0.0
        self.early = []
        self.recent = collections.deque()
        self.recent_sum = 0.0
        self.reference = []
        self.cooldown_until = 0
        self.suspect = 0
        self.typical = 0.0
        self.since_kept = 0
        self.looked = 0
        self.deferred = None
        self.captures = {}  # reason -> count
        self.capture = None  # the profiler running, and its folder and end step
        self.pending = None  # (reason, detail, start step)
        self.served = set()
        self.request_mtime = 0.0
        self.next_poll = 0.0
        self.next_write = 0.0
        self.next_arm = 0.0
        # bench/step_instructions.py: under callgrind a step runs ~50x slower and the once-a-second
        # work would fall in every few steps; it sets this to count the two parts apart.
        self.period_steps = int(os.environ.get("TRAINRX_WATCH_PERIOD_STEPS", "0") or 0)
        if self.period_steps:  # the knob decides when the hang timer is set, the first steps' too
            self.early_arms = []
        self.hang_file = None
        self.text = ""
        self.world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.rss = 0
        self.cuda = None  # (allocated, reserved) at the last metrics write, once CUDA is up
        self.memory = []  # once a second: resident memory, or CUDA's allocated bytes
        self.memory_window = max(3, int(os.environ.get("TRAINRX_WATCH_MEMORY_SECONDS", "20")))
        self.memory_quiet_until = 0
        self.oom = None  # (folder, info) of the out-of-memory capture, once taken
        self.cuda_observed = False  # the allocator's out-of-memory observer attached
        os.makedirs(os.path.join(directory, "metrics"), exist_ok=True)
        self.metrics_path = os.path.join(directory, "metrics", f"rank{self.rank}.prom")
        self.writer = _FileWriter(self.metrics_path)

    # The step boundary, from the optimizer's post hook: the step's time kept, and every BATCH steps
    # (each step while a capture is asked, runs or was just taken, and when the once-a-second work
    # is due) everything else (_steps). Run once a step between the
    # framework's own work, this code runs cold, about ten times slower than in a loop: the fewer
    # lines a step, the less it costs (bench/watch_interleaved.py).
    BATCH = 8

    def on_step(self):
        now = time.perf_counter()
        last, self.last = self.last, now
        if last is None:
            self.first = now
            self._arm_hang(now)
            return
        dts = self.dts
        dts.append(now - last)
        if self.eager or len(dts) >= self.BATCH or now >= self.next_due:
            self._steps(now)

    def _steps(self, now):
        """The steps kept since the last call counted; then the capture's business and the
        once-a-second work."""
        self._count()
        if self.oom is not None and self.oom[1]["to_step"] < self.steps:
            self._oom_caught()
        if self.capture is not None:
            self._step_capture()
        elif self.pending is not None and self.steps >= self.pending[2]:
            self._start_capture()
        elif self.deferred is not None and self.pending is None:
            self._take(self.deferred)
        if self.period_steps:  # a benchmark's knob: the once-a-second work every N steps, the clock aside
            self.next_poll = self.next_arm = self.next_write = now if self.steps % self.period_steps == 0 else float("inf")
        if now >= self.next_poll:
            self.next_poll = now + 1.0
            self._poll_request()
        if now >= self.next_arm or (self.early_arms and self.steps >= self.early_arms[0]):
            while self.early_arms and self.steps >= self.early_arms[0]:  # early: the first median steps set the timeout
                self.early_arms.pop(0)
            self._arm_hang(now)
        if now >= self.next_write:
            self.next_write = now + 1.0
            self.write_metrics()
            self._judge_memory()
        self.next_due = min(self.next_poll, self.next_arm, self.next_write)
        self.eager = (self.capture is not None or self.pending is not None or self.deferred is not None
                      or 0 < self.period_steps < self.BATCH
                      or (self.oom is not None and not self.oom[1].get("caught")))

    def _count(self):
        """The steps kept (on_step) counted: into the histogram and the windows."""
        dts, self.dts = self.dts, []
        self.data_wait += self.data_in_step
        self.data_in_step = 0.0
        for dt in dts:
            self.steps += 1
            self.sum += dt
            i = bisect.bisect_left(_BUCKETS, dt)  # the first edge >= dt (a bucket's upper bound is inclusive)
            if i < len(_BUCKETS):
                self.buckets[i] += 1
            if self.steps <= 10:
                self.early.append(dt)
            elif self.capture is None:  # past the first steps (autotuning, workers starting); not a captured step
                self._judge(dt)

    def _judge(self, dt):
        # Windows in time as well as in steps: the recent one the last 20 steps or more that last an
        # eighth of a second (500 at most), the reference 200 steps kept one in `stride`, over 10 s or
        # more (sub-millisecond steps on a busy 2-core VM came in bursts 1.3x slower for 20-step
        # windows: no regression). The recent window is in the recent steps' own time: after a 10x
        # slowdown it holds 20 steps, not the 100 an eighth of a second held before, and sees it at once.
        if self.typical <= 0:
            self.typical = _median(self.early) or dt
        self.recent.append(dt)
        self.recent_sum += dt
        stride = max(1, int(0.05 / self.typical))
        while len(self.recent) > self.RECENT and (len(self.recent) > 500 or self.recent_sum - self.recent[0] >= 0.125):
            old = self.recent.popleft()
            self.recent_sum -= old
            self.since_kept += 1
            if self.since_kept >= stride:
                self.since_kept = 0
                self.reference.append(old)
                if len(self.reference) > self.REFERENCE:
                    del self.reference[0]
        self.looked += 1
        if self.looked < max(5, len(self.recent) // 8):
            return
        self.looked = 0
        self.recent_sum = sum(self.recent)  # no drift from the running sum
        full = len(self.recent) >= self.RECENT and (self.recent_sum >= 0.125 or len(self.recent) >= 500)
        if (not self.regression or self.steps < self.cooldown_until or not full
                or len(self.reference) < 50 or self.capture is not None or self.pending is not None):
            return
        ref, now = _median(self.reference), _median(self.recent)
        self.typical = ref
        if ref <= 0 or now < ref * (1 + self.min_slower) or _mann_whitney_p(self.recent, self.reference) >= self.ALPHA:
            self.suspect = 0
            return
        # A slowdown that lasts: the same verdict at two looks in a row (a burst passes one).
        self.suspect += 1
        if self.suspect < 2:
            return
        self.suspect = 0
        p = _mann_whitney_p(self.recent, self.reference)
        detail = (f"the median of the last {len(self.recent)} steps, {now * 1e3:.2f} ms, is {now / ref:.2f}x the "
                  f"median of {len(self.reference)} steps before them, {ref * 1e3:.2f} ms (Mann-Whitney p = {p:.1e}); "
                  f"seen at step {self.steps} on rank {self.rank}")
        self.cooldown_until = self.steps + self.COOLDOWN
        self.reference = list(self.recent)  # the new pace is the reference from now on
        self._request("regression", detail)

    def _judge_memory(self):
        """A rise over steps (the leak rule, once a second): the process's resident memory (or CUDA's
        allocated bytes, once CUDA is up) higher than the sample before in 80 % or more of the last
        window's seconds and up by at least 64 MB and 10 % over it: a capture that records
        allocations (torch.profiler's profile_memory), whose analysis names what grows."""
        cuda = self.cuda  # as write_metrics read it just before
        value = cuda[0] if cuda is not None else self.rss
        self.memory.append(value)
        if len(self.memory) > self.memory_window:
            del self.memory[0]
        if (len(self.memory) < self.memory_window or self.steps < self.memory_quiet_until or self.capture is not None
                or self.pending is not None):
            return
        m = self.memory
        rises = sum(1 for a, b in zip(m, m[1:]) if b > a)
        grew = m[-1] - m[0]
        if rises < 0.8 * (len(m) - 1) or grew < max(64 << 20, 0.1 * m[0]):
            return
        what = "CUDA allocated" if cuda is not None else "resident memory"
        detail = (f"{what} rose in {rises} of the last {len(m) - 1} seconds, {m[0] / 2**20:.0f} -> {m[-1] / 2**20:.0f} MB "
                  f"(+{grew / 2**20:.0f} MB, {grew / 2**20 / (len(m) - 1):.1f} MB a second); seen at step {self.steps} "
                  f"on rank {self.rank}")
        self.memory_quiet_until = self.steps + 10 * self.COOLDOWN
        self.memory = []
        self._request("memory", detail)

    def _request(self, reason, detail):
        """Asks every rank (the shared folder) for a capture from a few steps on."""
        seq = f"{self.rank}-{self.steps}-{time.time():.3f}"
        # Alone: from 3 steps on. With other ranks: from a step they all reach after seeing the request
        # (each looks about once a second): two seconds of steps on, so that every rank records the same.
        ahead = 3 if self.world <= 1 else max(5, min(2000, int(2.0 / max(self.typical, 1e-6))))
        req = {"seq": seq, "reason": reason, "detail": detail, "at_step": self.steps + ahead, "steps": self.capture_steps}
        path = os.path.join(self.dir, "capture-request.json")
        try:
            _replace_file(path, json.dumps(req), f".tmp{self.rank}")
        except OSError:
            pass
        self._take(req)

    def _poll_request(self):
        path = os.path.join(self.dir, "capture-request.json")
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            return
        if mtime == self.request_mtime:
            return
        self.request_mtime = mtime
        try:
            with open(path) as f:
                self._take(json.load(f), shared=True)
        except (OSError, ValueError):
            pass

    def _take(self, req, shared=False):
        seq = str(req.get("seq", ""))
        if not seq or seq in self.served:
            return
        # With other ranks, a capture not started yet yields to the request in the shared folder:
        # ranks that ask at once (each seeing the same slowdown of a busy machine) would otherwise
        # each take their own, from different steps, into one capture folder. The folder holds the
        # last request written, which every rank reads: they all end with that one.
        yields = shared and self.world > 1 and self.capture is None and self.pending is not None
        if not yields and (self.capture is not None or self.pending is not None):  # busy: taken once this capture ends
            self.deferred = req
            return
        self.deferred = None
        self.served.add(seq)
        if sum(self.captures.values()) >= self.max_captures and req.get("reason") != "on demand":
            return
        steps = int(req.get("steps") or self.capture_steps)
        self.pending = (str(req.get("reason", "on demand")), str(req.get("detail", "")),
                        max(self.steps + 1, int(req.get("at_step") or 0)), steps)

    def on_oom(self, mark, figures=None, where="", snapshot=None):
        """An out-of-memory error: a capture of that moment, written at once (the process may die
        next) into the next capture folder: a trace holding the marks `record` leaves (the allocator's
        figures, then the device and the bytes asked: analyzers/families/memory.cc reads them), where
        the program was, and CUDA's allocator snapshot (`snapshot()`: its segments and blocks, for
        pytorch.org/memory_viz). Once a process; a running capture gets the marks too (written at
        the job's end)."""
        if self.oom is not None:
            return
        self._count()  # the steps kept: the failing step's number
        k = sum(self.captures.values()) + self.first_capture
        folder = os.path.join(self.dir, f"capture-{k}")
        self.captures["out of memory"] = self.captures.get("out of memory", 0) + 1
        device, asked = (mark.split()[1:3] + ["?", "0"])[:2]
        detail = f"{device} could not allocate {_bytes_text(int(asked))}" + (f" at {where}" if where else "")
        detail += f"; seen at step {self.steps} on rank {self.rank}"
        info = {"reason": "out of memory", "detail": detail, "rank": self.rank, "from_step": self.steps,
                "to_step": self.steps, "steps": 0}
        self.oom = (folder, info)
        self.eager = True
        marks = [name for name in (figures, mark) if name]
        if self.capture is not None:
            try:
                for name in marks:
                    with self.torch.profiler.record_function(name):
                        pass
            except Exception:
                pass
        try:
            os.makedirs(folder, exist_ok=True)
            now = time.time_ns() // 1000
            events = [{"ph": "X", "cat": "user_annotation", "name": name, "pid": os.getpid(),
                       "tid": threading.get_native_id(), "ts": now + i, "dur": 1}
                      for i, name in enumerate(marks)]
            with open(os.path.join(folder, f"trace-rank{self.rank}.json"), "w") as f:
                json.dump({"schemaVersion": 1, "traceEvents": events,
                           "distributedInfo": {"rank": self.rank, "world_size": self.world}}, f)
            if snapshot is not None:
                import pickle
                with open(os.path.join(folder, f"memory-snapshot-rank{self.rank}.pickle"), "wb") as f:
                    pickle.dump(snapshot(), f)
                info["snapshot"] = f"memory-snapshot-rank{self.rank}.pickle"
        except Exception as e:
            info["skipped"] = f"the capture could not be written: {e}"
        self._finish_info(folder, info)

    def _oom_caught(self):
        """A step after an out-of-memory capture: the program caught the error (a convolution that
        retries with less workspace, a batch-size search), said in the capture's reason."""
        folder, info = self.oom
        if info.get("caught") or "skipped" in info:
            return
        info["caught"] = True
        info["detail"] += f"; the job went on (step {self.steps}): the program caught the error"
        try:
            self._write_info(folder, info)
        except OSError:
            pass

    def _profiling_already(self):
        try:
            return bool(self.torch.autograd.profiler._is_profiler_enabled)
        except Exception:
            try:
                return bool(self.torch._C._autograd._profiler_enabled())
            except Exception:
                return False

    def _start_capture(self):
        reason, detail, start, steps = self.pending
        self.pending = None
        k = sum(self.captures.values()) + self.first_capture
        folder = os.path.join(self.dir, f"capture-{k}")
        os.makedirs(folder, exist_ok=True)
        info = {"reason": reason, "detail": detail, "rank": self.rank, "from_step": self.steps, "steps": steps}
        self.captures[reason] = self.captures.get(reason, 0) + 1
        if self._profiling_already():
            info["skipped"] = "another torch.profiler session is running in this process: not disturbed"
            self._finish_info(folder, info)
            return
        try:
            prof = self.torch.profiler
            acts = [prof.ProfilerActivity.CPU]
            if self.torch.cuda.is_available() and self.torch.cuda.is_initialized():
                acts.append(prof.ProfilerActivity.CUDA)
            p = prof.profile(activities=acts, record_shapes=True, profile_memory=reason == "memory")
            p.__enter__()
        except Exception as e:
            info["skipped"] = f"torch.profiler could not start: {e}"
            self._finish_info(folder, info)
            return
        self.capture = (p, folder, self.steps + steps, info)
        # Why and from which step, before the steps: a job killed inside the capture leaves this
        # (no .done file), and the watcher says the capture was cut short.
        try:
            self._write_info(folder, dict(info, unfinished=True))
        except OSError:
            pass

    def _step_capture(self):
        p, folder, end, info = self.capture
        try:
            p.step()
        except Exception:
            pass
        if self.steps < end:
            return
        self._end_capture()
        self.last = time.perf_counter()  # writing the capture is not the next step's time
        self._arm_hang(self.last)  # nor a hang

    def _end_capture(self, note=None):
        """Stops the running capture and writes its trace and why (`note`: said beside the steps)."""
        p, folder, _, info = self.capture
        self.capture = None
        trace = os.path.join(folder, f"trace-rank{self.rank}.json")
        try:
            p.__exit__(None, None, None)
            p.export_chrome_trace(trace)
            # Kineto logs a failed write (a full disk) and returns: the file is missing or empty.
            if not os.path.isfile(trace) or os.path.getsize(trace) == 0:
                raise OSError(f"torch.profiler's export left no trace in {folder} (a full disk, or the folder not writable)")
            info["to_step"] = self.steps
            if note:
                info["note"] = note
        except Exception as e:  # a full disk, say: no half-written trace left to be read as whole
            info["skipped"] = f"the capture could not be written: {e}"
            for partial in (trace, trace + ".tmp"):  # Kineto writes PATH.tmp, then renames it
                try:
                    os.remove(partial)
                except OSError:
                    pass
        self._finish_info(folder, info)

    def _write_info(self, folder, info):
        _replace_file(os.path.join(folder, f"reason-rank{self.rank}.json"), json.dumps(info))

    def _finish_info(self, folder, info):
        try:
            self._write_info(folder, info)
            open(os.path.join(folder, f".done-rank{self.rank}"), "w").close()
        except OSError as e:  # the watcher, at the job's end, says the capture was not finished
            if not getattr(self, "said_write", False):
                self.said_write = True
                sys.stderr.write(f"trainrx watch: {folder}: cannot write why the capture ended: {e}\n")

    def _arm_hang(self, now):
        """No step for K x the median step (at least the floor): every thread's Python stack to the
        hang file, the job left running. Armed again every eighth of that time (a second at least):
        each arm joins faulthandler's previous timer thread holding the GIL, so it is kept rare;
        its timeout is the wait plus that period, so it fires between one and the other after the
        last step."""
        ref = self.reference if len(self.reference) >= 20 else self.reference + list(self.recent) + self.early
        wait = max(self.hang_floor, self.hang_factor * _median(ref)) if ref else max(self.hang_floor, 600.0)
        period = max(1.0, wait / 8)
        self.next_arm = now + period
        timeout = wait + period
        try:
            if self.hang_file is None:
                self.hang_file = open(os.path.join(self.dir, f"hang-rank{self.rank}.txt"), "w")
            self.hang_file.seek(0)
            self.hang_file.truncate()
            self.hang_file.write(f"trainrx watch: rank {self.rank}, no optimizer step for {timeout:.1f} s (the median "
                                 f"step {_median(ref) * 1e3:.2f} ms x {self.hang_factor:g}, at least "
                                 f"{self.hang_floor:g} s, plus the {period:.1f} s between arms; armed at step "
                                 f"{self.steps}); every thread's Python stack:\n")
            self.hang_file.flush()
            faulthandler.dump_traceback_later(timeout, repeat=False, file=self.hang_file, exit=False)
        except Exception:
            pass

    def write_metrics(self, final=False):
        r = f'rank="{self.rank}"'
        lines = ["# HELP trainrx_step_seconds Time from one optimizer step to the next.",
                 "# TYPE trainrx_step_seconds histogram"]
        total = 0
        for edge, n in zip(_BUCKETS, self.buckets):
            total += n
            lines.append(f'trainrx_step_seconds_bucket{{{r},le="{edge:g}"}} {total}')
        lines.append(f'trainrx_step_seconds_bucket{{{r},le="+Inf"}} {self.steps}')
        lines.append(f"trainrx_step_seconds_sum{{{r}}} {self.sum:.6f}")
        lines.append(f"trainrx_step_seconds_count{{{r}}} {self.steps}")
        recent = _median(self.recent) if self.recent else 0.0
        gauges = [
            ("trainrx_steps_per_second", "Steps a second over the last 20 steps (the inverse of their median).",
             1.0 / recent if recent > 0 else 0.0),
            ("trainrx_data_wait_seconds_total", "Time the loop waited in the DataLoader's __next__.", self.data_wait),
            ("trainrx_data_wait_share", "Data wait over step time, since the start.",
             self.data_wait / self.sum if self.sum > 0 else 0.0),
            ("trainrx_host_rss_bytes", "The process's resident memory at the last step.", self._read_rss()),
            ("trainrx_last_step_timestamp_seconds", "Wall-clock time of the last step.", time.time()),
        ]
        run, wait = self._sched()
        if run is not None:
            gauges.append(("trainrx_cpu_seconds_total", "The main (training) thread's time on a CPU (schedstat).", run))
            gauges.append(("trainrx_cpu_wait_seconds_total",
                           "The main thread's time ready to run but waiting for a CPU (schedstat run delay: a busy machine).",
                           wait))
        cuda = self.cuda = self._cuda_memory()
        if cuda is not None:
            gauges.append(("trainrx_cuda_allocated_bytes", "The CUDA caching allocator's allocated bytes.", cuda[0]))
            gauges.append(("trainrx_cuda_reserved_bytes", "The CUDA caching allocator's reserved bytes.", cuda[1]))
        for name, help_text, value in gauges:
            kind = "counter" if name.endswith("_total") else "gauge"
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{r}}} {value:.6g}"]
        lines += ["# HELP trainrx_captures_total Deep captures taken, by trigger.", "# TYPE trainrx_captures_total counter"]
        for reason in ("on demand", "regression", "memory"):
            lines.append(f'trainrx_captures_total{{{r},trigger="{reason.replace(" ", "_")}"}} {self.captures.get(reason, 0)}')
        text = "\n".join(lines) + "\n"
        self.text = text
        if final:
            self.writer.write_now(text)
        else:
            self.writer.put(text)

    @staticmethod
    def _sched():
        """The main thread's CPU time and run-queue wait, in seconds (Linux schedstat; None elsewhere)."""
        try:
            with open("/proc/self/schedstat") as f:
                run, wait = f.read().split()[:2]
            return int(run) / 1e9, int(wait) / 1e9
        except Exception:
            return None, None

    def _read_rss(self):
        try:
            with open("/proc/self/statm") as f:
                self.rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except Exception:
            self.rss = 0
        return self.rss

    def _cuda_memory(self):
        try:
            cuda = self.torch.cuda
            if not cuda.is_initialized():
                return None
            if not self.cuda_observed:  # attached once CUDA is up: before, the allocator has no device to attach to
                self.cuda_observed = True
                _observe_cuda_oom(self.torch, self)
            return cuda.memory_allocated(), cuda.memory_reserved()
        except Exception:
            return None

    def at_exit(self):
        try:
            faulthandler.cancel_dump_traceback_later()
        except Exception:
            pass
        self._count()  # the steps kept
        if self.capture is not None:  # a job that ends inside a capture keeps what it recorded
            self._end_capture("the job ended before the capture's last step")
        self.write_metrics(final=True)
        if self.hang_file is not None:  # ended: no hang to report
            try:
                self.hang_file.seek(0)
                self.hang_file.truncate()
                self.hang_file.close()
            except Exception:
                pass


def _serve(watch, port):
    """The rank's metrics over HTTP on port + rank (Prometheus scrapes /metrics)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            text = watch.text
            if watch.rank == 0:  # the watcher's figures of the last analyzed capture (its first findings)
                try:
                    with open(os.path.join(watch.dir, "metrics", "findings.prom")) as f:
                        text += f.read()
                except OSError:
                    pass
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    host = os.environ.get("TRAINRX_WATCH_METRICS_HOST", "127.0.0.1")
    server = ThreadingHTTPServer((host, port + watch.rank), Handler)
    threading.Thread(target=server.serve_forever, name="trainrx-metrics", daemon=True).start()


class _Hooks:
    """What light mode adds to the job's own calls: the optimizer's global step post hook and the
    DataLoader iterator's timed `__next__`. A benchmark takes both out and puts them back between
    blocks of steps (suspend / resume: bench/watch_interleaved.py measures light mode's cost inside
    one process, its blocks interleaved); a job under `trainrx watch` never does."""

    def __init__(self, torch, watch, register):
        self.watch = watch
        self.register = register
        self.handle = None
        from trainrx_hook_common import _tracers
        compiling, _ = _tracers(torch)
        seen = {}

        def post_step(opt, args, kwargs):
            if compiling():
                return
            # The first optimizer seen is the step's (a GAN's second optimizer steps inside the same step).
            if not seen:
                seen["id"] = id(opt)
            if id(opt) != seen["id"]:
                return
            try:
                watch.on_step()
            except Exception as e:
                if not seen.get("said"):
                    seen["said"] = True
                    sys.stderr.write(f"trainrx watch: {e}\n")

        self.post_step = post_step
        # The loader's wait: the time in a DataLoader iterator's __next__ (from the loop, between steps).
        data = getattr(getattr(torch, "utils", None), "data", None)
        self.base = getattr(getattr(data, "dataloader", None), "_BaseDataLoaderIter", None)
        self.original = getattr(self.base, "__next__", None)
        self.timed = None
        if self.original is not None and not getattr(self.original, "_trainrx_watch", False):
            original = self.original

            def __next__(it):
                t = time.perf_counter()
                try:
                    return original(it)
                finally:
                    watch.data_in_step += time.perf_counter() - t
            __next__._trainrx_watch = True
            self.timed = __next__

    def resume(self):
        if self.handle is None:
            self.handle = self.register(self.post_step)
            # the step in progress started at the last boundary, which the suspended hook did not see
            if self.watch.last is not None:
                self.watch.last = time.perf_counter()
        if self.timed is not None:
            self.base.__next__ = self.timed

    def suspend(self):
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
        if self.timed is not None:
            self.base.__next__ = self.original


def _bytes_text(n):
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _user_frame(frames):
    """'file:line in function' of the innermost frame outside torch and this hook, else the innermost."""
    frames = [f for f in frames if not f.filename.endswith("trainrx_hook_watch.py")]
    for f in reversed(frames):
        if "/torch/" not in f.filename and "site-packages" not in f.filename:
            return f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}"
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""


def _install_oom(torch, watch):
    """An uncaught out-of-memory error (sys.excepthook, the program's own called after ours): the
    capture of that moment (_Watch.on_oom). CUDA's allocator observer is attached once CUDA is up."""
    from trainrx_hook_marks import _cuda_memory_mark_name, _oom_mark_name
    previous = sys.excepthook

    def excepthook(kind, exc, tb):
        try:
            name = _oom_mark_name(exc)
            if name:
                figures = _cuda_memory_mark_name(torch, {}) if " cuda:" in name else None
                watch.on_oom(name, figures, _user_frame(traceback.extract_tb(tb)))
        except Exception:
            pass
        return previous(kind, exc, tb)

    sys.excepthook = excepthook


def _observe_cuda_oom(torch, watch):
    """The CUDA caching allocator's out-of-memory observer (torch._C._cuda_attach_out_of_memory_observer,
    called where an allocation fails, before the error is raised, whether the program catches it
    or not; the allocator's lock is released by then, so its snapshot can be taken)."""
    attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        return
    from trainrx_hook_marks import _cuda_memory_mark_name

    def observer(device, alloc, device_allocated, device_free):
        try:
            watch.on_oom(f"trainrx::out_of_memory cuda:{device} {alloc}", _cuda_memory_mark_name(torch, {}),
                         _user_frame(traceback.extract_stack()), snapshot=torch.cuda.memory._snapshot)
        except Exception:
            pass

    attach(observer)


_HOOKS = None  # the job's, once installed


def suspend():
    """Light mode's hooks out of the job's calls (a benchmark's knob; nothing when not watched)."""
    if _HOOKS is not None:
        _HOOKS.suspend()


def resume():
    """Light mode's hooks back in (after suspend)."""
    if _HOOKS is not None:
        _HOOKS.resume()


def _install_watch(torch):
    global _HOOKS
    from trainrx_hook_common import _step_hook_register
    directory = os.environ["TRAINRX_WATCH"]
    register = _step_hook_register()
    if register is None:
        sys.stderr.write("trainrx watch: this torch has no global optimizer step hook (torch >= 2.0): not watched\n")
        return
    watch = _Watch(torch, directory)
    _HOOKS = _Hooks(torch, watch, register)
    _HOOKS.resume()
    _install_oom(torch, watch)
    port = os.environ.get("TRAINRX_WATCH_METRICS_PORT", "")
    if port.isdigit():
        try:
            _serve(watch, int(port))
        except Exception as e:
            sys.stderr.write(f"trainrx watch: no metrics endpoint on port {int(port) + watch.rank}: {e}\n")
    atexit.register(watch.at_exit)
    watch.write_metrics()
