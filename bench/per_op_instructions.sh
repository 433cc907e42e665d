#!/usr/bin/env bash
# Instructions per observed op (issue 34.13): what the trainrx probe adds to one ATen call, and what
# torch.profiler adds, counted by callgrind (valgrind) instead of timed. Counts do not move with the
# machine's load, so probes of two commits can be compared on a busy machine; they are not time
# (an instruction is not a cycle: a locked store or a cache miss counts once), see
# docs/benchmarks.md "Instructions per op".
#
# Runs build/bench/trainrx_per_op_instructions (bench/per_op_instructions.cc) under callgrind: in
# one process, `--ops` calls of at::add_out on 1-element tensors per mode (plain: probe paused;
# trainrx: recording, past 3 step boundaries; torch.profiler: Kineto CPU activity), `--rounds`
# rounds, the loop only, the calling thread only; prints the last round's instructions per call.
# Valgrind runs the program without the vDSO: clock_gettime is then a system call, whose kernel
# side is not counted, so the count of a clock read is lower here than in a real run.
#
# Usage: bench/per_op_instructions.sh [--build DIR] [--probe SO] [--before SO] [--ops N] [--rounds R]
#                                     [--floor] [--annotate]
#   --probe SO   the probe to measure (default DIR/libtrainrx_probe.so)
#   --before SO  also measure this probe (built from another commit) in the same way
#   --floor      also run with TRAINRX_PROBE_FLOOR=1: a callback that records nothing
#   --annotate   print callgrind_annotate's inclusive counts of the trainrx loop (where they go)
set -euo pipefail
build=build probe="" before="" ops=20000 rounds=2 floor=0 annotate=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --probe) probe=$2; shift 2 ;;
    --before) before=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --floor) floor=1; shift ;;
    --annotate) annotate=1; shift ;;
    *) echo "per_op_instructions.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bin=$build/bench/trainrx_per_op_instructions
probe=${probe:-$build/libtrainrx_probe.so}
for f in "$bin" "$probe" ${before:+"$before"}; do
  [[ -e $f ]] || { echo "per_op_instructions.sh: $f not found (build trainrx_per_op_instructions and trainrx_probe)" >&2; exit 2; }
done
command -v valgrind >/dev/null || { echo "per_op_instructions.sh: valgrind not found" >&2; exit 2; }
work=$(mktemp -d /tmp/per_op_instructions.XXXXXX)
last=$((rounds - 1))

# Ir of a dump labelled "MODE round LAST ..." in directory $1, divided by ops; empty if none.
per_call() {
  local dir=$1 mode=$2 f
  for f in "$dir"/cg.out.*; do
    if grep -q "^desc: Trigger: Client Request: $mode round $last ops " "$f"; then
      awk -v ops="$ops" '/^(totals|summary):/ {printf "%.1f", $2 / ops; exit}' "$f"
      return
    fi
  done
}

# Runs the program on probe $2 with environment $3 (may be empty) into $work/$1; prints a table row.
measure() {
  local name=$1 so=$2 envs=$3 dir=$work/$1
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  if ! env $envs valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$dir/cg.out" \
      "$bin" "$(realpath "$so")" "$ops" "$rounds" "$dir/trace.json" >"$dir/log" 2>&1; then
    echo "per_op_instructions.sh: the run '$name' failed; its log:" >&2
    tail -20 "$dir/log" >&2
    exit 1
  fi
  local plain trainrx kineto
  plain=$(per_call "$dir" plain)
  trainrx=$(per_call "$dir" trainrx)
  kineto=$(per_call "$dir" torch.profiler)
  if [[ $envs != *FLOOR* ]]; then
    # Every counted call must be in the trace: rounds x ops aten::add ranges.
    local seen
    seen=$(grep -o '"name": *"aten::add"' "$dir/trace.json" | wc -l)
    if ((seen < rounds * ops)); then
      echo "per_op_instructions.sh: the trace of '$name' holds $seen aten::add ranges, fewer than $((rounds * ops))" >&2
      exit 1
    fi
  fi
  awk -v n="$name" -v p="$plain" -v t="$trainrx" -v k="${kineto:-0}" 'BEGIN {
    if (k > 0) printf "| %s | %.1f | %.1f | %+.1f | %.1f | %+.1f | %.2f |\n", n, p, t, t - p, k, k - p, (t - p) / (k - p);
    else printf "| %s | %.1f | %.1f | %+.1f | - | - | - |\n", n, p, t, t - p }'
}

echo "Instructions per at::add_out call (callgrind Ir; $ops calls a mode, round $((last + 1)) of $rounds):"
echo
echo "| probe | plain | trainrx recording | trainrx added | torch.profiler | torch.profiler added | added ratio |"
echo "|---|---|---|---|---|---|---|"
measure "probe" "$probe" ""
[[ $floor == 1 ]] && measure "record-nothing callback" "$probe" "TRAINRX_PROBE_FLOOR=1"
[[ -n $before ]] && measure "before" "$before" ""
[[ -n $before && $floor == 1 ]] && measure "before, record-nothing callback" "$before" "TRAINRX_PROBE_FLOOR=1"
if [[ $annotate == 1 ]]; then
  for f in "$work"/probe/cg.out.*; do
    if grep -q "^desc: Trigger: Client Request: trainrx round $last " "$f"; then
      echo
      echo "Where the trainrx loop's instructions go (inclusive, whole loop of $ops calls):"
      callgrind_annotate --inclusive=yes "$f" 2>/dev/null | sed -n '1,60p'
    fi
  done
fi
echo
echo "(callgrind outputs in $work)"
