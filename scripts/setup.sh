#!/usr/bin/env bash
# Installs the Debian 12 packages gshare needs to build and test, and only those missing.
# Runs apt-get as root (directly, or through sudo when not root). Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libfmt-dev libspdlog-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev
  libssl-dev
  coinor-libcbc-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost-dev libopenblas-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf
  gnuplot-nox python3 curl
  python3-torch python3-torchvision python3-numpy bubblewrap libseccomp-dev
  clang libclang-rt-14-dev
  prometheus
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "setup: these packages are missing and this is not root (no sudo): ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# apt-get and dpkg print a page per package: their output goes to a log, shown only on failure.
log="$(mktemp /tmp/gshare-setup.XXXXXX)"
if ! { "${as_root[@]}" apt-get update -qq && "${as_root[@]}" apt-get install -y -qq \
  --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "setup: apt-get failed (its whole output: $log)" >&2
  exit 1
fi
rm -f "$log"
echo "setup: done"
