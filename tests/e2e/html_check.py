#!/usr/bin/env python3
"""Checks a trainrx HTML report as a browser drew it.

Usage: html_check.py PAGE.html DOM.html [EXPECTED.json]

PAGE.html is the file trainrx wrote; DOM.html is what headless Chromium's --dump-dom printed after
running its script. The JSON document embedded in PAGE (the report's data) is the reference: the
counts drawn in the DOM must equal it. EXPECTED.json, when given, is the same run's `--format json`
report, and must equal the embedded document. Exits 1 with one line per mismatch.
"""
import html.parser
import json
import re
import sys


class Dom(html.parser.HTMLParser):
    """Elements as (tag, attrs, parent ids, text) plus the text under each id'd element."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.stack = []
        self.text_by_id = {}
        self.texts = []  # per element: its own text (not its children's)
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        classes = set((a.get("class") or "").split())
        self.elements.append((tag, a, classes, [s[1].get("id") for s in self.stack if s[1].get("id")],
                              [s[1].get("class", "") for s in self.stack]))
        self.texts.append("")
        if tag not in ("br", "meta", "input", "img", "link", "col", "hr", "circle", "rect", "line", "polyline"):
            self.stack.append((tag, a, len(self.elements) - 1))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        if self.stack:
            self.texts[self.stack[-1][2]] += data
        for _, a, _ in self.stack:
            if a.get("id"):
                self.text_by_id[a["id"]] = self.text_by_id.get(a["id"], "") + data

    def count(self, tag=None, cls=None, inside=None):
        return sum(1 for t, a, c, ids, _ in self.elements
                   if (tag is None or t == tag) and (cls is None or cls in c) and (inside is None or inside in ids))

    def find(self, tag=None, id=None):
        for t, a, c, ids, _ in self.elements:
            if (tag is None or t == tag) and (id is None or a.get("id") == id):
                return a
        return None


def embedded(page):
    m = re.search(r'<script type="application/json" id="trainrx-data">(.*?)</script>', page, re.S)
    if not m:
        raise SystemExit(f"no embedded document in the page")
    return json.loads(m.group(1))


def main():
    page_path, dom_path = sys.argv[1], sys.argv[2]
    page = open(page_path, encoding="utf-8").read()
    doc = embedded(page)
    dom = Dom()
    dom.feed(open(dom_path, encoding="utf-8", errors="replace").read())
    bad = []

    def expect(cond, what):
        if not cond:
            bad.append(what)

    status = dom.find(id="trainrx-status")
    expect(status is not None, "the script did not finish (#trainrx-status missing)")
    if status is not None:
        expect(status.get("data-errors") == "0", f"script errors: {dom.text_by_id.get('trainrx-errors', '')[:500]}")
        expect(status.get("data-kind") == doc["kind"], f"kind {status.get('data-kind')} != {doc['kind']}")
    # Only the page's own three scripts exist: no name became markup.
    expect(dom.scripts == 3, f"{dom.scripts} script elements in the DOM (expected the page's 3)")
    r = doc["report"]
    kind = doc["kind"]
    drawn = {}
    if kind == "analysis":
        if len(sys.argv) > 3:
            expected = json.load(open(sys.argv[3]))
            expect(expected == r, "the embedded document differs from the same run's --format json report")
        drawn["findings"] = dom.count("div", "finding")
        expect(drawn["findings"] == len(r["findings"]), f"{drawn['findings']} finding cards, JSON has {len(r['findings'])}")
        # The step table of the first rank drawn: a row per steady step, and a column per declared
        # figure its rows carry (steps.fields: a new per-step metric is one declaration).
        steps = r.get("steps") or {}
        rows = steps.get("rows") or []
        if rows:
            first = rows[0]["rank"]
            mine = [x for x in rows if x["rank"] == first]
            drawn["step-table"] = dom.count("tr", "row", inside="step-table")
            expect(drawn["step-table"] == len(mine), f"step-table: {drawn['step-table']} rows, JSON has {len(mine)} (rank {first})")
            carried = [f["label"] for f in steps.get("fields", []) if any(f["name"] in x for x in mine)]
            heads = dom.count("th", inside="step-table")
            expect(heads == 1 + len(carried), f"step-table: {heads} columns, the rows carry {len(carried)} declared figures + the name")
            expect(len(carried) >= 2, "step-table: fewer than two declared figures (steps.fields missing?)")
        for key, table in (("op_table", "op-table"), ("kernel_table", "kernel-table"), ("module_table", "module-table")):
            rows = r["metrics"][key]["rows"]
            if key == "module_table" and not rows:
                continue  # no module ranges: no section
            n = dom.count("tr", "row", inside=table)
            drawn[table] = n
            expect(n == len(rows), f"{table}: {n} rows, JSON has {len(rows)}")
            expect(dom.count("tr", "other", inside=table) == (1 if rows and r["metrics"][key]["other"] else 0),
                   f"{table}: the 'other' row")
        steps = [s for s in r["steps"]["rows"]] + r["steps"]["warmup"]
        bars = dom.count("g", "bar-step")
        drawn["step bars"] = bars
        if steps:
            first_rank = min(s["rank"] for s in steps)
            mine = sum(1 for s in steps if s["rank"] == first_rank)
            gpu = sum(1 for s in r["steps"]["rows"] if s["rank"] == first_rank and "gpu_kernel_ns" in s)
            expect(bars == mine + gpu, f"{bars} step bars, expected {mine} (+{gpu} GPU) for rank {first_rank}")
        canvas = dom.find("canvas", "timeline-canvas")
        tl = doc.get("timeline") or {}
        if tl.get("windows"):
            expect(canvas is not None, "no timeline canvas")
            if canvas is not None:
                n = int(canvas.get("data-drawn", "0"))
                drawn["timeline events"] = n
                expect(n > 0, "the timeline drew nothing")
                kept = tl["windows"][0]["events_kept"]
                expect(n <= kept, f"the timeline drew {n} events, the window keeps {kept}")
        paths = r["metrics"].get("critical_path", [])
        drawn["path segments"] = dom.count("rect", "path-seg")
        want = sum(len(p["segments"]) for p in paths)
        expect(drawn["path segments"] == want, f"{drawn['path segments']} critical-path segments drawn, JSON has {want}")
        expect(dom.count("div", "path-bar") == len(paths), f"{dom.count('div', 'path-bar')} path bars for {len(paths)} ranks")
        # Hardware utilization (issue 52): one roofline point per op with a rate, per rank.
        util = r["metrics"].get("utilization", [])
        drawn["roofline points"] = dom.count("circle", "roof-op")
        want = sum(1 for u in util for o in u["ops"] if o["tflops"] > 0 and o["intensity"] > 0)
        expect(drawn["roofline points"] == want, f"{drawn['roofline points']} roofline points drawn, JSON has {want}")
        for u in util:
            n = dom.count("tr", "row", inside=f"flops-{u['rank']}")
            expect(n == len(u["ops"]), f"flops-{u['rank']}: {n} rows, JSON has {len(u['ops'])}")
        # Each finding's evidence is shown as labelled values (issue 61), its raw keys only in one fold
        # per card that has evidence: a key like idle_graph_nodes_ns is not a label.
        with_evidence = sum(1 for f in r["findings"] if f.get("evidence"))
        drawn["evidence folds"] = dom.count("details", "raw-evidence")
        expect(drawn["evidence folds"] == with_evidence, f"{drawn['evidence folds']} raw-evidence folds, {with_evidence} findings with evidence")
        keys = {k for f in r["findings"] for k in (f.get("evidence") or {}) if "_" in k}
        labels = [dom.texts[i].strip() for i, (t, a, c, ids, parents) in enumerate(dom.elements)
                  if t == "div" and "k" in c and not any("raw-evidence" in p for p in parents)]
        raw_labels = sorted(set(labels) & keys)
        expect(not raw_labels, f"evidence keys shown as labels outside the fold: {raw_labels[:5]}")
        # Each finding with a replayed prediction draws the step now and with the fix (issue 59).
        replayed = sum(1 for f in r["findings"] if (f.get("predicted") or {}).get("method") == "replay")
        drawn["before/after"] = dom.count("svg", "before-after")
        expect(drawn["before/after"] == replayed, f"{drawn['before/after']} before/after drawings, {replayed} replayed predictions")
        expect(dom.count("rect", "ba-bar") == 2 * replayed and dom.count("line", "ba-interval") == replayed,
               "each before/after drawing has its two bars and the interval")
        # The navigation links to the sections the page has, and to every one of them (issue 60).
        links = [a.get("href", "")[1:] for t, a, c, ids, _ in dom.elements if t == "a" and "nav" in ids]
        sections = [a.get("id") for t, a, c, ids, _ in dom.elements if t == "section" and a.get("id")]
        expect(links == sections, f"the navigation links {links}, the page's sections are {sections}")
        # Rates in the unit their magnitude reads in (issue 60: a CPU's "dense peak 0.0 TFLOP/s").
        shown = dom.text_by_id.get("utilization", "")
        if any(0 < (u.get("peak_tflops") or 0) < 1 or 0 < (u.get("achieved_tflops") or 0) < 1 for u in util):
            expect(not re.search(r"\b0\.0+ TFLOP/s", shown), "a rate under 1 TFLOP/s shown as 0.0 TFLOP/s")
            expect("GFLOP/s" in shown or "MFLOP/s" in shown, "no GFLOP/s or MFLOP/s in the utilization section")
        buttons = dom.count("button", "show-on-timeline")
        expect(buttons == len(r["findings"]), f"{buttons} timeline links for {len(r['findings'])} findings")
    elif kind == "fix":
        drawn["forest rows"] = dom.count("g", "forest-row")
        expect(drawn["forest rows"] == len(r["fixes"]), f"{drawn['forest rows']} forest rows, JSON has {len(r['fixes'])} fixes")
        n = dom.count("tr", "row", inside="fix-table")
        expect(n == len(r["fixes"]), f"fix table: {n} rows, JSON has {len(r['fixes'])}")
        # a saving's sign is drawn once: a loss "+5.8%", never "--5.8%" or "-+5.8%"
        bad_sign = re.search(r"(--|-\+|\+-|\+\+)\d", dom.text_by_id.get("fixes", ""))
        expect(bad_sign is None, f"fix table draws a doubled sign: {bad_sign.group(0) if bad_sign else ''}")
        # one sign everywhere (issue 81.7): a saving is positive when the fix is faster, as in the text
        # report and in analyze's "predicted saving"
        shown = dom.text_by_id.get("fixes", "")
        for f in r["fixes"]:
            if f.get("speedup", 0) > 0:
                saving = f"{100 * (1 - 1 / f['speedup']):.1f}%"
                expect(saving in shown, f"fix table: {f['knob']}'s measured saving {saving} not drawn")
    elif kind == "sweep":
        drawn["cells"] = dom.count("td", "cell")
        expect(drawn["cells"] == len(r["cells"]), f"{drawn['cells']} grid cells, JSON has {len(r['cells'])}")
        expect(dom.count("td", "best") == 1, "the best cell is not marked once")
    elif kind == "ab":
        n = len(r["a"]["trial_ms"]) + len(r["b"]["trial_ms"]) + min(len(r["a"]["trial_ms"]), len(r["b"]["trial_ms"]))
        drawn["samples"] = dom.count("circle", "sample")
        expect(drawn["samples"] == n, f"{drawn['samples']} sample points, expected {n} (A, B, paired)")
    elif kind == "gate":
        n = dom.count("tr", "row", inside="gate-table")
        expect(n == len(r["metrics"]), f"gate table: {n} rows, JSON has {len(r['metrics'])}")
        verdict = dom.text_by_id.get("gate-verdict", "").strip()
        expect(verdict == r["verdict"], f"verdict drawn '{verdict}', JSON '{r['verdict']}'")
    elif kind == "diff":
        if len(sys.argv) > 3:
            expected = json.load(open(sys.argv[3]))
            expect(expected == r, "the embedded document differs from the same diff's --format json")
        for key, table in (("ranked", "diff-ranked"), ("phases", "diff-phases"), ("shapes", "diff-shapes"),
                           ("collectives", "diff-collectives"), ("config", "diff-config"), ("findings", "diff-findings")):
            if not r[key]:
                continue
            n = dom.count("tr", "row", inside=table)
            drawn[table] = n
            expect(n == len(r[key]), f"{table}: {n} rows, JSON has {len(r[key])}")
        if not r["ranked"]:
            expect(dom.find(id="diff-ranked-empty") is not None, "no ranked row and no 'No row beyond noise'")
        drawn["side-by-side bars"] = dom.count("g", "bar-step")
        expect(drawn["side-by-side bars"] == 2, f"{drawn['side-by-side bars']} step-breakdown bars, expected A and B")
        verdict = dom.text_by_id.get("diff-verdict", "").strip()
        want = ("Not judged against noise" if r.get("judged") is False else "Within noise" if r["within_noise"]
                else "B is slower" if r["delta_mean_ns"] > 0 else "B is faster")
        expect(verdict == want, f"verdict drawn '{verdict}', JSON says '{want}'")
    if kind in ("ab", "gate") and r.get("why"):  # the explanation under the verdict (issue 37)
        w = r["why"]
        n = dom.count("tr", "row", inside="why-ranked")
        drawn["why rows"] = n
        expect(n == len(w["ranked"]), f"why: {n} ranked rows, JSON has {len(w['ranked'])}")
    print(f"  {page_path.split('/')[-1]}: {kind}, drawn {drawn}")
    for b in bad:
        print(f"  FAIL {page_path}: {b}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
