#!/usr/bin/env bash
# Runs libFuzzer on strata-fuzz targets, one at a time (see Fuzz/README.md).
#
#   Fuzz/fuzz.sh SECONDS [TARGET...]     default: every target
#
# Expects the fuzzer built (make fuzz-build). Each target starts from a
# scratch copy of Fuzz/Corpus/<target> plus Fuzz/Regressions/<target> in
# .build-fuzz/runs/<target> (the committed corpus never grows; the scratch
# corpus carries over between runs, so long runs keep what they found).
# A crash, timeout, leak or out-of-memory stops the run: the input is in
# .build-fuzz/artifacts/<target>/ and the exit status is non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:?usage: Fuzz/fuzz.sh SECONDS [TARGET...]}
shift
binary=.build-fuzz/release/strata-fuzz
[ -x "$binary" ] || { echo "fuzz.sh: $binary is missing; run make fuzz-build" >&2; exit 2; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(ls Fuzz/Corpus))

summary=()
for target in "${targets[@]}"; do
    corpus=.build-fuzz/runs/$target
    artifacts=.build-fuzz/artifacts/$target/
    mkdir -p "$corpus" "$artifacts"
    cp Fuzz/Corpus/"$target"/* "$corpus"/
    if [ -d Fuzz/Regressions/"$target" ] && [ -n "$(ls -A Fuzz/Regressions/"$target")" ]; then
        cp Fuzz/Regressions/"$target"/* "$corpus"/
    fi
    log=.build-fuzz/runs/$target.log
    echo "fuzz: $target for ${seconds}s ..."
    status=0
    # SWIFT_BACKTRACE=enable=no: the Swift backtracer and ASan trip over each
    # other after a trap; libFuzzer's own report is the one to read.
    SWIFT_BACKTRACE=enable=no STRATA_FUZZ_TARGET=$target "$binary" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=3072 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" > "$log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    summary+=("$(printf '%-9s %10s runs %8s exec/s  %s' "$target" "${runs:-?}" "${rate:-?}" "${cov:-}")")
    if [ "$status" -ne 0 ]; then
        grep -v '^  \|^#[0-9]' "$log" | tail -25 >&2
        echo "fuzz: $target FAILED (exit $status); input saved in $artifacts, log in $log" >&2
        echo "fuzz: a Swift trap shows only as a deadly signal here; for its message and backtrace replay" >&2
        echo "fuzz: the input without sanitizers: swift build --product strata-fuzz && .build/debug/strata-fuzz $target <input>" >&2
        printf '%s\n' "${summary[@]}"
        exit 1
    fi
done
printf '%s\n' "${summary[@]}"
