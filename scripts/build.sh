#!/usr/bin/env bash
# Configures and builds tandem (Release) into build/, through ccache when it is installed
# (scripts/bootstrap.sh --tests installs it). TANDEM_UNITY=1 compiles each target's sources as
# one unit (CMake's unity build): CI's from-scratch build, well under half the compiler time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TANDEM_JOBS:-$(nproc)}"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
unity=OFF
[ "${TANDEM_UNITY:-0}" = 1 ] && unity=ON
# CI's switches (.ci/run): TANDEM_BENCH=0 builds no benchmarks; TANDEM_CUDA_DEVICE_OPT=0
# compiles the CUDA sources as a check only (device code at -O1; the build refuses a GPU).
bench=ON
[ "${TANDEM_BENCH:-1}" = 0 ] && bench=OFF
device_opt=ON
[ "${TANDEM_CUDA_DEVICE_OPT:-1}" = 0 ] && device_opt=OFF
# Ninja where it is installed (bootstrap installs it) and build/ is new: it starts each
# object as soon as its inputs exist, where Make goes target by target.
gen=()
[ -f build/CMakeCache.txt ] || ! command -v ninja >/dev/null || gen=(-G Ninja)
cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTANDEM_UNITY=$unity -DTANDEM_BENCH=$bench \
  -DTANDEM_CUDA_DEVICE_OPT=$device_opt "${launcher[@]}" "$@" >/dev/null
cmake --build build -j "$jobs"
