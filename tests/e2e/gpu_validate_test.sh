#!/usr/bin/env bash
# What of the GPU validation (issue 14) can be tested without a GPU: scripts/gpu-validate's argument
# handling, and tests/gpu/compare_traces.py (matrix 1's comparison) on the real H100 traces in
# tests/fixtures/h100: agreement on the real pair, a disagreement found when one trace loses kernels,
# bad input refused. Usage: gpu_validate_test.sh [PYTHON]
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=${1:-python3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
GV=$REPO/scripts/gpu-validate
FIX=$REPO/tests/fixtures/h100

out=$(OUT=$W/o "$GV" --part nope 2>&1); rc=$?
[ $rc -eq 2 ] && [[ "$out" == *"unknown part 'nope'"* ]] && ok "unknown part: exit 2, named" || bad "unknown part: rc=$rc $out"
out=$(OUT=$W/o "$GV" --build-dir "$W/none" 2>&1); rc=$?
[ $rc -eq 2 ] && [[ "$out" == *"no build directory"* ]] && ok "missing build dir: exit 2" || bad "missing build dir: rc=$rc $out"
out=$(OUT=$W/o "$GV" --frobnicate 2>&1); rc=$?
[ $rc -eq 2 ] && [[ "$out" == *"unknown argument"* ]] && ok "unknown argument: exit 2" || bad "unknown argument: rc=$rc"
mkdir -p "$W/empty"
out=$(OUT=$W/o "$GV" --build-dir "$W/empty" --part match 2>&1); rc=$?
[ $rc -eq 1 ] && [[ "$out" == *"no $W/empty/trainrx"* ]] && ok "part without a build: exit 1, says which" || bad "no build: rc=$rc $out"
out=$("$GV" --help 2>&1); rc=$?
[ $rc -eq 0 ] && [[ "$out" == *"planted"* ]] && ok "--help lists the parts" || bad "--help: rc=$rc"

# compare_traces.py on the real pair: agrees (every figure within 5 %).
"$PY" "$REPO/tests/gpu/compare_traces.py" "$FIX/train_gpu.trainrx.json.gz" "$FIX/train_gpu.torch_profiler.json.gz" \
  --json "$W/c.json" > "$W/c.txt" 2>&1; rc=$?
cat "$W/c.txt"
[ $rc -eq 0 ] && ok "H100 pair agrees within 5 %" || bad "H100 pair: rc=$rc"
"$PY" - "$W/c.json" <<'PYEOF' && ok "kernels, kernel time and HtoD copies compared, with steps on both sides" || bad "compare JSON"
import json, sys
rows = {r["figure"]: r for r in json.load(open(sys.argv[1]))["rows"]}
assert rows["kernels"]["trainrx"] > 50 and rows["kernel_ms"]["trainrx"] > 1, rows
assert any(k.startswith("memcpy HtoD") for k in rows), rows
assert rows["steps"]["trainrx"] >= 10 and rows["steps"]["torch.profiler"] >= 10, rows
PYEOF
# One trace with every third kernel gone: found.
"$PY" - "$FIX/train_gpu.torch_profiler.json.gz" "$W/fewer.json" <<'PYEOF'
import gzip, json, sys
d = json.load(gzip.open(sys.argv[1], "rt"))
n = 0
def keep(e):
    global n
    if e.get("cat") != "kernel": return True
    n += 1
    return n % 3 != 0
d["traceEvents"] = [e for e in d["traceEvents"] if keep(e)]
json.dump(d, open(sys.argv[2], "w"))
PYEOF
"$PY" "$REPO/tests/gpu/compare_traces.py" "$FIX/train_gpu.trainrx.json.gz" "$W/fewer.json" > "$W/f.txt" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "kernels.*differs" "$W/f.txt" && ok "a third of the kernels missing: exit 1, kernels differ" || { bad "fewer kernels: rc=$rc"; cat "$W/f.txt"; }
echo '{"traceEvents":[]}' > "$W/nosteps.json"
"$PY" "$REPO/tests/gpu/compare_traces.py" "$W/nosteps.json" "$FIX/train_gpu.torch_profiler.json.gz" > "$W/n.txt" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "nosteps.json: 0 ProfilerStep" "$W/n.txt" && ok "no steps: exit 2, names the file" || { bad "no steps: rc=$rc"; cat "$W/n.txt"; }
echo 'not json' > "$W/bad.json"
"$PY" "$REPO/tests/gpu/compare_traces.py" "$W/bad.json" "$FIX/train_gpu.torch_profiler.json.gz" > "$W/b.txt" 2>&1; rc=$?
[ $rc -ne 0 ] && grep -q "bad.json" "$W/b.txt" && ok "not JSON: refused, names the file" || { bad "bad json: rc=$rc"; cat "$W/b.txt"; }
# predict_verdict.py (--part predict's check): a point inside its interval, a point outside it that
# the cross-run range still reaches (two runs a side cannot decide), and one no run reaches; the op
# that moved most is named; a missing report is said, not a traceback.
"$PY" - "$W/pv" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
def rep(name, k, mean_ms, normal_ms, what_if=None):
    r = {"steps": {"mean_ns": mean_ms * 1e6}, "findings": [{"id": "gpu.idle"}],
         "metrics": {"op_table": {"steps": 10, "rows": [{"name": "aten::normal_", "self_ns": normal_ms * 1e7},
                                                        {"name": "aten::mm", "self_ns": 1e7}]},
                     "what_if": what_if or []}}
    json.dump(r, open(f"{d}/{name}.{k}.report.json", "w"))
asked = lambda s, lo, hi: [{"label": "asked", "transform": "amp_bf16", "method": "replay", "saving_pct": s,
                            "low_pct": lo, "high_pct": hi, "assumptions": "autocast"}]
for name, runs, w in [("in", (10, 10, 6, 6), asked(40, 35, 45)), ("spread", (12, 10, 10, 11), asked(0, 0, 0)),
                      ("out", (120, 118, 95, 96), asked(0, -0.1, 0.1))]:
    for k, m in zip(("bad1", "bad2", "good1", "good2"), runs):
        rep(name, k, m, m - 1, w if k == "bad1" else None)
# The device behind the loop (2026-11-27): host step ranges say the fix made the step 40 % slower,
# the loop's pace (train_gpu.py --pace) says 20 % faster; with a pace file missing for one run, the
# host steps are used for all four.
for k, host, pace in [("bad1", 10, 50), ("bad2", 10, 50), ("good1", 14, 40), ("good2", 14, 40)]:
    rep("pace", k, host, 1, asked(18, 10, 25) if k == "bad1" else None)
    json.dump({"steps": 22, "from_step": 8, "ms_per_step": pace}, open(f"{d}/pace.{k}.pace.json", "w"))
    rep("halfpace", k, host, 1, asked(18, 10, 25) if k == "bad1" else None)
json.dump({"steps": 22, "from_step": 8, "ms_per_step": 50}, open(f"{d}/halfpace.bad1.pace.json", "w"))
# PREDICT_RUNS=3: three runs a side, all of them in the means and the cross-run range.
for k, m in zip(("bad1", "good1", "good2", "bad2", "bad3", "good3"), (10, 6, 7, 12, 11, 5)):
    rep("three", k, m, m - 1, asked(40, 30, 50) if k == "bad1" else None)
PYEOF
PV=$REPO/tests/gpu/predict_verdict.py
"$PY" "$PV" "$W/pv" pace > "$W/pv.txt" 2>&1 && grep -q "measured 20.0 % .*the loop's pace.*inside" "$W/pv.txt" \
  && ok "predict verdict: the loop's pace, not the host's steps, where every run has one" || { bad "predict verdict pace"; cat "$W/pv.txt"; }
"$PY" "$PV" "$W/pv" halfpace > "$W/pv.txt" 2>&1 && grep -q "measured -40.0 % .*host steps' mean.*OUTSIDE" "$W/pv.txt" \
  && ok "predict verdict: one run without a pace: the host steps for all" || { bad "predict verdict halfpace"; cat "$W/pv.txt"; }
# train_gpu.py --pace on the CPU (where torch is there): a pace over the steps after the first quarter.
if "$PY" -c "import torch" 2>/dev/null; then
  "$PY" "$REPO/tests/gpu/train_gpu.py" --device cpu --steps 8 --workers 0 --batch 4 --pace "$W/pace.json" > "$W/tg.txt" 2>&1 \
    && "$PY" -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["steps"] == 6 and p["from_step"] == 2 and p["ms_per_step"] > 0, p' "$W/pace.json" \
    && ok "train_gpu.py --pace: steps 2..7 timed" || { bad "train_gpu.py --pace"; cat "$W/tg.txt" "$W/pace.json"; }
fi
"$PY" "$PV" "$W/pv" in > "$W/pv.txt" 2>&1 && grep -q "measured 40.0 % \[40.0, 40.0 across runs\].*inside" "$W/pv.txt" \
  && ok "predict verdict: inside" || { bad "predict verdict inside"; cat "$W/pv.txt"; }
"$PY" "$PV" "$W/pv" spread > "$W/pv.txt" 2>&1 && grep -q "within the runs' spread" "$W/pv.txt" \
  && ok "predict verdict: a point outside that the runs' spread reaches is not called a miss" || { bad "predict verdict spread"; cat "$W/pv.txt"; }
"$PY" "$PV" "$W/pv" out > "$W/pv.txt" 2>&1 && grep -q "OUTSIDE" "$W/pv.txt" && grep -q "moved most.*aten::normal_ -23.50 ms" "$W/pv.txt" \
  && ok "predict verdict: outside, the op that moved named" || { bad "predict verdict outside"; cat "$W/pv.txt"; }
"$PY" "$PV" "$W/pv" three > "$W/pv.txt" 2>&1 && grep -q "measured 45.5 % \[30.0, 58.3 across runs\].*runs 10.00 12.00 11.00 / 6.00 7.00 5.00).*inside" "$W/pv.txt" \
  && ok "predict verdict: three runs a side (PREDICT_RUNS=3)" || { bad "predict verdict three"; cat "$W/pv.txt"; }
"$PY" "$PV" "$W/pv" missing > "$W/pv.txt" 2>&1; grep -q "missing	no comparison: FileNotFoundError" "$W/pv.txt" \
  && ok "predict verdict: a missing report said" || { bad "predict verdict missing"; cat "$W/pv.txt"; }
exit $fail
