#!/usr/bin/env bash
# tandem against llama.cpp on the CPU: the same random llama shape (a tandem folder and
# an f16 GGUF of the same weights), the same machine, one run, the two interleaved, each
# figure the median of REPEATS rounds.
#   engine: offline_bench --device cpu against llama-batched-bench -t THREADS, output
#           tok/s with prefill included (B·64 over the whole run), 128 -> 64, B = 1, 4, 16;
#           and one 512-token prompt's prefill tok/s.
#   server: tandem bench --concurrency 1,4,16 --num-requests 16 --input-len 128
#           --output-len 64 against tandem serve --device cpu --batch 16 and
#           llama-server -t THREADS -np 16.
# usage: bench/cpu_vs_llamacpp.sh [engine|server|all]   (env: BUILD, LLAMA_BIN, LLAMA_LIB
#        (a folder put first on llama.cpp's LD_LIBRARY_PATH, e.g. a ggml-cpu built without
#        AMX), LLAMA_ARGS (more arguments of llama.cpp's binaries, e.g. "-dev none" for a CUDA
#        build on its CPU), MODEL, GGUF, REPEATS, THREADS, OUT, PREFILL (0: skip the 512-token
#        prefill))
set -euo pipefail
what=${1:-all}
build=${BUILD:-build}
llama=${LLAMA_BIN:-/work/peers/llama.cpp/build/bin}
model=${MODEL:-/work/peers/models/llama100m}
gguf=${GGUF:-/work/peers/models/llama100m-f16.gguf}
repeats=${REPEATS:-3}
threads=${THREADS:-2}
out=${OUT:-/tmp/cpu_vs_llamacpp}
mkdir -p "$out"
# llama.cpp's binaries, with LLAMA_LIB's libraries first where given.
# (env execs the binary: a server started with lcpp & has the server's own pid in $!.)
lcpp() {
  env LD_LIBRARY_PATH="${LLAMA_LIB:+$LLAMA_LIB:}$llama${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$@" ${LLAMA_ARGS:-}
}
ratio() { awk -v t="$1" -v l="$2" 'BEGIN {if (l > 0) printf "%.2f", t / l; else print "n/a"}'; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

tandem_engine() {  # B INPUT OUTPUT -> "output tok/s" "prompt tok/s of the first step"
  local log="$out/tandem_b$1_$2_$3.log"
  "$build/bench/offline_bench" "$model" --device cpu --input "$2" --output "$3" --num "$1" \
    --batch "$1" --threads "$threads" > "$log" 2>&1
  echo "$(grep -oP '= \K[0-9.]+(?= output tok/s \(after)' "$log")" \
    "$(grep -oP '= \K[0-9.]+(?= prompt tok/s)' "$log")"
}
llama_engine() {  # B INPUT OUTPUT -> "output tok/s incl. prefill" "S_PP"
  local log="$out/llama_b$1_$2_$3.log"
  lcpp "$llama/llama-batched-bench" -m "$gguf" -t "$threads" -c $(( $1 * ($2 + $3) + 64 )) \
    -npp "$2" -ntg "$3" -npl "$1" > "$log" 2>&1
  awk -F'|' -v b="$1" -v tg="$3" '$4+0 == b && $2+0 > 0 {print b*tg/$10, $7}' "$log" | tail -1
}

if [ "$what" = engine ] || [ "$what" = all ]; then
  echo "engine: $(grep -m1 'cpu:' <("$build/bench/offline_bench" "$model" --device cpu --input 8 --output 2 --num 1 --batch 1 --threads "$threads" 2>&1) || true)"
  for b in 1 4 16; do
    : > "$out/t_$b"; : > "$out/l_$b"
    for r in $(seq "$repeats"); do
      tandem_engine "$b" 128 64 | awk '{print $1}' >> "$out/t_$b"
      llama_engine "$b" 128 64 | awk '{print $1}' >> "$out/l_$b"
    done
    t=$(median < "$out/t_$b"); l=$(median < "$out/l_$b")
    echo "engine B=$b 128->64 output tok/s (prefill included): tandem $t  llama.cpp $l  ratio $(ratio "$t" "$l")   [tandem: $(tr '\n' ' ' < "$out/t_$b")| llama.cpp: $(tr '\n' ' ' < "$out/l_$b")]"
  done
  [ "${PREFILL:-1}" = 0 ] || { : > "$out/t_pp"; : > "$out/l_pp"
  for r in $(seq "$repeats"); do
    tandem_engine 1 512 1 | awk '{print $2}' >> "$out/t_pp"
    llama_engine 1 512 1 | awk '{print $2}' >> "$out/l_pp"
  done
  t=$(median < "$out/t_pp"); l=$(median < "$out/l_pp")
  echo "prefill 512 tokens, prompt tok/s: tandem $t  llama.cpp $l  ratio $(ratio "$t" "$l")   [tandem: $(tr '\n' ' ' < "$out/t_pp")| llama.cpp: $(tr '\n' ' ' < "$out/l_pp")]"; }
fi

serve_and_bench() {  # NAME PORT COMMAND... : starts the server, benches it, stops it
  local name=$1 port=$2; shift 2
  "$@" > "$out/${name}_server_$r.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do curl -sf "localhost:$port/health" > /dev/null 2>&1 && break; sleep 1; done
  "$build/tandem" bench --url "http://127.0.0.1:$port" --concurrency 1,4,16 --num-requests 16 \
    --input-len 128 --output-len 64 --vocab 32000 --json "$out/${name}_bench_$r.json" \
    > "$out/${name}_bench_$r.txt" 2>&1 || true
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  # The next server takes the port only once this one is gone.
  for _ in $(seq 30); do curl -s "localhost:$port/health" > /dev/null 2>&1 || break; sleep 1; done
}

if [ "$what" = server ] || [ "$what" = all ]; then
  for r in $(seq "$repeats"); do
    serve_and_bench tandem 18611 "$build/tandem" serve --device cpu --model "$model" --port 18611 \
      --batch 16 --threads "$threads"
    serve_and_bench llama 18612 env LD_LIBRARY_PATH="${LLAMA_LIB:+$LLAMA_LIB:}$llama${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$llama/llama-server" ${LLAMA_ARGS:-} -m "$gguf" -t "$threads" -np 16 -c 4096 \
      --port 18612 --host 127.0.0.1
  done
  # The client's table: concurrency in column 1, output tok/s in column 5.
  for c in 1 4 16; do
    for name in tandem llama; do
      for r in $(seq "$repeats"); do
        awk -v c="$c" '$1 == c && NF >= 5 {print $5}' "$out/${name}_bench_$r.txt"
      done > "$out/${name}_c$c"
    done
    t=$(median < "$out/tandem_c$c"); l=$(median < "$out/llama_c$c")
    echo "server concurrency $c output tok/s: tandem ${t:-?}  llama-server ${l:-?}  ratio $(ratio "${t:-0}" "${l:-0}")   [tandem: $(tr '\n' ' ' < "$out/tandem_c$c")| llama-server: $(tr '\n' ' ' < "$out/llama_c$c")]"
  done
  for name in tandem llama; do  # column 3: requests that failed
    echo "errors, $name (per round: conc 1 4 16): $(for r in $(seq "$repeats"); do awk '$1 ~ /^(1|4|16)$/ && NF >= 5 {printf "%s ", $3}' "$out/${name}_bench_$r.txt"; echo -n '| '; done)"
  done
fi
