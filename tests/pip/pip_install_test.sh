#!/usr/bin/env bash
# `pip install` of this checkout into a fresh virtual environment, as a user with their own torch
# does it (issue 38.1), then the whole path from that environment:
#   * a fresh venv that sees a torch (the repository's .venv torch 2.13 through a .pth file: no
#     second download), scikit-build-core and pandas from PyPI (pinned);
#   * pip install --no-build-isolation <checkout>: trainrx on the venv's PATH, `python -m trainrx`,
#     the probe built for that torch inside the package (its sidecar names the venv's libtorch_cpu);
#   * trainrx record -- python train_planted.py --all-problems with no --probe-dir: the probe
#     attaches (no fallback), the planted problems are flagged by `trainrx analyze`;
#   * import trainrx in that venv: trainrx.analyze(run.json) is the CLI's JSON, tables are DataFrames;
#     `with trainrx.record(...)` records in-process with the installed probe;
#   * TRAINRX_PIP_ISOLATED=1 also: a plain `pip install <checkout>` (build isolation: no torch while
#     building) into a venv without torch gives the torch-free trainrx: analyze works, record says why not.
# Slow (pip builds trainrx: 10-20 minutes on 2 cores the first time); the build folder is kept in
# $TRAINRX_PIP_BUILD_DIR (default /tmp/trainrx-pip-build) so a second run rebuilds only what changed.
# Usage: tests/pip/pip_install_test.sh      (TRAINRX_PYTHON: the python whose torch is used)
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${TRAINRX_PYTHON:-$REPO/.venv/bin/python}
BUILD=${TRAINRX_PIP_BUILD_DIR:-/tmp/trainrx-pip-build}
SKBUILD_PIN=scikit-build-core==0.11.6
PANDAS_PIN=pandas==3.1.1
DATA_PINS="pyarrow==26.0.1 duckdb==1.5.6"  # the `sql` extra's: the Parquet plugin is built against pyarrow
"$PY" -c 'import torch' 2>/dev/null || { echo "skip: $PY has no torch"; exit 77; }
W=$(mktemp -d /tmp/trainrx-pip-test.XXXXXX)
[ "${TRAINRX_PIP_KEEP:-0}" = 1 ] || trap 'rm -rf "$W"' EXIT
. "$REPO/tests/e2e/lib.sh"
quiet_pip() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; return "${PIPESTATUS[0]}"; }

# 1. A fresh venv whose python sees the torch of $PY (and nothing else of it but its site-packages).
TORCH_SITE=$("$PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
"$PY" -m venv "$W/venv" || { bad "venv"; exit 1; }
V=$W/venv
echo "$TORCH_SITE" > "$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/host_torch.pth"
TORCH_VERSION=$("$V/bin/python" -c 'import torch; print(torch.__version__)') && ok "fresh venv sees torch $TORCH_VERSION" \
  || { bad "the venv does not import torch"; exit 1; }
# shellcheck disable=SC2086
quiet_pip "$V/bin/pip" install -q --disable-pip-version-check "$SKBUILD_PIN" "$PANDAS_PIN" $DATA_PINS \
  || { bad "pip install $SKBUILD_PIN $PANDAS_PIN $DATA_PINS"; exit 1; }

# 2. pip install the checkout, the probe built against the venv's torch.
start=$(date +%s)
if quiet_pip "$V/bin/pip" install --disable-pip-version-check --no-build-isolation -C build-dir="$BUILD/torch" "$REPO" \
     > "$W/pip.log"; then
  ok "pip install --no-build-isolation: $(( $(date +%s) - start )) s"
else
  bad "pip install failed:"; tail -30 "$W/pip.log"; exit 1
fi
SITE=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -x "$V/bin/trainrx" ] && ok "trainrx on the venv's PATH ($V/bin/trainrx)" || bad "no $V/bin/trainrx"
for f in trainrx libtrainrx_api.so libtrainrx_preload.so libtrainrx_probe.so libtrainrx_probe.torch trainrx_python/sitecustomize.py trainrx_python/trainrx_hook_marks.py trainrx-workload libtrainrx_parquet.so; do
  [ -e "$SITE/trainrx/_bin/$f" ] || bad "the package lacks _bin/$f"
done
TORCH_LIB=$(readlink -f "$TORCH_SITE/torch/lib/libtorch_cpu.so")
grep -qx "lib=$TORCH_LIB" "$SITE/trainrx/_bin/libtrainrx_probe.torch" && ok "the installed probe names the venv's torch ($TORCH_LIB)" \
  || bad "probe sidecar: $(cat "$SITE/trainrx/_bin/libtrainrx_probe.torch")"
PY=$V/bin/python  # lib.sh's ids_of reads with it
cd "$W"  # not the checkout: `import trainrx` must find the installed package
PATH="$V/bin:$PATH" trainrx analyze --sample > "$W/sample.txt" && grep -q "input.dataloader_bound" "$W/sample.txt" \
  && ok "trainrx analyze --sample" || bad "trainrx analyze --sample"
"$V/bin/python" -m trainrx analyze --sample --format json > "$W/sample.json" && ok "python -m trainrx" || bad "python -m trainrx"
# Parquet export from the installed package: its plugin finds the venv's pyarrow; DuckDB reads it.
PATH="$V/bin:$PATH" trainrx export "$REPO/tests/fixtures/dlrm_8ranks" -o "$W/dataset" --run dlrm 2>/dev/null \
  && [ -f "$W/dataset/kernels/run=dlrm/rank=7/part-0.parquet" ] && ok "trainrx export (Parquet plugin installed)" \
  || bad "trainrx export --format parquet from the installed package"
"$V/bin/python" -c "
import trainrx, sys
df = trainrx.sql('SELECT rank, count(*) FILTER (WHERE arrived_last) AS n FROM collectives GROUP BY rank ORDER BY n DESC', '$W/dataset')
sys.exit(int(df['rank'][0]) != 7)" && ok "trainrx.sql over the export (the straggler, rank 7, arrives last most often)" \
  || bad "trainrx.sql from the installed package"

# 3. record with the venv's python, no flag: the installed probe attaches.
PATH="$V/bin:$PATH" trainrx record -o "$W/run.json" -- python "$REPO/tests/python/train_planted.py" --all-problems \
  > "$W/rec.out" 2> "$W/rec.err"
code=$?
[ $code = 0 ] && ok "record: exit 0" || bad "record: exit $code: $(tail -5 "$W/rec.err")"
grep -qi "fallback\|another torch\|built for" "$W/rec.err" && bad "record did not attach the probe: $(cat "$W/rec.err")"
grep -q '"collector":"trainrx probes"' "$W/run.json" 2>/dev/null && ok "record: the probe attached (trainrx probes' trace)" \
  || bad "record: not the probe's trace"
"$V/bin/trainrx" analyze "$W/run.json" --format json -o "$W/run.report.json" || bad "analyze run.json"
ids=$(ids_of "$W/run.report.json")
echo "  findings: $ids"
for id in input.workers input.dataloader_bound sync.host_device debug.anomaly_detection model.bias_before_norm eval.grad_enabled; do
  has "$ids" $id || bad "planted $id not flagged"
done

# 4. The Python API in that venv: the CLI's JSON, DataFrames.
"$V/bin/python" - "$W/run.json" "$W/run.report.json" "$SITE" <<'PY' && ok "import trainrx: analyze() == CLI JSON, DataFrames" || bad "Python API"
import json, sys
import pandas as pd
import trainrx
assert trainrx.__file__.startswith(sys.argv[3]), trainrx.__file__
r = trainrx.analyze(sys.argv[1])
cli = json.load(open(sys.argv[2]))
assert r.to_dict() == cli, "analyze() differs from the CLI's JSON"
assert isinstance(r.steps, pd.DataFrame) and len(r.steps) == len(cli["steps"]["rows"]) > 0
assert isinstance(r.operators, pd.DataFrame) and list(r.operators.columns) == trainrx.report.OPERATOR_COLUMNS
assert "<iframe" in r._repr_html_()
print(" ", repr(r), "version", trainrx.__version__)
PY

# The in-process recorder from that venv: the installed probe, loaded into the interpreter.
XDG_CACHE_HOME=$W/nocache "$V/bin/python" "$REPO/tests/python/record_in_process_test.py" > "$W/inproc.log" 2>&1 \
  && ok "with trainrx.record(...): the installed probe in-process" || { bad "in-process record"; cat "$W/inproc.log"; }

# 5. Optional: the torch-free install (build isolation, no torch in the venv).
if [ "${TRAINRX_PIP_ISOLATED:-0}" = 1 ]; then
  python3 -m venv "$W/plain" && V2=$W/plain
  start=$(date +%s)
  if quiet_pip "$V2/bin/pip" install --disable-pip-version-check -C build-dir="$BUILD/isolated" "$REPO" > "$W/pip2.log"; then
    ok "pip install (isolated, no torch): $(( $(date +%s) - start )) s"
  else
    bad "isolated pip install failed:"; tail -30 "$W/pip2.log"
  fi
  "$V2/bin/trainrx" analyze --sample > "$W/sample2.txt" && grep -q "input.dataloader_bound" "$W/sample2.txt" \
    && ok "torch-free: analyze" || bad "torch-free: analyze"
  [ ! -e "$("$V2/bin/python" -c 'import trainrx, os; print(os.path.dirname(trainrx.__file__))')/_bin/libtrainrx_probe.so" ] \
    && ok "torch-free: no probe in the package" || bad "torch-free: a probe was built (for which torch?)"
  "$V2/bin/python" -c "import trainrx; print(' ', trainrx.analyze(trainrx.sample_trace()))" && ok "torch-free: import trainrx" \
    || bad "torch-free: import trainrx"
  "$V2/bin/trainrx" record -o "$W/x.json" -- python3 -c pass 2> "$W/rec2.err"; code=$?
  [ $code = 2 ] && grep -q "built without LibTorch" "$W/rec2.err" && ok "torch-free: record says it cannot record" \
    || bad "torch-free record: exit $code: $(cat "$W/rec2.err")"
fi
exit $fail
