#!/usr/bin/env python3
"""Writes the README's headline figures from the --json documents of a
bench-report run (scripts/bench-report.sh keeps them in .build/bench-report):

    bench-headline.py RUNS_DIR README.md

The table goes right after the README's `<!-- headline figures ... -->`
marker, replacing the table there; a figure whose scenario did not run is
left out. Times compare as Strata's time over the baseline's (below 1 is
faster), rates as Strata's rate over the baseline's (above 1 is faster)."""
import json, os, re, statistics, sys

runs, readme = sys.argv[1:3]

def load(name):
    path = os.path.join(runs, name + ".json")
    return json.load(open(path)) if os.path.exists(path) else None

def ms(value):
    return f"{value * 1000:.0f} µs" if value < 1 else f"{value:.1f} ms"

rows = []  # (what, Strata, baseline, comparison)

stall = load("stall")
if stall:
    by = {s["layout"]: s for s in stall["summary"]}
    for layout, name in (("view-child", "an import child of the view context"), ("writer-child", "an import child of the writer")):
        if layout in by:
            rows.append((f"longest main-queue stall while {stall['objects']:,} objects are imported through {name} (median of {by[layout]['rounds']} rounds)",
                         ms(by[layout]["stall"]["max"]), "", ""))
    if stall.get("floorSummary"):
        rows.append(("the same timer with nothing imported: the machine's own noise (median of rounds)", ms(stall["floorSummary"]["max"]), "", ""))
    if "writer-child" in by and by["writer-child"].get("vsSQLite"):
        s = by["writer-child"]
        rows.append((f"that import to disk, a durable save every {stall['saveEvery']:,} objects", f"{s['objectsPerSecond']:,.0f} objects/s",
                     "SQLite, the same saves", f"{s['vsSQLite']:.2f}× SQLite's rate"))

imp = load("import")
if imp:
    by = {r["style"]: r for r in imp["runs"]}
    d = by.get("dictionary")
    for style, how in (("find-or-create-by-key", "`findOrCreate(where: \\.sku, equals: sku)` per record"),
                       ("find-or-create", "`findOrCreate(where: #Predicate { $0.sku == sku })` per record")):
        f = by.get(style)
        if d and f:
            rows.append((f"catalogue import of {imp['records']:,} records in batches of {imp['batch']:,}: {how}",
                         f"{f['firstSeconds']:.2f} s", f"{d['firstSeconds']:.2f} s, a hand-kept dictionary", f"{f['firstSeconds'] / d['firstSeconds']:.2f}× its time"))
    if d:
        rows.append(("re-import of the unchanged catalogue: bytes written", f"{d['unchangedBytesWritten']:,} B",
                     f"{d['firstBytesWritten'] / 1048576:.1f} MiB, the first import", ""))
    if imp.get("inFetchMs") and imp.get("sqliteInFetchMs"):
        rows.append((f"`IN` fetch of {imp['keys']:,} keys", ms(imp["inFetchMs"]), f"{ms(imp['sqliteInFetchMs'])}, SQLite's `IN`",
                     f"{imp['inFetchMs'] / imp['sqliteInFetchMs']:.2f}× its time"))

lookup = load("lookup")
if lookup and lookup.get("indexed") and lookup.get("sqliteIndexedMs"):
    a, b = statistics.median([r["milliseconds"] for r in lookup["indexed"]]), statistics.median(lookup["sqliteIndexedMs"])
    rows.append((f"fetch by an indexed name among {lookup['objects']:,} objects", ms(a), f"{ms(b)}, SQLite", f"{a / b:.2f}× its time"))
if lookup and lookup.get("openAndFirstQueryMs") and lookup.get("sqliteOpenAndFirstQueryMs"):
    a, b = statistics.median(lookup["openAndFirstQueryMs"]), statistics.median(lookup["sqliteOpenAndFirstQueryMs"])
    rows.append((f"open a store of {lookup['objects']:,} objects and fetch one by ID", ms(a), f"{ms(b)}, SQLite", f"{a / b:.2f}× its time"))

pages = load("pages")
if pages:
    # The top of a list, and a page no run viewed before (a list paged through).
    for p in pages["pages"][:2] + [p for p in pages["pages"] if "not viewed before" in p["page"]]:
        rows.append((f"a page: {p['page']}, over {pages['objects']:,} rows", ms(p["strataMs"]), f"{ms(p['sqliteMs'])}, SQLite",
                     f"{p['strataMs'] / p['sqliteMs']:.2f}× its time"))

table = ["| figure | Strata | baseline | comparison |", "|---|---|---|---|"]
table += [f"| {w} | {s} | {b} | {c} |" for (w, s, b, c) in rows]

text = open(readme).read()
marker = re.search(r"<!-- headline figures[^\n]*-->\n", text)
if not marker:
    sys.exit("bench-headline: README.md has no <!-- headline figures --> marker")
start = marker.end()
rest = text[start:]
existing = re.match(r"(\|[^\n]*\n)+", rest)
if existing:
    rest = rest[existing.end():]
open(readme, "w").write(text[:start] + "\n".join(table) + "\n" + rest)
