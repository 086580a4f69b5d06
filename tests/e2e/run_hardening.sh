#!/usr/bin/env bash
# Hardening end-to-end tests (issue 17): every case of the issue against the real
# `tandem serve`, by raw sockets and the official clients, checking that the server stays
# up, answers in the API's own error shape, keeps its RSS growth and answer times under
# the bounds the tests state, and leaks no rows or KV blocks (/stats).
#
# Three servers on the llama oracle model (a 512-token byte-level BPE, context 1024):
#   open   no --api-key: Host and content-type checks on, --header-timeout 3
#   keyed  --api-key, and a chat template with hostile modes picked by chat_template_kwargs
#          (tests/e2e/hardening/hostile_template.jinja)
#   images the Gemma 3 vision oracle with small image bounds (hostile images:
#          tests/e2e/hardening/images.test.mjs)
#   then, from this script: SIGTERM during an endless render (exits within seconds, not
#   the 30 s drain); a second SIGINT while a stream drains (exits at once with 130);
#   SIGHUP while a stream runs (the stream completes). Servers are killed on the way out.
#
#   TANDEM_BIN   the binary (default build/tandem)
#   E2E_FILTER   passed to node --test-name-pattern
set -euo pipefail
cd "$(dirname "$0")/../.."

bin="${TANDEM_BIN:-build/tandem}"
src_model=tests/data/oracle/llama
api_key=hardening-key
if [ ! -x "$bin" ]; then
  echo "hardening: $bin is not built" >&2
  exit 1
fi
bash scripts/bootstrap.d/20-e2e-npm.sh

work=$(mktemp -d /tmp/tandem-hardening-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The model folder with the hostile template in place of its own.
hostile="$work/hostile-model"
cp -r "$src_model" "$hostile"
python3 - "$hostile/tokenizer_config.json" tests/e2e/hardening/hostile_template.jinja <<'EOF'
import json, sys
config = json.load(open(sys.argv[1]))
config["chat_template"] = open(sys.argv[2]).read()
json.dump(config, open(sys.argv[1], "w"))
EOF

free_port() {
  node -e 'const s = require("net").createServer();
    s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# start NAME MODEL ARGS... : starts a server, sets PORT_NAME and PID_NAME, waits for /health.
start() {
  local name=$1 model=$2
  shift 2
  local port log
  port=$(free_port)
  log="$work/$name.log"
  "$bin" serve --model "$model" --host 127.0.0.1 --port "$port" --max-model-len 1024 "$@" \
    >"$log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true)" = 200 ] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "hardening: $name exited during startup:" >&2
      cat "$log" >&2
      exit 1
    fi
    sleep 0.1
  done
  printf -v "PORT_$name" '%s' "$port"
  printf -v "PID_$name" '%s' "$pid"
}

status=0
start open "$src_model" --header-timeout 3
start keyed "$hostile" --api-key "$api_key"
# Hostile images need a model that takes images: the Gemma 3 vision oracle, small bounds.
start images tests/data/oracle/vision/gemma3_vision --max-image-bytes 1MiB \
  --max-images-per-request 4 --max-image-pixels 4000000
filter=()
[ -n "${E2E_FILTER:-}" ] && filter=(--test-name-pattern "$E2E_FILTER")
OPEN_URL="http://127.0.0.1:$PORT_open" OPEN_PID="$PID_open" \
  KEYED_URL="http://127.0.0.1:$PORT_keyed" KEYED_PID="$PID_keyed" TANDEM_API_KEY="$api_key" \
  IMAGES_URL="http://127.0.0.1:$PORT_images" IMAGES_PID="$PID_images" \
  node --test --test-concurrency=1 "${filter[@]}" tests/e2e/hardening/*.test.mjs || status=$?
for name in open keyed images; do
  pid_var="PID_$name"
  if ! kill -0 "${!pid_var}" 2>/dev/null; then
    echo "hardening: the $name server died during the tests:" >&2
    tail -n 30 "$work/$name.log" >&2
    status=1
  fi
done

# waits_exit PID SECONDS: 0 if it exits in time (its code in EXIT_CODE).
waits_exit() {
  local pid=$1 limit=$2
  for _ in $(seq 1 $((limit * 10))); do
    if ! kill -0 "$pid" 2>/dev/null; then
      EXIT_CODE=0
      wait "$pid" || EXIT_CODE=$?
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# SIGTERM while a render runs forever (only its cancel flag can end it).
start endless "$hostile" --max-template-iterations 1000000000000 --max-template-memory 1TB
curl -s -o "$work/endless.json" -w '%{http_code}' "http://127.0.0.1:$PORT_endless/v1/chat/completions" \
  -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"mode":"loop"}}' \
  >"$work/endless.code" &
curl_pid=$!
sleep 1
kill -TERM "$PID_endless"
if waits_exit "$PID_endless" 10; then
  echo "hardening: SIGTERM ended an endless render; exit code $EXIT_CODE"
  [ "$EXIT_CODE" = 0 ] || { echo "hardening: exit code $EXIT_CODE, expected 0" >&2; status=1; }
  wait "$curl_pid" || true
  [ "$(cat "$work/endless.code")" = 503 ] || {
    echo "hardening: the cancelled render answered $(cat "$work/endless.code"), expected 503" >&2
    status=1
  }
else
  echo "hardening: the server did not exit within 10 s of SIGTERM during a render" >&2
  status=1
fi

# A second SIGINT ends the drain at once; SIGHUP before it changes nothing.
start drain "$src_model"
curl -s -N "http://127.0.0.1:$PORT_drain/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":[1,2,3],"max_tokens":1000,"ignore_eos":true,"stream":true}' >"$work/hup.txt" &
stream_pid=$!
sleep 0.5
kill -HUP "$PID_drain"
wait "$stream_pid" || true
if ! grep -q 'data: \[DONE\]' "$work/hup.txt" || ! kill -0 "$PID_drain" 2>/dev/null; then
  echo "hardening: SIGHUP cut a stream or stopped the server" >&2
  status=1
else
  echo "hardening: a stream ran to [DONE] across SIGHUP"
fi
# Eight streams of 16 x 1000 tokens, so the drain outlasts the checks below on a fast CPU
# too (the oracle model finishes one such stream in under a second; a slow reader does not
# help: the kernel's socket buffers take a whole stream).
slow_pids=()
for _ in 1 2 3 4 5 6 7 8; do
  curl -s -N "http://127.0.0.1:$PORT_drain/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":[1,2,3],"max_tokens":1000,"n":16,"ignore_eos":true,"stream":true}' \
    >/dev/null 2>&1 &
  slow_pids+=($!)
done
sleep 0.5
kill -INT "$PID_drain"
sleep 0.5
if ! kill -0 "$PID_drain" 2>/dev/null; then
  echo "hardening: the first SIGINT did not wait for the stream" >&2
  status=1
fi
kill -INT "$PID_drain"
if waits_exit "$PID_drain" 3 && [ "$EXIT_CODE" = 130 ]; then
  echo "hardening: a second SIGINT forced the exit (130)"
else
  echo "hardening: a second SIGINT did not force the exit (code ${EXIT_CODE:-none})" >&2
  status=1
fi
kill "${slow_pids[@]}" 2>/dev/null || true
wait "${slow_pids[@]}" 2>/dev/null || true

if [ "$status" != 0 ]; then
  for name in open keyed images endless drain; do
    echo "--- $name server log (tail)" >&2
    tail -n 20 "$work/$name.log" >&2 || true
  done
  echo "hardening: FAILED" >&2
  exit "$status"
fi
echo "hardening: all passed"
