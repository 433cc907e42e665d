#!/usr/bin/env bash
# record --memory-events (issue 36): every CPU allocation and free, and memory.growth naming where
# the blocks that outlive their step are allocated.
#   * train_planted.py --leak (a second forward kept in a list): memory.growth names conv2d's and
#     relu's blocks, whose bytes a step add up to the growth; the clean run has no growth;
#   * the same script running torch.profiler with profile_memory under record --memory-events: both
#     recorders work (ours must not take torch.profiler's thread slot: it refused to start once);
#   * Debian's torch 1.13 probe (build-compat, if built) with 2 DataLoader workers: the same site.
# Usage: memory_events_test.sh TRAINRX PYTHON_DIR
set -uo pipefail
TRAINRX=$1
PYDIR=$2
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${TRAINRX_PYTHON:-$REPO/.venv/bin/python}
SCRIPT=$PYDIR/train_planted.py
[ -f "$(dirname "$TRAINRX")/libtrainrx_probe.so" ] || { echo "skip: $TRAINRX has no probe"; exit 77; }
"$PY" -c 'import torch' 2>/dev/null || { echo "skip: $PY has no torch"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
. "$(dirname "$0")/lib.sh"

# growth REPORT: "<growth bytes/step> <site bytes/step summed> <site names|...>" of memory.growth, or "none"
growth() {
  "$PY" - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = [f for f in r["findings"] if f["id"] == "memory.growth"]
if not f:
    print("none"); sys.exit()
ev = f[0]["evidence"]
sites = [k for k in ev if k.startswith("allocated_in") and not k.endswith(("_per_step"))]
total = sum(ev[k + "_bytes_per_step"] for k in sites)
print(ev["growth_bytes_per_step"], total, "|".join(ev[k] for k in sites))
PY
}
check_leak() {  # NAME REPORT
  read -r g s names <<< "$(growth "$2")"
  echo "  $1: growth $g B/step, sites $s B/step: $names"
  [ "$g" != none ] || { bad "$1: memory.growth not flagged"; return; }
  [[ "$names" == *"aten::conv2d"* && "$names" == *"aten::relu"* ]] && ok "$1: names conv2d and relu" || bad "$1: sites '$names'"
  "$PY" -c "import sys; g,s=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if 0.8*g <= s <= 1.2*g else 1)" "$g" "$s" \
    && ok "$1: the sites add up to the growth (within 20 %)" || bad "$1: sites $s vs growth $g"
}

# 1. The leak and the clean run, our recorder.
"$TRAINRX" record --memory-events -o "$W/leak.json" -- "$PY" "$SCRIPT" --leak --steps 12 > /dev/null 2> "$W/leak.err" \
  || bad "leak: record failed: $(tail -3 "$W/leak.err")"
"$TRAINRX" analyze "$W/leak.json" --format json -o "$W/leak.report.json" > /dev/null || bad "leak: analyze"
check_leak "record --memory-events" "$W/leak.report.json"
"$TRAINRX" record --memory-events -o "$W/clean.json" -- "$PY" "$SCRIPT" --steps 12 > /dev/null 2>&1 || bad "clean: record"
"$TRAINRX" analyze "$W/clean.json" --format json -o "$W/clean.report.json" > /dev/null || bad "clean: analyze"
[ "$(growth "$W/clean.report.json")" = none ] && ok "clean run: no memory.growth" || bad "clean run: $(growth "$W/clean.report.json")"
"$PY" - "$W/clean.json" <<'PY' && ok "clean run: allocation events with addresses in the trace" || bad "clean run: no allocation events"
import json, sys
d = json.load(open(sys.argv[1]))
n = sum(1 for e in d["traceEvents"] if e.get("name") == "[memory]" and "Addr" in e.get("args", {}))  # torch.profiler's form
print("  allocation events:", n, "| memory_events:", d["trainrx"].get("memory_events"))
assert n > 100 and d["trainrx"].get("memory_events") == "cpu allocator"
PY

# 2. torch.profiler with profile_memory inside the recorded run: both traces, both name the site.
mkdir -p "$W/tp"
"$TRAINRX" record --memory-events -o "$W/both.json" -- "$PY" "$SCRIPT" --leak --steps 12 --torch-profiler "$W/tp" \
  > /dev/null 2> "$W/both.err"
code=$?
[ $code = 0 ] && ok "under torch.profiler: exit 0" || bad "under torch.profiler: exit $code: $(grep -m2 Error "$W/both.err")"
tp=$(ls "$W"/tp/*.json 2>/dev/null | head -1)
if [ -n "$tp" ]; then
  "$TRAINRX" analyze "$tp" --format json -o "$W/tp.report.json" > /dev/null || bad "torch.profiler trace: analyze"
  check_leak "torch.profiler's trace" "$W/tp.report.json"
else
  bad "under torch.profiler: torch.profiler wrote no trace"
fi

# 3. Debian's torch 1.13 (the compat probe), DataLoader workers forked while recording.
COMPAT=$REPO/build-compat
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null && [ -f "$COMPAT/libtrainrx_probe.so" ]; then
  "$TRAINRX" record --memory-events --probe-dir "$COMPAT" -o "$W/c.json" -- /usr/bin/python3 "$SCRIPT" --leak --steps 12 --workers 2 \
    > /dev/null 2> "$W/c.err" || bad "torch 1.13: record failed: $(tail -3 "$W/c.err")"
  "$TRAINRX" analyze "$W/c.json" --format json -o "$W/c.report.json" > /dev/null || bad "torch 1.13: analyze"
  read -r g _ names <<< "$(growth "$W/c.report.json")"
  [[ "$names" == *"aten::conv2d"* ]] && ok "torch 1.13 with 2 workers: names conv2d" || bad "torch 1.13: growth $g, sites '$names'"
else
  echo "skip: torch 1.13 part (no /usr/bin/python3 torch or no $COMPAT probe)"
fi
exit $fail
