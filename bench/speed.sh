#!/usr/bin/env bash
# Issue 16's figures in one run, side by side on this machine:
#   1. ingest + analysis against HTA (installed from PyPI, .venv-peers) on HTA's ResNet trace tiled
#      COPIES times (20: 240 MB, 1.37 M events), plain and gzipped: wall time and peak RSS of whole
#      processes, interleaved (bench/hta_side_by_side.sh), with the ratios;
#   2. trainrx on one thread and on every CPU, MB/s per core, against the parse limit (simdjson's
#      own DOM parse of the same bytes, no model) (build/bench/trainrx_ingest_bench);
#   3. the gzip inflaters Debian offers on the gzipped trace (build/bench/trainrx_inflate_bench);
#   4. a multi-rank set of RANKS ranks of that trace (8: 1.9 GB), each with its own distributedInfo;
#   5. recording overhead against a plain run and torch.profiler (bench/overhead_vs_torch_profiler.py),
#      per step, and per op from Python (bench/per_op_python.py);
#   6. our own traces: a LONG_STEPS-step cnn run recorded whole (~4 M events, the collector's cap)
#      analyzed beside the tiled Kineto trace (MB/s and events/s of each), and what `record`'s
#      default step window keeps of a long Python run against --steps all.
# Usage: bench/speed.sh            Environment: COPIES (20), REPS (HTA/trainrx runs each, 1), RANKS (8),
#        OVERHEAD_ROUNDS (5; 0 skips part 5), LONG_STEPS (2500; 0 skips part 6),
#        WORK (/tmp: where the large traces are made once).
# Takes about 6 minutes on a 2-core machine (HTA needs ~35-50 s per run on the 240 MB trace).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
COPIES=${COPIES:-20}
REPS=${REPS:-1}
RANKS=${RANKS:-8}
OVERHEAD_ROUNDS=${OVERHEAD_ROUNDS:-5}
LONG_STEPS=${LONG_STEPS:-2500}
WORK=${WORK:-/tmp}
SHARED=${TRAINRX_SHARED_DIR:-$REPO/../shared}
plain=$WORK/trainrx_tiled_${COPIES}.json
gz=$plain.gz
set_dir=$WORK/trainrx_ranks_${RANKS}x${COPIES}

[ -f "$plain" ] || python3 "$SHARED/tools/tile_trace.py" \
  "$SHARED/external-traces/hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz" "$plain" --copies "$COPIES"
[ -f "$gz" ] || python3 -c 'import gzip, shutil, sys; shutil.copyfileobj(open(sys.argv[1], "rb"), gzip.open(sys.argv[2], "wb", 6), 1 << 24)' "$plain" "$gz"
if [ ! -d "$set_dir" ]; then
  mkdir -p "$set_dir.tmp"
  # Rank r of a world of RANKS: the same events, its own distributedInfo (in the first bytes).
  python3 - "$plain" "$set_dir.tmp" "$RANKS" <<'PY'
import re, shutil, sys
src, out, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
for r in range(ranks):
    with open(src, "rb") as f, open(f"{out}/rank-{r}.json", "wb") as o:
        head = f.read(1 << 16)
        head, n = re.subn(rb'"rank":\s*0,\s*"world_size":\s*1', f'"rank":{r},"world_size":{ranks}'.encode(), head, 1)
        if n != 1:
            sys.exit("no distributedInfo rank 0 / world_size 1 near the start of " + src)
        o.write(head)
        shutil.copyfileobj(f, o, 1 << 24)
PY
  mv "$set_dir.tmp" "$set_dir"
fi
cmake --build build --target trainrx trainrx_ingest_bench >/dev/null
cmake --build build --target trainrx_inflate_bench >/dev/null 2>&1 || true

echo "== 1. trainrx vs HTA on the same files ($COPIES copies of HTA's ResNet trace), whole processes"
REPS=$REPS TILE_COPIES=0 bench/hta_side_by_side.sh "$plain" "$gz" | sed -n '/^Wall time/,/^$/p; /^largest/p'

echo "== 2. one thread vs every CPU, and the parse limit"
build/bench/trainrx_ingest_bench "$plain" 3

echo
echo "== 3. gzip inflaters on $(basename "$gz")"
if [ -x build/bench/trainrx_inflate_bench ]; then build/bench/trainrx_inflate_bench "$gz" 3
else echo "(skipped: needs libisal-dev and libdeflate-dev at configure time)"; fi

echo
echo "== 4. a $RANKS-rank set: $(du -shL "$set_dir" | cut -f1) in $set_dir"
/usr/bin/time -f "trainrx analyze: %e s wall, %U s user, peak RSS %M KB" \
  build/trainrx analyze "$set_dir" --format json -o "$WORK/trainrx_ranks.json"
python3 - "$WORK/trainrx_ranks.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
i = d["ingest"]
print(f"  {i['events']} events, {i['bytes'] / 1e9:.2f} GB of JSON; ingest issues: {[x['kind'] for x in i['issues']] or 'none'}")
PY

if [ "$OVERHEAD_ROUNDS" -gt 0 ]; then
  echo
  echo "== 5. recording overhead: plain vs trainrx record vs torch.profiler"
  .venv/bin/python bench/overhead_vs_torch_profiler.py --rounds "$OVERHEAD_ROUNDS"
  echo
  echo "== 5b. per op from Python: trainrx and torch.profiler interleaved in one process"
  .venv/bin/python bench/per_op_python.py --processes 3 --floor
fi

if [ "$LONG_STEPS" -gt 0 ]; then
  echo
  echo "== 6. our own traces: a $LONG_STEPS-step cnn run recorded whole, beside the Kineto trace"
  own=$WORK/trainrx_own_${LONG_STEPS}.json
  [ -f "$own" ] || TRAINRX_STEPS=all build/trainrx run cnn --set steps="$LONG_STEPS" -o "$own" --format json --report /dev/null
  for f in "$plain" "$own"; do
    # From the page cache, as parts 1-2 read: part 4's 1.9 GB can have evicted it (a disk read
    # once made this part report 223 MB/s where a warm read gives 330).
    cat "$f" > /dev/null
    /usr/bin/time -f "%e %M" -o "$WORK/trainrx_time.txt" build/trainrx analyze "$f" --format json -o "$WORK/trainrx_own.json"
    python3 - "$f" "$WORK/trainrx_own.json" "$WORK/trainrx_time.txt" <<'PY'
import json, os, sys
path, report, timing = sys.argv[1:]
wall, rss = (float(x) for x in open(timing).read().split()[-2:])
i = json.load(open(report))["ingest"]
mb = os.path.getsize(path) / 1e6
print(f"  {os.path.basename(path)}: {mb:.0f} MB, {i['events'] / 1e6:.2f} M events in {wall:.2f} s: "
      f"{mb / wall:.0f} MB/s, {i['events'] / wall / 1e6:.2f} M events/s, peak RSS {rss / 1024:.0f} MB")
PY
  done
  echo "  record's default step window on a ${LONG_STEPS}-step Python run (tests/python/train_planted.py):"
  for steps in default all; do
    out=$WORK/trainrx_window_$steps.json
    args=(); [ "$steps" = all ] && args=(--steps all)
    start=$(date +%s.%N)
    build/trainrx record "${args[@]}" -o "$out" -- .venv/bin/python tests/python/train_planted.py --steps "$LONG_STEPS" >/dev/null 2>&1
    echo "    --steps $steps: $(du -m "$out" | cut -f1) MB trace, run $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)") s"
  done
fi
