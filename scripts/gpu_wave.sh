#!/usr/bin/env bash
# The GPU figures and checks of speculative decoding and embeddings (issues 43, 44), with two
# diagnostics, in ONE device call of at most ~9.5 minutes.
#
# 1. Here, on the build machine (niced, -j2; BUILD defaults to build, a CUDA build):
#      scripts/gpu_wave.sh pack
#    builds tandem, offline_bench and test_golden and bundles them with this script into
#    .device/wave.tar.xz (carry .device; the tree's tests/data must travel too).
# 2. On the GPU machine, from the checkout's root:
#      tar xJf .device/wave.tar.xz -C /tmp && OUT=$OUT /tmp/wave/gpu_wave.sh [PARTS]
#    PARTS (default all): draft tests diag spec embed; also bisect, hfbf16, pair, tp, moe-fp8,
#    gguf-moe, attn-long (not in the default)
#    attn-long  long prefill attention (issue 45's figure), packed with
#           PACK_TESTS=test_backend_cuda PACK_BENCHES=cuda_attention_bench: first
#           test_backend_cuda's CudaAttentionSm90* (240 s leash: a hang shows as rc=124 and
#           skips the timings), then cuda_attention_bench 20 prefill-long-sm90 in
#           ATTN_LONG_ROUNDS rounds (default 2; 8k / 32k / 128k, causal, one sequence, 32/8
#           heads, d128: the sm90 kernel) and bench/sdpa_cudnn_bench.py (cuDNN through SDPA)
#           in the same call; the issue's bar is >= 0.95x cuDNN's figure at each size  ~3 min
#           ATTN_TTFT=1 (with no other model-writing part) adds TTFT of a 32k and a 100k
#           prompt on the 8B shape (bf16, written in the background from the start)  +~1 min
#    moe-fp8 FP8 MoE experts (issue 45): test_backend_cuda's CudaMoeExperts.* (the reference
#           kernel and the e4m3 tensor-core one, TANDEM_FP8_MOE_TC, against the CPU twin and
#           each other) and test_golden's CudaFp8Gate.* with TANDEM_FP8_MOE_TC=1; then on
#           random Mixtral-8x7B- (4 layers) and Qwen3-30B-A3B-shaped (8 layers) models
#           (written while the tests run) decode-b1 and offline 128/128 at 64 rows: bf16, then
#           --quantization fp8 with TANDEM_FP8_MOE_TC=0 and =1 (MOE_MODELS, MOE_VARIANTS
#           pick: default "mixtral qwen3moe", "bf16 fp8-tc0 fp8-tc1")            ~7 min
#    tp     tensor parallelism through NCCL at one rank (docs/tensor-parallel.md): the NCCL unit
#           tests and the vocabulary-slice kernel (test_backend_cuda 'Nccl*:CudaVocabSlice*':
#           the sampled ids' device broadcast feeding a step among them), the golden NCCL
#           tests (test_golden '*TensorParallelNccl*:*TensorParallelAsync*': TP=1 equals the
#           single worker, graphs on, steps overlapped or not, with the ids' broadcast forced
#           too (TensorParallelAsyncNccl.*); n-gram speculation recording verify graphs under
#           the group; GGUF Q8_0/Q4_0 on GPU ranks (TensorParallelNcclGguf); the several-GPU
#           ones skip on one GPU; the asynchronous executor's CPU-rank tests beside them),
#           then on the 8B shape decode-b1 and offline 128/128 at 64 rows, the single worker
#           and TANDEM_TP_EXECUTOR=1 (the NCCL executor at N = 1) one after the other, and the
#           both with TANDEM_OVERLAP=0 (decode-b1) beside them                          ~4 min
#    hfbf16 transformers' own bf16 run of the Gemma 4 fixtures against their fp32 oracle
#           (bench/hf_bf16_oracle_kl.py --write: $OUT/hf-bf16.tgz), and its GPU-against-fp32
#           logits per position on the diag's sequence: how much of the GPU drift is bf16's
#    pair   bench/spec_pair.sh on the GPU: the real pair, models/tiny-kjv and its draft
#    verify verify steps as CUDA graphs (issue 44 item 5): test_backend_cuda's verify-step
#           attention against the CPU, test_golden's TinyModelCuda (graph against eager, token
#           for token, n-gram and draft), then bench/spec_pair.sh (REPS=1): none / n-gram /
#           draft tok/s on the GPU                                                    ~3 min
#    vision scripts/gpu_vision.sh (issue 41's figures) with this bundle's tandem
#    gguf   scripts/gpu_gguf.sh 8b (issue 42's GPU figures against llama.cpp's CUDA server,
#           built in the call from .device/llamacpp-src.tar.xz) with this bundle;
#           GGUF_PART=both adds the 70B file (W: GGUF_W, default build-dev/gguf)
#    (switches: TP_TESTS=0 / TP_TIMINGS=0 drop the tp part's tests / timings; VERIFY_TESTS=0
#    and VERIFY_VG="" drop the verify part's tests / spec_pair runs; PREP_70B=0 no 70B file)
#    prep   in the background from the start: gpu_gguf.sh prep (llama.cpp's build, the 8B and
#           70B files) into GGUF_W for a gguf part in the next call on the warm machine
#    gguf-kern  bench/cuda_gguf_bench (PACK_BENCHES=cuda_gguf_bench): the k-quant linears
#           at the 8B layer shapes (GGUF_TYPES, default q4_k,q6_k,q5_k; GGUF_ROWS, default
#           1,2,4,8,64), then test_backend_cuda's CudaBlock* tests                    ~2 min
#    gguf-tiles  the many-row GGUF linears on the shared-memory tiles (TANDEM_GGUF_TILES, the default,
#           cuda_block_tiles.cu) beside the decoded bf16 copy (the default), issue 42 item 5:
#           bench/cuda_gguf_bench (PACK_BENCHES=cuda_gguf_bench) at the 8B layer shapes,
#           GGUF_TILE_TYPES (default q4_k,q6_k,q8_0) at GGUF_TILE_ROWS (default
#           16,64,128,256), "copy" and "tiles" in one run with the tiles' max relative
#           difference from the copy; test_backend_cuda's CudaBlock* tests (their
#           SharedMemoryTiles... test sets the switch itself: the test binary reads no
#           environment); then the 8B Q4_K_M file (random-model --gguf) at 64 rows offline,
#           TANDEM_GGUF_TILES=0 and =1                                                 ~3 min
#           The switch becomes the default when the tiles take fewer us a layer than the
#           copy at 16, 64 and 128 rows for each type (the copy on an H100, bench/RESULTS.md:
#           at 64 rows 394 us a layer for q4_k, 430 q6_k, 407 q8_0; 393-444 at 16-128 rows;
#           one read of the q4_k weights is ~37 us at 3.35 TB/s), their diff <= 1e-4 (f32
#           outputs, both from the same bf16 weights: only the order of the f32 sums
#           differs; more is a bug), the tests pass and 64-row offline tok/s is higher
#           with =1 (its prompt steps, over 256 rows, keep the copy either way). At 256 rows (weights decoded
#           four times) the copy may stay ahead: then kBlockTilesMaxRows (cuda_block_tiles.h,
#           256; prefill-sized steps always keep the copy) drops to 128.
#    gguf-moe GGUF MoE experts on the shared-memory tiles (the default; cuda_moe_block_tiles.cu,
#           issue 42; the wmma kernels the fallback, TANDEM_GGUF_MOE_TILES=0):
#           test_backend_cuda's CudaBlock* tests (CudaBlockMoe.SharedMemoryTiles... against the
#           CPU twin and the wmma kernels, and the dense tiles, whose pieces it shares);
#           bench/cuda_gguf_bench moe (PACK_BENCHES=cuda_gguf_bench) on one Qwen3-30B-A3B
#           layer's experts, GGUF_MOE_TYPES (default q4_k,q6_k,q8_0) at GGUF_MOE_ROWS tokens
#           (default 1,8,64,256), "wmma" and "tiles" with the tiles' max relative difference;
#           then a Qwen3-30B-A3B-shaped Q4_K_M file (8 layers, random-model --gguf, written
#           while the tests run) decode-b1 and 64 rows offline (GGUF_MOE_OFFLINE=0: the
#           kernels and tests only)                                                   ~3 min
#    gguf-b1 the 8B shape in Q4_K_M (random-model --gguf, written while the tests run):
#           decode-b1 and 64 rows offline (offline_bench), tandem only
#    gguf-cpu scripts/gpu_gguf.sh cpu: the CPU figures on this quiet machine (two pinned
#           cores) against llama.cpp built in the call (~8 min with the build)
#    logitsonly  test_golden's CudaGateLogitsOnly (the Gemma 4 variants' bf16 gate)
#    bisect GPU against CPU logits per position on config variants of the Gemma 4 fixtures
#           whose GPU logits drift (which option of theirs the GPU gets wrong)
#    draft  trains the draft of models/tiny-kjv (tools/tiny-model/train_draft.sh, 120 s) from
#           .device/corpus.tar.xz, beside the tests; it comes back as $OUT/tiny-kjv-draft.tgz
#    tests  test_golden's model gates on the GPU (bf16, FP8) and the embedding gates  ~2 min
#    diag   a. greedy ids of the llama fixture with no speculation, n-gram, a draft
#              (qwen2's fixture, and itself), with and without CUDA graphs; at the first
#              id that differs, the top-2 logit gap there (teacher-forced, on the GPU)
#           b. GPU against CPU logits per position on three Gemma 4 fixtures         ~1 min
#    spec   on random 8B- and 1B-shaped llamas (bf16): decode-b1 without speculation, with
#           n-gram, with the 1B draft; the cost of a step of 1..9 query tokens of one row
#           (a prompt chunked by --max-batched-tokens N: the verify step of K = N - 1);
#           FP8 decode-b1 off / n-gram; offline 128/128 at 64 and 256 rows off / on  ~4 min
#           (n-gram's "steps read early": a few dozen at 64 and 256 rows, not one a step;
#           its tok/s within noise of off's)
#    spec-load  the spec part's 64- and 256-row runs off / n-gram, medians of three (never
#           below off, issue 44 item 4); SPEC_LOAD_ROUNDS=N alternates them N times,
#           SPEC_LOAD_ROWS picks the row counts (default "64 256")                   ~3 min a round
#    tp-multi  several GPUs of one host (a multi-GPU kind): the NCCL golden tests (TP=N
#           against one GPU), then the 8B shape's decode-b1 and 64 rows at TP = 1, 2, 4, 8 as
#           the GPUs allow (--tensor-parallel-size); skips on one GPU                ~3 min
#    figures  issue 45's set on the 8B shape (bf16 from random-model, FP8 by --quantization
#           fp8): the card's HBM copy bandwidth and rooflines (bench/hbm_copy.py), decode-b1
#           and offline 128/128 at 256 rows in bf16 and FP8, offline 2048/2048 in FP8 with the
#           fp8 KV cache, the sweep at 256 (tandem serve + tandem bench) in bf16 and FP8; each
#           run's engine start-up (every decode graph recorded in it)                ~7 min
#    embed  /v1/embeddings on the 8B shape, 512-token inputs, against the engine's
#           prompt throughput                                                         ~1.5 min
#    Each step starts only while the budget (BUDGET seconds, default 540) allows it. Logs
#    come back as $OUT/wave-logs.tgz.
set -u

pack() {
  local root build=${BUILD:-build}
  root=$(git rev-parse --show-toplevel) && cd "$root" || return 1
  # PACK_TESTS=0: no test binaries; a list ("test_backend_cuda"): those
  local tests=(test_golden test_backend_cuda); [ "${PACK_TESTS:-1}" = 0 ] && tests=()
  [[ "${PACK_TESTS:-1}" == test_* ]] && read -ra tests <<< "$PACK_TESTS"
  [ "${PACK_BUILD:-1}" = 0 ] ||  # PACK_BUILD=0: bundle the binaries as they are
    nice -n 10 ninja -C "$build" -j2 tandem offline_bench "${tests[@]}" ${PACK_BENCHES:-} || return 1
  local stage=/tmp/tandem-wave-stage
  rm -rf "$stage" && mkdir -p "$stage/wave/gpu/tests" "$stage/wave/gpu/bench" "$stage/wave/gpu/lib" .device
  cp "$build/tandem" "$stage/wave/gpu/"
  for t in "${tests[@]}"; do cp "$build/tests/$t" "$stage/wave/gpu/tests/"; done
  cp "$build/bench/offline_bench" "$stage/wave/gpu/bench/"
  for b in ${PACK_BENCHES:-}; do cp "$build/bench/$b" "$stage/wave/gpu/bench/"; done  # e.g. cuda_gguf_bench
  strip "$stage"/wave/gpu/tandem "$stage"/wave/gpu/bench/* ${tests[@]:+"$stage"/wave/gpu/tests/*}
  # libnccl (~218 MB) stays out: the device has its own (PyTorch's; LD_LIBRARY_PATH below).
  local skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libcuda\.so|libcublas|libcudart|libnvrtc|libnvJitLink|libnccl)'
  for b in "$stage"/wave/gpu/tandem "$stage"/wave/gpu/bench/* ${tests[@]:+"$stage"/wave/gpu/tests/*}; do
    ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
      [[ $name =~ $skip ]] || cp -uL "$path" "$stage/wave/gpu/lib/$name"
    done
  done
  cp scripts/gpu_wave.sh "$stage/wave/"
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +dirty), data at $root" > "$stage/wave/COMMIT"
  # One xz stream with a 64 MB dictionary: the binaries share most of their bytes (-9 -T1
  # packs them ~30% smaller than -6 -T2).
  tar cf - -C "$stage" wave | xz -9 -T1 > .device/wave.tar.xz || return 1
  echo "packed .device/wave.tar.xz ($(du -h .device/wave.tar.xz | cut -f1)): $(cat "$stage/wave/COMMIT")"
}

if [ "${1:-}" = pack ]; then
  pack
  exit $?
fi

here=$(cd "$(dirname "$0")" && pwd)
G=$here/gpu OUT=${OUT:-/tmp/tandem-wave} L=/tmp/tandem-wave-logs BUDGET=${BUDGET:-540}
M8=/tmp/llama8b M1=/tmp/llama1b
parts=${*:-draft tests diag spec embed}
rm -rf "$L" && mkdir -p "$L" "$OUT"
GW=${GGUF_W:-$PWD/build-dev/gguf}  # gguf / prep: a folder the next call on this machine keeps
prep=
finish() {
  [ -z "$prep" ] || { wait "$prep"; echo "prep (for the next call): $(tail -4 "$L/prep.log" | tr '\n' ' ')"; }
  tar czf "$OUT/wave-logs.tgz" -C "$L" .
}
trap finish EXIT
# Binaries built with NCCL load libnccl.so.2: the device's is PyTorch's (not in the bundle).
nccl_lib=$(python3 -c 'import nvidia.nccl,os;print(os.path.dirname(nvidia.nccl.__file__))' 2> /dev/null)
export LD_LIBRARY_PATH=$G/lib:${nccl_lib:+$nccl_lib/lib:}/usr/local/cuda/lib64
card=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2> /dev/null | head -1)
echo "card: ${card:-unknown}; commit $(cat "$here/COMMIT"); NCCL from ${nccl_lib:-nowhere}/lib"
has() { [[ " $parts " == *" $1 "* ]]; }
fits() { (( SECONDS + $1 <= BUDGET )) || { echo "skipped (budget): $2"; return 1; }; }
# The tests find their data at the path they were built with.
data_root=$(sed -n 's/.*data at //p' "$here/COMMIT")
[ -e "$data_root/tests/data" ] || { mkdir -p "$(dirname "$data_root")" && ln -sfn "$PWD" "$data_root"; }

# The random models are written (CPU and disk) while the tests hold the GPU.
if has prep; then  # llama.cpp's build and the GGUF files of the next call's gguf part
  mkdir -p "$GW" && G=$G W=$GW OUT=$L/prep BUDGET=100000 nice -n 10 scripts/gpu_gguf.sh prep > "$L/prep.log" 2>&1 &
  prep=$!
fi
writer=
Q8=/tmp/llama8b-Q4_K_M.gguf gguf_writer=
if has gguf-b1 || has gguf-tiles; then
  "$G/tandem" random-model --like llama-3.1-8b --gguf Q4_K_M --out "$Q8" > "$L/random-gguf.log" 2>&1 &
  gguf_writer=$!
fi
MX=/tmp/mixtral-4l QM=/tmp/qwen3moe-8l moe_writer=
QMG=/tmp/qwen3moe-8l-Q4_K_M.gguf gguf_moe_writer=
if has moe-fp8 || has gguf-moe; then  # the real shapes, layers cut so that one run takes ~20 s
  cat > "$L/mixtral.json" <<'JSON'
{"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
 "intermediate_size": 14336, "num_hidden_layers": 4, "num_attention_heads": 32,
 "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 8, "num_experts_per_tok": 2,
 "vocab_size": 32000, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
 "rms_norm_eps": 1e-05, "hidden_act": "silu", "tie_word_embeddings": false,
 "bos_token_id": 1, "eos_token_id": 2}
JSON
  cat > "$L/qwen3moe.json" <<'JSON'
{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
 "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 8,
 "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
 "num_experts_per_tok": 8, "norm_topk_prob": true, "decoder_sparse_step": 1,
 "mlp_only_layers": [], "vocab_size": 151936, "max_position_embeddings": 40960,
 "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "hidden_act": "silu",
 "tie_word_embeddings": false, "bos_token_id": 151643, "eos_token_id": 151645}
JSON
fi
if has gguf-moe; then
  "$G/tandem" random-model --config "$L/qwen3moe.json" --gguf Q4_K_M --out "$QMG" > "$L/random-gguf-moe.log" 2>&1 &
  gguf_moe_writer=$!
fi
if has moe-fp8; then
  moe_models=" ${MOE_MODELS-mixtral qwen3moe} "
  ( { [[ "$moe_models" != *" mixtral "* ]] || "$G/tandem" random-model --config "$L/mixtral.json" --out "$MX"; } && \
    { [[ "$moe_models" != *" qwen3moe "* ]] || "$G/tandem" random-model --config "$L/qwen3moe.json" --out "$QM"; } ) \
    > "$L/random-moe.log" 2>&1 &
  moe_writer=$!
fi
tp_timings=${TP_TIMINGS:-1}  # TP_TIMINGS=0: the tp part's tests only
if has spec || has spec-load || has tp-multi || has embed || has figures || { has tp && [ "$tp_timings" = 1 ]; }; then  # tp alone: the 1B shape only
  big=1; has spec || has spec-load || has embed || has figures || big=0
  # A model a call before this one wrote on the same warm machine is kept.
  ( { [ "$big" = 0 ] || [ -f "$M8/config.json" ] || "$G/tandem" random-model --like llama-3.1-8b --out "$M8"; } && \
    { [ -f "$M1/config.json" ] || "$G/tandem" random-model --like llama-3.2-1b --out "$M1"; } ) \
    > "$L/random-model.log" 2>&1 &
  writer=$!
fi
long_writer=  # attn-long with ATTN_TTFT=1 and no other part writing models: the 8B shape
if has attn-long && [ "${ATTN_TTFT:-0}" = 1 ] && [ -z "$writer" ]; then
  "$G/tandem" random-model --like llama-3.1-8b --out "$M8" > "$L/random-8b-long.log" 2>&1 &
  long_writer=$!
fi

if has tp && [ "${TP_TESTS:-1}" = 1 ]; then  # the NCCL checks need only the fixtures
  timeout 120 "$G/tests/test_backend_cuda" --gtest_filter='Nccl*:CudaVocabSlice*' > "$L/tp-unit.log" 2>&1
  echo "tp test_backend_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$L/tp-unit.log" | tr '\n' ' ')"
  timeout 240 "$G/tests/test_golden" --gtest_filter='*TensorParallelNccl*:*TensorParallelAsync*' > "$L/tp-golden.log" 2>&1
  echo "tp test_golden rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$L/tp-golden.log" | tr '\n' ' ')"
  grep -hE '^\[  (FAILED|SKIPPED) |Failure|Expected|Which is|error' "$L/tp-unit.log" "$L/tp-golden.log" | head -20
fi

trainer=
if has draft; then
  ( mkdir -p /tmp/corpus && tar xJf .device/corpus.tar.xz -C /tmp/corpus && \
    TRAIN_SECONDS=120 timeout 330 bash tools/tiny-model/train_draft.sh /tmp/corpus/corpus /tmp/tiny-kjv-draft && \
    tar czf "$OUT/tiny-kjv-draft.tgz" -C /tmp tiny-kjv-draft ) > "$L/draft.log" 2>&1 &
  trainer=$!
fi

if has tests; then
  timeout 200 "$G/tests/test_golden" --gtest_filter='*CudaGate*:*CudaFp8Gate*:*EmbeddingOracle*' \
    > "$L/golden.log" 2>&1
  echo "test_golden rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/golden.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$L/golden.log" | head -20
fi

if has attn-long; then
  timeout 240 "$G/tests/test_backend_cuda" --gtest_filter='CudaAttentionSm90*' > "$L/long-tests.log" 2>&1
  rc=$?
  echo "attn-long CudaAttentionSm90* rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$L/long-tests.log" | tr '\n' ' ')"
  grep -B1 -A7 'Failure$' "$L/long-tests.log" | head -40
  if [ "$rc" = 124 ]; then
    echo "attn-long: the sm90 tests HUNG: no timings"
  elif [ ! -x "$G/bench/cuda_attention_bench" ]; then
    echo "attn-long: no cuda_attention_bench in the bundle (pack with PACK_BENCHES=cuda_attention_bench)"
  else
    for round in $(seq 1 "${ATTN_LONG_ROUNDS:-2}"); do
      timeout 150 "$G/bench/cuda_attention_bench" 20 prefill-long-sm90 > "$L/long-bench-$round.log" 2>&1
      echo "attn-long round $round rc=$?:"
      grep -E '^prefill|SMs' "$L/long-bench-$round.log"
    done
    timeout 150 python3 bench/sdpa_cudnn_bench.py 2>&1 | tee "$L/long-sdpa.log"
  fi
  if [ "${ATTN_TTFT:-0}" = 1 ] && [ "$rc" != 124 ]; then
    if [ -z "$long_writer" ]; then
      echo "attn-long TTFT skipped: another part writes the models (run attn-long alone)"
    elif wait "$long_writer"; then
      for n in 32768 100000; do
        fits 60 "TTFT $n" || break
        timeout 120 "$G/bench/offline_bench" "$M8" --num 1 --batch 1 \
          --input "$n" --output 1 > "$L/long-ttft-$n.log" 2>&1
        echo "TTFT $n-token prompt: $(grep -E 'output tokens in' "$L/long-ttft-$n.log" | sed 's/^ *//' | tail -1)"
      done
    else
      echo "attn-long: random-model failed: $(tail -3 "$L/random-8b-long.log")"
    fi
  fi
fi

if has diag; then
  python3 - "$G/tandem" "$L" <<'PY'
import json, os, subprocess, sys
import numpy as np
tandem, logs = sys.argv[1], sys.argv[2]
ids = "5,17,99,230,41,7,300,12,66,140,3,250"
def gen(model, spec=None, env=None):
    cmd = [tandem, "generate", "--model", model, "--device", "cuda", "--ids", ids, "--max-tokens", "96",
           "--ignore-eos", "--json"]
    if spec: cmd += ["--speculative-config", json.dumps(spec)]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if r.returncode: return None, r.stderr.strip()[-300:]
    return json.loads(r.stdout.strip().splitlines()[-1])["ids"], r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
def logits(model, seq, device):
    out = os.path.join(logs, "l.npy")
    subprocess.run([tandem, "logits", "--model", model, "--device", device, "--ids", ",".join(map(str, seq)),
                    "--out", out], check=True, capture_output=True)
    return np.load(out)
T, D = "tests/data/oracle/llama", "tests/data/oracle/qwen2"
prompt = [int(x) for x in ids.split(",")]
base, _ = gen(T)
cases = [("ngram", {"method": "ngram", "num_speculative_tokens": 4}, None),
         ("draft qwen2", {"model": D, "num_speculative_tokens": 4}, None),
         ("draft self", {"model": T, "num_speculative_tokens": 4}, None),
         ("draft qwen2, no graphs", {"model": D, "num_speculative_tokens": 4}, {"TANDEM_CUDA_GRAPHS": "0"}),
         ("none, no graphs", None, {"TANDEM_CUDA_GRAPHS": "0"})]
for name, spec, env in cases:
    got, note = gen(T, spec, env)
    if got is None: print(f"spec diag {name}: FAILED {note}"); continue
    i = next((k for k in range(min(len(got), len(base))) if got[k] != base[k]), None)
    if i is None: print(f"spec diag {name}: ids equal ({len(got)}) | {note}"); continue
    row = logits(T, prompt + base[:i], "cuda")[-1]
    top = np.sort(row)[::-1]
    print(f"spec diag {name}: first differs at {i}: {base[i]} vs {got[i]}; GPU logits there: top-2 gap "
          f"{top[0]-top[1]:.4g}, gap to the speculative pick {row[base[i]]-row[got[i]]:.4g} | {note}")
seq = [(7 * k + 3) % 500 + 3 for k in range(70)]
for arch in ["gemma4", "gemma4_kvshare", "gemma4_moe_nople", "gemma4_moe"]:
    m = f"tests/data/oracle/{arch}"
    g, c = logits(m, seq, "cuda"), logits(m, seq, "cpu")
    err = np.abs(g - c).max(axis=1) / (np.abs(c).max(axis=1) + 1e-9)
    print(f"logits diag {arch}: max rel err per position (0..69, every 5th): " +
          " ".join(f"{e:.3f}" for e in err[::5]) + f"; argmax agree {np.mean(g.argmax(1) == c.argmax(1)):.2f}")
PY
fi

if [ -n "$trainer" ]; then  # the figures below want the GPU alone
  wait "$trainer"; echo "draft training rc=$? at ${SECONDS}s: $(grep -E '^draft:' "$L/draft.log")"
fi
if has bisect; then
  python3 - "$G/tandem" "$L" <<'PY'
import copy, json, os, shutil, subprocess, sys
import numpy as np
tandem, logs = sys.argv[1], sys.argv[2]
seq = ",".join(str((7 * k + 3) % 500 + 3) for k in range(70))
def logits(model, device):
    out = os.path.join(logs, "b.npy")
    r = subprocess.run([tandem, "logits", "--model", model, "--device", device, "--ids", seq, "--out", out],
                       capture_output=True, text=True)
    if r.returncode: raise RuntimeError(r.stderr.strip()[-300:])
    return np.load(out)
def variant(arch, name, edit):
    src, dst = f"tests/data/oracle/{arch}", f"/tmp/bisect/{arch}-{name}"
    shutil.rmtree(dst, ignore_errors=True); os.makedirs(dst)
    for f in os.listdir(src):
        if f != "config.json": os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(dst, f))
    c = json.load(open(os.path.join(src, "config.json"))); edit(c)
    json.dump(c, open(os.path.join(dst, "config.json"), "w"))
    try:
        g, cpu = logits(dst, "cuda"), logits(dst, "cpu")
    except Exception as e:
        print(f"bisect {arch} {name}: FAILED {e}"); return
    err = np.abs(g - cpu).max(axis=1) / (np.abs(cpu).max(axis=1) + 1e-9)
    print(f"bisect {arch:17s} {name:22s} max rel err {err.max():.3f} (positions 0-9 {err[:10].max():.3f}, "
          f"10-29 {err[10:30].max():.3f}, 30-69 {err[30:].max():.3f}); argmax agree {np.mean(g.argmax(1) == cpu.argmax(1)):.2f}")
def rp(**kw):
    def edit(c):
        for k, v in kw.items(): c[k] = v
    return edit
def full_rope(r):
    def edit(c): c["rope_parameters"]["full_attention"] = r
    return edit
nople_full = {"partial_rotary_factor": 0.5, "rope_theta": 1000000.0, "rope_type": "proportional"}
for arch, extra in [("gemma4_moe_nople", []), ("gemma4_kvshare", [])]:
    variant(arch, "as-is", rp())
    variant(arch, "window-4096", rp(sliding_window=4096))
    variant(arch, "full-rope-default", full_rope({"rope_type": "default", "rope_theta": 1000000.0}))
    variant(arch, "full-rope-nofactor", full_rope(nople_full if arch.endswith("nople") else
        {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"}))
    variant(arch, "full-rope-partial1", full_rope({"partial_rotary_factor": 1.0, "rope_theta": 1000000.0, "rope_type": "proportional"}))
    variant(arch, "no-softcap", rp(final_logit_softcapping=None))
variant("gemma4_moe_nople", "all-sliding", rp(layer_types=["sliding_attention"] * 5))
variant("gemma4_moe_nople", "all-full", rp(layer_types=["full_attention"] * 5))
variant("gemma4_moe_nople", "full-last", rp(layer_types=["sliding_attention"] * 4 + ["full_attention"]))
variant("gemma4", "as-is", rp())
variant("gemma4", "window-4096", rp(sliding_window=4096))
PY
fi

if has verify && [ "${VERIFY_TESTS:-1}" = 1 ]; then
  timeout 150 "$G/tests/test_backend_cuda" --gtest_filter='CudaAttention.*' > "$L/verify-attn.log" 2>&1
  echo "test_backend_cuda CudaAttention.* rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/verify-attn.log" | tr '\n' ' ')"
  timeout 120 "$G/tests/test_golden" --gtest_filter='TinyModel*' > "$L/verify-golden.log" 2>&1
  echo "test_golden TinyModel* rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/verify-golden.log" | tr '\n' ' ')"
  grep -E '^\[ tiny-kjv|FAILED|Failure|Expected|Which is|actual' "$L/verify-golden.log" | head -20
fi
if has verify; then  # VERIFY_VG= (empty): no spec_pair
  for vg in ${VERIFY_VG-1 0}; do  # verify graphs on, then (budget permitting) off as before
    fits 150 "verify: spec_pair TANDEM_VERIFY_GRAPHS=$vg" || continue
    echo "spec_pair, TANDEM_VERIFY_GRAPHS=$vg:"
    TANDEM_VERIFY_GRAPHS=$vg REPS=1 N=${PAIR_N:-128} timeout 200 bench/spec_pair.sh "$G/tandem" cuda 1 2>&1 |
      tee "$L/verify-pair-$vg.log" | tail -${PAIR_TAIL:-22}
  done
fi

if has hfbf16; then
  timeout 120 python3 bench/hf_bf16_oracle_kl.py --write /tmp/hfb tests/data/oracle gemma4 \
    gemma4_kvshare gemma4_moe_nople > "$L/hf-bf16.log" 2>&1
  echo "hf_bf16_oracle_kl rc=$?"; grep -vE '^\s*$' "$L/hf-bf16.log" | tail -8
  tar czf "$OUT/hf-bf16.tgz" -C /tmp/hfb . 2> /dev/null
  timeout 120 python3 - <<'PY'
import torch, transformers
seq = torch.tensor([[(7 * k + 3) % 500 + 3 for k in range(70)]], device="cuda")
for arch in ["gemma4", "gemma4_kvshare", "gemma4_moe_nople"]:
    d = f"tests/data/oracle/{arch}"
    out = {}
    for dt in (torch.float32, torch.bfloat16):
        m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=dt, attn_implementation="eager").to("cuda").eval()
        with torch.no_grad(): out[dt] = m(seq).logits[0].float()
    f, b = out[torch.float32], out[torch.bfloat16]
    err = (b - f).abs().amax(-1) / f.abs().amax(-1)
    print(f"hf bf16 {arch}: max rel err per position (every 5th): " + " ".join(f"{e:.3f}" for e in err[::5].tolist())
          + f"; argmax agree {(b.argmax(-1) == f.argmax(-1)).float().mean():.2f}")
PY
fi

if has vision && fits 250 "vision"; then
  T=$G/tandem OUT=$L/vision timeout 330 scripts/gpu_vision.sh 2>&1 | tee "$L/vision.log" | \
    grep -vE '^(loading|wrote)' | tail -40
fi

if has logitsonly; then
  timeout 60 "$G/tests/test_golden" --gtest_filter='*CudaGateLogitsOnly*' > "$L/logitsonly.log" 2>&1
  echo "CudaGateLogitsOnly rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/logitsonly.log" | tr '\n' ' ')"
fi

if has gguf; then
  [ -z "$prep" ] || { wait "$prep"; echo "prep: $(tail -3 "$L/prep.log" | tr '\n' ' ')"; prep=; }
  G=$G W=$GW OUT=$L/gguf BUDGET=$((BUDGET - SECONDS - 10)) timeout $((BUDGET - SECONDS)) \
    scripts/gpu_gguf.sh "${GGUF_PART:-8b}" 2>&1 | \
    tee "$L/gguf.log" | tail -40
fi

if has gguf-kern; then
  [ -x "$G/bench/cuda_gguf_bench" ] && timeout 300 "$G/bench/cuda_gguf_bench" "${GGUF_TYPES:-q4_k,q6_k,q5_k}" \
    "${GGUF_ROWS:-1,2,4,8,64}" 2>&1 | tee "$L/gguf-kern.log"
  timeout 120 "$G/tests/test_backend_cuda" --gtest_filter='CudaBlock*' > "$L/gguf-kern-tests.log" 2>&1
  echo "CudaBlock tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/gguf-kern-tests.log" | tr '\n' ' ')"
fi

gguf_ok=  # the writer's status, waited for once (two parts may wait on it)
gguf_ready() { [ -n "$gguf_ok" ] || { wait "$gguf_writer"; gguf_ok=$?; }; [ "$gguf_ok" = 0 ]; }
if has gguf-tiles; then
  [ -x "$G/bench/cuda_gguf_bench" ] && timeout 300 "$G/bench/cuda_gguf_bench" \
    "${GGUF_TILE_TYPES:-q4_k,q6_k,q8_0}" "${GGUF_TILE_ROWS:-16,64,128,256}" 2>&1 | tee "$L/gguf-tiles.log"
  timeout 240 "$G/tests/test_backend_cuda" --gtest_filter='CudaBlock*' > "$L/gguf-tiles-tests.log" 2>&1
  echo "CudaBlock tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/gguf-tiles-tests.log" | tr '\n' ' ')"
  if gguf_ready; then
    for tiles in 0 1; do
      TANDEM_GGUF_TILES=$tiles timeout 120 "$G/bench/offline_bench" "$Q8" --num 64 --batch 64 \
        --input 128 --output 256 > "$L/gguf-tiles-64-$tiles.log" 2>&1
      echo "gguf 8B Q4_K_M 64 rows TANDEM_GGUF_TILES=$tiles: $(grep -oE '[0-9.]+ output tok/s.*' "$L/gguf-tiles-64-$tiles.log" | tail -1)"
    done
  fi
fi

# gguf_offline LABEL FILE LOG LEASH "NAME:ARGS"...: offline_bench on a GGUF file, a line a run.
gguf_offline() {
  local label=$1 file=$2 prefix=$3 leash=$4 run log a; shift 4
  for run in "$@"; do
    read -ra a <<< "${run#*:}"
    log="$L/$prefix-${run%%:*}.log" && log=${log// /-}
    timeout "$leash" "$G/bench/offline_bench" "$file" "${a[@]}" > "$log" 2>&1
    echo "$label ${run%%:*}: $(grep -oE '[0-9.]+ output tok/s.*' "$log" | tail -1); $(grep -oE 'decode-only steps:.*' "$log" | tail -1)"
  done
}

if has gguf-moe; then
  timeout 240 "$G/tests/test_backend_cuda" --gtest_filter='CudaBlock*' > "$L/gguf-moe-tests.log" 2>&1
  echo "gguf-moe CudaBlock tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/gguf-moe-tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|rel_err' "$L/gguf-moe-tests.log" | head -20
  [ -x "$G/bench/cuda_gguf_bench" ] && timeout 240 "$G/bench/cuda_gguf_bench" moe \
    "${GGUF_MOE_TYPES:-q4_k,q6_k,q8_0}" "${GGUF_MOE_ROWS:-1,8,64,256}" 2>&1 | tee "$L/gguf-moe-kernels.log"
  if [ "${GGUF_MOE_OFFLINE:-1}" = 0 ]; then  # the kernels and tests only
    kill "$gguf_moe_writer" 2> /dev/null
  elif wait "$gguf_moe_writer"; then
    gguf_offline "gguf qwen3moe-8l Q4_K_M" "$QMG" gguf-moe 150 \
      "b1:--num 1 --batch 1 --input 128 --output 256 --repeat 2" \
      "64 rows:--num 128 --batch 64 --input 128 --output 128"
  else
    echo "random GGUF MoE model failed: $(tail -3 "$L/random-gguf-moe.log")"
  fi
fi

if has gguf-b1 && gguf_ready; then
  gguf_offline "gguf 8B Q4_K_M" "$Q8" gguf-b1 120 \
    "b1:--num 1 --batch 1 --input 128 --output 256 --repeat 2" \
    "64 rows:--num 64 --batch 64 --input 128 --output 256"
fi

if has gguf-cpu; then
  G=$G OUT=$L/gguf-cpu BUDGET=$((BUDGET - SECONDS - 10)) timeout $((BUDGET - SECONDS)) \
    scripts/gpu_gguf.sh cpu 2>&1 | tee "$L/gguf-cpu.log" | tail -40
fi

if has pair; then
  REPS=1 timeout 200 bench/spec_pair.sh "$G/tandem" cuda 1 2>&1 | tee "$L/spec-pair.log" | tail -22
fi

has spec || has spec-load || has tp-multi || has moe-fp8 || has embed || has figures || { has tp && [ "$tp_timings" = 1 ]; } || exit 0
[ -z "$writer" ] || wait "$writer" || { echo "random-model failed: $(tail -3 "$L/random-model.log")"; exit 1; }
echo "models written at ${SECONDS}s"

# ob NAME NEED -- offline_bench args: runs on M8 unless the args name another model first.
ob() {
  local name=$1 need=$2 model=$M8; shift 3
  [ "${1:-}" = --model ] && { model=$2; shift 2; }
  fits "$need" "$name" || return 1
  timeout $((need + 40)) "$G/bench/offline_bench" "$model" "$@" > "$L/$name.log" 2>&1
  local rate steps
  rate=$(grep -oE '[0-9]+ output tok/s \(median' "$L/$name.log" | cut -d' ' -f1)
  steps=$(grep -oE 'decode-only steps: [0-9]+ in [0-9.]+ s \([0-9.]+ ms each' "$L/$name.log" | tail -1)
  echo "$name: ${rate:-FAILED} output tok/s; ${steps:-} $(grep '^speculative' "$L/$name.log" | tail -1)"
}
ngram='{"method": "ngram", "num_speculative_tokens": 4}'
draft="{\"model\": \"$M1\", \"num_speculative_tokens\": 4}"
b1=(--num 1 --batch 1 --input 128 --output 256 --repeat 2)

if has figures; then
  timeout 60 python3 bench/hbm_copy.py 2>&1 | tee "$L/hbm.log"
  for q in bf16 fp8; do
    qa=(); [ "$q" = fp8 ] && qa=(--quantization fp8)
    ob "decode-b1-$q" 40 -- --num 1 --batch 1 --input 128 --output 256 --repeat 3 "${qa[@]}"
    ob "offline-128-$q" 60 -- --num 1024 --batch 256 --input 128 --output 128 "${qa[@]}"
  done
  ob offline-2048-fp8-fp8kv 150 -- --num 256 --batch 256 --input 2048 --output 2048 \
    --quantization fp8 --kv-cache-dtype fp8
  grep -H 'engine ready' "$L"/decode-b1-*.log "$L"/offline-*.log | sed "s|$L/||"
  for q in bf16 fp8; do
    fits 100 "sweep-256 $q" || break
    qa=(); [ "$q" = fp8 ] && qa=(--quantization fp8)
    t0=$SECONDS
    "$G/tandem" serve --model "$M8" --port 8321 --batch 256 --max-batched-tokens 8192 "${qa[@]}" \
      > "$L/serve-$q.log" 2>&1 &
    server=$!
    for i in $(seq 120); do curl -sf localhost:8321/health > /dev/null && break; sleep 0.5; done
    echo "sweep-256 $q: server ready after $((SECONDS - t0)) s (load, KV, graphs)"
    timeout 120 "$G/tandem" bench --url http://127.0.0.1:8321 --concurrency 256 --num-requests 1024 \
      --input-len 128 --output-len 256 2> "$L/bench-$q.err" | tail -3
    kill "$server"; wait "$server"
  done
fi

if has spec; then
  ob decode-b1-bf16-off 30 -- "${b1[@]}"
  ob decode-b1-bf16-ngram 30 -- "${b1[@]}" --speculative-config "$ngram"
  ob decode-b1-bf16-draft 40 -- "${b1[@]}" --speculative-config "$draft"
  ob decode-b1-draft-model 15 -- --model "$M1" "${b1[@]}"
  for n in 1 2 3 4 5 6 7 8 9; do
    fits 20 "step cost $n" || break
    timeout 60 "$G/bench/offline_bench" "$M8" --num 1 --batch 1 --input 510 --output 2 \
      --max-batched-tokens "$n" > "$L/step-$n.log" 2>&1
    echo "step of $n query tokens (one row, ~256 context): $(grep -oE 'steps with prompt tokens: [0-9]+ in [0-9.]+ s' \
      "$L/step-$n.log" | tail -1 | awk '{printf "%.3f ms", 1000 * $7 / $5}')"
  done
  ob decode-b1-fp8-off 40 -- "${b1[@]}" --quantization fp8
  ob decode-b1-fp8-ngram 40 -- "${b1[@]}" --quantization fp8 --speculative-config "$ngram"
  for rows in 64 256; do
    ob "offline-$rows-off" 45 -- --num $((rows * 2)) --batch "$rows" --input 128 --output 128
    ob "offline-$rows-ngram" 45 -- --num $((rows * 2)) --batch "$rows" --input 128 --output 128 \
      --speculative-config "$ngram"
  done
fi

if has spec-load; then  # the spec part's loaded runs alone (issue 44 item 4), medians of 3
  rounds=${SPEC_LOAD_ROUNDS:-1}  # rounds > 1: off and n-gram alternate, -rN names each round
  for r in $(seq "$rounds"); do
    sfx=; (( rounds > 1 )) && sfx=-r$r
    for rows in ${SPEC_LOAD_ROWS:-64 256}; do
      ob "offline-$rows-off$sfx" 50 -- --num $((rows * 2)) --batch "$rows" --input 128 --output 128 \
        --repeat 3
      ob "offline-$rows-ngram$sfx" 50 -- --num $((rows * 2)) --batch "$rows" --input 128 --output 128 \
        --repeat 3 --speculative-config "$ngram"
    done
  done
fi

if has tp && [ "$tp_timings" = 1 ]; then  # the seam's cost: the same runs, single worker then NCCL executor at N = 1
  # (and both without step overlap: how much of the gap is the overlap, which the
  # tensor-parallel executor has since it went asynchronous, how much the collectives)
  # On the 1B shape (llama-3.2-1b, bf16): the seam's fixed cost weighs more there than at 8B.
  o64=(--num 128 --batch 64 --input 128 --output 128)
  # TP_NOOVERLAP=1 adds the runs without step overlap (where the gap comes from).
  ob tp-decode-b1-single 20 -- --model "$M1" "${b1[@]}"
  TANDEM_TP_EXECUTOR=1 ob tp-decode-b1-nccl1 20 -- --model "$M1" "${b1[@]}"
  if [ "${TP_NOOVERLAP:-0}" = 1 ]; then
    TANDEM_OVERLAP=0 ob tp-decode-b1-single-nooverlap 20 -- --model "$M1" "${b1[@]}"
    TANDEM_TP_EXECUTOR=1 TANDEM_OVERLAP=0 ob tp-decode-b1-nccl1-nooverlap 20 -- --model "$M1" "${b1[@]}"
  fi
  ob tp-offline-64-single 25 -- --model "$M1" "${o64[@]}" --repeat 3
  TANDEM_TP_EXECUTOR=1 ob tp-offline-64-nccl1 25 -- --model "$M1" "${o64[@]}" --repeat 3
  [ "${TP_NOOVERLAP:-0}" = 1 ] && TANDEM_OVERLAP=0 ob tp-offline-64-single-nooverlap 25 -- --model "$M1" "${o64[@]}"
  grep -hE 'tensor-parallel executor|NCCL|error' "$L"/tp-*-nccl1.log | head -5
fi

if has tp-multi; then  # several GPUs of one host (issue 47's plan, bench/RESULTS.md)
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
  if [ "$gpus" -lt 2 ]; then echo "tp-multi: $gpus GPU(s), skipped"; else
    timeout 180 "$G/tests/test_golden" --gtest_filter='*TensorParallelNccl*' > "$L/tp-multi-golden.log" 2>&1
    echo "TensorParallelNccl on $gpus GPUs rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/tp-multi-golden.log" | tr '\n' ' ')"
    for n in 1 2 4 8; do
      [ "$n" -le "$gpus" ] || break
      ob "tpm-decode-b1-tp$n" 40 -- "${b1[@]}" --tensor-parallel-size "$n"
      ob "tpm-offline-64-tp$n" 45 -- --num 128 --batch 64 --input 128 --output 128 --tensor-parallel-size "$n"
    done
  fi
fi

if has moe-fp8; then
  timeout 240 "$G/tests/test_backend_cuda" --gtest_filter='CudaMoeExperts.*' > "$L/moe-unit.log" 2>&1
  echo "moe-fp8 test_backend_cuda rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/moe-unit.log" | tr '\n' ' ')"
  grep -hE '^fp8 experts|^\[  FAILED' "$L/moe-unit.log" | head -12
  TANDEM_FP8_MOE_TC=1 timeout 240 "$G/tests/test_golden" --gtest_filter='CudaFp8Gate.*' > "$L/moe-gate.log" 2>&1
  echo "moe-fp8 CudaFp8Gate.* with TANDEM_FP8_MOE_TC=1 rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$L/moe-gate.log" | tr '\n' ' ')"
  grep -E 'mean KL|^\[  FAILED' "$L/moe-gate.log" | head -30
  if wait "$moe_writer"; then
    o64=(--num 128 --batch 64 --input 128 --output 128)
    for m in "mixtral:$MX" "qwen3moe:$QM"; do
      [[ "$moe_models" == *" ${m%%:*} "* ]] || continue
      for v in ${MOE_VARIANTS:-bf16 fp8-tc0 fp8-tc1}; do  # 16-bit experts, then FP8 on each kernel
        q=(); [ "$v" = bf16 ] || q=(--quantization fp8)
        tc=0; [ "$v" = fp8-tc1 ] && tc=1
        TANDEM_FP8_MOE_TC=$tc ob "moe-${m%%:*}-$v-b1" 40 -- --model "${m#*:}" "${b1[@]}" ${q[@]+"${q[@]}"}
        TANDEM_FP8_MOE_TC=$tc ob "moe-${m%%:*}-$v-64" 50 -- --model "${m#*:}" "${o64[@]}" ${q[@]+"${q[@]}"}
      done
    done
  else
    echo "random MoE models failed: $(tail -3 "$L/random-moe.log")"
  fi
fi

if has embed && fits 90 "embeddings"; then
  ob prompt-512 40 -- --num 256 --batch 64 --input 512 --output 1
  grep -E 'prompt tok/s' "$L/prompt-512.log" | tail -1
  "$G/tandem" serve --model "$M8" --port 8323 > "$L/serve-embed.log" 2>&1 &
  server=$!
  for _ in $(seq 90); do curl -sf localhost:8323/health > /dev/null && break; sleep 1; done
  timeout 60 "$G/tandem" bench --url http://127.0.0.1:8323 --endpoint embeddings --input-len 512 \
    --embed-batch 8 --concurrency 4,16 > "$L/bench-embed.log" 2>&1
  cat "$L/bench-embed.log" | tail -8
  kill "$server"; wait "$server" 2> /dev/null
fi
echo "== ${card:-unknown card}; elapsed ${SECONDS}s"
