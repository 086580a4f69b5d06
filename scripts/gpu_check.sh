#!/usr/bin/env bash
# On the GPU machine, from a bundle made by scripts/bundle_cuda.sh: the CUDA tests, the
# kernel benchmarks (attention, few-row linears), the offline workloads with and without
# the overlapped engine loop, and a per-kernel time profile of one decode step (ncu,
# where the machine allows it).
# Logs go under $OUT; a short summary is printed last.
#   G=.device/gpu OUT=/tmp/out scripts/gpu_check.sh [tests] [bench] [profile]
set -u
G=${G:-build/bundle}; OUT=${OUT:-/tmp/tandem-check}; M=${M:-/tmp/llama8b}
parts=${*:-tests bench profile}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$G/lib:/usr/local/cuda/lib64
# The tests find their data at the path they were built with.
[ -e /work/main/tests/data ] || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
has() { [[ " $parts " == *" $1 "* ]]; }
if has tests; then
  timeout 300 "$G/tests/test_backend_cuda" > "$OUT/test_backend_cuda.log" 2>&1
  echo "test_backend_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_backend_cuda.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$OUT/test_backend_cuda.log" | head -20
  timeout 400 "$G/tests/test_golden" --gtest_filter='*Cuda*' > "$OUT/test_golden_cuda.log" 2>&1
  echo "test_golden(Cuda) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_golden_cuda.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$OUT/test_golden_cuda.log" | head -20
fi
if has bench; then
  timeout 120 "$G/bench/cuda_attention_bench" > "$OUT/attention_bench.log" 2>&1
  grep -E "^(decode|prefill)" "$OUT/attention_bench.log"
  timeout 120 "$G/bench/cuda_gemv_bench" 20 > "$OUT/gemv_bench.log" 2>&1
  grep -E "M=1" "$OUT/gemv_bench.log"
  [ -d "$M" ] || timeout 120 "$G/tandem" random-model --like llama-3.1-8b --out "$M" > /dev/null
  for ov in 1 0; do
    echo "-- TANDEM_OVERLAP=$ov"
    TANDEM_OVERLAP=$ov timeout 60 "$G/bench/offline_bench" "$M" --num 1 --batch 1 --input 128 --output 256 --repeat 3 | tail -1
    TANDEM_OVERLAP=$ov timeout 90 "$G/bench/offline_bench" "$M" --num 1024 --batch 256 --input 128 --output 128 | tail -1
  done
  timeout 150 "$G/bench/offline_bench" "$M" --num 160 --batch 160 --input 2048 --output 2048 | tail -1
fi
if has profile && command -v ncu > /dev/null; then
  [ -d "$M" ] || timeout 120 "$G/tandem" random-model --like llama-3.1-8b --out "$M" > /dev/null
  # Eager decode (graphs off: ncu then sees each kernel); skip the load and the prompt.
  TANDEM_CUDA_GRAPHS=0 timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum \
    --launch-skip 4000 --launch-count 1400 --csv "$G/bench/offline_bench" "$M" --num 1 --batch 1 \
    --input 128 --output 64 > "$OUT/ncu_decode_b1.csv" 2> "$OUT/ncu.err"
  python3 - "$OUT/ncu_decode_b1.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; name = head.index("Kernel Name"); val = head.index("Metric Value")
unit = rows[1][head.index("Metric Unit")] if "Metric Unit" in head and len(rows) > 1 else "?"
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit, 1e-3)
tot = collections.Counter(); cnt = collections.Counter()
for r in rows[1:]:
    try: v = float(r[val].replace(",", ""))
    except ValueError: continue
    k = r[name][:60]; tot[k] += v * scale; cnt[k] += 1
print(f"ncu ({unit}): {sum(cnt.values())} kernels, {sum(tot.values()):.0f} us in all")
for k, v in tot.most_common(16):
    print(f"{v:9.1f} us {cnt[k]:5d}x {v/cnt[k]:7.2f} us  {k}")
PY
fi
