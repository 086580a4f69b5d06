#!/usr/bin/env bash
# The first command: installs what is missing, builds, and runs the embedded model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
scripts/build.sh
build/tandem generate --model models/tiny-kjv --prompt "And God said, Let there be light" --max-tokens 40
