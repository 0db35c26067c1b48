#!/usr/bin/env bash
# Installs every Debian package layerdiff's build, tests and scripts need.
# Idempotent: packages already installed are skipped, and apt is not touched
# at all when nothing is missing. Needs root (or sudo) only when installing.
set -euo pipefail

packages=(
  build-essential pkg-config make
  protobuf-c-compiler libprotobuf-c-dev   # ONNX parsing
  libonnx-dev                             # onnx/onnx.proto
  libhdf5-dev hdf5-tools                  # dumps; h5dump in tests
  libjansson-dev                          # JSON reports
  libssl-dev                              # libcrypto: SHA-256 of model files
  libcmocka-dev                           # unit tests
  libopenblas0-pthread                    # BLAS, dlopened at run time (docs/architecture.md)
  libonnx-testdata                        # conformance data
  python3 python3-onnx python3-numpy python3-h5py  # fixtures, h5py/onnx checks
  clang valgrind                          # fuzzing, memcheck
  libclang-rt-dev libomp-dev              # clang's libFuzzer/sanitizer runtimes and omp.h (make fuzz)
  chromium fonts-dejavu-core              # headless render test of the HTML report (tests/e2e/test_report.sh)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
