#!/usr/bin/env bash
# Configures and builds tandem (Release) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TANDEM_JOBS:-$(nproc)}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$jobs"
