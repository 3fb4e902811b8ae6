#!/usr/bin/env python3
"""Every public symbol of the given modules has a doc comment.

usage: doc-coverage.py SYMBOLGRAPH_DIR MODULE... [--write-exceptions]

Reads each module's symbol graph (`swift package dump-symbol-graph`) and
lists its public symbols without documentation. Members that implement a
standard protocol's requirement (`description`, `==`, `hash(into:)`,
`encode(to:)`…) inherit the protocol's documentation and are not counted;
nor are `@_spi` symbols, which are not public API.

scripts/doc-coverage-exceptions.txt lists the symbols still undocumented
when this check began; it may only shrink. The check fails on an
undocumented symbol it does not list, and on a listed one that is now
documented or gone (so the list is kept exact)."""
import json, os, sys

INHERITED = {
    "description", "debugDescription", "hash(into:)", "hashValue", "==(_:_:)", "!=(_:_:)",
    "<(_:_:)", "<=(_:_:)", ">(_:_:)", ">=(_:_:)", "encode(to:)", "init(from:)",
    "makeIterator()", "next()", "startIndex", "endIndex", "index(after:)", "index(before:)",
    "init(stringLiteral:)", "init(integerLiteral:)", "init(arrayLiteral:)", "init(extendedGraphemeClusterLiteral:)",
    "init(unicodeScalarLiteral:)", "init(floatLiteral:)", "init(booleanLiteral:)", "init(nilLiteral:)",
    "errorDescription", "localizedDescription", "id", "init(rawValue:)", "rawValue", "allCases",
    "count", "isEmpty", "underestimatedCount", "indices",
}

args = [a for a in sys.argv[1:] if not a.startswith("--")]
write = "--write-exceptions" in sys.argv
graphs, modules = args[0], args[1:]
here = os.path.dirname(os.path.abspath(__file__))
exceptions_path = os.path.join(here, "doc-coverage-exceptions.txt")

undocumented = set()
for module in modules:
    graph = json.load(open(os.path.join(graphs, f"{module}.symbols.json")))
    for symbol in graph["symbols"]:
        if symbol.get("accessLevel") not in ("public", "open") or symbol.get("spi"):
            continue
        precise = symbol["identifier"]["precise"]
        if "::SYNTHESIZED::" in precise:
            continue
        path = symbol["pathComponents"]
        if path[-1] in INHERITED or path[-1].startswith("_"):
            continue
        if symbol.get("docComment", {}).get("lines"):
            continue
        undocumented.add(f"{module}: {'.'.join(path)}")

if write:
    with open(exceptions_path, "w") as f:
        f.write("# Public symbols without a doc comment when scripts/doc-coverage.py began; this list may only shrink.\n")
        for line in sorted(undocumented):
            f.write(line + "\n")
    print(f"doc-coverage: wrote {len(undocumented)} exceptions")
    sys.exit(0)

allowed = set()
if os.path.exists(exceptions_path):
    allowed = {l.strip() for l in open(exceptions_path) if l.strip() and not l.startswith("#")}
new = sorted(undocumented - allowed)
stale = sorted(allowed - undocumented)
for line in new:
    print(f"undocumented public symbol: {line}")
for line in stale:
    print(f"documented or gone, remove from scripts/doc-coverage-exceptions.txt: {line}")
if new or stale:
    sys.exit(1)
print(f"doc-coverage: every public symbol documented ({len(allowed)} listed exceptions remain)")
