#!/usr/bin/env bash
# The prediction-accuracy corpus: `trainrx fix --cmd` on each public script of corpus.tsv, each
# fix's predicted saving beside its measured one, one JSON report per script in $OUT; then
# `bench/prediction/table.py` reads them all and prints the accuracy per transform.
#
# Usage: bench/prediction/run.sh [NAME...]      (no name: every entry of corpus.tsv, in its order)
# Environment:
#   TRAINRX    the trainrx binary (default build/trainrx, relative to the repository root)
#   OUT        where the reports go (default bench/prediction/out): OUT/NAME.json (the report),
#              OUT/NAME.log (trainrx's output and the setup's)
#   FIX_ARGS   more arguments to `trainrx fix` (default --budget 240); split on spaces
#   PYTHON_BIN the folder put first on PATH, so a command's `python` and `torchrun` are the
#              training environment's (default the project's .venv/bin)
# Each entry runs in its workdir (corpus.tsv's third column, relative to bench/prediction): its
# setup command (the fifth, if any: the synthetic data the script reads, make_data.py) once, then
#   "$TRAINRX" fix --cmd "<command>" [--also FIX ...] --format json -o "$OUT/<name>.json" $FIX_ARGS
# with one --also for each fix of the sixth column (outside fixes no finding may name, so that the
# corpus measures each transform where it applies, not only where a finding fired).
# The scripts write where they always do (checkpoints, logs: see .gitignore). One entry failing
# does not stop the others; the exit status is 1 when any failed.
# Nothing here runs entries in parallel: every trial's time is a measurement (run on a quiet machine).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TRAINRX=${TRAINRX:-build/trainrx}
case $TRAINRX in /*) ;; *) TRAINRX=$ROOT/$TRAINRX ;; esac
OUT=${OUT:-$HERE/out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
FIX_ARGS=${FIX_ARGS---budget 240}
PYTHON_BIN=${PYTHON_BIN:-$ROOT/.venv/bin}
export PATH="$PYTHON_BIN:$PATH"

if [ ! -x "$TRAINRX" ]; then
  echo "run.sh: no trainrx at $TRAINRX (build it first, or set TRAINRX)" >&2
  exit 2
fi

declare -a names=() shapes=() workdirs=() commands=() setups=() alsos=()
# Fields split one by one: `read` with IFS=<tab> would merge an empty setup column into the next.
field() { printf '%s' "$1" | cut -d$'\t' -f"$2"; }
while IFS= read -r line; do
  name=$(field "$line" 1)
  case $name in ''|'#'*) continue ;; esac
  names+=("$name"); shapes+=("$(field "$line" 2)"); workdirs+=("$(field "$line" 3)"); commands+=("$(field "$line" 4)")
  setups+=("$(field "$line" 5)"); alsos+=("$(field "$line" 6)")
done < "$HERE/corpus.tsv"

declare -a wanted=("$@")
if [ ${#wanted[@]} -eq 0 ]; then wanted=("${names[@]}"); fi
for w in "${wanted[@]}"; do
  found=0
  for n in "${names[@]}"; do [ "$n" = "$w" ] && found=1; done
  if [ $found = 0 ]; then echo "run.sh: no entry named $w in corpus.tsv" >&2; exit 2; fi
done

failed=()
for w in "${wanted[@]}"; do
  for i in "${!names[@]}"; do
    [ "${names[$i]}" = "$w" ] || continue
    dir=$HERE/${workdirs[$i]}
    log=$OUT/$w.log
    echo "== $w: ${commands[$i]}   (in ${workdirs[$i]}; $(date -u +%H:%M:%S) UTC; load $(cut -d' ' -f1-3 /proc/loadavg))"
    : > "$log"
    rm -f "$OUT/$w.json"  # a report left from an earlier run must not stand for this one
    if [ -n "${setups[$i]}" ]; then
      if ! (cd "$dir" && bash -c "${setups[$i]}") >> "$log" 2>&1; then
        echo "   setup failed: ${setups[$i]} (see $log)"; failed+=("$w"); continue
      fi
    fi
    start=$SECONDS
    also=()
    IFS=',' read -r -a tokens <<< "${alsos[$i]}"
    for t in "${tokens[@]}"; do [ -n "$t" ] && also+=(--also "$t"); done
    # shellcheck disable=SC2086  # FIX_ARGS is a list of arguments
    if (cd "$dir" && "$TRAINRX" fix --cmd "${commands[$i]}" "${also[@]}" --format json -o "$OUT/$w.json" $FIX_ARGS) >> "$log" 2>&1; then
      echo "   done in $((SECONDS - start)) s: $OUT/$w.json"
    else
      echo "   trainrx fix failed after $((SECONDS - start)) s (see $log)"; failed+=("$w")
    fi
  done
done

echo "== $(( ${#wanted[@]} - ${#failed[@]} )) of ${#wanted[@]} entries measured; the table: $HERE/table.py $OUT"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
