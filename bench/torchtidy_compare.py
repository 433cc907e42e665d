#!/usr/bin/env python3
"""Compare PyTorch's own anti-pattern matcher, TorchTidy (torch/profiler/_pattern_matcher.py,
report_all_anti_patterns), with trainrx's analyzers on the same torch.profiler traces.

For each configuration of tests/python/train_planted.py it runs, in a fresh process, the script
with `--torch-profiler DIR` (torch.profiler.profile(activities=[CPU], record_shapes=True,
with_stack=True, profile_memory=True, schedule=..., on_trace_ready=tensorboard_trace_handler(DIR)),
prof.step() once per step), then in that process:
  * report_all_anti_patterns(prof, should_benchmark=False, print_enable=False, json_report_dir=...)
    (it returns None: what fired is read from the torchtidy_report.json it writes), and
  * each pattern class on its own, matched_events(), for the match counts (the same seven classes
    report_all_anti_patterns runs, plus ForLoopIndexingPattern, which it leaves commented out);
and then `TRAINRX analyze TRACE --format json` on the trace file the handler wrote (skipped when
the binary does not exist). Prints a matrix (configuration x rule), a per-rule Markdown table, and
the final table: TorchTidy rule | fires on | trainrx rule | trainrx fires, where "fires on" lists
every configuration with a match (its count; * marks the configuration that plants the problem).

Usage: torchtidy_compare.py [--trainrx build/trainrx] [--steps 12] [--threads 1] [--keep DIR]
                            [--json OUT] [--retries 2] [--config 'name=ARGS[@W,U,A]' ...]
Run it with a Python that has torch (the repository's .venv/bin/python).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_SCRIPT = os.path.join(REPO, "tests", "python", "train_planted.py")
# build/ (with LibTorch) when built, else the torch-free build-hta/: `analyze` is the same in both.
DEFAULT_TRAINRX = next((p for p in (os.path.join(REPO, d, "trainrx") for d in ("build", "build-hta"))
                        if os.access(p, os.X_OK)), os.path.join(REPO, "build", "trainrx"))

# (short name, class name, in report_all_anti_patterns?)
PATTERNS = [
    ("ExtraCUDACopy", "ExtraCUDACopyPattern", True),
    ("FP32MatMul", "FP32MatMulPattern", True),
    ("OptimizerSingleTensor", "OptimizerSingleTensorPattern", True),
    ("SynchronizedDataLoader", "SynchronizedDataLoaderPattern", True),
    ("GradNotSetToNone", "GradNotSetToNonePattern", True),
    ("Conv2dBiasBeforeBN", "Conv2dBiasFollowedByBatchNorm2dPattern", True),
    ("MatMulDimInFP16", "MatMulDimInFP16Pattern", True),
    ("ForLoopIndexing", "ForLoopIndexingPattern", False),
]

# Configurations: name -> (train_planted.py flags, schedule "W,U,A" or "" for the default 1,1,steps-2).
# "whole" runs record from before the loader's first batch (wait=0, warmup=0), the only window in
# which a single-epoch loop's DataLoader.__iter__ is recorded (SynchronizedDataLoaderPattern).
DEFAULT_CONFIGS = [
    ("clean", "", ""),
    ("all-problems", "--all-problems", ""),
    ("zero-grad-zeros", "--zero-grad-zeros", ""),
    ("no-foreach", "--no-foreach", ""),
    ("adamw no-foreach", "--adamw --no-foreach", ""),
    ("adamw foreach", "--adamw --foreach", ""),
    ("extra-copy", "--extra-copy", ""),
    ("bf16", "--bf16", ""),
    ("loop-index", "--loop-index", ""),
    ("clean whole", "", "0,0,STEPS"),
    ("all-problems whole", "--all-problems", "0,0,STEPS"),
    ("workers2 whole", "--workers 2", "0,0,STEPS"),
]

# TorchTidy rule -> (configuration that plants it, trainrx finding ids that cover it, note)
COVERAGE = {
    "ExtraCUDACopy": ("extra-copy", ["tensor.cpu_then_copy"],
                      "on CPU the copy is .to(device, copy=True): trainrx says 'copied at once' (host), not 'to the GPU'"),
    "FP32MatMul": ("clean", ["precision.fp32_matmul"],
                   "no GPU here: TorchTidy reads the analyzing torch's arch list, empty on a CPU build, so all() "
                   "is true and every aten::mm matches; trainrx needs FP32 GEMM kernels on an sm_80+ device in the "
                   "trace: silent on CPU by design"),
    "OptimizerSingleTensor": ("adamw no-foreach", ["optim.single_tensor"],
                              "CPU parameters default to single-tensor, so TorchTidy fires on every SGD run; trainrx "
                              "estimates the saving (ops removed x per-op overhead) and needs the optimizer >= 5 % of "
                              "the step and the saving >= 0.5 %: plain SGD on CPU gains ~nothing (22.3 vs 22.5 us)"),
    "SynchronizedDataLoader": ("all-problems whole", ["input.workers", "input.dataloader_bound"],
                               "needs DataLoader.__iter__ inside the active window"),
    "GradNotSetToNone": ("zero-grad-zeros", ["optim.zero_grad"], ""),
    "Conv2dBiasBeforeBN": ("all-problems", ["model.bias_before_norm"], "--conv-bias is in --all-problems"),
    "MatMulDimInFP16": ("bf16", ["precision.matmul_alignment"],
                        "CPU trace: trainrx reports it at severity info with no saving (tensor cores are a GPU matter)"),
    "ForLoopIndexing": ("loop-index", ["python.loop_indexing"], "not run by report_all_anti_patterns (commented out)"),
}


# ----------------------------------------------------------------------------------------- child
def child(args, train_args):
    """Run train_planted.py in this process under torch.profiler, then TorchTidy on the profile."""
    import contextlib
    import importlib.util
    import io

    spec = importlib.util.spec_from_file_location("train_planted", args.script)
    tp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tp)
    sys.argv = [args.script] + train_args
    rc = 0
    t0 = time.perf_counter()
    try:
        tp.main()
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    wall = time.perf_counter() - t0
    prof = tp.PROFILER
    result = {"train_rc": rc, "train_wall_s": round(wall, 3), "patterns": {}, "report_all": {}}
    if prof is None or prof.profiler is None or prof.profiler.kineto_results is None:
        result["error"] = "no profile recorded (schedule never reached an active step?)"
        json.dump(result, open(args.result, "w"), indent=1)
        return

    import torch.profiler._pattern_matcher as pm

    for short, cls_name, in_all in PATTERNS:
        entry = {"class": cls_name, "in_report_all": in_all}
        try:
            pat = getattr(pm, cls_name)(prof, should_benchmark=False)
            entry["skipped"] = bool(pat.skip)
            events = pat.matched_events()
            entry["count"] = len(events)
            locs = []
            for ev in events:
                loc = pm.source_code_location(ev)
                if loc not in locs:
                    locs.append(loc)
            entry["locations"] = locs[:4]
            entry["ops"] = sorted({ev.name for ev in events})[:6]
        except Exception as e:  # noqa: BLE001 - report what TorchTidy itself raises
            entry["error"] = f"{type(e).__name__}: {e}"
        result["patterns"][short] = entry

    # The public entry point, as a user would call it. It returns None; what it found is in the
    # JSON it writes (one entry per distinct message and source location, no counts).
    with tempfile.TemporaryDirectory() as d:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                ret = pm.report_all_anti_patterns(prof, should_benchmark=False, print_enable=False,
                                                  json_report_dir=d)
            result["report_all"]["returned"] = repr(ret)
            path = os.path.join(d, "torchtidy_report.json")
            rep = json.load(open(path)) if os.path.exists(path) else {}
            names = {}
            for loc, items in rep.items():
                for it in items:
                    names.setdefault(it["name"], []).append(f"{os.path.basename(loc)}:{it['line_number']}")
            result["report_all"]["fired"] = names
        except Exception as e:  # noqa: BLE001
            result["report_all"]["error"] = f"{type(e).__name__}: {e}"
    json.dump(result, open(args.result, "w"), indent=1)


# ---------------------------------------------------------------------------------------- parent
def newest_trace(d):
    files = [os.path.join(d, f) for f in os.listdir(d) if f.endswith((".pt.trace.json", ".pt.trace.json.gz"))]
    return max(files, key=os.path.getmtime) if files else None


def run_config(args, name, flags, sched, workdir):
    slug = name.replace(" ", "_")
    tdir = os.path.join(workdir, slug)
    os.makedirs(tdir, exist_ok=True)
    sched = sched.replace("STEPS", str(args.steps))
    train_args = shlex.split(flags) + ["--steps", str(args.steps), "--torch-profiler", tdir]
    if args.threads:
        train_args += ["--threads", str(args.threads)]
    if sched:
        train_args += ["--torch-profiler-schedule", sched]
    result_path = os.path.join(workdir, slug + ".torchtidy.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--script", args.script, "--result", result_path,
           "--"] + train_args
    # TorchTidy reads PyCall names that may already be freed (its own TODO, _pattern_matcher.py
    # SynchronizedDataLoaderPattern.match): event.name then raises UnicodeDecodeError, which only
    # that pattern catches. Seen on the PyCall of a module body imported inside the window (the
    # multiprocessing imports when DataLoader workers start); retried and reported.
    flaky = []
    for attempt in range(1 + args.retries):
        for f in os.listdir(tdir):
            os.remove(os.path.join(tdir, f))
        p = subprocess.run(cmd, capture_output=True, text=True)
        res = {"name": name, "flags": flags, "schedule": sched or f"1,1,{max(1, args.steps - 2)}",
               "train_stdout": p.stdout.strip().splitlines(), "attempts": attempt + 1}
        if p.returncode != 0 or not os.path.exists(result_path):
            res["error"] = f"child exit {p.returncode}: {p.stderr.strip()[-800:]}"
            return res
        res.update(json.load(open(result_path)))
        errors = [e["error"] for e in res["patterns"].values() if "error" in e]
        if "error" in res["report_all"]:
            errors.append("report_all_anti_patterns: " + res["report_all"]["error"])
        if not any("UnicodeDecodeError" in e for e in errors):
            break
        flaky.append(errors[-1])
    res["torchtidy_flaky_errors"] = flaky
    res["trace"] = newest_trace(tdir)
    res["trainrx"] = run_trainrx(args, res["trace"], workdir, slug)
    return res


def run_trainrx(args, trace, workdir, slug):
    if not os.path.isfile(args.trainrx) or not os.access(args.trainrx, os.X_OK):
        return {"skipped": f"{args.trainrx} not built"}
    if not trace:
        return {"skipped": "no trace file"}
    out = os.path.join(workdir, slug + ".trainrx.json")
    p = subprocess.run([args.trainrx, "analyze", trace, "--format", "json", "-o", out], capture_output=True, text=True)
    if p.returncode != 0 or not os.path.exists(out):
        return {"error": f"exit {p.returncode}: {p.stderr.strip()[-400:]}"}
    rep = json.load(open(out))
    return {"ids": [f["id"] for f in rep.get("findings", [])],
            "titles": {f["id"]: f.get("title", "") for f in rep.get("findings", [])},
            "steps": rep.get("steps", {}).get("count"), "steps_source": rep.get("steps", {}).get("source")}


def cell(res, short):
    if "error" in res:
        return "error"
    e = res["patterns"].get(short, {})
    if "error" in e:
        return "error"
    if e.get("skipped"):
        return "skipped"
    return str(e.get("count", 0)) if e.get("count") else "-"


def trainrx_cell(res):
    t = res.get("trainrx", {})
    if "skipped" in t:
        return "n/a (" + t["skipped"] + ")"
    if "error" in t:
        return "error: " + t["error"][:60]
    return ", ".join(t["ids"]) or "(none)"


def torchtidy_fires_on(results, short, planted):
    """Configurations where TorchTidy matched `short`, with counts; * marks the planted one."""
    out = []
    for r in results:
        c = cell(r, short)
        if c not in ("-", "skipped"):
            out.append(f"{r['name']}{'*' if r['name'] == planted else ''} ({c})")
    return ", ".join(out) or "none"


def trainrx_fires_on(results, ids, planted):
    """Configurations where any of `ids` fired in trainrx's analysis of the same trace."""
    if not ids:
        return "—"
    out = []
    for r in results:
        got = [i for i in ids if i in r.get("trainrx", {}).get("ids", [])]
        if got:
            out.append(f"{r['name']}{'*' if r['name'] == planted else ''} ({', '.join(got)})")
    if not any("ids" in r.get("trainrx", {}) for r in results):
        return "not run (" + (results[0].get("trainrx", {}).get("skipped", "no trainrx") if results else "no runs") + ")"
    return ", ".join(out) or "none"


def print_final_table(results):
    print("\n## Final table\n")
    print("Every configuration's trace analyzed by both; * = the configuration that plants the problem.\n")
    print("| TorchTidy rule | fires on | trainrx rule | trainrx fires |")
    print("|---|---|---|---|")
    notes = []
    for short, cls_name, in_all in PATTERNS:
        planted, ids, note = COVERAGE[short]
        name = short + ("" if in_all else " (not in report_all)")
        print(f"| {name} | {torchtidy_fires_on(results, short, planted)} | {', '.join(ids) or 'none'} | "
              f"{trainrx_fires_on(results, ids, planted)} |")
        if note:
            notes.append(f"- {short}: {note}")
    if notes:
        print("\nNotes:\n")
        print("\n".join(notes))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainrx", default=DEFAULT_TRAINRX)
    ap.add_argument("--script", default=DEFAULT_SCRIPT)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=1, help="torch threads in the training script (0: its default)")
    ap.add_argument("--keep", default="", help="directory for traces and reports (default: a temporary one)")
    ap.add_argument("--json", default="", help="write all results here")
    ap.add_argument("--retries", type=int, default=2,
                    help="rerun a configuration when TorchTidy raises UnicodeDecodeError (freed PyCall name)")
    ap.add_argument("--config", action="append", default=[],
                    help="'name=FLAGS' or 'name=FLAGS@W,U,A' (repeatable; replaces the default set)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    train_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, train_args = argv[:i], argv[i + 1:]
    args = ap.parse_args(argv)
    if args.child:
        return child(args, train_args)

    configs = DEFAULT_CONFIGS
    if args.config:
        configs = []
        for c in args.config:
            name, _, rest = c.partition("=")
            flags, _, sched = rest.partition("@")
            configs.append((name, flags, sched))
    workdir = args.keep or tempfile.mkdtemp(prefix="torchtidy_compare.")
    os.makedirs(workdir, exist_ok=True)
    results = []
    for name, flags, sched in configs:
        t0 = time.perf_counter()
        res = run_config(args, name, flags, sched, workdir)
        res["run_s"] = round(time.perf_counter() - t0, 1)
        results.append(res)
        print(f"ran {name!r} ({flags or 'no flags'}, schedule {res['schedule']}) in {res['run_s']} s"
              + (f": {res['error']}" if "error" in res else ""), file=sys.stderr)

    import torch
    print(f"# TorchTidy vs trainrx\n\ntorch {torch.__version__}, CPU activity only, record_shapes + with_stack + "
          f"profile_memory, {args.steps} steps, threads {args.threads or 'default'}; traces in {workdir}\n")
    print("## Matches per configuration (TorchTidy matched_events() count; '-' = none)\n")
    shorts = [s for s, _, _ in PATTERNS]
    print("| configuration | schedule | " + " | ".join(shorts) + " | report_all fired | trainrx findings |")
    print("|---|---|" + "---|" * len(shorts) + "---|---|")
    for r in results:
        fired = ", ".join(sorted(r.get("report_all", {}).get("fired", {}))) or r.get("report_all", {}).get("error", "(none)")
        print(f"| {r['name']} (`{r['flags'] or 'no flags'}`) | {r['schedule']} | "
              + " | ".join(cell(r, s) for s in shorts) + f" | {fired} | {trainrx_cell(r)} |")

    by_name = {r["name"]: r for r in results}
    print("\n## Per TorchTidy rule\n")
    print("| TorchTidy rule | fired on planted? (count) | fired on clean? | trainrx rule(s) that cover it | trainrx fired? |")
    print("|---|---|---|---|---|")
    for short, cls_name, in_all in PATTERNS:
        planted_name, ids, note = COVERAGE[short]
        pr, cr = by_name.get(planted_name), by_name.get("clean")
        crw = by_name.get("clean whole")
        planted = f"{cell(pr, short)} on `{planted_name}`" if pr else "not run"
        clean = cell(cr, short) if cr else "not run"
        if short == "SynchronizedDataLoader" and crw:
            clean += f" (default window); {cell(crw, short)} (whole run)"
        if pr and "trainrx" in pr and "ids" in pr["trainrx"]:
            got = [i for i in ids if i in pr["trainrx"]["ids"]]
            tr = (", ".join(got) + " on planted" if got else "no") if ids else "—"
            if ids and cr and "ids" in cr.get("trainrx", {}):
                tr += "; clean: " + (", ".join(i for i in ids if i in cr["trainrx"]["ids"]) or "silent")
        elif pr:
            tr = trainrx_cell(pr) if ids else "—"
        else:
            tr = "not run"
        name = f"{short} ({cls_name}{'' if in_all else ', not in report_all'})"
        print(f"| {name} | {planted} | {clean} | {', '.join(ids) or 'none'}{' — ' + note if note else ''} | {tr} |")

    print("\n## Details\n")
    for r in results:
        print(f"- **{r['name']}**: training output {r.get('train_stdout')}")
        if "error" in r:
            print(f"  - error: {r['error']}")
            continue
        if r.get("torchtidy_flaky_errors"):
            print(f"  - TorchTidy raised on {len(r['torchtidy_flaky_errors'])} of {r['attempts']} attempts "
                  f"(results below are from the last): {r['torchtidy_flaky_errors'][0]}")
        for short in shorts:
            e = r["patterns"].get(short, {})
            if e.get("count") or e.get("error"):
                print(f"  - {short}: {e.get('count', 0)} matches, ops {e.get('ops')}, at {e.get('locations')}"
                      + (f" ERROR {e['error']}" if e.get("error") else ""))
        ra = r.get("report_all", {})
        if "error" in ra:
            print(f"  - report_all_anti_patterns raised {ra['error']}")
        else:
            print(f"  - report_all_anti_patterns returned {ra.get('returned')}; fired: {ra.get('fired')}")
        t = r.get("trainrx", {})
        if "titles" in t:
            print(f"  - trainrx ({t.get('steps')} steps from {t.get('steps_source')}): "
                  + "; ".join(f"{k}: {v}" for k, v in t["titles"].items()))
        print(f"  - trace: {r.get('trace')}")

    print_final_table(results)
    if args.json:
        json.dump({"workdir": workdir, "results": results}, open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
