#!/usr/bin/env bash
# Trains the draft model of models/tiny-kjv for speculative decoding (docs/speculative-decoding.md)
# on the GPU machine, in one command:
#   bash tools/tiny-model/train_draft.sh <corpus_dir> <out_dir>
# Same corpus (corpus.py) and the same tokenizer as tiny-kjv (its tokenizer.json is reused,
# not retrained: a draft must share the model's vocabulary), a Llama of ~1.2M parameters
# (hidden 128, 2 layers, 2 heads / 1 KV head, MLP 384, tied embeddings: ~13x smaller than
# tiny-kjv's 15.7M, 2.4 MB in bf16), no dropout (it is far too small to overfit the corpus
# in the budget). <out_dir> receives the model folder (config.json, generation_config.json,
# model.safetensors, tokenizer.json, tokenizer_config.json, train_log.json).
# Knobs: TRAIN_SECONDS (150), BATCH (64), LR (3e-3); see run_on_device.sh for the rest.
set -euo pipefail
export PYTHONUNBUFFERED=1
die() { echo "train_draft.sh: FAILED: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: bash $0 <corpus_dir> <out_dir>"
CORPUS=$1
OUT=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TARGET="$HERE/../../models/tiny-kjv"
for f in train.txt valid.txt; do
  [ -s "$CORPUS/$f" ] || die "$CORPUS/$f is missing or empty (carry .device/corpus)"
done
[ -s "$TARGET/tokenizer.json" ] || die "$TARGET/tokenizer.json is missing"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
WORK=$(mktemp -d /tmp/tiny-draft.XXXXXX)
TRAIN_SECONDS=${TRAIN_SECONDS:-150}
timeout $((TRAIN_SECONDS + 150)) python3 "$HERE/train.py" --corpus "$CORPUS" --tokenizer "$TARGET" \
  --export "$WORK/model" --train-seconds "$TRAIN_SECONDS" --hidden 128 --intermediate 384 \
  --layers 2 --heads 2 --kv-heads 1 --dropout 0 --lr "${LR:-3e-3}" --batch "${BATCH:-64}" \
  || die "train.py (exit $?)"
mkdir -p "$OUT"
cp "$WORK/model"/* "$OUT"/
ls -l "$OUT"
python3 - "$OUT/train_log.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
v = r["valid"]
print(f"draft: {r['parameters'] / 1e6:.2f}M parameters, valid mean NLL {v['mean_nll']:.4f}, perplexity {v['perplexity']:.2f}")
print(f"training: {r['training']}")
PY
echo "train_draft.sh: OK"
