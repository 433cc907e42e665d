#!/usr/bin/env bash
# End-to-end: ordinary PyTorch training scripts, profiled with torch.autograd.profiler and
# exported with export_chrome_trace (Debian's python3-torch), then analyzed. The planted run must
# be flagged; the clean run must get none of those findings. Exit 77 (skip) without torch.
set -u
trainrx=$1; scripts=$2
py=${TRAINRX_PYTHON:-/usr/bin/python3}
$py -c 'import torch' 2>/dev/null || { echo "SKIP: python3-torch not installed"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
check() { if eval "$2"; then passes=$((passes+1)); else echo "FAIL: $1"; fails=$((fails+1)); fi; }
ids() { python3 -c 'import json,sys; print(" ".join(f["id"] for f in json.load(open(sys.argv[1]))["findings"]))' "$1"; }

(cd "$tmp" && $py "$scripts/train_profiled.py" -o planted.json --workers 0 --data-cost 40 --item --zero-grad-zeros) || fails=$((fails+1))
"$trainrx" analyze "$tmp/planted.json" --format json -o "$tmp/planted.out.json"
planted=$(ids "$tmp/planted.out.json"); echo "planted run findings: $planted"
for id in input.workers input.dataloader_bound sync.host_device optim.zero_grad; do
  check "planted run flags $id" "[[ ' $planted ' == *' $id '* ]]"
done

(cd "$tmp" && $py "$scripts/train_profiled.py" -o clean.json --clean) || fails=$((fails+1))
"$trainrx" analyze "$tmp/clean.json" --format json -o "$tmp/clean.out.json"
clean=$(ids "$tmp/clean.out.json"); echo "clean run findings: ${clean:-none}"
for id in input.workers input.dataloader_bound sync.host_device optim.zero_grad model.bias_before_norm; do
  check "clean run has no $id" "[[ ' $clean ' != *' $id '* ]]"
done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
