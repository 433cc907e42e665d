#!/usr/bin/env bash
# End-to-end: `trainrx analyze` as a user runs it. Usage: cli_test.sh TRAINRX SHARED_DIR
set -u
trainrx=$1; shared=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }

# The built-in sample: planted problems are flagged, in all three formats.
"$trainrx" analyze --sample > "$tmp/sample.txt"; rc=$?
check "sample exits 0" "[ $rc -eq 0 ]"
for id in input.dataloader_bound input.workers sync.host_device optim.zero_grad; do
  check "sample flags $id" "grep -q '$id' '$tmp/sample.txt'"
done
"$trainrx" analyze --sample --format json -o "$tmp/sample.json"
check "json output parses" "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"schema\"]==\"trainrx.analysis/1\"' '$tmp/sample.json'"
"$trainrx" analyze --sample --format md > "$tmp/sample.md"
check "md has a table" "grep -q '^| phase | share of step |' '$tmp/sample.md'"
# The what-if (issue 59): each finding with a transform carries its prediction; --what-if replays
# fixes together; a fix with nothing to change in the trace predicts no saving.
check "findings carry a prediction inside its interval" "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=[f[\"predicted\"] for f in d[\"findings\"] if f[\"id\"]==\"input.workers\"][0]; assert p[\"method\"]==\"replay\" and p[\"low_pct\"]<=p[\"saving_pct\"]<=p[\"high_pct\"] and p[\"saving_pct\"]>10 and abs(p[\"replay_error_pct\"])<2, p' '$tmp/sample.json'"
"$trainrx" analyze --sample --what-if input.workers --what-if anomaly_off --format json -o "$tmp/whatif.json"
check "--what-if replays each fix alone and the fixes together" "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); w=[x for x in d[\"metrics\"][\"what_if\"] if x[\"label\"]==\"asked together\"][0]; alone=[x[\"transforms\"] for x in d[\"metrics\"][\"what_if\"] if x[\"label\"]==\"asked\"]; f=[x[\"predicted\"] for x in d[\"findings\"] if x[\"id\"]==\"input.workers\"][0]; assert w[\"transforms\"]==[\"loader_workers\",\"anomaly_off\"] and alone==[[\"loader_workers\"],[\"anomaly_off\"]] and abs(w[\"saving_pct\"]-f[\"saving_pct\"])<0.01, (w, alone, f)' '$tmp/whatif.json'"

# A fix with a value of one's own (issue 83): --what-if workers=4 replays loader_workers with 4
# workers, at least as fast as the catalog's 2 on the sample (its loading binds); a value the
# transform cannot model is an error naming it.
"$trainrx" analyze --sample --what-if workers=4 --what-if workers=2 --format json -o "$tmp/workers.json"
check "--what-if workers=4 replays 4 workers" "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); a={x[\"transforms\"][0]: x for x in d[\"metrics\"][\"what_if\"] if x[\"label\"]==\"asked\"}; four, two = a[\"loader_workers:workers=4\"], a[\"loader_workers:workers=2\"]; assert \"4 workers\" in four[\"assumptions\"] and four[\"saving_pct\"] >= two[\"saving_pct\"] - 0.5, (four, two)' '$tmp/workers.json'"
check "--what-if amp=fp16 is refused, saying why" "! '$trainrx' analyze --sample --what-if amp=fp16 2>'$tmp/amp.err' && grep -q 'amp=fp16.*bf16 only' '$tmp/amp.err'"

# A real multi-stream trace; a directory of per-rank traces.
hta=$shared/external-traces/hta
if [ -d "$hta" ]; then  # ../shared beside the checkout (CI has it); without it, this part skips
"$trainrx" analyze "$hta/rank0.json.gz" --format json -o "$tmp/rank0.json"
check "rank0 idle 69.44" "python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))[\"metrics\"][\"temporal_breakdown\"][0]; assert abs(t[\"idle_pct\"]-69.44)<0.5, t' '$tmp/rank0.json'"
mkdir "$tmp/ranks"; cp "$hta/rank0.json.gz" "$tmp/ranks/rank0.json.gz"; cp "$hta/nccl_data.json.gz" "$tmp/ranks/rank1.json.gz"
"$trainrx" analyze "$tmp/ranks" --format json -o "$tmp/ranks.json"
check "directory merges two ranks" "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d[\"ranks\"])==2 and len(d[\"metrics\"][\"temporal_breakdown\"])==2, d[\"ranks\"]' '$tmp/ranks.json'"
# ... but those two files are two different jobs (world sizes 16 and 2): said first, and an error with --strict.
"$trainrx" analyze "$tmp/ranks" > "$tmp/ranks.txt" 2>&1
check "different jobs in one directory: warned" "sed -n 2p '$tmp/ranks.txt' | grep -q 'different jobs'"
"$trainrx" analyze --strict "$tmp/ranks" > /dev/null 2> "$tmp/strict.err"; rc=$?
check "different jobs with --strict: exit 2 naming the files" "[ $rc = 2 ] && grep -q 'rank1.json.gz' '$tmp/strict.err'"

# Convert round trip: what we write, we read back with the same analysis.
"$trainrx" convert "$hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz" -o "$tmp/rt.json.gz" 2>/dev/null
"$trainrx" analyze "$hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz" --format json -o "$tmp/a.json"
"$trainrx" analyze "$tmp/rt.json.gz" --format json -o "$tmp/b.json"
check "round trip keeps temporal breakdown" "python3 -c 'import json,sys; a,b=[json.load(open(p))[\"metrics\"] for p in sys.argv[1:]]; assert a==b, (a,b)' '$tmp/a.json' '$tmp/b.json'"

else
  echo "skip: the shared traces ($hta is absent)"
fi

# Bad input: clear message naming the file, exit 2, never a crash.
: > "$tmp/empty.json"; printf '{"traceEvents": [{"ph": "X"' > "$tmp/trunc.json"; head -c 300 /bin/ls > "$tmp/binary.json"
echo '{"hello": 1}' > "$tmp/other.json"
for f in empty binary other; do
  "$trainrx" analyze "$tmp/$f.json" > /dev/null 2> "$tmp/err"; rc=$?
  check "$f.json exits 2" "[ $rc -eq 2 ]"
  check "$f.json error names the file" "grep -q '$f.json' '$tmp/err'"
done
# Cut off inside its events (a killed run, a copy cut short): read up to the last whole event and
# said first as data loss; --strict refuses it, naming the file.
printf '{"traceEvents": [{"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}, {"ph": "X"' > "$tmp/cut.json"
"$trainrx" analyze "$tmp/cut.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
check "a cut-off trace is read, the cut said" "[ $rc -eq 0 ] && grep -q 'truncated_trace' '$tmp/out' && grep -q '1 events read' '$tmp/out'"
# Cut inside its first event, or no events at all: an error naming the file and the loss, never a
# healthy-looking report from nothing (issue 34: exit 0 with "No problem crossed its threshold").
for f in trunc nothing; do
  [ $f = nothing ] && echo '{"traceEvents": []}' > "$tmp/nothing.json"
  "$trainrx" analyze "$tmp/$f.json" > "$tmp/out" 2> "$tmp/err"; rc=$?
  check "$f.json: no events read is exit 2, named" "[ $rc -eq 2 ] && grep -q '$f.json: no events read' '$tmp/err' && ! grep -q 'No problem' '$tmp/out'"
done
"$trainrx" analyze "$tmp/trunc.json" > /dev/null 2> "$tmp/err"
check "the cut is named in the error" "grep -q 'truncated_trace' '$tmp/err'"
"$trainrx" analyze --strict "$tmp/trunc.json" > /dev/null 2> "$tmp/err"; rc=$?
check "--strict: a cut-off trace exits 2 naming the file" "[ $rc -eq 2 ] && grep -q 'trunc.json: truncated' '$tmp/err'"
"$trainrx" analyze /nonexistent.json 2>/dev/null; check "missing file exits 2" "[ $? -eq 2 ]"
"$trainrx" analyze --sample --threshold nope=1 2>/dev/null; check "unknown threshold exits 2" "[ $? -eq 2 ]"

# trainrx diff: a run against itself changes nothing; against a missing file, exit 2 naming it.
d0="$(dirname "$0")/../fixtures/mixed_jobs/jobA_rank0.json"
"$trainrx" diff "$d0" "$d0" --format json -o "$tmp/diff.json"; rc=$?
check "diff of a run against itself: exit 0, no change, no setting differs" \
  "[ $rc -eq 0 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d[\"delta_mean_ns\"]==0 and not d[\"config\"] and not d[\"findings\"] and d[\"a\"][\"steps\"]>0 else 1)' '$tmp/diff.json'"
"$trainrx" diff "$d0" /nonexistent.json > /dev/null 2> "$tmp/err"; rc=$?
check "diff with a missing side: exit 2 naming it" "[ $rc -eq 2 ] && grep -q nonexistent.json '$tmp/err'"

# One set of command-line conventions (docs/conventions.md).
"$trainrx" record -o "$tmp/x.json" python3 train.py --epochs 1 > /dev/null 2> "$tmp/err"; rc=$?
check "record without --: exit 2 with the hint" "[ $rc -eq 2 ] && grep -q 'put the program after --' '$tmp/err'"
"$trainrx" anlyze x > /dev/null 2> "$tmp/err"; rc=$?
check "mistyped command: exit 2, named, nearest suggested" "[ $rc -eq 2 ] && grep -q \"trainrx: error: anlyze: unknown command (did you mean 'analyze'?)\" '$tmp/err'"
"$trainrx" analyze --sample --format md --report "$tmp/sample.md" > /dev/null
check "--report is the report in analyze too" "grep -q '^# ' '$tmp/sample.md' || grep -q '^## ' '$tmp/sample.md'"
python3 - "$tmp" <<'PY'
import json, sys
for name, ms in (("base", [10.0, 10.1, 9.9, 10.0, 10.05, 9.95]), ("cur", [12.0, 12.1, 11.9, 12.0, 12.05, 11.95])):
    json.dump({"schema": "trainrx.baseline/1", "spec": "cnn", "command": False, "unit": "ms per step",
               "fingerprint": {}, "trial_ms": ms, "samples_per_s": [32000 / m for m in ms]}, open(f"{sys.argv[1]}/{name}.json", "w"))
PY
"$trainrx" gate check --baseline "$tmp/base.json" --current "$tmp/cur.json" --format md -o "$tmp/gate.md"; rc=$?
check "gate check -o writes the report; 20% slower fails (exit 1)" "[ $rc -eq 1 ] && grep -q '20.0% slower' '$tmp/gate.md' && grep -q '16.7% lower' '$tmp/gate.md'"

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
