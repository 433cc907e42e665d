#!/usr/bin/env bash
# Makes a large Kineto trace (the HTA ResNet trace tiled 16x: 192 MB, 1.1 M events) and measures
# trainrx ingest+analysis throughput and peak memory on it. Usage: bench/ingest.sh [copies]
set -euo pipefail
cd "$(dirname "$0")/.."
copies=${1:-16}
shared=${TRAINRX_SHARED_DIR:-../shared}
out=/tmp/trainrx_tiled_${copies}.json
[ -f "$out" ] || python3 "$shared/tools/tile_trace.py" \
  "$shared/external-traces/hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz" "$out" --copies "$copies"
cmake --build build --target trainrx_ingest_bench >/dev/null
taskset -c 0 build/bench/trainrx_ingest_bench "$out" 3
