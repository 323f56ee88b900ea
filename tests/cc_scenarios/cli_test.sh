#!/bin/sh
# droce-sim refuses an unknown algorithm, an unknown parameter, a value out
# of range or a malformed --cc-param, on the command line or in the
# scenario file, with the accepted names or range and exit code 2. Named
# profiles: --list prints every shipped one, each runs, and an unknown one
# is refused naming the option and the accepted profiles.
set -u
sim=$1; bad=$2; good=$3; experiment=$4; replay=$5; pktgen=$6
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
# Profiles (cc/profiles/).
profiles="dcqcn-100g dcqcn-hpcc-ns3 dcqcn-mlx5 dcqcn-paper hpcc-100g hpcc-ns3 hpcc-paper timely-100g timely-hpcc-ns3 timely-paper"
list=$("$sim" --list 2>&1) || { echo "FAIL droce-sim --list: exit $?"; fail=1; }
rlist=$("$replay" --list 2>&1) || { echo "FAIL droce-cc-replay --list: exit $?"; fail=1; }
for p in $profiles; do
  case $list in *"$p "*) ;; *) echo "FAIL droce-sim --list lacks $p"; fail=1;; esac
  case $rlist in *"$p "*) ;; *) echo "FAIL droce-cc-replay --list lacks $p"; fail=1;; esac
  "$sim" "$good" --cc-profile "$p" --csv-interval 0 >/dev/null 2>&1 ||
    { echo "FAIL incast with --cc-profile $p"; fail=1; }
done
expect2 "--cc-profile: unknown cc profile 'bogus'; accepted: dcqcn-100g" "$sim" "$good" --cc-profile bogus
expect2 "is for dcqcn, not --cc hpcc" "$sim" "$good" --cc hpcc --cc-profile dcqcn-paper
expect2 "--cc-param: flow f1: cc 'dcqcn' parameter 'rp_gd'" "$sim" "$good" --cc-profile dcqcn-paper --cc-param rp_gd=99
expect2 "--skip-csv: \"queues\"; accepted: flows, links" "$sim" "$good" --skip-csv queues
expect2 "--profile: unknown cc profile 'bogus'; accepted: " "$replay" --profile bogus -
expect2 "unknown cc profile 'bogus'" "$experiment" two-flow --cc dcqcn --profile bogus --sim "$sim" --out "${TMPDIR:-/tmp}/droce-ccx.$$"
rm -rf "${TMPDIR:-/tmp}/droce-ccx.$$"
plist=$("$pktgen" --list-cc-profiles 2>&1) || { echo "FAIL droce-pktgen --list-cc-profiles: exit $?"; fail=1; }
case $plist in *"dcqcn-hpcc-ns3 "*) ;; *) echo "FAIL droce-pktgen --list-cc-profiles lacks dcqcn-hpcc-ns3"; fail=1;; esac
"$pktgen" --pattern ring --ranks 4 -b 64K -e 64K -q --cc-profile hpcc-100g >/dev/null 2>&1 ||
  { echo "FAIL droce-pktgen ring with --cc-profile hpcc-100g"; fail=1; }
expect2 "--cc-profile: unknown cc profile 'bogus'" "$pktgen" --pattern ring --ranks 4 --cc-profile bogus
expect2 "is for hpcc, not --cc dcqcn" "$pktgen" --pattern ring --ranks 4 --cc dcqcn --cc-profile hpcc-100g
exit $fail
