#!/usr/bin/env bash
# Issue 52: FLOPs, achieved throughput and MFU end to end.
#  1. One training step of tests/python/train_flops.py counted three ways: torch.utils.flop_counter,
#     a torch.profiler trace (record_shapes) analyzed by trainrx, and `trainrx record` of the plain
#     script. trainrx's matmul and convolution FLOPs a step equal flop_counter's within 1 % (both
#     count the same ops); attention (flop_counter leaves the CPU's fused attention out) equals the
#     hand count 2*B*H*S*S*(D+Dv), 3 passes.
#  2. The recording has a CPU peak measured by the start-up hook, so MFU is reported, with its source.
#  3. Public traces: matmul FLOPs a step equal a hand count from their "Input Dims"
#     (tests/e2e/check_flops.py); the A100's dense fp32 peak is named.
# usage: flops_test.sh TRAINRX PYDIR
set -uo pipefail
TRAINRX=$1; PYDIR=$2
PY=${TRAINRX_PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
FIX=$HERE/../fixtures
source "$HERE/lib.sh"
$PY -c 'import torch.utils.flop_counter' 2>/dev/null || { echo "skip: no torch with flop_counter for $PY"; exit 77; }
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cd "$W"

$PY "$PYDIR/train_flops.py" --count > count.json || bad "flop_counter run failed"
$PY "$PYDIR/train_flops.py" --profile prof.json > /dev/null 2>&1 || bad "torch.profiler run failed"
"$TRAINRX" analyze prof.json --format json -o prof.analysis.json 2> prof.err || bad "analyze of the torch.profiler trace failed: $(cat prof.err)"
"$TRAINRX" record -o rec.json -- $PY "$PYDIR/train_flops.py" --steps 8 > rec.out 2>&1 || bad "record failed: $(tail -3 rec.out)"
"$TRAINRX" analyze rec.json --format json -o rec.analysis.json 2> rec.err || bad "analyze of the recording failed: $(cat rec.err)"
"$TRAINRX" analyze rec.json > rec.txt 2>&1 || bad "text analysis of the recording failed"

$PY - <<'PY' && ok "train_flops.py: matmul and conv FLOPs equal flop_counter's, attention the hand count, in both traces" || bad "FLOPs against flop_counter"
import json
count = json.load(open("count.json"))["by_op"]
want = {"matmul": count.get("aten.mm", 0) + count.get("aten.addmm", 0) + count.get("aten.bmm", 0),
        "conv": count.get("aten.convolution", 0) + count.get("aten.convolution_backward", 0),
        # B=8, H=4, S=256 tokens, D=Dv=8: forward and a backward of twice that
        "attention": 3 * 2 * 8 * 4 * 256 * 256 * (8 + 8)}
for name in ("prof", "rec"):
    u = json.load(open(f"{name}.analysis.json"))["metrics"]["utilization"]
    assert u, f"{name}: no utilization"
    got = {c["class"]: c["flops"] for c in u[0]["classes"]}
    print(f"  {name}: " + ", ".join(f"{k} {got.get(k, 0):.6g} (want {v:.6g})" for k, v in want.items()))
    for k, v in want.items():
        assert abs(got.get(k, 0) - v) <= 0.01 * v, (name, k, got.get(k), v)
    assert u[0]["device"] == "CPU" and u[0]["dtype"] == "fp32", u[0]
PY

$PY - <<'PY' && ok "recording: the CPU's measured matmul rate is the peak, MFU reported with its source" || bad "CPU peak / MFU"
import json
u = json.load(open("rec.analysis.json"))["metrics"]["utilization"][0]
print("  peak %.1f GFLOP/s, achieved %.1f GFLOP/s, MFU %.3f (lower bound %s): %s" % (u["peak_tflops"] * 1e3, u["achieved_tflops"] * 1e3, u["mfu"], u["mfu_lower_bound"], u["peak_source"][:80]))
assert u["peak_tflops"] > 0 and "measured at the end of the recording" in u["peak_source"], u
assert u["step_ns"] > 0 and abs(u["mfu"] - u["achieved_tflops"] / u["peak_tflops"]) < 1e-4 * u["mfu"], u
assert abs(u["achieved_tflops"] - u["model_flops"] / u["step_ns"] / 1e3) < 1e-4 * u["achieved_tflops"], u
assert 0 < u["mfu"] < 1.5, u  # a measured rate, not a bound: a step can beat a 512x512 matmul a little, never by far
PY
# A run longer than the step window (`record --steps 5` of 8 steps; by default 200 of a longer run): the
# peak, measured at exit after the window closed, still reaches the trace (its "trainrx" block), so
# the report has an MFU (issue 60: a run past the window had none, and the report blamed the trace).
"$TRAINRX" record --steps 5 -o win.json -- $PY "$PYDIR/train_flops.py" --steps 8 > win.out 2>&1 || bad "record --steps 5 failed: $(tail -3 win.out)"
"$TRAINRX" analyze win.json --format json -o win.analysis.json 2> win.err || bad "analyze of the windowed recording failed: $(cat win.err)"
$PY - <<'PY' && ok "a run past the step window: the CPU peak from the trace's block, MFU reported" || bad "no CPU peak past the window"
import json
d = json.load(open("win.analysis.json"))
u = d["metrics"]["utilization"][0]
print("  steps %d, peak %.1f GFLOP/s, MFU %.3f" % (d["steps"]["count"], u["peak_tflops"] * 1e3, u["mfu"]))
assert d["steps"]["count"] <= 5, d["steps"]
assert u["peak_tflops"] > 0 and u["mfu"] > 0 and "measured at the end of the recording" in u["peak_source"], u
PY
# 6 * N * tokens beside the counted FLOPs: the parameters from torch.profiler's AccumulateGrad shapes,
# the tokens from the embedding lookup, as the script itself counts them.
$PY "$PYDIR/train_flops.py" --lm --count > lm_count.json && $PY "$PYDIR/train_flops.py" --lm --profile lm.json > /dev/null 2>&1 \
  && "$TRAINRX" analyze lm.json --format json -o lm.analysis.json 2> lm.err || bad "the --lm runs failed: $(cat lm.err 2>/dev/null)"
$PY - <<'PY' && ok "--lm: parameters and tokens seen, 6 x N x tokens beside the model FLOPs" || bad "6 N tokens"
import json
c = json.load(open("lm_count.json"))
u = json.load(open("lm.analysis.json"))["metrics"]["utilization"][0]
print("  params %d (script %d), tokens %d (script %d), 6NT %.4g, model FLOPs %.4g, flop_counter %.4g" % (u["params"], c["params"], u["tokens"], c["tokens"], u["six_n_tokens"], u["model_flops"], c["total"]))
assert u["params"] == c["params"] and u["tokens"] == c["tokens"] == 512, u
assert u["six_n_tokens"] == 6 * c["params"] * 512, u
PY
# Activation checkpointing (the block recomputed in the backward, both torch.utils.checkpoint forms):
# the model FLOPs stay those of the plain step; the recomputed ones are the block's forward (its
# linears 2*B*T*d*(3d + d + 4d + 4d) and attention 2*B*H*S*S*(D+Dv)), reported apart, with HFU.
for mode in nonreentrant reentrant; do
  $PY "$PYDIR/train_flops.py" --checkpoint $mode --profile ckpt_$mode.json > /dev/null 2>&1 \
    && "$TRAINRX" analyze ckpt_$mode.json --format json -o ckpt_$mode.analysis.json --threshold utilization.peak_tflops=0.05 2> ckpt.err \
    || { bad "--checkpoint $mode run failed: $(cat ckpt.err 2>/dev/null)"; continue; }
  MODE=$mode $PY - <<'PY' && ok "--checkpoint $mode: recomputed block FLOPs apart from the model FLOPs (which equal the plain step's)" || bad "recompute ($mode)"
import json, os
mode = os.environ["MODE"]
plain = json.load(open("prof.analysis.json"))["metrics"]["utilization"][0]
u = json.load(open(f"ckpt_{mode}.analysis.json"))["metrics"]["utilization"][0]
B, T, d, H = 8, 256, 32, 4
block = 2 * B * T * d * (3 * d + d + 4 * d + 4 * d) + 2 * B * H * T * T * (d // H + d // H)
print(f"  {mode}: model {u['model_flops']:.6g} (plain {plain['model_flops']:.6g}), recomputed {u['recompute_flops']:.6g} (want {block:.6g}), HFU {u['hfu']}")
assert abs(u["model_flops"] - plain["model_flops"]) <= 0.01 * plain["model_flops"], u
assert abs(u["recompute_flops"] - block) <= 0.01 * block, u
assert plain["recompute_flops"] == 0 and plain["hfu"] == 0, plain
hfu = (u["model_flops"] + u["recompute_flops"]) / u["step_ns"] / 1e3 / 0.05  # the peak given: 0.05 TFLOP/s
assert abs(u["hfu"] - hfu) <= 1e-4 * hfu and u["hfu"] > u["mfu"] > 0, u
PY
done
# The C++ reference workload (trainrx run cnn: recorded with shapes in its first steps) against a
# Python twin of its model counted by torch.utils.flop_counter: a stem conv 3->32, a residual block
# of two 32->32 convs, a stride-2 conv 32->64, a block of two 64->64 convs (3x3, padding 1, batch
# norm after each), global average pool, linear 64->10; batch 32 of 3x16x16 (workloads/train.cc).
"$TRAINRX" run cnn --set steps=12 --format json --report cnn.json -o cnn_trace.json > cnn.out 2>&1 || bad "trainrx run cnn: $(tail -3 cnn.out)"
$PY - <<'PY' && ok "trainrx run cnn: conv and matmul FLOPs a step equal flop_counter's on its Python twin" || bad "cnn workload FLOPs"
import json, torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode
def cb(i, o, s): return nn.Sequential(nn.Conv2d(i, o, 3, stride=s, padding=1), nn.BatchNorm2d(o))
class Res(nn.Module):
    def __init__(self, c): super().__init__(); self.a, self.b = cb(c, c, 1), cb(c, c, 1)
    def forward(self, x): return F.relu(self.b(F.relu(self.a(x))) + x)
class Cnn(nn.Module):
    def __init__(self): super().__init__(); self.stem, self.r1, self.down, self.r2, self.fc = cb(3, 32, 1), Res(32), cb(32, 64, 2), Res(64), nn.Linear(64, 10)
    def forward(self, x): return self.fc(F.adaptive_avg_pool2d(self.r2(F.relu(self.down(self.r1(F.relu(self.stem(x)))))), 1).flatten(1))
m = Cnn()
with FlopCounterMode(display=False) as c:
    F.cross_entropy(m(torch.randn(32, 3, 16, 16)), torch.randint(0, 10, (32,))).backward()
n = {str(k): v for k, v in c.get_flop_counts()["Global"].items()}
want = {"conv": n.get("aten.convolution", 0) + n.get("aten.convolution_backward", 0),
        "matmul": sum(n.get(k, 0) for k in ("aten.mm", "aten.addmm"))}
u = json.load(open("cnn.json"))["metrics"]["utilization"][0]
got = {k["class"]: k["flops"] for k in u["classes"]}
print("  cnn: " + ", ".join(f"{k} {got.get(k, 0):.6g} (flop_counter {v:.6g})" for k, v in want.items()) + f"; shaped steps {u['steps_costed']}")
for k, v in want.items():
    assert abs(got.get(k, 0) - v) <= 0.01 * v, (k, got.get(k), v)
assert u["steps_costed"] >= 1, u  # the collector records shapes in its first 3 steps (a slow first one is warm-up)
PY
# trainrx run lm: matmul FLOPs a step against the hand count of its model (workloads/train.cc: two
# blocks of d=64, 4 heads, a causal mask; batch 32 of 32 tokens; vocabulary 128): linears (in_proj
# d->3d, out_proj, fc1 d->4d, fc2, proj; head d->V) once forward and twice backward; the attention's
# two bmm (QK^T and AV, 2*B*H*L*L*(d/H) each) likewise.
"$TRAINRX" run lm --set steps=12 --format json --report lm_run.json -o lm_trace.json > lm_run.out 2>&1 || bad "trainrx run lm: $(tail -3 lm_run.out)"
$PY - <<'PY' && ok "trainrx run lm: matmul and attention-bmm FLOPs a step equal the hand count" || bad "lm workload FLOPs"
import json
B, L, d, H, V, blocks = 32, 32, 64, 4, 128, 2
linear = blocks * 2 * B * L * (d * 3 * d + d * d + d * 4 * d + 4 * d * d + d * d) + 2 * B * L * d * V
bmm = blocks * 2 * (2 * B * H * L * L * (d // H))
u = json.load(open("lm_run.json"))["metrics"]["utilization"][0]
ops = {}
for o in u["ops"]:
    ops[o["name"]] = ops.get(o["name"], 0) + o["flops"]
matmul = next(c["flops"] for c in u["classes"] if c["class"] == "matmul")
print(f"  lm: matmul {matmul:.6g} (hand {3 * (linear + bmm):.6g}), of it bmm {ops.get('aten::bmm', 0):.6g} (hand {3 * bmm:.6g}); shaped steps {u['steps_costed']}")
assert abs(matmul - 3 * (linear + bmm)) <= 0.01 * matmul, (matmul, linear, bmm)
assert abs(ops.get("aten::bmm", 0) - 3 * bmm) <= 0.01 * 3 * bmm, ops
PY
grep -q "Hardware utilization" rec.txt && grep -q "MFU" rec.txt && ok "text report has the utilization section" || bad "no utilization section: $(head -20 rec.txt)"

# 3. Public traces with shapes: a hand count of their matmuls from Input Dims.
for t in "$FIX/hta_negative_queue/rank0.json.gz" "$FIX/tb_plugin_workers/workers0.pt.trace.json.gz"; do
  "$TRAINRX" analyze "$t" --format json -o pub.json 2> pub.err || { bad "analyze $t: $(cat pub.err)"; continue; }
  $PY "$HERE/check_flops.py" "$t" pub.json && ok "$(basename "$t"): matmul FLOPs equal the hand count" || bad "$(basename "$t") hand count"
done
"$TRAINRX" analyze "$FIX/hta_negative_queue/rank0.json.gz" --format json -o nq.json 2>/dev/null
$PY - <<'PY' && ok "A100 trace: the dense fp32 peak named, coverage said" || bad "A100 peak"
import json
u = json.load(open("nq.json"))["metrics"]["utilization"][0]
print("  %s %s: peak %.1f TFLOP/s, MFU %.4f, %.0f%% of kernel time costed" % (u["device"], u["dtype"], u["peak_tflops"], u["mfu"], 100 * u["covered_share"]))
assert u["device"] == "NVIDIA A100-SXM4-80GB" and u["peak_tflops"] == 19.5 and "A100" in u["peak_source"], u
assert u["mfu_lower_bound"] and u["covered_share"] < 0.95, u  # most of its kernels are not matmuls we model
PY
exit $fail
