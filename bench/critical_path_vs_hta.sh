#!/usr/bin/env bash
# trainrx's critical path beside HTA's critical_path_analysis (issue 50), in one run:
#  1. The same step of the same trace (ProfilerStep instance 1 of rank 0, HTA's own test window):
#     HTA's critical_path_analysis call alone (its trace load not timed) against trainrx's
#     CriticalPathOf (the rank's dependency model built from the whole trace, then the walk; the
#     read not timed), the median of REPS runs of each, interleaved; then the ratio, the nodes
#     HTA's graph had and the path shares each tool gives.
#  3. The what-if (issue 59): every finding's transform replayed on every rank of the 8-rank DLRM
#     fixture and of the 256-rank set, beside HTA's one-step path of part 1.
#  2. Scale: trainrx's dependency model and critical paths of every step of every rank of sets of
#     16, 64 and 256 ranks made from one real rank (bench/make_rank_set.py, a planted straggler):
#     the time per thousand events must stay flat (linear). HTA's analysis takes one rank only.
#
# Usage: bench/critical_path_vs_hta.sh [TRACE.json[.gz] ...]  (default: HTA's ns_resolution and
#        negative_queue samples in TRACES_DIR)
# Environment:
#   PEERS_VENV   venv holding the pinned HTA (default $REPO/.venv-peers; created if missing)
#   BENCH        trainrx_critical_path_bench (default $REPO/build/bench/trainrx_critical_path_bench)
#   TRACES_DIR   default traces (default $REPO/../shared/external-traces/hta)
#   SCALE_SRC    the rank the sets are made of (default tests/fixtures/dlrm_8ranks' rank 0)
#   REPS         runs of each (default 3)
# Takes about 2 minutes on a 2-core machine (HTA's analysis is most of it).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS_VENV=${PEERS_VENV:-$REPO/.venv-peers}
BENCH=${BENCH:-$REPO/build/bench/trainrx_critical_path_bench}
TRACES_DIR=${TRACES_DIR:-$REPO/../shared/external-traces/hta}
SCALE_SRC=${SCALE_SRC:-$(ls "$REPO"/tests/fixtures/dlrm_8ranks/worker0_*.json.gz 2>/dev/null | head -1)}
REPS=${REPS:-3}

die() { echo "critical_path_vs_hta: $*" >&2; exit 2; }
[ -x "$BENCH" ] || die "no $BENCH (cmake --build build --target trainrx_critical_path_bench)"
PEERS_PY=$(PEERS_VENV=$PEERS_VENV "$REPO/scripts/peers-venv") || die "could not make the peers venv"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cp_vs_hta.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

traces=("$@")
if [ ${#traces[@]} -eq 0 ]; then
  for f in rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz rank0.json.gz; do
    [ -e "$TRACES_DIR/$f" ] && traces+=("$TRACES_DIR/$f")
  done
fi
[ ${#traces[@]} -gt 0 ] || die "no traces (give paths or set TRACES_DIR)"

cat > "$WORK/hta_cp.py" <<'EOF'
import json, logging, statistics, sys, time, warnings
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
logging.getLogger("hta").setLevel(logging.ERROR)
logging.disable(logging.WARNING)
ta = TraceAnalysis(trace_dir=sys.argv[1])
times, graph, ok = [], None, False
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    graph, ok = ta.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=1)
    times.append(time.perf_counter() - t0)
shares = {}
if ok:
    s = graph.summary()
    shares = {str(k): round(float(v), 2) for k, v in (s.to_dict() if hasattr(s, "to_dict") else {}).items()}
print(json.dumps({"ms": 1000 * statistics.median(times), "ok": bool(ok), "nodes": graph.number_of_nodes() if graph else 0,
                  "summary_pct": shares}))
EOF

printf '%-48s %12s %12s %8s %8s  %s\n' "trace (rank 0, ProfilerStep instance 1)" "HTA ms" "trainrx ms" "ratio" "nodes" "shares"
for t in "${traces[@]}"; do
  dir="$WORK/$(basename "$t").d"
  mkdir -p "$dir"
  cp "$t" "$dir/"
  hta=$("$PEERS_PY" "$WORK/hta_cp.py" "$dir" "$REPS" 2>/dev/null | tail -1) || die "HTA failed on $t"
  echo "$hta" >> "$WORK/hta_ms.jsonl"
  ours=$("$BENCH" step "$t" --instance 1 --reps "$REPS")
  python3 - "$t" "$hta" "$ours" <<'EOF'
import json, os, sys
hta, ours = json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"{os.path.basename(sys.argv[1])[:48]:<48} {hta['ms']:>12.1f} {ours['ms']:>12.2f} {hta['ms'] / ours['ms']:>7.0f}x {hta['nodes']:>8}")
print(f"    HTA:     {hta['summary_pct']}")
print(f"    trainrx: {ours['classes_pct']} ({ours['window']}, {ours['events_in_window']} events in the window)")
EOF
done

if [ -n "$SCALE_SRC" ] && [ -e "$SCALE_SRC" ]; then
  echo
  echo "trainrx on rank sets made from $(basename "$SCALE_SRC") (every step of every rank):"
  python3 "$REPO/bench/make_rank_set.py" "$SCALE_SRC" "$WORK/set256" --ranks 256 >/dev/null
  printf '%8s %10s %12s %16s\n' "ranks" "events" "ms" "us per 1k events"
  for n in 16 64 256; do
    mkdir -p "$WORK/set$n.d"
    for ((r = 0; r < n; r++)); do ln -s "$WORK/set256/rank-$r.json" "$WORK/set$n.d/"; done
    "$BENCH" set "$WORK/set$n.d" --reps "$REPS" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
print("%8d %10d %12.1f %16.2f" % (d["ranks"], d["events"], d["ms"], d["us_per_kevent"]))'
  done
fi

echo
echo "trainrx's what-if: every finding's transform replayed (the dependency model, every rank's graph, the ranks replayed together):"
echo "(ms: what the what-if adds to the analysis, the median of paired differences; alone: the what-if by itself;"
echo " vs HTA: HTA's one-step path of part 1 (each trace) over the what-if alone)"
printf '%-32s %6s %8s %8s %6s %7s %8s %8s  %s\n' "set" "ranks" "events" "findings" "preds" "threads" "ms" "alone" "vs HTA"
DLRM_DIR=$(dirname "$SCALE_SRC")
touch "$WORK/hta_ms.jsonl"
for s in "$DLRM_DIR" "$WORK/set256"; do
  [ -e "$s" ] || continue
  for threads in 1 0; do  # one thread, and the analysis's default (the machine's cores)
    # At least 21 pairs: the what-if costs milliseconds, a busy machine's noise as much.
    "$BENCH" whatif "$s" --reps "$(( REPS > 21 ? REPS : 21 ))" --threads "$threads" | python3 -c '
import json, os, sys
d = json.loads(sys.stdin.read())
t = d["threads"] or os.cpu_count()
hta = [json.loads(l)["ms"] for l in open(sys.argv[2]) if l.strip()]
vs = " / ".join("%.0fx" % (h / d["alone_ms"]) for h in hta) if d["alone_ms"] > 0 else "-"
print("%-32s %6d %8d %8d %6d %7d %8.1f %8.1f  %s" % (sys.argv[1][-32:], d["ranks"], d["events"], d["findings"], d["predictions"], t, d["ms"], d["alone_ms"], vs))' "$s" "$WORK/hta_ms.jsonl"
  done
done
