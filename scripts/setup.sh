#!/usr/bin/env bash
# Prepares a fresh Debian 12 machine (as root) and builds everything into build/. Safe to rerun: it installs
# only missing packages and reconfigures an existing build directory instead of recreating it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# cmake: meson finds doctest through its CMake config (doctest-dev ships no pkg-config file).
packages=(g++ meson ninja-build pkg-config cmake libopenblas-openmp-dev doctest-dev libyaml-cpp-dev libcli11-dev
          libeigen3-dev nlohmann-json3-dev gnuplot-nox git ca-certificates)
missing=()
for p in "${packages[@]}"; do
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" == installed ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  if ((EUID != 0)); then
    echo "setup.sh: missing packages: ${missing[*]}; run as root to install them" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

if [[ -f build/meson-private/coredata.dat ]]; then
  meson setup --reconfigure build
else
  meson setup build --buildtype=release
fi
meson compile -C build
