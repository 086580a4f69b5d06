#!/usr/bin/env bash
# Installs the end-to-end test clients (the official `openai` and `@anthropic-ai/sdk` npm
# packages, versions pinned by tests/e2e/package-lock.json) into tests/e2e/node_modules.
# Idempotent and fast: npm only runs when an installed version differs from the lock.
set -euo pipefail
cd "$(dirname "$0")/../../tests/e2e"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "bootstrap: node/npm not found; the e2e clients are not installed" >&2
  exit 1
fi

# Every package of the lock file installed at its locked version?
installed_matches_lock() {
  node -e '
    const fs = require("fs");
    const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8"));
    for (const [path, meta] of Object.entries(lock.packages || {})) {
      if (!path.startsWith("node_modules/")) continue;
      let pkg;
      try { pkg = JSON.parse(fs.readFileSync(path + "/package.json", "utf8")); } catch { process.exit(1); }
      if (pkg.version !== meta.version) process.exit(1);
    }
  ' 2>/dev/null
}

if [ -d node_modules ] && installed_matches_lock; then
  exit 0
fi
echo "bootstrap: installing the e2e clients (npm ci in tests/e2e)" >&2
npm ci --no-audit --no-fund --loglevel=error >/dev/null
