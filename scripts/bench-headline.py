#!/usr/bin/env python3
"""Writes the README's headline figures from the --json documents of a
bench-report run: usage: bench-headline.py RUNS_DIR COMMIT DATE README.md

The table goes between the README's `<!-- headline figures ... -->` marker
and the next blank line after the table; a figure whose scenario did not run
is left out."""
import json, os, re, statistics, sys

runs, commit, date, readme = sys.argv[1:5]

def load(name):
    path = os.path.join(runs, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None

rows = []  # (what, Strata, baseline, ratio text)

stall = load("stall")
if stall:
    names = {"view-child": "import child → view → writer → disk", "writer-child": "import child of the writer",
             "private-context": "a private context on the coordinator"}
    for s in stall["summary"]:
        if s["layout"] not in names:
            continue
        name = names[s["layout"]]
        if s["layout"] != "private-context":
            rows.append((f"longest main-queue stall while {stall['objects']:,} objects are imported ({name}; median of rounds)",
                         f"{s['stall']['max']:.2f} ms", "", ""))
        if s.get("vsSQLite"):
            rows.append((f"the same import to disk, a save every {stall['saveEvery']:,} ({name})", f"{s['objectsPerSecond']:,.0f} objects/s",
                         "SQLite", f"{s['vsSQLite']:.2f}× SQLite's rate"))

imp = load("import")
if imp:
    by = {r["style"]: r for r in imp["runs"]}
    d, f, sq = by.get("dictionary"), by.get("find-or-create"), by.get("SQLite")
    if d and f:
        rows.append((f"import of {imp['records']:,} records, batches of {imp['batch']:,}: find-or-create per record",
                     f"{f['firstSeconds']:.2f} s", f"{d['firstSeconds']:.2f} s (hand-kept dictionary)", f"{f['firstSeconds']/d['firstSeconds']:.2f}×"))
    if d and sq:
        rows.append(("the same import through a hand-kept dictionary", f"{d['firstSeconds']:.2f} s", f"{sq['firstSeconds']:.2f} s (SQLite upsert)", f"{d['firstSeconds']/sq['firstSeconds']:.2f}×"))
    if d:
        rows.append(("re-import of unchanged data: bytes written", f"{d['unchangedBytesWritten']:,} B", "", f"first import: {d['firstBytesWritten']/1048576:.1f} MiB"))
    if imp.get("inFetchMs") and imp.get("sqliteInFetchMs"):
        rows.append((f"IN fetch of {imp['keys']:,} keys", f"{imp['inFetchMs']:.1f} ms", f"{imp['sqliteInFetchMs']:.1f} ms (SQLite IN)", f"{imp['inFetchMs']/imp['sqliteInFetchMs']:.2f}×"))

lookup = load("lookup")
if lookup and lookup.get("openAndFirstQueryMs") and lookup.get("sqliteOpenAndFirstQueryMs"):
    a, b = statistics.median(lookup["openAndFirstQueryMs"]), statistics.median(lookup["sqliteOpenAndFirstQueryMs"])
    rows.append((f"cold open of {lookup['objects']:,} objects and a first query", f"{a:.1f} ms", f"{b:.1f} ms (SQLite)", f"{a/b:.2f}×"))
if lookup and lookup.get("indexed") and lookup.get("sqliteIndexedMs"):
    a, b = statistics.median([r["milliseconds"] for r in lookup["indexed"]]), statistics.median(lookup["sqliteIndexedMs"])
    rows.append((f"fetch by an indexed name among {lookup['objects']:,} objects", f"{a:.2f} ms", f"{b:.2f} ms (SQLite)", f"{a/b:.2f}×"))

pages = load("pages")
if pages:
    for p in pages["pages"]:
        rows.append((f"page: {p['page']} over {pages['objects']:,} rows", f"{p['strataMs']:.3f} ms", f"{p['sqliteMs']:.3f} ms (SQLite)", f"{p['strataMs']/p['sqliteMs']:.2f}×"))

table = ["| figure | Strata | baseline | ratio |", "|---|---|---|---|"]
table += [f"| {w} | {s} | {b} | {r} |" for (w, s, b, r) in rows]

text = open(readme).read()
marker = re.search(r"<!-- headline figures[^\n]*-->\n", text)
if not marker:
    sys.exit("bench-headline: README.md has no <!-- headline figures --> marker")
start = marker.end()
# Replace a table already there (lines starting with '|' right after the marker).
rest = text[start:]
m = re.match(r"(\n?(\|[^\n]*\n)+)", rest)
if m:
    rest = rest[m.end():]
text = text[:start] + "\n".join(table) + "\n" + rest
open(readme, "w").write(text)
