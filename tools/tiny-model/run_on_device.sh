#!/usr/bin/env bash
# Trains tandem's embedded default model on the GPU machine, end to end, in one command:
#   bash tools/tiny-model/run_on_device.sh <corpus_dir> <out_dir>
# <corpus_dir> holds train.txt, valid.txt (and SOURCES.json) from corpus.py.
# <out_dir> receives only the files to bring back (at most 8, each <= 16 MiB): config.json,
# generation_config.json, model-*-of-*.safetensors + model.safetensors.index.json (or one
# model.safetensors), tokenizer.json, tokenizer_config.json, train_log.json.
# Budget: TRAIN_SECONDS (default 300) of training; the whole run stays under 8 minutes.
# Any failure exits non-zero with a message; files already made are still copied out.
set -euo pipefail
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=true

die() { echo "run_on_device.sh: FAILED: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: bash $0 <corpus_dir> <out_dir>"
CORPUS=$1
OUT=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TRAIN_SECONDS=${TRAIN_SECONDS:-300}
export TRAIN_SECONDS
START=$(date +%s)
for f in train.txt valid.txt; do
  [ -s "$CORPUS/$f" ] || die "$CORPUS/$f is missing or empty (carry .device/corpus)"
done
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/tiny-model.XXXXXX)
echo "== tokenizer ($(date +%T))"
timeout 120 python3 "$HERE/train_tokenizer.py" --corpus "$CORPUS" --out "$WORK/tokenizer" \
  || die "train_tokenizer.py (exit $?)"
echo "== training, ${TRAIN_SECONDS}s budget ($(date +%T))"
RC=0
# Outer limit = training budget + generous room for imports, data, export and checks;
# train.py stops its own loop on the wall clock, this only catches a hang.
timeout $((TRAIN_SECONDS + 150)) python3 "$HERE/train.py" --corpus "$CORPUS" \
  --tokenizer "$WORK/tokenizer" --export "$WORK/model" || RC=$?

echo "== copying results to $OUT ($(date +%T))"
N=0
for f in "$WORK/model"/*; do
  [ -f "$f" ] || continue
  NAME=$(basename "$f")
  SIZE=$(stat -c %s "$f")
  if [ "$SIZE" -gt $((16 * 1024 * 1024)) ]; then
    echo "too large to bring back: $NAME ($SIZE bytes)" >&2
    [ "$RC" -ne 0 ] || RC=3
    continue
  fi
  cp "$f" "$OUT/$NAME"
  chmod 644 "$OUT/$NAME"
  N=$((N + 1))
done
ls -l "$OUT"
if [ "$N" -gt 8 ]; then
  echo "$N files in $OUT: more than 8 will not come back" >&2
  [ "$RC" -ne 0 ] || RC=4
fi
ELAPSED=$(( $(date +%s) - START ))
echo "== total ${ELAPSED}s"
[ "$RC" -eq 0 ] || die "train.py or the output checks failed (code $RC); see the log above and $OUT/train_log.json"
python3 - "$OUT/train_log.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
v, g = r["valid"], r["greedy_reference"]
print(f"valid: mean NLL {v['mean_nll']:.5f}  perplexity {v['perplexity']:.4f}  "
      f"({v['predicted_tokens']} predicted tokens, window {v['window']})")
print(f"greedy: {g['prompt']!r} -> {g['text']!r}")
print(f"training: {r['training']}")
EOF
echo "run_on_device.sh: OK"
