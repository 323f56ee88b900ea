#!/bin/sh
# droce-sim exit codes and messages: 2 with file:line and the key for each
# kind of mistake; 0 and the output files for a good scenario.
set -u
sim=$1; dir=$2; good=$3
fail=0
check() {  # file expected-line expected-key
  out=$("$sim" "$dir/$1" 2>&1); rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL $1: exit $rc, want 2: $out"; fail=1; fi
  case $out in *"$1:$2:"*"$3"*) ;; *) echo "FAIL $1: message '$out' lacks line $2 / $3"; fail=1;; esac
}
check unknown-key.toml 3 run.sped
check missing-node.toml 7 links[0].b
check rate-range.toml 4 topology.rate
check loop.toml 15 ECMP
check virtual-verify.toml 12 flow.payload
check link-down-negative.toml 11 'links[0].down[0].from'
check link-down-backwards.toml 11 'links[0].down[0].until: must be after from'
check link-down-unordered.toml 13 'links[0].down[1].from: must be after'
check link-down-overlap.toml 13 'links[0].down[1].from: must be after'
check link-down-subkey.toml 11 'links[0].down[0].to: unknown key'
check link-down-time.toml 11 'links[0].down[0].until: expected a value'
check outage-no-link.toml 7 'outages[0]: no link between leaf0 and leaf1'
check collective-trigger.toml 8 'collective.trigger: only for pattern = "ring"'
check tail-probe.toml 8 'flow.tail_probe: the tail loss probe is RACK'"'"'s (RFC 8985 7): it needs a reorder_window'
out=$("$sim" "$good" --duration 1s --seed 7 --csv-interval 20us --out "${TMPDIR:-/tmp}/droce-sim-cli.$$" 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "FAIL good scenario: exit $rc: $out"; fail=1; }
for f in flows.csv queues.csv links.csv fct.csv summary.json; do
  [ -s "${TMPDIR:-/tmp}/droce-sim-cli.$$/$f" ] || { echo "FAIL missing $f"; fail=1; }
done
rm -rf "${TMPDIR:-/tmp}/droce-sim-cli.$$"
# Outputs cut short (a file size limit here, as a full disk would) are an
# error naming the file, exit 2, never truncated files and exit 0.
out=$(trap '' XFSZ; ulimit -f 1; "$sim" "$good" --duration 1s --seed 7 --csv-interval 20us \
      --out "${TMPDIR:-/tmp}/droce-sim-cut.$$" 2>&1); rc=$?
[ $rc -eq 2 ] || { echo "FAIL outputs cut short: exit $rc, want 2: $out"; fail=1; }
case $out in *"could not be written whole"*) ;; *) echo "FAIL outputs cut short: '$out'"; fail=1;; esac
rm -rf "${TMPDIR:-/tmp}/droce-sim-cut.$$"
"$sim" "$good" --duration soon >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL --duration soon not refused"; fail=1; }
# The table's "verified" column says why a flow was or was not checked.
scn="${TMPDIR:-/tmp}/droce-sim-verify.$$.toml"
cat > "$scn" <<'SCENARIO'
[[hosts]]
name = "a"
[[hosts]]
name = "b"
[[switches]]
name = "s"
[[links]]
a = "a"
b = "s"
[[links]]
a = "b"
b = "s"
[[flows]]
name = "checked"
src = "a"
dst = "b"
bytes = "64KiB"
[[flows]]
name = "virt"
src = "a"
dst = "b"
bytes = "64KiB"
verify = false
[[flows]]
name = "moved"
src = "a"
dst = "b"
bytes = "64KiB"
verify = false
payload = "real"
[[flows]]
name = "late"
src = "a"
dst = "b"
bytes = "64KiB"
start = "1s"
[[flows]]
name = "big"
src = "a"
dst = "b"
bytes = "65MiB"
message = "1MiB"
SCENARIO
out=$("$sim" "$scn" --duration 1ms 2>&1); rc=$?
[ $rc -eq 1 ] || { echo "FAIL verify scenario: exit $rc, want 1 (flows left running): $out"; fail=1; }
for want in 'checked .* yes$' 'virt .* virtual$' 'moved .* off$' 'late .* -$' 'big .* too large$'; do
  echo "$out" | grep -q "^$want" || { echo "FAIL verified column: no line '$want' in: $out"; fail=1; }
done
rm -f "$scn"
exit $fail
