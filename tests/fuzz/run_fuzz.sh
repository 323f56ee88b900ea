#!/bin/sh
# Bounded libFuzzer run for the meson test suite `fuzz`:
#   run_fuzz.sh FUZZER SECONDS SEED_DIR...
# Fuzzes a temporary copy of the seeds, so the committed files never
# change; crash reproducers land in the current directory (the build dir).
set -eu
fuzzer=$1 seconds=$2
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/droce-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
for seeds in "$@"; do
  # Files of different directories may share a name: prefix the directory.
  for f in "$seeds"/*; do
    if [ -f "$f" ]; then cp "$f" "$work/$(basename "$seeds")-$(basename "$f")"; fi
  done
done
n_seeds=$(ls "$work" | wc -l)
[ "$n_seeds" -gt 0 ] || { echo "no seeds in $*" >&2; exit 1; }
# libFuzzer's own failure status is 77, which meson reads as "skipped": a
# crash must fail the test.
"$fuzzer" "$work" -max_total_time="$seconds" -runs=20000000 -max_len=2048 \
  -error_exitcode=1 -timeout_exitcode=1 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$PWD/$(basename "$fuzzer")-"
