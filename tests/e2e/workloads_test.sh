#!/usr/bin/env bash
# Reference workloads end to end: `trainrx workloads`, the default runs train (loss goes down, same
# seed = same loss curve) with no findings, every CPU-effective knob's bad value is flagged with
# its finding id on the run's own trace, the other knobs change what they say (checked in the
# trace or the run's results), and `--nproc 2` trains with Gloo and merges both ranks.
# Usage: workloads_test.sh TRAINRX. Exit 77 (skip) when built without LibTorch.
set -uo pipefail
TRAINRX=$1
BUILD_DIR=$(dirname "$TRAINRX")
[ -x "$BUILD_DIR/trainrx-workload" ] || { echo "skip: built without LibTorch"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
SHORT=(--set steps=6 --set warmup=1 --set eval_every=3)
run() {  # name workload args... -> $W/name.json, $W/name.report.json
  local name=$1 wl=$2; shift 2
  "$TRAINRX" run "$wl" "${SHORT[@]}" "$@" -o "$W/$name.json" --format json --report "$W/$name.report.json" 2> "$W/$name.err" \
    || { bad "$name: run failed"; cat "$W/$name.err"; return 1; }
}
# run -o NAME.json.gz writes gzip (the probe wrote plain JSON through its .tmp file before).
"$TRAINRX" run cnn "${SHORT[@]}" -o "$W/gz.json.gz" > /dev/null 2>&1 \
  && python3 -c 'import gzip, json, sys; json.load(gzip.open(sys.argv[1]))' "$W/gz.json.gz" \
  && ok "run -o x.json.gz writes gzip" || bad "run -o x.json.gz is not gzip JSON"
ids() { python3 -c 'import json,sys; print(" ".join(sorted({f["id"] for f in json.load(open(sys.argv[1]))["findings"]})))' "$1"; }

"$TRAINRX" workloads > "$W/list.txt" || bad "workloads failed"
for k in workers anomaly bias eval_no_grad zero_grad_none item_every_step profiler launch_blocking threads amp slowdown leak; do
  grep -q "^  $k " "$W/list.txt" || bad "workloads does not list $k"
done
grep -q "seeds" "$W/list.txt" && ok "workloads lists knobs and presets" || bad "no presets listed"

# Defaults: train, deterministic, clean.
for wl in cnn lm; do
  run ${wl}_a $wl --set steps=12 && run ${wl}_b $wl --set steps=12 || continue
  python3 - "$W/${wl}_a.report.json" "$W/${wl}_b.report.json" <<'PY' && ok "$wl: loss goes down, same seed gives the same curve" || bad "$wl: loss/determinism"
import json, sys
a, b = (json.load(open(p))["runs"][0] for p in sys.argv[1:3])
la, lb = [s["loss"] for s in a["steps"]], [s["loss"] for s in b["steps"]]
print("  losses", la[0], "->", la[-1])
sys.exit(0 if la == lb and la[-1] < 0.7 * la[0] else 1)
PY
  # The cnn's default layout is NCHW, which model.channels_last names (issue 60.4: channels_last=1
  # measured 1.22x faster on a 2-core CPU); nothing else.
  expect=""; [ $wl = cnn ] && expect="model.channels_last"
  [ "$(ids "$W/${wl}_a.report.json")" = "$expect" ] && ok "$wl defaults: ${expect:-no findings}" || bad "$wl defaults flagged: $(ids "$W/${wl}_a.report.json")"
done

# Each bad setting is flagged with its knob's finding id.
check() {  # name finding workload args...
  local name=$1 id=$2 wl=$3; shift 3
  run "$name" "$wl" "$@" || return
  [[ " $(ids "$W/$name.report.json") " == *" $id "* ]] && ok "$* -> $id" || bad "$*: $id not flagged (got $(ids "$W/$name.report.json"))"
}
check workers0 input.workers cnn --set workers=0 --set data_cost=1500
check starved input.dataloader_bound cnn --preset starved
check anomaly debug.anomaly_detection cnn --set anomaly=1
check profiler debug.profiler cnn --set profiler=1
check blocking debug.launch_blocking cnn --set launch_blocking=1
check item sync.host_device cnn --set item_every_step=1
check zeros optim.zero_grad cnn --set zero_grad_none=0
# The rule's time gates (optimizer >= 5 % of the step, saving >= 0.5 %) move with the machine's load
# (issue 34: beside a CPU hog "foreach=0 batch=8: optim.single_tensor not flagged"); they are unit
# tests (OptimTest). Here its detection, which load does not move: per-parameter ops without
# foreach flagged, the foreach optimizer not, with the gates at 0.
ZERO_GATES=(--threshold optim.single_tensor.optimizer_share_pct=0 --threshold optim.single_tensor.min_saving_pct=0)
check single optim.single_tensor lm --set foreach=0 --set batch=8 "${ZERO_GATES[@]}"
run multi lm --set foreach=1 --set batch=8 "${ZERO_GATES[@]}" \
  && { [[ " $(ids "$W/multi.report.json") " != *" optim.single_tensor "* ]] && ok "foreach=1: no optim.single_tensor even with the gates at 0" \
       || bad "foreach=1 flagged optim.single_tensor"; }
check bias model.bias_before_norm cnn --set bias=1
run lmbias lm --set bias=1 --set steps=3 && { [[ " $(ids "$W/lmbias.report.json") " != *" model.bias_before_norm "* ]] && ok "lm bias=1 (Linear -> LayerNorm) not flagged: LayerNorm does not cancel a per-feature bias" || bad "lm bias=1 flagged model.bias_before_norm, but LayerNorm does not cancel the bias"; }
check evalgrad eval.grad_enabled cnn --set eval_no_grad=0
check leak memory.growth cnn --set leak=1
check threads threads.oversubscribed cnn --set threads=$(( $(nproc) * 4 ))

# Knobs whose finding needs a GPU (or is not implemented yet): they still change what they say.
run cudnn cnn --set cudnn_benchmark=0 --set cudnn_deterministic=1
python3 - "$W/cudnn.json" <<'PY' && ok "cudnn flags reach the trace" || bad "cudnn flags not in the trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
last = {e["name"]: list(e["args"].values())[0] for e in ev if e.get("ph") == "C"}
sys.exit(0 if last.get("trainrx.config.cudnn_benchmark") == 0 and last.get("trainrx.config.cudnn_deterministic") == 1 else 1)
PY
run amp cnn --set amp=bf16 && grep -q 'BFloat16' "$W/amp.json" && ok "amp=bf16 runs convolutions in bfloat16" || bad "amp=bf16 not visible"
run accum cnn --set grad_accum=2
python3 - "$W/accum.json" <<'PY' && ok "grad_accum=2: two forwards per step" || bad "grad_accum not visible"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
steps = sum(1 for e in ev if e.get("name", "").startswith("trainrx::step#"))
fwd = sum(1 for e in ev if e.get("name") == "trainrx::forward")
sys.exit(0 if fwd == 2 * steps else 1)
PY
# slowdown=50000: a 50 ms busy-wait range in every step (a lower bound, whatever the machine's load).
run slow cnn --set steps=12 --set slowdown=50000 && python3 - "$W/slow.json" "$W/slow.report.json" <<'PY' && ok "slowdown adds its busy time to every step" || bad "slowdown not visible"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
busy = [e["dur"] for e in ev if e.get("name") == "trainrx::slowdown"]
steps = json.load(open(sys.argv[2]))["runs"][0]["steps"]
print("  slowdown ranges", len(busy), "shortest %.1f ms" % (min(busy) / 1000), "; steps", len(steps), "shortest %.1f ms" % min(s["ms"] for s in steps))
sys.exit(0 if len(busy) >= 12 and min(busy) >= 50000 and min(s["ms"] for s in steps) >= 50 else 1)
PY
"$TRAINRX" run cnn --set empty_cache=1 -o "$W/ec.json" > /dev/null 2> "$W/ec.err"; rc=$?
[ $rc = 2 ] && grep -q "not implemented" "$W/ec.err" && ok "empty_cache: clear error" || bad "empty_cache: rc=$rc"
"$TRAINRX" run cnn --set nosuch=1 2> "$W/bad.err"; rc=$?
[ $rc = 2 ] && grep -q "unknown knob 'nosuch'" "$W/bad.err" && ok "unknown knob: clear error" || bad "unknown knob: rc=$rc"
"$TRAINRX" run cnn --set workers=-1 2> "$W/bad2.err"; rc=$?
[ $rc = 2 ] && grep -q "non-negative" "$W/bad2.err" && ok "bad value: clear error" || bad "bad value: rc=$rc"

# Knobs visible in the trace / results: workers (loading threads), eval_every, batch, seed.
python3 - "$W/cnn_a.json" "$W/workers0.json" "$W/anomaly.json" <<'PY' && ok "workers>0 loads on worker threads, workers=0 on the training thread; eval_every=3 -> 2 evals" || bad "workers / eval_every not visible"
import json, sys
def tids(path, name):
    return {e["tid"] for e in json.load(open(path))["traceEvents"] if e.get("name") == name}
assert len(tids(sys.argv[1], "aten::flip")) == 2, tids(sys.argv[1], "aten::flip")      # 2 worker threads
assert tids(sys.argv[2], "aten::flip") == tids(sys.argv[2], "trainrx::forward")         # the training thread
ev = json.load(open(sys.argv[3]))["traceEvents"]
assert sum(1 for e in ev if e.get("name") == "trainrx::eval") == 2
PY
run seed1 cnn --set steps=12 --set seed=1 --set batch=16
python3 - "$W/seed1.report.json" "$W/cnn_a.report.json" "$W/seed1.json" <<'PY' && ok "seed changes the curve; batch=16 reaches trace and results" || bad "seed / batch"
import json, sys
a, b = (json.load(open(p))["runs"][0] for p in sys.argv[1:3])
assert [s["loss"] for s in a["steps"]] != [s["loss"] for s in b["steps"]]
assert a["knobs"]["batch"] == "16" and json.load(open(sys.argv[3]))["trainrx"]["batch"] == 16
PY

# Two ranks with Gloo: both traces, merged; accum_sync=1 all-reduces on every micro-step.
run ddp cnn --nproc 2 --set grad_accum=2 && run ddpsync cnn --nproc 2 --set grad_accum=2 --set accum_sync=1
python3 - "$W" <<'PY' && ok "nproc 2: two ranks merged, buckets all-reduced, no_sync halves the all-reduces" || bad "nproc 2"
import json, sys, os
w = sys.argv[1]
rep = json.load(open(os.path.join(w, "ddp.report.json")))
assert len(rep["runs"]) == 2 and {r["rank"] for r in rep["runs"]} == {0, 1}, "runs"
def count(name):
    ev = json.load(open(os.path.join(w, name)))["traceEvents"]
    return sum(1 for e in ev if e.get("name") == "trainrx::allreduce")
a, b = count("ddp.rank0.json"), count("ddpsync.rank0.json")
print("  all-reduce launches (no_sync, every micro-step):", a, b)
assert a > 0 and b == 2 * a, "accum_sync"
PY
# dist.no_sync: flagged on every rank of the accum_sync=1 run, on no rank of the no_sync run.
[[ " $(ids "$W/ddpsync.report.json") " == *" dist.no_sync "* ]] && [[ " $(ids "$W/ddp.report.json") " != *" dist.no_sync "* ]] \
  && ok "accum_sync=1 -> dist.no_sync; no_sync (accum_sync=0) silent" \
  || bad "dist.no_sync: accum_sync=1 got $(ids "$W/ddpsync.report.json"); accum_sync=0 got $(ids "$W/ddp.report.json")"
# Clocks: the two ranks ran on this host (one clock: not shifted). Moved to another host with a
# clock 400 µs ahead (its hostname and baseTimeNanoseconds rewritten), rank 1 is put back on rank
# 0's clock from the ends of their Gloo collectives; --keep-clocks leaves it as recorded.
python3 - "$W" <<'PY' || bad "clock-shifted copy of the ddp traces"
import json, os, sys
w = sys.argv[1]
d = json.load(open(os.path.join(w, "ddp.rank1.json")))
d["trainrx"]["hostname"] = "another-host"
d["baseTimeNanoseconds"] += 400_000
os.makedirs(os.path.join(w, "skew"), exist_ok=True)
json.dump(d, open(os.path.join(w, "skew", "rank1.json"), "w"))
os.symlink(os.path.join(w, "ddp.rank0.json"), os.path.join(w, "skew", "rank0.json"))
PY
"$TRAINRX" analyze "$W/ddp.rank0.json" "$W/ddp.rank1.json" --format json -o "$W/same.json" \
  && "$TRAINRX" analyze "$W/skew" --format json -o "$W/skew.json" && "$TRAINRX" analyze "$W/skew" > "$W/skew.txt" \
  && "$TRAINRX" analyze "$W/skew" --keep-clocks --format json -o "$W/kept.json" \
  && python3 - "$W/same.json" "$W/skew.json" "$W/kept.json" "$W/skew.txt" <<'PY' \
  && ok "clocks: one host not shifted; a rank 400 µs ahead on another host shifted back (left and said when its Gloo ends scatter); --keep-clocks keeps it" || bad "clock alignment"
import json, sys
same, skew, kept = (json.load(open(p)) for p in sys.argv[1:4])
clock = lambda rep, r: next(k for k in rep["ranks"] if k["rank"] == r).get("clock")
assert clock(same, 1)["status"] == "same host", clock(same, 1)
c = clock(skew, 1)
print("  ", c["note"])
# Gloo ranges end when their thread returns, so on one clock their ends are apart by the ranks'
# wake-ups: 13-28 µs on this 2-core machine most runs, 75 µs in the fresh-clone CI of 2026-11-29
# (spread 16.9 µs: a lag the same every collective, which no spread shows). The same-host report
# reads that lag from the same collectives (its note: "end X apart"); the copy moved 400 µs must
# be shifted back by exactly 400 µs plus that lag (the rule's error on Gloo ranges, printed and
# said in its note). Beside a CPU hog (issue 34.12) the ends scattered by 57.5 µs, above the 50 µs
# the rule trusts: then the designed answer is to leave the rank as recorded and say why (the
# shift itself is tested on synthetic traces in tests/analyzers/clocks_test.cc).
import re
lag = re.search(r"end (-?[0-9.]+) µs apart", clock(same, 1)["note"])
lag_ns = float(lag.group(1)) * 1e3 if lag else 0.0
print(f"   the ranks' Gloo ends on one clock: {lag_ns / 1e3:+.1f} µs apart (the rule's error here)")
if c["status"] == "not aligned" and "do not coincide" in c["note"]:
    assert c["shift_ns"] == 0, c
    print("   (busy machine: the Gloo ends scatter too much to shift; left as recorded, and said)")
    assert "clocks: rank 1: not shifted" in open(sys.argv[4]).read()
else:
    assert lag, clock(same, 1)
    assert c["status"] == "shifted" and abs(c["shift_ns"] + 400_000 + lag_ns) < 2_000, (c, lag_ns)
    assert "Gloo ranges end when their threads return" in c["note"], c
    assert "clocks: rank 1: its clock runs" in open(sys.argv[4]).read()
assert clock(kept, 1) is None
# The findings do not depend on the clocks (durations only), but for dist.straggler: on aligned
# clocks the collectives' end times can show the ranks in lockstep where their step medians alone
# do not (issue 50), so the aligned side may judge it where the kept side cannot. No straggler is
# planted: where one is flagged, it is as CPU contention (2 ranks on 2 cores), on either side.
ids = lambda rep: sorted(f["id"] for f in rep["findings"])
assert set(ids(skew)) - {"dist.straggler"} == set(ids(kept)) - {"dist.straggler"}, (ids(skew), ids(kept))
for rep in (skew, kept):
    for f in rep["findings"]:
        if f["id"] == "dist.straggler":
            assert "no free core" in f["title"], f["title"]
PY
run buckets cnn --nproc 2 --set steps=3 --set bucket_mb=0.02
python3 - "$W/buckets.report.json" "$W/ddp.report.json" <<'PY' && ok "bucket_mb=0.02 splits the gradients into more buckets" || bad "bucket_mb"
import json, sys
small, big = (json.load(open(p))["runs"][0]["allreduce_buckets"] for p in sys.argv[1:3])
print("  buckets", big, "->", small)
sys.exit(0 if small > big else 1)
PY
# A planted straggler (rank 1 computes 30 ms more per step) is named, with its cause; the same run
# without it is silent. threads=1 workers=0: one busy thread per rank on this 2-core machine. With
# two threads each steps vary 60-840 ms, where no 30 ms straggler can be told from the noise; with
# loader workers too, CI once made one rank of the clean run a real straggler (contention).
check straggler dist.straggler cnn --nproc 2 --set threads=1 --set workers=0 --set batch=8 --set straggler_ms=30
python3 - "$W/straggler.report.json" <<'PY' && ok "the straggler is rank 1, its cause compute" || bad "straggler finding"
import json, sys
f = next(f for f in json.load(open(sys.argv[1]))["findings"] if f["id"] == "dist.straggler")
print("  ", f["title"])
assert f["rank"] == 1 and f["evidence"]["cause"].startswith("compute"), f
PY
# The same straggler from per-rank summaries (`summarize` where the traces are, `analyze` of the
# summaries) and rank by rank (--per-rank): the same finding, rank and saving as the merged traces.
"$TRAINRX" summarize "$W/straggler.rank0.json" "$W/straggler.rank1.json" -o "$W/summaries" 2> "$W/summarize.err" \
  && "$TRAINRX" analyze "$W/summaries" --format json -o "$W/from_summaries.json" \
  && "$TRAINRX" analyze --per-rank "$W/straggler.rank0.json" "$W/straggler.rank1.json" --format json -o "$W/per_rank.json" \
  && python3 - "$W/straggler.report.json" "$W/from_summaries.json" "$W/per_rank.json" <<'PY' \
  && ok "summaries and --per-rank name the same straggler with the same saving as the merged traces" || bad "summaries: $(cat "$W/summarize.err")"
import json, sys
def straggler(p):
    r = json.load(open(p))
    return next(f for f in r["findings"] if f["id"] == "dist.straggler"), r
merged, m = straggler(sys.argv[1])
for p in sys.argv[2:]:
    f, r = straggler(p)
    print("  ", p.rsplit("/", 1)[1], f["rank"], f["estimated_saving_ns"], merged["estimated_saving_ns"])
    assert f["rank"] == merged["rank"] and f["estimated_saving_ns"] == merged["estimated_saving_ns"], (f, merged)
    assert r["steps"]["count"] == m["steps"]["count"] and r["steps"]["median_ns"] == m["steps"]["median_ns"]
    assert any(i["kind"] == "analyzed_rank_by_rank" for i in r["ingest"]["issues"])
PY
# The same run without it: silent, or (2 ranks x (1 thread + Gloo's) on 2 CPUs: no free core) a
# late rank said to be possibly CPU contention, with the fix for that first; measured once in 3
# runs here (one rank 26 % late with identical work).
run nostraggler cnn --nproc 2 --set threads=1 --set workers=0 --set batch=8 && \
  python3 - "$W/nostraggler.report.json" <<'PY' && ok "no straggler planted -> none flagged, or flagged as CPU contention" || bad "dist.straggler on a clean 2-rank run"
import json, sys
for f in json.load(open(sys.argv[1]))["findings"]:
    assert f["id"] != "dist.rank_mismatch", f["title"]
    if f["id"] != "dist.straggler":
        continue
    print("  ", f["title"])
    assert f["evidence"]["cpu_contention"] == "no free core on its machine", f["evidence"]
    assert f["confidence"] == "low" and f["fix"]["python"].startswith("Give each rank cores of its own first"), f
PY
# Uneven batches (8 samples moved from rank 0 to rank 1, the same global batch): the ranks'
# batch sizes are named from their conv inputs, and rank 1 is the one the others wait for.
check skewed dist.rank_mismatch cnn --nproc 2 --set threads=1 --set workers=0 --set batch=16 --set batch_skew=8
python3 - "$W/skewed.report.json" <<'PY' && ok "batch_skew=8 -> rank 1's batch of 24 named against rank 0's 8" || bad "dist.rank_mismatch finding"
import json, sys
f = next(f for f in json.load(open(sys.argv[1]))["findings"] if f["id"] == "dist.rank_mismatch")
print("  ", f["title"])
assert f["rank"] == 1 and "(8 on rank 0, 24 on rank 1, first input of aten::conv2d)" in f["title"], f
assert f["estimated_saving_ns"] > 0, f
PY
# The what-if's self-check on our own recordings (issue 59): every prediction replays the unchanged
# trace first, and its replay error is part of it; on each run above, each rank's unchanged replay
# gives the measured mean step within 5 % (the median of them within 2 %).
python3 - "$W"/*.report.json <<'PY' && ok "unchanged replay of every run's trace within 5 % of its measured step (median within 2 %)" || bad "replay error"
import json, statistics, sys
errors = {}
for p in sys.argv[1:]:
    for f in json.load(open(p)).get("findings", []):
        pred = f.get("predicted") or {}
        if pred.get("method") == "replay":
            errors[(p.rsplit("/", 1)[1], f["rank"])] = pred["replay_error_pct"]
print("  ", len(errors), "traces' ranks replayed; worst", max((abs(e) for e in errors.values()), default=0.0), "%")
assert len(errors) >= 5, errors
assert all(abs(e) <= 5 for e in errors.values()), errors
assert statistics.median(abs(e) for e in errors.values()) <= 2, errors
PY
exit $fail
