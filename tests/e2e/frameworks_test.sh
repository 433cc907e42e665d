#!/usr/bin/env bash
# Training code no one here wrote, recorded by `trainrx record` (issue 49.7, 49.8):
#   * PyTorch Lightning (tests/python/lightning_ae.py): forward and backward run inside
#     Optimizer.step's closure; the step table must show forward and backward from what ran (not
#     forward 0 %, optimizer half the step), and the module table must name encoder and decoder by
#     their attribute paths (not one merged "Sequential" row);
#   * minGPT's shape (tests/python/gpt_generate.py): generate() under no_grad at iteration 0 must not
#     use up the module ranges: the module table names the GPT's blocks from training calls;
#   * a Hugging Face Trainer run (tests/python/train_hf_trainer.py, transformers + accelerate pinned by
#     scripts/setup): its evaluation every 4 steps, inside the training loop, is forward that trains
#     nothing (counted as other, its ops out of the operator table), and without evaluation none is.
# Usage: frameworks_test.sh TRAINRX PYTHON_DIR. Lightning is installed pinned by scripts/setup;
# without it (or without the probe) the Lightning half is skipped and said.
set -uo pipefail
TRAINRX=$1
PYDIR=$2
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${TRAINRX_PYTHON:-$REPO/.venv/bin/python}
[ -f "$(dirname "$TRAINRX")/libtrainrx_probe.so" ] || { echo "skip: $TRAINRX has no probe (built without LibTorch)"; exit 77; }
"$PY" -c 'import torch' 2>/dev/null || { echo "skip: $PY has no torch"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
. "$(dirname "$0")/lib.sh"

report() {  # name script [args...] -> $W/name.report.json
  local name=$1 script=$2
  shift 2
  "$TRAINRX" record -o "$W/$name.json" -- "$PY" "$PYDIR/$script" "$@" > "$W/$name.out" 2> "$W/$name.err" \
    && "$TRAINRX" analyze "$W/$name.json" --format json -o "$W/$name.report.json" > /dev/null \
    || { bad "$name: record or analyze failed: $(tail -3 "$W/$name.err")"; return 1; }
}

if "$PY" -c 'import lightning' 2>/dev/null; then
  if report lightning lightning_ae.py; then
    "$PY" - "$W/lightning.report.json" <<'PY' && ok "Lightning: forward and backward from what ran inside the closure; encoder and decoder named apart" || bad "Lightning phases or module names"
import json, sys
r = json.load(open(sys.argv[1]))
rows = r["steps"]["rows"]
tot = {k: sum(x[k] for x in rows) for k in ("wall_ns", "forward_ns", "backward_ns", "optimizer_ns")}
share = {k: tot[k] / tot["wall_ns"] for k in ("forward_ns", "backward_ns", "optimizer_ns")}
mods = [m["name"] for m in r["metrics"]["module_table"]["rows"]]
print("  shares:", {k: round(v, 3) for k, v in share.items()}, "| modules:", mods[:4])
assert share["forward_ns"] >= 0.08 and share["backward_ns"] >= 0.05, share
assert share["optimizer_ns"] < 0.35, share
assert any(m.startswith("AE.encoder") for m in mods) and any(m.startswith("AE.decoder") for m in mods), mods
assert "Sequential" not in mods, mods
PY
  fi
else
  echo "note: lightning is not installed in $PY (scripts/setup installs it): the Lightning run is skipped"
fi

if report gpt gpt_generate.py; then
  "$PY" - "$W/gpt.report.json" <<'PY' && ok "minGPT shape: the module table comes from training calls, not generate()" || bad "minGPT module table"
import json, sys
r = json.load(open(sys.argv[1]))
mods = [m["name"] for m in r["metrics"]["module_table"]["rows"]]
print("  modules:", mods[:5])
assert any(m.startswith("GPT.h.0") for m in mods) and any(m.startswith("GPT.head") for m in mods), mods
PY
fi
if "$PY" -c 'import transformers, accelerate' 2>/dev/null; then
  # One intra-op thread: on a busy 2-core machine two threads made the run 100x slower.
  if OMP_NUM_THREADS=1 report hf_eval train_hf_trainer.py --steps 12 --eval-steps 4 \
     && OMP_NUM_THREADS=1 report hf_plain train_hf_trainer.py --steps 12 --eval-steps 1000; then
    "$PY" - "$W/hf_eval.report.json" "$W/hf_plain.report.json" <<'PY' && ok "Trainer: its evaluation inside the steps is not training forward; the steps, batch and modules are Trainer's" || bad "Trainer run"
import json, sys
ev, plain = (json.load(open(p)) for p in sys.argv[1:3])
b_ev, b_plain = ev["metrics"]["step_breakdown"], plain["metrics"]["step_breakdown"]
print("  untrained forward: with evaluation", round(b_ev["untrained_forward"], 4), "without", round(b_plain["untrained_forward"], 4),
      "| steps", ev["steps"]["count"], ev["steps"]["source"])
assert ev["steps"]["count"] + len(ev["steps"]["warmup"]) >= 10, ev["steps"]
assert b_ev["untrained_forward"] > 0.01, b_ev      # 2 evaluations of 4 batches in the 11 steps
assert b_plain["untrained_forward"] < 0.005, b_plain
ops = [o["name"] for o in ev["metrics"]["op_table"]["rows"]]
assert not any("flash_attention" in o for o in ops), ops  # evaluation-only here (training takes another attention path)
mods = [m["name"] for m in ev["metrics"]["module_table"]["rows"]]
assert any(m.startswith("BertForSequenceClassification") for m in mods), mods
PY
  fi
else
  echo "note: transformers / accelerate are not installed in $PY (scripts/setup installs them): the Trainer run is skipped"
fi
exit $fail
