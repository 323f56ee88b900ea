#!/bin/sh
# Bounded libFuzzer run for the meson test suite `fuzz`:
#   run_fuzz.sh FUZZER SEED_CORPUS_DIR SECONDS
# Fuzzes a temporary copy of the seed corpus, so the committed corpus never
# changes; crash reproducers land in the current directory (the build dir).
set -eu
fuzzer=$1 seeds=$2 seconds=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/droce-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
cp -R "$seeds/." "$work/"
n_seeds=$(ls "$work" | wc -l)
[ "$n_seeds" -gt 0 ] || { echo "no seeds in $seeds" >&2; exit 1; }
"$fuzzer" "$work" -max_total_time="$seconds" -runs=20000000 -max_len=2048 \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$PWD/$(basename "$fuzzer")-"
