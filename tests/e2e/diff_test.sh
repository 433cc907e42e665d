#!/usr/bin/env bash
# `trainrx diff` on recorded pairs of one unmodified script (tests/python/train_planted.py, 10
# steps, one thread each): a plain A/A says "within noise" with no ranked row; planted regressions
# (anomaly mode, .item() every step, a smaller batch, bias before BatchNorm, a NaN check with
# .item() in the loader's collate) are each named by the diff's top row, which names the nn.Modules its
# op ran in; on every pair the rows add up (phases = the change
# in the mean step, ops + time in no op = the same, median = mean + the stated residual); the HTML
# diff is written and holds the ranked rows. Multi-rank: HTA's two-rank NCCL trace (rank 0's file,
# and a copy of it as rank 1), against the same set with rank 1's all-reduce kernels 5 ms longer:
# the diff names rank 1 and the all-reduce. Usage: diff_test.sh TRAINRX [SHARED_DIR]. 77 = skip.
set -uo pipefail
TRAINRX=$1
SHARED=${2:-}
PY=${TRAINRX_PYTHON:-}
[ -n "$PY" ] && $PY -c 'import torch' 2>/dev/null || { echo "skip: no python with torch"; exit 77; }
[ -f "$(dirname "$TRAINRX")/libtrainrx_probe.so" ] || { echo "skip: built without LibTorch"; exit 77; }
SCRIPT=$(cd "$(dirname "$0")/../python" && pwd)/train_planted.py
W=$(mktemp -d)
trap '[ "$fail" = 0 ] && rm -rf "$W"' EXIT  # kept on a failure, for its diffs
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
cd "$W" || exit 1

rec() {
  local out=$1
  shift
  "$TRAINRX" record -o "$out.json" -- "$PY" "$SCRIPT" --steps 10 --threads 1 "$@" > /dev/null 2> "$out.err" \
    || bad "record $out: $(tail -3 "$out.err")"
}
rec a
rec a2
rec anomaly --anomaly
rec item --item
rec batch --batch 8
rec bias --conv-bias
rec lsync --loader-sync

# check NAME B: diff a.json B.json as JSON, the invariant, and the top ranked row against NAME's rule.
check() {
  local name=$1 b=$2
  "$TRAINRX" diff a.json "$b" --format json -o "$name.diff.json" 2> "$name.diff.err" || { bad "$name: diff failed: $(tail -3 "$name.diff.err")"; return; }
  "$PY" - "$name" "$name.diff.json" <<'PY' && ok "$name: top row and rows add up" || bad "$name (the diff: $(pwd)/$name.diff.json)"
import json, re, sys
name, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
tol = 2000  # ns: rounding of the per-step means
phases = sum(r["delta_ns"] for r in d["phases"])
assert abs(phases - d["delta_mean_ns"]) < tol, f"phases add up to {phases}, the mean step changed {d['delta_mean_ns']}"
ops = d["ops_explained_ns"] + d["outside"]["delta_ns"]
assert abs(ops - d["delta_mean_ns"]) < tol, f"ops + time in no op = {ops}, the mean step changed {d['delta_mean_ns']}"
assert abs(phases + d["residual_ns"] - d["delta_median_ns"]) < tol, \
    f"rows {phases} + residual {d['residual_ns']} != the change in the median step {d['delta_median_ns']}"
top = d["ranked"][0] if d["ranked"] else None
desc = f"{top['kind']} {top['name']} {top['contribution_ns'] / 1e6:+.3f} ms ({top.get('note', '')})" if top else "none"
print(f"  {name}: step {d['delta_mean_ns'] / 1e6:+.3f} ms (median {d['delta_median_ns'] / 1e6:+.3f}), "
      f"within noise: {d['within_noise']}, top row: {desc}")
if name == "aa":
    assert d["within_noise"] and not d["ranked"], f"A/A: not within noise, top row {desc}"
else:
    assert top is not None, "no ranked row"
    ok_names = {
        # the setting, with anomaly mode's NaN checks of every gradient and its finding under it (issue 51.3)
        "anomaly": lambda r: r["kind"] == "setting" and r["name"].startswith("config.anomaly_mode 0 -> 1")
                             and "debug.anomaly_detection" in r["explains"],
        # the host read-back, new in every step
        "item": lambda r: r["name"] in ("aten::item", "aten::_local_scalar_dense", "sync.host_device"),
        # the input shape that changed
        "batch": lambda r: r["kind"] == "shape" and re.search(r"input \d \[16,[\d,]*\] -> \[8,", r["name"]),
        # the bias that conv2d gained (its third input), or the finding
        "bias": lambda r: (r["kind"] == "shape" and r["name"].startswith("aten::conv2d input 2 [] -> [32]"))
                          or r["name"] == "model.bias_before_norm",
        # the collate's check: isfinite, all, item
        "lsync": lambda r: r["name"] in ("aten::isfinite", "aten::all", "aten::abs", "aten::ne", "aten::eq", "aten::mul",
                                         "aten::item", "aten::_local_scalar_dense"),
    }[name]
    assert ok_names(top), f"top row {desc} does not name the planted change"
    if name == "anomaly":  # its ops and the finding right under it
        under = [r["name"] for r in d["ranked"][1:] if "from config.anomaly_mode" in r.get("note", "")]
        assert "debug.anomaly_detection" in under and len(under) >= 2, d["ranked"][:6]
        assert all("from config.anomaly_mode" in r.get("note", "") for r in d["ranked"][1:len(under) + 1]), d["ranked"][:6]
    assert top.get("note") == "new in B" or top["kind"] != "op" or not top["noise"], top
PY
}
check aa a2.json
check anomaly anomaly.json
check item item.json
check batch batch.json
check bias bias.json
check lsync lsync.json
grep -q '"name": "config.anomaly_mode"' anomaly.diff.json && ok "anomaly: the setting that changed is listed" || bad "anomaly: config.anomaly_mode not in the diff"
# The top row says where its op ran: conv2d's new bias is in both convolutions of the model (the
# collector's module ranges, "Sequential.0 (Conv2d)"); .item() runs in the loop, in no module.
"$PY" - bias.diff.json item.diff.json <<'PY' && ok "the top rows name the nn.Modules their ops ran in" || bad "modules on the top rows"
import json, sys
bias, item = (json.load(open(p)) for p in sys.argv[1:3])
top = bias["ranked"][0]
print("  bias top row in:", top.get("modules"))
if top["kind"] == "shape":
    assert top.get("modules") == ["Sequential.0 (Conv2d)", "Sequential.3 (Conv2d)"], top
else:  # the finding (model.bias_before_norm): the shape row still names the modules
    shape = [r for r in bias["shapes"] if r["name"].startswith("aten::conv2d input 2")][0]
    assert shape.get("modules") == ["Sequential.0 (Conv2d)", "Sequential.3 (Conv2d)"], shape
assert "modules" not in item["ranked"][0], item["ranked"][0]
PY

# The HTML diff: self-contained, the ranked rows and both sides' breakdowns in its document.
"$TRAINRX" diff a.json batch.json --format html -o batch.html 2> html.err || bad "diff --format html: $(tail -3 html.err)"
"$PY" - batch.html batch.diff.json <<'PY' && ok "diff --format html: one page with the diff's document" || bad "HTML diff"
import json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
assert page.startswith("<!doctype html>"), "not an HTML page"
assert not re.search(r'<(script|link|img)[^>]+(src|href)=', page), "the page loads something from elsewhere"
doc = json.loads(re.search(r'<script type="application/json" id="trainrx-data">(.*?)</script>', page, re.S).group(1))
assert doc["kind"] == "diff", doc["kind"]
assert doc["report"] == json.load(open(sys.argv[2])), "the page's document differs from the same diff's --format json"
assert doc["report"]["ranked"], "no ranked row"
assert doc["report"]["a"]["phases_ns"] and doc["report"]["b"]["phases_ns"], "no step breakdown per side"
assert "renderDiff" in page
PY

# Multi-rank (no recording needed): rank 1's all-reduce stretched in B.
NCCL="$SHARED/external-traces/hta/nccl_data.json.gz"
if [ -f "$NCCL" ]; then
  "$PY" - "$NCCL" <<'PY' || bad "could not build the two-rank sets"
import gzip, json, os, sys
src = json.load(gzip.open(sys.argv[1]))
os.makedirs("ra", exist_ok=True)
os.makedirs("rb", exist_ok=True)
def write(path, rank):
    src["distributedInfo"]["rank"] = rank
    with open(path, "w") as f:
        json.dump(src, f, separators=(",", ":"))
write("ra/rank0.json", 0)
os.link("ra/rank0.json", "rb/rank0.json")
write("ra/rank1.json", 1)
for e in src["traceEvents"]:
    if e.get("cat") == "kernel" and e.get("name", "").startswith("ncclKernel_AllReduce"):
        e["dur"] = e["dur"] + 5000  # 5 ms more per all-reduce: a slower link or a late peer
write("rb/rank1.json", 1)
PY
  "$TRAINRX" diff ra rb --format json -o ranks.diff.json 2> ranks.err || bad "diff of two-rank sets: $(tail -3 ranks.err)"
  "$PY" - ranks.diff.json <<'PY' && ok "multi-rank: the diff names rank 1 and the all-reduce" || bad "multi-rank diff"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["collectives"][0]
print(f"  first collective row: {c['name']} {c['delta_ns'] / 1e6:+.3f} ms per step of rank 1, noise {c['noise']}")
assert c["rank"] == 1 and "ncclKernel_AllReduce" in c["name"] and c["delta_ns"] > 0, c
top = [r for r in d["ranked"] if r["kind"] == "collective"]
assert top and top[0]["rank"] == 1 and not top[0]["noise"], d["ranked"][:3]
assert all(r["noise"] for r in d["collectives"] if r["rank"] == 0), "rank 0's collectives did not change"
PY
else
  echo "note: $NCCL missing, multi-rank part skipped"
fi
exit $fail
