#!/usr/bin/env bash
# End-to-end tests: starts the real `tandem serve` on the llama oracle model (random
# weights, a ChatML template, a 512-token byte-level BPE) on a free port, waits for
# /health, runs tests/e2e/*.test.mjs with node's built-in test runner (they drive the
# server with the official openai and @anthropic-ai/sdk packages), checks that the
# server is still healthy afterwards and that SIGTERM stops it cleanly. The server is
# always killed on the way out. Exits non-zero on any failure.
# web_ui.test.mjs starts a server of its own on the embedded model (models/tiny-kjv) and
# drives the web pages in Debian's chromium (headless, through playwright-core).
#
#   TANDEM_BIN   the binary (default build/tandem)
#   E2E_FILTER   passed to node --test-name-pattern, to run some tests only
set -euo pipefail
cd "$(dirname "$0")/../.."

bin="${TANDEM_BIN:-build/tandem}"
model=tests/data/oracle/llama
api_key=e2e-secret-key
served_name=tandem-e2e
max_model_len=1024

if [ ! -x "$bin" ]; then
  echo "e2e: $bin is not built" >&2
  exit 1
fi
bash scripts/bootstrap.d/20-e2e-npm.sh

port=$(node -e 'const s = require("net").createServer();
  s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });')
log=$(mktemp /tmp/tandem-e2e-XXXXXX.log)
"$bin" serve --model "$model" --host 127.0.0.1 --port "$port" --api-key "$api_key" \
  --served-model-name "$served_name" --max-model-len "$max_model_len" >"$log" 2>&1 &
pid=$!

cleanup() {
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -f "$log"
}
trap cleanup EXIT

health() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true; }

# Up to 60 s for the model to load; the server listens (503) before it is ready.
for _ in $(seq 1 600); do
  [ "$(health)" = "200" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "e2e: the server exited during startup:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
if [ "$(health)" != "200" ]; then
  echo "e2e: /health never became 200:" >&2
  cat "$log" >&2
  exit 1
fi

status=0
filter=()
[ -n "${E2E_FILTER:-}" ] && filter=(--test-name-pattern "$E2E_FILTER")
TANDEM_URL="http://127.0.0.1:$port" TANDEM_API_KEY="$api_key" TANDEM_MODEL="$served_name" \
  TANDEM_BIN="$bin" TANDEM_MODEL_DIR="$model" TANDEM_MAX_MODEL_LEN="$max_model_len" \
  node --test --test-concurrency=1 "${filter[@]}" tests/e2e/*.test.mjs || status=$?

if [ "$(health)" != "200" ]; then
  echo "e2e: the server is not healthy after the tests" >&2
  status=1
fi

# SIGTERM: drain and exit 0 within 30 s.
kill -TERM "$pid"
for _ in $(seq 1 300); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  echo "e2e: the server did not exit within 30 s of SIGTERM" >&2
  status=1
else
  exit_code=0
  wait "$pid" || exit_code=$?
  if [ "$exit_code" != "0" ]; then
    echo "e2e: the server exited with $exit_code after SIGTERM" >&2
    status=1
  fi
fi

if [ "$status" != "0" ]; then
  echo "e2e: FAILED; server log:" >&2
  tail -n 50 "$log" >&2
  exit "$status"
fi
echo "e2e: all passed"
