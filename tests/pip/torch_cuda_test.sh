#!/usr/bin/env bash
# A CUDA build of torch on this CPU-only machine (issue 38.4): torch 2.14.1 (CUDA 13), from the
# machine's disk, in its own venv; `trainrx record` of a Python script under it with no flag:
#   1. the first record: no probe was built for that libtorch, so the torch.profiler fallback records,
#      and record builds the probe (and the CUPTI backend: the CUDA toolkit is found) into the
#      per-user cache, saying so and the time it took;
#   2. the second record: the cached probe is chosen and attaches (the trace is the probe's, its
#      probe_torch_version 2.14.1), the planted problems are flagged.
# Not in the default test run: the venv takes ~5.5 GB and a few minutes to install, the build more.
# Usage: tests/pip/torch_cuda_test.sh BUILD_DIR   (env: TORCH_CUDA_VENV, default /tmp/trainrx-torch2141;
#        kept between runs; TRAINRX_PROBE_CACHE: the cache, default a fresh temporary folder)
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
TRAINRX=${1:-$REPO/build}/trainrx
V=${TORCH_CUDA_VENV:-/tmp/trainrx-torch2141}
W=$(mktemp -d /tmp/trainrx-cuda-test.XXXXXX)
trap 'rm -rf "$W"' EXIT
. "$REPO/tests/e2e/lib.sh"
[ -x "$TRAINRX" ] || { echo "skip: no $TRAINRX"; exit 77; }
if ! "$V/bin/python" -c 'import torch; assert torch.__version__.startswith("2.14.1")' 2>/dev/null; then
  python3 -m venv "$V" && "$V/bin/pip" install -q --disable-pip-version-check "torch==2.14.1" "numpy==2.4.6" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
PY=$V/bin/python
"$PY" -c 'import torch; print("  torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' \
  || { bad "torch 2.14.1 does not import"; exit 1; }
export XDG_CACHE_HOME=${TRAINRX_PROBE_CACHE:-$W/cache}
SCRIPT=$REPO/tests/python/train_planted.py

start=$(date +%s)
"$TRAINRX" record -o "$W/first.json" -- "$PY" "$SCRIPT" --all-problems --steps 12 > /dev/null 2> "$W/first.err"
echo "  first record: $(( $(date +%s) - start )) s"
grep "trainrx: building\|trainrx: built\|could not build" "$W/first.err" | sed 's/^/  /'
grep -q "recording with torch.profiler (fallback)" "$W/first.err" && ok "first record: the fallback recorded" \
  || bad "first record: no fallback: $(tail -5 "$W/first.err")"
grep -q "trainrx: built .* in [0-9]* s" "$W/first.err" && ok "first record: a probe built for torch 2.14.1, with its time" \
  || bad "first record: no probe built: $(tail -20 "$W/first.err")"
DIR=$(ls -d "$XDG_CACHE_HOME"/trainrx/probe-2.14.1* 2>/dev/null | head -1)
[ -f "$DIR/libtrainrx_cupti.so" ] && ok "the CUPTI backend built against it ($DIR)" || bad "no CUPTI backend in $DIR"

"$TRAINRX" record -o "$W/second.json" -- "$PY" "$SCRIPT" --all-problems --steps 12 > /dev/null 2> "$W/second.err"
grep -q "attaching the probe built for it in $DIR" "$W/second.err" && grep -q '"probe_torch_version":"2.14.1' "$W/second.json" \
  && ok "second record: the cached 2.14.1 probe attached" || bad "second record: $(tail -5 "$W/second.err")"
"$TRAINRX" analyze "$W/second.json" --format json -o "$W/second.report.json" > /dev/null || bad "analyze"
ids=$(ids_of "$W/second.report.json")
echo "  findings: $ids"
for id in input.workers input.dataloader_bound sync.host_device debug.anomaly_detection model.bias_before_norm; do
  has "$ids" $id || bad "planted $id not flagged"
done
exit $fail
