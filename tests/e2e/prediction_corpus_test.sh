#!/usr/bin/env bash
# The prediction-accuracy corpus (bench/prediction, issue 79), a small subset in CI: one public
# script of the corpus under `trainrx fix --cmd` through the corpus's own runner, on a copy of the
# corpus in a temporary folder (the scripts write data and checkpoints where they run). Checks the
# wiring a user of the corpus relies on, not the accuracy (a 2-core CI machine's trials are too few
# to decide small savings): every fix row has a prediction with its interval or says why not, the
# runner's report is complete, and table.py reads it into the accuracy table.
# Usage: prediction_corpus_test.sh TRAINRX [ENTRY]. 77 = skip.
set -uo pipefail
TRAINRX=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
ENTRY=${2:-nanogpt}
PY=${TRAINRX_PYTHON:-}
[ -n "$PY" ] && $PY -c 'import torch' 2>/dev/null || { echo "skip: no python with torch"; exit 77; }
[ -f "$(dirname "$TRAINRX")/libtrainrx_probe.so" ] || { echo "skip: built without LibTorch"; exit 77; }
SRC=$(cd "$(dirname "$0")/../../bench/prediction" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/bench"
cp -r "$SRC" "$W/bench/prediction"
rm -rf "$W/bench/prediction/out"
fail=0
TRAINRX=$TRAINRX PYTHON_BIN=$(dirname "$PY") OUT=$W/out FIX_ARGS="--budget 60 --trials 4 --analysis-steps 30" \
  "$W/bench/prediction/run.sh" "$ENTRY" || { echo "FAIL: run.sh $ENTRY"; tail -20 "$W/out/$ENTRY.log"; fail=1; }
python3 - "$W/out/$ENTRY.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["fixes"]
assert rows, "no fix row: the entry's findings changed; pick another entry"
for r in rows:
    has = "predicted_saving_pct" in r
    assert has != ("not_predictable" in r), f"{r['knob']}: a prediction or a reason, exactly one: {r}"
    if has:
        assert r["predicted_low_pct"] <= r["predicted_saving_pct"] <= r["predicted_high_pct"], r
        assert r["predicted_high_pct"] - r["predicted_low_pct"] <= 50.0 + 1e-9, f"{r['knob']}: wider than 50 points: {r}"
    else:
        assert r["not_predictable"].strip(), f"{r['knob']}: an empty reason"
    assert "transform" in r, r
    print(f"ok: {r['knob']}: " + (f"{r['predicted_saving_pct']:.1f} [{r['predicted_low_pct']:.1f}, {r['predicted_high_pct']:.1f}]"
                                  if has else "not predictable: " + r["not_predictable"][:80]))
asked = [r["knob"] for r in rows if r.get("asked")]
assert asked, f"no row of the entry's --also fixes (corpus.tsv's sixth column): {[r['knob'] for r in rows]}"
print("ok: --also rows: " + ", ".join(asked))
PY
python3 "$SRC/table.py" "$W/out" --rows > "$W/table.md" || { echo "FAIL: table.py"; fail=1; }
grep -q "^| \*\*all\*\* |" "$W/table.md" && grep -q "^| $ENTRY |" "$W/table.md" || { echo "FAIL: the table"; cat "$W/table.md"; fail=1; }
python3 "$SRC/table.py" "$W/out" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["all"]["rows"] >= 1, d' \
  || { echo "FAIL: table.py --json"; fail=1; }
# An empty folder is an error, not an empty table.
mkdir -p "$W/empty"
python3 "$SRC/table.py" "$W/empty" > /dev/null 2>&1 && { echo "FAIL: table.py read an empty folder as a table"; fail=1; }
[ $fail -eq 0 ] && echo "prediction corpus: ok"
exit $fail
