#!/usr/bin/env bash
# Builds the DocC catalogs of Strata and StrataStore from the modules' public
# symbol graphs, with warnings as errors (a broken link, an unknown symbol or
# an article that does not resolve fails), then checks that every public
# symbol has a doc comment (scripts/doc-coverage.py). `make docs` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
DOCC=${DOCC:-$(dirname "$(readlink -f "$(command -v "$SWIFT")")")/docc}
[ -x "$DOCC" ] || DOCC=$(command -v docc)

# SCRATCH: the build folder (.build unless you say otherwise).
scratch=${SCRATCH:-.build}
# dump-symbol-graph reads every module of the package, the test modules
# included, so they must be built (after `make test` this builds nothing).
$SWIFT build --build-tests --scratch-path "$scratch" >&2
$SWIFT package --scratch-path "$scratch" dump-symbol-graph --minimum-access-level public >&2
graphs=$(ls -d "$scratch"/*/symbolgraph | head -1)

for module in Strata StrataStore; do
    own=$scratch/docs/$module-symbolgraph
    rm -rf "$own" && mkdir -p "$own"
    cp "$graphs/$module.symbols.json" "$own/"
    cp "$graphs/$module"@*.symbols.json "$own/" 2>/dev/null || true
    "$DOCC" convert "Sources/$module/$module.docc" \
        --additional-symbol-graph-dir "$own" \
        --output-path "$scratch/docs/$module.doccarchive" \
        --fallback-display-name "$module" --fallback-bundle-identifier "strata.$module" \
        --warnings-as-errors
done

python3 scripts/doc-coverage.py "$graphs" Strata StrataStore
echo "docs: $scratch/docs/Strata.doccarchive and $scratch/docs/StrataStore.doccarchive" >&2
