#!/usr/bin/env bash
# HTA vs trainrx, side by side on the same traces: wall time and peak RSS of one whole run of each
# (HTA: import + TraceAnalysis load + get_temporal_breakdown + get_idle_time_breakdown; trainrx:
# `trainrx analyze --format json`, which parses and runs every analyzer), interleaved, median of
# REPS runs; then the breakdown figures of both (idle / compute / non-compute %, kernel_time, idle
# split per stream), plus trainrx with exact ns (--threshold gpu.idle.hta_time=0).
#
# Usage: bench/hta_side_by_side.sh [TRACE.json[.gz] ...]   (default: every trace in TRACES_DIR)
# Environment:
#   PEERS_VENV   venv holding the pinned HTA (default $REPO/.venv-peers; created and filled if missing)
#   TRAINRX      trainrx binary (default $REPO/build/trainrx)
#   TRACES_DIR   default traces (default $REPO/../shared/external-traces/hta)
#   REPS         runs of each tool per trace (default 3)
#   TILE_COPIES  also bench a large trace tiled from TILE_SRC with shared/tools/tile_trace.py
#                (default 10 copies, ~690k events; 0 skips it)
#   TILE_SRC     trace to tile (default the ns-resolution rank-0.Apr_03_18_51_38 trace)
# Takes about 1.5 minutes on a 2-core machine with the defaults (plus ~1 minute the first time, to
# fill the venv). HTA is installed with --no-deps from exact pins: it needs no torch.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS_VENV=${PEERS_VENV:-$REPO/.venv-peers}
TRAINRX=${TRAINRX:-$REPO/build/trainrx}
TRACES_DIR=${TRACES_DIR:-$REPO/../shared/external-traces/hta}
REPS=${REPS:-3}
TILE_COPIES=${TILE_COPIES:-10}
TILE_SRC=${TILE_SRC:-$TRACES_DIR/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz}
TILE_TOOL=${TILE_TOOL:-$REPO/../shared/tools/tile_trace.py}

die() { echo "hta_side_by_side: $*" >&2; exit 2; }
[ -x "$TRAINRX" ] || die "no trainrx binary at $TRAINRX (build it, or set TRAINRX)"

PEERS_PY=$(PEERS_VENV=$PEERS_VENV "$REPO/scripts/peers-venv") || die "could not make the peers venv"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hta_sbs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

traces=("$@")
if [ ${#traces[@]} -eq 0 ]; then
  for f in "$TRACES_DIR"/*.json.gz "$TRACES_DIR"/*.json; do [ -e "$f" ] && traces+=("$f"); done
fi
[ ${#traces[@]} -gt 0 ] || die "no traces (give paths or set TRACES_DIR)"
if [ "$TILE_COPIES" -gt 0 ] && [ -e "$TILE_SRC" ] && [ -e "$TILE_TOOL" ]; then
  tiled="$WORK/tiled_x${TILE_COPIES}.json.gz"
  python3 "$TILE_TOOL" "$TILE_SRC" "$tiled" --copies "$TILE_COPIES" >&2
  traces+=("$tiled")
fi

# One HTA run: prints a JSON line with its figures and its own phase times.
cat > "$WORK/run_hta.py" <<'EOF'
import json, logging, sys, time, warnings
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
logging.getLogger("hta").setLevel(logging.ERROR)
t1 = time.perf_counter()
ta = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
tb = ta.get_temporal_breakdown(visualize=False)
t3 = time.perf_counter()
ib, _ = ta.get_idle_time_breakdown(visualize=False)
t4 = time.perf_counter()
row = tb.iloc[0]
streams = {}
for r in ib.to_dict("records"):
    streams.setdefault(int(r["stream"]), {})[r["idle_category"]] = float(r["idle_time"])
print(json.dumps({
    "idle_pct": float(row["idle_time_pctg"]), "compute_pct": float(row["compute_time_pctg"]),
    "non_compute_pct": float(row["non_compute_time_pctg"]), "kernel_time_us": float(row["kernel_time(us)"]),
    "streams": {s: [v.get("host_wait", 0.0), v.get("kernel_wait", 0.0), v.get("other", 0.0)] for s, v in streams.items()},
    "phases_s": {"import": t1 - t0, "load": t2 - t1, "temporal": t3 - t2, "idle": t4 - t3}}))
EOF

cat > "$WORK/drive.py" <<'EOF'
import json, os, shutil, statistics, subprocess, sys, time

work, trainrx, hta_py, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
traces = sys.argv[5:]

def run(cmd, log):
    """Wall seconds and peak RSS (MiB) of one child process."""
    with open(log, "wb") as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}; see {log}:\n" + open(log).read()[-2000:])
    return wall, ru.ru_maxrss / 1024.0, out

def trainrx_figures(path, extra=()):
    out = os.path.join(work, "trx.json")
    run([trainrx, "analyze", path, "--format", "json", "-o", out, *extra], os.path.join(work, "trx.err"))  # --threshold takes every arg after it
    t = json.load(open(out))["metrics"]["temporal_breakdown"]
    if not t:
        return None
    t = t[0]
    return {"idle_pct": t["idle_pct"], "compute_pct": t["compute_pct"], "non_compute_pct": t["non_compute_pct"],
            "kernel_time_us": t["kernel_time_ns"] / 1000.0,
            "streams": {str(s["stream"]): [s["host_wait_ns"] / 1e3, s["kernel_wait_ns"] / 1e3, s["other_ns"] / 1e3]
                        for s in t["idle_by_stream"]}}

timing, figures = [], []
for path in traces:
    name = os.path.basename(path)  # whole: a.json and a.json.gz get their own HTA directories
    d = os.path.join(work, "t_" + name)          # HTA reads a directory of rank traces
    os.makedirs(d, exist_ok=True)
    shutil.copy(path, d)
    events = None
    hta_w, hta_m, trx_w, trx_m, hta_fig, phases = [], [], [], [], None, []
    for rep in range(reps):
        order = ("hta", "trx") if rep % 2 == 0 else ("trx", "hta")   # interleaved, alternating
        for tool in order:
            if tool == "hta":
                w, m, out = run([sys.executable, hta_py, d], os.path.join(work, "hta.err"))
                hta_fig = json.loads(out.decode().strip().splitlines()[-1])
                phases.append(hta_fig["phases_s"])
                hta_w.append(w); hta_m.append(m)
            else:
                w, m, _ = run([trainrx, "analyze", "--format", "json", "-o", os.path.join(work, "t.json"), path],
                              os.path.join(work, "trx.err"))
                events = json.load(open(os.path.join(work, "t.json")))["ingest"].get("events", events)
                trx_w.append(w); trx_m.append(m)
    med = statistics.median
    timing.append((name, events, med(hta_w), med(trx_w), med(hta_m), med(trx_m),
                   {k: med(p[k] for p in phases) for k in phases[0]}))
    figures.append((name, hta_fig, trainrx_figures(path), trainrx_figures(path, ("--threshold", "gpu.idle.hta_time=0"))))

def table(header, rows):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for r in [header, ["-" * n for n in w]] + rows:
        print("  ".join(str(x).ljust(n) for x, n in zip(r, w)).rstrip())

print(f"\nWall time and peak RSS, median of {reps} interleaved runs per tool (whole process)")
rows = []
for name, events, hw, tw, hm, tm, ph in timing:
    rows.append([name[:40], events if events is not None else "?", f"{hw:.2f}", f"{tw:.3f}", f"{hw / tw:.1f}x",
                 f"{hm:.0f}", f"{tm:.0f}", f"{hm / tm:.1f}x",
                 f"{ph['import']:.2f}/{ph['load']:.2f}/{ph['temporal'] + ph['idle']:.2f}"])
table(["trace", "events", "HTA s", "trainrx s", "time ratio", "HTA MiB", "trainrx MiB", "RSS ratio",
       "HTA import/load/breakdowns s"], rows)

print("\nBreakdowns (HTA = HolisticTraceAnalysis 0.5.0; trainrx default = HTA's µs rounding; exact = --threshold gpu.idle.hta_time=0)")
rows = []
for name, h, t, x in figures:
    for label, f in (("HTA", h), ("trainrx", t), ("trainrx exact ns", x)):
        if f is None:
            rows.append([name[:40], label, "-", "-", "-", "-", "no GPU activity"])
            continue
        streams = "; ".join(f"s{s}: {v[0]:.0f}/{v[1]:.0f}/{v[2]:.0f}" for s, v in sorted(f["streams"].items(), key=lambda kv: int(kv[0])))
        rows.append([name[:40], label, f"{f['idle_pct']:.2f}", f"{f['compute_pct']:.2f}", f"{f['non_compute_pct']:.2f}",
                     f"{f['kernel_time_us']:.0f}", streams])
        name = ""
table(["trace", "tool", "idle %", "compute %", "non-compute %", "kernel_time us", "idle per stream host/kernel/other us"], rows)
worst = max((abs(h[k] - t[k]) for _, h, t, _ in figures if h and t for k in ("idle_pct", "compute_pct", "non_compute_pct")), default=0)
print(f"\nlargest |HTA - trainrx| share difference: {worst:.2f} pp")
EOF

"$PEERS_PY" "$WORK/drive.py" "$WORK" "$TRAINRX" "$WORK/run_hta.py" "$REPS" "${traces[@]}"
