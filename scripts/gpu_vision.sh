#!/usr/bin/env bash
# The image figures of issue 41 on one GPU, in one device call (~3-4 minutes on an H100):
# a Gemma-3-12B-shaped random model with its SigLIP tower (random-model --like gemma-3-12b,
# bf16, ~24 GB written to $M), then
#   1. a server with TANDEM_VISION_TIMING=1: 8 requests one at a time, every other one
#      with a new 896x896 image: the vision encoder's time per image (/stats
#      vision_encode_ms_total / images_encoded_total) and the mean TTFT of the requests with
#      the image and of the same requests without it;
#   2. a server as deployed (no timing waits): output tok/s at concurrency 64 with half the
#      requests carrying one 896x896 image (per class too), then the all-text run.
# Every figure is printed under the command that measured it. Usage on the GPU machine,
# with tandem built with CUDA (T: its binary; a scripts/bundle_cuda.sh bundle works too):
#   T=build-cuda/tandem OUT=/tmp/vision scripts/gpu_vision.sh
#   G=.device/gpu OUT=/tmp/vision scripts/gpu_vision.sh          (T=$G/tandem, $G/lib)
# Here, on the CPU build and the tiny preset (seconds; checks the script, not the figures):
#   GPU_VISION_DRY=1 scripts/gpu_vision.sh
set -u
OUT=${OUT:-/tmp/tandem-vision}
if [ "${GPU_VISION_DRY:-0}" != 0 ]; then
  T=${T:-build/tandem}; M=${M:-$OUT/gemma-3-vision-tiny}; LIKE=gemma-3-vision-tiny
  PORT=${PORT:-8331}; N_TTFT=4; N_LOAD=64; OUT_LEN=8; SERVE_WAIT=60
else
  G=${G:-build/bundle}; T=${T:-$G/tandem}; M=${M:-/tmp/gemma-3-12b-random}; LIKE=gemma-3-12b
  PORT=${PORT:-8331}; N_TTFT=8; N_LOAD=256; OUT_LEN=128; SERVE_WAIT=240
  export LD_LIBRARY_PATH=${G}/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
mkdir -p "$OUT"
URL=http://127.0.0.1:$PORT
SERVE=(--model "$M" --port "$PORT" --batch 64 --max-batched-tokens 8192 --max-model-len 4096)
show() { echo "\$ $*"; }
step() { echo; echo "== $*"; }

server=""
serve() {  # serve LOG [VAR=VALUE...]: starts the server, waits until it answers
  local log=$1; shift
  show "$@" "$T" serve "${SERVE[@]}"
  env "$@" "$T" serve "${SERVE[@]}" > "$OUT/$log" 2>&1 &
  server=$!
  for _ in $(seq "$SERVE_WAIT"); do
    curl -sf "$URL/health" > /dev/null && return 0
    kill -0 "$server" 2> /dev/null || break
    sleep 1
  done
  echo "error: the server did not come up; the end of $OUT/$log:"; tail -20 "$OUT/$log"
  exit 1
}
stop_server() { kill "$server"; wait "$server" 2> /dev/null; server=""; }
trap '[ -n "$server" ] && kill "$server"' EXIT
# One number of /stats (null: 0), without python: the server writes compact JSON.
stat() {
  curl -s "$URL/stats" | grep -o "\"$1\": *[^,}]*" | sed 's/.*: *//; s/null/0/' | head -1
}
bench() {  # bench NAME ARGS...: one tandem bench run, its table on stdout, stderr to a log
  local name=$1; shift
  show "$T" bench --url "$URL" "$@"
  timeout 300 "$T" bench --url "$URL" "$@" --json "$OUT/$name.json" 2> "$OUT/$name.err" ||
    { echo "error: bench $name failed:"; tail -5 "$OUT/$name.err"; }
}

step "random-model --like $LIKE (bf16)"
if [ -f "$M/config.json" ]; then
  echo "(kept: $M)"
else
  show "$T" random-model --like "$LIKE" --out "$M"
  ( time "$T" random-model --like "$LIKE" --out "$M" ) 2>&1 | tail -5
fi

step "1. encode time per image and TTFT, one request at a time (TANDEM_VISION_TIMING=1)"
serve serve-timed.log TANDEM_VISION_TIMING=1
grep -m1 -i "images" "$OUT/serve-timed.log"
# A warm-up first (the first encode and prefill pay one-time costs), then the baseline. Its
# own --seed: bench draws each request's image from (seed, index), and a picture the server
# has seen would be an encoder-cache hit.
bench warmup --image 896x896 --concurrency 1 --num-requests 2 --input-len 64 --output-len 4 \
  --seed 7 > /dev/null
ms0=$(stat vision_encode_ms_total); n0=$(stat images_encoded_total)
bench ttft --image 896x896 --image-fraction 0.5 --concurrency 1 --num-requests "$N_TTFT" \
  --input-len 64 --output-len 16
ms1=$(stat vision_encode_ms_total); n1=$(stat images_encoded_total)
show curl -s "$URL/stats" "# vision_encode_ms_total, images_encoded_total before and after"
awk -v n0="$n0" -v n1="$n1" -v ms0="$ms0" -v ms1="$ms1" 'BEGIN {
  n = n1 - n0; ms = ms1 - ms0
  if (n > 0) printf "encode: %d images of 896x896 in %.1f ms of encoder time: %.2f ms per image\n", n, ms, ms / n
  else print "encode: no image was encoded (images_encoded_total " n0 " -> " n1 ")" }'
stop_server

step "2. output tok/s at concurrency 64: half the requests with one 896x896 image, then all text"
serve serve.log
bench c64-half-images --image 896x896 --image-fraction 0.5 --concurrency 64 \
  --num-requests "$N_LOAD" --input-len 64 --output-len "$OUT_LEN"
bench c64-all-text --image 896x896 --image-fraction 0 --concurrency 64 \
  --num-requests "$N_LOAD" --input-len 64 --output-len "$OUT_LEN"
echo "images encoded by this server: $(stat images_encoded_total)"
stop_server
echo; echo "logs and per-request JSON in $OUT"
