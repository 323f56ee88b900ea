#!/bin/sh
# droce-sim refuses an unknown algorithm, an unknown parameter, a value out
# of range or a malformed --cc-param, on the command line or in the
# scenario file, with the accepted names or range and exit code 2.
set -u
sim=$1; bad=$2; good=$3; experiment=$4
fail=0
expect2() {  # expected-text args...
  want=$1; shift
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL $*: exit $rc, want 2: $out"; fail=1; fi
  case $out in *"$want"*) ;; *) echo "FAIL $*: message '$out' lacks '$want'"; fail=1;; esac
}
expect2 "accepted: none, dcqcn, timely, hpcc, swift" "$sim" "$good" --cc cubic
expect2 "accepted: rp_time_reset" "$sim" "$good" --cc dcqcn --cc-param rp_bogus=1
expect2 "accepted range [0, 15]" "$sim" "$good" --cc dcqcn --cc-param rp_gd=99
expect2 "[0.01, 1]" "$sim" "$good" --cc hpcc --cc-param eta=high
expect2 "is not KEY=VALUE" "$sim" "$good" --cc hpcc --cc-param eta
expect2 "unknown algorithm \"cubic\" (known: none, dcqcn" "$sim" "$bad/unknown-cc.toml"
expect2 "eta" "$sim" "$bad/param-range.toml"
expect2 "accepted: none, dcqcn" "$experiment" two-flow --cc cubic --sim "$sim" --out "${TMPDIR:-/tmp}/droce-ccx.$$"
rm -rf "${TMPDIR:-/tmp}/droce-ccx.$$"
# A good override runs: exit 0 (the incast finishes).
"$sim" "$good" --cc hpcc --cc-param base_rtt=5 --csv-interval 0 >/dev/null 2>&1 ||
  { echo "FAIL good --cc hpcc run"; fail=1; }
exit $fail
