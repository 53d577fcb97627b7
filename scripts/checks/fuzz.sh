#!/usr/bin/env bash
# A short, bounded fuzz run of every file reader (cargo-fuzz, nightly): each target for the given
# seconds, from its corpus in fuzz/corpus/<target>, which grows as libFuzzer finds new paths
# (commit what it adds; the tests replay it). Each target also fails an input that makes it hold
# more than a stated multiple of the input's size (fuzz/fuzz_targets/peak.rs; the bound is at the
# top of each target).
#   ./scripts/checks/fuzz.sh [seconds per target]          (default 60)
# Needs: rustup toolchain install nightly && cargo install cargo-fuzz
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-60}"
for target in table_file gguf gbq model_file bench_json; do
    cargo +nightly fuzz run "$target" "fuzz/corpus/$target" -- -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048
done
