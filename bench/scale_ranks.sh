#!/usr/bin/env bash
# Issue 18's scale figures: a RANKS-rank synthetic set made from a real rank (HTA's nccl_data
# trace: NCCL all-reduces and broadcasts, 9.8 MB per rank) with clock offsets up to +-300 µs and
# one straggler planted (bench/make_rank_set.py), analyzed three ways, each a whole process with
# its wall time and peak RSS:
#   1. `analyze DIR` (rank by rank: above 16 files each rank is read, analyzed and dropped);
#   2. `summarize DIR -o SUMS` (what each node would run on its own ranks), then `analyze SUMS`;
#   3. one rank alone (the working set the rank-by-rank analysis should stay near).
# It checks that the planted straggler is named and every planted clock offset is recovered.
# Usage: bench/scale_ranks.sh       Environment: RANKS (256), WORK (/tmp), TRAINRX (build/trainrx).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
RANKS=${RANKS:-256}
WORK=${WORK:-/tmp}
TRAINRX=${TRAINRX:-build/trainrx}
SHARED=${TRAINRX_SHARED_DIR:-$REPO/../shared}
set_dir=$WORK/trainrx_scale_${RANKS}
sums=$WORK/trainrx_scale_${RANKS}_summaries
if [ ! -d "$set_dir" ]; then
  t0=$(date +%s.%N)
  python3 bench/make_rank_set.py "$SHARED/external-traces/hta/nccl_data.json.gz" "$set_dir.tmp" --ranks "$RANKS" --straggler 17
  mv "$set_dir.tmp" "$set_dir"
  echo "made in $(echo "$(date +%s.%N) - $t0" | bc) s"
fi
echo "== a $RANKS-rank set: $(du -sh "$set_dir" | cut -f1) in $set_dir ($(nproc) CPUs)"
measure() {  # label command... -> "label: W s, R MB peak RSS"
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$WORK/scale.time" "$@" > /dev/null 2> "$WORK/scale.err" || { cat "$WORK/scale.err"; exit 1; }
  read -r wall rss < "$WORK/scale.time"
  printf '%-46s %7.2f s  %7.1f MB peak RSS\n' "$label" "$wall" "$(echo "$rss / 1024" | bc -l)"
}
measure "analyze (rank by rank, $RANKS files)" "$TRAINRX" analyze "$set_dir" --format json -o "$WORK/scale.report.json"
rm -rf "$sums"
measure "summarize (all ranks on this machine)" "$TRAINRX" summarize "$set_dir" -o "$sums"
echo "   summaries: $(du -sh "$sums" | cut -f1) for $RANKS ranks"
measure "analyze of the summaries" "$TRAINRX" analyze "$sums" --format json -o "$WORK/scale.sums.json"
measure "one rank alone (rank-0.json)" "$TRAINRX" analyze "$set_dir/rank-0.json" --format json -o /dev/null
python3 - "$set_dir/manifest.json.planted" "$WORK/scale.report.json" "$WORK/scale.sums.json" <<'PY'
import json, sys
planted = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    r = json.load(open(path))
    s = [f for f in r["findings"] if f["id"] == "dist.straggler"]
    assert s and s[0]["rank"] == planted["straggler"], [f["title"] for f in s]
    worst = 0.0
    for k in r["ranks"]:
        c, off = k["clock"], planted["clock_offset_ns"][str(k["rank"])]
        if c["status"] == "shifted":
            worst = max(worst, abs(c["shift_ns"] + off))
        else:
            assert c["status"] in ("reference", "agrees") and abs(off) <= 20_000, (k["rank"], c, off)
    print("%s: straggler rank %d named (%s); %d clock offsets recovered within %.1f us" % (
        path.rsplit("/", 1)[1], s[0]["rank"], s[0]["title"][:70], len(r["ranks"]), worst / 1e3))
PY
