#!/usr/bin/env bash
# Installs the Debian packages moesim needs, only those missing. Run as root (or with sudo).
# `install-deps.sh sanitize` adds clang and its sanitizer and libFuzzer runtimes (make test-sanitize).
set -euo pipefail
packages=(
  cmake ninja-build g++ make pkg-config
  libboost-graph-dev libboost-program-options-dev
  nlohmann-json3-dev libfmt-dev libeigen3-dev libtomlplusplus-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-matplotlib python3-jsonschema
  libopenmpi-dev openmpi-bin
)
if [ "${1:-}" = "sanitize" ]; then
  packages+=(clang libclang-rt-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
