#!/usr/bin/env bash
# The README's CI recipe, A/A, on a user's script (issue 34: an A/A check of a real script gave
# "inconclusive 17.5 % slower", exit 3, once and "pass" the next time). Two identical copies of the
# script stand for the main branch's checkout and the pull request's. Each decision runs, in turn:
#   stored:    record-baseline of main's copy (TRIALS trials), then `gate check` of the PR's copy
#              against the stored samples (the recipe before: fresh trials vs stored samples);
#   rerun:     `gate check --same-job` of the PR's copy, which re-runs main's copy interleaved with
#              it (ABBA) on the same machine (the recipe now).
# Each with --budget BUDGET. Prints every exit code and, per mode, how often CI would go red: with
# exit 3 counted as red (the recipe before) and with --inconclusive pass (the recipe now).
# Usage: bench/gate_recipe_aa.sh SCRIPT_DIR "ARGS" [DECISIONS=8] [TRIALS=6] [BUDGET=120]
#   e.g. bench/gate_recipe_aa.sh ~/examples/word_language_model "main.py --data data/small --epochs 1 --use-optimizer --lr 0.001 --save /tmp/m.pt"
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$1; ARGS=$2; N=${3:-8}; TRIALS=${4:-6}; BUDGET=${5:-120}
T=$(realpath "${TRAINRX:-build/trainrx}")
PY=${PYTHON:-$(pwd)/.venv/bin/python}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cp -r "$SRC" "$W/main"; cp -r "$SRC" "$W/pr"
declare -A red3 redpass
for mode in stored rerun; do red3[$mode]=0; redpass[$mode]=0; done
echo "== $N A/A decisions, $TRIALS trials, budget ${BUDGET}s; $(uptime)"
for i in $(seq 1 "$N"); do
  (cd "$W/main" && "$T" gate record-baseline -o "$W/b.json" --trials "$TRIALS" --cmd -- $PY $ARGS) > /dev/null 2>&1 \
    || { echo "record-baseline failed"; exit 2; }
  # The baseline's command names main's copy by its path; the PR's copy is another path: --same-job.
  sed -i "s|$PY $ARGS|$PY $W/main/$ARGS|" "$W/b.json"
  for mode in stored rerun; do
    extra=(--same-job); [ $mode = stored ] && extra+=(--stored)
    (cd "$W/pr" && "$T" gate check --baseline "$W/b.json" --trials "$TRIALS" --budget "$BUDGET" "${extra[@]}" \
      --cmd -- $PY "$W/pr/$ARGS") > "$W/$mode.txt" 2>&1
    rc=$?
    echo "decision $i $mode: exit $rc: $(grep -m1 'median step time' "$W/$mode.txt" | sed 's/  */ /g')"
    [ $rc = 1 ] || [ $rc = 3 ] && red3[$mode]=$((red3[$mode] + 1))
    [ $rc = 1 ] && redpass[$mode]=$((redpass[$mode] + 1))
  done
done
for mode in stored rerun; do
  echo "$mode: CI red ${red3[$mode]}/$N with exit 3 failing the job; ${redpass[$mode]}/$N with --inconclusive pass"
done
echo "== done; $(uptime)"
