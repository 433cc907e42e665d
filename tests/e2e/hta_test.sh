#!/usr/bin/env bash
# Our recorded traces in a peer's tool: Holistic Trace Analysis (pinned, from PyPI, in .venv-peers)
# loads a `trainrx record` trace and finds its iterations (the collector writes ProfilerStep#N as
# torch.profiler does), for a Python script (steps inferred from Optimizer.step) and a LibTorch
# workload (trainrx step markers); and HTA's temporal breakdown of an HTA test trace equals ours.
# Usage: hta_test.sh TRAINRX PYDIR SHARED. Exit 77 when the peers venv cannot be made (no PyPI)
# or trainrx cannot record.
set -uo pipefail
TRAINRX=$1; PYDIR=$2; SHARED=$3
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${TRAINRX_PYTHON:-python3}
[ -f "$(dirname "$TRAINRX")/libtrainrx_probe.so" ] || { echo "skip: built without LibTorch"; exit 77; }
HTA_PY=$("$REPO/scripts/peers-venv") || { echo "skip: could not install HTA (no PyPI?)"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

mkdir -p "$W/py" "$W/wl" "$W/ns"
"$TRAINRX" record -o "$W/py/rank0.json" -- $PY "$PYDIR/train_planted.py" --steps 8 > /dev/null 2>&1 || bad "record python failed"
"$TRAINRX" run cnn --set steps=6 --set warmup=1 --set eval_every=0 -o "$W/wl/rank0.json" > /dev/null 2>&1 || bad "run cnn failed"
for d in py wl; do
  "$HTA_PY" - "$W/$d" "$TRAINRX" <<'PY' 2> "$W/$d.err" && ok "$d: HTA found our iterations" || { bad "$d: HTA"; tail -5 "$W/$d.err"; }
import json, subprocess, sys
from hta.trace_analysis import TraceAnalysis
trace_dir, trainrx = sys.argv[1], sys.argv[2]
iters = TraceAnalysis(trace_dir=trace_dir).t.get_iterations(0)
ours = json.loads(subprocess.run([trainrx, "analyze", trace_dir + "/rank0.json", "--format", "json"],
                                 check=True, capture_output=True, text=True).stdout)
n = len(ours["steps"]["rows"])
print("  HTA iterations", iters, "; trainrx steps", n, "(", ours["steps"]["source"], ")")
# HTA lists ProfilerStep#N numbers; it leaves out none of ours but may drop the last one.
sys.exit(0 if len(iters) >= n - 1 >= 2 else 1)
PY
done

# The temporal breakdown, both tools on the same file: an ns-resolution HTA test trace, and our own
# collector's trace of a run on an NVIDIA H100 (CUPTI kernels, memcpy, memset; issue 14, matrix 5).
for T in "$SHARED/external-traces/hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz" \
         "$REPO/tests/fixtures/h100/train_gpu.trainrx.json.gz"; do
  [ -f "$T" ] || continue
  rm -rf "$W/ns" && mkdir -p "$W/ns" && cp "$T" "$W/ns/"
  "$HTA_PY" - "$W/ns" "$TRAINRX" "$W/ns/$(basename "$T")" <<'PY' 2> "$W/ns.err" && ok "$(basename "$T"): temporal breakdown equals HTA's within 0.5 pp" || { bad "breakdown of $T"; tail -5 "$W/ns.err"; }
import json, subprocess, sys
from hta.trace_analysis import TraceAnalysis
d, trainrx, f = sys.argv[1:4]
h = TraceAnalysis(trace_dir=d).get_temporal_breakdown(visualize=False).iloc[0]
r = json.loads(subprocess.run([trainrx, "analyze", f, "--format", "json"], check=True, capture_output=True, text=True).stdout)
t = r["metrics"]["temporal_breakdown"][0]
pairs = [(h["idle_time_pctg"], t["idle_pct"]), (h["compute_time_pctg"], t["compute_pct"]), (h["non_compute_time_pctg"], t["non_compute_pct"])]
print("  HTA vs trainrx idle/compute/non-compute:", pairs)
sys.exit(0 if all(abs(a - b) <= 0.5 for a, b in pairs) else 1)
PY
done
exit $fail
