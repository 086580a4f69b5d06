#!/usr/bin/env bash
# Issue 46's CUDA refactors (one GEMM layer, switches in one place), checked on the GPU
# machine in ONE device call of about 8 minutes.
#
# 1. Here, on the build machine (slow: two CUDA builds; niced, -j2):
#      scripts/gpu_house.sh pack [BASE_COMMIT]
#    builds this tree's tandem, offline_bench, test_backend_cuda and test_golden in
#    build-cuda/, and BASE_COMMIT's tandem and offline_bench (default: the merge base with
#    main, the tree before the refactor) exported to /tmp/tandem-house-base; bundles both
#    (scripts/bundle_cuda.sh) with this script into .device/house.tar.xz.
# 2. On the GPU machine, from the checkout's root (carry .device; tests/data must be there):
#      tar xJf .device/house.tar.xz -C /tmp && OUT=$OUT /tmp/house/gpu_house.sh
#    tests   test_backend_cuda, then test_golden '*Cuda*', while the 8B FP8 random model
#            is written                                                            <= 4.5 min
#    perf    on that model: decode-b1 of base / new (A B, later B A), offline-128/128 and
#            the sweep at 256 of base and new                                        ~ 3.5 min
#    Each figure starts only while the budget (BUDGET seconds, default 480) allows it;
#    the logs come back as $OUT/house-logs.tgz; the last lines are the table, with the
#    card's name.
set -u

pack() {
  local base=${1:-$(git merge-base HEAD main)} root wt=/tmp/tandem-house-base
  root=$(git rev-parse --show-toplevel) && cd "$root" || return 1
  local targets=(tandem offline_bench)
  nice -n 10 ninja -C build-cuda -j2 "${targets[@]}" test_backend_cuda test_golden || return 1
  # The base tree as an export (no worktree in the shared repository's metadata).
  if [ "$(cat "$wt/.commit" 2> /dev/null)" != "$(git rev-parse "$base")" ]; then
    rm -rf "$wt" && mkdir -p "$wt" && git archive "$base" | tar xf - -C "$wt" || return 1
    git rev-parse "$base" > "$wt/.commit"
  fi
  [ -f "$wt/build-cuda/build.ninja" ] ||
    cmake -S "$wt" -B "$wt/build-cuda" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON \
      -DTANDEM_BENCH=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache > /dev/null || return 1
  nice -n 10 ninja -C "$wt/build-cuda" -j2 "${targets[@]}" || return 1
  local stage=/tmp/tandem-house-stage
  rm -rf "$stage" && mkdir -p "$stage/house" .device || return 1
  # Only what the call runs: the bench folder's other binaries and the other tests stay.
  scripts/bundle_cuda.sh build-cuda "$stage/full" > /dev/null || return 1
  mkdir -p "$stage/house/gpu/tests" "$stage/house/gpu/bench"
  cp -r "$stage/full/lib" "$stage/full/tandem" "$stage/house/gpu/"
  cp "$stage/full/tests/test_backend_cuda" "$stage/full/tests/test_golden" "$stage/house/gpu/tests/"
  cp "$stage/full/bench/offline_bench" "$stage/house/gpu/bench/"
  scripts/bundle_cuda.sh "$wt/build-cuda" "$stage/basefull" > /dev/null || return 1
  mkdir -p "$stage/house/base/bench"
  cp -r "$stage/basefull/lib" "$stage/basefull/tandem" "$stage/house/base/"
  cp "$stage/basefull/bench/offline_bench" "$stage/house/base/bench/"
  cp scripts/gpu_house.sh "$stage/house/"
  echo "new $(git rev-parse --short HEAD), base $(git rev-parse --short "$base")" \
    > "$stage/house/COMMITS"
  tar cf - -C "$stage" house | xz -T2 -6 > .device/house.tar.xz || return 1
  echo "packed .device/house.tar.xz ($(du -h .device/house.tar.xz | cut -f1)): $(cat "$stage/house/COMMITS")"
}

if [ "${1:-}" = pack ]; then
  shift
  pack "$@"
  exit $?
fi

here=$(cd "$(dirname "$0")" && pwd)
G=${G:-$here/gpu}; B=${B:-$here/base}; OUT=${OUT:-/tmp/tandem-house}
# The logs, one file back in $OUT (a device call returns at most 8 files).
L=/tmp/tandem-house-logs
M8=${M8:-/tmp/llama8b-fp8}; BUDGET=${BUDGET:-480}
parts=${*:-tests perf}
rm -rf "$L" && mkdir -p "$L" "$OUT"
trap 'tar czf "$OUT/house-logs.tgz" -C "$L" .' EXIT
card=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2> /dev/null | head -1)
echo "card: ${card:-unknown}; $(cat "$here/COMMITS" 2> /dev/null)"
has() { [[ " $parts " == *" $1 "* ]]; }
passed() { grep -E '^\[  (PASSED|FAILED) ' "$1" | tr '\n' ' '; }
# Starts a step only if `need` seconds remain of the budget.
fits() { (( SECONDS + $1 <= BUDGET )) || { echo "skipped (budget): $2"; return 1; }; }
# The tests find their data at the path they were built with.
[ -e /work/wt/cuda-house/tests/data ] || { mkdir -p /work/wt && ln -sfn "$PWD" /work/wt/cuda-house; }

# The model is written (CPU and disk) while the tests hold the GPU.
model_pid=
if has perf && [ ! -f "$M8/config.json" ]; then
  LD_LIBRARY_PATH=$G/lib:/usr/local/cuda/lib64 timeout 300 "$G/tandem" random-model \
    --like llama-3.1-8b --dtype fp8 --out "$M8" > "$L/random-model.log" 2>&1 &
  model_pid=$!
fi

if has tests; then
  export LD_LIBRARY_PATH=$G/lib:/usr/local/cuda/lib64
  timeout 170 "$G/tests/test_backend_cuda" > "$L/cuda.log" 2>&1
  echo "test_backend_cuda rc=$? $(passed "$L/cuda.log")"
  grep -E '^\[  FAILED  \]' "$L/cuda.log" | head -20
  timeout 100 "$G/tests/test_golden" --gtest_filter='*Cuda*' > "$L/golden.log" 2>&1
  echo "test_golden(*Cuda*) rc=$? $(passed "$L/golden.log")"
  grep -E '^\[  FAILED  \]' "$L/golden.log" | head -20
  unset LD_LIBRARY_PATH
fi
has perf || exit 0
[ -z "$model_pid" ] || wait "$model_pid" || { echo "random-model failed: $L/random-model.log"; exit 1; }

declare -A fig  # "what who" -> output tok/s, each run appended
# offline WHAT WHO NEED -- offline_bench arguments: one figure (the last line's tok/s).
offline() {
  local what=$1 who=$2 need=$3 bundle=$G; shift 4
  [ "${who%%+*}" = base ] && bundle=$B
  fits "$need" "$what $who" || return 0
  local log="$L/${what//\//-}-$who.log" v
  LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64" \
    timeout $((need + 30)) "$bundle/bench/offline_bench" "$M8" "$@" >> "$log" 2>&1
  v=$(tail -1 "$log" | grep -oE '[0-9]+ output tok/s' | cut -d' ' -f1)
  echo "$what $who: ${v:-FAILED (see $log)}"
  fig["$what $who"]+="${v:-x} "
}

# The sweep at 256 against WHO's server, measured by the new client.
sweep() {
  local who=$1 bundle=$G v; [ "$who" = base ] && bundle=$B
  fits 75 "sweep-256 $who" || return 0
  LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64" "$bundle/tandem" serve --model "$M8" \
    --port 8321 --batch 256 --max-batched-tokens 8192 > "$L/serve-$who.log" 2>&1 &
  local server=$!
  for _ in $(seq 60); do curl -sf localhost:8321/health > /dev/null && break; sleep 1; done
  LD_LIBRARY_PATH="$G/lib:/usr/local/cuda/lib64" timeout 60 "$G/tandem" bench \
    --url http://127.0.0.1:8321 --concurrency 256 --num-requests 1024 --input-len 128 \
    --output-len 256 > "$L/sweep-$who.log" 2> "$L/sweep-$who.err"
  kill $server; wait $server 2> /dev/null
  v=$(awk '$1 == 256 {print $5}' "$L/sweep-$who.log")
  echo "sweep-256 $who: ${v:-FAILED (see $L/sweep-$who.*)}"
  fig["sweep-256 $who"]+="${v:-x} "
}

# Each figure once in every pair first, then decode-b1's repeats in reverse order (A B, then
# B A): what the budget cuts is a repeat, not a pair.
b1=(--num 1 --batch 1 --input 128 --output 256 --repeat 3)
for who in base new; do offline decode-b1 "$who" 20 -- "${b1[@]}"; done
for who in base new; do
  offline offline-128/128 "$who" 35 -- --num 1024 --batch 256 --input 128 --output 128
done
for who in base new; do sweep "$who"; done
for who in new base; do offline decode-b1 "$who" 20 -- "${b1[@]}"; done

echo "== ${card:-unknown card}: 8B shape, FP8 per-channel weights (random), output tok/s"
for what in decode-b1 offline-128/128 sweep-256; do
  line="$what:"
  for who in base new; do
    [ -n "${fig["$what $who"]:-}" ] && line+="  $who ${fig["$what $who"]}"
  done
  echo "$line"
done
echo "elapsed ${SECONDS}s"
