#!/usr/bin/env bash
# torch.compile (issue 39) on tests/python/train_compiled.py (aot_eager: dynamo and AOTAutograd as
# inductor sees them, compiles in about a second here), recorded by `trainrx record` and by
# torch.profiler:
#   * clean: the program's output is the same recorded or not; one compiled region a step (our hooks
#     add no compiled frame and no recompile); no compile.graph_break, no compile.recompiles;
#   * --graph-break print / item: compile.graph_break naming the script's line of the print / the
#     .item() and the reason; from torch.profiler's trace a medium-confidence claim without a line;
#   * --recompile scalar: compile.recompiles naming forward and the guard on self.scale (from
#     torch.profiler's trace: compilations inside the steady steps);
#   * TRAINRX_FIX=compile_off runs the model eagerly (no compiled region), through `ab --cmd` too.
# Usage: compile_test.sh TRAINRX PYTHON_DIR. $TRAINRX_PYTHON (default: the repository's .venv) must
# have torch >= 2.4, else exit 77.
set -uo pipefail
TRAINRX=$1
PYDIR=$2
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${TRAINRX_PYTHON:-$REPO/.venv/bin/python}
SCRIPT=$PYDIR/train_compiled.py
if ! "$PY" -c 'import sys, torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); sys.exit(0 if v >= (2, 4) else 1)' 2>/dev/null; then
  echo "skip: $PY has no torch >= 2.4"; exit 77
fi
[ -f "$(dirname "$TRAINRX")/libtrainrx_probe.so" ] || { echo "skip: $TRAINRX has no probe (built without LibTorch)"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
. "$(dirname "$0")/lib.sh"
line_of() { grep -n "$1" "$SCRIPT" | head -1 | cut -d: -f1; }

run() {  # name args... -> $W/name.{json,report.json,out}
  local name=$1; shift
  "$TRAINRX" record -o "$W/$name.json" -- "$PY" "$SCRIPT" "$@" > "$W/$name.out" 2> "$W/$name.err" \
    || { bad "$name: record failed: $(tail -3 "$W/$name.err")"; return 1; }
  "$TRAINRX" analyze "$W/$name.json" --format json -o "$W/$name.report.json" > /dev/null || { bad "$name: analyze failed"; return 1; }
}
finding() {  # report id -> the finding's title and examples, one line
  "$PY" -c 'import json,sys
for f in json.load(open(sys.argv[1]))["findings"]:
    if f["id"] == sys.argv[2]: print(f["title"], "|", " ; ".join(f.get("examples", [])), "|", f["confidence"])' "$1" "$2"
}

# 1. Clean: same output, one compiled region a step, nothing flagged but the compile time.
run clean
"$PY" "$SCRIPT" > "$W/plain.out" 2> /dev/null
cmp -s "$W/plain.out" "$W/clean.out" && ok "clean: the output is the same recorded or not" || bad "clean: output differs: $(diff "$W/plain.out" "$W/clean.out" | head -3)"
"$PY" - "$W/clean.json" <<'PY' && ok "clean: one compiled region a step, one frame compiled, no recompile" || bad "clean: compiled regions"
import collections, json, sys
names = collections.Counter(e.get("name", "") for e in json.load(open(sys.argv[1]))["traceEvents"])
regions = {n: c for n, c in names.items() if n.startswith("Torch-Compiled Region")}
recompiles = sum(c for n, c in names.items() if n.startswith("trainrx::recompile"))
print(f"  regions {regions}, recompile marks {recompiles}")
assert list(regions) == ["Torch-Compiled Region: 0/0"] and recompiles == 0, (regions, recompiles)
PY
ids=$(ids_of "$W/clean.report.json")
for id in compile.graph_break compile.recompiles; do has "$ids" $id && bad "clean flagged $id" || ok "clean: no $id"; done

# 2. Graph breaks, with the line and the reason.
for kind in print item; do
  run "break_$kind" --graph-break $kind || continue
  [ $kind = print ] && line=$(line_of 'print("hidden"') || line=$(line_of '.item() > 1e9')
  f=$(finding "$W/break_$kind.report.json" compile.graph_break)
  echo "  $kind: $f" | cut -c1-300
  [[ "$f" == *"train_compiled.py:$line"* && "$f" == *"| high" ]] && ok "graph break ($kind) at train_compiled.py:$line" \
    || bad "graph break ($kind): expected train_compiled.py:$line"
done
[[ "$(finding "$W/break_item.report.json" compile.graph_break)" == *"Tensor.item()"* ]] && ok "graph break (item): dynamo's reason" || bad "graph break (item): reason"

# 3. Recompiles: the function and the guard.
run recompile --recompile scalar
f=$(finding "$W/recompile.report.json" compile.recompiles)
echo "  recompile: $f" | cut -c1-300
[[ "$f" == *"forward (train_compiled.py:"* && "$f" == *"self.scale"* ]] && ok "recompiles: forward, the guard on self.scale" || bad "recompiles: $f"

# 4. torch.profiler's traces of the same scripts: what a trace alone shows.
for kind in none print; do
  "$PY" "$SCRIPT" --graph-break $kind --torch-profiler "$W/tp_$kind.json" > /dev/null 2>&1 || bad "torch.profiler $kind run"
  "$TRAINRX" analyze "$W/tp_$kind.json" --format json -o "$W/tp_$kind.report.json" > /dev/null || bad "analyze tp_$kind"
done
"$PY" "$SCRIPT" --recompile scalar --torch-profiler "$W/tp_rc.json" > /dev/null 2>&1 && "$TRAINRX" analyze "$W/tp_rc.json" --format json -o "$W/tp_rc.report.json" > /dev/null || bad "tp_rc"
has "$(ids_of "$W/tp_none.report.json")" compile.graph_break && bad "torch.profiler clean: compile.graph_break" || ok "torch.profiler clean: no compile.graph_break"
[[ "$(finding "$W/tp_print.report.json" compile.graph_break)" == *"| medium" ]] && ok "torch.profiler break: flagged, medium confidence (no line in a trace)" || bad "torch.profiler break"
has "$(ids_of "$W/tp_rc.report.json")" compile.recompiles && ok "torch.profiler recompiles: compilations inside the steps" || bad "torch.profiler recompiles"

# 5. Compile off from outside, and ab measuring compiled vs eager on the unmodified script.
TRAINRX_FIX=compile_off "$TRAINRX" record -o "$W/off.json" -- "$PY" "$SCRIPT" > /dev/null 2>&1
grep -q "Torch-Compiled Region" "$W/off.json" && bad "compile_off: still compiled" || ok "compile_off: the model ran eagerly"
# (--budget 1: the first look's 4 rounds; what is checked is each side's compile time, not a verdict)
"$TRAINRX" ab --cmd --a "$PY $SCRIPT --steps 30" --b "TRAINRX_FIX=compile_off $PY $SCRIPT --steps 30" --trials 4 --budget 1 --format json \
  -o "$W/ab.json" > "$W/ab.out" 2>&1 && ok "ab --cmd: compiled vs TRAINRX_FIX=compile_off ran" || bad "ab --cmd compile: $(tail -3 "$W/ab.out")"
"$PY" - "$W/ab.json" <<'PY' && ok "ab --cmd: A's compile time per trial, B's none, and the note beside the step" || bad "ab --cmd: compile time"
import json, sys
d = json.load(open(sys.argv[1]))
notes = [n for n in d["notes"] if n.startswith("torch.compile:")]
print("  ab:", d["verdict"], "|", notes[0] if notes else "no compile note")
# One per trial, 4 or more (ab goes on until decided, issue 60.6).
assert len(d["a"]["compile_s"]) == len(d["a"]["trial_ms"]) >= 4 and all(x > 0 for x in d["a"]["compile_s"]), d["a"]
assert all(x == 0 for x in d["b"]["compile_s"]), d["b"]
assert notes and "A compiled for" in notes[0]
PY
exit $fail
