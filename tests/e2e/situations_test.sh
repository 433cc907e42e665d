#!/usr/bin/env bash
# trainrx record on PyTorch 2.x scripts as real scripts run: DataLoader workers started by fork
# and by spawn (persistent or not: no worker pays the observer's cost, none writes a trace),
# torch.compile (compiled regions seen, no crash), inference_mode and autocast bf16 evaluation,
# planted problems still flagged, and torchrun with 2 Gloo ranks (each rank's trace, analyzed
# together; the launcher writes none).
# Usage: situations_test.sh TRAINRX PYTHON_DIR. Uses $TRAINRX_PYTHON (torch >= 2); exit 77 without.
set -uo pipefail
TRAINRX=$1
SCRIPT=$2/train_situations.py
PY=${TRAINRX_PYTHON:-python3}
$PY -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null || { echo "skip: $PY has no torch 2.x"; exit 77; }
[ -f "$(dirname "$TRAINRX")/libtrainrx_probe.so" ] || { echo "skip: built without LibTorch"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
ids_of() { "$TRAINRX" analyze "$@" --format json | python3 -c 'import json,sys; print(" ".join(sorted({f["id"] for f in json.load(sys.stdin)["findings"]})))'; }

# 1. Workers: fork, spawn, spawn + persistent workers over 2 epochs.
for mode in "fork" "spawn" "spawn --persistent --epochs 2"; do
  tag=${mode%% *}; [[ $mode == *persistent* ]] && tag=persistent
  rm -f "$W/workers.txt"
  $PY "$SCRIPT" --workers 2 --start $mode > "$W/$tag.plain.out" 2>/dev/null
  "$TRAINRX" record -o "$W/$tag.json" -- $PY "$SCRIPT" --workers 2 --start $mode --worker-report "$W/workers.txt" \
    > "$W/$tag.out" 2> "$W/$tag.err" || { bad "$tag: record failed"; tail -5 "$W/$tag.err"; continue; }
  cmp -s "$W/$tag.plain.out" "$W/$tag.out" && ok "$tag: same output with and without recording" || bad "$tag: output differs"
  n=$(wc -l < "$W/workers.txt" 2>/dev/null || echo 0)
  observed=$(awk '$2 == 1' "$W/workers.txt" 2>/dev/null | wc -l)
  [ "$n" -ge 2 ] && [ "$observed" = 0 ] && ok "$tag: $n worker starts, no observer registered in any" \
    || bad "$tag: workers=$n, with an observer=$observed"
  ls "$W" | grep -q "^$tag\.pid" && bad "$tag: a worker wrote a trace" || ok "$tag: only the training process wrote a trace"
  steps=$("$TRAINRX" analyze "$W/$tag.json" --format json | python3 -c 'import json,sys; s=json.load(sys.stdin)["steps"]; print(len(s["rows"]) + len(s["warmup"]))')  # warm-up steps (spawned workers starting, compiling) are steps too
  [ "$steps" -ge 7 ] && ok "$tag: $steps steps" || bad "$tag: $steps steps"
done

# 2. torch.compile: compiled regions in the trace, steps found; compile-time item() calls (dynamo
#    tracing, before the first step) are not per-step syncs.
#    The Python hook's nn.Module ranges stay out of dynamo's way (it traces global hooks: they
#    return at once while compiling) and out of torch.jit.trace's graph.
$PY "$SCRIPT" --compile > "$W/compile.plain.out" 2>/dev/null
"$TRAINRX" record -o "$W/compile.json" -- $PY "$SCRIPT" --compile > "$W/compile.out" 2> "$W/compile.err" \
  || { bad "compile: record failed"; tail -5 "$W/compile.err"; }
cmp -s "$W/compile.plain.out" "$W/compile.out" && ok "compile: same output with and without recording" || bad "compile: output differs"
cat > "$W/jit.py" <<'PY'
import torch
m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
t = torch.jit.trace(m, torch.zeros(2, 4))
print("profiler op in the traced graph:", "profiler" in str(t.graph), tuple(t(torch.ones(1, 4)).shape))
@torch.jit.script
def scripted(x):
    return torch.cosh(x) * 2
scripted(torch.ones(3))
PY
"$TRAINRX" record -o "$W/jit.json" -- $PY "$W/jit.py" 2>/dev/null | grep -q "graph: False (1, 4)" \
  && ok "jit.trace: the traced graph has no trainrx range" || bad "jit.trace: module ranges leaked into the traced graph"
# The probe does not observe TorchScript's own function calls (a scope whose callback list LibTorch
# rebuilds at every autograd node); the ops a scripted function runs are recorded all the same.
grep -q '"aten::cosh"' "$W/jit.json" && ok "jit.script: a scripted function's ops are recorded" \
  || bad "jit.script: the scripted function's aten::cosh is missing from the trace"
grep -q '"Torch-Compiled Region' "$W/compile.json" && ok "compile: compiled regions recorded" || bad "compile: no compiled region in the trace"
# Issue 34: torch.compile's helper processes (they load libtorch only to load a compiled library)
# run no op and write no trace: one file, one rank, no rank claimed twice.
! grep -q "global hooks" "$W/compile.err" && ok "compile: no warning about our module hooks on stderr" \
  || bad "compile: torch warned about trainrx's global module hooks"
extra=$(ls "$W"/compile.pid*.json 2>/dev/null | wc -l)
[ "$extra" = 0 ] && ok "compile: no trace from the compile helpers" || bad "compile: $extra helper traces: $(ls "$W"/compile.pid*.json)"
"$TRAINRX" analyze "$W/compile.json" > "$W/compile.txt" 2>&1
grep -q "from 1 ranks" "$W/compile.txt" && ! grep -q "claimed by" "$W/compile.txt" && ok "compile: analyzed as 1 rank" \
  || bad "compile: ranks: $(grep -m2 'ranks\|claimed' "$W/compile.txt")"
steps=$("$TRAINRX" analyze "$W/compile.json" --format json | python3 -c 'import json,sys; s=json.load(sys.stdin)["steps"]; print(len(s["rows"]) + len(s["warmup"]))')  # warm-up steps (spawned workers starting, compiling) are steps too
[ "$steps" -ge 7 ] && ok "compile: $steps steps" || bad "compile: $steps steps"
ids=$(ids_of "$W/compile.json")
[[ " $ids " == *" sync.host_device "* ]] && bad "compile: compile-time item() counted as per-step syncs ($ids)" || ok "compile: no per-step sync claimed"

# 3. inference_mode evaluation is not flagged, item() every step is; evaluation with autograd on
#    under autocast bf16 is flagged, and the bf16 inputs are recorded.
"$TRAINRX" record -o "$W/inf.json" -- $PY "$SCRIPT" --inference --item > /dev/null 2> "$W/inf.err" || bad "inference: record failed"
ids=$(ids_of "$W/inf.json")
[[ " $ids " == *" eval.grad_enabled "* ]] && bad "inference_mode flagged as grad-enabled eval" || ok "inference_mode: not flagged"
[[ " $ids " == *" sync.host_device "* ]] && ok "item every step flagged" || bad "item: sync.host_device missing ($ids)"
"$TRAINRX" record -o "$W/bf16.json" -- $PY "$SCRIPT" --bf16 --eval-grad > /dev/null 2> "$W/bf16.err" || bad "bf16: record failed"
ids=$(ids_of "$W/bf16.json")
[[ " $ids " == *" eval.grad_enabled "* ]] && ok "autocast bf16: eval.grad_enabled flagged" || bad "bf16: eval.grad_enabled missing ($ids)"
grep -q 'c10::BFloat16\|BFloat16' "$W/bf16.json" && ok "autocast bf16: bf16 inputs recorded" || bad "autocast: no bf16 input types"

# 4. torchrun, 2 ranks with Gloo: both ranks' traces, analyzed as ranks 0 and 1; no launcher trace.
TORCHRUN=$(dirname "$PY")/torchrun
if [ -x "$TORCHRUN" ]; then
  port=$(( 29500 + RANDOM % 400 ))
  "$TRAINRX" record -o "$W/ddp.json" -- "$TORCHRUN" --nproc-per-node 2 --master-port $port "$SCRIPT" --ddp \
    > "$W/ddp.out" 2> "$W/ddp.err" || { bad "torchrun: record failed"; tail -5 "$W/ddp.err"; }
  [ -f "$W/ddp.rank0.json" ] && [ -f "$W/ddp.rank1.json" ] && ok "torchrun: rank0 and rank1 traces" || bad "torchrun: rank traces missing: $(ls "$W" | grep ddp)"
  [ -f "$W/ddp.json" ] && bad "torchrun: the launcher wrote a trace" || ok "torchrun: no launcher trace"
  "$TRAINRX" analyze "$W"/ddp.rank*.json --format json | python3 -c '
import json, sys
r = json.load(sys.stdin)
ranks = sorted({s["rank"] for s in r["steps"]["rows"]})
print("  ranks", ranks, "steps", len(r["steps"]["rows"]))
sys.exit(0 if ranks == [0, 1] else 1)' && ok "torchrun: analyzed together as ranks 0 and 1" || bad "torchrun: ranks wrong"
else
  echo "note: no torchrun next to $PY; torchrun case not run"
fi

[ $fail = 0 ] && echo "situations: all passed" || echo "situations: FAILED"
exit $fail
