# Shared by scripts/demo and scripts/test: install what is missing, then
# configure and build. Idempotent and quick when nothing changed.
set -euo pipefail

DROCE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian 12 package names. Build: compiler, meson, the fixed dependencies
# (DPDK 22.11, rdma-core headers, Boost.Lockfree, fmt, GoogleTest) and the
# Debian-packaged helpers we chose (CLI11 for options, nlohmann-json for
# JSON, libpcap for captures). Test oracles: scapy (ICRC), tshark, testpmd,
# clang with libFuzzer and the sanitizers, valgrind (leaks at an application's
# exit); the kernel's ping, arping and ndisc6
# as the peers of ARP, neighbour discovery and ICMP. Unmodified RDMA
# applications that run on libdroce-verbs in tests/verbs: ibverbs-utils,
# perftest, rdmacm-utils, UCX and Open MPI.
DROCE_PACKAGES=(
  g++ pkg-config meson ninja-build
  libdpdk-dev dpdk dpdk-dev libibverbs-dev libboost-dev libfmt-dev libgtest-dev
  libcli11-dev nlohmann-json3-dev libpcap-dev zlib1g-dev
  python3 python3-scapy tshark
  iproute2 iputils-ping arping ndisc6
  clang libclang-rt-14-dev valgrind
  libtomlplusplus-dev
  python3-matplotlib
  perftest ibverbs-utils rdma-core ibverbs-providers rdmacm-utils
  ucx-utils openmpi-bin libopenmpi-dev
)

droce_log() { printf '[droce] %s\n' "$*" >&2; }

droce_ensure_packages() {
  local missing=()
  for p in "${DROCE_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  droce_log "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" >/dev/null
}

# droce_build DIR [meson setup args...]
droce_build() {
  local dir=$1; shift
  if [ ! -f "$DROCE_ROOT/$dir/build.ninja" ]; then
    droce_log "configuring $dir"
    meson setup "$DROCE_ROOT/$dir" "$DROCE_ROOT" "$@" >/dev/null
  elif [ $# -gt 0 ]; then
    # The options asked for now, whatever the directory was set up with.
    meson configure "$DROCE_ROOT/$dir" "$@" >/dev/null
  fi
  droce_log "building $dir"
  ninja -C "$DROCE_ROOT/$dir" >/dev/null || ninja -C "$DROCE_ROOT/$dir"
}

droce_build_main() { droce_build build "$@"; }
# The fuzz build: clang with libFuzzer, ASan and UBSan; no DPDK parts.
droce_build_fuzz() {
  # Only the libraries and the fuzz targets: the unit tests already run in
  # the main build, and compiling them again under ASan would double CI time.
  CXX=clang++ droce_build build-fuzz -Dfuzz=true -Ddpdk=disabled -Dapps=false -Dtests=false \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true
}
