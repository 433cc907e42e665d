#!/usr/bin/env bash
# Make the venv that bench/tb_plugin_compare.py runs the PyTorch profiler TensorBoard plugin in.
#
# torch-tb-profiler 0.4.3 (2023-10) is the newest release on PyPI and the last one: the plugin was
# deprecated in kineto (Feb 2026) and its source removed (Apr 2026). It imports no torch; its
# declared deps are pandas>=1.0.0 and tensorboard (!=2.1.0,>=1.15). We install exactly these pins
# with --no-deps so nothing is resolved behind our back (in particular never a torch wheel).
# The overview parser itself needs only numpy + pandas; tensorboard and its deps are there so that
# `$TB_VENV/bin/tensorboard --logdir DIR` shows the same overview in a browser for a manual check.
#
# Usage: bench/tb_plugin_setup.sh          (TB_VENV, default $REPO/.venv-tb)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TB_VENV=${TB_VENV:-$REPO/.venv-tb}

TB_PINS=(
  torch-tb-profiler==0.4.3
  # runtime deps of the parser
  pandas==2.2.3 numpy==1.26.4 python-dateutil==4.0.0 pytz==2026.6 tzdata==2026.6 six==1.17.0
  # tensorboard 2.18.0 and its requirements (only for a manual look in the browser)
  tensorboard==2.18.0 tensorboard-data-server==0.7.2 absl-py==2.5.1 grpcio==1.85.1
  Markdown==3.11.3 MarkupSafe==3.0.4 Werkzeug==3.1.9 protobuf==7.36.2 packaging==26.3
  typing_extensions==4.16.0 setuptools==65.5.0
)

ok() {
  "$TB_VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("torch-tb-profiler") != "0.4.3")' 2>/dev/null &&
    (cd / && "$TB_VENV/bin/python" -c 'from torch_tb_profiler.profiler.data import RunProfileData; from torch_tb_profiler.profiler.run_generator import RunGenerator') 2>/dev/null
}

if ok; then
  echo "tb_plugin_setup: $TB_VENV already has torch-tb-profiler 0.4.3" >&2
  exit 0
fi
echo "tb_plugin_setup: installing torch-tb-profiler 0.4.3 into $TB_VENV ..." >&2
[ -x "$TB_VENV/bin/python" ] || python3 -m venv "$TB_VENV"
"$TB_VENV/bin/pip" install -q --no-deps "${TB_PINS[@]}"
"$TB_VENV/bin/pip" check >&2 || { echo "tb_plugin_setup: pip check failed in $TB_VENV" >&2; exit 2; }
ok || { echo "tb_plugin_setup: torch_tb_profiler does not import in $TB_VENV" >&2; exit 2; }
echo "tb_plugin_setup: ok ($TB_VENV/bin/python)" >&2
