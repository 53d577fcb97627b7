#!/usr/bin/env bash
# A short, bounded fuzz run of the file readers (cargo-fuzz, nightly). The corpus in
# fuzz/corpus/table_file grows as libFuzzer finds new paths; commit what it adds.
#   ./scripts/fuzz.sh [seconds]          (default 60)
# Needs: rustup toolchain install nightly && cargo install cargo-fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
cargo +nightly fuzz run table_file fuzz/corpus/table_file -- -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048
