#!/usr/bin/env bash
# Configures and builds tandem (Release) into build/, through ccache when it is installed
# (scripts/bootstrap.sh --tests installs it). TANDEM_UNITY=1 compiles each target's sources in
# batches (CMake's unity build): CI's from-scratch build, about half the compiler time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TANDEM_JOBS:-$(nproc)}"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
unity=OFF
[ "${TANDEM_UNITY:-0}" = 1 ] && unity=ON
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTANDEM_UNITY=$unity "${launcher[@]}" "$@" >/dev/null
cmake --build build -j "$jobs"
