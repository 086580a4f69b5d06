#!/usr/bin/env bash
# tandem against llama.cpp on the CPU on the same GGUF files: a random llama of the
# llama-100m shape (bench/make_llama100m_gguf.py, F16) quantized by llama.cpp's own
# llama-quantize to each of TYPES, then bench/cpu_vs_llamacpp.sh's engine figures with both
# engines reading that one file (interleaved runs, medians of REPEATS): output tok/s with
# prefill included at B = 1, 4, 16 (128 -> 64) and a 512-token prompt's prefill tok/s.
# The files are made once under DIR and reused.
# Then, with WHAT=all (or server), tandem serve against llama-server -np 16 on that file, the
# same client (tandem bench) at concurrency 1, 4, 16: medians of REPEATS rounds.
# usage: bench/gguf_vs_llamacpp.sh   (env: BUILD, LLAMA_BIN, LLAMA_LIB, DIR, TYPES
#        (default "Q4_K_M Q8_0"), REPEATS, THREADS (2), OUT, WHAT (engine|server|all; default
#        engine), PREFILL)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
llama=${LLAMA_BIN:-/work/peers/llama.cpp/build/bin}
dir=${DIR:-/tmp/gguf_vs_llamacpp}
types=${TYPES:-Q4_K_M Q8_0}
mkdir -p "$dir"
f16="$dir/llama100m-f16.gguf"
[ -f "$f16" ] || /usr/bin/python3 "$here/make_llama100m_gguf.py" "$f16"
echo "cpu: $(lscpu | grep -m1 'Model name' | sed 's/.*: *//'), threads ${THREADS:-2}," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for t in $types; do
  file="$dir/llama100m-$t.gguf"
  [ -f "$file" ] || LD_LIBRARY_PATH="${LLAMA_LIB:+$LLAMA_LIB:}$llama" "$llama/llama-quantize" "$f16" "$file" "$t" 2 > "$dir/quantize_$t.log" 2>&1
  echo "== $t: $file ($(du -m "$file" | cut -f1) MB)"
  MODEL="$file" GGUF="$file" OUT="${OUT:-/tmp/gguf_vs_llamacpp}/$t" \
    "$here/cpu_vs_llamacpp.sh" "${WHAT:-engine}"
done
