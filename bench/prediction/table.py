#!/usr/bin/env python3
"""The prediction-accuracy table of the corpus: every `trainrx fix --format json` report in OUT
(bench/prediction/out by default, as run.sh writes them), each fix row's predicted saving held
against its measured one, grouped by the what-if transform that made the prediction.

Usage: bench/prediction/table.py [OUT] [--json] [--rows] [--calibration] [--catalog analyzers/catalog.cc]

A row's transform is that of its first finding. The finding -> transform map is not written here:
it is read at run time from analyzers/catalog.cc, whose entries are C++ aggregates
`{"<finding id>", "<family>", "<summary>", {<fix variants>}, "<knob>", "<outside token>",
"<outside code>", <doc>, "<transform>"}` with <doc> one of the file's `constexpr const char* kX =
"docs/...";` constants (or a "docs/..." literal) and the transform string left out where the fix
has none. So: find each entry's start (`{"a.b", "family",`), then in the text up to the next
entry the first <doc> followed by an optional `, "name"` and the closing `}`: that name is the
transform ("" or absent: none). A fix row of the combined fix (`"all": true`) goes to
"(every fix together)", a row whose finding has no transform to "(no transform)".

Columns (savings are of the step, in %, positive = faster, as `fix` writes them):
  rows            fix rows measured or not
  measured        rows with a measured saving (a speedup)
  predicted       rows with predicted_saving_pct (the what-if replay's point and interval)
  not predictable rows with not_predictable (no transform, or the analysis gave none)
  significant     rows whose verdict is "faster" or "slower"
  inside          of the significant rows that were predicted, how many measured a saving inside
                  [predicted_low_pct, predicted_high_pct] (fix's own prediction_inside where it
                  wrote one), and that as a percentage: the interval's coverage
  inside or close of those, inside or within max(5 points, 25 % of the measured saving) of the point
                  (`fix`'s prediction_close: the issue's bar)
  median |err|    median over predicted, measured rows of |measured - predicted point|, in points
  median width    median over predicted rows of predicted_high_pct - predicted_low_pct, in points
  unlikely        predicted rows whose replayed range (the interval less its calibration margin) ends
                  under 1 % (the rows --skip-unlikely would skip
                  where the transform's record allowed it; the combined rows are never skipped and
                  are not counted)
  unlikely missed of those, rows that measured a significant saving (verdict faster) of 5 % or more
  margin          the split-conformal margin at 90 % over the transform's calibration rows (the rows of
                  one transform predicted and measured, significant or with a measured interval at most 10
                  points wide: a row that cannot tell 0 from 14 % scores its own noise; a row's score is how many points the measured saving
                  lay outside the replay's own range, 0 inside; the margin is the ceil((n+1) 0.9)-th
                  smallest score; "-": fewer than 9 rows), as analyzers/dependency/calibration.cc applies it
  calibrated (leave-one-out)
                  of the significant predicted rows, how many fall inside the replay's range widened by
                  the margin of the *other* rows (each row held out of its own calibration: the coverage a
                  new script would see); rows whose others are too few to give a margin are not counted
The "all" line counts every row of every report, the combined rows included.
The replay's own range is the row's interval less predicted_margin_points on each side (a report
written with a calibrated interval says by how much it widened it).
--calibration prints each transform's scores as calibration.cc's table takes them.
"""
import argparse
import json
import math
import pathlib
import re
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALL_ROWS = "(every fix together)"
NO_TRANSFORM = "(no transform)"
UNKNOWN = "(finding not in the catalog)"


def transforms_from_catalog(path):
    text = pathlib.Path(path).read_text()
    docs = re.findall(r'constexpr\s+const\s+char\s*\*\s*(k\w+)\s*=\s*"docs/[^"]*"\s*;', text)
    doc = "|".join([re.escape(d) for d in docs] + [r'"docs/[^"]*"'])
    tail = re.compile(r'(?:' + doc + r')\s*(?:,\s*"([a-z0-9_]*)"\s*)?\}')
    starts = list(re.finditer(r'\{\s*"([a-z][a-z0-9_]*\.[a-z0-9_.]+)"\s*,\s*"([a-z0-9_]+)"\s*,', text))
    out = {}
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        t = tail.search(text, m.end(), end)
        if t is None:
            raise SystemExit(f"{path}: cannot read the transform of {m.group(1)} (the entry's doc field not found)")
        out[m.group(1)] = t.group(1) or ""
    if not out:
        raise SystemExit(f"{path}: no catalog entries found")
    return out


def group_of(row, transforms):
    if row.get("all"):
        return ALL_ROWS
    if "transform" in row:  # written by fix since 2026-11-27; the catalog is the fallback for older reports
        return row["transform"] or NO_TRANSFORM
    findings = row.get("findings") or ([row["finding"]] if row.get("finding") else [])
    if not findings:
        return NO_TRANSFORM
    t = transforms.get(findings[0])
    if t is None:
        return UNKNOWN
    return t or NO_TRANSFORM


def inside(row):
    if "prediction_inside" in row:
        return bool(row["prediction_inside"])
    m = row["measured_saving_pct"]
    return row["predicted_low_pct"] <= m <= row["predicted_high_pct"]


LEVEL = 0.9


def raw_interval(r):
    m = r.get("predicted_margin_points") or 0.0
    return r["predicted_low_pct"] + m, r["predicted_high_pct"] - m


def score(r):
    lo, hi = raw_interval(r)
    x = r["measured_saving_pct"]
    return max(0.0, lo - x, x - hi)


PRECISE_POINTS = 10.0


def measured_width(r):
    """The measured saving's interval width in points (from the speedup's CI); inf where unknown."""
    lo, hi = r.get("ci_low"), r.get("ci_high")
    if not lo or not hi or lo <= 0 or hi <= 0:
        return math.inf
    return 100.0 * (1.0 / lo - 1.0 / hi)


def calibration_rows(rows):
    """Rows of one transform, predicted and measured precisely enough to score: significant, or a measured
    interval at most PRECISE_POINTS wide (a row that could not tell 0 from 14 % scores its noise, not the
    prediction's error)."""
    return [r for r in rows if not r.get("all") and "predicted_saving_pct" in r and "measured_saving_pct" in r
            and (r.get("verdict") in ("faster", "slower") or measured_width(r) <= PRECISE_POINTS)]


def conformal_margin(scores, level=LEVEL):
    n = len(scores)
    k = math.ceil((n + 1) * level - 1e-9)
    if n == 0 or k > n:
        return None
    return max(0.0, sorted(scores)[k - 1])


def summarize(rows):
    s = {"rows": len(rows), "measured": 0, "predicted": 0, "not_predictable": 0, "significant": 0,
         "significant_predicted": 0, "inside": 0, "close": 0, "coverage_pct": None, "median_abs_error_points": None,
         "median_width_points": None, "unlikely": 0, "unlikely_missed": 0, "margin_points": None,
         "loo_inside": 0, "loo_rows": 0}
    errors, widths = [], []
    for r in rows:
        measured = "measured_saving_pct" in r
        predicted = "predicted_saving_pct" in r
        significant = r.get("verdict") in ("faster", "slower")
        s["measured"] += measured
        s["predicted"] += predicted
        s["not_predictable"] += "not_predictable" in r
        s["significant"] += significant
        if predicted:
            widths.append(r["predicted_high_pct"] - r["predicted_low_pct"])
            if measured:
                errors.append(abs(r["measured_saving_pct"] - r["predicted_saving_pct"]))
                if significant:
                    s["significant_predicted"] += 1
                    s["inside"] += inside(r)
                    m, p = r["measured_saving_pct"], r["predicted_saving_pct"]
                    s["close"] += inside(r) or abs(m - p) <= max(5.0, 0.25 * abs(m))
            if not r.get("all") and r["predicted_high_pct"] - r.get("predicted_margin_points", 0.0) < 1.0:
                s["unlikely"] += 1
                if measured and r.get("verdict") == "faster" and r["measured_saving_pct"] >= 5.0:
                    s["unlikely_missed"] += 1
    cal = calibration_rows(rows)
    scores = [score(r) for r in cal]
    s["margin_points"] = conformal_margin(scores)
    for i, r in enumerate(cal):
        if r.get("verdict") not in ("faster", "slower"):
            continue
        q = conformal_margin(scores[:i] + scores[i + 1:])
        if q is None:
            continue
        lo, hi = raw_interval(r)
        s["loo_rows"] += 1
        s["loo_inside"] += lo - q <= r["measured_saving_pct"] <= hi + q
    if s["significant_predicted"]:
        s["coverage_pct"] = round(100.0 * s["inside"] / s["significant_predicted"], 3)
    if errors:
        s["median_abs_error_points"] = round(statistics.median(errors), 3)
    if widths:
        s["median_width_points"] = round(statistics.median(widths), 3)
    return s


def load(out_dir):
    reports = []
    for p in sorted(pathlib.Path(out_dir).glob("*.json")):
        try:
            doc = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"skipped {p}: {e}", file=sys.stderr)
            continue
        if doc.get("kind") != "fix" or not isinstance(doc.get("fixes"), list):
            print(f"skipped {p}: not a `trainrx fix --format json` report", file=sys.stderr)
            continue
        reports.append((p.stem, doc))
    return reports


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def markdown(groups, total, n_reports, row_list):
    head = ["transform", "rows", "measured", "predicted", "not predictable", "significant",
            "inside (coverage)", "inside or close", "median \\|err\\| (points)", "median width (points)", "unlikely",
            "unlikely, saved ≥ 5 %", "margin at 90 % (points)", "calibrated (leave-one-out)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def line(name, s):
        cov = (f"{s['inside']} of {s['significant_predicted']} ({s['coverage_pct']:.0f} %)"
               if s["significant_predicted"] else "-")
        close = f"{s['close']} of {s['significant_predicted']}" if s["significant_predicted"] else "-"
        cells = [name, s["rows"], s["measured"], s["predicted"], s["not_predictable"], s["significant"], cov, close,
                 fmt(s["median_abs_error_points"]), fmt(s["median_width_points"]), s["unlikely"],
                 s["unlikely_missed"], fmt(s["margin_points"]),
                 f"{s['loo_inside']} of {s['loo_rows']}" if s["loo_rows"] else "-"]
        return "| " + " | ".join(str(c) for c in cells) + " |"

    for name, s in groups.items():
        lines.append(line(f"`{name}`" if not name.startswith("(") else name, s))
    lines.append(line("**all**", total))
    text = "\n".join(lines)
    text += (f"\n\n{n_reports} report(s). Savings of the step in %, positive = faster; inside: of the significant "
             "rows (verdict faster or slower) that had a prediction, those whose measured saving fell inside the "
             "predicted interval; unlikely: the replayed range (the interval less its calibration margin) ending under 1 % (combined rows not counted).\n")
    if row_list:
        text += "\n| script | knob | findings | transform | predicted [interval] | measured | verdict |\n" \
                "|---|---|---|---|---|---|---|\n"
        for script, group, r in row_list:
            pred = (f"{r['predicted_saving_pct']:.1f} [{r['predicted_low_pct']:.1f}, {r['predicted_high_pct']:.1f}]"
                    if "predicted_saving_pct" in r else "not predictable")
            meas = fmt(r.get("measured_saving_pct"))
            text += (f"| {script} | `{r.get('knob', '')}` | {', '.join(r.get('findings') or []) or ('(--also)' if r.get('asked') else '')} | {group} | "
                     f"{pred} | {meas} | {r.get('verdict', '-')} |\n")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "bench" / "prediction" / "out"),
                    help="folder of `trainrx fix --format json` reports (default bench/prediction/out)")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    ap.add_argument("--rows", action="store_true", help="also list every row")
    ap.add_argument("--calibration", action="store_true",
                    help="print each transform's calibration rows as analyzers/dependency/calibration.cc takes them")
    ap.add_argument("--catalog", default=str(ROOT / "analyzers" / "catalog.cc"),
                    help="the finding catalog the transforms are read from")
    a = ap.parse_args()

    transforms = transforms_from_catalog(a.catalog)
    reports = load(a.out)
    if not reports:
        raise SystemExit(f"no `trainrx fix --format json` reports in {a.out}")
    by_group, every, row_list = {}, [], []
    for script, doc in reports:
        for r in doc["fixes"]:
            g = group_of(r, transforms)
            by_group.setdefault(g, []).append(r)
            every.append(r)
            row_list.append((script, g, r))
    order = sorted(by_group, key=lambda g: (g.startswith("("), g))
    groups = {g: summarize(by_group[g]) for g in order}
    total = summarize(every)
    if a.calibration:
        for g in order:
            if g.startswith("("):
                continue
            cal = calibration_rows(by_group[g])
            if not cal:
                continue
            scripts = sorted({s for s, grp, r in row_list if grp == g and r in cal})
            scores = ", ".join(f"{score(r):.1f}" for r in cal)
            print(f'      {{"{g}", {{{scores}}}, "bench/prediction, {len(cal)} rows on {len(scripts)} scripts: '
                  f'{", ".join(scripts)}"}},')
        return
    if a.json:
        out = {"reports": [s for s, _ in reports], "transforms": groups, "all": total}
        if a.rows:
            out["rows"] = [{"script": s, "transform": g, **{k: r[k] for k in (
                "knob", "findings", "all", "estimated_saving_pct", "predicted_saving_pct", "predicted_low_pct",
                "predicted_high_pct", "not_predictable", "measured_saving_pct", "speedup", "ci_low", "ci_high",
                "verdict") if k in r}} for s, g, r in row_list]
        json.dump(out, sys.stdout, indent=2)
        print()
    else:
        sys.stdout.write(markdown(groups, total, len(reports), row_list if a.rows else None))


if __name__ == "__main__":
    main()
