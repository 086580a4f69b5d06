#!/usr/bin/env bash
# Single-stream speculative decoding on the real pair: models/tiny-kjv and its draft
# models/tiny-kjv-draft (same tokenizer, 13x smaller; tools/tiny-model/train_draft.sh).
#   bench/spec_pair.sh [TANDEM (build/tandem)] [DEVICE (cpu)] [THREADS (1)]
# For each prompt, greedy and sampled (temperature 0.8, three seeds): `tandem generate`
# of 256 tokens without speculation, with n-gram lookup and with the draft (K = 4), the
# three interleaved, each line the median tok/s of REPS (3) runs and the acceptance; then the
# totals per method. Tokens are the same with and without speculation (the engine's
# tests check it), so the speedup is the tok/s ratio.
set -u
T=${1:-build/tandem}
DEVICE=${2:-cpu}
THREADS=${3:-1}
DRAFT=${DRAFT:-models/tiny-kjv-draft}
N=${N:-256}
prompts=("And God said, Let there be light"
         "In the beginning was the Word"
         "computer (noun): a machine that"
         "The country is located in")
ngram='{"method": "ngram", "num_speculative_tokens": 4}'
draft="{\"model\": \"$DRAFT\", \"num_speculative_tokens\": 4}"
# run METHOD PROMPT [generate flags]: prints "tok/s acceptance%" of one run
run() {
  local method=$1 prompt=$2 spec=(); shift 2
  case $method in
    ngram) spec=(--speculative-config "$ngram") ;;
    draft) spec=(--speculative-config "$draft") ;;
    *) spec=(--timing) ;;
  esac
  "$T" generate --device "$DEVICE" --threads "$THREADS" --prompt "$prompt" --max-tokens "$N" \
    --ignore-eos --json "${spec[@]}" "$@" 2>&1 >/dev/null | tail -1 |
    sed -E 's/.*\(([0-9.]+)%\).*\(([0-9.]+) tok\/s\)/\2 \1/; s/.*\(([0-9.]+) tok\/s\)$/\1 -/'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A sum
echo "tandem $(git rev-parse --short HEAD 2>/dev/null), $DEVICE, $THREADS thread(s), $N tokens, K = 4"
printf "%-34s %-9s %10s %10s %8s %10s %8s\n" prompt sampling none ngram "acc %" draft "acc %"
for p in "${prompts[@]}"; do
  for mode in greedy s1 s2 s3; do
    flags=()
    [ "$mode" = greedy ] || flags=(--temperature 0.8 --seed "${mode#s}")
    declare -A rates=() accs=()
    for ((rep = 0; rep < ${REPS:-3}; rep++)); do
      for m in none ngram draft; do
        read -r r a < <(run "$m" "$p" "${flags[@]}")
        rates[$m]+="$r "; accs[$m]=$a
      done
    done
    line=()
    for m in none ngram draft; do
      med=$(tr ' ' '\n' <<< "${rates[$m]}" | grep . | median)
      line+=("$med"); sum[$m]=$(awk -v a="${sum[$m]:-0}" -v b="$med" 'BEGIN {print a + 1 / b}')
    done
    printf "%-34s %-9s %10s %10s %8s %10s %8s\n" "${p:0:34}" "$mode" "${line[0]}" "${line[1]}" \
      "${accs[ngram]}" "${line[2]}" "${accs[draft]}"
  done
done
# Time per token summed over every case: the overall single-stream rate of each method.
for m in none ngram draft; do
  echo "$m: $(awk -v s="${sum[$m]}" -v n=$(( ${#prompts[@]} * 4 )) 'BEGIN {printf "%.0f", n / s}') tok/s over all cases (harmonic mean)"
done
