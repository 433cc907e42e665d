#!/usr/bin/env python3
"""One predict pair's verdict (scripts/gpu-validate --part predict; docs/gpu-validation.md).

    predict_verdict.py DIR NAME

DIR holds NAME.{bad1,good1,good2,bad2,...}.report.json (PREDICT_RUNS a side, two by default) (`trainrx analyze --format json`), the first
analyzed with `--what-if <transform>`, and where the runs wrote them NAME.{...}.pace.json
(train_gpu.py --pace: the loop's wall time between two device syncs, a step): a run's step is its
pace where every run has one (where the device runs behind the loop, the host's step ranges end
long before its work: they are not the throughput), else the report's mean step. Prints one tab-separated line and the transform's assumptions:
the prediction, the measured saving (1 - mean step without / with, each side's two runs pooled: the
mean is what throughput follows), the range of the four cross-run savings (bad_i against good_j), a
verdict, and the operators whose time a step changed most between the sides.

Verdict: "inside" (the measured point in the predicted interval); "within the runs' spread" (the
point outside, but the predicted interval meets the cross-run range: two runs a side cannot tell the
two apart); "OUTSIDE" (no cross-run saving reaches the interval). The operators show where a
measured change lies: a change in work no fix touches (the script's own data generation) is the
runs' difference, not the fix's.
"""
import glob
import json
import os
import sys


def ops_per_step(rep):
    t = rep["metrics"]["op_table"]
    steps = max(t.get("steps") or 1, 1)
    return {r["name"]: r["self_ns"] / 1e6 / steps for r in t.get("rows", [])}


def sides(d, name):
    """The runs' keys of each side, bad1 bad2 ... and good1 good2 ... (PREDICT_RUNS a side)."""
    keys = lambda side: sorted((os.path.basename(p)[len(name) + 1:-len(".report.json")]
                                for p in glob.glob(f"{d}/{name}.{side}*.report.json")), key=lambda k: int(k[len(side):]))
    return tuple(keys("bad")), tuple(keys("good"))


def verdict(d, name):
    bad, good = sides(d, name)
    if not bad or not good:
        raise FileNotFoundError(f"no {name}.bad*/good* reports in {d}")
    rep = {k: json.load(open(f"{d}/{name}.{k}.report.json")) for k in bad + good}
    asked = [w for w in rep["bad1"]["metrics"].get("what_if", []) if w["label"] == "asked"]
    asked = asked[0] if asked else None  # a pair with no transform ("-"): measured only
    mean = {k: r["steps"]["mean_ns"] / 1e6 for k, r in rep.items()}
    basis = "host steps' mean"
    paces = {k: f"{d}/{name}.{k}.pace.json" for k in rep}
    if all(os.path.exists(p) for p in paces.values()):
        mean = {k: json.load(open(p))["ms_per_step"] for k, p in paces.items()}
        basis = "the loop's pace (synchronized)"
    b, g = sum(mean[k] for k in bad) / len(bad), sum(mean[k] for k in good) / len(good)
    measured = 100.0 * (1 - g / b)
    cross = [100.0 * (1 - mean[j] / mean[i]) for i in bad for j in good]
    lo, hi = min(cross), max(cross)
    if asked is None:
        word = "measured only (no transform)"
    elif asked["low_pct"] <= measured <= asked["high_pct"]:
        word = "inside"
    elif asked["low_pct"] <= hi and lo <= asked["high_pct"]:
        word = "within the runs' spread"
    else:
        word = "OUTSIDE"
    # where the step's time moved: per-step self time, each side's runs averaged
    side = lambda ks: {n: sum(ops_per_step(rep[k]).get(n, 0.0) for k in ks) / len(ks)
                       for n in set().union(*(ops_per_step(rep[k]) for k in ks))}
    ob, og = side(bad), side(good)
    moved = sorted(((og.get(n, 0.0) - ob.get(n, 0.0), n) for n in set(ob) | set(og)), key=lambda x: -abs(x[0]))[:3]
    predicted = (f"predicted {asked['saving_pct']:.1f} % [{asked['low_pct']:.1f}, {asked['high_pct']:.1f}]"
                 if asked else "no prediction")
    line = "\t".join([name, asked["transform"] if asked else "-", asked["method"] if asked else "-", predicted,
                      f"measured {measured:.1f} % [{lo:.1f}, {hi:.1f} across runs] ({basis}: {b:.2f} -> {g:.2f} ms; runs "
                      f"{' '.join(f'{mean[k]:.2f}' for k in bad)} / {' '.join(f'{mean[k]:.2f}' for k in good)})",
                      word, "findings " + " ".join(sorted({f["id"] for f in rep["bad1"]["findings"]}))])
    moved_text = ", ".join(f"{n[:48]} {dv:+.2f} ms" for dv, n in moved)
    return (line, f"  moved most a step (without - with the problem): {moved_text}",
            f"  assumptions: {asked['assumptions'] if asked else '-'}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        print("\n".join(verdict(sys.argv[1], sys.argv[2])))
    except (OSError, KeyError, IndexError, ValueError, ZeroDivisionError) as e:
        print(f"{sys.argv[2]}\tno comparison: {type(e).__name__}: {e}")
