#!/usr/bin/env bash
# `trainrx export` (issue 53): time, peak memory and size of the Parquet dataset for the 240 MB
# ingest benchmark trace and for a 256-rank set, against `trainrx analyze` of the same input, and a
# DuckDB query over the export (median step per rank, kernel totals). Each command a whole process,
# /usr/bin/time's wall clock and max RSS, median of 3.
#   bench/export_bench.sh TRACE_240MB SET_DIR      (docs/benchmarks.md gives how to make both)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
T=${TRAINRX:-$REPO/build/trainrx}
PY=${TRAINRX_PYTHON:-$REPO/.venv/bin/python}
W=$(mktemp -d /tmp/trainrx-export-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
run3() {  # label, command...: median wall s and max RSS MB of 3 runs
  local label=$1; shift
  local walls=() rss=()
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$W/time" "$@" > /dev/null 2>&1
    read -r wall kb < "$W/time"; walls+=("$wall"); rss+=("$kb")
  done
  printf "  %-34s %6.2f s  %6.0f MB max RSS\n" "$label" "$(printf '%s\n' "${walls[@]}" | sort -n | sed -n 2p)" \
    "$(( $(printf '%s\n' "${rss[@]}" | sort -n | sed -n 2p) / 1024 ))"
}
for input in "$@"; do
  echo "$input ($(du -sh "$input" | cut -f1)):"
  run3 "trainrx analyze --format json" "$T" analyze "$input" --format json
  run3 "trainrx export (Parquet)" "$T" export "$input" -o "$W/ds" --run bench
  echo "  dataset: $(du -sh "$W/ds" | cut -f1), $(find "$W/ds" -name '*.parquet' | wc -l) files"
  TRAINRX_BUILD_DIR=$(dirname "$T") PYTHONPATH=$REPO/python "$PY" - "$W/ds" <<'PY'
import sys, time, trainrx
ds = sys.argv[1]
for q in ["SELECT rank, median(wall_ns) FROM steps WHERE NOT warmup GROUP BY rank",
          "SELECT name, count(*), sum(dur_ns) FROM kernels WHERE step >= 0 GROUP BY name ORDER BY 3 DESC LIMIT 20"]:
    trainrx.sql(q, ds)
    t0 = time.perf_counter(); n = len(trainrx.sql(q, ds)); s = time.perf_counter() - t0
    print(f"  DuckDB {q.split(' FROM ')[1].split()[0]:<8} query          {s:6.3f} s  ({n} rows)")
PY
  rm -rf "$W/ds"
done
