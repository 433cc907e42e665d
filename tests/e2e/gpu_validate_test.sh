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
exit $fail
