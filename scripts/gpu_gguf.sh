#!/usr/bin/env bash
# Issue 42's GPU figures: tandem against llama.cpp's CUDA server on the same GGUF file, the
# same client, in one device call; then the 70B shape served by tandem on the one GPU.
#
# 1. Here, on the build machine:
#      scripts/gpu_gguf.sh pack-llama [LLAMA_SRC]     # default /work/peers/llama.cpp
#    writes .device/llamacpp-src.tar.xz: llama.cpp's source without .git, models/ and build
#    folders (xz, 11 MB); and, from a CUDA build (build-cuda configured with -DTANDEM_CUDA=ON
#    -DTANDEM_BENCH=ON; `nice ninja -C build-cuda -j2 tandem offline_bench test_backend_cuda`):
#      scripts/gpu_gguf.sh pack-gpu [BUILD_DIR]         # -> .device/gguf-gpu.tar.xz
# 2. On the GPU machine, from the checkout's root (carry .device/):
#      OUT=$OUT scripts/gpu_gguf.sh          # the 8B part, ~8 min (G=FOLDER: a bundle folder
#      OUT=$OUT scripts/gpu_gguf.sh 70b      # instead of .device/gguf-gpu.tar.xz); 70b and cpu:
#      OUT=$OUT scripts/gpu_gguf.sh cpu      # further calls (W=/tmp/gguf-gpu keeps the files)
#    8b:  in parallel, llama.cpp's CUDA build (sm_90 only, -j16 at nice 19, llama-server and
#         llama-batched-bench; its time printed) and the 8B-shaped Q4_K_M file
#         (tandem random-model --like llama-3.1-8b --gguf Q4_K_M); the CUDA block-kernel
#         tests if the bundle has them; then on that file, tandem then llama.cpp:
#         decode-b1 (offline_bench --num 1 --batch 1 --input 128 --output 256 against
#         llama-batched-bench -npp 128 -ntg 256 -npl 1), and the servers (tandem serve
#         --batch 64, llama-server -np 64 -fa on) under the same client (tandem bench,
#         128 -> 256) at concurrency 1 and 64.
#    70b: checks disk (the file is ~42.5 GB; the 8B file is removed first when space is
#         short) and GPU memory, writes the 70B-shaped Q4_K_M, then tandem's decode-b1 and
#         the sweep at 64 on it.
#    prep: no GPU: llama.cpp's build, the 8B file, then the 70B file, for 8b / 70b / both in
#         the next call on the same warm machine (W in a kept folder: build-dev/gguf)
#    cpu: (optional, a third call, ~6 min) the CPU figures on this quiet machine: llama-100m in
#         Q4_K_M and Q8_0 (tandem random-model), bench/cpu_vs_llamacpp.sh all (engine B = 1, 4,
#         16; tandem serve against llama-server -np 16 at 1 / 4 / 16) with both pinned to two
#         cores (taskset) and llama.cpp's CUDA build kept on its CPU (-dev none).
#    Every step prints its seconds; a step starts only while BUDGET seconds (default 520)
#    allow it. Logs: $OUT/gguf-logs.tgz; the last lines are the table.
# 3. Dry run here (CPU, llama-100m shapes, concurrency 4, short requests; the llama.cpp CUDA
#    build only configured, its CPU binaries from LLAMA_BIN / LLAMA_LIB used instead):
#      GPU_GGUF_DRY=1 scripts/gpu_gguf.sh [8b|70b]
set -u

pack_llama() {
  local src=${1:-/work/peers/llama.cpp} root out
  root=$(git rev-parse --show-toplevel) && out=$root/.device/llamacpp-src.tar.xz || return 1
  mkdir -p "$root/.device" || return 1
  # Only the source: no history, no vocabularies or models, no build trees.
  local n; n=$(basename "$src")
  tar cf - -C "$(dirname "$src")" --exclude-vcs --exclude="$n/models" --exclude="$n/build*" \
    --exclude='*.gguf' --exclude='node_modules' "$n" | xz -T2 -3 > "$out" || return 1
  echo "packed $out ($(du -h "$out" | cut -f1)) from $src at $(git -C "$src" rev-parse --short HEAD 2> /dev/null)"
}
# The CUDA build's binaries this script runs (tandem, offline_bench, test_backend_cuda and
# the libraries they need: scripts/bundle_cuda.sh) as .device/gguf-gpu.tar.xz (folder gpu/).
pack_gpu() {
  local build=${1:-build-cuda} root stage=/tmp/tandem-gguf-stage
  root=$(git rev-parse --show-toplevel) && cd "$root" || return 1
  rm -rf "$stage" && mkdir -p "$stage/gpu/bench" "$stage/gpu/tests" .device || return 1
  scripts/bundle_cuda.sh "$build" "$stage/full" > /dev/null || return 1
  cp -r "$stage/full/lib" "$stage/full/tandem" "$stage/gpu/" || return 1
  cp "$stage/full/bench/offline_bench" "$stage/gpu/bench/" || return 1
  [ -f "$stage/full/tests/test_backend_cuda" ] && cp "$stage/full/tests/test_backend_cuda" "$stage/gpu/tests/"
  git rev-parse --short HEAD > "$stage/gpu/COMMIT"
  tar cf - -C "$stage" gpu | xz -T2 -6 > .device/gguf-gpu.tar.xz || return 1
  echo "packed .device/gguf-gpu.tar.xz ($(du -h .device/gguf-gpu.tar.xz | cut -f1)) from $build at $(cat "$stage/gpu/COMMIT")"
}
case ${1:-} in
  pack-llama) shift; pack_llama "$@"; exit $? ;;
  pack-gpu) shift; pack_gpu "$@"; exit $? ;;
esac

part=${1:-8b}
root=$(cd "$(dirname "$0")/.." && pwd)
G=${G:-$root/.device/gpu}; OUT=${OUT:-/tmp/tandem-gguf}; W=${W:-/tmp/gguf-gpu}
LLAMA_TAR=${LLAMA_TAR:-$root/.device/llamacpp-src.tar.xz}; BUDGET=${BUDGET:-520}
L=$W/logs
mkdir -p "$L" "$OUT"
# The bundle from pack-gpu, unpacked once.
if [ ! -x "$G/tandem" ] && [ -f "$root/.device/gguf-gpu.tar.xz" ] && [ "${GPU_GGUF_DRY:-0}" != 1 ]; then
  tar xJf "$root/.device/gguf-gpu.tar.xz" -C "$W" && G=$W/gpu
fi
trap 'tar czf "$OUT/gguf-logs.tgz" -C "$L" .' EXIT
dry=${GPU_GGUF_DRY:-0}
if [ "$dry" = 1 ]; then
  # The CPU stand-in: this build's binaries, llama-100m shapes, llama.cpp's CPU build.
  G=${G_DRY:-$root/build}; tandem=$G/tandem; offline=$G/bench/offline_bench
  shape8=llama-100m; shape70=llama-100m; conc=4; nreq=8; inlen=32; outlen=16
  dev=(--device cpu --threads 2); llama_bin=${LLAMA_BIN:-/work/peers/llama.cpp/build/bin}
  llama_lib=${LLAMA_LIB:-/tmp/gm_lcb/bin}
else
  tandem=$G/tandem; offline=$G/bench/offline_bench
  shape8=llama-3.1-8b; shape70=llama-3.1-70b; conc=64; nreq=256; inlen=128; outlen=256
  dev=(); llama_bin=$W/llama.cpp/build-cuda/bin; llama_lib=
fi
export LD_LIBRARY_PATH=$G/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
F8=$W/${shape8}-Q4_K_M.gguf; F70=$W/${shape70}-Q4_K_M-70b.gguf

log() { echo "[${SECONDS}s] $*"; }
fits() { (( SECONDS + $1 <= BUDGET )) || { log "skipped (budget $BUDGET s): $2"; return 1; }; }
llama_ld() { echo "${llama_lib:+$llama_lib:}$llama_bin:$LD_LIBRARY_PATH"; }
wait_health() {  # PORT PID SECONDS
  for _ in $(seq "$3"); do
    curl -sf "localhost:$1/health" > /dev/null 2>&1 && return 0
    kill -0 "$2" 2> /dev/null || return 1
    sleep 1
  done
  return 1
}
declare -A fig

card=$(nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2> /dev/null | head -1)
log "card: ${card:-none (dry run: CPU)}; $(nproc) cores; $(free -g | awk '/Mem:/ {print $2 " GiB RAM, " $7 " available"}'); disk at $W: $(df -h "$W" | awk 'NR == 2 {print $4 " free of " $2}'); tandem $(cat "$G/COMMIT" 2> /dev/null || git -C "$root" rev-parse --short HEAD 2> /dev/null)"

# The host's ISA as ggml's options (its CPU backend serves the `cpu` part), AMX always off: a
# VM may report AMX it cannot run (SIGILL in ggml's AMX matmul, docs/gguf.md).
cpu_flags() {
  local f=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) " o=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) k
  for k in avx avx2 fma f16c bmi2 avx512f:AVX512 avx512_vnni avx512vbmi:AVX512_VBMI avx512_bf16 avx_vnni; do
    local flag=${k%%:*} opt=${k#*:}
    [ "$opt" = "$k" ] && opt=$(echo "$flag" | tr a-z A-Z)
    if [[ "$f" == *" $flag "* ]]; then o+=("-DGGML_$opt=ON"); else o+=("-DGGML_$opt=OFF"); fi
  done
  echo "${o[@]}"
}

# llama.cpp's CUDA build from the carried source: sm_90 only, the two targets, static.
build_llama() {
  local t0=$SECONDS src=$W/llama.cpp gen=()
  rm -rf "$src" && tar xJf "$LLAMA_TAR" -C "$W" || return 1
  command -v ninja > /dev/null && gen=(-G Ninja)
  cmake -S "$src" -B "$src/build-cuda" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
    -DGGML_NATIVE=OFF $(cpu_flags) \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF || return 1
  echo "configured in $((SECONDS - t0)) s"
  [ "$dry" = 1 ] && { echo "dry run: configure only"; return 0; }
  # Niced: tandem's figures are taken while it builds, and its threads come first.
  nice -n 19 cmake --build "$src/build-cuda" -j16 --target llama-server llama-batched-bench ||
    return 1
  echo "llama.cpp CUDA build (sm_90, -j16, llama-server + llama-batched-bench): $((SECONDS - t0)) s"
}

write_model() {  # SHAPE FILE
  [ -f "$2" ] && { echo "$2 exists ($(du -h "$2" | cut -f1))"; return 0; }
  local t0=$SECONDS
  "$tandem" random-model --like "$1" --gguf Q4_K_M --out "$2.tmp" && mv "$2.tmp" "$2" || return 1
  echo "random-model --like $1 --gguf Q4_K_M: $((SECONDS - t0)) s, $(du -h "$2" | cut -f1)"
}

tandem_b1() {  # FILE TAG
  fits 60 "decode-b1 tandem $2" || return 0
  local lg=$L/b1-tandem-$2.log v
  timeout 150 "$offline" "$1" "${dev[@]}" --num 1 --batch 1 --input "$inlen" --output "$outlen" \
    --repeat 3 > "$lg" 2>&1
  v=$(tail -1 "$lg" | grep -oE '[0-9.]+ output tok/s' | cut -d' ' -f1)
  log "decode-b1 tandem $2: ${v:-FAILED} output tok/s (prefill incl.); $(grep -m1 -oE 'decode-only steps:.*' "$lg")"
  fig["b1 tandem $2"]=${v:-x}
}

llama_b1() {  # FILE TAG
  fits 60 "decode-b1 llama.cpp $2" || return 0
  local lg=$L/b1-llama-$2.log v
  local extra=()
  [ "$dry" = 1 ] && extra=(-t 2)
  timeout 150 env LD_LIBRARY_PATH="$(llama_ld)" "$llama_bin/llama-batched-bench" -m "$1" \
    -ngl 99 -fa on -c $((inlen + outlen + 64)) -npp "$inlen" -ntg "$outlen" -npl 1 "${extra[@]}" \
    > "$lg" 2>&1
  # Columns: PP TG B N_KV T_PP S_PP T_TG S_TG T S: output tok/s with prefill = TG / T.
  v=$(awk -F'|' '$4+0 == 1 && $2+0 > 0 {printf "%.1f %.1f", $3/$10, $9}' "$lg" | tail -1)
  log "decode-b1 llama.cpp $2: ${v%% *} output tok/s (prefill incl.), S_TG ${v##* } tok/s"
  fig["b1 llama $2"]=${v%% *}
}

# The client on WHO's server: concurrency 1 (4 requests) and $conc ($nreq requests).
client() {  # WHO PORT TAG
  local c n v
  for c in 1 "$conc"; do
    n=$([ "$c" = 1 ] && echo 4 || echo "$nreq")
    timeout 180 "$tandem" bench --url "http://127.0.0.1:$2" --concurrency "$c" --num-requests "$n" \
      --input-len "$inlen" --output-len "$outlen" --json "$L/bench-$1-$3-c$c.json" \
      > "$L/bench-$1-$3-c$c.txt" 2> "$L/bench-$1-$3-c$c.err"
    v=$(awk -v c="$c" '$1 == c && NF >= 5 {print $5 " (errors " $3 ")"}' "$L/bench-$1-$3-c$c.txt")
    log "server $1 $3 concurrency $c: ${v:-FAILED} output tok/s"
    fig["c$c $1 $3"]=${v%% *}
  done
}

serve_tandem() {  # FILE TAG
  fits 120 "tandem serve $2" || return 0
  local t0=$SECONDS pid
  "$tandem" serve --model "$1" "${dev[@]}" --port 8331 --batch "$conc" \
    > "$L/serve-tandem-$2.log" 2>&1 &
  pid=$!
  if wait_health 8331 "$pid" 240; then
    log "tandem serve up in $((SECONDS - t0)) s: $(curl -s localhost:8331/v1/models | head -c 300)"
    client tandem 8331 "$2"
  else
    log "tandem serve did not come up: $(tail -3 "$L/serve-tandem-$2.log")"
  fi
  kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
}

serve_llama() {  # FILE TAG
  fits 120 "llama-server $2" || return 0
  local t0=$SECONDS pid extra=()
  [ "$dry" = 1 ] && extra=(-t 2)
  env LD_LIBRARY_PATH="$(llama_ld)" "$llama_bin/llama-server" -m "$1" -ngl 99 -fa on -np "$conc" \
    -c $((conc * (inlen + outlen + 16))) --port 8332 --host 127.0.0.1 "${extra[@]}" \
    > "$L/serve-llama-$2.log" 2>&1 &
  pid=$!
  if wait_health 8332 "$pid" 240; then
    log "llama-server up in $((SECONDS - t0)) s"
    client llama 8332 "$2"
  else
    log "llama-server did not come up: $(tail -3 "$L/serve-llama-$2.log")"
  fi
  kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
}

part_8b() {
  local bpid=
  if [ -x "$llama_bin/llama-server" ] && [ "$dry" != 1 ]; then
    log "llama.cpp's build is there (prep): $llama_bin"
  else
    log "llama.cpp build and the $shape8 Q4_K_M file, in parallel"
    build_llama > "$L/llama-build.log" 2>&1 &
    bpid=$!
  fi
  write_model "$shape8" "$F8" > "$L/random-model-8b.log" 2>&1
  log "model: $(tail -1 "$L/random-model-8b.log")"
  if [ "$dry" != 1 ] && [ -x "$G/tests/test_backend_cuda" ]; then
    timeout 90 "$G/tests/test_backend_cuda" --gtest_filter='CudaBlock*' > "$L/cuda-block.log" 2>&1
    log "test_backend_cuda CudaBlock*: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/cuda-block.log" | tr '\n' ' ')"
  fi
  [ -f "$F8" ] || { log "no model file: see $L/random-model-8b.log"; [ -z "$bpid" ] || wait "$bpid"; return 1; }
  tandem_b1 "$F8" 8b
  serve_tandem "$F8" 8b
  if [ -n "$bpid" ]; then
    log "waiting for the llama.cpp build"
    wait "$bpid"
    log "llama.cpp: $(tail -1 "$L/llama-build.log")"
  fi
  if [ -x "$llama_bin/llama-server" ]; then
    llama_b1 "$F8" 8b
    serve_llama "$F8" 8b
  else
    log "no llama-server: see $L/llama-build.log"
  fi
  echo "== ${card:-CPU dry run}: $shape8 Q4_K_M, output tok/s, tandem / llama.cpp"
  for k in b1 c1 "c$conc"; do
    echo "$k: tandem ${fig["$k tandem 8b"]:-?}  llama.cpp ${fig["$k llama 8b"]:-?}"
  done
}

part_70b() {
  # 70B Q4_K_M: ~42.5 GB of blocks; the GPU needs them plus the KV cache of 64 x 400 tokens
  # (~8.4 GB in bf16) and the activations.
  local need_gb=46 free_gb gpu_free_gb
  [ "$dry" = 1 ] && need_gb=1
  free_gb=$(df -BG --output=avail "$W" | tail -1 | tr -dc 0-9)
  [ -f "$F70" ] && need_gb=0  # written by prep
  if (( free_gb < need_gb )) && [ -f "$F8" ]; then
    log "disk: ${free_gb} GB free < ${need_gb}: removing $F8"
    rm -f "$F8"
    free_gb=$(df -BG --output=avail "$W" | tail -1 | tr -dc 0-9)
  fi
  (( free_gb >= need_gb )) || { log "disk: ${free_gb} GB free < ${need_gb} GB: no 70B file"; return 1; }
  gpu_free_gb=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2> /dev/null |
    head -1 | awk '{print int($1 / 1024)}')
  log "disk ${free_gb} GB free, GPU ${gpu_free_gb:-?} GiB free, RAM $(free -g | awk '/Mem:/ {print $7}') GiB available"
  write_model "$shape70" "$F70" > "$L/random-model-70b.log" 2>&1
  log "model: $(tail -1 "$L/random-model-70b.log")"
  [ -f "$F70" ] || return 1
  tandem_b1 "$F70" 70b
  serve_tandem "$F70" 70b
  echo "== ${card:-CPU dry run}: $shape70 Q4_K_M on one GPU, tandem, output tok/s"
  echo "b1 ${fig["b1 tandem 70b"]:-?}  c1 ${fig["c1 tandem 70b"]:-?}  c$conc ${fig["c$conc tandem 70b"]:-?}"
}

# Everything the 8b and 70b parts need that takes no GPU, for a call before theirs on the same
# warm machine (W in a folder the next call keeps, e.g. build-dev/gguf under the checkout):
# llama.cpp's CUDA build beside the 8B file, then the 70B file (disk permitting).
part_prep() {
  local t0=$SECONDS bpid=
  [ -x "$llama_bin/llama-server" ] || { build_llama > "$L/llama-build.log" 2>&1 & bpid=$!; }
  write_model "$shape8" "$F8" > "$L/random-model-8b.log" 2>&1
  log "model: $(tail -1 "$L/random-model-8b.log")"
  local free_gb; free_gb=$(df -BG --output=avail "$W" | tail -1 | tr -dc 0-9)
  if [ "${PREP_70B:-1}" = 0 ]; then
    log "no 70B file (PREP_70B=0)"
  elif (( free_gb >= 46 )) || [ "$dry" = 1 ]; then
    write_model "$shape70" "$F70" > "$L/random-model-70b.log" 2>&1
    log "model: $(tail -1 "$L/random-model-70b.log")"
  else
    log "disk: ${free_gb} GB free: no 70B file"
  fi
  [ -z "$bpid" ] || { wait "$bpid"; log "llama.cpp: $(tail -1 "$L/llama-build.log")"; }
  log "prep done in $((SECONDS - t0)) s"
}

part_cpu() {
  if [ ! -x "$llama_bin/llama-batched-bench" ]; then
    log "llama.cpp build"
    build_llama > "$L/llama-build.log" 2>&1
    log "llama.cpp: $(tail -1 "$L/llama-build.log")"
  fi
  local t f
  for t in Q4_K_M Q8_0; do
    f=$W/llama-100m-$t.gguf
    [ -f "$f" ] || "$tandem" random-model --like llama-100m --gguf "$t" --out "$f" > /dev/null 2>&1
    fits 150 "cpu $t" || continue
    log "cpu $t: $(du -m "$f" | cut -f1) MB, cores 2,3"
    MODEL=$f GGUF=$f BUILD=$G LLAMA_BIN=$llama_bin LLAMA_LIB=$llama_lib \
      LLAMA_ARGS=$([ "$dry" = 1 ] || echo "-dev none") REPEATS=${REPEATS:-3} THREADS=2 PREFILL=0 \
      OUT=$L/cpu-$t taskset -c 2,3 "$root/bench/cpu_vs_llamacpp.sh" all 2>&1 | tee "$L/cpu-$t.txt"
  done
}

case $part in
  8b) part_8b ;;
  cpu) part_cpu ;;
  70b) part_70b ;;
  prep) part_prep ;;
  both) part_8b; part_70b ;;
  *) echo "usage: scripts/gpu_gguf.sh [pack-llama [SRC] | 8b | 70b | both | prep | cpu]" >&2; exit 2 ;;
esac
log "elapsed ${SECONDS} s"
