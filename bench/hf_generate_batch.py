#!/usr/bin/env python3
"""The peer in the same run: Hugging Face transformers' continuous batching
(`generate_batch`) on the same model folder and the same random prompts as
`tandem bench` / engine_bench offline runs. Prints one line of figures.

  python3 bench/hf_generate_batch.py --model /tmp/llama8b --num 256 --input-len 128 --output-len 128
"""
import argparse
import random
import time

import torch
from transformers import AutoModelForCausalLM
from transformers.generation import GenerationConfig


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--num", type=int, default=256, help="requests")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--max-batch-tokens", type=int, default=2048)
    p.add_argument("--attn", default="paged|sdpa")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    model = AutoModelForCausalLM.from_pretrained(
        a.model, dtype=torch.bfloat16, device_map="cuda", attn_implementation=a.attn)
    rng = random.Random(a.seed)
    vocab = model.config.vocab_size
    prompts = [[rng.randrange(100, min(vocab, 30000)) for _ in range(a.input_len)] for _ in range(a.num)]
    config = GenerationConfig(max_new_tokens=a.output_len, min_new_tokens=a.output_len,
                              do_sample=False, eos_token_id=None, pad_token_id=0,
                              max_batch_tokens=a.max_batch_tokens)
    # Warm-up on a few prompts (graph capture, kernels), then the timed run.
    model.generate_batch(inputs=prompts[:4], generation_config=config, progress_bar=False)
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate_batch(inputs=prompts, generation_config=config, progress_bar=False)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = sum(len(r.generated_tokens) for r in out.values())
    print(f"hf generate_batch: {a.num} requests x {a.input_len}/{a.output_len}: "
          f"{tokens} output tokens in {seconds:.2f} s = {tokens / seconds:.0f} output tok/s")


if __name__ == "__main__":
    main()
