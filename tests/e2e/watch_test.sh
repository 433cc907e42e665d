#!/usr/bin/env bash
# `trainrx watch` (issue 80) on tests/python/watch_job.py, a CPU job of sub-millisecond steps:
#   * light mode: the metrics file is Prometheus text (step histogram, data wait, memory) and counts
#     the job's steps; the job's own output and exit code are unchanged;
#   * `trainrx capture` of a PID that is no process, or of a process no job is watched under: errors;
#   * a 3 000-step job: on demand (`trainrx capture WATCHER_PID`) on a clean stretch, a capture analyzed
#     into capture-K/ whose steps wait little for data (the job loads inline, num_workers=0:
#     input.workers is its finding); then a loader made slower by a file after step 2 000: a capture
#     triggered within 50 steps of the switch, whose report's first finding is the loader
#     (input.dataloader_bound); the job ends on its own;
#   * a job killed (SIGKILL) inside a capture: the watcher names the capture not finished, and its step;
#   * a full disk during a capture (a tmpfs in a user namespace): said, the job unchanged;
#   * a leak switched on mid-run: a capture with allocations, memory.growth naming the op;
#   * an uncaught out-of-memory error: a capture of that moment (the device, the bytes asked, the
#     script's line), its report warning of it, the job's error and exit code unchanged;
#   * beside the script's own torch.profiler session: a capture skipped, saying why;
# and with `ranks` (label long: two torchrun launches and a server, ~35 s):
#   * a real Prometheus server scrapes --metrics-port and returns the series through its API;
#   * two Gloo ranks (torchrun): one on-demand capture, the same steps on both, analyzed as a set;
#   * a hang on one of two Gloo ranks: hang-report.txt names rank 0 waiting in
#     all_reduce and rank 1, not arrived, at the script's line, within 3x the hang timeout.
# Usage: watch_test.sh TRAINRX PYTHON_DIR [basic|ranks]: basic (the default run, one process a job)
# or ranks (label long: the real Prometheus, two Gloo ranks' capture and hang). $TRAINRX_PYTHON (default: the repository's .venv) must
# have torch >= 2.0 (the global optimizer step hook), else exit 77.
set -uo pipefail
TRAINRX=$1
PYDIR=$2
PART=${3:-basic}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${TRAINRX_PYTHON:-$REPO/.venv/bin/python}
JOB=$PYDIR/watch_job.py
if ! "$PY" -c 'import sys, torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(0 if v >= (2, 0) else 1)' 2>/dev/null; then
  echo "skip: $PY has no torch >= 2.0"; exit 77
fi
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$W"' EXIT
. "$(dirname "$0")/lib.sh"
# The steps a rank's metrics count, read with bash alone: a harness that forks grep and awk ten times
# a second slows a job on a 2-core machine by 20 % (a regression the watcher then rightly captures).
steps_of() {
  local text re='trainrx_step_seconds_count\{rank="'"${2:-0}"'"\} ([0-9]+)' file="$1/metrics/rank${2:-0}.prom"
  [ -f "$file" ] || return 0
  text=$(< "$file") || return 0
  [[ $text =~ $re ]] && echo "${BASH_REMATCH[1]}"
}
wait_steps() {  # DIR N [RANK]: until the job's metrics count N steps (60 s at most)
  for _ in $(seq 1 240); do
    local n; n=$(steps_of "$1" "${3:-0}"); [ -n "$n" ] && [ "$n" -ge "$2" ] && return 0; sleep 0.25
  done
  return 1
}

if [ "$PART" = basic ]; then
# The job alone, and watched: the same output, the same exit code.
"$PY" "$JOB" --steps 300 > "$W/plain.out" 2>&1; plain_rc=$?
"$TRAINRX" watch -o "$W/quiet" -- "$PY" "$JOB" --steps 300 > "$W/quiet.out" 2> "$W/quiet.err"; rc=$?
[ $rc -eq $plain_rc ] && cmp -s "$W/plain.out" "$W/quiet.out" && ok "watched: the job's output and exit code unchanged" \
  || bad "watched job: exit $rc (plain $plain_rc), output differs: $(diff "$W/plain.out" "$W/quiet.out" | head -3)"
"$PY" - "$W/quiet/metrics/rank0.prom" <<'PY' && ok "the metrics file is Prometheus text counting the steps" || bad "metrics file ($(head -3 "$W/quiet/metrics/rank0.prom" 2>&1))"
import sys
text = open(sys.argv[1]).read()
samples = {l.split(" ")[0]: float(l.split(" ")[-1]) for l in text.splitlines() if l and not l.startswith("#")}
count = samples.get('trainrx_step_seconds_count{rank="0"}')
print(f"  {len(samples)} samples; steps {count}")
assert samples['trainrx_step_seconds_count{rank="0"}'] >= 295, samples
assert samples['trainrx_step_seconds_bucket{rank="0",le="+Inf"}'] == samples['trainrx_step_seconds_count{rank="0"}']
assert samples['trainrx_host_rss_bytes{rank="0"}'] > 10e6 and 'trainrx_data_wait_seconds_total{rank="0"}' in samples
assert samples['trainrx_cpu_seconds_total{rank="0"}'] > 0 and 'trainrx_cpu_wait_seconds_total{rank="0"}' in samples
for line in text.splitlines():  # every sample has a TYPE line before it (the textfile collector's format)
    if line and not line.startswith("#"):
        name = line.split("{")[0]
        base = name.rsplit("_", 1)[0] if name.endswith(("_bucket", "_sum", "_count")) else name
        assert f"# TYPE {base} " in text or f"# TYPE {name} " in text, line
PY
"$TRAINRX" watch -o "$W/none" -- "$PY" -c 'print("no torch")' > "$W/none.out" 2> "$W/none.err"; rc=$?
[ $rc -eq 0 ] && grep -q "no torch" "$W/none.out" && grep -q "nothing was watched" "$W/none.err" &&
  ok "a program that never imports torch runs as it is, and watch says nothing was watched" || bad "no-torch program: rc $rc, $(cat "$W/none.err")"
"$TRAINRX" capture "$W/nowhere" 2> "$W/nowhere.err"; rc=$?
[ $rc -eq 2 ] && grep -q "no watched job there" "$W/nowhere.err" && ok "capture of a folder no job is watched in: an error" ||
  bad "capture nowhere: rc $rc, $(cat "$W/nowhere.err")"
ls -d "$W"/quiet/capture-* >/dev/null 2>&1 && bad "a clean 300-step job took a capture: $(cat "$W"/quiet/capture-*/reason-rank0.json)" \
  || ok "a clean job takes no capture"

"$TRAINRX" capture $((1 << 30)) 2> "$W/nopid.err"; rc=$?
[ $rc -eq 2 ] && grep -q "no such process" "$W/nopid.err" && ok "capture of a PID that is no process: an error" ||
  bad "capture unknown PID: rc $rc, $(cat "$W/nopid.err")"
"$TRAINRX" capture $$ 2> "$W/notwatched.err"; rc=$?
[ $rc -eq 2 ] && grep -q "is not a watched job" "$W/notwatched.err" && ok "capture of a process no job is watched under: an error" ||
  bad "capture of an unwatched PID: rc $rc, $(cat "$W/notwatched.err")"

# The issue's job: 3 000 steps; an on-demand capture of a clean stretch (asked by the watcher's PID),
# then the loader made slower after step 2 000 (a file: nothing restarts); the job ends on its own.
# --regression-min-pct 100: this 2-core VM's own pace swings by 30-45 % over seconds (a regression of
# the job, rightly captured, that would take the place of the planted one); the planted loader is 3x.
"$TRAINRX" watch -o "$W/job" --capture-steps 10 --regression-min-pct 100 -- "$PY" "$JOB" --steps 3000 --slow-file "$W/slow" \
  > "$W/job.out" 2> "$W/job.err" &
watcher=$!
if wait_steps "$W/job" 400; then
  "$TRAINRX" capture $watcher --steps 10 2> "$W/capture.err" && ok "capture by the watcher's PID: asked" || bad "capture: $(cat "$W/capture.err")"
  wait_steps "$W/job" 2000
  touch "$W/slow"
else
  bad "the watched job did not step ($(tail -3 "$W/job.err"))"
fi
wait $watcher; rc=$?
[ $rc -eq 0 ] && ok "the 3 000-step job ended on its own, exit 0" || bad "watched job exit $rc ($(tail -3 "$W/job.err"))"
"$PY" - "$W/job" "$W/slow.step" <<'PY' && ok "on demand: a clean capture; the slower loader: captured within 50 steps, its report names the loader first" \
  || bad "captures ($(grep -h 'capture-\|finding' "$W/job.err" | head -6))"
import json, os, sys
job, step_file = sys.argv[1], sys.argv[2]
def info(k):
    return json.load(open(f"{job}/capture-{k}/reason-rank0.json"))
def ids(k):
    return [f["id"] for f in json.load(open(f"{job}/capture-{k}/report.json"))["findings"]]
one, two = info(1), info(2)
switched = int(open(step_file).read())
print(f"  capture-1: {one['reason']}, steps {one['from_step']}-{one.get('to_step')}, findings {ids(1)[:4]}")
print(f"  capture-2: {two['reason']}, steps {two['from_step']}-{two.get('to_step')} (the loader slower from step {switched}), findings {ids(2)[:4]}")
def data_share(k):
    return json.load(open(f"{job}/capture-{k}/report.json"))["metrics"]["step_breakdown"]["data_wait"]
print(f"  data wait: {data_share(1):.0%} of the steps on demand, {data_share(2):.0%} in the regression's")
assert one["reason"] == "on demand" and data_share(1) < 0.3, (one, ids(1))
assert data_share(2) > data_share(1) + 0.2
assert two["reason"] == "regression" and 0 <= two["from_step"] - switched <= 50, (two, switched)
assert ids(2) and ids(2)[0] in ("input.dataloader_bound", "input.workers"), ids(2)
assert os.path.exists(f"{job}/capture-2/report.html") and os.path.exists(f"{job}/capture-2/report.txt")
findings = open(f"{job}/metrics/findings.prom").read()  # the last analyzed capture's, as Prometheus text
assert f'trainrx_capture_finding{{capture="capture-2",order="1",id="{ids(2)[0]}"' in findings, findings
PY

# A leak switched on mid-run (a file): memory rising every second (a 6 s window here, 20 s by default)
# takes a capture that records allocations; its analysis names the op that allocates what is kept.
# 256 kB a step: the rule asks 64 MB over the window, which a busy machine's 100 steps a second
# (this VM beside a build) keeps 128 kB a step under in 4 s.
TRAINRX_WATCH_MEMORY_SECONDS=6 "$TRAINRX" watch -o "$W/leak" --no-regression -- "$PY" "$JOB" --steps 20000 \
  --leak-file "$W/leak.on" --leak-kb 256 > /dev/null 2> "$W/leak.err" &
watcher=$!
wait_steps "$W/leak" 300 && touch "$W/leak.on"
for _ in $(seq 1 120); do [ -f "$W/leak/capture-1/report.json" ] && break; sleep 0.25; done
kill -TERM $watcher 2>/dev/null; wait $watcher 2>/dev/null
"$PY" - "$W/leak/capture-1" <<'PY' && ok "a leak: captured with allocations, memory.growth names aten::ones" || bad "leak capture ($(grep -v USDT "$W/leak.err" | tail -3))"
import json, sys
d = sys.argv[1]
info = json.load(open(f"{d}/reason-rank0.json"))
growth = [f for f in json.load(open(f"{d}/report.json"))["findings"] if f["id"] == "memory.growth"]
print(f"  {info['reason']}: {info['detail'][:90]}; {growth[0]['title'][:110] if growth else 'no memory.growth'}")
assert info["reason"] == "memory" and growth and "aten::ones" in growth[0]["title"], (info, growth)
PY

# An uncaught out-of-memory error at step 200 (the CPU allocator's: 1 PiB asked): the capture of that
# moment is written before the process dies and analyzed; the job's traceback and exit code are its own.
"$PY" "$JOB" --steps 300 --oom-at 200 > "$W/oom-plain.out" 2> "$W/oom-plain.err"; rc_plain=$?
"$TRAINRX" watch -o "$W/oom" -- "$PY" "$JOB" --steps 300 --oom-at 200 > "$W/oom.out" 2> "$W/oom.err"; rc=$?
"$PY" - "$W/oom/capture-1" "$W/oom.err" <<'PY' && [ $rc -eq $rc_plain ] && [ $rc -ne 0 ] &&
import json, sys
d, err = sys.argv[1], open(sys.argv[2]).read()
info = json.load(open(f"{d}/reason-rank0.json"))
memory = json.load(open(f"{d}/report.json"))["metrics"]["memory"]
print(f"  {info['reason']}: {info['detail']}; memory table: {[(m['device'], m['oom_events'], m['oom_request_bytes']) for m in memory]}")
assert info["reason"] == "out of memory" and "cpu could not allocate 1.1 PB at watch_job.py" in info["detail"], info
assert info["from_step"] == 199 and "in activations" in info["detail"], info
assert [(m["device"], m["oom_events"], m["oom_request_bytes"]) for m in memory] == [("cpu", 1, 1 << 50)], memory
assert "can't allocate memory" in err and "the report warns: rank 0 ran out of memory on cpu" in err, err[-600:]
PY
  ok "an uncaught out-of-memory error: captured (device, bytes, the script's line), the job's exit $rc unchanged" ||
  bad "out of memory: rc $rc (plain $rc_plain), $(grep "trainrx watch" "$W/oom.err" | tail -3)"

# A job killed inside a capture (SIGKILL: nothing of the capture written): the watcher says which
# capture, from which step, was not finished, and exits with the job's code.
"$TRAINRX" watch -o "$W/killed" --capture-steps 100000 -- "$PY" "$JOB" --steps 20000 > /dev/null 2> "$W/killed.err" &
watcher=$!
wait_steps "$W/killed" 100 && "$TRAINRX" capture "$W/killed" 2>/dev/null
for _ in $(seq 1 200); do [ -f "$W/killed/capture-1/reason-rank0.json" ] && break; sleep 0.1; done
pkill -KILL -P $watcher
wait $watcher; rc=$?
# `trainrx capture` without --steps asks for the watcher's --capture-steps (a fixed 20 of its own
# let the capture end before the kill on a busy machine).
[ $rc -eq 137 ] && grep -q "capture-1: not finished by rank 0 from step [0-9]*: the job ended inside it" "$W/killed.err" &&
  grep -q '"steps": 100000' "$W/killed/capture-1/reason-rank0.json" &&
  grep -q '"unfinished": "rank 0 from step' "$W/killed/capture-1/report.json" &&
  ok "a job killed inside a capture: exit 137, the capture named as not finished, from its step" ||
  bad "killed inside a capture: rc $rc, $(grep capture "$W/killed.err" | head -3)"

# A full disk during a capture (a 32 kB tmpfs over the capture's folder, in a user namespace):
# torch.profiler's export fails (Kineto logs it), the hook says ENOSPC once, the watcher names the
# capture not finished; the job runs to its end with its output unchanged.
mkdir -p "$W/full/capture-1"
if unshare -rm true 2>/dev/null; then
  unshare -rm bash -c 'mount -t tmpfs -o size=32k tmpfs "$1/full/capture-1" && shift && exec "$@"' _ "$W" \
    "$TRAINRX" watch -o "$W/full" --capture-steps 50 --no-regression -- "$PY" "$JOB" --steps 3000 > "$W/full.out" 2> "$W/full.err" &
  watcher=$!
  wait_steps "$W/full" 50 && "$TRAINRX" capture "$W/full" --steps 50 2>> "$W/full.err"
  wait $watcher; rc=$?
  [ $rc -eq 0 ] && cmp -s "$W/plain.out" "$W/full.out" &&
    grep -q "No space left on device" "$W/full.err" &&
    grep -q "capture-1: not finished by rank 0 from step [0-9]*: .*could not be written (a full disk?)" "$W/full.err" &&
    ok "a full disk during a capture: said (no trace written), the job ran to its end unchanged" ||
    bad "full disk: rc $rc, $(grep -v USDT "$W/full.err" | tail -4)"
else
  echo "skip: no user namespaces here (unshare -rm): the full-disk part"
fi

# The script's own torch.profiler session: a capture asked then is skipped (ours would disturb it), said.
"$TRAINRX" watch -o "$W/own" -- "$PY" "$JOB" --steps 1500 --own-profiler > "$W/own.out" 2> "$W/own.err" &
watcher=$!
wait_steps "$W/own" 100 && "$TRAINRX" capture "$W/own" --steps 5 2>> "$W/own.err"
for _ in $(seq 1 200); do [ -f "$W/own/capture-1/report.json" ] && break; sleep 0.1; done
kill -TERM $watcher 2>/dev/null; wait $watcher 2>/dev/null
grep -q "another torch.profiler session" "$W/own/capture-1/reason-rank0.json" 2>/dev/null &&
  [ ! -f "$W/own/capture-1/trace-rank0.json" ] && ok "beside the script's own torch.profiler: the capture skipped, saying why" ||
  bad "own profiler: $(cat "$W/own/capture-1/reason-rank0.json" 2>&1; tail -3 "$W/own.err")"

fi

if [ "$PART" = ranks ]; then
# A real Prometheus server (Debian's) scrapes the job's --metrics-port and its HTTP API returns the
# series; skipped where prometheus is not installed (scripts/setup installs it).
if command -v prometheus >/dev/null 2>&1; then
  port=$((19000 + RANDOM % 500)); prom=$((19600 + RANDOM % 300))
  "$TRAINRX" watch -o "$W/scraped" --metrics-port $port -- "$PY" "$JOB" --steps 6000 > /dev/null 2> "$W/scraped.err" &
  watcher=$!
  printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: trainrx\n    static_configs:\n      - targets: ["127.0.0.1:%s"]\n' \
    $port > "$W/prometheus.yml"
  prometheus --config.file="$W/prometheus.yml" --storage.tsdb.path="$W/tsdb" --web.listen-address=127.0.0.1:$prom \
    > "$W/prometheus.log" 2>&1 &
  server=$!
  "$PY" - $prom <<'PY' && ok "a real Prometheus scraped the job: trainrx_step_seconds_count read back through its API" \
    || bad "prometheus ($(tail -3 "$W/prometheus.log"; tail -2 "$W/scraped.err"))"
import json, sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?query=trainrx_step_seconds_count"
for _ in range(60):
    try:
        r = json.load(urllib.request.urlopen(url, timeout=2))["data"]["result"]
        if r and float(r[0]["value"][1]) > 0:
            print(f"  {r[0]['metric']['__name__']}{{rank={r[0]['metric']['rank']!r}}} = {r[0]['value'][1]}")
            assert r[0]["metric"]["rank"] == "0" and r[0]["metric"]["job"] == "trainrx", r
            sys.exit(0)
    except (OSError, ValueError, KeyError):
        pass
    time.sleep(0.5)
sys.exit(1)
PY
  kill $server 2>/dev/null; kill -TERM $watcher 2>/dev/null; wait $watcher $server 2>/dev/null
else
  echo "skip: no prometheus (scripts/setup installs Debian's): the scrape part"
fi

# A hang on one of two Gloo ranks: rank 1 stops at step 200, rank 0 waits in its all_reduce.
if "$PY" -c 'import torch.distributed as d, sys; sys.exit(0 if d.is_available() and d.is_gloo_available() else 1)' 2>/dev/null; then
  # Two ranks take an on-demand capture from the same step; the folder analyzes as a set of two.
  "$TRAINRX" watch -o "$W/two" -- "$PY" -m torch.distributed.run --nproc_per_node 2 \
    --master_port $((28500 + RANDOM % 1000)) "$JOB" --dist --steps 3000 > /dev/null 2> "$W/two.err" &
  watcher=$!
  wait_steps "$W/two" 100 1 && "$TRAINRX" capture "$W/two" --steps 5 2>/dev/null
  for _ in $(seq 1 300); do [ -f "$W/two/capture-1/report.json" ] && break; sleep 0.1; done
  kill -TERM $watcher 2>/dev/null; sleep 1; pkill -f "watch_job.py --dist" 2>/dev/null; wait $watcher 2>/dev/null
  "$PY" - "$W/two/capture-1" <<'PY' && ok "two ranks: one capture from the same step, analyzed as a set of two" || bad "two-rank capture ($(ls "$W/two/capture-1" 2>&1; tail -2 "$W/two.err"))"
import json, sys
d = sys.argv[1]
a, b = (json.load(open(f"{d}/reason-rank{r}.json")) for r in (0, 1))
ranks = json.load(open(f"{d}/report.json"))["ranks"]
print(f"  rank 0 steps {a['from_step']}-{a.get('to_step')}, rank 1 steps {b['from_step']}-{b.get('to_step')}; report: {len(ranks)} ranks")
assert a["from_step"] == b["from_step"] and a.get("to_step") == b.get("to_step") and len(ranks) == 2, (a, b, ranks)
PY
  "$TRAINRX" watch -o "$W/hang" --hang-min-seconds 2 -- "$PY" -m torch.distributed.run --nproc_per_node 2 \
    --master_port $((29500 + RANDOM % 1000)) "$JOB" --dist --steps 5000 --hang-at 200 --hang-rank 1 --hang-mark "$W/hung.at" \
    > "$W/hang.out" 2> "$W/hang.err" &
  watcher=$!
  for _ in $(seq 1 300); do [ -s "$W/hang/hang-report.txt" ] && grep -q "not arrived" "$W/hang/hang-report.txt" && break; sleep 0.1; done
  # Within 3x K median steps: here the floor, 2 s (K x the median step is well under it), plus the
  # hook's second of margin: the report in 9 s or less from the step that never ended.
  "$PY" -c 'import os, sys; hung = float(open(sys.argv[1]).read()); took = os.path.getmtime(sys.argv[2]) - hung
print(f"  the hang report {took:.1f} s after rank 1 stopped"); sys.exit(0 if 0 < took <= 9 else 1)' "$W/hung.at" "$W/hang/hang-report.txt" &&
    ok "the hang report within 3x the hang timeout of the stop" || bad "hang report too late or missing"
  kill -TERM $watcher 2>/dev/null; sleep 1; pkill -f "watch_job.py --dist" 2>/dev/null; wait $watcher 2>/dev/null
  sed 's/^/  /' "$W/hang/hang-report.txt" 2>/dev/null | head -8
  grep -q "rank 0: waits in torch.distributed.all_reduce" "$W/hang/hang-report.txt" 2>/dev/null &&
    grep -A2 "waiting in all_reduce; not arrived" "$W/hang/hang-report.txt" | grep -q "rank 1 (at watch_job.py:" &&
    ok "a hang on one of two ranks: rank 0 waits in all_reduce, rank 1 named as not arrived, at its line" ||
    bad "hang report ($(cat "$W/hang/hang-report.txt" 2>/dev/null | head -5; tail -3 "$W/hang.err"))"
else
  echo "skip: no Gloo in this torch: the hang part"
fi
fi
exit $fail
