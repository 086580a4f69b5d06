#!/usr/bin/env bash
# The first command: installs what is missing, builds, and serves the embedded model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh
exec build/tandem serve --model models/tiny-kjv --port "${PORT:-8080}"
