#!/usr/bin/env python3
"""Every name in every trace under the given paths is text: valid UTF-8, no control characters.

Usage: check_trace_names.py PATH...   (files, or folders searched for *.json and *.json.gz)

A trace is a JSON file with a "traceEvents" array (what `trainrx record` and `trainrx convert`
write); other JSON files (reports, summaries) are left alone. Checked in each trace: every event's
"name" and "cat", the names in metadata events' args (thread and process names), every args key,
and the keys of the top-level "trainrx" block. A name made of freed heap bytes (issue 49.1: a
counter named "trainrx.config." + raw pointers) fails here: either the bytes are not UTF-8, or they
decode to control characters.
Exit 0 when every name is clean, 1 with one line per bad name (file, event index, field, the name
escaped), 2 when a file cannot be read as JSON.
"""
import gzip
import json
import os
import sys


def bad_reason(s):
    """Why the string is not a clean name, or None."""
    for ch in s:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # surrogateescape: a byte that is not UTF-8
            return "bytes that are not UTF-8"
        if o < 0x20 or 0x7F <= o < 0xA0:
            return f"control character U+{o:04X}"
    return None


def load(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    # surrogateescape keeps bytes that are not UTF-8 as lone surrogates, so they are reported
    # against the name that holds them instead of failing the whole file.
    return json.loads(raw.decode("utf-8", "surrogateescape"))


def names_of(doc):
    """(where, name) for every name a trace holds."""
    for i, ev in enumerate(doc.get("traceEvents", [])):
        if not isinstance(ev, dict):
            continue
        for field in ("name", "cat"):
            if isinstance(ev.get(field), str):
                yield f"event {i} {field}", ev[field]
        args = ev.get("args")
        if isinstance(args, dict):
            for k, v in args.items():
                yield f"event {i} args key", k
                if ev.get("ph") == "M" and k == "name" and isinstance(v, str):
                    yield f"event {i} args.name", v
    block = doc.get("trainrx")
    if isinstance(block, dict):
        for k in block:
            yield "trainrx block key", k


def traces_under(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in sorted(files):
                    if f.endswith(".json") or f.endswith(".json.gz"):
                        yield os.path.join(root, f)
        else:
            yield p


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    problems, traces, names = 0, 0, 0
    for path in traces_under(argv[1:]):
        try:
            doc = load(path)
        except (OSError, ValueError) as e:
            if path in argv[1:]:
                print(f"{path}: cannot read as JSON: {e}", file=sys.stderr)
                return 2
            continue  # a partial or non-JSON file found in a folder (a journal left beside a trace)
        if not isinstance(doc, dict) or "traceEvents" not in doc:
            continue
        traces += 1
        for where, name in names_of(doc):
            names += 1
            why = bad_reason(name)
            if why:
                problems += 1
                shown = name.encode("utf-8", "surrogateescape")[:80]
                print(f"{path}: {where}: {why}: {shown!r}")
    print(f"check_trace_names: {traces} trace(s), {names} names, {problems} bad")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
