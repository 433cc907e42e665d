#!/usr/bin/env python3
"""A synthetic N-rank set from one real rank's Kineto trace (issue 18's scale figures).

Every rank gets the source's events, its own distributedInfo (rank r of world N), a clock offset
(its baseTimeNanoseconds moved by a seeded uniform draw in +-MAX_OFFSET_US) and, for the straggler
rank, communication kernels that start LATE_MS later while everyone's end at the same moment: it
arrives last at every collective, and the others' kernels last LATE_MS longer (their wait for it).
manifest.json.planted beside the ranks says what was planted.

Usage: make_rank_set.py SOURCE.json[.gz] OUT_DIR --ranks 256 [--straggler 17] [--late-ms 2]
       [--max-offset-us 300] [--seed 1]
"""
import argparse, gzip, json, os, random, re, sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--straggler", type=int, default=17)
    ap.add_argument("--late-ms", type=float, default=2.0, help="how late the straggler arrives at each collective")
    ap.add_argument("--max-offset-us", type=float, default=300)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    opener = gzip.open if a.source.endswith(".gz") else open
    with opener(a.source, "rt") as f:
        doc = json.load(f)
    base = int(doc.get("baseTimeNanoseconds", 0))
    events = doc["traceEvents"]

    def render(straggler):
        d = dict(doc)
        evs = []
        for e in events:
            if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower() and e.get("dur", 0) > 0:
                e = dict(e)
                late_us = a.late_ms * 1000
                if straggler:
                    e["ts"] = round(e["ts"] + late_us, 3)  # arrives late, ends with the others
                else:
                    e["dur"] = round(e["dur"] + late_us, 3)  # waits for it
            evs.append(e)
        d["traceEvents"] = evs
        d["distributedInfo"] = dict(doc.get("distributedInfo", {}), rank=123456789, world_size=a.ranks)
        d["baseTimeNanoseconds"] = 987654321987654321
        return json.dumps(d, separators=(",", ":"))

    plain, late = render(False), render(True)
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    offsets = {}
    for r in range(a.ranks):
        off_ns = 0 if r == 0 else int(rng.uniform(-a.max_offset_us, a.max_offset_us) * 1000)
        offsets[r] = off_ns
        text = (late if r == a.straggler else plain).replace("123456789", str(r), 1).replace(
            "987654321987654321", str(base + off_ns), 1)
        with open(os.path.join(a.out, f"rank-{r}.json"), "w") as f:
            f.write(text)
    with open(os.path.join(a.out, "manifest.json.planted"), "w") as f:
        json.dump({"ranks": a.ranks, "straggler": a.straggler, "late_ms": a.late_ms,
                   "clock_offset_ns": offsets, "source": a.source}, f)
    print(f"{a.ranks} ranks of {len(plain) / 1e6:.1f} MB in {a.out} (straggler {a.straggler})", file=sys.stderr)


if __name__ == "__main__":
    main()
