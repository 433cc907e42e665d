#!/usr/bin/env bash
# The HTML report in a real browser: headless Chromium opens each kind of page (analysis of the
# sample, of real HTA traces, of a two-rank set and of a trace with hostile names; fix, sweep, ab
# and gate pages from real runs; a diff page), runs its script, and tests/e2e/html_check.py compares what was
# drawn with the document embedded in the page (and with the same run's --format json): no script
# error, as many finding cards and table rows as the JSON has, a timeline with drawn events, only
# the page's own scripts. A screenshot of each page is kept in ARTIFACTS (default
# build/test-artifacts/html; not committed).
# Usage: html_report_test.sh TRAINRX SHARED_DIR [ARTIFACTS] [PYTHON with torch]. 77 = skip (no Chromium).
set -uo pipefail
TRAINRX=$1
SHARED=$2
HERE=$(cd "$(dirname "$0")" && pwd)
ART=${3:-$(dirname "$TRAINRX")/test-artifacts/html}
PY=${4:-}
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$CHROME" ] || { echo "skip: no Chromium (scripts/setup installs Debian's chromium)"; exit 77; }
mkdir -p "$ART"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
# --no-sandbox: CI containers run as root, where Chromium refuses its sandbox.
chrome() { timeout 90 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --no-first-run "$@" 2> "$W/chrome.err"; }

# check NAME PAGE [EXPECTED_JSON]: the DOM after the script ran, compared; a screenshot kept.
check() {
  local name=$1 page=$2 expected=${3:-}
  chrome --virtual-time-budget=5000 --dump-dom "file://$page" > "$W/$name.dom.html" || { bad "$name: chromium failed: $(tail -3 "$W/chrome.err")"; return; }
  if python3 "$HERE/html_check.py" "$page" "$W/$name.dom.html" $expected; then ok "$name: drawn as its JSON says"; else bad "$name"; fi
  local height=2400; case $name in ab|fix|sweep|gate|record) height=1000;; esac
  chrome --window-size=1280,$height --screenshot="$ART/$name.png" "file://$page" > /dev/null \
    && [ -s "$ART/$name.png" ] || bad "$name: no screenshot"
  echo "  $(stat -c %s "$page") bytes"
}

# 1. Analyses: the sample, its JSON twin, real traces from other people's runs.
"$TRAINRX" analyze --sample --format html -o "$W/sample.html" && "$TRAINRX" analyze --sample --format json -o "$W/sample.json" \
  || bad "analyze --sample --format html"
check sample "$W/sample.html" "$W/sample.json"
for t in rank0 nccl_data; do
  f="$SHARED/external-traces/hta/$t.json.gz"
  [ -f "$f" ] || { echo "note: $f missing, skipped"; continue; }
  "$TRAINRX" analyze "$f" --format html -o "$W/$t.html" && "$TRAINRX" analyze "$f" --format json -o "$W/$t.json" || bad "analyze $t"
  check "hta_$t" "$W/$t.html" "$W/$t.json"
done

# 1b. A trace without steps: no "median step 0 ns" and no empty bar (issue 34), the totals said.
HERE_FIX="$HERE/../fixtures/no_steps_planted.json"
"$TRAINRX" analyze "$HERE_FIX" --format html -o "$W/nosteps.html" && "$TRAINRX" analyze "$HERE_FIX" --format json -o "$W/nosteps.json" \
  || bad "analyze no_steps_planted"
check nosteps "$W/nosteps.html" "$W/nosteps.json"
grep -q '<div class="k">median step</div><div class="v">– (no steps)</div>' "$W/nosteps.dom.html" \
  && grep -q "No training steps were found" "$W/nosteps.dom.html" && ! grep -q 'class="bar"' "$W/nosteps.dom.html" && ok "no steps: said, no zero median, no empty bar" || bad "no-steps page"

# 2. Two ranks (HTA's rank0 trace as rank 0, and as rank 1 with every event 30 % longer: a straggler):
#    one step-time line per rank, and the slow rank's steps on the timeline.
"$TRAINRX" convert "$SHARED/external-traces/hta/rank0.json.gz" -o "$W/r0.json" > /dev/null 2>&1 || true
mkdir -p "$W/ranks"
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
src = json.load(open(f"{w}/r0.json")) if __import__("os").path.exists(f"{w}/r0.json") else None
if src is None:
    sys.exit(0)
for rank, stretch in ((0, 1.0), (1, 1.3)):
    d = json.loads(json.dumps(src))
    d["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
    for e in d.get("traceEvents", []):
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] * stretch
        if isinstance(e.get("dur"), (int, float)):
            e["dur"] = e["dur"] * stretch
    json.dump(d, open(f"{w}/ranks/rank{rank}.json", "w"))
PY
if [ -f "$W/ranks/rank1.json" ]; then
  "$TRAINRX" analyze "$W/ranks" --format html -o "$W/ranks.html" && "$TRAINRX" analyze "$W/ranks" --format json -o "$W/ranks.json" || bad "analyze ranks"
  check two_ranks "$W/ranks.html" "$W/ranks.json"
  grep -q '"ranks_shown":\[0,1\]' "$W/ranks.html" && ok "the straggling rank 1 is on the timeline beside rank 0" || bad "ranks shown: $(grep -o '"ranks_shown":[^]]*]' "$W/ranks.html")"
fi

# 2b. The diff page (trainrx diff --format html): rank 0 against its 30 % stretched copy, both sides'
#     breakdowns side by side, the ranked rows and every table as many rows as the diff's JSON.
if [ -f "$W/ranks/rank1.json" ]; then
  "$TRAINRX" diff "$W/ranks/rank0.json" "$W/ranks/rank1.json" --format html -o "$W/diff.html" \
    && "$TRAINRX" diff "$W/ranks/rank0.json" "$W/ranks/rank1.json" --format json -o "$W/diff.json" || bad "diff --format html"
  check diff "$W/diff.html" "$W/diff.json"
fi

# 3. Hostile names: markup, quotes, ampersands, control characters. They must show as text.
cat > "$W/hostile.json" <<'EOF'
{"traceEvents":[
 {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000},
 {"ph":"X","cat":"cpu_op","name":"</script><script>alert(1)</script><img src=x onerror=alert(2)> & \"q\" 'a' \u0001\u001f","pid":1,"tid":1,"ts":10,"dur":500},
 {"ph":"X","cat":"user_annotation","name":"ProfilerStep#2","pid":1,"tid":1,"ts":1000,"dur":1000},
 {"ph":"X","cat":"cpu_op","name":"</script><script>alert(1)</script><img src=x onerror=alert(2)> & \"q\" 'a' \u0001\u001f","pid":1,"tid":1,"ts":1010,"dur":500}
]}
EOF
"$TRAINRX" analyze "$W/hostile.json" --format html -o "$W/hostile.html" && "$TRAINRX" analyze "$W/hostile.json" --format json -o "$W/hostile_r.json" \
  || bad "analyze hostile"
check hostile "$W/hostile.html" "$W/hostile_r.json"
[ "$(grep -c '<img' "$W/hostile.dom.html")" = 0 ] && ok "hostile: no <img> element was made from a name" || bad "hostile: a name became an element"
grep -q '&lt;/script&gt;&lt;script&gt;alert(1)' "$W/hostile.dom.html" && ok "hostile: the name is shown as text" || bad "hostile: the name is not in the op table as text"

# 4. Experiment pages from real runs (skipped without the workloads).
if [ -x "$(dirname "$TRAINRX")/trainrx-workload" ]; then
  CNN="steps=4 warmup=1 eval_every=0"
  "$TRAINRX" ab --a "cnn $CNN" --b "cnn $CNN slowdown=20%" --trials 4 --format html -o "$W/ab.html" 2> "$W/ab.err" \
    && check ab "$W/ab.html" || bad "ab --format html: $(tail -3 "$W/ab.err")"
  "$TRAINRX" fix cnn --set anomaly=1 --set steps=4 --set warmup=1 --set eval_every=0 --trials 4 --budget 1 --format html -o "$W/fix.html" 2> "$W/fix.err" \
    && check fix "$W/fix.html" || bad "fix --format html: $(tail -3 "$W/fix.err")"
  "$TRAINRX" sweep cnn --grid workers=0,2 --grid batch=16,32 --set steps=4 --set warmup=1 --set eval_every=0 --trials 2 \
    --format html -o "$W/sweep.html" 2> "$W/sweep.err" && check sweep "$W/sweep.html" || bad "sweep --format html: $(tail -3 "$W/sweep.err")"
  "$TRAINRX" run cnn --set steps=4 --set warmup=1 --set eval_every=0 -o "$W/run.json" --format html --report "$W/run.html" 2> "$W/run.err" \
    && check run "$W/run.html" || bad "run --format html: $(tail -3 "$W/run.err")"
  grep -q '"samples_per_s"' "$W/run.html" && ok "run: the workload's own figures are in the page" || bad "run: no run results in the page"
else
  echo "note: built without LibTorch: no fix/sweep/ab/run pages"
fi
# record: the report's format belongs to --analyze.
"$TRAINRX" record --format html -- true > /dev/null 2> "$W/rec.err"; rc=$?
[ $rc = 2 ] && grep -q "add --analyze" "$W/rec.err" && ok "record --format without --analyze is a usage error" || bad "record --format alone: exit $rc $(cat "$W/rec.err")"
if [ -n "$PY" ] && "$PY" -c "import torch" 2> /dev/null; then
  cat > "$W/tiny.py" <<'EOF'
import torch
m = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(6):
    opt.zero_grad()
    m(torch.randn(16, 8)).sum().backward()
    opt.step()
EOF
  "$TRAINRX" record -o "$W/tiny_trace.json" --analyze --format html --report "$W/record.html" -- "$PY" "$W/tiny.py" > /dev/null 2> "$W/record.err" \
    && check record "$W/record.html" || bad "record --analyze --format html: $(tail -3 "$W/record.err")"
fi
base() {  # file values...
  local f=$1; shift
  local vals; vals=$(IFS=,; echo "$*")
  printf '{"schema":"trainrx.baseline/1","spec":"cnn","command":false,"unit":"ms per step","fingerprint":{"cpus":"2","cpu_model":"m"},"trial_ms":[%s],"samples_per_s":[]}\n' "$vals" > "$f"
}
base "$W/a.json" 50 50.2 49.8 50.1 49.9 50.05
base "$W/slow.json" 60 60.3 59.8 60.1 59.9 60.2
"$TRAINRX" gate check --baseline "$W/a.json" --current "$W/slow.json" --format html -o "$W/gate.html"; rc=$?
[ $rc = 1 ] && ok "gate check --format html keeps the exit code (1: regression)" || bad "gate html exit $rc"
check gate "$W/gate.html"

exit $fail
