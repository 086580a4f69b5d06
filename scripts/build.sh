#!/usr/bin/env bash
# Configures and builds tandem (Release) into build/, through ccache when it is installed
# (scripts/bootstrap.sh --tests installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TANDEM_JOBS:-$(nproc)}"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
cmake --build build -j "$jobs"
