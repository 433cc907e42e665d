# Parts of scripts/gpu-validate after the build (sourced; BUILD, OUTDIR, PY, QUICK, say, TRAINRX set there).
G=$REPO/tests/gpu

part_smoke() {
  say "smoke: record the python script and the cnn workload on cuda"
  TRAINRX record -o "$OUTDIR/smoke_py.json" -- "$PY" "$G/train_gpu.py" --steps 20 >"$OUTDIR/smoke.log" 2>&1; say "record py: exit $?"
  TRAINRX analyze "$OUTDIR/smoke_py.json" >>"$OUTDIR/smoke.log" 2>&1; say "analyze py: exit $?"
  TRAINRX run cnn --set device=cuda --set steps=20 -o "$OUTDIR/smoke_cnn.json" >>"$OUTDIR/smoke.log" 2>&1; say "run cnn: exit $?"
  tail -80 "$OUTDIR/smoke.log"
}

# Finding ids of a JSON report, space-separated.
finding_ids() { "$PY" -c 'import json,sys; print(" ".join(sorted({f["id"] for f in json.load(open(sys.argv[1])).get("findings", [])})))' "$1" 2>/dev/null; }

part_match() {
  say "match: train_gpu.py recorded by trainrx and by torch.profiler (same configuration, next process)"
  local cfg=(--steps 20 --workers "${MATCH_WORKERS:-0}")
  TRAINRX record -o "$OUTDIR/match_ours.json" -- "$PY" "$G/train_gpu.py" "${cfg[@]}" >"$OUTDIR/match.log" 2>&1; say "record: exit $?"
  "$PY" "$G/train_gpu.py" "${cfg[@]}" --torch-profiler "$OUTDIR/match_torch.json" >>"$OUTDIR/match.log" 2>&1; say "torch.profiler: exit $?"
  "$PY" "$G/compare_traces.py" "$OUTDIR/match_ours.json" "$OUTDIR/match_torch.json" --json "$OUTDIR/match.json" 2>&1 | tee -a "$LOG"
  gzip -f "$OUTDIR/match_torch.json"
}

# planted_case NAME EXPECTED_ID|- COMMAND...: record + analyze, note which ids fired.
planted_case() {
  local name=$1 want=$2; shift 2
  "$@" >"$OUTDIR/p_$name.log" 2>&1; local rc=$?
  local got; got=$(finding_ids "$OUTDIR/p_$name.report.json")
  local verdict=ok
  if [ "$want" = - ]; then [ -z "$got" ] || verdict="fired: $got"; else [[ " $got " == *" $want "* ]] || verdict=MISSED; fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$want" "$rc" "$verdict" "$got" | tee -a "$OUTDIR/planted.tsv" | tee -a "$LOG"
}

# record_analyze REPORT COMMAND...: trainrx record, then analyze into a JSON report.
record_analyze() {
  local report=$1; shift
  timeout 120 "$BUILD/trainrx" record -o /tmp/ra.json -- "$@" && "$BUILD/trainrx" analyze /tmp/ra.json --format json --report "$report"
}

part_planted() {
  say "planted: cnn workload on cuda, one bad knob at a time (name, expected, exit, verdict, fired)"
  : > "$OUTDIR/planted.tsv"
  local base=(run cnn --set device=cuda --set steps=30 --format json)
  local c
  for c in "good|-|" "pin_memory=0|input.pin_memory|--set pin_memory=0" "item_every_step=1|sync.host_device|--set item_every_step=1" \
           "cudnn_benchmark=0|cudnn.benchmark_off|--set cudnn_benchmark=0" "starved|input.dataloader_bound|--preset starved" \
           "launch_blocking=1|debug.launch_blocking|--set launch_blocking=1" "anomaly=1|debug.anomaly_detection|--set anomaly=1" \
           "batch=2|gpu.launch_bound|--set batch=2" "amp=bf16|-|--set amp=bf16"; do
    IFS='|' read -r name want args <<<"$c"
    # shellcheck disable=SC2086
    planted_case "cnn_$name" "$want" "$BUILD/trainrx" "${base[@]}" $args -o "$OUTDIR/p_cnn_$name.json" --report "$OUTDIR/p_cnn_$name.report.json"
    rm -f "$OUTDIR/p_cnn_$name.json"
  done
  say "planted: train_gpu.py (unmodified script, attached by trainrx record --analyze)"
  local py=("$PY" "$G/train_gpu.py" --steps 20 --workers "${MATCH_WORKERS:-0}")
  for c in "good|-|" "pin_memory_0|input.pin_memory|--pin-memory 0" "item|sync.host_device|--item" "cudnn_benchmark_0|cudnn.benchmark_off|--cudnn-benchmark 0" \
           "fp32|precision.fp32_matmul|--amp off --tf32 0" "costly_data|input.dataloader_bound|--costly-data" "anomaly|debug.anomaly_detection|--anomaly" \
           "batch_2|gpu.launch_bound|--batch 2"; do
    IFS='|' read -r name want args <<<"$c"
    # shellcheck disable=SC2086
    planted_case "py_$name" "$want" record_analyze "$OUTDIR/p_py_$name.report.json" "${py[@]}" $args
  done
  # (an assignment before a function call is exported to what the function runs, for that call only)
  CUDA_LAUNCH_BLOCKING=1 planted_case "py_launch_blocking" debug.launch_blocking record_analyze \
    "$OUTDIR/p_py_launch_blocking.report.json" "${py[@]}"
}

part_crash() {
  say "crash: DataLoader workers + CUPTI (python, workers 2) variants"
  local v e a
  if [ "$ASAN" = 1 ]; then  # ASan's runtime must be loaded before anything it checks
    export LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=0:halt_on_error=1
  fi
  for v in "X=1|" "TRAINRX_FLUSH_SECONDS=0|" "X=1|--pin-memory 0" "MALLOC_CHECK_=3|"; do
    e=${v%%|*}; a=${v#*|}
    local log; log=$OUTDIR/crash_$(echo "$e$a" | tr -c 'A-Za-z0-9_.-' _).log
    # shellcheck disable=SC2086
    rm -f /tmp/c.json
    env $e timeout 90 "$BUILD/trainrx" record -o /tmp/c.json -- "$PY" "$G/train_gpu.py" --steps 10 --workers 2 $a >"$log" 2>&1
    local rc=$?
    # Fixed when: the program's exit code is kept (0), the trace is written at exit (not rebuilt
    # from the journal) and holds GPU events.
    local kernels; kernels=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(1 for e in d["traceEvents"] if e.get("cat")=="kernel"))' /tmp/c.json 2>/dev/null || echo "no trace")
    echo "== $e $a: exit $rc, kernels in the trace: $kernels; $(grep -c 'could not write the trace' "$log") 'could not write'; $(grep -v '^steps' "$log" | grep -v '^  ' | head -3 | tr '\n' ' ')" | tee -a "$LOG"
  done
  # GPU records are windowed as CUPTI hands buffers back: a 40-step run recorded with a 5-step
  # window holds about 5 steps of kernels (~111 a step on the CNN), the rest counted outside.
  rm -f /tmp/w.json
  timeout 120 "$BUILD/trainrx" record --steps 5 -o /tmp/w.json -- "$PY" "$G/train_gpu.py" --steps 40 --workers 2 >"$OUTDIR/crash_window.log" 2>&1
  echo "== window: exit $? $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d.get("trainrx",{}); print("kernels", sum(1 for e in d["traceEvents"] if e.get("cat")=="kernel"), "outside", t.get("gpu_records_outside_window"), "over_cap", t.get("gpu_records_over_cap"), "cupti_dropped", t.get("cupti_dropped_records"))' /tmp/w.json 2>&1 | tail -1)" | tee -a "$LOG"
}

# One device call each: fix on a GPU ran longer than a 10-minute call on 2026-11-22 (11 configurations,
# >= 4 trials, 10-20 s a process). `timeout` ends it before the call's limit; the progress lines
# (TRAINRX_PROGRESS_SECONDS) in the log then say how far it got.
fix_workload() {
  local w=$1 t=${FIX_TRIALS:-4}
  say "fix: $w seeds preset on cuda ($t trials)"
  TRAINRX_PROGRESS_SECONDS=0 timeout "${FIX_TIMEOUT:-540}" "$BUILD/trainrx" fix "$w" ${FIX_ARGS:---preset seeds} --set device=cuda \
    --trials "$t" --budget "${FIX_BUDGET:-480}" --format json -o "$OUTDIR/fix_$w.json" >"$OUTDIR/fix_$w.log" 2>&1
  local rc=$?
  say "fix $w: exit $rc$([ $rc = 124 ] && echo ' (timed out)'); $(grep -c '^trainrx: trial' "$OUTDIR/fix_$w.log") trials run"
  # each row: estimated, predicted [interval], measured [interval], inside
  "$PY" - "$OUTDIR/fix_$w.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
r = json.load(open(sys.argv[1]))
print("baseline", r.get("baseline"), "unit", r.get("unit"), "machine", json.dumps(r.get("machine")))
for f in r["fixes"]:
    sav = lambda s: 100 * (1 - 1 / s) if s else float("nan")
    pred = f"{f['predicted_saving_pct']:.1f} [{f['predicted_low_pct']:.1f}, {f['predicted_high_pct']:.1f}]" if "predicted_saving_pct" in f else "-"
    print(f"{f['finding'] or 'all':28} {f['knob'][:40]:40} est {f['estimated_saving_pct']:5.1f}  pred {pred:22} "
          f"meas {f.get('measured_saving_pct', float('nan')):6.1f} [{sav(f['ci_low']):.1f}, {sav(f['ci_high']):.1f}] "
          f"{f['speedup']:.3f}x {f['verdict']} n={f['n_a']}/{f['n_b']} inside={f.get('prediction_inside')} close={f.get('prediction_close')}")
PY
  return 0
}
part_fix() { fix_workload cnn; }
part_fix-lm() { fix_workload lm; }

part_sweep() {
  say "sweep: workers x pin_memory on cuda"
  TRAINRX_PROGRESS_SECONDS=0 TRAINRX sweep cnn --set device=cuda --set data_cost=300 --grid workers=0,2,4 --grid pin_memory=0,1 --trials 4 --format md -o "$OUTDIR/sweep_workers_pin.md" >>"$OUTDIR/sweep.log" 2>&1; say "sweep 1: exit $?"
  [ "$QUICK" = 1 ] && return 0
  TRAINRX_PROGRESS_SECONDS=0 TRAINRX sweep cnn --set device=cuda --set batch=128 --grid amp=off,bf16 --grid channels_last=0,1 --trials 4 --format md -o "$OUTDIR/sweep_amp_cl.md" >>"$OUTDIR/sweep.log" 2>&1; say "sweep 2: exit $?"
}

part_overhead() {
  say "overhead: median step, plain vs trainrx record vs torch.profiler (CPU+CUDA), interleaved"
  local r m
  : > "$OUTDIR/overhead.tsv"
  for r in $(seq "${OVERHEAD_ROUNDS:-5}"); do
    for m in plain record torch; do
      case $m in
        plain) "$PY" "$G/train_gpu.py" --steps 60 --workers 0 --step-times /tmp/st.json >/dev/null 2>&1;;
        record) TRAINRX record -o /tmp/ov.json -- "$PY" "$G/train_gpu.py" --steps 60 --workers 0 --step-times /tmp/st.json >/dev/null 2>&1;;
        torch) "$PY" "$G/train_gpu.py" --steps 60 --workers 0 --step-times /tmp/st.json --torch-profiler /tmp/tp.json >/dev/null 2>&1;;
      esac
      printf '%s\t%s\t%s\n' "$m" "$r" "$("$PY" -c 'import json,statistics; print(statistics.median(json.load(open("/tmp/st.json"))[5:-1]))')" >> "$OUTDIR/overhead.tsv"
    done
  done
  "$PY" - "$OUTDIR/overhead.tsv" <<'PYEOF' | tee -a "$LOG"
import statistics, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m, r, v = line.split("\t"); runs[m].append(float(v))
plain = statistics.median(runs["plain"])
for m, v in runs.items():
    print(f"{m:8} median step {statistics.median(v):7.3f} ms  ratio to plain {statistics.median(v) / plain:.3f}  runs {' '.join(f'{x:.2f}' for x in v)}")
PYEOF
}

# FLOPs and MFU on the device (issue 52): tests/python/train_flops.py on cuda, fp32 and bf16 autocast,
# counted by torch.utils.flop_counter and by trainrx (record and torch.profiler); each side's matmul
# and convolution FLOPs a step, the device, dtype, peak and MFU into flops.tsv.
part_flops() {
  say "flops: train_flops.py on cuda, fp32 and bf16, flop_counter vs trainrx"
  local T="$REPO/tests/python/train_flops.py" amp
  for amp in "" --amp; do
    local tag=fp32; [ -n "$amp" ] && tag=bf16
    "$PY" "$T" --device cuda $amp --count >"$OUTDIR/flops_$tag.count.json" 2>>"$OUTDIR/flops.log"
    "$PY" "$T" --device cuda $amp --profile "$OUTDIR/flops_$tag.prof.json" >>"$OUTDIR/flops.log" 2>&1
    TRAINRX analyze "$OUTDIR/flops_$tag.prof.json" --format json -o "$OUTDIR/flops_$tag.prof.report.json" 2>>"$OUTDIR/flops.log"
    record_analyze "$OUTDIR/flops_$tag.rec.report.json" "$PY" "$T" --device cuda $amp --steps 8 >>"$OUTDIR/flops.log" 2>&1
    "$PY" - "$OUTDIR" "$tag" <<'PY' 2>&1 | tee -a "$OUTDIR/flops.tsv" | tee -a "$LOG"
import json, sys
out, tag = sys.argv[1:3]
count = json.load(open(f"{out}/flops_{tag}.count.json"))["by_op"]
want = {"matmul": sum(count.get(k, 0) for k in ("aten.mm", "aten.addmm", "aten.bmm")),
        "conv": count.get("aten.convolution", 0) + count.get("aten.convolution_backward", 0)}
for side in ("prof", "rec"):
    try:
        u = json.load(open(f"{out}/flops_{tag}.{side}.report.json"))["metrics"]["utilization"][0]
    except Exception as e:
        print(f"{tag}\t{side}\tno utilization: {e}")
        continue
    got = {c["class"]: c["flops"] for c in u["classes"]}
    print("\t".join([tag, side, u["device"], u["dtype"], f"peak {u['peak_tflops']}", f"mfu {u['mfu']:.4f}",
                     f"covered {u['covered_share']:.2f}"] + [f"{k} {got.get(k, 0):.6g} vs {v:.6g}" for k, v in want.items()]))
PY
  done
  # Activation checkpointing on the GPU: the recomputed block apart from the model FLOPs, and HFU.
  "$PY" "$T" --device cuda --checkpoint nonreentrant --profile "$OUTDIR/flops_ckpt.prof.json" >>"$OUTDIR/flops.log" 2>&1
  TRAINRX analyze "$OUTDIR/flops_ckpt.prof.json" --format json -o "$OUTDIR/flops_ckpt.report.json" 2>>"$OUTDIR/flops.log"
  "$PY" - "$OUTDIR" <<'PY' 2>&1 | tee -a "$OUTDIR/flops.tsv" | tee -a "$LOG"
import json, sys
try:
    u = json.load(open(f"{sys.argv[1]}/flops_ckpt.report.json"))["metrics"]["utilization"][0]
    print("\t".join(["ckpt", u["device"], f"model {u['model_flops']:.6g}", f"recompute {u['recompute_flops']:.6g}",
                     f"mfu {u['mfu']:.4f}", f"hfu {u['hfu']:.4f}"]))
except Exception as e:
    print(f"ckpt\tno utilization: {e}")
PY
}

# Predicted against measured on the unmodified script (issue 59 on a GPU, plan item 11): each pair is
# the script with a problem and without it, recorded in the order bad, good, good, bad (on the
# 2026-11-26 H200 the first process of a pair ran its unchanged work up to 40 % slower); the first
# bad trace is replayed with the fix's transform (`analyze --what-if`), the measured saving is
# 1 - mean step without / with (the mean: what throughput follows), each side's two runs pooled;
# the step is the loop's pace (train_gpu.py --pace: wall time between two device syncs over the
# steps between), not the host's step ranges, which end long before the device's work where the
# device runs behind the loop (2026-11-27: AMP read "41 % slower" by them and ~2 % faster by this).
# No interval on the measured side (`fix` gives those), a check of the point; the spread of each
# side's two runs is printed beside it.
predict_pair() {
  local name=$1 transform=$2 bad_env=$3 bad_args=$4 good_args=$5 d=$OUTDIR/predict i side
  local py=("$PY" "$G/train_gpu.py" --steps "${PREDICT_STEPS:-30}" --device "${PREDICT_DEVICE:-cuda}")
  # shellcheck disable=SC2206
  py+=(${PREDICT_ARGS:-})  # e.g. "--batch 1024": every run of every pair
  mkdir -p "$d"
  : > "$d/$name.log"
  # PREDICT_RUNS a side (2 by default), in blocks of bad, good, good, bad.
  local runs=${PREDICT_RUNS:-2} nbad=0 ngood=0 n
  for i in $(seq 1 $((2 * runs))); do
    case $(((i - 1) % 4)) in 0|3) side=bad; n=$((++nbad));; *) side=good; n=$((++ngood));; esac
    local env=X=1 args=$good_args
    [ $side = bad ] && env=$bad_env args=$bad_args
    # shellcheck disable=SC2086
    env $env timeout 180 "$BUILD/trainrx" record -o "$d/$name.$side$n.json" -- "${py[@]}" $args --pace "$d/$name.$side$n.pace.json" >>"$d/$name.log" 2>&1
    if [ $i = 1 ] && [ "$transform" != - ]; then TRAINRX analyze "$d/$name.$side$n.json" --what-if "$transform" --format json -o "$d/$name.$side$n.report.json" >>"$d/$name.log" 2>&1
    else TRAINRX analyze "$d/$name.$side$n.json" --format json -o "$d/$name.$side$n.report.json" >>"$d/$name.log" 2>&1; fi
    [ $i = 1 ] || rm -f "$d/$name.$side$n.json"
  done
  "$PY" "$G/predict_verdict.py" "$d" "$name" 2>&1 | tee -a "$OUTDIR/predict.tsv" | tee -a "$LOG"
}

part_predict() {
  say "predict: what-if replay on train_gpu.py against the same script run without the problem"
  : > "$OUTDIR/predict.tsv"
  # PREDICT_PAIRS="tf32 amp ..." runs those pairs only, in that order (a short device call); the GPU
  # transforms' pairs (issue 59): FP32 -> TF32, pageable -> pinned copies, eager -> one CUDA graph a
  # step, fp32 -> bf16 autocast, eager -> torch.compile
  local want big="--workers 0 --data-on-device --batch 1024" mlp="--workers 0 --data-on-device --batch 4096 --model mlp"
  local rn="--workers 0 --data-on-device --batch ${RN_BATCH:-1024} --model resnet18"
  local vit="--workers 0 --data-on-device --batch ${VIT_BATCH:-512} --model vit"
  for want in ${PREDICT_PAIRS:-allocator item anomaly loader tf32 pinned graphs amp compile tf32-gpu amp-gpu compile-gpu amp-mlp tf32-mlp compile-fp32 compile-mlp}; do
    case $want in
      allocator) predict_pair allocator caching_allocator PYTORCH_NO_CUDA_MEMORY_CACHING=1 "--workers 0" "--workers 0";;
      item) predict_pair item unblock_syncs X=1 "--workers 0 --item" "--workers 0";;
      anomaly) predict_pair anomaly anomaly_off X=1 "--workers 0 --anomaly" "--workers 0";;
      loader) predict_pair loader loader_workers X=1 "--workers 0 --costly-data" "--workers 2 --costly-data";;
      tf32) predict_pair tf32 tf32 X=1 "--workers 0 --amp off --tf32 0" "--workers 0 --amp off --tf32 1";;
      pinned) predict_pair pinned pinned_copies X=1 "--workers 0 --pin-memory 0" "--workers 0 --pin-memory 1";;
      graphs) predict_pair graphs cuda_graphs X=1 "--workers 0" "--workers 0 --cuda-graph";;
      amp) predict_pair amp amp_bf16 X=1 "--workers 0 --amp off" "--workers 0 --amp bf16";;
      compile) predict_pair compile compile_fusion X=1 "--workers 0" "--workers 0 --compile";;
      # GPU-bound: the batch made once on the device, 1024 images (on an H200 ~40 ms of kernels a step)
      tf32-gpu) predict_pair tf32-gpu tf32 X=1 "$big --amp off --tf32 0" "$big --amp off --tf32 1";;
      amp-gpu) predict_pair amp-gpu amp_bf16 X=1 "$big --amp off" "$big --amp bf16";;
      compile-gpu) predict_pair compile-gpu compile_fusion X=1 "$big" "$big --compile";;
      # GEMM-bound, no BatchNorm (added 2026-11-28): AMP and TF32 on a model they were not calibrated on
      amp-mlp) predict_pair amp-mlp amp_bf16 X=1 "$mlp --amp off" "$mlp --amp bf16";;
      # compile's fusion where the eager norm kernels are cuDNN's fp32 ones, and on the GEMM-bound mlp
      compile-fp32) predict_pair compile-fp32 compile_fusion X=1 "$big --amp off" "$big --amp off --compile";;
      compile-mlp) predict_pair compile-mlp compile_fusion X=1 "$mlp" "$mlp --compile";;
      tf32-mlp) predict_pair tf32-mlp tf32 X=1 "$mlp --amp off --tf32 0" "$mlp --amp off --tf32 1";;
      # torchvision's ResNet-18 (added 2026-11-28): the transforms on a public model none was fitted on;
      # channels-last has no transform ("-"): measured only, the data a layout transform is checked on
      tf32-rn) predict_pair tf32-rn tf32 X=1 "$rn --amp off --tf32 0" "$rn --amp off --tf32 1";;
      amp-rn) predict_pair amp-rn amp_bf16 X=1 "$rn --amp off" "$rn --amp bf16";;
      compile-rn) predict_pair compile-rn compile_fusion X=1 "$rn" "$rn --compile";;
      cl-rn) predict_pair cl-rn - X=1 "$rn" "$rn --channels-last";;
      # timm's ViT-S (added 2026-11-28): a transformer none of the transforms was fitted on
      tf32-vit) predict_pair tf32-vit tf32 X=1 "$vit --amp off --tf32 0" "$vit --amp off --tf32 1";;
      amp-vit) predict_pair amp-vit amp_bf16 X=1 "$vit --amp off" "$vit --amp bf16";;
      compile-vit) predict_pair compile-vit compile_fusion X=1 "$vit" "$vit --compile";;
      *) say "predict: no pair '$want' (allocator item anomaly loader tf32 pinned graphs amp compile tf32-gpu amp-gpu compile-gpu amp-mlp tf32-mlp compile-fp32 compile-mlp tf32-rn amp-rn compile-rn cl-rn tf32-vit amp-vit compile-vit)";;
    esac
  done
  [ -z "${PREDICT_PAIRS:-}" ] || { predict_pack; return 0; }
  # the cnn workload on the GPU (plan item 12): model.channels_last must stay silent; the run's CPU load
  TRAINRX run cnn --set device=cuda --set steps=30 --format json -o "$OUTDIR/predict/cnn.json" --report "$OUTDIR/predict/cnn.report.json" >/dev/null 2>&1
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("cnn on cuda: findings", " ".join(sorted({f["id"] for f in r["findings"]})), "| cpu_load", json.dumps(r["metrics"].get("cpu_load")))' "$OUTDIR/predict/cnn.report.json" 2>&1 | tee -a "$LOG"
  predict_pack
}

# The replayed traces stay, compressed (a --costly-data trace is ~280 MB: dropped), out of results.tar.gz.
predict_pack() {
  find "$OUTDIR/predict" -name '*.json' -size +40M -delete
  for f in "$OUTDIR"/predict/*[0-9].json; do [ -f "$f" ] && gzip -f "$f"; done
}

# Memory on CUDA (plan item 6, added 2026-11-24, made a part 2026-11-28; ~3 min): the Memory table of a
# torch.profiler trace and of our recording, growth on --leak, a real out-of-memory recorded and
# analyzed, and a batch sweep whose largest cell runs out of memory (memory.tsv: one line each).
part_memory() {
  say "memory: CUDA memory tables, growth, a real out-of-memory, a sweep into it"
  local d=$OUTDIR/memory; mkdir -p "$d"; : > "$OUTDIR/memory.tsv"
  # shellcheck disable=SC2206
  local py=("$PY" "$G/train_gpu.py" --workers 0 --data-on-device ${MEM_ARGS:-})  # MEM_ARGS="--device cpu": a CPU dry run
  mem_line() {  # NAME REPORT.json: the report's memory devices, OOM and finding ids
    "$PY" - "$1" "$2" <<'PYEOF' 2>&1 | tee -a "$OUTDIR/memory.tsv" | tee -a "$LOG"
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except (OSError, ValueError) as e:
    sys.exit(print(f"{name}\tno report: {e}"))
rows = r.get("metrics", {}).get("memory") or []
keys = ("device", "peak_allocated_bytes", "peak_reserved_bytes", "capacity_bytes", "capacity_source",
        "growth_bytes_per_step", "oom_events", "oom_request_bytes", "oom_op", "release_steps", "fits_samples")
devs = [{k: d.get(k) for k in keys} for d in rows]
print(f"{name}\tmemory {json.dumps(devs)}\tfindings {' '.join(sorted({f['id'] for f in r.get('findings', [])}))}")
PYEOF
  }
  "${py[@]}" --steps 12 --torch-profiler "$d/tp.json" --profile-memory > "$d/tp.log" 2>&1
  TRAINRX analyze "$d/tp.json" --format json -o "$d/tp.report.json" >>"$d/tp.log" 2>&1; mem_line torch-profiler "$d/tp.report.json"
  for v in plain leak empty-cache; do
    local extra=(); [ $v = plain ] || extra=(--$v)
    timeout 120 "$BUILD/trainrx" record -o "$d/$v.json" -- "${py[@]}" --steps 16 "${extra[@]}" > "$d/$v.log" 2>&1
    TRAINRX analyze "$d/$v.json" --format json -o "$d/$v.report.json" >>"$d/$v.log" 2>&1; mem_line "record-$v" "$d/$v.report.json"
    grep -h "max_memory_allocated\|peak" "$d/$v.log" | head -2 | tee -a "$LOG"
  done
  timeout 120 "$BUILD/trainrx" record -o "$d/oom.json" -- "${py[@]}" --steps 3 --batch ${OOM_BATCH:-65536} > "$d/oom.log" 2>&1; say "oom record: exit $?"
  TRAINRX analyze "$d/oom.json" > "$d/oom.txt" 2>&1; say "oom analyze: exit $?"; head -6 "$d/oom.txt" | tee -a "$LOG"
  TRAINRX analyze "$d/oom.json" --format json -o "$d/oom.report.json" >/dev/null 2>&1; mem_line oom "$d/oom.report.json"
  [ "${MEM_SWEEP:-1}" = 0 ] && { say "sweep: skipped (MEM_SWEEP=0)"; return 0; }
  TRAINRX_PROGRESS_SECONDS=0 timeout 200 "$BUILD/trainrx" sweep --cmd "${py[*]} --steps 12 --batch {b}" \
    --grid b=${MEM_GRID:-64,4096,65536} --trials 4 --trial-steps 0 --format md -o "$d/sweep.md" > "$d/sweep.log" 2>&1; say "sweep: exit $?"
  cat "$d/sweep.md" | head -30 | tee -a "$LOG"
  rm -f "$d"/*.json.tmp; find "$d" -name '*.json' -size +30M -delete
}

# Plan items 16-17: watch mode on a device: light mode's CUDA memory, an on-demand capture with
# kernels, the script's own torch.profiler beside it, and the out-of-memory capture (uncaught, then
# caught); each job's exit code against the same script unwatched.
part_watch() {
  say "watch: light mode on cuda, an on-demand capture, beside torch.profiler, out of memory"
  # shellcheck disable=SC2206
  local d=$OUTDIR/watch; mkdir -p "$d"; local py=("$PY" "$G/train_gpu.py" --workers 0 ${WATCH_ARGS:-})  # WATCH_ARGS="--device cpu": a CPU dry run
  watched() {  # NAME ARGS...: the script watched in $d/NAME, an on-demand capture after 100 steps
    local name=$1; shift
    "$BUILD/trainrx" watch -o "$d/$name" --capture-steps 10 -- "${py[@]}" "$@" > "$d/$name.out" 2> "$d/$name.err" &
    local w=$!
    for _ in $(seq 1 600); do grep -qE 'trainrx_step_seconds_count\{rank="0"\} [0-9]{3}' "$d/$name/metrics/rank0.prom" 2>/dev/null && break; sleep 0.1; done
    "$BUILD/trainrx" capture "$d/$name" --steps 10 >> "$d/$name.err" 2>&1
    wait $w; say "watch $name: exit $?"
  }
  watched plain --steps 400
  grep -h "cuda_allocated_bytes\|step_seconds_count" "$d/plain/metrics/rank0.prom" | tee -a "$LOG"
  grep -h "trainrx watch" "$d/plain.err" | tee -a "$LOG"
  ids=$(finding_ids "$d/plain/capture-1/report.json"); say "capture-1 findings: $ids"
  "$PY" -c 'import json,sys; t=json.load(open(sys.argv[1])); print("capture-1 kernels:", sum(1 for e in t["traceEvents"] if e.get("cat")=="kernel"))' \
    "$d/plain/capture-1/trace-rank0.json" 2>&1 | tee -a "$LOG"
  watched own --steps 400 --torch-profiler "$d/own-tp.json"
  cat "$d/own/capture-1/reason-rank0.json" 2>&1 | tee -a "$LOG"; echo | tee -a "$LOG"
  for v in uncaught caught; do
    local extra=(--steps 80 --oom-at 50); [ $v = caught ] && extra+=(--oom-caught)
    "${py[@]}" "${extra[@]}" > "$d/oom-$v-plain.out" 2>&1; local plain=$?
    "$BUILD/trainrx" watch -o "$d/oom-$v" -- "${py[@]}" "${extra[@]}" > "$d/oom-$v.out" 2> "$d/oom-$v.err"
    say "oom $v: exit $? (unwatched $plain)"
    cat "$d/oom-$v/capture-1/reason-rank0.json" 2>&1 | tee -a "$LOG"; echo | tee -a "$LOG"
    grep -h "trainrx watch" "$d/oom-$v.err" | tee -a "$LOG"
    "$PY" -c 'import pickle,sys; s=pickle.load(open(sys.argv[1],"rb")); print("snapshot segments:", len(s["segments"]))' \
      "$d/oom-$v/capture-1/memory-snapshot-rank0.pickle" 2>&1 | tee -a "$LOG"
  done
  find "$d" -name '*.pickle' -size +20M -delete; find "$d" -name '*.json' -size +30M -delete
}
